"""The epoch loop shared by the one-process oracle and every distributed rank.

One definition of the loss, the metrics and the timers, so that a difference
between the oracle and a distributed run can only come from synchronisation:

* loss = sum over this rank's label rows of ``weight x per-vertex loss`` over the
  **global** number of training vertices (CDFGNN eq. 5 sums; our scale). By default the weight is 1
  on owned rows and 0 on replicas, so the ranks' losses and weight gradients sum
  to the full-graph mean; a method's :class:`LocalView` may weight replicas
  instead (CoFree's DAR);
* weight gradients are summed with one all-reduce, then every rank takes the
  same Adam step (equivalent to CDFGNN's parameter server);
* a rank may train several parts of a partitioning (communication-free methods
  only): their gradients accumulate before the one all-reduce;
* evaluation runs after the step, in eval mode, outside every timed section:
  distributed with exact sync, or, when a rank holds several parts or the method
  asks for it, one-process full-graph inference on rank 0 with the trained weights,
  or (``per_part_eval``) each part on its own local graph with the replicas' outputs
  combined at the masters (:mod:`cdfgnn.train.per_part_eval`).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from cdfgnn.comm.timers import clocks_for
from cdfgnn.cost import ledger as oplog
from cdfgnn.cost.reuse import counted_affine, counted_once
from cdfgnn.errors import CdfgnnError
from cdfgnn.models.gnn import GNN
from cdfgnn.progress import progress
from cdfgnn.train.backward import backward
from cdfgnn.train.optim import Adam
from cdfgnn.train.parts import EVAL_TAG, LocalData, TrainPart, metric_counts  # noqa: F401

GRAD_TAG = "grad_allreduce"


@dataclass
class EpochTimes:
    wall_s: float
    cpu_s: float
    comm_s: float
    reduce_s: float
    overhead_cpu_s: float = 0.0     # codec / cache work, counted as communication
    overlap: bool = False           # vertex communication overlapped computation
    part_cpu_max_s: float = 0.0     # max over the rank's parts of one part's CPU time

    @property
    def compute_s(self) -> float:
        return max(self.wall_s - self.comm_s - self.reduce_s, 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "comm_s": self.comm_s,
                "reduce_s": self.reduce_s, "compute_s": self.compute_s,
                "overhead_cpu_s": self.overhead_cpu_s, "overlap": self.overlap,
                "part_cpu_max_s": self.part_cpu_max_s}


@dataclass
class LoopResult:
    epochs: list[dict[str, Any]] = field(default_factory=list)
    times: list[EpochTimes] = field(default_factory=list)
    traffic: list[dict[str, Any]] = field(default_factory=list)   # per epoch, this rank
    ledgers: list[dict[str, Any]] = field(default_factory=list)   # per epoch: operation counts
    # per epoch, per part: each part's own counts (only when the rank holds several)
    part_ledgers: list[list[dict[str, Any]]] = field(default_factory=list)
    precompute_traffic: dict[str, Any] = field(default_factory=dict)  # once, before epoch 0
    final_state: dict[str, torch.Tensor] = field(default_factory=dict)


def loss_sum(out: torch.Tensor, data: LocalData, weight: torch.Tensor | None = None,
             ) -> torch.Tensor:
    """Sum of per-vertex losses over training label rows (owned rows unless ``weight``)."""
    if weight is None:
        rows = out[: data.owned][data.train[: data.owned]]
        target = data.y[: data.owned][data.train[: data.owned]]
        if data.multilabel:
            return F.binary_cross_entropy_with_logits(rows, target, reduction="none").mean(1).sum()
        return F.cross_entropy(rows, target, reduction="sum")
    n = data.y.shape[0]
    mask = data.train
    rows, target, w = out[:n][mask], data.y[mask], weight[:n][mask]
    if data.multilabel:
        per = F.binary_cross_entropy_with_logits(rows, target, reduction="none").mean(1)
    else:
        per = F.cross_entropy(rows, target, reduction="none")
    return (per * w).sum()


def metrics_from_counts(c: np.ndarray, multilabel: bool) -> dict[str, float]:
    res = {}
    for i, split in enumerate(("train", "val", "test")):
        a, b, f = c[3 * i: 3 * i + 3]
        if multilabel:  # micro-F1 = 2tp / (2tp + fp + fn)
            res[split] = float(2 * a / (2 * a + b + f)) if (2 * a + b + f) else 0.0
        else:
            res[split] = float(a / b) if b else 0.0
    return res


def run_epochs(model: GNN, parts: list[TrainPart], *, epochs: int, lr: float,
               weight_decay: float = 0.0, comm=None, eval_every: int = 1,
               full_graph_eval: bool = False,
               full_graph_counts: Callable[[GNN], torch.Tensor] | None = None,
               count_ops: bool = True) -> LoopResult:
    """Train ``model`` on ``parts``; ``comm`` None means one process (the oracle).

    ``full_graph_eval`` (the same on every rank): evaluate by one-process full-graph
    inference on rank 0, whose ``full_graph_counts(model)`` returns the metric counts,
    broadcast to every rank, instead of evaluating the parts distributedly.
    ``count_ops`` False: no operation ledger (``res.ledgers`` stays empty).
    """
    opt = Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    params = [p for p in model.parameters()]
    lead = parts[0].strategy
    for part in parts:  # build normalised matrices now, not in epoch 0's timing
        base = part.prop.base_view
        views = part.strategy.prebuilt_views(base.but(training=True)) if part.strategy else []
        for view in [base, *views]:
            part.prop.use_view(view)
            for layer in model.layers:
                if layer.norm is not None:
                    part.prop.matrix(layer.norm)
        part.prop.use_view(base)
    res = LoopResult()
    device = params[0].device
    wall_clock, compute_clock = clocks_for(device)
    if model.precompute_first_layer:
        res.precompute_traffic = precompute_first_layer(model, parts, comm)
    lead_rank = comm is None or comm.rank == 0
    oplog.attach_layer_phases(model.layers)
    reduce_and_step = ReduceAndStep(comm, params, opt)
    part_memo: dict = {}          # counting shortcut of the parts' passes (_train_part)
    bar = progress(total=epochs, desc="epochs", unit="epoch") if lead_rank else None
    for epoch in range(epochs):
        if comm is not None:
            comm.reset_epoch()
        model.train()
        model.epoch = epoch
        wall_span, cpu_span = wall_clock.start(), compute_clock.start()
        counts = oplog.Ledger()
        # what a GPU would execute (counted, not timed; the counting's own CPU cost is in
        # the measured times: count_ops=False leaves it out, with the device model)
        with oplog.counting(counts, "optimizer") if count_ops else nullcontext():
            loss = counted_once(part_memo, ("start", grad_shapes(params)),
                                lambda: start_epoch(opt, device))
            part_spans, part_counts = [], []
            for part in parts:
                part_spans.append(compute_clock.start())
                part_counts.append(oplog.Ledger())
                with oplog.into(part_counts[-1]):   # merged into the epoch's below
                    oplog.set_phase("fwd/head")
                    loss = _train_part(model, part, epoch, params, loss, part_memo)
                part_spans[-1].stop()
            reduce_and_step()
        wall_span.stop(), cpu_span.stop()
        for c in part_counts:
            counts.merge(c)
        if count_ops:
            res.ledgers.append(counts.to_dict())
        if count_ops and len(parts) > 1:   # one part: its counts are the epoch's but the STEP_PHASES
            res.part_ledgers.append([c.to_dict() for c in part_counts])
        # read time (cuda: synchronises on the epoch's last events)
        res.times.append(_epoch_times(comm, wall_span.seconds(), cpu_span.seconds(), lead,
                                      epoch, compute_clock.includes_waits))
        res.times[-1].part_cpu_max_s = max(s.seconds() for s in part_spans)
        if comm is not None:
            res.traffic.append(comm.stats.snapshot())
        # ---- evaluation: outside the timed section, traffic already snapshotted
        row: dict[str, Any] = {"epoch": epoch}
        if epoch % eval_every == 0 or epoch == epochs - 1:
            row.update(evaluate(model, parts, loss, comm, full_graph_eval, full_graph_counts))
        else:
            row["loss"] = reduce_scalar(loss, comm)
        for part in parts:
            if part.strategy is not None:
                row.update(part.strategy.on_epoch_end(epoch, row))
        res.epochs.append(row)
        if bar is not None:
            bar.set_postfix(loss=f"{row['loss']:.4f}", refresh=False)
            bar.update(1)
    if bar is not None:
        bar.close()
    res.final_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    return res


def start_epoch(opt: Adam, device) -> torch.Tensor:
    """Gradients to zero (kept, not dropped: several parts accumulate into them) and the
    epoch's loss accumulator."""
    opt.zero_grad(set_to_none=False)
    return torch.zeros((), dtype=torch.float64, device=device)


def _train_part(model: GNN, part: TrainPart, epoch: int, params: list[torch.Tensor],
                total: torch.Tensor, memo: dict | None = None) -> torch.Tensor:
    """Forward and backward of one part; returns ``total`` plus its (normalised) loss.
    Its kernels are counted once per :func:`pass_key` and reused (``reuse.counted_once``)
    where the method declares a count key, or learnt as an affine function of the sizes
    the method declares with it, verified and checked (``reuse.counted_affine``,
    :meth:`~cdfgnn.methods.base.SyncStrategy.count_sizes`); its first pass per key is
    counted op by op and not kept (it builds the propagator's coefficients), and with
    verified counts only the first pass of its view is (later keys on that view learn
    from their first pass)."""
    prop, data, strategy = part.prop, part.data, part.strategy
    if strategy is not None:
        strategy.on_epoch_start(epoch)
        view = strategy.local_view(prop.base_view.but(training=True), True)
    else:
        view = prop.base_view.but(training=True)
    prop.use_view(view)

    def forward_backward() -> torch.Tensor:
        out = model(data.x, prop, pre=part.pre)
        loss = loss_sum(out, data, view.loss_weight) / max(data.num_train_global, 1)
        backward(loss)
        return total + loss.detach().double()
    key = pass_key(model, part, view, epoch, params) if memo is not None else None
    if key is None:
        return forward_backward()
    sizes = strategy.count_sizes(epoch) if strategy is not None else None
    if sizes is None:
        return counted_once(memo, key, forward_backward, skip=1)
    # verified counts: only the view's first pass (counted or not) builds the propagator's
    # coefficients, so a later key on a view that has run learns from its first pass (a
    # wrong guess is caught: counted_affine's learning then counts every pass op by op)
    views = memo.setdefault(_VIEWS_RUN, set())
    ran = (id(part), view.key, view.training)
    skip = 0 if ran in views else 1
    views.add(ran)
    return counted_affine(memo, key, sizes, forward_backward, skip=skip)


#: the ``memo`` entry of :func:`_train_part`: the (part, view key, training) that have run
_VIEWS_RUN = ("views run",)


def pass_key(model: GNN, part: TrainPart, view, epoch: int,
             params: list[torch.Tensor]) -> tuple | None:
    """What a part's training pass issues, as a key: the part, its view (the local
    graph), the model's mode, which parameters hold a gradient (the first pass creates
    them), and the method's :meth:`~cdfgnn.methods.base.SyncStrategy.count_key` (None,
    the default: the method does not declare one, and every pass is counted op by op)."""
    method = part.strategy.count_key(epoch) if part.strategy is not None else ()
    if method is None:
        return None
    return (id(part), view.key, view.training, model.training,
            tuple(p.grad is not None for p in params), method)


def precompute_first_layer(model: GNN, parts: list[TrainPart], comm) -> dict[str, Any]:
    """Each part's first-layer aggregation of its input rows, once, over the base view
    with exact sync (full halo, the run's dtype); returns the traffic it took."""
    if len(parts) > 1:
        raise CdfgnnError("--precompute-first-layer needs one part per worker, "
                          f"this rank holds {len(parts)}")
    if comm is not None:
        comm.reset_epoch()
    for part in parts:
        part.prop.use_view(part.prop.base_view.but(training=False))
        part.pre = model.precompute(part.data.x, part.prop)
    return comm.stats.snapshot() if comm is not None else {}


class ReduceAndStep:
    """A training step's end: the gradient all-reduce (more than one rank) and the
    optimizer step. Their kernels depend on the parameters' shapes alone, so each is
    counted once per :func:`grad_shapes` and its counts reused (``reuse.counted_once``):
    the same ledgers as counting every step, at a fraction of the counting's cost."""

    def __init__(self, comm, params: list[torch.Tensor], opt: Adam):
        self.comm, self.params, self.opt = comm, params, opt
        self._reduce_memo: dict = {}
        self._step_memo: dict = {}

    def __call__(self) -> None:
        shapes = grad_shapes(self.params)
        if self.comm is not None and self.comm.world_size > 1:
            with oplog.phase("reduce"):
                counted_once(self._reduce_memo, shapes,
                             lambda: all_reduce_grads(self.comm, self.params))
        with oplog.phase("optimizer"):
            counted_once(self._step_memo, shapes, self.opt.step)


def grad_shapes(params: list[torch.Tensor]) -> tuple:
    """What an optimizer step's and a gradient all-reduce's kernels depend on: every
    parameter's shape, dtype and whether it has a gradient (``reuse.counted_once``'s key)."""
    return tuple((tuple(q.shape), q.dtype, q.grad is not None) for q in params)


def all_reduce_grads(comm, params: list[torch.Tensor]) -> None:
    """Sum every parameter's gradient over the ranks: one all-reduce of them all."""
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    comm.all_reduce(flat, tag=GRAD_TAG)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset: offset + n].view_as(p.grad))
        offset += n


def _epoch_times(comm, wall: float, cpu: float, strategy, epoch: int,
                 includes_waits: bool = False) -> EpochTimes:
    """``cpu``: the epoch on the compute clock. A clock that also runs while the rank
    waits in collectives (cuda events: elapsed stream time) has their seconds taken
    off, so ``cpu_s`` is compute (+ codec/cache overhead) on every device."""
    overlap = bool(strategy.overlaps(epoch)) if strategy is not None else False
    if comm is None:
        return EpochTimes(wall, cpu, 0.0, 0.0, 0.0, overlap)
    reduce_s = comm.seconds.get(GRAD_TAG, 0.0)
    comm_s = sum(v for k, v in comm.seconds.items() if k != GRAD_TAG)
    overhead = float(sum(comm.overhead_cpu.values()))
    if includes_waits:
        cpu = max(cpu - comm_s - reduce_s + overhead, 0.0)
    return EpochTimes(wall, cpu, comm_s, reduce_s, overhead, overlap)


def reduce_scalar(v: torch.Tensor, comm) -> float:
    """``v`` summed over the ranks (``comm`` None: one process), as a float."""
    t = v.to(torch.float64).reshape(1).clone()
    if comm is not None and comm.world_size > 1:
        comm.all_reduce(t, tag=EVAL_TAG)
    return float(t[0])


@torch.no_grad()
def evaluate(model: GNN, parts: list[TrainPart], loss: torch.Tensor, comm,
             full_graph_eval: bool, full_graph_counts) -> dict[str, float]:
    model.eval()
    multilabel = parts[0].data.multilabel
    if comm is not None and getattr(parts[0].strategy, "per_part_eval", False):
        from cdfgnn.train.per_part_eval import per_part_counts
        counts = torch.cat([per_part_counts(model, parts, comm),
                            loss.to(torch.float64).reshape(1)])
        if comm.world_size > 1:
            comm.all_reduce(counts, tag=EVAL_TAG)
        c = counts.cpu().numpy()
        return {"loss": float(c[-1]), **metrics_from_counts(c[:-1], multilabel)}
    if comm is not None and full_graph_eval:
        metrics = full_graph_metrics(model, comm, full_graph_counts, multilabel, loss.device)
        return {"loss": reduce_scalar(loss, comm), **metrics}
    part = parts[0]
    view = part.prop.base_view.but(training=False)
    if part.strategy is not None:
        view = part.strategy.local_view(view, False)
    part.prop.use_view(view)
    out = model(part.data.x, part.prop, pre=part.pre)
    counts = torch.cat([metric_counts(out, part.data), loss.to(torch.float64).reshape(1)])
    if comm is not None and comm.world_size > 1:
        comm.all_reduce(counts, tag=EVAL_TAG)
    c = counts.cpu().numpy()
    return {"loss": float(c[-1]), **metrics_from_counts(c[:-1], multilabel)}


@torch.no_grad()
def full_graph_metrics(model: GNN, comm, full_graph_counts, multilabel: bool,
                       device: torch.device | None = None) -> dict[str, float]:
    """Metrics of one-process full-graph inference on rank 0 (``full_graph_counts(model)``
    there), broadcast to every rank; ``model`` is in eval mode."""
    counts = (full_graph_counts(model) if comm.rank == 0
              else torch.zeros(9, dtype=torch.float64, device=device))
    if comm.world_size > 1:
        comm.broadcast(counts, src=0, tag=EVAL_TAG)
    return metrics_from_counts(counts.cpu().numpy(), multilabel)
