"""The sampled track's step rule, written once for its two time models.

Per step i of an epoch and rank r the models give four terms (seconds):

* ``compute``: the step's work outside pulls (CPU-measured: thread CPU seconds of the
  step less its pulls' x slowdown; device: the step's priced ledger less its
  ``pull/*`` phases);
* ``sync``: pulls on the critical path (``sync`` mode);
* ``background``: pulls for later batches and cache fills (``background``, ``fill``),
  which overlap the step's compute;
* ``reduce``: the gradient all-reduce;

and per rank the ``end`` term: pulls after the last step (a cache fill or swap in
``on_epoch_end``). Then (:func:`epoch_times`)

* step = ``max(compute, background) + sync + reduce``; the step of the run is the
  max over ranks (synchronous training);
* epoch = the sum of the steps, or the rank's total link time (every pull, the
  epoch's end included, + all-reduces) when that is larger;
* network = every pull's seconds, wherever it ran; exposed = its part on the
  critical path (``sync + max(background - compute, 0)``), worst rank.

The CPU-measured model prices the pulls and the all-reduce with the run's
NetworkModel (:func:`cpu_terms`); the device model prices them on the cluster
(:meth:`cdfgnn.pricing.cluster.Cluster.send_seconds`: link efficiency, NIC sharing and,
on a ``host_staged`` profile, the staging copies, as for the full-batch track) and adds
the pulls' own kernels (phase ``pull/<mode>``) to the pull's term, as the full-batch
device model adds codec and cache kernels to the communication side
(:func:`device_terms`).

The device model's counts are kept in the record (``model_time.device.inputs``,
``"track": "minibatch"``, equal steps stored once per rank), so
:func:`cdfgnn.pricing.record.reprice` prices a sampled run again without training.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from cdfgnn.cost.counts import STEP_PHASES
from cdfgnn.pricing.cluster import Cluster, allreduce_traffic
from cdfgnn.pricing.epoch import rank_pricers

SYNC_MODES = ("sync",)
BACKGROUND_MODES = ("background", "fill")
ALL_MODES = ("sync", "background", "fill")
#: ledger phase prefix of a pull's own kernels (cdfgnn/sampling/feature_store.py)
PULL_PHASE = "pull/"
TRACK = "minibatch"


# ---------------------------------------------------------------- the rule
@dataclass
class StepTerms:
    """One epoch's terms: ``[steps, ranks]`` arrays, ``end`` per rank."""

    compute: np.ndarray
    sync: np.ndarray
    background: np.ndarray
    reduce: np.ndarray
    end: np.ndarray


def step_seconds(compute, sync, background, reduce):
    """The step rule: prefetch overlaps compute; sync pulls and the all-reduce do not."""
    return np.maximum(compute, background) + sync + reduce


def _running_sum(a: np.ndarray) -> np.ndarray:
    """Per rank, the steps' values added in step order (the order the record always used)."""
    return np.add.accumulate(a, axis=0)[-1] if a.shape[0] else np.zeros(a.shape[1])


def epoch_times(t: StepTerms) -> dict[str, Any]:
    """The epoch of :class:`StepTerms` (module docstring): run-level seconds and, per rank,
    its compute, network (pulls), reduce and link seconds."""
    step = step_seconds(t.compute, t.sync, t.background, t.reduce)
    link = _running_sum(t.sync + t.background + t.reduce) + t.end
    network = _running_sum(t.sync + t.background) + t.end
    exposed = _running_sum(t.sync + np.maximum(t.background - t.compute, 0.0))
    worst = step.max(axis=1) if step.size else np.zeros(0)
    return {"epoch_s": max(float(worst.sum()), float(link.max())),
            "step_s": float(worst.mean()) if worst.size else 0.0,
            "network_s": float(network.max()), "exposed_s": float(exposed.max()),
            "compute_r": _running_sum(t.compute), "network_r": network,
            "reduce_r": _running_sum(t.reduce)}


# ---------------------------------------------------------------- traffic
def pull_traffic(pulls: dict, modes: Sequence[str], p: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and messages per peer of the pulls of ``modes`` (``{mode: {bytes, msgs}}``)."""
    b, m = np.zeros(p), np.zeros(p)
    for mode in modes:
        if mode in pulls:
            b += pulls[mode]["bytes"]
            m += pulls[mode]["msgs"]
    return b, m


def cpu_terms(results: list[dict], e: int, network, reduce_s: Sequence[float]) -> StepTerms:
    """Epoch ``e``'s terms on the CPU-measured model: thread CPU seconds x the rank's
    slowdown, the run's NetworkModel for the pulls; ``reduce_s`` per rank."""
    p = len(results)
    slow = np.asarray(network.slowdown)
    nb = len(results[0]["steps"][e]["steps"])
    t = StepTerms(*(np.zeros((nb, p)) for _ in range(4)), np.zeros(p))

    def net(r: int, pulls: dict, modes) -> float:
        return network.comm_seconds(r, *pull_traffic(pulls, modes, p))

    for r, res in enumerate(results):
        ep = res["steps"][e]
        for i, st in enumerate(ep["steps"]):
            t.compute[i, r] = max(st["cpu_s"] - st["pull_cpu_s"], 0.0) * slow[r]
            t.sync[i, r] = net(r, st["pull"], SYNC_MODES)
            t.background[i, r] = net(r, st["pull"], BACKGROUND_MODES)
            t.reduce[i, r] = reduce_s[r]
        t.end[r] = net(r, ep["end"]["pull"], ALL_MODES)
    return t


# ---------------------------------------------------------------- device counts
def _traffic_only(pulls: dict) -> dict:
    """``{mode: {bytes, msgs}}`` of a step's pulls (rows are not priced)."""
    return {m: {"bytes": list(v["bytes"]), "msgs": list(v["msgs"])}
            for m, v in sorted(pulls.items())}


def collect_step_inputs(results: list[dict], epochs: Sequence[int], n_params: int,
                        ) -> dict[str, Any]:
    """The counts of every rank, step and given epoch, equal steps stored once per rank:
    ``{"track", "epochs", "ranks": [{"patterns": [{ledger, pull}], "epoch_steps":
    [[pattern per step] per epoch], "end": [pulls per epoch], "reduce": {bytes, msgs}}]}``."""
    p = len(results)
    red_bytes, red_msgs = allreduce_traffic(p, n_params)
    ranks = []
    for r, res in enumerate(results):
        patterns, index, order = [], {}, []
        for e in epochs:
            row = []
            for st in res["steps"][e]["steps"]:
                item = {"ledger": st["ledger"], "pull": _traffic_only(st["pull"])}
                key = json.dumps(item, sort_keys=True)
                if key not in index:
                    index[key] = len(patterns)
                    patterns.append(item)
                row.append(index[key])
            order.append(row)
        ranks.append({"patterns": patterns, "epoch_steps": order,
                      "end": [_traffic_only(res["steps"][e]["end"]["pull"]) for e in epochs],
                      "reduce": {"bytes": red_bytes[r], "msgs": red_msgs[r]}})
    return {"track": TRACK, "epochs": list(epochs), "ranks": ranks}


def _sent(cluster: Cluster, r: int, sent: list[np.ndarray], msgs) -> float:
    """Cluster seconds of rank r's part of one exchange: ``sent[q]`` is rank q's bytes per
    peer (r receives ``sent[q][r]``)."""
    received = float(sum(b[r] for q, b in enumerate(sent) if q != r))
    return cluster.send_seconds(r, sent[r], msgs, received)


def _step_terms(items: list[dict], phases: list[dict], cluster: Cluster, i: int,
                t: StepTerms) -> None:
    """Fill step i of ``t`` from every rank's counts ``items`` and priced ``phases``."""
    p = len(items)
    for modes, field, phase_names in ((SYNC_MODES, t.sync, ("pull/sync",)),
                                      (BACKGROUND_MODES, t.background,
                                       ("pull/background", "pull/fill"))):
        traffic = [pull_traffic(it["pull"], modes, p) for it in items]
        sent = [b for b, _ in traffic]
        for r in range(p):
            kernels = sum(phases[r].get(k, 0.0) for k in phase_names)
            field[i, r] = _sent(cluster, r, sent, traffic[r][1]) + kernels
    for r in range(p):
        pulls = sum(v for k, v in phases[r].items() if k.startswith(PULL_PHASE))
        t.compute[i, r] = phases[r]["total"] - pulls


def _priced_patterns(inputs: dict, pricers: list) -> list[list[dict[str, float]]]:
    """Per rank, every distinct step pattern's priced phases: each pattern priced once,
    however many steps share it."""
    return [[pricers[r].phases(pat["ledger"]) for pat in rk["patterns"]]
            for r, rk in enumerate(inputs["ranks"])]


def device_terms(inputs: dict, pricers: list, cluster: Cluster) -> list[StepTerms]:
    """Per epoch in ``inputs``: the device model's :class:`StepTerms`."""
    ranks = inputs["ranks"]
    p = len(ranks)
    priced = _priced_patterns(inputs, pricers)
    red = [np.asarray(rk["reduce"]["bytes"], dtype=np.float64) for rk in ranks]
    reduce_s = np.array([_sent(cluster, r, red, np.asarray(ranks[r]["reduce"]["msgs"]))
                         for r in range(p)])
    out = []
    for j in range(len(inputs["epochs"])):
        rows = [rk["epoch_steps"][j] for rk in ranks]     # pattern index of every step
        nb = len(rows[0])
        t = StepTerms(*(np.zeros((nb, p)) for _ in range(3)), np.tile(reduce_s, (nb, 1)),
                      np.zeros(p))
        for i in range(nb):
            _step_terms([ranks[r]["patterns"][rows[r][i]] for r in range(p)],
                        [priced[r][rows[r][i]] for r in range(p)], cluster, i, t)
        traffic = [pull_traffic(rk["end"][j], ALL_MODES, p) for rk in ranks]
        t.end[:] = [_sent(cluster, r, [b for b, _ in traffic], traffic[r][1]) for r in range(p)]
        out.append(t)
    return out


def step_device_model(inputs: dict, cluster: Cluster, timed: Sequence[int] | None = None,
                      ) -> dict[str, Any]:
    """Device-modelled times of the sampled epochs in ``inputs`` on ``cluster``: the keys
    of :func:`cdfgnn.pricing.epoch.device_model` (per rank ``vertex_s`` = the pulls,
    ``overhead_s`` = the pulls' kernels) and the mini-batch times ``step_s``,
    ``network_s``, ``exposed_s``; ``epochs_s`` for every epoch, the rest the mean over the
    positions ``timed`` (default: all)."""
    pricers = rank_pricers(cluster)
    every = [epoch_times(t) for t in device_terms(inputs, pricers, cluster)]
    keep = list(range(len(every))) if timed is None else list(timed)
    epochs = [every[i] for i in keep]
    p = cluster.topology.num_parts
    mean = (lambda k: float(np.mean([e[k] for e in epochs])) if epochs else 0.0)
    per_rank = (lambda k: np.mean([e[k] for e in epochs], axis=0).tolist() if epochs
                else [0.0] * p)
    sub = inputs if timed is None else select_step_epochs(inputs, keep)
    phases = _rank_phase_seconds(sub, _priced_patterns(sub, pricers))
    overhead = [sum(v for k, v in ph.items() if k.startswith(PULL_PHASE)) for ph in phases]
    # one part per worker: the part's compute is the step's outside pulls, optimizer and
    # all-reduce (the full-batch model's part_compute_max_s)
    part = [sum(v for k, v in ph.items() if not k.startswith(PULL_PHASE)
                and k not in STEP_PHASES) for ph in phases]
    phases_s: dict[str, float] = {}
    for ph in phases:
        for k, v in ph.items():
            phases_s[k] = phases_s.get(k, 0.0) + v
    return {"epoch_s": mean("epoch_s"), "epochs_s": [e["epoch_s"] for e in every],
            "step_s": mean("step_s"), "network_s": mean("network_s"),
            "exposed_s": mean("exposed_s"),
            "compute_s": per_rank("compute_r"), "vertex_s": per_rank("network_r"),
            "reduce_s": per_rank("reduce_r"), "overhead_s": overhead,
            "part_compute_max_s": part,
            "comm_s": (np.asarray(per_rank("network_r")) + per_rank("reduce_r")).tolist(),
            "phases_s": dict(sorted(phases_s.items()))}


def select_step_epochs(inputs: dict, keep: Sequence[int]) -> dict:
    """The sampled counts of the epochs at positions ``keep`` (patterns renumbered in order
    of first use, as :func:`collect_step_inputs` would)."""
    ranks = []
    for rk in inputs["ranks"]:
        patterns, index, order = [], {}, []
        for i in keep:
            row = []
            for k in rk["epoch_steps"][i]:
                if k not in index:
                    index[k] = len(patterns)
                    patterns.append(rk["patterns"][k])
                row.append(index[k])
            order.append(row)
        ranks.append({**rk, "patterns": patterns, "epoch_steps": order,
                      "end": [rk["end"][i] for i in keep]})
    return {**inputs, "epochs": [inputs["epochs"][i] for i in keep], "ranks": ranks}


def each_step(inputs: dict):
    """(rank, counts) of every step of every epoch in ``inputs``."""
    for r, rk in enumerate(inputs["ranks"]):
        for row in rk["epoch_steps"]:
            for k in row:
                yield r, rk["patterns"][k]


def _rank_phase_seconds(inputs: dict, priced: list[list[dict[str, float]]],
                        ) -> list[dict[str, float]]:
    """Per rank, priced seconds per ledger phase, summed over its steps, mean per epoch
    (each distinct pattern's price times the steps that share it)."""
    n = max(len(inputs["epochs"]), 1)
    out = []
    for r, rk in enumerate(inputs["ranks"]):
        uses = Counter(k for row in rk["epoch_steps"] for k in row)
        acc: dict[str, float] = {}
        for k, times in sorted(uses.items()):
            for phase, v in priced[r][k].items():
                if phase != "total":
                    acc[phase] = acc.get(phase, 0.0) + v * times
        out.append({phase: v / n for phase, v in acc.items()})
    return out
