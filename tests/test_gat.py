"""GAT on the halo engine: distributed ``exact`` equals one-process GAT (edge-cut), with
one and two heads, dropout on and off, with and without the first-layer precompute."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.oracle import train_full_graph
from cdfgnn.train.run import train_distributed

TOL = 1e-5


def _cfg(p, heads=1, dropout=0.0, layers=2, pre=False):
    return TrainConfig(model="gat", heads=heads, layers=layers, hidden=8, epochs=6, workers=p,
                       hosts=2, dropout=dropout, timeout_s=60, precompute_first_layer=pre)


def _assert_exact(graph, cfg, ref_cfg=None, partitioner="metis"):
    ref = train_full_graph(graph, ref_cfg or cfg)
    part = partition_graph(graph, partitioner, Topology(2, cfg.workers // 2), seed=0)
    res = train_distributed(cfg, graph, part)
    ref_loss = np.array([e["loss"] for e in ref["epochs"]])
    for r in res:
        np.testing.assert_allclose([e["loss"] for e in r["epochs"]], ref_loss, rtol=0, atol=TOL)
    for name, w in ref["final_state"].items():
        assert (res[0]["final_state"][name] - w).abs().max().item() <= TOL, name
    return res


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("heads,dropout,layers", [(1, 0.0, 2), (2, 0.3, 3)])
def test_gat_exact(small_graph, p, heads, dropout, layers):
    res = _assert_exact(small_graph, _cfg(p, heads, dropout, layers))
    # the halo of every layer is exchanged: forward and backward (first layer: no
    # backward, its input needs no gradient)
    tags = set(res[0]["traffic"][0])
    assert {f"halo/fwd/{i}" for i in range(layers)} <= tags
    assert f"halo/bwd/{layers - 1}" in tags


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gat_precompute_is_exact(small_graph, dropout):
    """Precompute for GAT fetches the halo's input rows once: the same model, even with
    dropout (masks keyed by global id)."""
    res = _assert_exact(small_graph, _cfg(4, dropout=dropout, pre=True),
                        ref_cfg=_cfg(4, dropout=dropout, pre=False))
    for epoch in res[0]["traffic"]:
        assert not [t for t in epoch if t.endswith("/0")]


def test_gat_gradients_flow_through_halo(small_graph):
    """Perturbing a halo row's owner input changes this rank's output (attention + values)."""
    from cdfgnn.models import GNN
    from cdfgnn.models.propagate import FullGraphPropagator
    g = small_graph
    net = GNN("gat", g.num_features, 4, g.num_classes, 2, heads=2)
    prop = FullGraphPropagator(g.indptr, g.indices)
    x = torch.from_numpy(g.x).requires_grad_()
    net(x, prop).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    assert x.grad.abs().sum() > 0


def test_gat_vertex_cut_and_options_errors(small_graph):
    part = partition_graph(small_graph, "hdrf", Topology(2, 1), seed=0)
    with pytest.raises(Exception, match="edge-cut"):
        train_distributed(_cfg(2), small_graph, part)
    with pytest.raises(CdfgnnError, match="heads"):
        TrainConfig(model="gcn", heads=2).validate()
    with pytest.raises(CdfgnnError, match="heads"):
        TrainConfig(model="gat", heads=0).validate()
