"""JACA's row pools: a capacity-limited cache of rows over a fixed universe of positions
(the local tier on a worker's device, the shared tier on its host) and the one way staged
writes are applied to them.

A module of its own so that both shared-tier implementations, the thread backend's
(:class:`cdfgnn.methods.jaca.HostTier`) and the process backend's shared-memory one
(:mod:`cdfgnn.methods.jaca_shm`), build on it without importing each other's modules.
"""
from __future__ import annotations

import numpy as np
import torch


def apply_staged(pools, entries) -> None:
    """Apply staged cache writes ``(layer, kind, pos, a, b)`` in order: ``touch`` records
    an access, ``put`` stores rows (both tiers, both backends merge through this)."""
    for layer, kind, pos, a, b in entries:
        if kind == "touch":
            pools[layer].touch(pos, a)
        else:
            pools[layer].put(pos, a, b)


class Pool:
    """A capacity-limited cache of rows over a fixed universe of positions."""

    #: bumped whenever resident rows or residency change (this process's writes only)
    version = 0
    #: a full pool evicts to admit a better candidate (False: ``variant=public-code``,
    #: candidates only fill free slots, best first, and an entry is never evicted)
    evict = True
    #: where the rows live: the run's device for a worker's local tier (the paper's GPU
    #: cache), the host for the shared tier
    home = torch.device("cpu")
    #: the shared tier of a cuda run: page-locked host memory (CaPGNN's pinned CPU cache)
    pinned = False

    def __init__(self, n: int, capacity: int, policy: str, priority: np.ndarray,
                 rng: np.random.Generator):
        self.n, self.capacity, self.policy = n, int(capacity), policy
        self.priority = priority
        self.rng = rng
        self.resident = np.zeros(n, dtype=bool)
        self.stamp = np.full(n, -1, dtype=np.int64)
        self.last = np.zeros(n, dtype=np.int64)
        self.freq = np.zeros(n, dtype=np.int64)
        self.seq = np.zeros(n, dtype=np.int64)
        self.tick = 0
        self.next_seq = 0
        self.rows: torch.Tensor | None = None

    def fresh(self, pos: np.ndarray, epoch: int, staleness: int, volatile: bool) -> np.ndarray:
        hit = self.resident[pos]
        if volatile and staleness > 0:
            hit &= (epoch - self.stamp[pos]) < staleness
        return hit

    @property
    def tracks_use(self) -> bool:
        return self.policy in ("lru", "lfu")

    def touch(self, pos: np.ndarray, hit: np.ndarray) -> None:
        """Count requests (LFU) and uses (LRU)."""
        if not self.tracks_use:
            return
        self.tick += 1
        self.freq[pos] += 1
        self.last[pos[hit]] = self.tick

    def get(self, pos: np.ndarray) -> torch.Tensor:
        return self.rows[device_index(pos, self.rows)]

    def put(self, pos: np.ndarray, rows: torch.Tensor, stamps: np.ndarray) -> None:
        if self.capacity <= 0 or pos.size == 0:
            return
        res = self.resident[pos]
        if res.any():
            upd = pos[res]
            self._write(upd, rows[device_index(res, rows)])
            self.stamp[upd] = stamps[res]
        new = ~res
        if not new.any():
            return
        npos, nrows, nst = pos[new], rows[device_index(new, rows)], stamps[new]
        self.tick += 1
        free = self.capacity - int(self.resident.sum())
        if npos.size > free and not self.evict:
            admit = np.zeros(npos.size, dtype=bool)
            admit[np.argsort(-self._scores(npos[:0], npos)[1], kind="stable")[:free]] = True
            npos, nrows, nst = npos[admit], nrows[device_index(admit, nrows)], nst[admit]
        elif npos.size > free:
            cur = np.flatnonzero(self.resident)
            score = np.concatenate(self._scores(cur, npos))
            keep = np.zeros(cur.size + npos.size, dtype=bool)
            keep[np.argsort(-score, kind="stable")[: self.capacity]] = True
            self.resident[cur[~keep[: cur.size]]] = False
            self.version += 1
            admit = keep[cur.size:]
            npos, nrows, nst = npos[admit], nrows[device_index(admit, nrows)], nst[admit]
        self.resident[npos] = True
        self._write(npos, nrows)
        self.stamp[npos] = nst
        self.seq[npos] = self.next_seq + np.arange(npos.size)
        self.next_seq += npos.size
        self.last[npos] = self.tick

    def _write(self, pos: np.ndarray, rows: torch.Tensor) -> None:
        """Store the rows of resident positions ``pos``."""
        if self.rows is None:
            self.rows = torch.zeros(self.n, rows.shape[1], dtype=rows.dtype, device=self.home)
            if self.pinned:
                self.rows = self.rows.pin_memory()
        self.rows[device_index(pos, self.rows)] = rows.to(self.rows.device)
        self.version += 1

    def _scores(self, cur: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keep-scores of residents and candidates (higher stays)."""
        k = np.arange(new.size, dtype=np.float64) / max(new.size, 1)
        if self.policy == "priority":
            return self.priority[cur], self.priority[new]
        if self.policy == "fifo":
            return self.seq[cur].astype(float), self.next_seq + k
        if self.policy == "lru":
            return self.last[cur].astype(float), self.tick + k
        if self.policy == "lfu":  # frequency, then recency
            f = float(self.tick + 2)
            return (self.freq[cur] * f + self.last[cur]).astype(float), self.freq[new] * f + self.tick + k
        return self.rng.random(cur.size), 1.0 + self.rng.random(new.size)   # random


def device_index(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """A numpy index (positions or a mask) as a tensor on the device of ``like``."""
    return torch.from_numpy(a).to(like.device)
