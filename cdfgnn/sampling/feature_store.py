"""A worker's shard of the feature matrix, and pulls of remote rows from their owners.

Every worker owns the feature rows of its partition (edge-cut); the rows of the other
parts are *remote*, held by their owners as in DistDGL's sharded KV store.
:meth:`FeatureStore.pull` is a request (int64 ids) and a response (feature rows): two
``all_to_all`` rounds, counted in bytes, messages and rows per tag by the
communicator, and per mode and peer by this worker's :class:`PullCounters`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from cdfgnn.comm.timers import THREAD_CPU, Clock
from cdfgnn.data.graph import Graph
from cdfgnn.sampling.schedule import Batch

FETCH = "fetch"     # on-demand / prefetch pulls of batch inputs
FILL = "fill"       # bulk cache fills


@dataclass
class PullCounters:
    """Traffic of this worker's pulls, by mode: bytes sent/received per peer, rows, msgs."""

    p: int
    bytes: dict[str, np.ndarray] = field(default_factory=dict)
    msgs: dict[str, np.ndarray] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0

    def add(self, mode: str, peer: int, nbytes: int, msgs: int, rows: int = 0) -> None:
        if mode not in self.bytes:
            self.bytes[mode], self.msgs[mode] = np.zeros(self.p), np.zeros(self.p)
            self.rows[mode] = 0
        self.bytes[mode][peer] += nbytes
        self.msgs[mode][peer] += msgs
        self.rows[mode] += rows

    def take(self) -> "PullCounters":
        """The counts so far; the counters restart at zero."""
        out = PullCounters(self.p, self.bytes, self.msgs, self.rows, self.cpu_s)
        self.bytes, self.msgs, self.rows, self.cpu_s = {}, {}, {}, 0.0
        return out

    def as_dict(self) -> dict:
        """``{"pull": {mode: {"bytes": per peer, "msgs": per peer, "rows": n}}}`` (JSON)."""
        return {"pull": {m: {"bytes": self.bytes[m].tolist(), "msgs": self.msgs[m].tolist(),
                             "rows": int(self.rows[m])} for m in self.bytes}}


class FeatureStore:
    """This worker's shard of the feature matrix and pulls of remote rows from owners.

    ``pull`` is a collective: every worker calls it the same number of times (with
    an empty id list when it needs nothing). Modes: ``sync`` (critical path),
    ``background`` (prefetch of a later batch), ``fill`` (bulk cache fill). The CPU
    time of a pull (``counters.cpu_s``, counted as communication) is read on
    ``compute_clock``, the run's compute clock.
    """

    def __init__(self, comm, graph: Graph, owner: np.ndarray, compute_clock: Clock = THREAD_CPU):
        self.comm, self.rank, self.p = comm, comm.rank, comm.world_size
        self.compute_clock = compute_clock
        self.owner = owner
        self.owned = np.flatnonzero(owner == self.rank)
        self.x = torch.from_numpy(np.ascontiguousarray(graph.x[self.owned]))
        self.dim = int(graph.x.shape[1])
        self.counters = PullCounters(self.p)

    def remote_mask(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` other workers own."""
        return self.owner[ids] != self.rank

    def local_rows(self, ids: np.ndarray) -> torch.Tensor:
        return self.x[torch.from_numpy(np.searchsorted(self.owned, ids))]

    def pull(self, ids: np.ndarray, mode: str = "sync") -> torch.Tensor:
        """Rows of remote vertices ``ids`` (owned elsewhere), in the order of ``ids``."""
        span = self.compute_clock.start()
        tag = FILL if mode == "fill" else FETCH
        own = self.owner[ids]
        order = np.argsort(own, kind="stable")
        bounds = np.searchsorted(own[order], np.arange(self.p + 1))
        req = [torch.from_numpy(ids[order[bounds[q]: bounds[q + 1]]]) if q != self.rank
               and bounds[q + 1] > bounds[q] else None for q in range(self.p)]
        for q, t in enumerate(req):
            if t is not None:
                self.counters.add(mode, q, t.numel() * t.element_size(), 1)
        asked = self.comm.all_to_all(req, tag=f"{tag}/req")
        answer = [None if t is None or q == self.rank else self.local_rows(t.numpy())
                  for q, t in enumerate(asked)]
        got = self.comm.all_to_all(answer, tag=f"{tag}/resp")
        out = torch.empty(ids.size, self.dim, dtype=self.x.dtype)
        for q in range(self.p):
            if req[q] is not None:
                rows = got[q]
                out[torch.from_numpy(order[bounds[q]: bounds[q + 1]])] = rows
                self.counters.add(mode, q, rows.numel() * rows.element_size(), 1, rows.shape[0])
        self.counters.cpu_s += span.stop().seconds()
        return out

    def gather(self, batch: Batch, remote_rows: torch.Tensor | None = None,
               remote_mask: np.ndarray | None = None) -> torch.Tensor:
        """Input features of ``batch``: local rows from the shard, remote ones given."""
        ids = batch.inputs
        mask = self.remote_mask(ids) if remote_mask is None else remote_mask
        x = torch.empty(ids.size, self.dim, dtype=self.x.dtype)
        local = ~mask
        x[torch.from_numpy(np.flatnonzero(local))] = self.local_rows(ids[local])
        if remote_rows is not None:
            x[torch.from_numpy(np.flatnonzero(mask))] = remote_rows
        return x
