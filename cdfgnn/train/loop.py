"""The epoch loop shared by the one-process oracle and every distributed rank.

One definition of the loss, the metrics and the timers, so that a difference
between the oracle and a distributed run can only come from synchronisation:

* loss = sum over this rank's owned training vertices of the per-vertex loss,
  divided by the **global** number of training vertices (CDFGNN Q14), so the
  ranks' losses and weight gradients sum to the full-graph mean;
* weight gradients are summed with one all-reduce, then every rank takes the
  same Adam step (equivalent to CDFGNN's parameter server);
* evaluation runs after the step, in eval mode, outside every timed section.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cdfgnn.models.gnn import GNN
from cdfgnn.models.propagate import Propagator

GRAD_TAG = "grad_allreduce"
EVAL_TAG = "eval"


@dataclass
class LocalData:
    """What a rank (or the oracle) trains on: input rows, and labels of owned rows."""

    x: torch.Tensor                 # [rows of the propagator's input, F]
    y: torch.Tensor                 # [owned, ] int64 or [owned, C] float32
    train: torch.Tensor             # bool [owned]
    val: torch.Tensor
    test: torch.Tensor
    num_train_global: int
    multilabel: bool


@dataclass
class EpochTimes:
    wall_s: float
    cpu_s: float
    comm_s: float
    reduce_s: float

    @property
    def compute_s(self) -> float:
        return max(self.wall_s - self.comm_s - self.reduce_s, 0.0)

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "comm_s": self.comm_s,
                "reduce_s": self.reduce_s, "compute_s": self.compute_s}


@dataclass
class LoopResult:
    epochs: list[dict[str, Any]] = field(default_factory=list)
    times: list[EpochTimes] = field(default_factory=list)
    traffic: list[dict[str, Any]] = field(default_factory=list)   # per epoch, this rank
    final_state: dict[str, torch.Tensor] = field(default_factory=dict)


def loss_sum(out: torch.Tensor, data: LocalData) -> torch.Tensor:
    rows = out[: data.y.shape[0]][data.train]
    target = data.y[data.train]
    if data.multilabel:
        return F.binary_cross_entropy_with_logits(rows, target, reduction="none").mean(1).sum()
    return F.cross_entropy(rows, target, reduction="sum")


def metric_counts(out: torch.Tensor, data: LocalData) -> torch.Tensor:
    """Per split: (correct, total) for accuracy or (tp, fp, fn) for micro-F1, as one vector."""
    out = out[: data.y.shape[0]]
    vals = []
    for mask in (data.train, data.val, data.test):
        if data.multilabel:
            pred = out[mask] > 0
            true = data.y[mask] > 0.5
            vals += [(pred & true).sum(), (pred & ~true).sum(), (~pred & true).sum()]
        else:
            vals += [(out[mask].argmax(1) == data.y[mask]).sum(), mask.sum(), torch.tensor(0)]
    return torch.stack([v.to(torch.float64) for v in vals])


def metrics_from_counts(c: np.ndarray, multilabel: bool) -> dict[str, float]:
    res = {}
    for i, split in enumerate(("train", "val", "test")):
        a, b, f = c[3 * i: 3 * i + 3]
        if multilabel:  # micro-F1 = 2tp / (2tp + fp + fn)
            res[split] = float(2 * a / (2 * a + b + f)) if (2 * a + b + f) else 0.0
        else:
            res[split] = float(a / b) if b else 0.0
    return res


def run_epochs(model: GNN, prop: Propagator, data: LocalData, *, epochs: int, lr: float,
               weight_decay: float = 0.0, comm=None, strategy=None, eval_every: int = 1,
               ) -> LoopResult:
    """Train ``model``; ``comm`` None means one process (the oracle)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    params = [p for p in model.parameters()]
    for layer in model.layers:  # build normalised matrices now, not in epoch 0's timing
        prop.matrix(layer.norm)
    res = LoopResult()
    for epoch in range(epochs):
        if comm is not None:
            comm.stats.reset()
            comm.seconds.clear()
        model.train()
        model.epoch = epoch
        _set_training(prop, True)
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.zero_grad(set_to_none=False)
        out = model(data.x, prop)
        loss = loss_sum(out, data) / max(data.num_train_global, 1)
        loss.backward()
        if comm is not None and comm.world_size > 1:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            comm.all_reduce(flat, tag=GRAD_TAG)
            offset = 0
            for p in params:
                n = p.numel()
                p.grad.copy_(flat[offset: offset + n].view_as(p.grad))
                offset += n
        opt.step()
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        comm_s = reduce_s = 0.0
        if comm is not None:
            reduce_s = comm.seconds.get(GRAD_TAG, 0.0)
            comm_s = sum(v for k, v in comm.seconds.items() if k != GRAD_TAG)
            res.traffic.append(comm.stats.snapshot())
        res.times.append(EpochTimes(wall, cpu, comm_s, reduce_s))
        # ---- evaluation: outside the timed section, traffic already snapshotted
        row: dict[str, Any] = {"epoch": epoch}
        if epoch % eval_every == 0 or epoch == epochs - 1:
            row.update(_evaluate(model, prop, data, loss.detach(), comm))
        else:
            row["loss"] = _reduce_scalar(loss.detach(), comm)
        if strategy is not None:
            row.update(strategy.on_epoch_end(epoch, row))
        res.epochs.append(row)
    res.final_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return res


def _set_training(prop, flag: bool) -> None:
    if hasattr(prop, "training"):
        prop.training = flag


def _reduce_scalar(v: torch.Tensor, comm) -> float:
    t = v.to(torch.float64).reshape(1).clone()
    if comm is not None and comm.world_size > 1:
        comm.all_reduce(t, tag=EVAL_TAG)
    return float(t[0])


@torch.no_grad()
def _evaluate(model: GNN, prop, data: LocalData, loss: torch.Tensor, comm) -> dict[str, float]:
    model.eval()
    _set_training(prop, False)
    out = model(data.x, prop)
    counts = torch.cat([metric_counts(out, data), loss.to(torch.float64).reshape(1)])
    if comm is not None and comm.world_size > 1:
        comm.all_reduce(counts, tag=EVAL_TAG)
    c = counts.numpy()
    return {"loss": float(c[-1]), **metrics_from_counts(c[:-1], data.multilabel)}
