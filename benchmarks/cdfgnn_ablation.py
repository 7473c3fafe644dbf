"""CDFGNN's four ablation variants: modelled epoch time and its compute / communication split.

Runs ``cdfgnn-baseline``, ``cdfgnn-cache``, ``cdfgnn-quant`` and ``cdfgnn`` on the quick
configuration's ablation setting (``configs/quick/cdfgnn.yaml``, experiment
``cdfgnn-ablation``: GCN, 2 layers, hidden 64, EBV gamma 0.1, thread backend, 2 hosts)
and prints, per dataset, topology and variant (mean over seeds): the modelled epoch
time (the record's ``summary.modelled_epoch_time_s``: per epoch the max over ranks of
compute + vertex communication + reduce, CDFGNN Table 2 links), and its parts averaged
over ranks: compute (CPU time minus cache/codec time, x device slowdown), the cache
and codec CPU time (counted as communication, CDFGNN sec. 8), the modelled link time
(vertex rows + gradient all-reduce), and the vertex bytes and rows sent over the
baseline's. The issue 6 target: ``cdfgnn`` has the lowest modelled epoch time.

Usage: python benchmarks/cdfgnn_ablation.py [--datasets synth-reddit synth-products]
       [--workers 4 8] [--epochs 12] [--warmup 3] [--seeds 0] [--scale small]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

VARIANTS = ("cdfgnn-baseline", "cdfgnn-cache", "cdfgnn-quant", "cdfgnn")


def run_one(args, dataset: str, workers: int, method: str, seed: int) -> dict:
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(dataset=dataset, scale=args.scale, partitioner="ebv",
                      partition_params={"gamma": 0.1}, workers=workers, hosts=2,
                      method=method, model="gcn", layers=2, hidden=64, dropout=0.0, lr=0.01,
                      epochs=args.epochs, warmup=args.warmup, seed=seed, backend="thread",
                      data_root=args.data_root)
    rec = run_training(cfg)
    mt, ranks = rec["model_time"], rec["ranks"]
    slow = mt.get("slowdown") or [1.0] * len(ranks)
    over = [r.get("overhead_cpu_s", 0.0) for r in ranks]
    link = [r["modelled_comm_s"] - o for r, o in zip(ranks, over)]
    vbytes = sum(d["bytes"] for t, d in rec["comm"]["by_tag"].items()
                 if t.startswith(("gather", "scatter")))
    return {"modelled": rec["summary"]["modelled_epoch_time_s"],
            "compute": statistics.mean(c * s for c, s in zip(mt["compute_s"], slow)),
            "overhead": statistics.mean(over), "link": statistics.mean(link),
            "bytes": vbytes, "rows": rec["comm"]["per_epoch"]["rows_sent"],
            "test": rec["summary"]["final_test"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["synth-reddit", "synth-products"])
    ap.add_argument("--workers", nargs="+", type=int, default=[4, 8])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--scale", default="small")
    ap.add_argument("--data-root", default="/tmp/cdfgnn-bench-data")
    ap.add_argument("--only", nargs="*", help="variants to run (default: all four)")
    args = ap.parse_args(argv)
    variants = [v for v in VARIANTS if not args.only or v in args.only]
    print(f"epochs={args.epochs} (warm-up {args.warmup}) seeds={args.seeds} scale={args.scale} "
          f"load average at start {os.getloadavg()[0]:.1f}")
    print(f"{'dataset':<16}{'P':>3} {'variant':<17}{'modelled ms':>12}{'compute':>9}"
          f"{'cache+codec':>12}{'link':>7}{'bytes/base':>11}{'rows/base':>10}{'test':>7}")
    for dataset in args.datasets:
        for workers in args.workers:
            res = {}
            for v in variants:
                runs = [run_one(args, dataset, workers, v, s) for s in args.seeds]
                res[v] = {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
                print(f"  done {dataset} P={workers} {v} (load {os.getloadavg()[0]:.1f})",
                      file=sys.stderr, flush=True)
            base = res.get("cdfgnn-baseline")
            order = sorted(res, key=lambda v: res[v]["modelled"])
            for v in variants:
                r = res[v]
                rel = (lambda k: r[k] / base[k] if base and base[k] else float("nan"))
                print(f"{dataset:<16}{workers:>3} {v:<17}{1e3 * r['modelled']:>12.1f}"
                      f"{1e3 * r['compute']:>9.1f}{1e3 * r['overhead']:>12.1f}"
                      f"{1e3 * r['link']:>7.2f}{rel('bytes'):>11.3f}{rel('rows'):>10.3f}"
                      f"{r['test']:>7.3f}")
            print(f"{dataset:<16}{workers:>3} order (fastest first): {' < '.join(order)}",
                  flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
