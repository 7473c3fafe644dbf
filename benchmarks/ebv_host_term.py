"""EBV's host term on the twins: max Outer change of gamma > 0 against gamma = 0.

Issue 11's target: on the reddit and products twins, gamma 0.1 cuts max Outer by at
least 10% against gamma 0.0 on average over 2 hosts x {2, 4, 8} workers. Prints, per
twin, seed, edge order and gamma, the change per topology (positive = gamma raises
Outer), its mean, RF for both gammas and the worst edge imbalance. ``--keep F`` first
keeps a random share F of the twin's edges (the density experiment of docs/methods.md,
"Measured: EBV's host term on the synthetic twins"); ``--scale-balance S`` multiplies
alpha and beta by S.

Usage: python benchmarks/ebv_host_term.py [--datasets synth-reddit synth-products]
       [--scale small] [--seeds 0 1 2] [--orders degree shuffle input] [--gammas 0.1]
       [--keep 1.0] [--scale-balance 1.0]
"""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from cdfgnn.data.graph import Graph, csr_from_sorted_pairs
from cdfgnn.data.synthetic import generate_twin
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.partition.stats import partition_stats

TOPOLOGIES = (Topology(2, 2), Topology(2, 4), Topology(2, 8))


def keep_edges(g: Graph, share: float, seed: int) -> Graph:
    """``g`` with a uniformly drawn share of its undirected edges (same vertices, features)."""
    src = np.repeat(np.arange(g.num_nodes), g.degrees())
    fwd = src < g.indices
    a, b = src[fwd], g.indices[fwd]  # sorted by (a, b): CSR rows, ascending columns
    pick = np.random.default_rng(seed).random(a.size) < share
    indptr, indices = csr_from_sorted_pairs(a[pick], b[pick], g.num_nodes)
    return dataclasses.replace(g, indptr=indptr, indices=indices)


def outer_change(g: Graph, seed: int, gamma: float, **params) -> dict:
    change, rf, eif = [], [], []
    for topo in TOPOLOGIES:
        s0, s1 = (partition_stats(g, partition_graph(g, "ebv", topo, seed=seed, gamma=x, **params))
                  for x in (0.0, gamma))
        change.append((s1["outer_max"] / s0["outer_max"] - 1.0) * 100.0)
        rf.append((s0["rf"], s1["rf"]))
        eif.append(max(s0["edge_imbalance"], s1["edge_imbalance"]))
    return {"change": change, "mean": float(np.mean(change)), "rf": rf, "edge_if": max(eif)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["synth-reddit", "synth-products"])
    ap.add_argument("--scale", default="small")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--orders", nargs="+", default=["degree"])
    ap.add_argument("--gammas", nargs="+", type=float, default=[0.1])
    ap.add_argument("--keep", type=float, default=1.0)
    ap.add_argument("--scale-balance", type=float, default=1.0)
    args = ap.parse_args()
    ab = {"alpha": args.scale_balance, "beta": args.scale_balance}
    for name in args.datasets:
        means: dict[tuple, list[float]] = {}
        for seed in args.seeds:
            g = generate_twin(name, args.scale, seed)
            if args.keep < 1.0:
                g = keep_edges(g, args.keep, seed)
            deg = 2.0 * g.num_edges / g.num_nodes
            for order in args.orders:
                for gamma in args.gammas:
                    r = outer_change(g, seed, gamma, order=order, **ab)
                    means.setdefault((order, gamma), []).append(r["mean"])
                    per = " ".join(f"{c:+.1f}%" for c in r["change"])
                    rf = " ".join(f"{a:.2f}/{b:.2f}" for a, b in r["rf"])
                    print(f"{name} seed {seed} avg-degree {deg:.1f} order {order} gamma {gamma}: "
                          f"Outer 2x2/2x4/2x8 {per} mean {r['mean']:+.1f}%  RF g0/g {rf}  "
                          f"max edge IF {r['edge_if']:.3f}", flush=True)
        for (order, gamma), ms in means.items():
            print(f"{name} order {order} gamma {gamma}: mean over seeds {np.mean(ms):+.1f}% "
                  f"(target: <= -10%)")


if __name__ == "__main__":
    main()
