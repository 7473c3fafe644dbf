"""RapidGNN's schedule precompute against the training it serves (a script, not a test).

Runs ``rapidgnn`` (and, with ``--baseline``, ``distdgl-metis`` on the same schedule) on
one twin, P workers, thread backend, and prints what the run record says:

* **precompute** (``minibatch.precompute_s`` / ``precompute_cpu_s``): on every worker,
  the schedule stage of ``RapidGNN.plan``: the epochs' seed permutations and batch
  generators (``H(s0, w, e, i)``), the fan-out sampling of every batch of every epoch
  (vectorised over all batches of several epochs at once), the remote-access counts
  and one schedule file per epoch. The initial cache fill is *not* in it
  (``cache_build_s``, reported apart). Wall: the slowest worker's seconds; CPU: the
  seconds its own thread ran.
* **training it serves** (``minibatch.train_s`` / ``train_cpu_s``): every training
  epoch's steps (all ``--epochs``, warm-up included; evaluation excluded). RapidGNN's
  steps do **not** sample: they read the precomputed samples from the schedule files,
  so the precompute is the sampling moved ahead of training, and the two numbers
  split one run's work. Wall: the sum over epochs of the slowest worker's epoch;
  CPU: per worker the CPU seconds of its training epochs.
* **fraction**: wall = precompute_s / train_s; CPU = max over workers of that
  worker's precompute CPU / its training CPU. On a shared, loaded host the wall
  numbers mostly measure waiting for a core (P worker threads on few cores), so the
  CPU fraction is the one that measures the work; both are printed with the load.

``--per-batch`` also times, on worker 0's schedule, the sampling the precompute did
before it was vectorised (``Schedule.epoch``: one ``sample_block_arrays`` call per
batch) against the vectorised pass, in CPU seconds, and checks both give the same
batches.

Usage: python benchmarks/precompute.py [--dataset synth-products] [--scale small]
       [--workers 4] [--epochs 10] [--fanouts 5 10] [--batch-size 50] [--hidden 64]
       [--graph FILE] [--baseline] [--per-batch]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def run(args, method: str) -> dict:
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(dataset=None if args.graph else args.dataset, graph=args.graph,
                      scale=args.scale, method=method, model="sage",
                      workers=args.workers, hosts=args.workers, epochs=args.epochs, warmup=1,
                      fanouts=args.fanouts, batch_size=args.batch_size, hidden=args.hidden,
                      lr=0.003, dropout=0.0, network="rapidgnn-chameleon", backend="thread",
                      eval_every=10 ** 9, timeout_s=3000.0, data_root=args.data_root)
    return run_training(cfg)


def per_batch_vs_vectorised(args) -> None:
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.data.graph import Graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.sampling.schedule import Schedule, num_batches, split_train

    g = (Graph.load(args.graph) if args.graph
         else get_graph(args.dataset, scale=args.scale, root=args.data_root))
    owner = np.asarray(partition_graph(g, "metis", Topology.for_workers(args.workers,
                                                                        args.workers),
                                       seed=0).assignment, dtype=np.int64)
    splits = split_train(g.train, owner, args.workers)
    sched = Schedule(g, splits[0], args.fanouts, num_batches(splits, args.batch_size), 0, 0)
    epochs = list(range(args.epochs))
    c0 = time.thread_time()
    old = [[(b.srcs, b.structure) for b in sched.epoch(e)] for e in epochs]
    c1 = time.thread_time()
    new = [ep.batches() for ep in sched.epochs_arrays(epochs)]
    c2 = time.thread_time()
    same = all(np.array_equal(a, b) for eo, en in zip(old, new) for bo, bn in zip(eo, en)
               for a, b in zip([*bo[0], *(x for s in bo[1] for x in s)],
                               [*bn[0], *(x for s in bn[1] for x in s)]))
    print(f"worker 0 sampling, {args.epochs} epochs: per batch {c1 - c0:.4f} CPU s, "
          f"vectorised {c2 - c1:.4f} CPU s ({(c1 - c0) / max(c2 - c1, 1e-9):.1f}x), "
          f"same batches: {same}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--data-root", default="results/data")
    ap.add_argument("--graph", default=None, help="a Graph file instead of --dataset/--scale")
    ap.add_argument("--baseline", action="store_true", help="also run distdgl-metis")
    ap.add_argument("--per-batch", action="store_true",
                    help="also time per-batch against vectorised sampling of worker 0")
    args = ap.parse_args(argv)
    print(f"{args.graph or args.dataset} ({args.scale}), {args.workers} workers, {args.epochs} epochs, "
          f"fan-outs {args.fanouts}, batch {args.batch_size}, hidden {args.hidden}")
    load0 = os.getloadavg()
    rec = run(args, "rapidgnn")
    mb = rec["minibatch"]
    print(f"rapidgnn: {mb['num_batches']} batches per worker and epoch")
    print(f"  precompute  wall {mb['precompute_s']:.3f} s   CPU {mb['precompute_cpu_s']:.3f} s")
    worst = max(mb["workers"], key=lambda w: w["precompute_cpu_s"])
    print("  precompute CPU of the slowest worker: " + ", ".join(
        f"{k} {worst[f'precompute_{k}_cpu_s']:.3f} s" for k in ("sample", "write", "count")))
    print(f"  training    wall {mb['train_s']:.3f} s   CPU {mb['train_cpu_s']:.3f} s")
    print(f"  fraction    wall {mb['precompute_fraction']:.3f}     CPU "
          f"{mb['precompute_cpu_fraction']:.3f}   (target < 0.10)")
    print(f"  rows fetched per epoch {mb['rows_fetched_per_epoch_with_setup']:,.0f} "
          f"(initial cache fill spread over the epochs)")
    if args.baseline:
        brec = run(args, "distdgl-metis")
        base = brec["minibatch"]
        same = [e["loss"] for e in rec["epochs"]] == [e["loss"] for e in brec["epochs"]]
        ratio = base["rows_fetched_per_epoch"] / mb["rows_fetched_per_epoch_with_setup"]
        print(f"distdgl-metis: rows fetched per epoch {base['rows_fetched_per_epoch']:,.0f} "
              f"({ratio:.2f}x rapidgnn's; target >= 5x), training CPU "
              f"{base['train_cpu_s']:.3f} s (samples inside its steps); "
              f"identical losses: {same}")
    if args.per_batch:
        per_batch_vs_vectorised(args)
    print(f"load average before {load0[0]:.1f}, after {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
