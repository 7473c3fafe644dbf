"""JACA's cost on the compute side: compute CPU time per epoch of ``jaca`` over ``exact``.

Issue 9's target: at most 1.2. Compute time = a rank's CPU time in the epoch minus its
communication-side CPU work (codec, cache lookups), the engine's ``compute`` of the
modelled time; mean over timed epochs, max over ranks. Thread backend with both tiers,
the process backend with both tiers (the shared one in OS shared memory) and with the
local tier only. Layer 0 caches input features, so ``jaca`` multiplies them by W0 on the
receiver: that extra work is part of its compute. Without dropout (this benchmark) the
receiver keeps ``A_halo x_halo`` once every halo row is in its local tier and multiplies
those rows (one per inner vertex with a halo neighbour) by W0, not every halo row;
``--dropout`` > 0 shows the per-epoch ``x_halo W0`` path.

Usage: python benchmarks/capgnn_jaca.py [--dataset synth-reddit] [--scale small]
       [--workers 4] [--epochs 12] [--dropout 0.0] [--repeats 1]
       [--backends thread process process-local]
"""
from __future__ import annotations

import argparse
import statistics

from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def compute_per_epoch(rec: dict) -> float:
    return max(r["cpu_s"] - r["overhead_cpu_s"] for r in rec["ranks"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="synth-reddit")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--repeats", type=int, default=1,
                    help="exact/jaca pairs run in turn; the median ratio is printed")
    ap.add_argument("--backends", nargs="*", default=["thread", "process", "process-local"],
                    choices=["thread", "process", "process-local"])
    args = ap.parse_args()
    common = dict(dataset=args.dataset, scale=args.scale, workers=args.workers, hosts=1,
                  epochs=args.epochs, warmup=2, layers=3, hidden=args.hidden,
                  dropout=args.dropout)
    plans = {"thread": ("thread", {}), "process": ("process", {}),
             "process-local": ("process", {"shared_mb": 0.0})}
    for backend, params in (plans[b] for b in args.backends):
        c_ex, c_ja, work = [], [], []
        for _ in range(args.repeats):       # interleaved, so load drift hits both alike
            ex = run_training(TrainConfig(method="exact", backend=backend, **common))
            ja = run_training(TrainConfig(method="jaca", method_params=params,
                                          backend=backend, **common))
            c_ex.append(compute_per_epoch(ex))
            c_ja.append(compute_per_epoch(ja))
            work.append(max(r["overhead_cpu_s"] for r in ja["ranks"]))
        ratios = sorted(j / e for j, e in zip(c_ja, c_ex))
        tiers = "local only" if params.get("shared_mb") == 0.0 else "local + shared"
        print(f"{backend:7s} ({tiers}): compute per epoch exact "
              f"{1e3 * statistics.median(c_ex):.1f} ms, jaca {1e3 * statistics.median(c_ja):.1f}"
              f" ms, ratio {statistics.median(ratios):.2f} (target <= 1.2; pairs: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}); cache work "
              f"{1e3 * statistics.median(work):.1f} ms", flush=True)


if __name__ == "__main__":
    main()
