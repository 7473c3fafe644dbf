"""Our GCN and GraphSAGE layers against DGL's and PyG's on the same graph and weights.

Skipped only when the ``crosscheck`` extra (dgl 2.1.0, torch-geometric 2.8.1) cannot
be imported. DGL 2.1.0 imports with current torch once an empty module stands in for
``dgl.graphbolt`` (whose compiled library is built for an older torch).
"""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from cdfgnn.models.layers import GATLayer, GCNLayer, SAGELayer
from cdfgnn.models.propagate import FullGraphPropagator

pytestmark = pytest.mark.crosscheck


@pytest.fixture(autouse=True, scope="module")
def _generated_modules_in_a_test_folder(tmp_path_factory):
    """PyG writes each conv's generated module to the temporary directory and never
    removes it (torch_geometric/template.py, ``delete=False``): keep them in pytest's
    folder instead of /tmp."""
    import tempfile
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("pyg-modules"))
    yield
    tempfile.tempdir = saved


def _import_dgl():
    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        import dgl
        import dgl.nn.pytorch as dglnn
    except Exception as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"crosscheck extra not importable: dgl ({exc})")
    return dgl, dglnn


def _import_pyg():
    try:
        import torch_geometric.nn as pygnn
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"crosscheck extra not importable: torch_geometric ({exc})")
    return pygnn


def _ours(layer_cls, graph, fin, fout, seed=0):
    torch.manual_seed(seed)
    layer = layer_cls(fin, fout)
    with torch.no_grad():
        layer.bias.uniform_(-0.5, 0.5)
    prop = FullGraphPropagator(graph.indptr, graph.indices)
    return layer, layer(torch.from_numpy(graph.x), prop, 0)


def _edges(graph):
    src = torch.from_numpy(graph.row_of_arcs())
    dst = torch.from_numpy(graph.indices)
    return src, dst


def test_gcn_matches_pyg(small_graph):
    pygnn = _import_pyg()
    layer, ours = _ours(GCNLayer, small_graph, small_graph.num_features, 7)
    conv = pygnn.GCNConv(small_graph.num_features, 7)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.T)
        conv.bias.copy_(layer.bias)
    src, dst = _edges(small_graph)
    theirs = conv(torch.from_numpy(small_graph.x), torch.stack([src, dst]))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_sage_matches_pyg(small_graph):
    pygnn = _import_pyg()
    layer, ours = _ours(SAGELayer, small_graph, small_graph.num_features, 7)
    conv = pygnn.SAGEConv(small_graph.num_features, 7, aggr="mean")
    with torch.no_grad():
        conv.lin_l.weight.copy_(layer.w_neigh.T)
        conv.lin_l.bias.copy_(layer.bias)
        conv.lin_r.weight.copy_(layer.w_self.T)
    src, dst = _edges(small_graph)
    theirs = conv(torch.from_numpy(small_graph.x), torch.stack([src, dst]))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("heads", [1, 3])
def test_gat_matches_pyg(small_graph, heads):
    """Our GAT = PyG GATConv(concat=False): self loops added, LeakyReLU 0.2, heads averaged."""
    pygnn = _import_pyg()
    g = small_graph
    torch.manual_seed(0)
    layer = GATLayer(g.num_features, 7, heads=heads)
    with torch.no_grad():
        layer.bias.uniform_(-0.5, 0.5)
    ours = layer(torch.from_numpy(g.x), FullGraphPropagator(g.indptr, g.indices), 0)
    conv = pygnn.GATConv(g.num_features, 7, heads=heads, concat=False)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.T)
        conv.att_src.copy_(layer.att_src[None])
        conv.att_dst.copy_(layer.att_dst[None])
        conv.bias.copy_(layer.bias)
    src, dst = _edges(g)
    theirs = conv(torch.from_numpy(g.x), torch.stack([src, dst]))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_gcn_matches_dgl(small_graph):
    dgl, dglnn = _import_dgl()
    layer, ours = _ours(GCNLayer, small_graph, small_graph.num_features, 7)
    src, dst = _edges(small_graph)
    g = dgl.add_self_loop(dgl.graph((src, dst), num_nodes=small_graph.num_nodes))
    conv = dglnn.GraphConv(small_graph.num_features, 7, norm="both")
    with torch.no_grad():
        conv.weight.copy_(layer.weight)
        conv.bias.copy_(layer.bias)
    theirs = conv(g, torch.from_numpy(small_graph.x))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_sage_matches_dgl(small_graph):
    dgl, dglnn = _import_dgl()
    layer, ours = _ours(SAGELayer, small_graph, small_graph.num_features, 7)
    src, dst = _edges(small_graph)
    g = dgl.graph((src, dst), num_nodes=small_graph.num_nodes)
    conv = dglnn.SAGEConv(small_graph.num_features, 7, aggregator_type="mean")
    with torch.no_grad():
        conv.fc_neigh.weight.copy_(layer.w_neigh.T)
        conv.fc_self.weight.copy_(layer.w_self.T)
        # where the bias lives differs across DGL versions
        biases = [getattr(conv, "bias", None), conv.fc_neigh.bias, conv.fc_self.bias]
        next(b for b in biases if b is not None).copy_(layer.bias)
    theirs = conv(g, torch.from_numpy(small_graph.x))
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_degrees_are_global_in_both(small_graph):
    """Isolated vertices exist in the fixture, so the zero-degree path is compared too."""
    assert (np.diff(small_graph.indptr) == 0).any()
