"""Compute time per epoch of each method over ``cdfgnn-baseline``'s, same run configuration.

Every method trains the same dataset, model, workers, hosts, epochs and seed (thread
backend); a vertex-cut method uses ``--vertex-partitioner``, an edge-cut one
``--edge-partitioner``. The compute time of a run is the largest over ranks of the
mean per-epoch CPU time minus the cache/codec CPU time (which the engine counts as
communication, CDFGNN sec. 8), over the timed epochs. Printed per method: that
compute time, its ratio to ``cdfgnn-baseline`` (issue 6 target: <= 1.15 for
``cdfgnn-cache``), its ratio to ``exact`` when that ran (issue 9 target: <= 1.2 for
``jaca``), the cache/codec CPU time, the modelled epoch time and the vertex
rows sent per epoch relative to the baseline.

Add a method by appending one ``(label, method, params)`` entry to :data:`METHODS`.

Usage: python benchmarks/methods.py [--dataset synth-reddit] [--scale small]
       [--workers 4] [--hosts 2] [--epochs 12] [--warmup 2] [--repeats 1] [--only NAME ...]
       [--backend thread|process]
"""
from __future__ import annotations

import argparse
import statistics
import sys

#: (label, registered method, parameters): the table every helper extends
METHODS: list[tuple[str, str, dict]] = [
    ("cdfgnn-baseline", "cdfgnn-baseline", {}),
    ("cdfgnn-cache", "cdfgnn-cache", {}),
    ("cdfgnn-quant", "cdfgnn-quant", {}),
    ("cdfgnn", "cdfgnn", {}),
    ("sancus", "sancus", {}),
    ("cagnet", "cagnet", {}),
    ("exact", "exact", {}),
    ("jaca", "jaca", {}),        # issue 9 target: compute / exact <= 1.2
]
BASELINE = "cdfgnn-baseline"


def run_one(args, method: str, params: dict, seed: int) -> dict:
    from cdfgnn.methods.base import METHODS as REGISTRY
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    kind = REGISTRY.get(method).partition_kind
    part = args.edge_partitioner if kind == "edge" else args.vertex_partitioner
    cfg = TrainConfig(dataset=args.dataset, scale=args.scale, partitioner=part,
                      workers=args.workers, hosts=args.hosts, method=method,
                      method_params=dict(params), epochs=args.epochs, warmup=args.warmup,
                      hidden=args.hidden, dropout=0.0, seed=seed, backend=args.backend,
                      data_root=args.data_root)
    rec = run_training(cfg)
    mt = rec["model_time"]
    ranks = rec["ranks"]
    return {"compute_s": max(mt["compute_s"]),
            "overhead_s": max(r.get("overhead_cpu_s", 0.0) for r in ranks),
            "modelled_s": rec["summary"]["modelled_epoch_time_s"],
            "rows": rec["comm"]["per_epoch"]["rows_sent"],
            "test": rec["summary"]["final_test"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="synth-reddit")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--data-root", default="/tmp/cdfgnn-bench-data")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="seeds 0..R-1; medians are printed")
    ap.add_argument("--vertex-partitioner", default="ebv")
    ap.add_argument("--edge-partitioner", default="metis")
    ap.add_argument("--only", nargs="*", help="labels to run (the baseline always runs)")
    ap.add_argument("--backend", default="thread", choices=["thread", "process"])
    args = ap.parse_args(argv)
    todo = [m for m in METHODS if not args.only or m[0] in args.only or m[0] == BASELINE]
    results: dict[str, dict] = {}
    for label, method, params in todo:
        runs = [run_one(args, method, params, s) for s in range(args.repeats)]
        results[label] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"  done {label}", file=sys.stderr, flush=True)
    base = results[BASELINE]
    ex = results.get("exact")
    print(f"{args.dataset} scale={args.scale} P={args.workers} hosts={args.hosts} "
          f"epochs={args.epochs} (warm-up {args.warmup}) repeats={args.repeats} "
          f"backend={args.backend}")
    print(f"{'method':<18}{'compute ms':>11}{'/baseline':>10}{'/exact':>8}{'cache+codec ms':>15}"
          f"{'modelled ms':>12}{'rows/baseline':>14}{'test':>7}")
    for label, _, _ in todo:
        r = results[label]
        print(f"{label:<18}{1e3 * r['compute_s']:>11.1f}{r['compute_s'] / base['compute_s']:>10.3f}"
              f"{r['compute_s'] / ex['compute_s'] if ex else float('nan'):>8.3f}"
              f"{1e3 * r['overhead_s']:>15.1f}{1e3 * r['modelled_s']:>12.1f}"
              f"{r['rows'] / base['rows'] if base['rows'] else float('nan'):>14.3f}"
              f"{r['test']:>7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
