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
       [--workers 4] [--epochs 12]
"""
from __future__ import annotations

import argparse

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
    ap.add_argument("--backends", nargs="*", default=["thread", "process", "process-local"],
                    choices=["thread", "process", "process-local"])
    args = ap.parse_args()
    common = dict(dataset=args.dataset, scale=args.scale, workers=args.workers, hosts=1,
                  epochs=args.epochs, warmup=2, layers=3, hidden=args.hidden,
                  dropout=args.dropout)
    plans = {"thread": ("thread", {}), "process": ("process", {}),
             "process-local": ("process", {"shared_mb": 0.0})}
    for backend, params in (plans[b] for b in args.backends):
        ex = run_training(TrainConfig(method="exact", backend=backend, **common))
        ja = run_training(TrainConfig(method="jaca", method_params=params, backend=backend,
                                      **common))
        c_ex, c_ja = compute_per_epoch(ex), compute_per_epoch(ja)
        tiers = "local only" if params.get("shared_mb") == 0.0 else "local + shared"
        print(f"{backend:7s} ({tiers}): compute per epoch exact {1e3 * c_ex:.1f} ms, "
              f"jaca {1e3 * c_ja:.1f} ms, ratio {c_ja / c_ex:.2f} (target <= 1.2); "
              f"cache work {1e3 * max(r['overhead_cpu_s'] for r in ja['ranks']):.1f} ms")


if __name__ == "__main__":
    main()
