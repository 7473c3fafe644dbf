"""Issue 20, case 4: Sylvie's uniform 1-bit messages against the public code's degree groups.

Runs the quick settings of ``configs/quick/sylvie.yaml`` (products twin, METIS, 2 hosts
x 4 workers, 3 layers x 128, Adam lr 0.01, no dropout, first-layer precompute, thread
backend): experiment ``sylvie_gat`` (GAT, 1 head, 12 epochs) or ``sylvie_gcn`` (GCN, 25
epochs), for each setting of ``--runs`` (``method`` or ``method:key=value,...``), and
prints the final and best-validation test accuracy (measured here) and the vertex
bytes per epoch (counted). ``bit_groups=degree`` is the authors' public code's
in-degree groups at 1/2/4/8 bits (``cdfgnn.methods.sylvie``).

Usage: nice -n 10 python benchmarks/fidelity_sylvie.py [--model gat] [--epochs 12]
       [--runs exact sylvie-s sylvie-s:bit_groups=degree sylvie-s:bits=8]
       [--dataset synth-products] [--scale small] [--seed 0]
"""
from __future__ import annotations

import argparse


def parse_run(text: str) -> tuple[str, dict]:
    import yaml

    method, _, rest = text.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        params[key] = yaml.safe_load(value)
    return method, params


def run_one(args, method: str, params: dict) -> dict:
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(dataset=args.dataset, scale=args.scale, data_root=args.data_root,
                      partitioner="metis", workers=8, hosts=2, method=method,
                      method_params=params, model=args.model, layers=3, hidden=128,
                      dropout=0.0, lr=0.01, epochs=args.epochs, warmup=2, eval_every=2,
                      precompute_first_layer=True, seed=args.seed, backend="thread",
                      network="pcie4-host-staged", timeout_s=3000.0)
    rec = run_training(cfg)
    per = rec["comm"]["per_epoch"]
    return {"test": rec["summary"]["final_test"], "best": rec["summary"]["test_at_best_val"],
            "bytes": sum(per[k]["bytes"] for k in ("intra", "inter"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gat")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--runs", nargs="+", default=["exact", "sylvie-s",
                                                  "sylvie-s:bit_groups=degree",
                                                  "sylvie-s:bits=8"])
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-root", default="/tmp/cdfgnn-bench-data")
    args = ap.parse_args(argv)
    print(f"{args.model} on {args.dataset} ({args.scale}), METIS 2x4, {args.epochs} epochs, "
          f"seed {args.seed}", flush=True)
    print(f"{'run':<36}{'final test':>11}{'test@best val':>15}{'MB/epoch':>10}", flush=True)
    for text in args.runs:
        method, params = parse_run(text)
        r = run_one(args, method, params)
        print(f"{text:<36}{100 * r['test']:>11.2f}{100 * r['best']:>15.2f}"
              f"{r['bytes'] / 2**20:>10.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
