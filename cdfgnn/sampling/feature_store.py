"""A worker's shard of the feature matrix, and pulls of remote rows from their owners.

Every worker owns the feature rows of its partition (edge-cut); the rows of the other
parts are *remote*, held by their owners as in DistDGL's sharded KV store.
:meth:`FeatureStore.pull` is a request (int64 ids) and a response (feature rows): two
``all_to_all`` rounds, counted in bytes, messages and rows per tag by the
communicator, and per mode and peer by this worker's :class:`PullCounters`.

Device: the shard, every pulled row and every gathered input matrix live on the run's
device (``device``; cuda on a GPU run). The id lists and index arithmetic stay numpy on
the host (the schedule is host data); the index tensors that address device rows are
copied host -> device, and ids a peer sent that arrived on the device (nccl) are copied
back to the host. Feature rows never pass through the host. Those copies are counted in
bytes (``copied``; :meth:`take_copied`), as JACA counts its shared tier's.

Operation ledger (:mod:`cdfgnn.cost.ledger`): a pull's own kernels (the owner's gather
of the rows it answers, the scatter of the received rows) are counted in phase
``pull/<mode>``, its two ``all_to_all`` rounds are not (the communicator pauses
counting: the network model prices them), and every index tensor :meth:`index` builds
is recorded as a host -> device ``copy`` of its bytes on every device, so a CPU run
counts what a GPU run copies.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from cdfgnn.comm.timers import THREAD_CPU, Clock
from cdfgnn.cost import ledger as oplog
from cdfgnn.data.graph import Graph
from cdfgnn.sampling.schedule import Batch

#: the aten calls of ``x[i]`` and ``x[i] = v`` (``take``, ``put``)
_INDEX, _INDEX_PUT = torch.ops.aten.index.Tensor, torch.ops.aten.index_put_.default
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

    def __init__(self, comm, graph: Graph, owner: np.ndarray, compute_clock: Clock = THREAD_CPU,
                 device: torch.device | str = "cpu"):
        self.comm, self.rank, self.p = comm, comm.rank, comm.world_size
        self.compute_clock = compute_clock
        self.device = torch.device(device)
        self.owner = owner
        self.owned = np.flatnonzero(owner == self.rank)
        self.x = torch.from_numpy(np.ascontiguousarray(graph.x[self.owned])).to(self.device)
        self.dim = int(graph.x.shape[1])
        self.counters = PullCounters(self.p)
        #: bytes this store copied host -> device (index tensors) and device -> host (ids)
        self.copied = {"h2d": 0, "d2h": 0}

    def index(self, positions: np.ndarray) -> torch.Tensor:
        """Host positions (int64) as an index tensor on the store's device (counted)."""
        t = oplog.free(torch.from_numpy, positions)
        # a GPU run copies it host -> device: counted on every device (ledger)
        oplog.record("copy", calls=1, bytes=t.numel() * t.element_size())
        if self.device.type != "cpu":
            self.copied["h2d"] += t.numel() * t.element_size()
            t = t.to(self.device)
        return t

    def empty_rows(self, n: int) -> torch.Tensor:
        """An uninitialised ``n x dim`` block of feature rows on the store's device."""
        return oplog.free(torch.empty, n, self.dim, dtype=self.x.dtype, device=self.device)

    def take(self, rows: torch.Tensor, positions: np.ndarray) -> torch.Tensor:
        """``rows[self.index(positions)]``: a gather, counted as the counting mode counts
        that expression (the index's host -> device ``copy``; a ``gather`` of twice the
        result's bytes, as ``index.Tensor`` with its index in a list) but without the
        mode's Python call per op (tests/test_ledger_reuse.py compares)."""
        if not (oplog.active() and self.device.type == "cpu"):
            return oplog.op(_INDEX, rows, [self.index(positions)])
        with oplog.hide():     # active: the guard itself (hot path)
            idx = torch.from_numpy(positions)
            out = rows[idx]
        oplog.record_rows(("copy", 1, idx.nbytes), ("gather", 1, 2 * out.nbytes))
        return out

    def put(self, out: torch.Tensor, positions: np.ndarray, rows: torch.Tensor) -> None:
        """``out[self.index(positions)] = rows``: a scatter, counted as that expression
        (the index's ``copy``; a ``gather`` of three times the rows' bytes, as
        ``index_put_`` with float rows and its index in a list)."""
        if not (oplog.active() and self.device.type == "cpu"
                and rows.dtype.is_floating_point and out.dtype.is_floating_point):
            oplog.op(_INDEX_PUT, out, [self.index(positions)], rows)
            return
        with oplog.hide():     # active: the guard itself (hot path)
            idx = torch.from_numpy(positions)
            out[idx] = rows
        oplog.record_rows(("copy", 1, idx.nbytes), ("gather", 1, 3 * rows.nbytes))

    def take_copied(self) -> dict[str, int]:
        """``{"h2d_bytes", "d2h_bytes"}`` copied since the last call (epoch-row columns of
        a device run; a CPU run copies nothing and reports nothing: ``{}``)."""
        if self.device.type == "cpu":
            return {}
        out = {f"{k}_bytes": v for k, v in self.copied.items()}
        self.copied = {"h2d": 0, "d2h": 0}
        return out

    def _host_ids(self, ids: torch.Tensor) -> np.ndarray:
        """Ids a peer asked for, on the host (nccl delivers them on the device: counted)."""
        if ids.device.type != "cpu":
            self.copied["d2h"] += ids.numel() * ids.element_size()
            ids = ids.cpu()
        return oplog.free(ids.numpy)

    def _on_device(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows a peer sent, on the store's device (already there on a device run: nccl
        receives on the device, thread ranks share it; rows from the host are counted)."""
        if rows.device.type == "cpu" and self.device.type != "cpu":
            self.copied["h2d"] += rows.numel() * rows.element_size()
        return rows.to(self.device)      # the same tensor where it already is

    def remote_mask(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` other workers own."""
        return self.owner[ids] != self.rank

    def local_rows(self, ids: np.ndarray) -> torch.Tensor:
        return self.take(self.x, np.searchsorted(self.owned, ids))

    def pull(self, ids: np.ndarray, mode: str = "sync") -> torch.Tensor:
        """Rows of remote vertices ``ids`` (owned elsewhere), in the order of ``ids``."""
        span = self.compute_clock.start()
        with oplog.phase(f"pull/{mode}"):      # its kernels: the pull's, not the step's
            out = self._pull(ids, mode)
        self.counters.cpu_s += span.stop().seconds()
        return out

    def _pull(self, ids: np.ndarray, mode: str) -> torch.Tensor:
        tag = FILL if mode == "fill" else FETCH
        own = self.owner[ids]
        order = np.argsort(own, kind="stable")
        bounds = np.searchsorted(own[order], np.arange(self.p + 1))
        req = [oplog.free(torch.from_numpy, ids[order[bounds[q]: bounds[q + 1]]])
               if q != self.rank and bounds[q + 1] > bounds[q] else None for q in range(self.p)]
        for q, t in enumerate(req):
            if t is not None:
                self.counters.add(mode, q, t.numel() * t.element_size(), 1)
        asked = self.comm.all_to_all(req, tag=f"{tag}/req")
        answer = [None if t is None or q == self.rank else self.local_rows(self._host_ids(t))
                  for q, t in enumerate(asked)]
        got = self.comm.all_to_all(answer, tag=f"{tag}/resp")
        out = self.empty_rows(ids.size)
        for q in range(self.p):
            if req[q] is not None:
                rows = got[q]
                self.put(out, order[bounds[q]: bounds[q + 1]], self._on_device(rows))
                self.counters.add(mode, q, rows.numel() * rows.element_size(), 1, rows.shape[0])
        return out

    def gather(self, batch: Batch, remote_rows: torch.Tensor | None = None,
               remote_mask: np.ndarray | None = None) -> torch.Tensor:
        """Input features of ``batch``: local rows from the shard, remote ones given."""
        ids = batch.inputs
        mask = self.remote_mask(ids) if remote_mask is None else remote_mask
        x = self.empty_rows(ids.size)
        local = ~mask
        self.put(x, np.flatnonzero(local), self.local_rows(ids[local]))
        if remote_rows is not None:
            self.put(x, np.flatnonzero(mask), remote_rows)
        return x
