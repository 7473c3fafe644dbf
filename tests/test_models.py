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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_fused_dropout_equals_reference_hash(dtype, p):
    """The fused kernel applies exactly the version-1 mask (int64 tensor-pass reference)."""
    from cdfgnn.models.dropout import dropout, reference_mask
    gen = torch.Generator().manual_seed(1)
    ids = torch.randperm(5000, generator=gen)[:700] * 977 + 2 ** 33  # ids beyond 32 bits too
    x = torch.randn(700, 37, generator=gen, dtype=dtype)
    key = dropout_key(5, 11, 2)
    mask = reference_mask(ids, 37, p, key)
    assert torch.equal(dropout(x, ids, p, key), x * mask)
    assert torch.equal(dropout_mask(ids, 37, p, key), mask)
    assert abs((mask > 0).double().mean().item() - (1 - p)) < 0.01


def test_fused_dropout_backward_applies_the_same_mask():
    from cdfgnn.models.dropout import dropout
    ids = torch.arange(500) * 3
    x = torch.randn(500, 20, dtype=torch.float64, requires_grad=True)
    g = torch.randn(500, 20, dtype=torch.float64)
    dropout(x, ids, 0.4, 123).backward(g)
    assert torch.equal(x.grad, g * dropout_mask(ids, 20, 0.4, 123).double())
    torch.autograd.gradcheck(lambda t: dropout(t, ids[:6], 0.4, 9), (x[:6, :4].detach()
                             .clone().requires_grad_(True),))


def test_fused_dropout_edge_cases():
    from cdfgnn.models.dropout import dropout
    x = torch.randn(4, 3)
    assert dropout(x, torch.arange(4), 0.0, 1) is x
    assert dropout(torch.empty(0, 3), torch.empty(0, dtype=torch.int64), 0.5, 1).shape == (0, 3)
    x = torch.randn(8, 6)[:, ::2]  # non-contiguous input
    ids = torch.arange(8)
    assert torch.equal(dropout(x, ids, 0.5, 3), x * dropout_mask(ids, 3, 0.5, 3))
    with pytest.raises(ValueError, match="one global id per row"):
        dropout(torch.randn(4, 3), torch.arange(5), 0.5, 1)


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
