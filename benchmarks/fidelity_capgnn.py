"""CaPGNN fidelity audit (docs/fidelity.md, case 1): our JACA reading against the public code's.

Three studies on the reddit twin (``synth-reddit``, small), 4 workers on one host, GCN
3 x 64, dropout 0.5, thread backend, METIS; every run is ``cdfgnn train`` through
:func:`cdfgnn.train.run.run_training` with the same options:

* ``accuracy``: final test accuracy (mean over seeds) and halo bytes per epoch of exact,
  ``jaca`` (our reading: layers >= 1 cache ``h W``, refreshed every 10 epochs), ``jaca``
  never refreshed, and ``variant=public-code`` (input rows ``h`` at every layer, times the
  current ``W``; never refreshed, as ``STALENESS_THRESHOLD = -1``), also refreshed every
  10 epochs, and evaluated through the caches (``eval=cached``, the preset
  ``jaca-public``), 30 epochs, seeds 0-2.
* ``hitrate``: per tier (local, shared) hit rate of each policy at 10/30/60 % of
  Algorithm 1's capacity, mean of epochs >= 1 over the three layers (every layer
  requests every halo row once an epoch, so the layer mean is the pooled rate), and
  the public-code variant's tier layout (the local tier fills from shared hits only)
  with its priority policy (fill free slots, never evict), LFU and FIFO. 4 epochs, seed 0, as ``configs/quick/capgnn.yaml``'s
  ``capgnn_cache``.
* ``overlap``: from the partition alone, the share of each worker's halo rows that the
  tiers can serve when they hold fixed sets (our layout and the public code's, under the
  priority key), against the bound (C_l + C_s) / |H_i|.
* ``rapa``: RAPA against exact per seed in the smoke grid's setting (tiny twin, GCN
  2 x 16, 3 epochs, Table 4 group) and the quick grid's (12 epochs, devices x4), with the
  arcs RAPA drops and the test accuracy at the best validation epoch.

Usage: python benchmarks/fidelity_capgnn.py {accuracy,hitrate,rapa} [--seeds 0 1 2]
       [--epochs N] [--out results/fidelity]
Prints a Markdown table; writes every run's summary as JSON lines under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import numpy as np

from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training

COMMON = dict(dataset="synth-reddit", scale="small", workers=4, hosts=1, partitioner="metis",
              model="gcn", layers=3, hidden=64, dropout=0.5, warmup=2, backend="thread",
              network="pcie4-host-staged")

ACCURACY = {
    "exact": ("exact", {}),
    "jaca (paper, staleness 10)": ("jaca", {}),
    "jaca (paper, never refresh)": ("jaca", {"staleness": 0}),
    "jaca (public-code, never refresh)": ("jaca", {"variant": "public-code", "staleness": 0}),
    "jaca (public-code, staleness 10)": ("jaca", {"variant": "public-code", "staleness": 10}),
    "jaca (public-code, never refresh, evaluated through the caches)":
        ("jaca", {"variant": "public-code", "staleness": 0, "eval": "cached"}),
}
POLICIES = ("priority", "fifo", "lru", "lfu", "random")
CAPACITIES = (0.1, 0.3, 0.6)


def run(method: str, params: dict, seed: int, epochs: int, **extra) -> dict:
    cfg = TrainConfig(method=method, method_params=params, seed=seed, epochs=epochs,
                      **{**COMMON, **extra})
    return run_training(cfg)


def halo_bytes(rec: dict) -> float:
    """Halo rows' bytes (forward and backward) plus cache requests, per epoch."""
    tags = rec["comm"]["by_tag"]
    total = sum(v["bytes"] for t, v in tags.items() if t.startswith(("halo/", "cachereq/")))
    return total / len(rec["epochs"])


def summary(rec: dict) -> dict:
    s = rec["summary"]
    return {"test_final": s["final_test"], "test_at_best_val": s["test_at_best_val"],
            "halo_bytes_per_epoch": halo_bytes(rec)}


def save(out: str, study: str, rows: list[dict]) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"capgnn_{study}.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def accuracy(args) -> None:
    rows = []
    labels = [k for k in ACCURACY if not args.only or k in args.only]
    for label in labels:
        method, params = ACCURACY[label]
        for seed in args.seeds:
            rec = run(method, params, seed, args.epochs or 30)
            rows.append({"label": label, "seed": seed, **summary(rec)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    save(args.out, "accuracy" if not args.only else "accuracy_" + str(len(labels)), rows)
    exact = [r for r in rows if r["label"] == "exact"]
    if not exact:
        print("(no exact runs in this invocation: deltas are against the first label)")
        exact = [r for r in rows if r["label"] == labels[0]]
    ex_acc = statistics.mean(r["test_final"] for r in exact)
    ex_b = statistics.mean(r["halo_bytes_per_epoch"] for r in exact)
    print("| run | test acc % (mean, seeds " + ",".join(map(str, args.seeds)) +
          ") | per seed | vs exact (points) | halo bytes vs exact |")
    print("|---|---|---|---|---|")
    for label in labels:
        sub = [r for r in rows if r["label"] == label]
        acc = statistics.mean(r["test_final"] for r in sub)
        b = statistics.mean(r["halo_bytes_per_epoch"] for r in sub)
        per = " / ".join(f"{100 * r['test_final']:.2f}" for r in sub)
        print(f"| {label} | {100 * acc:.2f} | {per} | {100 * (acc - ex_acc):+.2f} | "
              f"{100 * (b / ex_b - 1):+.1f} % |")


def tier_rates(rec: dict) -> tuple[float, float]:
    """(local, shared) hit rate: mean over epochs >= 1 and the cached layers."""
    eps = rec["epochs"][1:]
    layers = sorted({k.split("_l")[-1] for k in eps[0] if k.startswith("hit_local_l")})
    loc = statistics.mean(e[f"hit_local_l{l}"] for e in eps for l in layers)
    sh = statistics.mean(e[f"hit_shared_l{l}"] for e in eps for l in layers)
    return loc, sh


def hitrate(args) -> None:
    plans = [(p, {"policy": p}) for p in POLICIES]
    plans += [(f"{p}, public-code", {"policy": p, "variant": "public-code"})
              for p in ("priority", "lfu", "fifo")]
    rows = []
    for label, params in plans:
        for cap in CAPACITIES:
            rec = run("jaca", {**params, "capacity_fraction": cap}, args.seeds[0],
                      args.epochs or 4)
            loc, sh = tier_rates(rec)
            rows.append({"label": label, "capacity": cap, "local": loc, "shared": sh})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    save(args.out, "hitrate", rows)
    print("| policy | " + " | ".join(f"{int(100 * c)} %: local / shared / both"
                                      for c in CAPACITIES) + " |")
    print("|---|" + "---|" * len(CAPACITIES))
    for label, _ in plans:
        cells = []
        for cap in CAPACITIES:
            r = next(x for x in rows if x["label"] == label and x["capacity"] == cap)
            cells.append(f"{r['local']:.2f} / {r['shared']:.2f} / {r['local'] + r['shared']:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")


def overlap(args) -> None:
    """Static coverage of each tier layout, from the partition alone (no training).

    Worker i requests each of its halo rows H_i once per layer and epoch. A tier holding
    a fixed set S serves |S & H_i| of them, whatever the policy, so: a local tier of C_l
    rows serves C_l / |H_i|; a shared tier over the host's union U serves
    |S & H_i \\ L_i| / |H_i| on top (rows the local tier holds are hits there first), and
    summed over workers |S & H_i| = sum of R(v) over S: the top-R set maximises it.
    """
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    g = get_graph(COMMON["dataset"], scale=COMMON["scale"])
    p = args.workers
    part = partition_graph(g, "metis", Topology.for_workers(p, 1), seed=0)
    owner = np.asarray(part.assignment, dtype=np.int64)
    row, col = g.row_of_arcs().astype(np.int64), g.indices.astype(np.int64)
    cross = owner[row] != owner[col]
    halos = [np.unique(col[cross & (owner[row] == i)]) for i in range(p)]
    r = np.zeros(g.num_nodes, dtype=np.int64)
    for h in halos:
        r[h] += 1
    deg = g.degrees().astype(np.int64)
    union = np.unique(np.concatenate(halos))

    def top(ids: np.ndarray, c: int) -> np.ndarray:     # JACA's key: R, degree, then id
        return ids[np.lexsort((ids, -deg[ids], -r[ids]))[:c]]

    print(f"|H_i| = {[h.size for h in halos]}, |U| = {union.size}, R histogram "
          f"(vertices held as a halo by 1..{p - 1} parts) = {np.bincount(r[union])[1:].tolist()}\n")
    print("| capacity | ours, priority: local / shared / both | public layout, priority: "
          "shared (= both) | any layout: (C_l + C_s) / abs(H_i), at most 1 |")
    print("|---|---|---|---|")
    for cap in CAPACITIES:
        shared = top(union, int(cap * union.size))
        loc = sh = pub = bound = 0.0
        for h in halos:
            local = top(h, int(cap * h.size))
            loc += local.size / h.size / p
            sh += np.setdiff1d(np.intersect1d(shared, h), local).size / h.size / p
            pub += np.intersect1d(shared, h).size / h.size / p
            bound += min(1.0, (local.size + min(shared.size, h.size)) / h.size) / p
        print(f"| {int(100 * cap)} % | {loc:.2f} / {sh:.2f} / {loc + sh:.2f} | {pub:.2f} | "
              f"{bound:.2f} |")


#: RAPA settings: the smoke grid's (tiny twin, GCN 2 x 16, no dropout, 3 epochs, Table 4
#: group x4) and the quick grid's (small twin, 3 x 64, dropout 0.5, 12 epochs, x4)
RAPA_SETTINGS = {
    "smoke": dict(scale="tiny", layers=2, hidden=16, dropout=0.0, warmup=1, epochs=3,
                  devices="table4"),
    "quick": dict(epochs=12, devices="x4"),
}


def rapa(args) -> None:
    path = os.path.join(args.out, "capgnn_rapa.jsonl")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with open(path, "w") as f:
        for setting, kw in RAPA_SETTINGS.items():
            for method in ("exact", "rapa"):
                for seed in args.seeds:
                    rec = run_training(TrainConfig(method=method, seed=seed,
                                                   **{**COMMON, **kw}))
                    row = {"setting": setting, "method": method, "seed": seed,
                           **summary(rec),
                           "dropped_arcs": rec["partition"].get("dropped_arcs", 0)}
                    rows.append(row)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
    print("| setting | seed | exact test % | rapa test % | rapa - exact (points) | "
          "at best val: exact / rapa % | arcs RAPA drops |")
    print("|---|---|---|---|---|---|---|")
    for setting in RAPA_SETTINGS:
        for seed in args.seeds:
            ex = next(r for r in rows if (r["setting"], r["method"], r["seed"]) ==
                      (setting, "exact", seed))
            ra = next(r for r in rows if (r["setting"], r["method"], r["seed"]) ==
                      (setting, "rapa", seed))
            print(f"| {setting} | {seed} | {100 * ex['test_final']:.2f} | "
                  f"{100 * ra['test_final']:.2f} | "
                  f"{100 * (ra['test_final'] - ex['test_final']):+.2f} | "
                  f"{100 * ex['test_at_best_val']:.2f} / {100 * ra['test_at_best_val']:.2f} | "
                  f"{ra['dropped_arcs']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", choices=("accuracy", "hitrate", "overlap", "rapa"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=0, help="0: the study's default")
    ap.add_argument("--out", default="results/fidelity")
    ap.add_argument("--workers", type=int, default=4, help="overlap study: parts P")
    ap.add_argument("--only", nargs="*", default=[],
                    help="accuracy study: run only these labels (default: all)")
    args = ap.parse_args()
    {"accuracy": accuracy, "hitrate": hitrate, "overlap": overlap, "rapa": rapa}[args.study](args)


if __name__ == "__main__":
    main()
