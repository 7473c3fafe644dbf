"""One-process reference trainers.

* :func:`train_full_graph`: full-batch training on the whole graph, the exactness
  oracle every distributed technique is measured against. It runs the very same
  model and epoch loop as a rank, with a whole-graph propagator and no comm.
* :func:`train_minibatch`: GraphSAGE-style neighbour sampling (fan-out per layer,
  batch size), the mini-batch reference of CDFGNN Fig. 8 / RapidGNN.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from cdfgnn.arrays import keep_small_rows
from cdfgnn.data.graph import Graph
from cdfgnn.models.propagate import FullGraphPropagator, Propagator
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.loop import (EpochTimes, LocalData, LoopResult, TrainPart, _evaluate,
                               loss_sum, run_epochs)
from cdfgnn.train.optim import Adam
from cdfgnn.train.record import device_peak_mb, reset_device_peak
from cdfgnn.train.worker import model_for


def full_graph_data(graph: Graph, device: torch.device | None = None,
                    dtype: torch.dtype | None = None) -> LocalData:
    return LocalData(torch.from_numpy(graph.x), torch.from_numpy(graph.y),
                     torch.from_numpy(graph.train), torch.from_numpy(graph.val),
                     torch.from_numpy(graph.test), int(graph.train.sum()),
                     graph.multilabel).to(device, dtype)


def one_thread(fn):
    """Run ``fn`` with one intra-op thread (as every simulated worker), then restore."""
    def wrapper(*args, **kwargs):
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(previous)
    wrapper.__doc__, wrapper.__name__ = fn.__doc__, fn.__name__
    return wrapper


@one_thread
def train_full_graph(graph: Graph, cfg: TrainConfig) -> dict:
    """Returns ``{"epochs": [...], "times": [...], "final_state": state_dict}`` (and
    ``max_memory_allocated_mb`` on cuda), trained on ``cfg.device`` in ``cfg.dtype``."""
    device, dtype = torch.device(cfg.device), cfg.torch_dtype
    reset_device_peak(device)
    model = model_for(cfg, graph, device)
    prop = FullGraphPropagator(graph.indptr, graph.indices, device=device, dtype=dtype)
    res = run_epochs(model, [TrainPart(prop, full_graph_data(graph, device, dtype))],
                     epochs=cfg.epochs, lr=cfg.lr, weight_decay=cfg.weight_decay,
                     eval_every=cfg.eval_every)
    return {**_as_dict(res), "max_memory_allocated_mb": device_peak_mb(device)}


def _as_dict(res: LoopResult) -> dict:
    return {"epochs": res.epochs,
            "times": [t.as_dict() for t in res.times],
            "final_state": res.final_state}


# ------------------------------------------------------------------ mini-batch
class BlockPropagator(Propagator):
    """A sampled bipartite block: output rows = ``dst`` (a prefix of ``src``)."""

    def __init__(self, graph: Graph, dst: np.ndarray, src: np.ndarray, indptr: np.ndarray,
                 local_cols: np.ndarray):
        deg = graph.degrees()
        sampled = np.diff(indptr)
        # deg_v / |S_v| keeps the aggregation an unbiased estimate of the full one
        scale = np.where(sampled > 0, deg[dst] / np.maximum(sampled, 1), 1.0)
        super().__init__(indptr, local_cols, deg[dst], deg[src], len(src), row_scale=scale)
        self.input_ids = torch.from_numpy(src)


def sample_arcs(indptr: np.ndarray, dst: np.ndarray, fanout: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``dst``: a uniform subset of ``min(degree, fanout)`` of its arcs, without
    replacement. Returns (arcs kept per row, arc ids grouped by row).

    Rows with at most ``fanout`` arcs keep them all; the others draw with Floyd's
    algorithm, vectorised over rows: ``fanout`` rounds, each a draw per row and a
    duplicate check against the row's earlier picks (work ~ rows x fanout^2 / 2,
    independent of the degrees).
    """
    lo, deg, counts, start, arcs, big = keep_small_rows(indptr, dst, fanout)
    if big.size:
        d = deg[big]
        chosen = np.empty((big.size, fanout), dtype=np.int64)
        for s in range(fanout):
            j = d - fanout + s
            t = np.minimum((rng.random(big.size) * (j + 1)).astype(np.int64), j)
            if s:
                t = np.where((chosen[:, :s] == t[:, None]).any(axis=1), j, t)
            chosen[:, s] = t
        pos = start[big][:, None] + np.arange(fanout)
        arcs[pos.ravel()] = (lo[big][:, None] + chosen).ravel()
    return counts, arcs


def sample_block_arrays(graph: Graph, seeds: np.ndarray, fanouts: list[int],
                        rng: np.random.Generator) -> tuple[list[np.ndarray], list[tuple]]:
    """Vectorised fan-out sampling (no loop over vertices).

    Returns ``srcs`` (per layer, input side first: the block's input vertices; the
    output vertices of layer l are the first ``len(srcs[l + 1])`` of ``srcs[l]``,
    with ``srcs[K] = seeds``) and per layer ``(indptr, local_cols)`` of the block.
    """
    srcs, structure = [seeds], []
    dst = seeds
    for fanout in reversed(fanouts):
        counts, arcs = sample_arcs(graph.indptr, dst, fanout, rng)
        nbrs = graph.indices[arcs]
        # distinct sampled vertices u and each arc's index into u (one sort of the arcs)
        order = np.argsort(nbrs, kind="stable")
        sn = nbrs[order]
        first = np.r_[True, sn[1:] != sn[:-1]] if sn.size else np.zeros(0, dtype=bool)
        u = sn[first]
        inv = np.empty(nbrs.size, dtype=np.int64)
        inv[order] = np.cumsum(first) - 1
        # which of u are already in dst (no O(N) buffer per batch: binary search)
        dsort = np.argsort(dst, kind="stable")
        pos = np.minimum(np.searchsorted(dst[dsort], u), max(dst.size - 1, 0))
        in_dst = dst[dsort[pos]] == u if dst.size else np.zeros(u.size, dtype=bool)
        new = u[~in_dst]                                       # sampled, not yet in dst
        src = np.concatenate([dst, new])
        local_u = np.empty(u.size, dtype=np.int64)
        local_u[in_dst] = dsort[pos[in_dst]]
        local_u[~in_dst] = dst.size + np.arange(new.size)
        indptr = np.zeros(dst.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        structure.append((indptr, local_u[inv]))
        srcs.append(src)
        dst = src
    return srcs[::-1], structure[::-1]


def blocks_from_arrays(graph: Graph, srcs: list[np.ndarray],
                       structure: list[tuple]) -> list[BlockPropagator]:
    """The propagators of :func:`sample_block_arrays`' output (input layer first)."""
    return [BlockPropagator(graph, srcs[l + 1], srcs[l], indptr, cols)
            for l, (indptr, cols) in enumerate(structure)]


def sample_blocks(graph: Graph, seeds: np.ndarray, fanouts: list[int],
                  rng: np.random.Generator) -> tuple[np.ndarray, list[BlockPropagator]]:
    """Blocks from the input layer to the output layer, and the input vertices."""
    srcs, structure = sample_block_arrays(graph, seeds, fanouts, rng)
    return srcs[0], blocks_from_arrays(graph, srcs, structure)


@one_thread
def train_minibatch(graph: Graph, cfg: TrainConfig) -> dict:
    """Neighbour-sampling training; evaluation is exact full-graph inference."""
    if len(cfg.fanouts) != cfg.layers:
        from cdfgnn.errors import CdfgnnError
        raise CdfgnnError(f"--fanouts needs one value per layer ({cfg.layers}), got {cfg.fanouts}")
    model = model_for(cfg, graph)
    opt = Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    full = FullGraphPropagator(graph.indptr, graph.indices)
    data = full_graph_data(graph)
    train_ids = np.flatnonzero(graph.train)
    x, y = torch.from_numpy(graph.x), torch.from_numpy(graph.y)
    res = LoopResult()
    for epoch in range(cfg.epochs):
        rng = np.random.default_rng([cfg.seed, epoch])
        perm = rng.permutation(train_ids)
        model.train()
        t0, c0 = time.perf_counter(), time.thread_time()
        total = torch.zeros((), dtype=torch.float64)
        for b, start in enumerate(range(0, perm.size, cfg.batch_size)):
            model.epoch = epoch * 1_000_003 + b  # a fresh dropout mask per batch
            seeds = np.sort(perm[start: start + cfg.batch_size])
            inputs, blocks = sample_blocks(graph, seeds, cfg.fanouts, rng)
            out = model(x[inputs], blocks)
            batch = LocalData(x, y[seeds], torch.ones(seeds.size, dtype=torch.bool),
                              data.val, data.test, seeds.size, graph.multilabel)
            loss = loss_sum(out, batch) / seeds.size
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach().double() * seeds.size
        end_sampled_epoch(res, model, TrainPart(full, data), cfg, epoch, (t0, c0),
                          total / max(train_ids.size, 1), -(-perm.size // cfg.batch_size))
    res.final_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return _as_dict(res)


def end_sampled_epoch(res: LoopResult, model, full: TrainPart, cfg: TrainConfig, epoch: int,
                      start: tuple[float, float], mean_loss, batches: int) -> None:
    """Close one epoch of a sampled one-process trainer: its times (from ``start`` =
    (wall, thread CPU) at the epoch's start), then exact full-graph evaluation on the
    evaluation epochs (the mean training loss on the others)."""
    wall, cpu = time.perf_counter() - start[0], time.thread_time() - start[1]
    res.times.append(EpochTimes(wall, cpu, 0.0, 0.0))
    row = {"epoch": epoch, "batches": batches}
    if epoch % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
        row.update(_evaluate(model, [full], mean_loss, None, False, None))
    else:
        row["loss"] = float(mean_loss)
    res.epochs.append(row)
