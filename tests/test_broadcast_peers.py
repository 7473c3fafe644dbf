"""The re-implemented peers (cagnet, sancus): whole-partition broadcasts on edge-cut."""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def _cfg(graph_file, method, partitioner="metis", **params):
    return TrainConfig(dataset=None, graph=graph_file, epochs=8, warmup=1, hidden=16,
                       workers=4, hosts=2, partitioner=partitioner, timeout_s=120,
                       dropout=0.0, method=method, method_params=params)


@pytest.fixture(scope="module")
def exact(graph_file):
    return run_training(_cfg(graph_file, "exact"))


def _losses(rec):
    return np.array([e["loss"] for e in rec["epochs"]])


def _vertex_bytes(rec):
    return sum(d["bytes"] for t, d in rec["comm"]["by_tag"].items() if t.startswith("halo"))


# cagnet and sancus staleness=0 equal the oracle: tests/test_degenerate.py
def test_cagnet_broadcasts_whole_blocks(graph_file, exact):
    rec = run_training(_cfg(graph_file, "cagnet"))
    # every rank sends its whole owned block (n_r rows) to each of the 3 others, per layer
    owned = [r["owned_rows"] for r in rec["ranks"]]
    fwd = rec["comm"]["by_tag"]["halo/fwd/0"]["rows"]
    assert fwd == pytest.approx(3 * sum(owned))
    assert _vertex_bytes(rec) > _vertex_bytes(exact)


def test_sancus_without_staleness_skips_nothing(graph_file):
    rec = run_training(_cfg(graph_file, "sancus", staleness=0))
    assert all(e["skipped_broadcasts"] == 0 for e in rec["epochs"])


def test_sancus_skips_broadcasts(graph_file):
    full = run_training(_cfg(graph_file, "cagnet"))
    rec = run_training(_cfg(graph_file, "sancus", staleness=3, threshold=0.5))
    assert sum(e["skipped_broadcasts"] for e in rec["epochs"]) > 0
    assert rec["epochs"][0]["skipped_broadcasts"] == 0
    assert _vertex_bytes(rec) < _vertex_bytes(full)
    assert np.abs(_losses(rec) - _losses(full)).max() > 1e-6


def test_peers_need_an_edge_cut(graph_file):
    with pytest.raises(CdfgnnError, match=r"method 'sancus' needs a edge-cut partitioning"):
        run_training(_cfg(graph_file, "sancus", partitioner="hdrf"))
