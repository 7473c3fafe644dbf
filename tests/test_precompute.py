"""First-layer precompute (``--precompute-first-layer``): exact, and layer 0 sends nothing
per epoch.

Distributed ``exact`` with the precompute equals the one-process oracle *without* it
(dropout 0: with dropout the mask falls on the aggregated rows, a different model);
with dropout > 0 it equals the oracle *with* it (masks keyed by global id).
"""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.oracle import train_full_graph
from cdfgnn.train.run import train_distributed

TOL = 1e-5


def _cfg(model, p, layers=2, dropout=0.0, pre=True, epochs=6):
    return TrainConfig(model=model, layers=layers, hidden=16, epochs=epochs, workers=p,
                       hosts=2 if p % 2 == 0 else 1, dropout=dropout, timeout_s=60,
                       precompute_first_layer=pre)


def _topology(p):
    return Topology(2, p // 2) if p % 2 == 0 else Topology(1, p)


def _compare(ref, res):
    ref_loss = np.array([e["loss"] for e in ref["epochs"]])
    for r in res:
        np.testing.assert_allclose([e["loss"] for e in r["epochs"]], ref_loss, rtol=0, atol=TOL)
    for name, w in ref["final_state"].items():
        assert (res[0]["final_state"][name] - w).abs().max().item() <= TOL, name


@pytest.mark.parametrize("model", ["gcn", "sage"])
@pytest.mark.parametrize("p", [1, 2, 4])
def test_precompute_equals_oracle_without_it(small_graph, model, p):
    ref = train_full_graph(small_graph, _cfg(model, p, pre=False))
    part = partition_graph(small_graph, "metis", _topology(p), seed=0)
    res = train_distributed(_cfg(model, p), small_graph, part)
    _compare(ref, res)
    for r in res:
        for epoch in r["traffic"]:  # layer 0 exchanges nothing in training
            assert not [t for t in epoch if t.endswith("/0")], sorted(epoch)
            if p > 1:
                assert any(t.startswith("halo/") for t in epoch)  # later layers still do
        if p > 1:  # the one precompute exchange: raw input rows, float32
            tr = r["precompute_traffic"]["halo/fwd/0"]
            rows = sum(tr["rows"]) - tr["rows"][r["rank"]]
            bytes_ = sum(tr["bytes"]) - tr["bytes"][r["rank"]]
            assert bytes_ == 4 * rows * small_graph.num_features


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_precompute_vertex_cut(small_graph, model):
    ref = train_full_graph(small_graph, _cfg(model, 4, layers=3, pre=False))
    part = partition_graph(small_graph, "hdrf", _topology(4), seed=0)
    res = train_distributed(_cfg(model, 4, layers=3), small_graph, part)
    _compare(ref, res)
    for epoch in res[0]["traffic"]:
        assert not [t for t in epoch if t.endswith("/0")], sorted(epoch)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_precompute_with_dropout_matches_precomputed_oracle(small_graph, model):
    cfg = _cfg(model, 4, layers=3, dropout=0.3)
    ref = train_full_graph(small_graph, cfg)
    part = partition_graph(small_graph, "metis", _topology(4), seed=0)
    _compare(ref, train_distributed(cfg, small_graph, part))
    # and it is a different model from the one without the precompute (masks moved)
    plain = train_full_graph(small_graph, _cfg(model, 4, layers=3, dropout=0.3, pre=False))
    assert abs(plain["epochs"][-1]["loss"] - ref["epochs"][-1]["loss"]) > 1e-6


def test_precompute_record_and_errors(small_graph, tmp_path):
    from cdfgnn.train.run import run_training
    g = tmp_path / "g.npz"
    small_graph.save(str(g))
    rec = run_training(TrainConfig(graph=str(g), epochs=2, workers=2, warmup=0,
                                   precompute_first_layer=True))
    assert rec["comm"]["precompute"]["bytes"] > 0
    assert not [t for t in rec["comm"]["by_tag"] if t.endswith("/0")]
    with pytest.raises(CdfgnnError, match="minibatch"):
        TrainConfig(trainer="minibatch", precompute_first_layer=True).validate()
