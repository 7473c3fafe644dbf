"""The full-batch epoch rule: per-rank counts of an epoch priced on a :class:`Cluster`.

Per rank r and epoch e (the overlap rule, as the CPU-measured model's
``cdfgnn.train.assemble.assemble_ranks``):

* ``compute`` = the priced ledger of every phase but codec and cache;
* ``vertex`` = the cluster's seconds for the vertex rows r sent
  (:meth:`~cdfgnn.pricing.cluster.Cluster.send_seconds`: link efficiency, NIC sharing,
  staging copies) + the codec and cache phases priced as device kernels
  (communication-side work, as the CPU-measured model counts it);
* ``reduce`` = the same for the rest of the traffic (the gradient all-reduce);
* epoch = ``compute + vertex + reduce`` or, in an epoch whose communication overlapped
  computation, ``max(compute, vertex) + reduce``; the run's epoch is the max over ranks,
  and the result gives the mean over the epochs asked for;
* ``exposed`` = the vertex seconds on the critical path (``vertex``, or ``max(vertex -
  compute, 0)`` when overlapped), worst rank, mean over epochs;
* one worker per part (a rank holding several parts counts each into ``part_ledgers``):
  ``parallel_s`` = the largest part's compute (every phase but codec, cache and
  :data:`~cdfgnn.cost.counts.STEP_PHASES`) of any rank + the largest ``reduce``, per
  epoch, mean over the epochs.

The counts (:func:`collect_inputs`) keep each rank's distinct epochs once:
``{"epochs": [...], "ranks": [{"patterns": [inputs, ...], "epoch_pattern": [i, ...]}]}``.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from cdfgnn.comm.tags import VERTEX_TAGS
from cdfgnn.cost.counts import STEP_PHASES
from cdfgnn.pricing.cluster import Cluster
from cdfgnn.pricing.efficiency import Efficiency
from cdfgnn.pricing.hardware import GpuProfile
from cdfgnn.pricing.roofline import price

#: phases priced on the communication side (as the CPU-measured model's overhead)
COMM_SIDE = ("codec", "cache")


def epoch_inputs(ledger: dict, snapshot: dict, overlap: bool, p: int) -> dict[str, Any]:
    """One rank's counts of one epoch: its ledger and the bytes and messages it sent
    to every rank, vertex rows apart from the rest (evaluation traffic left out)."""
    vb, vm, ob, om = (np.zeros(p, dtype=np.int64) for _ in range(4))
    for tag, d in snapshot.items():
        if tag.startswith(VERTEX_TAGS):
            vb += np.asarray(d["bytes"], dtype=np.int64)
            vm += np.asarray(d["msgs"], dtype=np.int64)
        elif not tag.startswith("eval"):
            ob += np.asarray(d["bytes"], dtype=np.int64)
            om += np.asarray(d["msgs"], dtype=np.int64)
    return {"ledger": ledger, "vertex_bytes": vb.tolist(), "vertex_msgs": vm.tolist(),
            "other_bytes": ob.tolist(), "other_msgs": om.tolist(), "overlap": bool(overlap)}


def compact(per_epoch: Sequence[Sequence[dict]], epochs: Sequence[int]) -> dict[str, Any]:
    """``[epoch][rank] -> counts`` in the compact form (equal epochs of a rank once)."""
    p = len(per_epoch[0]) if per_epoch else 0
    ranks = []
    for r in range(p):
        patterns, index, order = [], {}, []
        for row in per_epoch:
            key = json.dumps(row[r], sort_keys=True)
            if key not in index:
                index[key] = len(patterns)
                patterns.append(row[r])
            order.append(index[key])
        ranks.append({"patterns": patterns, "epoch_pattern": order})
    return {"epochs": list(epochs), "ranks": ranks}


def collect_inputs(results: list[dict], epochs: Sequence[int]) -> dict[str, Any]:
    """The counts of every rank and of the given epochs, equal epochs stored once."""
    p = len(results)
    rows = []
    for e in epochs:
        row = []
        for res in results:
            item = epoch_inputs(res["ledgers"][e], res["traffic"][e] if res.get("traffic")
                                else {}, res["times"][e].get("overlap", False), p)
            if res.get("part_ledgers"):   # a rank holding several parts: each part's counts
                item["part_ledgers"] = res["part_ledgers"][e]
            if res.get("arc_share"):      # its aggregation matrix's column locality
                item["arc_share"] = res["arc_share"]
            row.append(item)
        rows.append(row)
    return compact(rows, epochs)


def per_epoch(inputs: dict) -> list[list[dict]]:
    """``[epoch][rank] -> counts`` from the compact form."""
    ranks = inputs["ranks"]
    return [[rk["patterns"][rk["epoch_pattern"][i]] for rk in ranks]
            for i in range(len(inputs["epochs"]))]


def select_epochs(inputs: dict, keep: Sequence[int]) -> dict:
    """The compact counts of the epochs at positions ``keep`` of ``inputs["epochs"]``
    (patterns renumbered in order of first use, as :func:`collect_inputs` would)."""
    rows = per_epoch(inputs)
    return compact([rows[i] for i in keep], [inputs["epochs"][i] for i in keep])


class Pricer:
    """Prices ledgers on one GPU, each distinct ledger once."""

    def __init__(self, gpu: GpuProfile, eff: Efficiency):
        self.gpu, self.eff, self._memo = gpu, eff, {}

    def phases(self, ledger: dict, share: Sequence[float] | None = None) -> dict[str, float]:
        """Seconds per phase of a ledger in its dict form (``Ledger.to_dict``); ``share``:
        the column locality of the rank's aggregation matrix (None: uniform)."""
        key = json.dumps([ledger, share], sort_keys=True)
        if key not in self._memo:
            self._memo[key] = (price(ledger, self.gpu, self.eff, share) if ledger
                               else {"total": 0.0})
        return self._memo[key]


def rank_pricers(cluster: Cluster) -> list[Pricer]:
    """A :class:`Pricer` per rank, one shared by the ranks of each profile."""
    shared: dict[str, Pricer] = {}
    return [shared.setdefault(g.name, Pricer(g, cluster.eff)) for g in cluster.gpus]


def device_model(inputs: dict, cluster: Cluster, timed: Sequence[int] | None = None,
                 ) -> dict[str, Any]:
    """Device-modelled times of the epochs in ``inputs`` on ``cluster``: ``epochs_s`` for
    every epoch, everything else the mean over the positions ``timed`` (default: all)."""
    p = cluster.topology.num_parts
    pricers = rank_pricers(cluster)
    rows = per_epoch(inputs)
    epoch_s = np.zeros(len(rows))
    exposed = np.zeros(len(rows))
    # compute, vertex, reduce, codec+cache, part compute
    parts = np.zeros((len(rows), p, 5))
    phase_sum = np.zeros(len(rows), dtype=object)
    part_max: dict[tuple[int, int], float] = {}
    for i, ranks in enumerate(rows):
        recv = {k: np.sum([r[f"{k}_bytes"] for r in ranks], axis=0) for k in ("vertex", "other")}
        worst, hidden, sums = 0.0, 0.0, {}
        for r, item in enumerate(ranks):
            phases = pricers[r].phases(item["ledger"], item.get("arc_share"))
            side = sum(v for k, v in phases.items() if k in COMM_SIDE)
            compute = phases["total"] - side
            vertex = side + cluster.exchange_seconds(r, item["vertex_bytes"],
                                                     item["vertex_msgs"], recv["vertex"][r])
            reduce = cluster.send_seconds(r, item["other_bytes"], item["other_msgs"],
                                          recv["other"][r])
            overlap = item["overlap"]
            t = (max(compute, vertex) if overlap else compute + vertex) + reduce
            key = (r, id(item))            # a rank's epoch pattern: its parts priced once
            if key not in part_max:
                part_max[key] = _part_compute_max(pricers[r], item, phases)
            parts[i, r] = (compute, vertex, reduce, side, part_max[key])
            worst = max(worst, t)
            hidden = max(hidden, max(vertex - compute, 0.0) if overlap else vertex)
            for k, v in phases.items():
                if k != "total":
                    sums[k] = sums.get(k, 0.0) + v
        epoch_s[i], exposed[i], phase_sum[i] = worst, hidden, sums
    return _summary(epoch_s, exposed, parts, phase_sum,
                    list(range(len(rows))) if timed is None else list(timed), p)


def _summary(epoch_s, exposed, parts, phase_sum, timed: list[int], p: int) -> dict[str, Any]:
    """Means over the ``timed`` epochs (per rank where the key is a list)."""
    if not timed:
        zeros = [0.0] * p
        return {"epoch_s": 0.0, "epochs_s": epoch_s.tolist(), "exposed_s": 0.0,
                "compute_s": zeros, "comm_s": zeros, "vertex_s": zeros, "reduce_s": zeros,
                "overhead_s": zeros, "part_compute_max_s": zeros, "parallel_s": 0.0,
                "phases_s": {}}
    sel = parts[timed]
    mean = (lambda j: sel[:, :, j].mean(axis=0).tolist())
    phases: dict[str, float] = {}
    for sums in phase_sum[timed]:
        for k, v in sums.items():
            phases[k] = phases.get(k, 0.0) + v
    return {"epoch_s": float(epoch_s[timed].mean()), "epochs_s": epoch_s.tolist(),
            "exposed_s": float(exposed[timed].mean()),
            "compute_s": mean(0),
            "comm_s": (sel[:, :, 1] + sel[:, :, 2]).mean(axis=0).tolist(),
            # per rank, mean over epochs: the communication side split as the CPU-measured
            # model's ranks split it (vertex includes the codec and cache kernels)
            "vertex_s": mean(1), "reduce_s": mean(2), "overhead_s": mean(3),
            "part_compute_max_s": mean(4),
            # one worker per part (CoFree Table 1): the largest part's compute of any rank
            # + the all-reduce, per epoch
            "parallel_s": float((sel[:, :, 4].max(axis=1) + sel[:, :, 2].max(axis=1)).mean()),
            # summed over ranks, mean over epochs
            "phases_s": {k: v / len(timed) for k, v in sorted(phases.items())}}


def _part_compute_max(pricer: Pricer, item: dict, phases: dict[str, float]) -> float:
    """The largest compute side (every phase but codec, cache and the STEP_PHASES) of one
    part of the rank; a rank holding one part has no ``part_ledgers``: its ledger is that
    part's, plus the STEP_PHASES (as the CPU-measured ``part_cpu_max_s`` times the part)."""
    def compute(priced: dict[str, float]) -> float:
        return sum(v for k, v in priced.items()
                   if k != "total" and k not in COMM_SIDE and k not in STEP_PHASES)
    if "part_ledgers" in item:
        share = item.get("arc_share")
        return max((compute(pricer.phases(led, share)) for led in item["part_ledgers"]),
                   default=0.0)
    return compute(phases)
