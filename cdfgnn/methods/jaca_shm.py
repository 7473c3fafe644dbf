"""JACA's shared (per-host) tier on the process backend: one OS shared-memory segment.

One segment per host, mapped by every rank of the host: on Linux an anonymous memory
file of the host's first rank (``memfd_create``) that the others open through
``/proc/<pid>/fd/<fd>``; elsewhere a file in ``/dev/shm`` (``cdfgnn-jaca-<run
token>-h<host>``; the token is rank 0's uuid, gathered by every rank in ``Jaca.setup``).
host. Per cached layer it holds, as numpy/torch views over the mapping (no pickling,
no copy per read beyond the row gather into the output):

* ``capacity`` fixed row slots (float32, the layer's width) and their keys (global
  vertex id, -1: free),
* per position of the host's sorted halo union: slot (-1: not resident), resident
  flag, epoch stamp and the policy's bookkeeping (last use, request count, insertion
  sequence), and two counters (tick, next sequence number),

plus the random policy's generator state (PCG64, shared by the host's layers as in
the thread tier). The Pool logic is the thread version's (``ShmPool`` only stores its
arrays in the segment and rows in slots), so both backends keep the same entries.

Write discipline, as the thread tier's: during an epoch the ranks only read the
segment and stage their puts/touches locally; at the next epoch's start they apply
them **in rank order**, one host rank per turn between barriers (every host's
``t``-th rank in turn ``t``), so no two ranks ever write a segment at once and the
result equals the thread tier's (rank, order) merge.

Lifetime: the host's first rank creates and initialises the segment, the others map
it after an exchange (the creator's pid and descriptor), and after a barrier the
creator closes its descriptor (and unlinks the ``/dev/shm`` file), so the memory lives
exactly as long as the mappings, whatever ends the processes later. An anonymous file
has no name in any file system, so nothing can be left behind even by a rank killed
with SIGKILL before that barrier; a ``/dev/shm`` file is removed on a failure before the
unlink and by a creator ended abruptly in between (a lost host, SIGTERM under
torchrun: :mod:`cdfgnn.exits`), not after SIGKILL.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from contextlib import nullcontext
from typing import Callable

import numpy as np
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.exits import undo_on_abrupt_exit
from cdfgnn.methods.jaca_pool import Pool, apply_staged

_ALIGN = 64


def shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def anonymous() -> bool:
    """Can segments be anonymous memory files that peers open through ``/proc``?"""
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


class _Layout:
    """Byte offsets of named arrays in one segment."""

    def __init__(self):
        self.fields: list[tuple[str, np.dtype, tuple]] = []
        self.offsets: dict[str, int] = {}
        self.size = 0

    def add(self, name: str, dtype, shape: tuple) -> None:
        dtype = np.dtype(dtype)
        self.offsets[name] = self.size
        self.fields.append((name, dtype, shape))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.size += -(-nbytes // _ALIGN) * _ALIGN

    def views(self, buf) -> dict[str, np.ndarray]:
        return {name: np.frombuffer(buf, dtype=dt, count=int(np.prod(shape, dtype=np.int64)),
                                    offset=self.offsets[name]).reshape(shape)
                for name, dt, shape in self.fields}


def _layout(n: int, capacity: int, widths: dict) -> _Layout:
    lay = _Layout()
    lay.add("rng", np.uint64, (6,))
    for l, w in widths.items():
        lay.add(f"ctr{l}", np.int64, (2,))               # tick, next_seq
        lay.add(f"resident{l}", np.bool_, (n,))
        for f in ("stamp", "last", "freq", "seq", "slot"):
            lay.add(f"{f}{l}", np.int64, (n,))
        lay.add(f"keys{l}", np.int64, (capacity,))
        lay.add(f"rows{l}", np.float32, (capacity, int(w)))
    return lay


class ShmPool(Pool):
    """A Pool whose arrays live in a shared segment and whose rows sit in slots."""

    def __init__(self, v: dict, layer: int, gids: np.ndarray, capacity: int, policy: str,
                 priority: np.ndarray, rng: np.random.Generator):
        self.n, self.capacity, self.policy = gids.size, int(capacity), policy
        self.priority, self.rng, self.gids = priority, rng, gids
        self.resident, self.stamp = v[f"resident{layer}"], v[f"stamp{layer}"]
        self.last, self.freq, self.seq = v[f"last{layer}"], v[f"freq{layer}"], v[f"seq{layer}"]
        self.slot, self.keys, self._ctr = v[f"slot{layer}"], v[f"keys{layer}"], v[f"ctr{layer}"]
        self.rows = torch.from_numpy(v[f"rows{layer}"])

    tick = property(lambda self: int(self._ctr[0]),
                    lambda self, x: self._ctr.__setitem__(0, x))
    next_seq = property(lambda self: int(self._ctr[1]),
                        lambda self, x: self._ctr.__setitem__(1, x))

    def get(self, pos: np.ndarray) -> torch.Tensor:
        return self.rows[torch.from_numpy(self.slot[pos])]    # host rows (the segment)

    def _write(self, pos: np.ndarray, rows: torch.Tensor) -> None:
        slot = self.slot
        gone = np.flatnonzero((slot >= 0) & ~self.resident)     # evicted by this put
        if gone.size:
            self.keys[slot[gone]] = -1
            slot[gone] = -1
        new = pos[slot[pos] < 0]
        if new.size:
            free = np.flatnonzero(self.keys < 0)[: new.size]
            if free.size < new.size:
                raise CdfgnnError(f"jaca shared tier: {new.size} rows for {free.size} free slots")
            slot[new] = free
            self.keys[free] = self.gids[new]
        if rows.shape[1] != self.rows.shape[1]:
            raise CdfgnnError(f"jaca shared tier: rows of width {rows.shape[1]} for slots of "
                              f"width {self.rows.shape[1]}")
        self.rows[torch.from_numpy(slot[pos])] = rows.to(self.rows.dtype)


class ShmTier:
    """The shared tier of one host on the process backend (see the module docstring)."""

    def __init__(self, comm, token: str, host: int, creator: bool, gids: np.ndarray,
                 capacity: int, policy: str, priority: np.ndarray, widths: dict, seed: int):
        lay = _layout(gids.size, capacity, widths)
        self.name = f"cdfgnn-jaca-{token}-h{host}"
        # an anonymous file (Linux) has no path; a /dev/shm file is unlinked once mapped
        self.path = None if anonymous() else os.path.join(shm_dir(), self.name)
        self.staged: list[tuple] = []
        self.mm = None
        # the creator unlinks the file also when it ends abruptly in between (a lost host)
        with undo_on_abrupt_exit(self._unlink) if creator else nullcontext():
            try:
                self._map(comm, lay, host, creator, widths, seed)
            finally:
                if creator:
                    self._unlink()
        v = lay.views(self.mm)
        self._rng_words = v["rng"]
        self.rng = np.random.default_rng(0)    # state loaded from the segment per turn
        self.pools = {l: ShmPool(v, l, gids, capacity, policy, priority, self.rng)
                      for l in widths}
        self.nbytes = lay.size

    def _map(self, comm, lay: _Layout, host: int, creator: bool, widths: dict,
             seed: int) -> None:
        """The creator makes and initialises the segment; every rank of the host maps it."""
        size = max(lay.size, 1)
        fd = None
        try:
            if creator:
                fd = (os.memfd_create(self.name, os.MFD_CLOEXEC) if self.path is None else
                      os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
                os.ftruncate(fd, size)
                self.mm = mmap.mmap(fd, size)
                v = lay.views(self.mm)
                for l in widths:
                    v[f"stamp{l}"][:] = -1
                    v[f"slot{l}"][:] = -1
                    v[f"keys{l}"][:] = -1
                self._save_rng(v["rng"], np.random.default_rng(seed))
            # the segment exists and is initialised: where the host's creator holds it
            where = comm.all_gather_object((os.getpid(), fd) if creator else None)
            if not creator:
                pid, their_fd = where[host * comm.topology.devices_per_host]
                mine = os.open(self.path or f"/proc/{pid}/fd/{their_fd}", os.O_RDWR)
                try:
                    self.mm = mmap.mmap(mine, size)
                finally:
                    os.close(mine)
            comm.barrier()                      # every rank of the host has mapped it
        finally:
            if fd is not None:
                os.close(fd)

    def _unlink(self) -> None:
        if self.path is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    @staticmethod
    def _save_rng(words: np.ndarray, rng: np.random.Generator) -> None:
        st = rng.bit_generator.state
        m = (1 << 64) - 1
        s, inc = st["state"]["state"], st["state"]["inc"]
        words[:] = [s & m, s >> 64, inc & m, inc >> 64, st["has_uint32"], st["uinteger"]]

    def _load_rng(self) -> None:
        w = [int(x) for x in self._rng_words]
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": w[0] | (w[1] << 64),
                                                "inc": w[2] | (w[3] << 64)},
            "has_uint32": w[4], "uinteger": w[5]}

    def stage(self, rank: int, layer: int, kind: str, pos, a, b=None) -> None:
        self.staged.append((layer, kind, pos, a, b))

    def apply_staged(self, rank: int) -> None:
        """Apply ``rank``'s staged writes, in order (called in ``rank``'s turn; this
        process's tier holds only its own rank's, the signature is HostTier's)."""
        if not self.staged:
            return
        self._load_rng()
        apply_staged(self.pools, self.staged)
        self.staged.clear()
        self._save_rng(self._rng_words, self.rng)

    def close(self) -> None:
        self.pools = {}
        self._rng_words = None
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:                 # a caller still holds a view: GC unmaps it
                pass
            self.mm = None


def merge_turns(comm, apply: Callable[[], None], turns: int, local_index: int) -> None:
    """Every rank applies its staged writes (``apply``) in its turn; the host ranks go in
    rank order (both backends: the thread backend's HostTier and this ShmTier)."""
    comm.barrier()                              # every rank is done reading the last epoch
    for t in range(turns):
        if t == local_index:
            apply()
        comm.barrier()
