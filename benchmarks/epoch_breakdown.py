"""What an epoch of ``exact`` is made of (issue 13): SpMM, dense products, dropout,
halo exchange, gradient all-reduce, optimizer, and the rest, per rank.

Each rank runs the ordinary engine (``rank_main``) under a ``TorchDispatchMode`` that
times every matrix product (sparse: SpMM; dense) in wall and thread-CPU time; dropout (a numba kernel, no aten op) and the Adam
step are timed by wrapping them; exchange and all-reduce are the communicator's own
timers (``comm_s``, ``reduce_s`` of the epoch). "other" is the epoch's wall time
minus all of these (ReLU, loss, bias and self terms, autograd bookkeeping, and the
profiler's own per-op overhead, which is why an unprofiled run of the same
configuration is timed too). A second table gives the same in the rank thread's CPU
time, which a shared machine disturbs far less than wall time.

Usage: python benchmarks/epoch_breakdown.py [--nodes 50000] [--workers 2]
           [--backend process] [--dropout 0.5] [--epochs 8]
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

_MATMULS = {"mm", "addmm", "bmm", "matmul", "baddbmm"}
_local = threading.local()
_original: list = [None]  # the engine's rank_main while it is replaced in this process


_TIMED = ("spmm", "dense", "dropout", "optimizer")  # timed here; the rest from the epoch


def _fresh() -> dict[str, float]:
    return {f"{k}_{c}": 0.0 for k in _TIMED for c in ("wall", "cpu")}


def _counters() -> dict[str, float]:
    if not hasattr(_local, "now"):
        _local.now, _local.epochs, _local.region = _fresh(), [], None
    return _local.now


def _add(c: dict[str, float], category: str, w0: float, c0: float) -> None:
    c[f"{category}_wall"] += time.perf_counter() - w0
    c[f"{category}_cpu"] += time.thread_time() - c0


class _OpTimer(TorchDispatchMode):
    """Times sparse and dense matrix products outside the wrapped regions."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in _MATMULS or _local.region is not None:
            return func(*args, **(kwargs or {}))
        sparse = any(isinstance(a, torch.Tensor) and a.layout != torch.strided for a in args)
        w0, c0 = time.perf_counter(), time.thread_time()
        out = func(*args, **(kwargs or {}))
        _add(_counters(), "spmm" if sparse else "dense", w0, c0)
        return out


def _timed_region(category: str, fn, end_of_epoch: bool = False):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        c = _counters()
        if _local.region is not None:  # nested: the outer region counts it
            return fn(*args, **kwargs)
        _local.region = category
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(c, category, w0, c0)
            _local.region = None
            if end_of_epoch:  # the optimizer step closes the epoch's timed section
                _local.epochs.append(dict(c))
                _local.now = _fresh()
    wrapper.__wrapped_by_breakdown__ = True
    return wrapper


def _install() -> None:
    """Wrap the dropout kernel and Adam.step in this process (idempotent)."""
    from cdfgnn.models import dropout as D
    if not getattr(D.apply_mask, "__wrapped_by_breakdown__", False):
        D.apply_mask = _timed_region("dropout", D.apply_mask)
    if not getattr(torch.optim.Adam.step, "__wrapped_by_breakdown__", False):
        torch.optim.Adam.step = _timed_region("optimizer", torch.optim.Adam.step, True)


def profiled_rank(comm, job):
    """``rank_main`` with the op timers on; adds ``breakdown`` (one dict per epoch)."""
    from cdfgnn.train import worker
    rank_main = _original[0] if worker.rank_main is profiled_rank else worker.rank_main
    _install()
    _counters()
    _local.epochs = []
    with _OpTimer():
        out = rank_main(comm, job)
    out["breakdown"] = _local.epochs
    return out


def run(graph, part, cfg, profiled: bool) -> list[dict]:
    from cdfgnn.train import worker
    from cdfgnn.train.run import train_distributed
    original = _original[0] = worker.rank_main
    if profiled:  # train_distributed looks rank_main up at call time
        worker.rank_main = profiled_rank
    try:
        return train_distributed(cfg, graph, part)
    finally:
        worker.rank_main = original


def summarise(results: list[dict], warmup: int, clock: str) -> dict[str, dict[str, float]]:
    """Per rank: median over the timed epochs of each category, in ms.

    ``wall``: wall time, exchange and all-reduce from the communicator's timers, other =
    epoch wall time minus the rest. ``cpu``: the rank thread's CPU time (steadier on a
    shared machine); exchange and all-reduce are then part of "other" (CPU spent in the
    communicator), and the epoch total is the epoch's CPU time.
    """
    out = {}
    for r in results:
        rows = []
        for times, parts in list(zip(r["times"], r["breakdown"]))[warmup:]:
            row = {k: parts[f"{k}_{clock}"] for k in _TIMED}
            if clock == "wall":
                row["exchange"], row["allreduce"] = times["comm_s"], times["reduce_s"]
            row["other"] = times[f"{clock}_s"] - sum(row.values())
            row["epoch"] = times[f"{clock}_s"]
            rows.append(row)
        out[f"rank{r['rank']}"] = {k: float(np.median([row[k] for row in rows])) * 1e3
                                   for k in rows[0]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dataset", default="synth-products")
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="process", choices=["thread", "process"])
    ap.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--partitioner", default="metis")
    args = ap.parse_args()
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.train.config import TrainConfig

    graph = get_graph(args.dataset, scale=args.nodes, seed=0, root="/tmp/cdfgnn-bench-data")
    part = partition_graph(graph, args.partitioner, Topology(1, args.workers), seed=0)
    cfg = TrainConfig(model=args.model, layers=2, hidden=args.hidden, epochs=args.epochs,
                      workers=args.workers, backend=args.backend, dropout=args.dropout,
                      eval_every=10**9, timeout_s=600)
    print(f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
          f"{graph.num_features} features; {args.model}, hidden {args.hidden}, dropout "
          f"{args.dropout}, {args.partitioner} P={args.workers}, {args.backend} backend, "
          f"one thread per rank; median of epochs {args.warmup}..{args.epochs - 1}")
    plain = run(graph, part, cfg, profiled=False)
    walls = [max(r["times"][e]["wall_s"] for r in plain) for e in range(args.warmup, args.epochs)]
    results = run(graph, part, cfg, profiled=True)
    tables = {clock: summarise(results, args.warmup, clock) for clock in ("wall", "cpu")}
    for clock, table in tables.items():
        cols = list(next(iter(table.values())))
        print(f"{'ms (' + clock + ')':14s}" + "".join(f"{k:>10s}" for k in cols))
        for rank, row in table.items():
            print(f"{rank:14s}" + "".join(f"{row[k]:10.1f}" for k in cols))
    print(f"unprofiled epoch (max over ranks, median): {np.median(walls) * 1e3:.1f} ms wall")
    print(json.dumps({**tables, "unprofiled_epoch_wall_ms": float(np.median(walls)) * 1e3}))


if __name__ == "__main__":
    # run as a module so that process ranks can import profiled_rank by name
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import epoch_breakdown
    epoch_breakdown.main()
