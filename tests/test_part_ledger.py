"""Per-part operation ledgers (a rank holding several parts) and the device-modelled
time with one worker per part (CoFree-GNN's "doubling the parts" claim, Table 1)."""
from __future__ import annotations

import json
import math

import pytest
import torch

from cdfgnn.cost import ledger as oplog
from cdfgnn.cost.counts import STEP_PHASES, Ledger
from cdfgnn.pricing.hardware import get_gpu
from cdfgnn.pricing.roofline import price
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.pricing.epoch import COMM_SIDE
from cdfgnn.pricing.record import reprice
from cdfgnn.train.record import validate_record
from cdfgnn.train.run import run_training


def _cfg(graph, **kw):
    base = dict(graph=graph, dataset=None, epochs=3, warmup=1, hidden=8, workers=2, hosts=1,
                method="cofree", model="sage", dropout=0.3, timeout_s=120, seed=0,
                devices="a100-80", network="pcie4-p2p")
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def ne8(tmp_path_factory, small_graph):
    path = tmp_path_factory.mktemp("part-ledger") / "ne8.npz"
    partition_graph(small_graph, "ne", Topology(1, 8), seed=0).save(path)
    return str(path)


def _patterns(rec):
    return [(r, item) for r, rk in enumerate(rec["model_time"]["device"]["inputs"]["ranks"])
            for item in rk["patterns"]]


# ------------------------------------------------------------------ the primitive
def test_into_switches_the_ledger_without_counting_twice():
    a, b = torch.ones(4, 3), torch.ones(3, 2)
    plain, outer, inner = Ledger(), Ledger(), Ledger()
    with oplog.counting(plain, "x"):
        (a @ b).relu()
        oplog.set_phase("y")
        a @ b
    with oplog.counting(outer, "x"):
        (a @ b).relu()
        with oplog.into(inner):
            oplog.set_phase("y")          # the phase is the thread's, not the ledger's
            a @ b
        assert oplog.current() is outer
    assert inner.to_dict() == {"y": {"dense": {"calls": 1, "flops": 2 * 4 * 3 * 2,
                                               "bytes": 4 * (12 + 6 + 8)}}}
    assert outer.merge(inner) == plain     # each op counted once, in one ledger
    with oplog.into(inner):                # not counting: nothing changes
        a @ b
    assert inner.get("y", "dense")["calls"] == 1 and oplog.current() is None


# ------------------------------------------------------------------ the counts
def test_part_ledgers_sum_to_the_epoch_ledger_on_both_backends(graph_file, ne8):
    """8 parts on 2 workers: each rank's per-part ledgers sum to its epoch ledger but the
    optimizer and reduce phases; thread and process backends count the same, so they
    give the same one-worker-per-part time; the epoch ledger is the one without parts."""
    thread = run_training(_cfg(graph_file, partition_file=ne8, backend="thread"))
    proc = run_training(_cfg(graph_file, partition_file=ne8, backend="process"))
    a, b = thread["model_time"]["device"], proc["model_time"]["device"]
    assert a["inputs"] == b["inputs"]
    assert a["parallel_s"] == pytest.approx(b["parallel_s"], rel=1e-9)
    for r, item in _patterns(thread):
        assert len(item["part_ledgers"]) == 4
        parts = Ledger()
        for led in item["part_ledgers"]:
            parts.merge(Ledger.from_dict(led))
        rest = {p: k for p, k in item["ledger"].items() if p not in STEP_PHASES}
        assert parts.to_dict() == rest, r
        assert set(item["ledger"]) - set(rest) == set(STEP_PHASES)


def test_parallel_time_prices_the_largest_part(graph_file, ne8):
    """part_compute_max_s = the largest part's priced compute; parallel_s = that, max over
    ranks, + the all-reduce; reprice reproduces both; one part per rank: the rank's ledger
    but the step phases (as the CPU-measured part time covers that part's training)."""
    rec = run_training(_cfg(graph_file, partition_file=ne8))
    validate_record(rec)
    dev = rec["model_time"]["device"]
    gpu = get_gpu("a100-80")

    def compute(led):
        return sum(v for k, v in price(Ledger.from_dict(led), gpu).items()
                   if k != "total" and k not in COMM_SIDE + STEP_PHASES)
    for r, item in _patterns(rec):        # one pattern per rank: every timed epoch counts alike
        assert dev["part_compute_max_s"][r] == pytest.approx(
            max(compute(led) for led in item["part_ledgers"]), rel=1e-12)
        assert dev["part_compute_max_s"][r] < dev["compute_s"][r] / 2
    assert dev["parallel_s"] == pytest.approx(max(dev["part_compute_max_s"])
                                              + max(dev["reduce_s"]), rel=1e-12)
    again = reprice(json.loads(json.dumps(rec)))
    assert (again["parallel_s"], again["part_compute_max_s"]) == (dev["parallel_s"],
                                                                 dev["part_compute_max_s"])
    assert reprice(rec, devices="t4")["parallel_s"] > dev["parallel_s"]

    one = run_training(_cfg(graph_file, workers=2, partitioner="ne"))
    odev = one["model_time"]["device"]
    assert "parallel_s" in odev
    for r, item in _patterns(one):
        assert "part_ledgers" not in item
        assert odev["part_compute_max_s"][r] == pytest.approx(compute(item["ledger"]), rel=1e-12)
        assert odev["part_compute_max_s"][r] < odev["compute_s"][r]


# ------------------------------------------------------------------ the claim
def test_doubling_claim_gets_a_device_value(tmp_path):
    """CoFree, NE, 4 and 8 parts on 2 workers, tiny twin: the doubling claim has a finite
    device-modelled value and verdict beside the CPU-measured one; a record made before
    per-part ledgers (several parts per rank, no part ledgers) leaves it missing."""
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.report.aggregate import device_view, run_rows
    from cdfgnn.report.claims import DeviceModel, evaluate
    from cdfgnn.report.cofree import CLAIMS, cofree_frame, measure_doubling
    from cdfgnn.report.registry import ReportInputs

    graph = get_graph("synth-reddit", scale="tiny", seed=0)
    gfile = tmp_path / "g.npz"
    graph.save(gfile)
    paths = []
    for parts in (4, 8):
        pfile = tmp_path / f"ne{parts}.npz"
        partition_graph(graph, "ne", Topology(1, parts), seed=0).save(pfile)
        rec = run_training(_cfg(str(gfile), partition_file=str(pfile), hidden=16))
        paths.append(str(tmp_path / f"cofree-ne{parts}.json"))
        (tmp_path / f"cofree-ne{parts}.json").write_text(json.dumps(rec))
    inputs = ReportInputs("cofree-claims", runs=paths)
    device = DeviceModel.of(inputs, lambda view: cofree_frame(view.rows))
    row = next(c for c in evaluate(CLAIMS, cofree_frame(inputs.rows), device)
               if c.claim.startswith("doubling the parts"))
    assert row.device_measured is not None and row.device_measured > 0
    assert row.device_verdict in ("reproduced", "not reproduced")
    assert row.device_profile == "a100-80 on pcie4-p2p"
    frame = cofree_frame(run_rows([device_view(r) for r in inputs.records]))
    parallel = [1e3 * r["model_time"]["device"]["parallel_s"] for r in inputs.records]
    assert list(frame["parallel_ms"]) == pytest.approx(parallel, rel=1e-9)
    # a record before per-part ledgers: no device value, never the CPU one
    old = json.loads(json.dumps(inputs.records[1]))
    for rk in old["model_time"]["device"]["inputs"]["ranks"]:
        for item in rk["patterns"]:
            del item["part_ledgers"]
    stale = cofree_frame(run_rows([device_view(inputs.records[0]), device_view(old)]))
    assert stale["parallel_ms"].isna().tolist() == [False, True]
    assert [math.isnan(m.values["value"]) for m in measure_doubling(stale)] == [True]
    row = next(c for c in evaluate(CLAIMS, cofree_frame(inputs.rows), DeviceModel(stale, {}))
               if c.claim.startswith("doubling the parts"))
    assert (row.device_measured, row.device_verdict) == (None, "not measured")
