"""Issue 20, case 5: CoFree-GNN's Table 4 edge-cut row against NE at 256 parts.

On the quick setting of ``configs/quick/cofree.yaml`` (experiment
``cofree_partitioners``: GraphSAGE 2 x 64, dropout 0.3, Adam lr 0.01, 15 epochs, 256
parts on 2 workers, thread backend), trains ``cofree`` on NE with DAR (the paper's
default configuration: the NE row of Table 4 of arXiv 2308.03209) and ``cofree-edgecut`` on METIS
with the loss weight 1 (our default; the paper names no weights) and with DAR on each vertex's single
copy (``reweight=dar``). Prints, per run: the partitioning's replication factor (RF) or
the fraction of edges the edge cut keeps with the same-label fraction (edge homophily)
of all, kept and cut edges, and the final test accuracy (measured here).

Usage: nice -n 10 python benchmarks/fidelity_cofree.py [--dataset synth-products]
       [--parts 256] [--workers 2] [--epochs 15] [--seeds 0] [--scale small] [--no-train]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile

RUNS = (("ne", "cofree", {}), ("metis", "cofree-edgecut", {}),
        ("metis", "cofree-edgecut", {"reweight": "dar"}))


def partition_file(args, graph, partitioner: str, tmp: str) -> tuple[str, str]:
    """(path of the saved partitioning, one line describing it)."""
    import numpy as np

    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    part = partition_graph(graph, partitioner, Topology(1, args.parts), seed=0)
    path = os.path.join(tmp, f"{partitioner}{args.parts}.npz")
    part.save(path)
    assign = np.asarray(part.assignment)
    if part.kind == "edge":   # node assignment: the edges both of whose ends share a part
        src, dst = graph.undirected_edges()
        kept = assign[src] == assign[dst]
        y = np.asarray(graph.y)
        same = y[src] == y[dst] if y.ndim == 1 else np.ones(len(src), dtype=bool)
        return path, (f"edges kept inside parts {kept.mean():.3f}; same-label fraction "
                      f"of all edges {same.mean():.3f}, of kept {same[kept].mean():.3f}, "
                      f"of cut {same[~kept].mean():.3f}")
    from cdfgnn.methods.cofree import replication_counts
    rf = replication_counts(graph, part)
    return path, f"RF {rf[rf > 0].mean():.3f}"


def run_one(args, path: str, method: str, params: dict, seed: int) -> float:
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(dataset=args.dataset, scale=args.scale, data_root=args.data_root,
                      partition_file=path, workers=args.workers, hosts=1, method=method,
                      method_params=params, model="sage", layers=2, hidden=64, dropout=0.3,
                      lr=0.01, epochs=args.epochs, warmup=2, eval_every=5, seed=seed,
                      backend="thread", timeout_s=3000.0)
    return run_training(cfg)["summary"]["final_test"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--parts", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--scale", default="small")
    ap.add_argument("--data-root", default="/tmp/cdfgnn-bench-data")
    ap.add_argument("--no-train", action="store_true", help="partition statistics only")
    args = ap.parse_args(argv)
    from cdfgnn.data.datasets import get_graph

    graph = get_graph(args.dataset, scale=args.scale, root=args.data_root)
    print(f"{args.dataset} ({args.scale}), {args.parts} parts on {args.workers} workers, "
          f"{args.epochs} epochs, seeds {args.seeds}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for partitioner in sorted({r[0] for r in RUNS}):
            files[partitioner] = partition_file(args, graph, partitioner, tmp)
            print(f"  {partitioner}: {files[partitioner][1]}", flush=True)
        for partitioner, method, params in ([] if args.no_train else RUNS):
            accs = [run_one(args, files[partitioner][0], method, params, s)
                    for s in args.seeds]
            label = ", ".join(f"{k}={v}" for k, v in params.items()) or "default"
            print(f"{method:<16}{partitioner:<7}{label:<16} test "
                  f"{100 * statistics.mean(accs):.2f} ({' '.join(f'{100 * a:.2f}' for a in accs)})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
