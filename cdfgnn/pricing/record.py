"""A run's counts priced once, and priced again: the record's ``model_time.device``.

:func:`price_counts` prices either track's counts on a :class:`Cluster` (the full-batch
epoch rule of :mod:`cdfgnn.pricing.epoch` or the sampled step rule of
:mod:`cdfgnn.pricing.step`). :func:`device_section` is what ``cdfgnn train`` calls once per
run: it resolves the cluster once, prices every epoch's counts and keeps the timed ones
in the record (``inputs``), so :func:`reprice` prices the same run on other devices, another
network or other efficiency constants without training (``cdfgnn compare`` sweeps, the
claims' device columns).
"""
from __future__ import annotations

from typing import Any, Sequence

from cdfgnn.cost.counts import FP64_KIND, Ledger
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology
from cdfgnn.pricing.cluster import Cluster, resolve_cluster
from cdfgnn.pricing.efficiency import Efficiency
from cdfgnn.pricing.epoch import device_model, per_epoch, select_epochs
from cdfgnn.pricing.hardware import get_gpu, run_gpus
from cdfgnn.pricing.step import TRACK, each_step, select_step_epochs, step_device_model


def sampled(inputs: dict) -> bool:
    """Counts of the sampled track (:mod:`cdfgnn.pricing.step`): a ledger per step."""
    return inputs.get("track") == TRACK


def _every_ledger(inputs: dict):
    """Every counted ledger of ``inputs``: each rank's per epoch (full batch) or per step
    (sampled track), every counted epoch."""
    if sampled(inputs):
        return (item["ledger"] for _, item in each_step(inputs))
    return (item["ledger"] for ranks in per_epoch(inputs) for item in ranks)


def ledger_totals(inputs: dict) -> dict[str, dict[str, float]]:
    """``{kind: {field: mean per epoch, summed over ranks (and steps)}}`` of the counted
    epochs."""
    total = Ledger()
    for led in _every_ledger(inputs):
        total.merge(Ledger.from_dict(led))
    n = max(len(inputs["epochs"]), 1)
    return {k: {f: v / n for f, v in fields.items()} for k, fields in total.totals().items()}


def price_counts(inputs: dict, cluster: Cluster, timed: Sequence[int] | None = None,
                 ) -> dict[str, Any]:
    """Either track's counts priced on ``cluster``: ``epochs_s`` of every epoch, the rest
    the mean over the positions ``timed`` (default: all)."""
    if sampled(inputs):
        return step_device_model(inputs, cluster, timed)
    return device_model(inputs, cluster, timed)


def select(inputs: dict, keep: Sequence[int]) -> dict:
    """Either track's counts of the epochs at positions ``keep``."""
    return select_step_epochs(inputs, keep) if sampled(inputs) else select_epochs(inputs, keep)


def section(inputs: dict, cluster: Cluster, model: dict[str, Any]) -> dict[str, Any]:
    """The record's ``model_time.device`` for counts ``inputs`` priced as ``model``."""
    return {"profiles": [g.name for g in cluster.gpus], "default": cluster.default_gpus,
            "network": cluster.link.name, "efficiency": cluster.eff.describe(),
            **model, "ledger_totals": ledger_totals(inputs), "inputs": inputs}


def device_section(inputs: dict, devices, network, topology: Topology,
                   timed: Sequence[int] | None = None, eff: Efficiency | None = None,
                   ) -> dict[str, Any]:
    """Price a run's counts once: the record's ``model_time.device`` for the epochs at
    positions ``timed`` of ``inputs`` (default: all; its ``inputs`` keep those only),
    ``epochs_s`` for every epoch of ``inputs``."""
    cluster = resolve_cluster(devices, network, topology, eff)
    model = price_counts(inputs, cluster, timed)
    kept = inputs if timed is None else select(inputs, timed)
    return section(kept, cluster, model)


def reprice(record: dict, devices=None, network=None, eff: Efficiency | None = None,
            ) -> dict[str, Any]:
    """Price a run record's counts again on other devices and/or another network and/or
    other efficiency constants (no training). ``devices``: a ``--devices`` spec (default:
    the record's profiles); ``network``: a profile name, path or LinkProfile (default: the
    record's); ``eff``: default the shipped constants."""
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
    if cfg.get("dtype") == "float64" and not sampled(inputs):   # the sampled track: float32
        inputs = float64_products(inputs)
    cluster = resolve_cluster(gpus, network or dev["network"], topology, eff)
    return price_counts(inputs, cluster)


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
