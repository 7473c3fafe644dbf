"""Epoch cost with and without the first-layer precompute, same graph, partition and P.

For each method (default ``exact``; e.g. ``--methods exact sar``) and model, trains
once without and once with ``--precompute-first-layer`` (interleaved ``--repeats``
times, so drift on a shared machine hits both alike) and prints, per epoch:
wall seconds (max over ranks, median over timed epochs), modelled seconds (the
run's network profile), vertex bytes sent (all ranks), and the ratio
with / without. The precompute's one-time exchange is printed beside it.

Usage: python benchmarks/peer_epoch.py [--dataset synth-products] [--scale tiny]
       [--workers 4] [--hosts 2] [--model gcn] [--layers 3] [--hidden 128]
       [--epochs 8] [--methods exact] [--repeats 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def run(args, method: str, model: str, precompute: bool) -> dict:
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training
    cfg = TrainConfig(dataset=args.dataset, scale=args.scale, workers=args.workers,
                      hosts=args.hosts, method=method, model=model, layers=args.layers,
                      hidden=args.hidden, epochs=args.epochs, warmup=args.warmup,
                      eval_every=10 ** 9, precompute_first_layer=precompute,
                      network=args.network, timeout_s=1800)
    rec = run_training(cfg)
    timed = rec["epochs"][args.warmup:]
    per = rec["comm"]["per_epoch"]
    vertex = sum(v["bytes"] for t, v in rec["comm"]["by_tag"].items()
                 if t.startswith(("halo/", "gather/", "scatter/")))
    return {"wall_s": float(np.median([e["wall_s"] for e in timed])),
            "modelled_s": rec["summary"]["modelled_epoch_time_s"],
            "vertex_bytes": float(vertex),
            "all_bytes": per["intra"]["bytes"] + per["inter"]["bytes"],
            "precompute_bytes": rec["comm"].get("precompute", {}).get("bytes", 0.0),
            "final_loss": rec["epochs"][-1]["loss"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--models", nargs="+", default=["gcn"])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["exact"])
    ap.add_argument("--network", default="cdfgnn-table2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    print(f"{args.dataset} ({args.scale}), P={args.workers} on {args.hosts} hosts, "
          f"{args.layers} layers, hidden {args.hidden}, {args.epochs} epochs "
          f"({args.warmup} warm-up), network {args.network}")
    print(f"{'method':<8}{'model':<6}{'pre':<5}{'wall ms':>10}{'model ms':>10}"
          f"{'vertex MB':>11}{'once MB':>9}{'loss':>10}")
    for model in args.models:
        for method in args.methods:
            got = {False: [], True: []}
            try:
                for _ in range(args.repeats):
                    for pre in (False, True):
                        got[pre].append(run(args, method, model, pre))
            except Exception as exc:  # e.g. sar with gat: not supported
                print(f"{method:<8}{model:<6}skipped: {str(exc).splitlines()[0]}")
                continue
            res = {pre: {k: float(np.median([r[k] for r in rs])) for k in rs[0]}
                   for pre, rs in got.items()}
            for pre in (False, True):
                r = res[pre]
                print(f"{method:<8}{model:<6}{'on' if pre else 'off':<5}"
                      f"{1e3 * r['wall_s']:>10.2f}{1e3 * r['modelled_s']:>10.2f}"
                      f"{r['vertex_bytes'] / 2 ** 20:>11.3f}"
                      f"{r['precompute_bytes'] / 2 ** 20:>9.3f}{r['final_loss']:>10.5f}")
            ratio = {k: res[True][k] / res[False][k] if res[False][k] else float("nan")
                     for k in ("wall_s", "modelled_s", "vertex_bytes")}
            print(f"  with / without precompute: wall {ratio['wall_s']:.3f}, modelled "
                  f"{ratio['modelled_s']:.3f}, vertex bytes {ratio['vertex_bytes']:.3f}")
            rows.append({"method": method, "model": model, "without": res[False],
                         "with": res[True], "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
