"""Models, dropout masks and the mini-batch sampler against exact references."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.models import GNN
from cdfgnn.models.dropout import dropout_key, dropout_mask
from cdfgnn.models.propagate import FullGraphPropagator
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.oracle import sample_blocks
from cdfgnn.train.run import run_training


def test_dropout_mask_is_keyed_by_global_id_only():
    ids = torch.arange(1000) * 7 + 3
    m = dropout_mask(ids, 33, 0.3, 99)
    assert m.unique().tolist() == pytest.approx([0.0, 1 / 0.7])
    assert abs((m > 0).float().mean().item() - 0.7) < 0.02
    perm = torch.randperm(1000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(dropout_mask(ids[perm], 33, 0.3, 99), m[perm])  # rank-independent
    assert not torch.equal(dropout_mask(ids, 33, 0.3, 100), m)
    assert dropout_key(0, 1, 0) != dropout_key(0, 0, 1)


def test_dropout_mask_chunks_agree(monkeypatch):
    import cdfgnn.models.dropout as d
    ids = torch.arange(300)
    whole = dropout_mask(ids, 5, 0.5, 7)
    monkeypatch.setattr(d, "_CHUNK_ROWS", 64)
    assert torch.equal(dropout_mask(ids, 5, 0.5, 7), whole)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_full_fanout_blocks_equal_full_graph(small_graph, model):
    """With fan-out >= max degree, sampled blocks compute the exact full-graph output."""
    g = small_graph
    net = GNN(model, g.num_features, 8, g.num_classes, 2, 0.0, 0).eval()
    x = torch.from_numpy(g.x)
    full = net(x, FullGraphPropagator(g.indptr, g.indices))
    seeds = np.arange(0, g.num_nodes, 7)
    inputs, blocks = sample_blocks(g, seeds, [int(g.degrees().max())] * 2,
                                   np.random.default_rng(0))
    out = net(x[inputs], blocks)
    torch.testing.assert_close(out, full[seeds], atol=1e-5, rtol=1e-5)


def test_sampler_keeps_min_degree_fanout(small_graph):
    g = small_graph
    seeds = np.arange(g.num_nodes)
    _, blocks = sample_blocks(g, seeds, [3], np.random.default_rng(1))
    kept = np.diff(blocks[0].base_view.indptr)
    np.testing.assert_array_equal(kept, np.minimum(g.degrees(), 3))


def test_gnn_refuses_wrong_number_of_propagators(small_graph):
    net = GNN("gcn", small_graph.num_features, 4, 3, 3)
    prop = FullGraphPropagator(small_graph.indptr, small_graph.indices)
    with pytest.raises(ValueError, match="3 layers"):
        net(torch.from_numpy(small_graph.x), [prop, prop])


def test_eval_every_and_short_runs(tmp_path, small_graph):
    path = tmp_path / "g.npz"
    small_graph.save(path)
    rec = run_training(TrainConfig(graph=str(path), dataset=None, epochs=4, warmup=5,
                                   eval_every=3, workers=2, hosts=2, partitioner="hdrf"))
    assert [("test" in e) for e in rec["epochs"]] == [True, False, False, True]
    assert rec["summary"]["timed_epochs"] == 1  # epochs <= warmup: the last one is timed
