"""The distributed mini-batch track: sampled GraphSAGE on P workers (DistDGL-style).

Selected by a method's ``track = "minibatch"`` (a
:class:`cdfgnn.methods.sampled.SampledMethod`; never by its name). Every worker

* owns the feature rows of its partition and pulls remote rows from their owners
  through its :class:`cdfgnn.sampling.feature_store.FeatureStore` (two ``all_to_all``
  rounds per pull, counted in bytes, messages and rows per tag);
* trains on its balanced share of the training vertices, in the same number of
  batches per epoch on every worker, sampled from the deterministic schedule
  (:mod:`cdfgnn.sampling.schedule`): online baselines and RapidGNN's precomputed
  schedule see identical batches;
* gets the batch's input features through its method's data path (``inputs``);
* takes a synchronous step: loss = sum over its seeds / seeds of the step on all
  workers, gradient all-reduce (:func:`cdfgnn.train.loop.all_reduce_grads`), Adam.

Evaluation is exact full-graph inference on rank 0, outside the timed section
(:func:`cdfgnn.train.loop.full_graph_metrics`, as the full-batch engine's
``full_graph_eval``). Times are read on the run's clocks (:mod:`cdfgnn.comm.timers`).

Modelled time of a step on rank r (network profile of the run): ``compute`` = CPU
seconds of the step outside pulls x slowdown; ``sync`` = modelled seconds of pulls on
the critical path; ``background`` = pulls for later batches (prefetch), which overlap
the step's compute; ``reduce`` = the gradient all-reduce. Step =
``max(compute, background) + sync + reduce``; the step of the run is the max over
ranks (synchronous training). An epoch is the sum of its steps, or the rank's total
link time (every pull, the cache fill included, + all-reduces) when that is larger.
"Network time" (RapidGNN Table 2) is the modelled seconds of every pull of the epoch,
wherever it ran (the paper does not say; we choose); ``exposed`` is the part on the critical path.
The rule is written once, in :mod:`cdfgnn.pricing.step`.

Device-modelled step (beside it, as the full-batch track's ``model_time.device``): every
step of every rank is counted into an operation ledger (:mod:`cdfgnn.cost.ledger`;
phases ``inputs``, ``pull/<mode>``, ``blocks``, ``fwd/L{i}``, ``bwd/L{i}``,
``fwd/head``, ``bwd/head``, ``reduce``, ``optimizer``), with the host-built blocks'
matrices, their input ids, the labels' index and the store's index tensors recorded as
host -> device copies; the same rule then takes compute from the priced ledger and the
pulls and all-reduce from the device NetworkModel (``minibatch.device_*_s``,
``summary.device_epoch_time_s``, epoch rows' ``device_s``; docs/time-model.md).
"""
from __future__ import annotations

import tempfile
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cdfgnn.comm.launcher import launch
from cdfgnn.comm.timers import clocks_for
from cdfgnn.cost import ledger as oplog
from cdfgnn.cost.reuse import counted_affine
from cdfgnn.data.graph import Graph
from cdfgnn.methods import build_strategy
from cdfgnn.methods.sampled import SampledContext
from cdfgnn.partition.base import Partitioning
from cdfgnn.pricing.cluster import allreduce_traffic
from cdfgnn.pricing.step import collect_step_inputs, cpu_terms, epoch_times
from cdfgnn.sampling.feature_store import FeatureStore
from cdfgnn.sampling.schedule import (Schedule, check_sampling, num_batches, split_train,
                                      step_totals)
from cdfgnn.train import energy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.energy import EnergyMeter
from cdfgnn.train.loop import (GRAD_TAG, LocalData, ReduceAndStep, full_graph_metrics,
                               loss_sum, reduce_scalar)
from cdfgnn.train.backward import backward
from cdfgnn.train.optim import Adam
from cdfgnn.train.oracle import blocks_from_arrays
from cdfgnn.train.record import device_peak_mb, peak_rss_mb, reset_device_peak, timed_slice
from cdfgnn.train.assemble import add_device_model, assemble_ranks
from cdfgnn.train.worker import (full_graph_counter, load_inputs, model_for, rank_device,
                                 stage_files)


# --------------------------------------------------------------------------- ranks
def rank_main(comm, job: MiniBatchJob) -> dict:
    """One worker of the mini-batch track (launched like the full-batch ranks)."""
    cfg: TrainConfig = job.cfg
    graph, part = load_inputs(job)
    owner = np.asarray(part.assignment, dtype=np.int64)
    fanouts = check_sampling(cfg.fanouts, cfg.batch_size, cfg.layers)
    p, r = comm.world_size, comm.rank
    wall_clock, compute_clock = clocks_for(cfg.device)
    device, dtype = rank_device(comm), cfg.torch_dtype
    reset_device_peak(device)
    splits = split_train(graph.train, owner, p)
    nb = num_batches(splits, cfg.batch_size)
    totals = step_totals(splits, nb)
    store = FeatureStore(comm, graph, owner, compute_clock, device)
    schedule = Schedule(graph, splits[r], fanouts, nb, cfg.seed, r)
    workdir = Path(job.workdir) / f"rank{r}"
    workdir.mkdir(parents=True, exist_ok=True)
    strategy = build_strategy(cfg.method, cfg.method_params)
    ctx = SampledContext(comm, graph, store, schedule, cfg.epochs, nb, workdir,
                         wall_clock, compute_clock, device)
    plan_span = wall_clock.start()
    plan = strategy.plan(ctx) or {}
    plan["plan_wall_s"] = plan_span.stop().seconds()
    plan["plan_pull"] = store.counters.take().as_dict()
    plan.update(store.take_copied())     # the setup's host <-> device copies (cuda only)
    model = model_for(cfg, graph, device)
    opt = Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    params = list(model.parameters())
    counts_fn = full_graph_counter(graph, device, dtype) if r == 0 else None
    y = torch.from_numpy(graph.y).to(device)      # labels of every vertex, on the device
    n_train = int(graph.train.sum())
    epochs, times, traffic, steps = [], [], [], []
    meter = EnergyMeter(cfg.device) if r == 0 else None
    oplog.attach_layer_phases(model.layers)
    reduce_and_step = ReduceAndStep(comm, params, opt)
    step_memo: dict = {}                # counting shortcut (cdfgnn.cost.reuse)
    for epoch in range(cfg.epochs):
        comm.reset_epoch()
        model.train()
        if meter is not None:
            meter.epoch_start()
        strategy.on_epoch_start(epoch)
        epoch_wall, epoch_cpu = wall_clock.start(), compute_clock.start()
        total = torch.zeros((), dtype=torch.float64, device=device)
        step_rows = []
        for i in range(nb):
            step_wall, step_cpu = wall_clock.start(), compute_clock.start()
            red0 = comm.seconds.get(GRAD_TAG, 0.0)
            model.epoch = epoch * 1_000_003 + i      # a fresh dropout mask per step
            counts = oplog.Ledger()
            # what a GPU would execute (counted, not timed; see loop.run_epochs)
            with oplog.counting(counts, "inputs") if cfg.count_ops else nullcontext():
                batch, x_in = strategy.inputs(epoch, i)
                pulls = store.counters.take()
                with oplog.phase("blocks"):
                    blocks = device_blocks(graph, batch, model, device, dtype)
                seeds = batch.seeds
                oplog.set_phase("fwd/head")

                def train_step():
                    out = model(x_in, blocks)
                    data = LocalData(x_in, y[host_index(seeds, device)],
                                     torch.ones(seeds.size, dtype=torch.bool, device=device),
                                     None, None, seeds.size, graph.multilabel)
                    loss = loss_sum(out, data) / max(int(totals[i]), 1)
                    with oplog.phase("optimizer"):
                        opt.zero_grad()
                    backward(loss)
                    reduce_and_step()
                    total.add_(loss.detach().double() * int(totals[i]))  # the epoch's loss
                counted_step(step_memo, model, params, x_in, blocks, train_step)
            wall, cpu = step_wall.stop().seconds(), step_cpu.stop().seconds()
            step_rows.append({"wall_s": wall, "cpu_s": cpu, "pull_cpu_s": pulls.cpu_s,
                              "reduce_wall_s": comm.seconds.get(GRAD_TAG, 0.0) - red0,
                              "seeds": int(seeds.size), "inputs": int(batch.inputs.size),
                              **pulls.as_dict(),
                              **({"ledger": counts} if cfg.count_ops else {})})
        extra = {**(strategy.on_epoch_end(epoch) or {}), **store.take_copied()}
        end_pulls = store.counters.take()
        if meter is not None:
            meter.epoch_end()
        wall, cpu = epoch_wall.stop().seconds(), epoch_cpu.stop().seconds()
        for row in step_rows:       # the ledgers as JSON, outside the timed epoch
            if "ledger" in row:
                row["ledger"] = row["ledger"].to_dict()
        times.append({"wall_s": wall, "cpu_s": cpu, "comm_s": sum(
            v for k, v in comm.seconds.items() if k != GRAD_TAG),
            "reduce_s": comm.seconds.get(GRAD_TAG, 0.0),
            "compute_s": max(wall - sum(comm.seconds.values()), 0.0),
            "overhead_cpu_s": float(sum(x["pull_cpu_s"] for x in step_rows)) + end_pulls.cpu_s,
            "overlap": False})
        traffic.append(comm.stats.snapshot())
        steps.append({"steps": step_rows, "end": end_pulls.as_dict(), **extra})
        # ---- evaluation, outside the timed section
        row = {"epoch": epoch, "batches": nb,
               "loss": reduce_scalar(total / max(n_train, 1), comm)}
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
            model.eval()
            row.update(full_graph_metrics(model, comm, counts_fn, graph.multilabel, device))
        epochs.append(row)
    return {
        "rank": r, "epochs": epochs, "times": times, "traffic": traffic, "steps": steps,
        "plan": plan, "summary": strategy.summary() or {},
        "energy": meter.result() if meter is not None else None,
        "final_state": ({k: v.detach().to("cpu", copy=True)
                         for k, v in model.state_dict().items()} if r == 0 else None),
        "peak_rss_mb": peak_rss_mb(), "max_memory_allocated_mb": device_peak_mb(device),
        "local_rows": int(store.owned.size),
        "owned_rows": int(store.owned.size), "parts": [r], "train_seeds": int(splits[r].size),
    }


def counted_step(memo: dict, model, params: list[torch.Tensor], x_in: torch.Tensor,
                 blocks: list, fn):
    """``fn()`` (the step's forward, loss, backward, gradient all-reduce and optimizer
    step), its kernels counted as an affine function of the step's sizes
    (``cdfgnn.cost.reuse.counted_affine``): the model (its parameters' shapes are the
    run's), which parameters hold a gradient, the input's dtype and width fix the kernels; the input rows and each
    block's output rows, input rows and nonzeros fix every count (each is such a size
    times widths). A step with a size below 2 (where a size-1 dim may change a kernel's
    path: contiguity) is counted op by op."""
    if not oplog.active():
        return fn()
    shape = x_in.shape
    sizes, whole = [shape[0]], []      # every step: kept to a few attribute reads
    for blk in blocks:
        view = blk.view
        indptr = view.indptr
        rows = len(indptr) - 1
        sizes += (rows, view.num_in, int(indptr[-1]))
        whole.append(view.self_rows == rows)
    if min(sizes) < 2:
        return fn()
    key = (x_in.dtype, tuple(shape[1:]), x_in.requires_grad, x_in.is_contiguous(),
           model.training, tuple([p.grad is not None for p in params]), tuple(whole))
    return counted_affine(memo, key, sizes, fn)


def device_blocks(graph: Graph, batch, model, device, dtype) -> list:
    """The step's sampled blocks with their CSR matrices built. A GPU run of this track
    builds them on the host (DistDGL's samplers do too) and copies the matrix, its
    transpose (an attention layer, which has no norm: its arc list) and the input ids
    host -> device: that build is host work (not counted) and those copies are recorded
    as ``copy`` entries, on every device. The build runs paused, which hides its few
    dozen host ops from the counting mode (they would otherwise each pay its Python
    call)."""
    with oplog.paused():
        blocks = blocks_from_arrays(graph, batch.srcs, batch.structure, device, dtype)
        copied = [blk.input_ids for blk in blocks]
        for blk, layer in zip(blocks, model.layers):
            if layer.norm is None:     # GAT: the (row, col) arc list it attends over
                copied += list(blk.arcs_with_self_loops())
                continue
            mat = blk.matrix(layer.norm)
            copied += [part for csr in (mat.a, mat.at) for part in
                       (csr.crow_indices(), csr.col_indices(), csr.values())]
    oplog.record("copy", calls=len(copied),
                 bytes=sum(t.numel() * t.element_size() for t in copied))
    return blocks


def host_index(ids: np.ndarray, device) -> torch.Tensor:
    """Host ids as an index tensor on ``device`` (a host -> device copy on a GPU run,
    recorded as such on every device)."""
    t = torch.from_numpy(ids)
    oplog.record("copy", calls=1, bytes=t.numel() * t.element_size())
    return t.to(device)


# ------------------------------------------------------------------------ the run
@dataclass
class MiniBatchJob:
    """Inputs of every rank (thread backend: objects; process backend: file paths)."""

    cfg: TrainConfig
    workdir: str
    graph: Graph | None = None
    graph_path: str | None = None
    partitioning: Partitioning | None = None
    partition_path: str | None = None


def run_minibatch(cfg: TrainConfig, graph: Graph, part, topology, network,
                  session=None) -> dict[str, Any]:
    """Launch the workers, return the record body (``run.py`` adds config and partition).
    Under torchrun (``session``) this process is one worker and receives the others'
    results."""
    check_sampling(cfg.fanouts, cfg.batch_size, cfg.layers)
    # partition kind and one part per worker: the method's check_compatible (TrainConfig)
    with tempfile.TemporaryDirectory(prefix="cdfgnn-minibatch-") as tmp:
        if session is not None:  # a working folder of its own on every host
            results = session.run(rank_main, MiniBatchJob(cfg, tmp, graph=graph,
                                                          partitioning=part))
            return assemble(cfg, topology, network, results)
        if cfg.backend == "thread" or cfg.workers == 1:
            job = MiniBatchJob(cfg, tmp, graph=graph, partitioning=part)
        else:  # processes load from files, so nothing large is pickled
            gpath, ppath = stage_files(cfg, graph, part, tmp)
            job = MiniBatchJob(cfg, tmp, graph_path=gpath, partition_path=ppath)
        results = launch(rank_main, cfg.workers, topology=topology, backend=cfg.backend,
                         timeout_s=cfg.timeout_s, args=(job,), device=cfg.device)
    return assemble(cfg, topology, network, results)


def assemble(cfg: TrainConfig, topology, network, results: list[dict]) -> dict[str, Any]:
    """The record body: the full-batch body (:func:`assemble_ranks`), every epoch row's
    pulls and modelled step times, the ``minibatch`` section and the device model."""
    body = assemble_ranks(cfg, topology, network, results)
    n_params = sum(v.numel() for v in results[0]["final_state"].values())
    bytes_to, msgs_to = allreduce_traffic(cfg.workers, n_params)
    reduce_s = [network.comm_seconds(r, np.asarray(b), np.asarray(m))
                for r, (b, m) in enumerate(zip(bytes_to, msgs_to))]
    compute_er = [_epoch_row(row, results, e, network, reduce_s)
                  for e, row in enumerate(body["epochs"])]
    mb = _minibatch_section(cfg, body, results)
    body["minibatch"] = mb
    body["model_time"]["epoch_s"] = mb["modelled_epoch_s"]
    body["summary"]["modelled_epoch_time_s"] = mb["modelled_epoch_s"]
    body["energy"] = {**results[0]["energy"], "modelled_cpu": energy.modelled_cpu_energy(
        [r["modelled_s"] for r in body["epochs"]], compute_er)}
    if cfg.count_ops:
        add_step_device_model(body, cfg, topology, results, n_params)
    return body


def _pull_rows(pulls: dict) -> int:
    return int(sum(v["rows"] for v in pulls.values()))


def _pull_bytes(pulls: dict) -> float:
    return float(sum(sum(v["bytes"]) for v in pulls.values()))


def _pull_msgs(pulls: dict) -> float:
    return float(sum(sum(v["msgs"]) for v in pulls.values()))


def _epoch_pulls(results: list[dict], e: int) -> dict[str, float]:
    """Rows, bytes and messages of every pull of epoch ``e`` (steps and epoch end)."""
    fetched = fbytes = fmsgs = 0.0
    for res in results:
        ep = res["steps"][e]
        for pulls in [st["pull"] for st in ep["steps"]] + [ep["end"]["pull"]]:
            fetched += _pull_rows(pulls)
            fbytes += _pull_bytes(pulls)
            fmsgs += _pull_msgs(pulls)
    return {"rows_fetched": fetched, "fetch_bytes": fbytes, "fetch_msgs": fmsgs}


def _epoch_row(row: dict, results: list[dict], e: int, network, reduce_s) -> list[float]:
    """Epoch ``e``'s row: CPU-measured step model (:mod:`cdfgnn.pricing.step`), pulls,
    the method's epoch columns (summed over workers); returns compute per rank."""
    times = epoch_times(cpu_terms(results, e, network, reduce_s))
    walls = np.array([[st["wall_s"] for st in res["steps"][e]["steps"]] for res in results])
    row["modelled_s"] = times["epoch_s"]
    row.update({
        **_epoch_pulls(results, e),
        "step_time_s": float(walls.T.max(axis=1).mean()),
        "modelled_step_s": times["step_s"],
        "modelled_network_s": times["network_s"],
        "exposed_network_s": times["exposed_s"],
    })
    for key in results[0]["steps"][e]:
        if key not in ("steps", "end"):
            row[key] = float(sum(res["steps"][e][key] for res in results))
    return times["compute_r"].tolist()


def _precompute_columns(cfg: TrainConfig, results: list[dict]) -> dict[str, Any]:
    """The schedule precompute (sampling every epoch, files, counts; the cache fill
    apart) against training, in wall seconds and in each rank's thread CPU seconds (not
    inflated by a loaded host: the rank's precompute over its training epochs, worst rank)."""
    plan_s = max(res["plan"].get("precompute_s", res["plan"]["plan_wall_s"])
                 for res in results)
    train_s = float(sum(max(res["times"][e]["wall_s"] for res in results)
                        for e in range(cfg.epochs)))
    train_cpu = [sum(t["cpu_s"] for t in res["times"]) for res in results]
    pre_cpu = [res["plan"].get("precompute_cpu_s") for res in results]
    cpu_fr = [c / t for c, t in zip(pre_cpu, train_cpu) if c is not None and t > 0]
    return {"precompute_s": plan_s, "train_s": train_s,
            "precompute_fraction": plan_s / train_s if train_s > 0 else None,
            "precompute_cpu_s": max((c for c in pre_cpu if c is not None), default=None),
            "train_cpu_s": max(train_cpu, default=0.0),
            "precompute_cpu_fraction": max(cpu_fr) if cpu_fr else None}


def _minibatch_section(cfg: TrainConfig, body: dict, results: list[dict]) -> dict[str, Any]:
    """The record's ``minibatch`` section (CPU-measured times, pulls, per-worker columns)."""
    timed = body["epochs"][timed_slice(cfg.epochs, cfg.warmup)]
    mean = (lambda k: float(np.mean([r[k] for r in timed])) if timed else 0.0)
    every = (lambda k: float(np.mean([r[k] for r in body["epochs"]])))
    setup = [res["plan"].pop("plan_pull")["pull"] for res in results]
    setup_rows = sum(_pull_rows(x) for x in setup)
    setup_bytes = sum(_pull_bytes(x) for x in setup)
    pre = _precompute_columns(cfg, results)
    return {
        "track": "minibatch", "num_batches": body["epochs"][0]["batches"],
        "fanouts": list(cfg.fanouts), "batch_size": cfg.batch_size,
        "train_seeds": [res["train_seeds"] for res in results],
        **pre,
        "setup_rows_fetched": setup_rows,
        "setup_fetch_bytes": setup_bytes,
        "rows_fetched_per_epoch": mean("rows_fetched"),
        "rows_fetched_per_epoch_with_setup": every("rows_fetched") + setup_rows / cfg.epochs,
        "fetch_bytes_per_epoch": mean("fetch_bytes"),
        "fetch_bytes_per_epoch_with_setup": every("fetch_bytes") + setup_bytes / cfg.epochs,
        "step_time_s": mean("step_time_s"), "modelled_step_s": mean("modelled_step_s"),
        "modelled_network_s": mean("modelled_network_s"),
        "exposed_network_s": mean("exposed_network_s"),
        "modelled_epoch_s": mean("modelled_s"),
        "workers": [{**res["plan"], **res["summary"], "train_cpu_s": tc}
                    for res, tc in zip(results, [sum(t["cpu_s"] for t in res["times"])
                                                 for res in results])],
    }


def add_step_device_model(body: dict[str, Any], cfg: TrainConfig, topology,
                          results: list[dict], n_params: int) -> None:
    """Beside the CPU-measured model: every step's ledger priced on ``--devices`` (default
    profile without it) + the device NetworkModel, under the same step rule
    (:mod:`cdfgnn.pricing.step`); ``minibatch.device_{step,network,exposed,epoch}_s``."""
    add_device_model(body, cfg, topology, results,
                     lambda epochs: collect_step_inputs(results, epochs, n_params))
    dev = body["model_time"]["device"]
    body["minibatch"].update(device_step_s=dev["step_s"], device_network_s=dev["network_s"],
                             device_exposed_s=dev["exposed_s"], device_epoch_s=dev["epoch_s"])
