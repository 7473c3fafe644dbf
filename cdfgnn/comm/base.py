"""The Communicator interface and its traffic accounting.

Every backend (``thread``: virtual ranks as threads of one process; ``process``:
torch.distributed, one OS process per rank) implements the four collectives
below on top of ``_all_to_all_impl`` etc.; the public methods add accounting so
that bytes and messages per (src, dst) and per link class are identical across
backends. Link class: ``intra`` when both ranks are on the same host of the
:class:`~cdfgnn.partition.base.Topology`, ``inter`` otherwise.

Accounting rules (one definition for every method):
  * all_to_all: one message per non-empty tensor sent to another rank; its bytes
    are ``numel * element_size``. Self-sends are free.
  * all_reduce: modelled as a ring all-reduce: rank r sends 2(P-1) messages of
    ``nbytes / P`` each to rank (r+1) % P.
  * broadcast: the root sends one message of ``nbytes`` to every other rank.
Counters are grouped by a caller-supplied ``tag`` (e.g. ``"halo/fwd/1"``,
``"grad_allreduce"``) so records can split vertex traffic from parameter traffic.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from cdfgnn.comm.timers import Clock, Tally, clocks_for
from cdfgnn.cost import ledger
from cdfgnn.partition.base import Topology


@dataclass
class CommStats:
    """Traffic sent by one rank: matrices over destination rank, per tag."""

    world_size: int
    bytes_to: dict[str, np.ndarray] = field(default_factory=dict)
    msgs_to: dict[str, np.ndarray] = field(default_factory=dict)
    rows_to: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, tag: str, dst: int, nbytes: int, msgs: int = 1, rows: int = 0) -> None:
        if tag not in self.bytes_to:
            for d in (self.bytes_to, self.msgs_to, self.rows_to):
                d[tag] = np.zeros(self.world_size, dtype=np.int64)
        self.bytes_to[tag][dst] += nbytes
        self.msgs_to[tag][dst] += msgs
        self.rows_to[tag][dst] += rows

    def reset(self) -> None:
        self.bytes_to.clear()
        self.msgs_to.clear()
        self.rows_to.clear()

    def total_bytes_to(self, prefix: str = "") -> np.ndarray:
        out = np.zeros(self.world_size, dtype=np.int64)
        for tag, arr in self.bytes_to.items():
            if tag.startswith(prefix):
                out += arr
        return out

    def total_msgs_to(self, prefix: str = "") -> np.ndarray:
        out = np.zeros(self.world_size, dtype=np.int64)
        for tag, arr in self.msgs_to.items():
            if tag.startswith(prefix):
                out += arr
        return out

    def snapshot(self) -> dict[str, dict[str, list[int]]]:
        return {tag: {"bytes": self.bytes_to[tag].tolist(), "msgs": self.msgs_to[tag].tolist(),
                      "rows": self.rows_to[tag].tolist()} for tag in sorted(self.bytes_to)}


class Communicator(ABC):
    """Collectives for one rank. Subclasses implement the ``_impl`` methods only."""

    backend: str = "abstract"

    def __init__(self, rank: int, world_size: int, topology: Topology):
        if topology.num_parts != world_size:
            raise ValueError(f"topology {topology.label} has {topology.num_parts} devices, "
                             f"world size is {world_size}")
        self.rank = rank
        self.world_size = world_size
        self.topology = topology
        self.stats = CommStats(world_size)
        # wall seconds spent inside collectives, per tag (the ``seconds`` property);
        # spans of the device's wall clock (cdfgnn.comm.timers), resolved when read
        self._seconds = Tally()
        # CPU seconds of communication-side work done outside collectives (encoding,
        # cache checks), per tag: counted as communication, not compute (CDFGNN sec. 8)
        self._overhead_cpu = Tally()

    @property
    def seconds(self) -> defaultdict[str, float]:
        """Wall seconds inside collectives per tag (on cuda: synchronises pending events)."""
        return self._seconds.totals()

    @property
    def overhead_cpu(self) -> defaultdict[str, float]:
        """Compute-clock seconds of communication-side work per tag."""
        return self._overhead_cpu.totals()

    @property
    def clocks(self) -> tuple[Clock, Clock]:
        """(wall, compute) clocks of this rank's device (cdfgnn.comm.timers)."""
        dev = getattr(self, "device", None)   # set by the backend after this __init__
        cached = self.__dict__.get("_clocks")
        if cached is None or cached[0] != dev:
            cached = self._clocks = (dev, clocks_for(dev))
        return cached[1]

    # ------------------------------------------------------------ public API
    def all_to_all(self, tensors: list[torch.Tensor | None], tag: str = "all_to_all",
                   rows: list[int] | None = None) -> list[torch.Tensor | None]:
        """Send ``tensors[j]`` to rank j; return the tensor each rank j sent here.

        ``None`` (or an empty tensor) means nothing is sent to that peer; the
        matching entry received is then ``None``. ``tensors[self.rank]`` is
        returned to itself without communication. ``rows[j]`` overrides the
        accounted row count of message j (an encoded buffer is one flat byte
        tensor carrying several vertex rows).
        """
        if len(tensors) != self.world_size:
            raise ValueError(f"all_to_all needs {self.world_size} entries, got {len(tensors)}")
        for dst, t in enumerate(tensors):
            if dst != self.rank and t is not None and t.numel():
                n = rows[dst] if rows is not None else (int(t.shape[0]) if t.dim() else 1)
                self.stats.add(tag, dst, t.numel() * t.element_size(), 1, n)
        return self._timed(tag, self._all_to_all_impl, tensors)

    def all_to_all_unaccounted(self, tensors: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
        """``all_to_all`` that is neither counted nor timed: diagnostics beside a run
        (the CDFGNN cache's exact shadow sync), never the run's own traffic."""
        if len(tensors) != self.world_size:
            raise ValueError(f"all_to_all needs {self.world_size} entries, got {len(tensors)}")
        with ledger.paused():
            return self._all_to_all_impl(tensors)

    def all_reduce(self, tensor: torch.Tensor, tag: str = "all_reduce") -> torch.Tensor:
        """Sum ``tensor`` over ranks (in place) and return it; every rank gets the same bits."""
        p = self.world_size
        if p > 1:
            self.stats.add(tag, (self.rank + 1) % p,
                           2 * (p - 1) * tensor.numel() * tensor.element_size() // p, 2 * (p - 1))
        return self._timed(tag, self._all_reduce_impl, tensor)

    def broadcast(self, tensor: torch.Tensor, src: int, tag: str = "broadcast") -> torch.Tensor:
        if self.rank == src:
            for dst in range(self.world_size):
                if dst != src:
                    self.stats.add(tag, dst, tensor.numel() * tensor.element_size(), 1)
        return self._timed(tag, self._broadcast_impl, tensor, src)

    def barrier(self) -> None:
        with ledger.paused():
            self._barrier_impl()

    def all_gather_object(self, obj):
        """Gather a picklable object from every rank (bookkeeping only: not accounted)."""
        with ledger.paused():
            return self._all_gather_object_impl(obj)

    @contextmanager
    def overhead(self, tag: str):
        """Time communication-side work (codec, cache check) done on this rank's thread."""
        wall, compute = self.clocks
        w, c = wall.start(), compute.start()
        try:
            with ledger.phase(ledger.overhead_phase(tag)):   # counted as device kernels
                yield
        finally:
            self._seconds.add(tag, w.stop())
            self._overhead_cpu.add(tag, c.stop())

    def reset_epoch(self) -> None:
        """Clear the per-epoch counters (traffic, collective and overhead seconds)."""
        self.stats.reset()
        self._seconds.clear()
        self._overhead_cpu.clear()

    def _timed(self, tag, fn, *args):
        span = self.clocks[0].start()
        try:
            with ledger.paused():   # the network model prices collectives, not the ledger
                return fn(*args)
        finally:
            self._seconds.add(tag, span.stop())

    # ----------------------------------------------------------- backend API
    @abstractmethod
    def _all_to_all_impl(self, tensors): ...

    @abstractmethod
    def _all_reduce_impl(self, tensor): ...

    @abstractmethod
    def _broadcast_impl(self, tensor, src): ...

    @abstractmethod
    def _barrier_impl(self): ...

    @abstractmethod
    def _all_gather_object_impl(self, obj): ...
