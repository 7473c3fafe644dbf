"""The device-modelled epoch: the operation ledger priced on GPU profiles, plus the
network model's time for the counted bytes.

Per rank r and timed epoch e (the overlap rule of :func:`cdfgnn.train.run._assemble`):

* ``compute`` = the priced ledger of every phase but codec and cache;
* ``vertex`` = NetworkModel seconds of the vertex rows + the codec and cache phases
  priced as device kernels (communication-side work, as the CPU-measured model
  counts it) + on a ``host_staged`` network a device-to-host copy of the bytes r sends
  and a host-to-device copy of the bytes it receives (these copies replace the
  intra-host link, which for such a profile is the staging itself);
* ``reduce`` = the same for the rest of the traffic (the gradient all-reduce);
* epoch = ``compute + vertex + reduce`` or, in an epoch whose communication overlapped
  computation, ``max(compute, vertex) + reduce``; the record gives the mean over timed
  epochs of the max over ranks;
* one worker per part (a rank holding several parts counts each into ``part_ledgers``):
  ``parallel_s`` = the largest part's compute (every phase but codec, cache and
  :data:`~cdfgnn.cost.ledger.STEP_PHASES`) of any rank + the largest ``reduce``, per
  epoch, mean over timed epochs.

Counts are kept in the record (``model_time.device.inputs``, epochs with equal counts
stored once), so :func:`reprice` prices the same run on other devices or another
network without training again (``cdfgnn compare`` sweeps).
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from cdfgnn.comm.network import NetworkModel, get_profile
from cdfgnn.comm.tags import VERTEX_TAGS
from cdfgnn.cost.efficiency import Efficiency, load_efficiency
from cdfgnn.cost.hardware import GpuProfile, get_gpu, run_gpus
from cdfgnn.cost.ledger import FP64_KIND, STEP_PHASES, Ledger
from cdfgnn.cost.pricing import host_copy_seconds, price
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology

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


def collect_inputs(results: list[dict], epochs: Sequence[int]) -> dict[str, Any]:
    """The counts of every rank and of the given epochs, equal epochs stored once:
    ``{"epochs": [...], "ranks": [{"patterns": [inputs, ...], "epoch_pattern": [i, ...]}]}``."""
    p = len(results)
    ranks = []
    for res in results:
        patterns, index, order = [], {}, []
        for e in epochs:
            item = epoch_inputs(res["ledgers"][e], res["traffic"][e] if res.get("traffic")
                                else {}, res["times"][e].get("overlap", False), p)
            if res.get("part_ledgers"):   # a rank holding several parts: each part's counts
                item["part_ledgers"] = res["part_ledgers"][e]
            key = json.dumps(item, sort_keys=True)
            if key not in index:
                index[key] = len(patterns)
                patterns.append(item)
            order.append(index[key])
        ranks.append({"patterns": patterns, "epoch_pattern": order})
    return {"epochs": list(epochs), "ranks": ranks}


def _per_epoch(inputs: dict) -> list[list[dict]]:
    """``[epoch][rank] -> counts`` from :func:`collect_inputs`' compact form."""
    ranks = inputs["ranks"]
    return [[rk["patterns"][rk["epoch_pattern"][i]] for rk in ranks]
            for i in range(len(inputs["epochs"]))]


class Pricer:
    """Prices ledgers on one GPU, each distinct ledger once."""

    def __init__(self, gpu: GpuProfile, eff: Efficiency):
        self.gpu, self.eff, self._memo = gpu, eff, {}

    def phases(self, ledger: dict) -> dict[str, float]:
        key = json.dumps(ledger, sort_keys=True)
        if key not in self._memo:
            self._memo[key] = price(Ledger.from_dict(ledger), self.gpu, self.eff)
        return self._memo[key]


def rank_pricers(gpus: Sequence[GpuProfile], eff: Efficiency) -> list[Pricer]:
    """A :class:`Pricer` per rank, one shared by the ranks of each profile."""
    shared: dict[str, Pricer] = {}
    return [shared.setdefault(g.name, Pricer(g, eff)) for g in gpus]


def device_model(inputs: dict, gpus: Sequence[GpuProfile], network, topology: Topology,
                 eff: Efficiency | None = None) -> dict[str, Any]:
    """Device-modelled times of the epochs in ``inputs`` on ``gpus`` (one per rank) and
    ``network`` (a link profile name, path or LinkProfile)."""
    eff = eff or load_efficiency()
    link = get_profile(network)
    net = NetworkModel(topology, link)
    p = topology.num_parts
    host = np.arange(p) // topology.devices_per_host
    per_rank_pricer = rank_pricers(gpus, eff)
    rows = _per_epoch(inputs)
    epoch_s = np.zeros(len(rows))
    parts = np.zeros((len(rows), p, 5))   # compute, vertex, reduce, codec+cache, part compute
    phase_sum: dict[str, float] = {}
    part_max: dict[tuple[int, int], float] = {}
    for i, ranks in enumerate(rows):
        recv = {k: np.sum([r[f"{k}_bytes"] for r in ranks], axis=0) for k in ("vertex", "other")}
        worst = 0.0
        for r, item in enumerate(ranks):
            phases = per_rank_pricer[r].phases(item["ledger"])
            side = sum(v for k, v in phases.items() if k in COMM_SIDE)
            compute = phases["total"] - side
            vertex = side + link_seconds(net, link, r, host, item["vertex_bytes"],
                                          item["vertex_msgs"], recv["vertex"][r], gpus[r], eff)
            reduce = link_seconds(net, link, r, host, item["other_bytes"], item["other_msgs"],
                                   recv["other"][r], gpus[r], eff)
            t = (max(compute, vertex) if item["overlap"] else compute + vertex) + reduce
            key = (r, id(item))            # a rank's epoch pattern: its parts priced once
            if key not in part_max:
                part_max[key] = _part_compute_max(per_rank_pricer[r], item, phases)
            parts[i, r] = (compute, vertex, reduce, side, part_max[key])
            worst = max(worst, t)
            for k, v in phases.items():
                if k != "total":
                    phase_sum[k] = phase_sum.get(k, 0.0) + v
        epoch_s[i] = worst
    n = max(len(rows), 1)
    return {"epoch_s": float(epoch_s.mean()) if len(rows) else 0.0,
            "epochs_s": epoch_s.tolist(),
            "compute_s": parts[:, :, 0].mean(axis=0).tolist() if len(rows) else [0.0] * p,
            "comm_s": (parts[:, :, 1] + parts[:, :, 2]).mean(axis=0).tolist()
            if len(rows) else [0.0] * p,
            # per rank, mean over epochs: the communication side split as the CPU-measured
            # model's ranks split it (vertex includes the codec and cache kernels)
            **{f"{k}_s": parts[:, :, j].mean(axis=0).tolist() if len(rows) else [0.0] * p
               for j, k in ((1, "vertex"), (2, "reduce"), (3, "overhead"),
                            (4, "part_compute_max"))},
            # one worker per part (CoFree Table 1): the largest part's compute of any rank
            # + the all-reduce, per epoch
            "parallel_s": float((parts[:, :, 4].max(axis=1) + parts[:, :, 2].max(axis=1)
                                 ).mean()) if len(rows) else 0.0,
            # summed over ranks, mean over epochs
            "phases_s": {k: v / n for k, v in sorted(phase_sum.items())}}


def _part_compute_max(pricer: Pricer, item: dict, phases: dict[str, float]) -> float:
    """The largest compute side (every phase but codec, cache and the STEP_PHASES) of one
    part of the rank; a rank holding one part has no ``part_ledgers``: its ledger is that
    part's, plus the STEP_PHASES (as the CPU-measured ``part_cpu_max_s`` times the part)."""
    def compute(priced: dict[str, float]) -> float:
        return sum(v for k, v in priced.items()
                   if k != "total" and k not in COMM_SIDE and k not in STEP_PHASES)
    if "part_ledgers" in item:
        return max((compute(pricer.phases(led)) for led in item["part_ledgers"]), default=0.0)
    return compute(phases)


def link_seconds(net: NetworkModel, link, r: int, host: np.ndarray, bytes_to, msgs_to,
                  received: float, gpu: GpuProfile, eff: Efficiency) -> float:
    """Network seconds of what rank r sent; on a host-staged profile the intra-host link
    is the staging itself, priced as the D2H + H2D copies on r's host link instead."""
    b = np.asarray(bytes_to, dtype=np.float64)
    if link.host_staged:
        sent = float(b.sum() - b[r])
        b = np.where(host == host[r], 0.0, b)
        return (net.comm_seconds(r, b, np.asarray(msgs_to, dtype=np.float64))
                + host_copy_seconds(sent, gpu, eff) + host_copy_seconds(received, gpu, eff))
    return net.comm_seconds(r, b, np.asarray(msgs_to, dtype=np.float64))


def _sampled(inputs: dict) -> bool:
    """Counts of the sampled track (:mod:`cdfgnn.train.step_time`): a ledger per step."""
    from cdfgnn.train.step_time import TRACK
    return inputs.get("track") == TRACK


def _every_ledger(inputs: dict):
    """Every counted ledger of ``inputs``: each rank's per epoch (full batch) or per step
    (sampled track), every counted epoch."""
    if _sampled(inputs):
        from cdfgnn.train.step_time import each_step
        return (item["ledger"] for _, item in each_step(inputs))
    return (item["ledger"] for ranks in _per_epoch(inputs) for item in ranks)


def ledger_totals(inputs: dict) -> dict[str, dict[str, float]]:
    """``{kind: {field: mean per epoch, summed over ranks (and steps)}}`` of the counted
    epochs."""
    total = Ledger()
    for led in _every_ledger(inputs):
        total.merge(Ledger.from_dict(led))
    n = max(len(inputs["epochs"]), 1)
    return {k: {f: v / n for f, v in fields.items()} for k, fields in total.totals().items()}


def price_counts(inputs: dict, gpus: Sequence[GpuProfile], network, topology: Topology,
                 eff: Efficiency | None = None) -> dict[str, Any]:
    """:func:`device_model` of full-batch counts, or the sampled track's step model
    (:func:`cdfgnn.train.step_time.step_device_model`) of sampled ones."""
    if _sampled(inputs):
        from cdfgnn.train.step_time import step_device_model
        return step_device_model(inputs, gpus, network, topology, eff)
    return device_model(inputs, gpus, network, topology, eff)


def device_section(inputs: dict, devices, workers: int, network, topology: Topology,
                   eff: Efficiency | None = None) -> dict[str, Any]:
    """The record's ``model_time.device``: profiles, times, ledger totals and the counts
    (either track's: :func:`price_counts`)."""
    eff = eff or load_efficiency()
    gpus, default = run_gpus(devices, workers)
    model = price_counts(inputs, gpus, network, topology, eff)
    return {"profiles": [g.name for g in gpus], "default": default,
            "network": get_profile(network).name, "efficiency": eff.describe(),
            **model, "ledger_totals": ledger_totals(inputs), "inputs": inputs}


def reprice(record: dict, devices=None, network=None, eff: Efficiency | None = None,
            ) -> dict[str, Any]:
    """Price a run record's counts again on other devices and/or another network (no
    training). ``devices``: a ``--devices`` spec (default: the record's profiles)."""
    dev = record["model_time"].get("device")
    if not dev:
        raise CdfgnnError("this run record has no device-model counts (model_time.device; "
                          "a --count-ops false run, or a trainer that does not count)")
    cfg = record["config"]
    workers = int(cfg["workers"])
    topology = Topology.for_workers(workers, int(cfg.get("hosts") or 1))
    gpus = ([get_gpu(n) for n in dev["profiles"]] if devices is None
            else run_gpus(devices, workers)[0])
    inputs = dev["inputs"]
    if cfg.get("dtype") == "float64" and not _sampled(inputs):   # the sampled track: float32
        inputs = float64_products(inputs)
    return price_counts(inputs, gpus, network or dev["network"], topology, eff)


def float64_products(inputs: dict) -> dict:
    """The counts of a float64 run with its products as FP64 kinds. Records made before
    the ledger told float64 products apart count them as ``dense`` / ``spmm``; every
    product of a ``--dtype float64`` run is float64, so they are relabelled. Counts that
    already have an FP64 kind are returned as they are."""
    ledgers = [pat["ledger"] for rk in inputs["ranks"] for pat in rk["patterns"]]
    if any(k in FP64_KIND.values() for led in ledgers for kinds in led.values() for k in kinds):
        return inputs

    def relabel(led: dict) -> dict:
        return {ph: {FP64_KIND.get(k, k): f for k, f in kinds.items()} for ph, kinds in led.items()}
    return {**inputs, "ranks": [{**rk, "patterns": [{**pat, "ledger": relabel(pat["ledger"])}
                                                    for pat in rk["patterns"]]}
                                for rk in inputs["ranks"]]}
