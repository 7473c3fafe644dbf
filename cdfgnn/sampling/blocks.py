"""Fan-out neighbour sampling of one batch: the blocks from the seeds down to the inputs.

Shared by the one-process mini-batch reference (:mod:`cdfgnn.train.oracle`) and the
sampled track's deterministic schedule (:mod:`cdfgnn.sampling.schedule`); the
vectorised whole-epoch sampler (:mod:`cdfgnn.sampling.epoch_schedule`) draws the same
numbers.
"""
from __future__ import annotations

import numpy as np

from cdfgnn.arrays import keep_small_rows
from cdfgnn.data.graph import Graph


def sample_arcs(indptr: np.ndarray, dst: np.ndarray, fanout: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``dst``: a uniform subset of ``min(degree, fanout)`` of its arcs, without
    replacement. Returns (arcs kept per row, arc ids grouped by row).

    Rows with at most ``fanout`` arcs keep them all; the others draw with Floyd's
    algorithm, vectorised over rows: ``fanout`` rounds, each a draw per row and a
    duplicate check against the row's earlier picks (work ~ rows x fanout^2 / 2,
    independent of the degrees).
    """
    lo, deg, counts, start, arcs, big = keep_small_rows(indptr, dst, fanout)
    if big.size:
        d = deg[big]
        chosen = np.empty((big.size, fanout), dtype=np.int64)
        for s in range(fanout):
            j = d - fanout + s
            t = np.minimum((rng.random(big.size) * (j + 1)).astype(np.int64), j)
            if s:
                t = np.where((chosen[:, :s] == t[:, None]).any(axis=1), j, t)
            chosen[:, s] = t
        pos = start[big][:, None] + np.arange(fanout)
        arcs[pos.ravel()] = (lo[big][:, None] + chosen).ravel()
    return counts, arcs


def sample_block_arrays(graph: Graph, seeds: np.ndarray, fanouts: list[int],
                        rng: np.random.Generator) -> tuple[list[np.ndarray], list[tuple]]:
    """Vectorised fan-out sampling (no loop over vertices).

    Returns ``srcs`` (per layer, input side first: the block's input vertices; the
    output vertices of layer l are the first ``len(srcs[l + 1])`` of ``srcs[l]``,
    with ``srcs[K] = seeds``) and per layer ``(indptr, local_cols)`` of the block.
    """
    srcs, structure = [seeds], []
    dst = seeds
    for fanout in reversed(fanouts):
        counts, arcs = sample_arcs(graph.indptr, dst, fanout, rng)
        nbrs = graph.indices[arcs]
        # distinct sampled vertices u and each arc's index into u (one sort of the arcs)
        order = np.argsort(nbrs, kind="stable")
        sn = nbrs[order]
        first = np.r_[True, sn[1:] != sn[:-1]] if sn.size else np.zeros(0, dtype=bool)
        u = sn[first]
        inv = np.empty(nbrs.size, dtype=np.int64)
        inv[order] = np.cumsum(first) - 1
        # which of u are already in dst (no O(N) buffer per batch: binary search)
        dsort = np.argsort(dst, kind="stable")
        pos = np.minimum(np.searchsorted(dst[dsort], u), max(dst.size - 1, 0))
        in_dst = dst[dsort[pos]] == u if dst.size else np.zeros(u.size, dtype=bool)
        new = u[~in_dst]                                       # sampled, not yet in dst
        src = np.concatenate([dst, new])
        local_u = np.empty(u.size, dtype=np.int64)
        local_u[in_dst] = dsort[pos[in_dst]]
        local_u[~in_dst] = dst.size + np.arange(new.size)
        indptr = np.zeros(dst.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        structure.append((indptr, local_u[inv]))
        srcs.append(src)
        dst = src
    return srcs[::-1], structure[::-1]
