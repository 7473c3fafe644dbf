"""The deterministic schedule of the sampled track: which seeds, which batches, which samples.

Every worker trains on its balanced share of the training vertices (:func:`split_train`,
DGL's ``node_split(force_even=True)``: equal counts, owned vertices first), in the same
number of batches per epoch on every worker (:func:`num_batches`). Batch ``i`` of epoch
``e`` on worker ``w`` is sampled with per-layer fan-outs
(:func:`cdfgnn.sampling.blocks.sample_block_arrays`) from generators seeded by
:func:`schedule_seed`: the epoch's permutation by ``H(s0, w, e, "perm")``, the batch's
sampler by ``H(s0, w, e, i)``, ``H`` = SHA-256 truncated to 64 bits (RapidGNN,
arXiv 2509.05207, says only "cryptographic hash"; we choose SHA-256).
Online baselines (:meth:`Schedule.sample`) and RapidGNN's precomputed schedule
(:meth:`Schedule.epochs_arrays`, :mod:`cdfgnn.sampling.epoch_schedule`) therefore see
identical batches.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.sampling.blocks import sample_block_arrays
from cdfgnn.sampling.epoch_schedule import (EpochArrays, read_epoch_file, sample_epoch,
                                            write_epoch_file)


def check_sampling(fanouts, batch_size, layers: int) -> list[int]:
    """Fan-outs: one positive integer per layer; batch size: a positive integer."""
    fan = list(fanouts) if isinstance(fanouts, (list, tuple)) else [fanouts]
    if not fan or any(isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1
                      for f in fan):
        raise CdfgnnError(f"--fanouts must be positive integers (one per layer), got {fanouts}")
    if len(fan) != layers:
        raise CdfgnnError(f"--fanouts needs one value per layer ({layers}), got {fanouts}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise CdfgnnError(f"--batch-size must be a positive integer, got {batch_size!r}")
    return [int(f) for f in fan]


def schedule_seed(s0: int, *key) -> int:
    """``H(s0, key...)``: SHA-256 of the canonical string, first 8 bytes (our choice of H)."""
    text = "|".join(str(k) for k in (s0, *key)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


def split_train(train: np.ndarray, owner: np.ndarray, p: int) -> list[np.ndarray]:
    """Balanced training seeds per worker, owned vertices first (``force_even``)."""
    ids = np.flatnonzero(train)
    quota = np.full(p, ids.size // p, dtype=np.int64)
    quota[: ids.size % p] += 1
    own = owner[ids]
    order = np.argsort(own, kind="stable")
    ids, own = ids[order], own[order]
    counts = np.bincount(own, minlength=p)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keep = np.minimum(counts, quota)
    rank_in = np.arange(ids.size) - np.repeat(starts, counts)
    kept = rank_in < np.repeat(keep, counts)
    spare = ids[~kept]                           # surplus owned elsewhere, by owner then id
    need = quota - keep
    fill_at = np.concatenate([[0], np.cumsum(need)])
    return [np.sort(np.concatenate([ids[starts[w]: starts[w] + keep[w]],
                                    spare[fill_at[w]: fill_at[w + 1]]])) for w in range(p)]


def num_batches(splits: list[np.ndarray], batch_size: int) -> int:
    """Batches per epoch, the same on every worker: the largest share in ``batch_size``s."""
    return max(1, -(-max(s.size for s in splits) // batch_size))


def step_totals(splits: list[np.ndarray], nb: int) -> np.ndarray:
    """Seeds per step summed over workers (array_split sizes of every worker's share)."""
    tot = np.zeros(nb, dtype=np.int64)
    for s in splits:
        q, r = divmod(s.size, nb)
        tot += q + (np.arange(nb) < r)
    return tot


@dataclass
class Batch:
    """One sampled batch: its vertices per layer and the blocks between them."""

    epoch: int
    index: int
    srcs: list[np.ndarray]          # per layer, input side first; srcs[-1] = seeds
    structure: list[tuple]          # per layer (indptr, local cols)

    @property
    def inputs(self) -> np.ndarray:
        return self.srcs[0]

    @property
    def seeds(self) -> np.ndarray:
        return self.srcs[-1]


class Schedule:
    """The deterministic batches of one worker: online, or precomputed on disk per epoch."""

    def __init__(self, graph: Graph, train_ids: np.ndarray, fanouts: list[int],
                 num_batches: int, seed: int, worker: int):
        self.graph, self.train_ids, self.fanouts = graph, train_ids, fanouts
        self.num_batches, self.seed, self.worker = num_batches, seed, worker

    def seeds(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng(schedule_seed(self.seed, self.worker, epoch, "perm"))
        perm = rng.permutation(self.train_ids)
        return [np.sort(c) for c in np.array_split(perm, self.num_batches)]

    def rng(self, epoch: int, index: int) -> np.random.Generator:
        """Batch ``index``'s sampler: seeded by ``H(s0, w, e, i)``."""
        return np.random.default_rng(schedule_seed(self.seed, self.worker, epoch, index))

    def sample(self, epoch: int, index: int, seeds: np.ndarray) -> Batch:
        """One batch, sampled online (the baselines' path)."""
        srcs, structure = sample_block_arrays(self.graph, seeds, self.fanouts,
                                              self.rng(epoch, index))
        return Batch(epoch, index, srcs, structure)

    def epoch(self, epoch: int):
        """The epoch's batches, sampled online one at a time."""
        for i, s in enumerate(self.seeds(epoch)):
            yield self.sample(epoch, i, s)

    def epoch_arrays(self, epoch: int) -> EpochArrays:
        """All batches of the epoch in one vectorised pass (RapidGNN's precompute):
        the same batches as :meth:`epoch` (:mod:`cdfgnn.sampling.epoch_schedule`)."""
        return self.epochs_arrays([epoch])[0]

    def epochs_arrays(self, epochs: list[int]) -> list[EpochArrays]:
        """Several epochs in one vectorised pass (batches are independent: each has its
        own generator), returned one :class:`EpochArrays` per epoch."""
        seeds = [self.seeds(e) for e in epochs]
        rngs = [self.rng(e, i) for e, sd in zip(epochs, seeds) for i in range(len(sd))]
        flat = [s for sd in seeds for s in sd]
        ep = sample_epoch(self.graph.indptr, self.graph.indices, flat, self.fanouts, rngs)
        return ep.split([len(sd) for sd in seeds])


def write_epoch(path: Path, batches: list[Batch] | EpochArrays, owner: np.ndarray,
                rank: int) -> int:
    """One epoch's metadata (blocks, input ids, locality bitmask) as one file; bytes."""
    ep = batches if isinstance(batches, EpochArrays) else EpochArrays.from_batches(
        [(b.srcs, b.structure) for b in batches])
    return write_epoch_file(path, ep, owner[ep.src[0]] != rank)


def read_epoch(path: Path, epoch: int) -> list[Batch]:
    """The batches of epoch ``epoch`` from the file :func:`write_epoch` wrote."""
    ep, _ = read_epoch_file(path)
    return [Batch(epoch, i, srcs, structure) for i, (srcs, structure) in enumerate(ep.batches())]
