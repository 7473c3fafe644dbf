"""The distributed mini-batch track: sampled GraphSAGE on P workers (DistDGL-style).

Selected by a method's ``track = "minibatch"`` (never by its name). Every worker

* owns the feature rows of its partition (edge-cut; the rows of the other parts are
  *remote*, held by their owners as in DistDGL's sharded KV store);
* trains on its balanced share of the training vertices (:func:`split_train`, DGL's
  ``node_split(force_even=True)``: equal counts, owned vertices first), in the same
  number of batches per epoch on every worker;
* samples each batch with per-layer fan-outs (vectorised,
  :func:`cdfgnn.train.oracle.sample_block_arrays`) from a **deterministic schedule**:
  the epoch's permutation is seeded by ``H(s0, w, e, "perm")`` and the sampler of
  batch ``i`` by ``H(s0, w, e, i)``, ``H`` = SHA-256 truncated to 64 bits (RapidGNN
  digest Q6/Q7). Online baselines and RapidGNN's precomputed schedule therefore see
  identical batches;
* gets the batch's input features through its method's data path (``inputs``):
  local rows from its shard, remote rows pulled from their owners by
  :meth:`FeatureStore.pull` — a request (int64 ids) and a response (feature rows),
  two ``all_to_all`` rounds counted in bytes, messages and rows per tag;
* takes a synchronous step: loss = sum over its seeds / seeds of the step on all
  workers, gradient all-reduce, Adam.

Evaluation is exact full-graph inference on rank 0, outside the timed section.

Mini-batch data-path hooks (a method of this track implements them; see
``cdfgnn/methods/distdgl.py``):

``plan(ctx)``            once, before epoch 0 (precompute, initial cache); returns a dict
``on_epoch_start(e)``    every epoch
``inputs(e, i)``         ``(Batch, x_inputs)`` of step ``i`` (pulls through ``ctx.store``)
``on_epoch_end(e)``      after the epoch's last step (cache fill and swap); returns columns
``summary()``            run-level columns for the record (memory bound, cache, precompute)

Modelled time of a step on rank r (network profile of the run): ``compute`` = CPU
seconds of the step outside pulls x slowdown; ``sync`` = modelled seconds of pulls on
the critical path; ``background`` = pulls for later batches (prefetch), which overlap
the step's compute; ``reduce`` = the gradient all-reduce. Step =
``max(compute, background) + sync + reduce``; the step of the run is the max over
ranks (synchronous training). An epoch is the sum of its steps, or the rank's total
link time (every pull, the cache fill included, + all-reduces) when that is larger.
"Network time" (RapidGNN Table 2) is the modelled seconds of every pull of the epoch,
wherever it ran (digest Q11a); ``exposed`` is the part on the critical path (Q11b).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.energy import EnergyMeter
from cdfgnn.train.epoch_schedule import (EpochArrays, read_epoch_file, sample_epoch,
                                         write_epoch_file)
from cdfgnn.train.loop import (EVAL_TAG, GRAD_TAG, LocalData, _all_reduce_grads,
                               _reduce_scalar, loss_sum, metrics_from_counts)
from cdfgnn.train.optim import Adam
from cdfgnn.train.oracle import blocks_from_arrays, sample_block_arrays
from cdfgnn.train.record import peak_rss_mb

FETCH = "fetch"     # on-demand / prefetch pulls of batch inputs
FILL = "fill"       # bulk cache fills


# --------------------------------------------------------------------------- input
def check_sampling(fanouts, batch_size, layers: int) -> list[int]:
    """Fan-outs: one positive integer per layer; batch size: a positive integer."""
    fan = list(fanouts) if isinstance(fanouts, (list, tuple)) else [fanouts]
    if not fan or any(isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1
                      for f in fan):
        raise CdfgnnError(f"--fanouts must be positive integers (one per layer), got {fanouts}")
    if len(fan) != layers:
        raise CdfgnnError(f"--fanouts needs one value per layer ({layers}), got {fanouts}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise CdfgnnError(f"--batch-size must be a positive integer, got {batch_size!r}")
    return [int(f) for f in fan]


def schedule_seed(s0: int, *key) -> int:
    """``H(s0, key...)``: SHA-256 of the canonical string, first 8 bytes (digest Q6)."""
    text = "|".join(str(k) for k in (s0, *key)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little")


def split_train(train: np.ndarray, owner: np.ndarray, p: int) -> list[np.ndarray]:
    """Balanced training seeds per worker, owned vertices first (``force_even``)."""
    ids = np.flatnonzero(train)
    quota = np.full(p, ids.size // p, dtype=np.int64)
    quota[: ids.size % p] += 1
    own = owner[ids]
    order = np.argsort(own, kind="stable")
    ids, own = ids[order], own[order]
    counts = np.bincount(own, minlength=p)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keep = np.minimum(counts, quota)
    rank_in = np.arange(ids.size) - np.repeat(starts, counts)
    kept = rank_in < np.repeat(keep, counts)
    spare = ids[~kept]                           # surplus owned elsewhere, by owner then id
    need = quota - keep
    fill_at = np.concatenate([[0], np.cumsum(need)])
    return [np.sort(np.concatenate([ids[starts[w]: starts[w] + keep[w]],
                                    spare[fill_at[w]: fill_at[w + 1]]])) for w in range(p)]


# ------------------------------------------------------------------------ schedule
@dataclass
class Batch:
    epoch: int
    index: int
    srcs: list[np.ndarray]          # per layer, input side first; srcs[-1] = seeds
    structure: list[tuple]          # per layer (indptr, local cols)

    @property
    def inputs(self) -> np.ndarray:
        return self.srcs[0]

    @property
    def seeds(self) -> np.ndarray:
        return self.srcs[-1]


class Schedule:
    """The deterministic batches of one worker: online, or precomputed on disk per epoch."""

    def __init__(self, graph: Graph, train_ids: np.ndarray, fanouts: list[int],
                 num_batches: int, seed: int, worker: int):
        self.graph, self.train_ids, self.fanouts = graph, train_ids, fanouts
        self.num_batches, self.seed, self.worker = num_batches, seed, worker

    def seeds(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng(schedule_seed(self.seed, self.worker, epoch, "perm"))
        perm = rng.permutation(self.train_ids)
        return [np.sort(c) for c in np.array_split(perm, self.num_batches)]

    def rng(self, epoch: int, index: int) -> np.random.Generator:
        """Batch ``index``'s sampler: seeded by ``H(s0, w, e, i)``."""
        return np.random.default_rng(schedule_seed(self.seed, self.worker, epoch, index))

    def sample(self, epoch: int, index: int, seeds: np.ndarray) -> Batch:
        """One batch, sampled online (the baselines' path)."""
        srcs, structure = sample_block_arrays(self.graph, seeds, self.fanouts,
                                              self.rng(epoch, index))
        return Batch(epoch, index, srcs, structure)

    def epoch(self, epoch: int):
        """The epoch's batches, sampled online one at a time."""
        for i, s in enumerate(self.seeds(epoch)):
            yield self.sample(epoch, i, s)

    def epoch_arrays(self, epoch: int) -> EpochArrays:
        """All batches of the epoch in one vectorised pass (RapidGNN's precompute):
        the same batches as :meth:`epoch` (cdfgnn/train/epoch_schedule.py)."""
        return self.epochs_arrays([epoch])[0]

    def epochs_arrays(self, epochs: list[int]) -> list[EpochArrays]:
        """Several epochs in one vectorised pass (batches are independent: each has its
        own generator), returned one :class:`EpochArrays` per epoch."""
        seeds = [self.seeds(e) for e in epochs]
        rngs = [self.rng(e, i) for e, sd in zip(epochs, seeds) for i in range(len(sd))]
        flat = [s for sd in seeds for s in sd]
        ep = sample_epoch(self.graph.indptr, self.graph.indices, flat, self.fanouts, rngs)
        return ep.split([len(sd) for sd in seeds])


def write_epoch(path: Path, batches: list[Batch] | EpochArrays, owner: np.ndarray,
                rank: int) -> int:
    """One epoch's metadata (blocks, input ids, locality bitmask) as one file; bytes."""
    ep = batches if isinstance(batches, EpochArrays) else EpochArrays.from_batches(
        [(b.srcs, b.structure) for b in batches])
    return write_epoch_file(path, ep, owner[ep.src[0]] != rank)


def read_epoch(path: Path, epoch: int) -> list[Batch]:
    ep, _ = read_epoch_file(path)
    return [Batch(epoch, i, srcs, structure) for i, (srcs, structure) in enumerate(ep.batches())]


# --------------------------------------------------------------------- feature store
@dataclass
class PullCounters:
    """Traffic of this worker's pulls, by mode: bytes sent/received per peer, rows, msgs."""

    p: int
    bytes: dict[str, np.ndarray] = field(default_factory=dict)
    msgs: dict[str, np.ndarray] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0

    def add(self, mode: str, peer: int, nbytes: int, msgs: int, rows: int = 0) -> None:
        if mode not in self.bytes:
            self.bytes[mode], self.msgs[mode] = np.zeros(self.p), np.zeros(self.p)
            self.rows[mode] = 0
        self.bytes[mode][peer] += nbytes
        self.msgs[mode][peer] += msgs
        self.rows[mode] += rows

    def take(self) -> "PullCounters":
        out = PullCounters(self.p, self.bytes, self.msgs, self.rows, self.cpu_s)
        self.bytes, self.msgs, self.rows, self.cpu_s = {}, {}, {}, 0.0
        return out


class FeatureStore:
    """This worker's shard of the feature matrix and pulls of remote rows from owners.

    ``pull`` is a collective: every worker calls it the same number of times (with
    an empty id list when it needs nothing). Modes: ``sync`` (critical path),
    ``background`` (prefetch of a later batch), ``fill`` (bulk cache fill).
    """

    def __init__(self, comm, graph: Graph, owner: np.ndarray):
        self.comm, self.rank, self.p = comm, comm.rank, comm.world_size
        self.owner = owner
        self.owned = np.flatnonzero(owner == self.rank)
        self.x = torch.from_numpy(np.ascontiguousarray(graph.x[self.owned]))
        self.dim = int(graph.x.shape[1])
        self.counters = PullCounters(self.p)

    def local_rows(self, ids: np.ndarray) -> torch.Tensor:
        return self.x[torch.from_numpy(np.searchsorted(self.owned, ids))]

    def pull(self, ids: np.ndarray, mode: str = "sync") -> torch.Tensor:
        """Rows of remote vertices ``ids`` (owned elsewhere), in the order of ``ids``."""
        c0 = time.thread_time()
        tag = FILL if mode == "fill" else FETCH
        own = self.owner[ids]
        order = np.argsort(own, kind="stable")
        bounds = np.searchsorted(own[order], np.arange(self.p + 1))
        req = [torch.from_numpy(ids[order[bounds[q]: bounds[q + 1]]]) if q != self.rank
               and bounds[q + 1] > bounds[q] else None for q in range(self.p)]
        for q, t in enumerate(req):
            if t is not None:
                self.counters.add(mode, q, t.numel() * t.element_size(), 1)
        asked = self.comm.all_to_all(req, tag=f"{tag}/req")
        answer = [None if t is None or q == self.rank else self.local_rows(t.numpy())
                  for q, t in enumerate(asked)]
        got = self.comm.all_to_all(answer, tag=f"{tag}/resp")
        out = torch.empty(ids.size, self.dim, dtype=self.x.dtype)
        for q in range(self.p):
            if req[q] is not None:
                rows = got[q]
                out[torch.from_numpy(order[bounds[q]: bounds[q + 1]])] = rows
                self.counters.add(mode, q, rows.numel() * rows.element_size(), 1, rows.shape[0])
        self.counters.cpu_s += time.thread_time() - c0
        return out

    def gather(self, batch: Batch, remote_rows: torch.Tensor | None = None,
               remote_mask: np.ndarray | None = None) -> torch.Tensor:
        """Input features of ``batch``: local rows from the shard, remote ones given."""
        ids = batch.inputs
        mask = self.owner[ids] != self.rank if remote_mask is None else remote_mask
        x = torch.empty(ids.size, self.dim, dtype=self.x.dtype)
        local = ~mask
        x[torch.from_numpy(np.flatnonzero(local))] = self.local_rows(ids[local])
        if remote_rows is not None:
            x[torch.from_numpy(np.flatnonzero(mask))] = remote_rows
        return x


@dataclass
class MiniBatchContext:
    comm: Any
    graph: Graph
    store: FeatureStore
    schedule: Schedule
    epochs: int
    num_batches: int
    workdir: Path            # private folder of this rank (schedule files)
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- ranks
def num_batches(splits: list[np.ndarray], batch_size: int) -> int:
    return max(1, -(-max(s.size for s in splits) // batch_size))


def step_totals(splits: list[np.ndarray], nb: int) -> np.ndarray:
    """Seeds per step summed over workers (array_split sizes of every worker's share)."""
    tot = np.zeros(nb, dtype=np.int64)
    for s in splits:
        q, r = divmod(s.size, nb)
        tot += q + (np.arange(nb) < r)
    return tot


def rank_main(comm, job) -> dict:
    """One worker of the mini-batch track (launched like the full-batch ranks)."""
    from cdfgnn.methods import build_strategy
    from cdfgnn.partition.base import Partitioning
    from cdfgnn.train.worker import full_graph_counter, model_for

    cfg: TrainConfig = job.cfg
    graph = job.graph if job.graph is not None else Graph.load(job.graph_path)
    part = job.partitioning or Partitioning.load(job.partition_path)
    owner = np.asarray(part.assignment, dtype=np.int64)
    fanouts = check_sampling(cfg.fanouts, cfg.batch_size, cfg.layers)
    p, r = comm.world_size, comm.rank
    splits = split_train(graph.train, owner, p)
    nb = num_batches(splits, cfg.batch_size)
    totals = step_totals(splits, nb)
    store = FeatureStore(comm, graph, owner)
    schedule = Schedule(graph, splits[r], fanouts, nb, cfg.seed, r)
    workdir = Path(job.workdir) / f"rank{r}"
    workdir.mkdir(parents=True, exist_ok=True)
    strategy = build_strategy(cfg.method, cfg.method_params)
    ctx = MiniBatchContext(comm, graph, store, schedule, cfg.epochs, nb, workdir)
    t0 = time.perf_counter()
    plan = strategy.plan(ctx) or {}
    plan["plan_wall_s"] = time.perf_counter() - t0
    plan["plan_pull"] = _counters_dict(store.counters.take())
    model = model_for(cfg, graph)
    opt = Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    params = list(model.parameters())
    counts_fn = full_graph_counter(graph) if r == 0 else None
    y = torch.from_numpy(graph.y)
    n_train = int(graph.train.sum())
    epochs, times, traffic, steps = [], [], [], []
    meter = EnergyMeter(cfg.device) if r == 0 else None
    for epoch in range(cfg.epochs):
        comm.reset_epoch()
        model.train()
        if meter is not None:
            meter.epoch_start()
        strategy.on_epoch_start(epoch)
        e_w0, e_c0 = time.perf_counter(), time.thread_time()
        total = torch.zeros((), dtype=torch.float64)
        step_rows = []
        for i in range(nb):
            w0, c0 = time.perf_counter(), time.thread_time()
            red0 = comm.seconds.get(GRAD_TAG, 0.0)
            model.epoch = epoch * 1_000_003 + i      # a fresh dropout mask per step
            batch, x_in = strategy.inputs(epoch, i)
            pulls = store.counters.take()
            blocks = blocks_from_arrays(graph, batch.srcs, batch.structure)
            seeds = batch.seeds
            out = model(x_in, blocks)
            data = LocalData(x_in, y[seeds], torch.ones(seeds.size, dtype=torch.bool),
                             None, None, seeds.size, graph.multilabel)
            loss = loss_sum(out, data) / max(int(totals[i]), 1)
            opt.zero_grad()
            loss.backward()
            if p > 1:
                _all_reduce_grads(comm, params)
            opt.step()
            total += loss.detach().double() * int(totals[i])
            wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
            step_rows.append({"wall_s": wall, "cpu_s": cpu, "pull_cpu_s": pulls.cpu_s,
                              "reduce_wall_s": comm.seconds.get(GRAD_TAG, 0.0) - red0,
                              "seeds": int(seeds.size), "inputs": int(batch.inputs.size),
                              **_counters_dict(pulls)})
        extra = strategy.on_epoch_end(epoch) or {}
        end_pulls = store.counters.take()
        if meter is not None:
            meter.epoch_end()
        wall, cpu = time.perf_counter() - e_w0, time.thread_time() - e_c0
        times.append({"wall_s": wall, "cpu_s": cpu, "comm_s": sum(
            v for k, v in comm.seconds.items() if k != GRAD_TAG),
            "reduce_s": comm.seconds.get(GRAD_TAG, 0.0),
            "compute_s": max(wall - sum(comm.seconds.values()), 0.0),
            "overhead_cpu_s": float(sum(x["pull_cpu_s"] for x in step_rows)) + end_pulls.cpu_s,
            "overlap": False})
        traffic.append(comm.stats.snapshot())
        steps.append({"steps": step_rows, "end": _counters_dict(end_pulls), **extra})
        # ---- evaluation, outside the timed section
        row = {"epoch": epoch, "batches": nb,
               "loss": _reduce_scalar(total / max(n_train, 1), comm)}
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
            row.update(_evaluate(comm, model, counts_fn, graph.multilabel))
        epochs.append(row)
    return {
        "rank": r, "epochs": epochs, "times": times, "traffic": traffic, "steps": steps,
        "plan": plan, "summary": strategy.summary() or {},
        "energy": meter.result() if meter is not None else None,
        "final_state": ({k: v.detach().clone() for k, v in model.state_dict().items()}
                        if r == 0 else None),
        "peak_rss_mb": peak_rss_mb(), "local_rows": int(store.owned.size),
        "owned_rows": int(store.owned.size), "parts": [r], "train_seeds": int(splits[r].size),
    }


def _counters_dict(c: PullCounters) -> dict:
    return {"pull": {m: {"bytes": c.bytes[m].tolist(), "msgs": c.msgs[m].tolist(),
                         "rows": int(c.rows[m])} for m in c.bytes}}


@torch.no_grad()
def _evaluate(comm, model, counts_fn, multilabel: bool) -> dict[str, float]:
    model.eval()
    counts = counts_fn(model) if comm.rank == 0 else torch.zeros(9, dtype=torch.float64)
    if comm.world_size > 1:
        comm.broadcast(counts, src=0, tag=EVAL_TAG)
    return metrics_from_counts(counts.numpy(), multilabel)


# ------------------------------------------------------------------------ the run
@dataclass
class MiniBatchJob:
    """Inputs of every rank (thread backend: objects; process backend: file paths)."""

    cfg: TrainConfig
    workdir: str
    graph: Graph | None = None
    graph_path: str | None = None
    partitioning: Any = None
    partition_path: str | None = None


def run_minibatch(cfg: TrainConfig, graph: Graph, part, topology, network) -> dict[str, Any]:
    """Launch the workers, return the record body (``run.py`` adds config and partition)."""
    import tempfile

    from cdfgnn.comm.launcher import launch

    check_sampling(cfg.fanouts, cfg.batch_size, cfg.layers)
    # partition kind and one part per worker: the method's check_compatible (TrainConfig)
    with tempfile.TemporaryDirectory(prefix="cdfgnn-minibatch-") as tmp:
        if cfg.backend == "thread" or cfg.workers == 1:
            job = MiniBatchJob(cfg, tmp, graph=graph, partitioning=part)
        else:
            gpath = cfg.graph or str(Path(tmp) / "graph.npz")
            if not cfg.graph:
                graph.save(gpath)
            ppath = str(Path(tmp) / "part.npz")
            part.save(ppath)
            job = MiniBatchJob(cfg, tmp, graph_path=gpath, partition_path=ppath)
        results = launch(rank_main, cfg.workers, topology=topology, backend=cfg.backend,
                         timeout_s=cfg.timeout_s, args=(job,), device=cfg.device)
    return assemble(cfg, topology, network, results)


def assemble(cfg: TrainConfig, topology, network, results: list[dict]) -> dict[str, Any]:
    from cdfgnn.train import energy
    from cdfgnn.train.record import timed_slice
    from cdfgnn.train.run import _assemble

    body = _assemble(cfg, topology, network, results)
    p = cfg.workers
    slow = np.asarray(network.slowdown)
    n_params = sum(v.numel() for v in results[0]["final_state"].values())
    red = np.zeros(p)
    red[0 if p == 1 else 1] = 2 * (p - 1) * n_params * 4 / p
    reduce_s = [network.comm_seconds(r, np.roll(red, r), np.roll((red > 0) * 2.0 * (p - 1), r))
                for r in range(p)]

    def net(r: int, pulls: dict, modes) -> float:
        b, m = np.zeros(p), np.zeros(p)
        for mode in modes:
            if mode in pulls:
                b += pulls[mode]["bytes"]
                m += pulls[mode]["msgs"]
        return network.comm_seconds(r, b, m)

    def rows(pulls: dict) -> int:
        return int(sum(v["rows"] for v in pulls.values()))

    def nbytes(pulls: dict) -> float:
        return float(sum(sum(v["bytes"]) for v in pulls.values()))

    def msgs(pulls: dict) -> float:
        return float(sum(sum(v["msgs"]) for v in pulls.values()))

    modes_all = ("sync", "background", "fill")
    compute_er = []
    for e, row in enumerate(body["epochs"]):
        nb = len(results[0]["steps"][e]["steps"])
        step_mod = np.zeros((nb, p))
        step_wall = np.zeros((nb, p))
        link = np.zeros(p)
        exposed = np.zeros(p)
        netw = np.zeros(p)
        comp = np.zeros(p)
        fetched = fbytes = fmsgs = 0.0
        for r, res in enumerate(results):
            ep = res["steps"][e]
            for i, st in enumerate(ep["steps"]):
                pulls = st["pull"]
                compute = max(st["cpu_s"] - st["pull_cpu_s"], 0.0) * slow[r]
                sync, bg = net(r, pulls, ("sync",)), net(r, pulls, ("background", "fill"))
                step_mod[i, r] = max(compute, bg) + sync + reduce_s[r]
                comp[r] += compute
                step_wall[i, r] = st["wall_s"]
                link[r] += sync + bg + reduce_s[r]
                netw[r] += sync + bg
                exposed[r] += sync + max(bg - compute, 0.0)
                fetched += rows(pulls)
                fbytes += nbytes(pulls)
                fmsgs += msgs(pulls)
            end = ep["end"]["pull"]
            fill = net(r, end, modes_all)
            link[r] += fill
            netw[r] += fill
            fetched += rows(end)
            fbytes += nbytes(end)
            fmsgs += msgs(end)
        compute_er.append(comp.tolist())
        steps_total = float(step_mod.max(axis=1).sum())
        row["modelled_s"] = max(steps_total, float(link.max()))
        row.update({
            "rows_fetched": fetched, "fetch_bytes": fbytes, "fetch_msgs": fmsgs,
            "step_time_s": float(step_wall.max(axis=1).mean()),
            "modelled_step_s": float(step_mod.max(axis=1).mean()),
            "modelled_network_s": float(netw.max()),
            "exposed_network_s": float(exposed.max()),
        })
        for key in results[0]["steps"][e]:
            if key not in ("steps", "end"):
                row[key] = float(sum(res["steps"][e][key] for res in results))
    sl = timed_slice(cfg.epochs, cfg.warmup)
    timed = body["epochs"][sl]
    mean = (lambda k: float(np.mean([r[k] for r in timed])) if timed else 0.0)
    # the schedule precompute (sampling every epoch, files, counts); the cache fill apart
    plan_s = max(res["plan"].get("precompute_s", res["plan"]["plan_wall_s"])
                 for res in results)
    train_s = float(sum(max(res["times"][e]["wall_s"] for res in results)
                        for e in range(cfg.epochs)))
    # the same in CPU seconds of each rank's thread (not inflated by a loaded host):
    # the rank's precompute over the CPU seconds of its training epochs, worst rank
    train_cpu = [sum(t["cpu_s"] for t in res["times"]) for res in results]
    pre_cpu = [res["plan"].get("precompute_cpu_s") for res in results]
    cpu_fr = [c / t for c, t in zip(pre_cpu, train_cpu) if c is not None and t > 0]
    setup = [res["plan"].pop("plan_pull")["pull"] for res in results]
    setup_rows = sum(rows(x) for x in setup)
    mb = {
        "track": "minibatch", "num_batches": body["epochs"][0]["batches"],
        "fanouts": list(cfg.fanouts), "batch_size": cfg.batch_size,
        "train_seeds": [res["train_seeds"] for res in results],
        "precompute_s": plan_s, "train_s": train_s,
        "precompute_fraction": plan_s / train_s if train_s > 0 else None,
        "precompute_cpu_s": max((c for c in pre_cpu if c is not None), default=None),
        "train_cpu_s": max(train_cpu, default=0.0),
        "precompute_cpu_fraction": max(cpu_fr) if cpu_fr else None,
        "setup_rows_fetched": setup_rows,
        "setup_fetch_bytes": sum(nbytes(x) for x in setup),
        "rows_fetched_per_epoch": mean("rows_fetched"),
        "rows_fetched_per_epoch_with_setup":
            float(np.mean([r["rows_fetched"] for r in body["epochs"]])) + setup_rows / cfg.epochs,
        "fetch_bytes_per_epoch": mean("fetch_bytes"),
        "fetch_bytes_per_epoch_with_setup": float(np.mean([r["fetch_bytes"] for r in
                                                           body["epochs"]]))
        + sum(nbytes(x) for x in setup) / cfg.epochs,
        "step_time_s": mean("step_time_s"), "modelled_step_s": mean("modelled_step_s"),
        "modelled_network_s": mean("modelled_network_s"),
        "exposed_network_s": mean("exposed_network_s"),
        "modelled_epoch_s": mean("modelled_s"),
        "workers": [{**res["plan"], **res["summary"], "train_cpu_s": tc}
                    for res, tc in zip(results, train_cpu)],
    }
    body["minibatch"] = mb
    body["model_time"]["epoch_s"] = mb["modelled_epoch_s"]
    body["summary"]["modelled_epoch_time_s"] = mb["modelled_epoch_s"]
    body["energy"] = {**results[0]["energy"], "modelled_cpu": energy.modelled_cpu_energy(
        [r["modelled_s"] for r in body["epochs"]], compute_er)}
    return body
