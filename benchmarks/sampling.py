"""Sampled edges per second of the mini-batch track's fan-out sampler (a script, not a test).

Compares :func:`cdfgnn.sampling.blocks.sample_block_arrays` (vectorised: one random key
per arc of the frontier, one sort, no loop over vertices) with a plain numpy
reference of the same sampling: a Python loop over the frontier's vertices that draws
``min(fanout, degree)`` neighbours without replacement with ``rng.choice`` and then
builds the next frontier with ``np.unique``. A third line runs RapidGNN's precompute
sampler (:func:`cdfgnn.sampling.epoch_schedule.sample_epoch`: all the batches in one
vectorised pass). Both run the same batches (seed vertices
from the training set of the graph, fan-outs input-side first) on the same graph; a
"sampled edge" is one kept (vertex, neighbour) arc of any layer. The two sample
different (equally uniform) subsets, so edge counts agree only on average; the rate
divides each one's own count by its own time.

Usage: python benchmarks/sampling.py [--dataset synth-products] [--scale small]
       [--fanouts 10 25] [--batch-size 1000] [--batches 5] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from cdfgnn.data.datasets import get_graph
from cdfgnn.sampling.blocks import sample_block_arrays
from cdfgnn.sampling.epoch_schedule import sample_epoch


def reference(graph, seeds: np.ndarray, fanouts: list[int], rng) -> int:
    """Per-vertex loop; returns the number of sampled arcs."""
    edges = 0
    dst = seeds
    for fanout in reversed(fanouts):
        picked = []
        for v in dst:
            nbrs = graph.indices[graph.indptr[v]: graph.indptr[v + 1]]
            k = min(fanout, nbrs.size)
            if k:
                picked.append(rng.choice(nbrs, k, replace=False))
        nb = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
        edges += nb.size
        dst = np.concatenate([dst, np.setdiff1d(np.unique(nb), dst)])
    return edges


def vectorised(graph, seeds, fanouts, rng) -> int:
    _, structure = sample_block_arrays(graph, seeds, fanouts, rng)
    return int(sum(indptr[-1] for indptr, _ in structure))


def all_batches(graph, batches, fanouts, rng) -> int:
    """RapidGNN's precompute sampler: every batch in one vectorised pass (one generator
    per batch, drawn from ``rng``)."""
    rngs = [np.random.default_rng(int(s)) for s in rng.integers(0, 2 ** 63, len(batches))]
    ep = sample_epoch(graph.indptr, graph.indices, batches, fanouts, rngs)
    return int(sum(c.size for c in ep.cols))


def rate(fn, graph, batches, fanouts, repeats: int) -> tuple[float, int]:
    best, edges = float("inf"), 0
    for r in range(repeats):
        rng = np.random.default_rng(r)
        t0 = time.perf_counter()
        edges = sum(fn(graph, s, fanouts, rng) for s in batches)
        best = min(best, time.perf_counter() - t0)
    return edges / best, edges


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--fanouts", type=int, nargs="+", default=[10, 25])
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    graph = get_graph(args.dataset, scale=args.scale)
    train = np.flatnonzero(graph.train)
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(train, min(args.batch_size, train.size), replace=False))
               for _ in range(args.batches)]
    v_rate, v_edges = rate(vectorised, graph, batches, args.fanouts, args.repeats)
    best, a_edges = float("inf"), 0
    for r in range(args.repeats):
        t0 = time.perf_counter()
        a_edges = all_batches(graph, batches, args.fanouts, np.random.default_rng(r))
        best = min(best, time.perf_counter() - t0)
    a_rate = a_edges / best
    r_rate, r_edges = rate(reference, graph, batches, args.fanouts, max(1, args.repeats // 2))
    print(f"graph {graph.name} ({graph.num_nodes} vertices, {graph.num_arcs} arcs), fan-outs "
          f"{args.fanouts}, {args.batches} batches of {args.batch_size} seeds")
    print(f"vectorised sampler : {v_rate:14,.0f} sampled edges/s ({v_edges} edges)")
    print(f"all batches at once: {a_rate:14,.0f} sampled edges/s ({a_edges} edges; "
          f"RapidGNN's precompute)")
    print(f"numpy per-vertex   : {r_rate:14,.0f} sampled edges/s ({r_edges} edges)")
    print(f"speed-up           : {v_rate / r_rate:14.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
