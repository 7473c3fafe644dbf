"""The sampled track's operation ledger and device-modelled step (cdfgnn/pricing/step.py)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import cdfgnn.train.minibatch as minibatch
from cdfgnn.comm.network import NetworkModel, get_profile
from cdfgnn.partition.base import Topology
from cdfgnn.pricing import step as step_time
from cdfgnn.pricing.cluster import allreduce_traffic, effective_link, resolve_cluster
from cdfgnn.pricing.efficiency import load_efficiency
from cdfgnn.pricing.epoch import Pricer
from cdfgnn.pricing.hardware import get_gpu
from cdfgnn.pricing.record import reprice
from cdfgnn.pricing.step import (BACKGROUND_MODES, SYNC_MODES, StepTerms, epoch_times,
                                 pull_traffic)
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training

SAMPLED = ("rapidgnn", "distdgl-metis", "distdgl-random")


@pytest.fixture(scope="module")
def gfile(tmp_path_factory, make_graph):
    path = tmp_path_factory.mktemp("sampled_ledger") / "g.npz"
    make_graph(n=600, seed=5, isolated=0).save(path)
    return str(path)


def _cfg(gfile, method, **kw):
    base = dict(graph=gfile, dataset=None, method=method, model="sage", workers=2, hosts=2,
                epochs=3, warmup=1, fanouts=[4, 4], batch_size=32, hidden=16,
                network="rapidgnn-chameleon", devices="p100")
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def records(gfile):
    return {m: run_training(_cfg(gfile, m)) for m in SAMPLED}


def test_step_rule_by_hand():
    # two steps, two ranks: prefetch hides behind compute, sync pulls and the all-reduce don't
    t = StepTerms(compute=np.array([[3.0, 1.0], [2.0, 2.0]]),
                  sync=np.array([[0.0, 1.0], [0.5, 0.0]]),
                  background=np.array([[2.0, 4.0], [0.0, 0.0]]),
                  reduce=np.full((2, 2), 0.25), end=np.array([0.0, 10.0]))
    out = epoch_times(t)
    # steps: max(3,2)+0+.25=3.25 | max(1,4)+1+.25=5.25 -> 5.25; 2.75 | 2.25 -> 2.75
    assert out["step_s"] == pytest.approx((5.25 + 2.75) / 2)
    # rank 1's link time (1 + 4 + .25 + 0 + 0 + .25 + 10 = 15.5) exceeds the steps' 8.0
    assert out["epoch_s"] == pytest.approx(15.5)
    assert out["network_s"] == pytest.approx(15.0)          # rank 1: 1 + 4 + 10
    assert out["exposed_s"] == pytest.approx(4.0)           # rank 1: 1 + (4 - 1) + 0
    assert list(out["compute_r"]) == [5.0, 3.0]


def test_every_step_is_counted_with_its_copies(records):
    from cdfgnn.train.record import validate_record
    for rec in records.values():
        validate_record(rec)
        dev = rec["model_time"]["device"]
        assert dev["inputs"]["track"] == "minibatch" and dev["profiles"] == ["p100", "p100"]
        totals = dev["ledger_totals"]
        assert totals["spmm"]["nnz"] > 0 and totals["dense"]["flops"] > 0
        assert totals["copy"]["bytes"] > 0                  # blocks and index tensors
        ledgers = [p["ledger"] for rk in dev["inputs"]["ranks"] for p in rk["patterns"]]
        phases = {ph for led in ledgers for ph in led}
        assert {"blocks", "fwd/L0", "bwd/L1", "reduce", "optimizer"} <= phases
        assert any(ph.startswith("pull/") for ph in phases)
        # the collectives are not in the ledger: a pull's phase holds its gathers/scatters
        # and index copies only
        assert all(set(led[ph]) <= {"gather", "copy", "elementwise"}
                   for led in ledgers for ph in led if ph.startswith("pull/"))
        assert rec["summary"]["device_profile"] == "p100"
        mb = rec["minibatch"]
        assert mb["device_epoch_s"] == rec["summary"]["device_epoch_time_s"] == dev["epoch_s"]
        assert (mb["device_step_s"], mb["device_network_s"], mb["device_exposed_s"]) == (
            dev["step_s"], dev["network_s"], dev["exposed_s"])
        assert all(math.isfinite(e["device_s"]) and e["device_s"] > 0 for e in rec["epochs"])
    # RapidGNN prefetches: no pull on the critical path; DistDGL pulls every batch in sync
    assert records["rapidgnn"]["minibatch"]["device_exposed_s"] < \
        records["distdgl-metis"]["minibatch"]["device_exposed_s"]


@pytest.mark.parametrize("method", ["rapidgnn", "distdgl-metis"])
def test_thread_and_process_backends_give_the_same_device_epoch(gfile, records, method):
    thread = records[method]["model_time"]["device"]
    proc = run_training(_cfg(gfile, method, backend="process"))["model_time"]["device"]
    assert proc["inputs"] == thread["inputs"]
    assert abs(proc["epoch_s"] - thread["epoch_s"]) <= 1e-9 * thread["epoch_s"]


def test_reprice_with_the_records_own_profiles_equals_the_recorded_value(records):
    for rec in records.values():
        dev = rec["model_time"]["device"]
        priced = reprice(rec)
        for key in ("epoch_s", "step_s", "network_s", "exposed_s"):
            assert priced[key] == pytest.approx(dev[key], rel=1e-12)
        assert priced["epochs_s"] == pytest.approx(
            [e["device_s"] for e in rec["epochs"]][1:], rel=1e-12)   # warmup 1
        # another card prices the same counts: the kernels (the pulls' too) run faster
        faster = reprice(rec, devices="h100")
        assert faster["network_s"] < priced["network_s"]
        assert sum(faster["compute_s"]) < sum(priced["compute_s"])


def _network_terms(inputs: dict, topology: Topology, network: str) -> list[np.ndarray]:
    """Per epoch ``[steps, ranks]`` sync + background + reduce seconds, from the counts
    and a NetworkModel directly (not through step_time's device terms), on the link
    profile with the shipped link efficiency and NIC sharing."""
    link = effective_link(get_profile(network), load_efficiency(), topology.devices_per_host)
    net = NetworkModel(topology, link)
    ranks = inputs["ranks"]
    p = len(ranks)
    red = [net.comm_seconds(r, np.asarray(rk["reduce"]["bytes"]),
                            np.asarray(rk["reduce"]["msgs"])) for r, rk in enumerate(ranks)]
    out = []
    for j in range(len(inputs["epochs"])):
        steps = [[rk["patterns"][k]["pull"] for k in rk["epoch_steps"][j]] for rk in ranks]
        out.append(np.array([[sum(net.comm_seconds(r, *pull_traffic(steps[r][i], modes, p))
                                  for modes in (SYNC_MODES, BACKGROUND_MODES)) + red[r]
                              for r in range(p)] for i in range(len(steps[0]))]))
    return out


def test_device_step_with_zero_compute_is_the_network_terms(records, monkeypatch):
    """The device model's step rule is the CPU model's: with every kernel priced at zero
    the step is exactly its pulls + all-reduce (max(0, background) + sync + reduce)."""
    monkeypatch.setattr(Pricer, "phases", lambda self, ledger: {"total": 0.0})
    for rec in records.values():
        dev = rec["model_time"]["device"]
        priced = reprice(rec)
        terms = _network_terms(dev["inputs"], Topology.for_workers(2, 2), dev["network"])
        assert priced["step_s"] == pytest.approx(
            float(np.mean([t.max(axis=1).mean() for t in terms])), rel=1e-12)


def test_both_models_use_the_one_step_rule(gfile, monkeypatch):
    """Change the rule in step_time and both the CPU-measured and the device step follow
    it: a model with a rule of its own fails here."""
    def no_overlap(compute, sync, background, reduce):
        return compute + sync + background + reduce
    monkeypatch.setattr(step_time, "step_seconds", no_overlap)
    seen = []
    assemble = minibatch.assemble

    def capture(cfg, topology, network, results):
        seen.append((network, [dict(r, steps=list(r["steps"])) for r in results]))
        return assemble(cfg, topology, network, results)
    monkeypatch.setattr(minibatch, "assemble", capture)
    rec = run_training(_cfg(gfile, "rapidgnn"))
    network, results = seen[0]
    n_params = sum(v.numel() for v in results[0]["final_state"].values())
    b, m = allreduce_traffic(2, n_params)
    reduce_s = [network.comm_seconds(r, np.asarray(b[r]), np.asarray(m[r])) for r in range(2)]
    timed = [1, 2]
    cpu = [step_time.cpu_terms(results, e, network, reduce_s) for e in timed]
    assert rec["minibatch"]["modelled_step_s"] == pytest.approx(float(np.mean(
        [(t.compute + t.sync + t.background + t.reduce).max(axis=1).mean() for t in cpu])))
    dev = rec["model_time"]["device"]
    pricer = Pricer(get_gpu("p100"), load_efficiency())
    cluster = resolve_cluster([pricer.gpu, pricer.gpu], dev["network"],
                              Topology.for_workers(2, 2), pricer.eff)
    terms = step_time.device_terms(dev["inputs"], [pricer, pricer], cluster)
    assert dev["step_s"] == pytest.approx(float(np.mean(
        [(t.compute + t.sync + t.background + t.reduce).max(axis=1).mean() for t in terms])))


def test_device_view_gives_rapidgnn_speed_claims_device_values(gfile, records, tmp_path):
    from cdfgnn.report.aggregate import device_view
    from cdfgnn.report.claims import DeviceModel, evaluate
    from cdfgnn.report.rapidgnn import CLAIMS, ClaimContext, _frame, speedups
    from cdfgnn.report.registry import ReportInputs

    gcn = run_training(TrainConfig(graph=gfile, dataset=None, method="exact", model="gcn",
                                   workers=2, hosts=2, epochs=3, warmup=1, hidden=16,
                                   network="rapidgnn-chameleon", devices="p100"))
    paths = []
    for name, rec in [*records.items(), ("exact", gcn)]:
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
        paths.append(str(tmp_path / f"{name}.json"))
    view = device_view(records["rapidgnn"])
    mb = view["minibatch"]
    assert mb["modelled_step_s"] == records["rapidgnn"]["minibatch"]["device_step_s"]
    assert math.isnan(mb["train_s"])                       # not priced: missing
    assert all(math.isfinite(rk["part_cpu_max_s"]) and 0 < rk["part_cpu_max_s"] < rk["cpu_s"]
               for rk in view["ranks"])
    inputs = ReportInputs("test", runs=paths)

    def context_of(v):
        df = _frame(v.rows)
        return ClaimContext(df, speedups(df))
    rows = {c.claim: c for c in evaluate(CLAIMS, context_of(inputs),
                                         DeviceModel.of(inputs, context_of))}
    for what in ("step time vs DGL-METIS", "step time vs DGL-Random",
                 "network time vs DGL-METIS", "network time vs DGL-Random",
                 "step time vs GCN (here: epoch time vs full-batch GCN)",
                 "network time vs GCN (full-batch halo)"):
        row = rows[f"{what}: mean speed-up"]
        assert math.isfinite(row.device_measured) and row.device_measured > 0, what
        assert row.device_verdict in ("reproduced", "not reproduced"), what
        assert row.device_profile == "p100 on rapidgnn-chameleon", what


@pytest.mark.parametrize("method", ["rapidgnn", "distdgl-metis"])
def test_shortcuts_give_the_counts_of_counting_every_op(gfile, records, method):
    """A step's training work is counted as an affine function of its sizes, the optimizer
    step and the gradient flatten once per parameter shapes (cdfgnn.cost.reuse); counting
    every op of every step gives the same ledgers."""
    from cdfgnn.cost import reuse
    with reuse.exhaustive():
        every = run_training(_cfg(gfile, method))["model_time"]["device"]
    assert every["inputs"] == records[method]["model_time"]["device"]["inputs"]


def test_counted_once_counts_under_the_callers_phase():
    import torch

    from cdfgnn.cost import ledger as oplog
    from cdfgnn.cost.reuse import counted_once
    memo, x = {}, torch.ones(4)
    led = oplog.Ledger()
    with oplog.counting(led, "optimizer"):
        for _ in range(3):
            counted_once(memo, "k", lambda: x.mul(2).add_(1))
    assert led.phases == ["optimizer"]
    assert led.get("optimizer", "elementwise")["calls"] == 6 and len(memo) == 1
    assert counted_once(memo, "k", lambda: 7) == 7      # not counting: just runs


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_block_build_is_host_work_recorded_as_copies(small_graph, model):
    """device_blocks builds what the layers read on the host (the dispatch mode off) and
    records it as host -> device copies; the forward then issues no op of that build (a
    GAT's arc list included: built on the host and copied on a GPU run)."""
    import torch

    from cdfgnn.cost import ledger as oplog
    from cdfgnn.sampling.blocks import sample_block_arrays
    from cdfgnn.sampling.schedule import Batch
    from cdfgnn.train.worker import model_for

    cfg = TrainConfig(graph="unused.npz", dataset=None, model=model, hidden=8, dropout=0.0)
    net = model_for(cfg, small_graph)
    srcs, structure = sample_block_arrays(small_graph, np.arange(16), [3, 3],
                                          np.random.default_rng(0))
    led = oplog.Ledger()
    with oplog.counting(led, "blocks"):
        blocks = minibatch.device_blocks(small_graph, Batch(0, 0, srcs, structure), net,
                                         torch.device("cpu"), torch.float32)
    assert set(led.phases) == {"blocks"} and set(led.to_dict()["blocks"]) == {"copy"}
    copied = sum(b.input_ids.numel() * 8 for b in blocks)
    for blk, layer in zip(blocks, net.layers):
        if layer.norm is None:
            copied += sum(t.numel() * t.element_size() for t in blk.arcs_with_self_loops())
        else:
            mat = blk.matrix(layer.norm)
            copied += sum(t.numel() * t.element_size() for csr in (mat.a, mat.at)
                          for t in (csr.crow_indices(), csr.col_indices(), csr.values()))
    assert led.get("blocks", "copy")["bytes"] == copied
    again = oplog.Ledger()
    with oplog.counting(again, "x"):              # built once: reading it issues no op
        for blk, layer in zip(blocks, net.layers):
            blk.arcs_with_self_loops() if layer.norm is None else blk.matrix(layer.norm)
    assert again.to_dict() == {}


def test_count_ops_false_sampled_run_has_no_device_model(gfile, records):
    """--count-ops false on the sampled track: the same training, no step ledgers and no
    device model; the device view leaves its times missing and reprice says why."""
    from cdfgnn.errors import CdfgnnError
    from cdfgnn.report.aggregate import device_view
    from cdfgnn.train.record import validate_record

    plain = run_training(_cfg(gfile, "rapidgnn", count_ops=False, devices=None))
    validate_record(plain)
    counted = records["rapidgnn"]
    assert [e["loss"] for e in plain["epochs"]] == [e["loss"] for e in counted["epochs"]]
    assert "device" not in plain["model_time"] and "device_epoch_s" not in plain["minibatch"]
    assert all("device_s" not in e for e in plain["epochs"])
    view = device_view(plain)
    assert math.isnan(view["minibatch"]["modelled_step_s"])
    assert math.isnan(view["summary"]["modelled_epoch_time_s"])
    with pytest.raises(CdfgnnError, match="--count-ops false"):
        reprice(plain)
