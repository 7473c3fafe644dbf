"""CaPGNN (digest 003): JACA caches, device profiles, RAPA, AdaQP."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import build_strategy
from cdfgnn.methods.jaca import Pool
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory, small_graph):
    path = tmp_path_factory.mktemp("g") / "graph.npz"
    small_graph.save(path)
    return str(path)


def _run(graph_file, method="exact", params=None, **kw):
    opts = dict(graph=graph_file, dataset=None, epochs=5, warmup=1, hidden=16, layers=3,
                workers=4, hosts=2, partitioner="metis", timeout_s=120, dropout=0.3)
    opts.update(kw)
    cfg = TrainConfig(method=method, method_params=params or {}, **opts)
    rec = run_training(cfg)
    return np.array([e["loss"] for e in rec["epochs"]]), rec


def _halo_bytes(rec) -> float:
    return sum(v["bytes"] for t, v in rec["comm"]["by_tag"].items() if t.startswith("halo/"))


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_jaca_degenerate_settings_equal_exact(graph_file, model):
    ref, exact = _run(graph_file, model=model)
    for params in ({"cache": "input"}, {"staleness": 1}, {"staleness": 1, "backward": "fresh"}):
        got, rec = _run(graph_file, "jaca", params, model=model)
        np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=str(params))
    # input features come from the caches after epoch 0: hit rate 1 on layer 0
    assert rec["epochs"][-1]["hit_l0"] == 1.0
    assert rec["epochs"][-1]["hit_l1"] == 0.0          # staleness 1: never a fresh hit
    # caching input features removes layer 0's halo traffic in both directions
    tags = rec["comm"]["by_tag"]
    assert "halo/fwd/0" not in tags and "halo/bwd/0" not in tags
    assert "halo/fwd/0" in exact["comm"]["by_tag"]


def test_jaca_stale_cache_saves_bytes_and_records_hit_rates(graph_file):
    ref, exact = _run(graph_file)
    got, rec = _run(graph_file, "jaca", {"staleness": 10})
    assert _halo_bytes(rec) < 0.7 * _halo_bytes(exact)
    assert np.abs(got - ref).max() > 1e-6            # stale embeddings change the loss
    row = rec["epochs"][-1]
    assert row["hit_rate"] == 1.0 and row["hit_l2"] == 1.0
    assert rec["epochs"][0]["hit_rate"] == 0.0       # cold start
    _, fresh = _run(graph_file, "jaca", {"staleness": 10, "backward": "fresh"})
    assert _halo_bytes(fresh) < 0.1 * _halo_bytes(exact)


def test_jaca_policies_at_equal_capacity(graph_file):
    rates = {}
    for policy in ("priority", "fifo", "lru", "lfu", "random"):
        _, rec = _run(graph_file, "jaca", {"policy": policy, "staleness": 0,
                                           "capacity_fraction": 0.3}, epochs=3)
        rates[policy] = rec["epochs"][-1]["hit_rate"]
        assert 0.0 < rates[policy] < 1.0
    assert rates["priority"] >= min(rates.values())


def test_pool_policies_keep_what_they_should():
    prio = np.array([5.0, 1.0, 4.0, 0.0, 3.0])
    rows = torch.arange(5, dtype=torch.float32)[:, None]
    pool = Pool(5, 2, "priority", prio, np.random.default_rng(0))
    pool.put(np.array([1, 3]), rows[[1, 3]], np.zeros(2, np.int64))
    pool.put(np.array([0, 2, 4]), rows[[0, 2, 4]], np.zeros(3, np.int64))
    assert set(np.flatnonzero(pool.resident)) == {0, 2}
    assert pool.get(np.array([2]))[0, 0] == 2.0
    fifo = Pool(5, 2, "fifo", prio, np.random.default_rng(0))
    for p in range(5):
        fifo.put(np.array([p]), rows[[p]], np.zeros(1, np.int64))
    assert set(np.flatnonzero(fifo.resident)) == {3, 4}
    # staleness: fresh while epoch - stamp < s
    assert fifo.fresh(np.array([3]), 4, 5, True)[0] and not fifo.fresh(np.array([3]), 5, 5, True)[0]
    assert fifo.fresh(np.array([3]), 99, 0, True)[0]        # 0: never refresh


@pytest.mark.parametrize("params, match", [
    ({"local_capacity": -5}, r"local_capacity=-5: must be an integer >= 0"),
    ({"shared_mb": -1.0}, r"shared_mb=-1.0: must be >= 0"),
    ({"policy": "mru"}, r"policy='mru': valid: priority, fifo, lru, lfu, random"),
])
def test_jaca_bad_parameters_name_the_value(params, match):
    with pytest.raises(CdfgnnError, match=match):
        build_strategy("jaca", params)
