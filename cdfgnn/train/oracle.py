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

from cdfgnn.partition.locality import arc_share
from cdfgnn.data.graph import Graph
from cdfgnn.models.propagate import FullGraphPropagator, Propagator
from cdfgnn.sampling.blocks import sample_block_arrays
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.loop import (EpochTimes, LocalData, LoopResult, TrainPart, evaluate,
                               loss_sum, run_epochs)
from cdfgnn.train.backward import backward
from cdfgnn.train.optim import Adam
from cdfgnn.train.parts import full_graph_data
from cdfgnn.train.record import device_peak_mb, reset_device_peak
from cdfgnn.train.worker import model_for


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
                     eval_every=cfg.eval_every, count_ops=cfg.count_ops)
    return {**result_dict(res), "max_memory_allocated_mb": device_peak_mb(device),
            "arc_share": arc_share(graph.indices, graph.num_nodes, graph.num_nodes)}


def result_dict(res: LoopResult) -> dict:
    return {"epochs": res.epochs,
            "times": [t.as_dict() for t in res.times],
            "ledgers": res.ledgers,
            "final_state": res.final_state}


# ------------------------------------------------------------------ mini-batch
class BlockPropagator(Propagator):
    """A sampled bipartite block: output rows = ``dst`` (a prefix of ``src``)."""

    def __init__(self, graph: Graph, dst: np.ndarray, src: np.ndarray, indptr: np.ndarray,
                 local_cols: np.ndarray, device: torch.device | None = None,
                 dtype: torch.dtype | None = None):
        deg = graph.degrees()
        sampled = np.diff(indptr)
        # deg_v / |S_v| keeps the aggregation an unbiased estimate of the full one
        scale = np.where(sampled > 0, deg[dst] / np.maximum(sampled, 1), 1.0)
        super().__init__(indptr, local_cols, deg[dst], deg[src], len(src), row_scale=scale,
                         device=device, dtype=dtype)
        self.input_ids = torch.from_numpy(src).to(self.device)   # dropout mask keys


def blocks_from_arrays(graph: Graph, srcs: list[np.ndarray], structure: list[tuple],
                       device: torch.device | None = None,
                       dtype: torch.dtype | None = None) -> list[BlockPropagator]:
    """The propagators of :func:`sample_block_arrays`' output (input layer first): the
    structure stays numpy on the host, matrices and index tensors go to ``device``."""
    return [BlockPropagator(graph, srcs[l + 1], srcs[l], indptr, cols, device, dtype)
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
            backward(loss)
            opt.step()
            total += loss.detach().double() * seeds.size
        end_sampled_epoch(res, model, TrainPart(full, data), cfg, epoch, (t0, c0),
                          total / max(train_ids.size, 1), -(-perm.size // cfg.batch_size))
    res.final_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return result_dict(res)


def end_sampled_epoch(res: LoopResult, model, full: TrainPart, cfg: TrainConfig, epoch: int,
                      start: tuple[float, float], mean_loss, batches: int) -> None:
    """Close one epoch of a sampled one-process trainer: its times (from ``start`` =
    (wall, thread CPU) at the epoch's start), then exact full-graph evaluation on the
    evaluation epochs (the mean training loss on the others)."""
    wall, cpu = time.perf_counter() - start[0], time.thread_time() - start[1]
    res.times.append(EpochTimes(wall, cpu, 0.0, 0.0))
    row = {"epoch": epoch, "batches": batches}
    if epoch % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
        row.update(evaluate(model, [full], mean_loss, None, False, None))
    else:
        row["loss"] = float(mean_loss)
    res.epochs.append(row)
