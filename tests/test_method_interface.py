"""The SyncStrategy interface: parameters, codecs on any method, the shared stale
exchange, local views, arc pruning and many parts per worker (thread backend: the
test-only methods below are registered in this process only)."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.methods.base import METHODS, Param, Prepared, SyncStrategy, build_strategy
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training, train_distributed


class _StaleEverywhere(SyncStrategy):
    """Every training sync point uses last epoch's rows (PipeGCN semantics)."""

    name = "test-stale"
    overlaps_compute = True
    PARAMS = {"stale": Param(True, bool)}

    def stale(self, key):
        return self.params["stale"]


class _LocalOnly(SyncStrategy):
    """Communication-free training on the local graph (global degrees, no sync)."""

    name = "test-local"
    partition_kind = "vertex"
    communication_free = True

    def local_view(self, view, training):
        return view.but(sync=False, key=("local", view.key)) if training else view


class _DropCross(SyncStrategy):
    """Drops every cross-part arc into part 0 (a toy halo pruning)."""

    name = "test-drop"
    partition_kind = "edge"
    PARAMS = {"none": Param(False, bool)}

    def prepare(self, graph, part, devices=None):
        row = graph.row_of_arcs()
        mask = (part.assignment[row] == 0) & (part.assignment[graph.indices] != 0)
        return Prepared(np.zeros_like(mask) if self.params["none"] else mask)


class _Closes(SyncStrategy):
    """Records which parts were closed; part 1 may fail in setup or in epoch 1."""

    name = "test-closes"
    PARAMS = {"fail": Param("none", str, choices=("none", "setup", "epoch"))}
    closed: list = []

    def setup(self, ctx):
        super().setup(ctx)
        if self.params["fail"] == "setup" and ctx.part == 1:
            raise RuntimeError("part 1 fails in setup")

    def on_epoch_start(self, epoch):
        super().on_epoch_start(epoch)
        if self.params["fail"] == "epoch" and epoch == 1 and self.ctx.part == 1:
            raise RuntimeError("part 1 fails in epoch 1")

    def close(self):
        type(self).closed.append(self.ctx.part)


for _cls in (_StaleEverywhere, _LocalOnly, _DropCross, _Closes):
    if _cls.name not in METHODS:
        METHODS.register(_cls.name)(_cls)


def _cfg(**kw):
    base = dict(dataset=None, epochs=6, warmup=2, hidden=16, workers=4, hosts=2,
                partitioner="metis", timeout_s=60, dropout=0.0)
    base.update(kw)
    return TrainConfig(**base)


def _losses(rec):
    return np.array([e["loss"] for e in rec["epochs"]])


# ------------------------------------------------------------------ params
def test_parameters_are_validated_and_named():
    with pytest.raises(CdfgnnError, match=r"method 'exact': unknown parameter\(s\) \['bits'\]; "
                                          r"valid: codec"):
        build_strategy("exact", {"bits": 3})
    with pytest.raises(CdfgnnError, match=r"parameter codec='linear-5'.*linear bit width"):
        build_strategy("exact", {"codec": "linear-5"})
    with pytest.raises(CdfgnnError, match=r"parameter stale='maybe': expected true or false"):
        build_strategy("test-stale", {"stale": "maybe"})
    assert build_strategy("test-stale", {"stale": "false"}).params["stale"] is False


# ------------------------------------------------------------------ codecs on any method
@pytest.mark.parametrize("partitioner", ["metis", "hdrf"])
def test_exact_with_a_32_bit_codec_is_exact(graph_file, partitioner):
    ref = run_training(_cfg(graph=graph_file, partitioner=partitioner))
    rec = run_training(_cfg(graph=graph_file, partitioner=partitioner,
                            method_params={"codec": "stochastic-32"}))
    np.testing.assert_allclose(_losses(rec), _losses(ref), atol=1e-6)


@pytest.mark.parametrize("partitioner", ["metis", "hdrf"])
def test_accounted_bytes_are_the_packed_bytes(graph_file, small_graph, partitioner):
    """linear-8 sends ceil(8 d / 8) + 8 bytes per row: the record's bytes say so."""
    hidden, classes = 16, int(small_graph.num_classes)
    ref = run_training(_cfg(graph=graph_file, partitioner=partitioner, hidden=hidden))
    rec = run_training(_cfg(graph=graph_file, partitioner=partitioner, hidden=hidden,
                            method_params={"codec": "linear-8"}))
    for tag, d in rec["comm"]["by_tag"].items():
        if tag.startswith(("halo", "gather", "scatter")):
            width = hidden if tag.endswith("/0") else classes
            assert d["rows"] == ref["comm"]["by_tag"][tag]["rows"]
            assert d["bytes"] == pytest.approx(d["rows"] * (width + 8))
            assert ref["comm"]["by_tag"][tag]["bytes"] == pytest.approx(d["rows"] * 4 * width)
    # quantised training stays close to exact
    assert abs(_losses(rec)[-1] - _losses(ref)[-1]) < 0.05


def test_methods_move_rows_only_through_the_send_primitive():
    """Vertex rows leave a method through ``SyncStrategy.send``/``send_encoded`` or
    ``cdfgnn.comm.codecs.send_rows``, never through a collective of their own, so the
    primitive is the one place to count what sending costs."""
    from pathlib import Path

    import cdfgnn.methods

    for path in sorted(Path(cdfgnn.methods.__file__).parent.glob("*.py")):
        text = path.read_text()
        for call in (".all_to_all(", "_all_to_all_impl", "all_to_all_unaccounted"):
            assert call not in text, f"{path.name} calls {call}"


# ------------------------------------------------------------------ stale exchange
def test_stale_exchange_uses_last_epochs_rows(graph_file):
    ref = run_training(_cfg(graph=graph_file))
    off = run_training(_cfg(graph=graph_file, method="test-stale",
                            method_params={"stale": False}))
    on = run_training(_cfg(graph=graph_file, method="test-stale"))
    np.testing.assert_allclose(_losses(off), _losses(ref), atol=1e-6)
    assert np.abs(_losses(on) - _losses(ref)).max() > 1e-4
    # the traffic is the same rows, one epoch later; modelled time takes the overlap
    assert on["comm"]["per_epoch"]["rows_sent"] == ref["comm"]["per_epoch"]["rows_sent"]
    assert on["model_time"]["overlap"] and not ref["model_time"]["overlap"]
    assert on["summary"]["modelled_epoch_time_s"] > 0


# ------------------------------------------------------------------ arc pruning
def test_prepare_drops_arcs_and_an_empty_mask_is_exact(graph_file):
    ref = run_training(_cfg(graph=graph_file))
    none = run_training(_cfg(graph=graph_file, method="test-drop", method_params={"none": True}))
    np.testing.assert_allclose(_losses(none), _losses(ref), atol=1e-6)
    cut = run_training(_cfg(graph=graph_file, method="test-drop"))
    assert cut["partition"]["dropped_arcs"] > 0
    assert cut["comm"]["per_epoch"]["rows_sent"] < ref["comm"]["per_epoch"]["rows_sent"]


# ------------------------------------------------------------------ prepare, close
def test_prepare_is_typed_and_gets_the_devices(graph_file, small_graph):
    part = partition_graph(small_graph, "metis", Topology(1, 4), seed=0)
    prepared = build_strategy("rapa").prepare(small_graph, part, "x4")
    assert isinstance(prepared, Prepared) and prepared.drop_arcs.dtype == bool
    from cdfgnn.pricing.devices import parse_devices
    assert prepared.info["rapa"]["devices"] == [d.name for d in parse_devices("x4", 4)]
    assert build_strategy("exact").prepare(small_graph, part) == Prepared()


@pytest.mark.parametrize("fail", ["none", "setup", "epoch"])
def test_every_part_is_closed_on_every_exit_path(graph_file, fail):
    _Closes.closed = []
    cfg = _cfg(graph=graph_file, method="test-closes", method_params={"fail": fail})
    if fail == "none":
        run_training(cfg)
    else:
        with pytest.raises(WorkerFailedError, match=f"rank 1 failed: RuntimeError: part 1 "
                                                    f"fails in {fail}"):
            run_training(cfg)
    deadline = time.monotonic() + 60   # aborted peers unwind after the failure is reported
    while len(_Closes.closed) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(_Closes.closed) == [0, 1, 2, 3]


# ------------------------------------------------------------------ many parts per worker
def test_many_parts_per_worker_equal_one_part_per_worker(small_graph, tmp_path):
    """8 parts on 8 workers and the same 8 parts on 2 workers: equal losses."""
    path = tmp_path / "g.npz"
    small_graph.save(path)
    part = partition_graph(small_graph, "ne", Topology(1, 8), seed=0)
    ppath = tmp_path / "p.npz"
    part.save(ppath)
    common = dict(graph=str(path), partition_file=str(ppath), method="test-local",
                  partitioner="ne", epochs=5)
    one = run_training(_cfg(workers=8, hosts=1, **common))
    two = run_training(_cfg(workers=2, hosts=1, **common))
    np.testing.assert_allclose(_losses(two), _losses(one), atol=1e-5)
    assert two["ranks"][0]["parts"] == [0, 1, 2, 3]
    # no vertex rows cross ranks; evaluation is one-process full-graph inference
    assert two["comm"]["per_epoch"]["rows_sent"] == 0
    assert two["epochs"][-1]["test"] == pytest.approx(one["epochs"][-1]["test"])


def test_many_parts_need_a_communication_free_method(small_graph, tmp_path):
    path = tmp_path / "g.npz"
    small_graph.save(path)
    part = partition_graph(small_graph, "ne", Topology(1, 8), seed=0)
    ppath = tmp_path / "p.npz"
    part.save(ppath)
    with pytest.raises(CdfgnnError, match="needs one part per worker"):
        run_training(_cfg(graph=str(path), partition_file=str(ppath), partitioner="ne",
                          workers=2, hosts=1))
    with pytest.raises(CdfgnnError, match="does not divide the 8 parts"):
        run_training(_cfg(graph=str(path), partition_file=str(ppath), partitioner="ne",
                          method="test-local", workers=3, hosts=1))


def test_send_ratio_baselines_are_recorded(graph_file):
    rec = run_training(_cfg(graph=graph_file, partitioner="hdrf"))
    exact_rows = rec["comm"]["exact_rows"]
    series = rec["comm"]["epochs"]
    assert len(series) == 6
    for e in series:
        assert e["rows"]["gather/fwd/0"] == exact_rows["gather"]
        assert e["rows"]["scatter/bwd/1"] == exact_rows["scatter"]
