"""CDFGNN's methods: the adaptive cache (Alg. 2, eqs. 6-7), quantised messages, the
ablation names, and their bad-input errors (thread backend, a 240-vertex graph)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import build_strategy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def _cfg(graph_file, method, epochs=6, partitioner="hdrf", **params):
    return TrainConfig(dataset=None, graph=graph_file, epochs=epochs, warmup=1, hidden=16,
                       workers=4, hosts=2, partitioner=partitioner, timeout_s=120,
                       dropout=0.0, method=method, method_params=params)


@pytest.fixture(scope="module")
def baseline(graph_file):
    return run_training(_cfg(graph_file, "cdfgnn-baseline", epochs=15, partitioner="ebv"))


def _losses(rec):
    return np.array([e["loss"] for e in rec["epochs"]])


def test_cache_with_threshold_zero_skips_only_zero_rows(graph_file, baseline):
    """(epsilon=0, adaptive=false equals the oracle, as cdfgnn-baseline does:
    tests/test_degenerate.py.)"""
    rec = run_training(_cfg(graph_file, "cdfgnn-cache", epochs=15, partitioner="ebv",
                            epsilon=0.0, adaptive=False))
    assert all(e["epsilon"] == 0.0 for e in rec["epochs"])
    # rows whose contribution is exactly zero (e.g. mirrors' output-layer gradients)
    # are never sent, so even epsilon = 0 sends fewer rows than exact
    assert rec["comm"]["per_epoch"]["rows_sent"] <= baseline["comm"]["per_epoch"]["rows_sent"]


def test_record_has_epsilon_and_send_ratios_per_layer_and_direction(graph_file):
    rec = run_training(_cfg(graph_file, "cdfgnn-cache", epsilon=0.05, adaptive=False))
    exact_rows = rec["comm"]["exact_rows"]
    for row, ser in zip(rec["epochs"], rec["comm"]["epochs"]):
        assert row["epsilon"] == pytest.approx(0.05)
        for direction in ("fwd", "bwd"):
            for layer in (0, 1):
                sync = f"{direction}/{layer}"
                g = ser["rows"].get(f"gather/{sync}", 0.0)
                s = ser["rows"].get(f"scatter/{sync}", 0.0)
                assert row[f"send_ratio/gather/{sync}"] == pytest.approx(g / exact_rows["gather"])
                assert row[f"send_ratio/scatter/{sync}"] == pytest.approx(
                    s / exact_rows["scatter"])
                assert row[f"send_ratio/{sync}"] == pytest.approx(
                    (g + s) / (exact_rows["gather"] + exact_rows["scatter"]))
        assert row["rows_sent"] == pytest.approx(sum(ser["rows"].values()))
    # a positive threshold skips rows after the first epoch
    assert rec["epochs"][-1]["send_ratio"] < rec["epochs"][0]["send_ratio"]


def test_full_cdfgnn_accounts_bitmaps_and_packed_rows(graph_file, small_graph):
    """Each message: ceil(L/8) bitmap bytes + (width + 8) bytes per linear-8 row."""
    rec = run_training(_cfg(graph_file, "cdfgnn", epsilon=0.02, adaptive=False))
    classes = int(small_graph.num_classes)
    exact = rec["comm"]["exact_rows"]
    for tag, d in rec["comm"]["by_tag"].items():
        if not tag.startswith(("gather", "scatter")) or not d["msgs"]:
            continue
        width = 16 if tag.endswith("/0") else classes
        bitmaps = d["bytes"] - d["rows"] * (width + 8)
        assert d["msgs"] <= bitmaps <= exact[tag.split("/")[0]] / 8 + d["msgs"]
    assert abs(_losses(rec)[-1] - _losses(run_training(
        _cfg(graph_file, "cdfgnn-baseline")))[-1]) < 0.05


def test_shadow_sync_measures_the_cache_error(graph_file):
    zero = run_training(_cfg(graph_file, "cdfgnn-cache", epochs=4, epsilon=0.0,
                             adaptive=False, shadow=True))
    some = run_training(_cfg(graph_file, "cdfgnn-cache", epochs=4, epsilon=0.2,
                             adaptive=False, shadow=True))
    keys = [k for k in zero["epochs"][-1] if k.startswith("shadow_err/")]
    assert sorted(keys) == ["shadow_err/bwd/0", "shadow_err/bwd/1", "shadow_err/fwd/0",
                            "shadow_err/fwd/1"]
    assert max(zero["epochs"][-1][k] for k in keys) < 1e-5
    assert max(some["epochs"][-1][k] for k in keys) > 1e-4


def test_quant_ablation_defaults():
    assert build_strategy("cdfgnn-quant").codec.spec == "linear-8"
    assert build_strategy("cdfgnn").codec.spec == "linear-8"
    assert build_strategy("cdfgnn-cache").codec.spec == "none"
    assert build_strategy("cdfgnn-quant", {"codec": "linear-2"}).codec.bits == 2


@pytest.mark.parametrize("rule,rise_moves", [("digest", +1), ("literal", -1)])
def test_threshold_adaptation(rule, rise_moves):
    s = build_strategy("cdfgnn-cache", {"epsilon": 0.1, "rule": rule})
    s._adapt(0.5)                     # first accuracy: meanacc only
    assert s.eps == 0.1 and s.meanacc == 0.5
    s._adapt(0.6)                     # a rise above meanacc + mu2
    assert math.copysign(1, s.eps - 0.1) == rise_moves
    expect = min(1.05 * 0.1, 0.11) if rise_moves > 0 else max(0.9 * 0.1, 0.09)
    assert s.eps == pytest.approx(expect)
    assert s.meanacc == pytest.approx(0.8 * 0.5 + 0.2 * 0.6)
    # many rises: epsilon is clamped to [nu2, nu1]
    for k in range(400):
        s._adapt(0.6 + k)
    assert s.eps == pytest.approx(0.3 if rise_moves > 0 else 0.001)
    fixed = build_strategy("cdfgnn-cache", {"epsilon": 0.1, "adaptive": False})
    for acc in (0.1, 0.9, 0.1):
        fixed._adapt(acc)
    assert fixed.eps == 0.1


@pytest.mark.parametrize("params,msg", [
    ({"codec": "zip"}, r"unknown codec 'zip'; valid: none"),
    ({"codec": "linear-3"}, r"linear bit width must be one of 2, 4, 8, 16, got 3"),
    ({"rule": "other"}, r"parameter rule='other': valid: digest, literal"),
    ({"epsilon": -1}, r"parameter epsilon=-1: must be >= 0"),
    ({"nu1": 0.001, "nu2": 0.01}, r"nu2=0.01 must be <= nu1=0.001"),
])
def test_bad_parameters_are_one_line_errors(params, msg):
    with pytest.raises(CdfgnnError, match=msg) as err:
        build_strategy("cdfgnn", params)
    assert "\n" not in str(err.value)


def test_vertex_only_method_on_an_edge_cut_partition(graph_file):
    with pytest.raises(CdfgnnError, match=r"method 'cdfgnn-cache' needs a vertex-cut "
                                          r"partitioning, partitioner 'metis' makes a edge-cut"):
        run_training(_cfg(graph_file, "cdfgnn-cache", partitioner="metis"))
