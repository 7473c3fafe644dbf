"""Edge-cut partitioners: METIS ("cut" / "vol") and the balanced random node split."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import PARTITIONERS, Topology
from cdfgnn.partition.edgecut import metis, random_nodes, round_robin_parts
from graphs import planted_edges


def graph_from(src, dst, n: int, name: str = "g") -> Graph:
    return Graph.from_edges(np.asarray(src, np.int64), np.asarray(dst, np.int64), n,
                            x=np.zeros((n, 1), np.float32), y=np.zeros(n, np.int64),
                            train=np.ones(n, bool), val=np.zeros(n, bool),
                            test=np.zeros(n, bool), name=name)


def clustered_graph(blocks=8, size=80, p_in=0.12, p_out=0.004, seed=0) -> Graph:
    src, dst, n = planted_edges(blocks, size, p_in, p_out, seed)
    return graph_from(src, dst, n, "clustered")


def edge_cut(g: Graph, parts: np.ndarray) -> int:
    s, d = g.undirected_edges()
    return int((parts[s] != parts[d]).sum())


def comm_volume(g: Graph, parts: np.ndarray, p: int) -> int:
    """METIS's volume: sum over vertices of the other parts among their neighbours."""
    rows = g.row_of_arcs()
    other = parts[g.indices] != parts[rows]
    pairs = np.unique(rows[other] * p + parts[g.indices][other])
    return int(pairs.size)


GRAPH = clustered_graph()


@pytest.mark.parametrize("objective", ["cut", "vol"])
@pytest.mark.parametrize("p", [2, 5, 8])
def test_metis_parts_in_range_balanced_and_seeded(objective, p):
    parts = metis(GRAPH, Topology(1, p), seed=3, objective=objective)
    assert parts.dtype == np.int64 and parts.shape == (GRAPH.num_nodes,)
    sizes = np.bincount(parts, minlength=p)
    assert parts.min() >= 0 and parts.max() < p and (sizes > 0).all()
    # METIS's default tolerance is 3 %; allow a little for its rounding on small parts
    assert sizes.max() <= 1.05 * GRAPH.num_nodes / p + 1
    assert np.array_equal(parts, metis(GRAPH, Topology(1, p), seed=3, objective=objective))


@pytest.mark.parametrize("objective", ["cut", "vol"])
def test_metis_beats_random_on_its_objective(objective):
    p = 8
    parts = metis(GRAPH, Topology(2, 4), seed=0, objective=objective)
    rand = random_nodes(GRAPH, Topology(2, 4), seed=0)
    if objective == "cut":
        assert edge_cut(GRAPH, parts) < 0.3 * edge_cut(GRAPH, rand)
    else:
        assert comm_volume(GRAPH, parts, p) < 0.5 * comm_volume(GRAPH, rand, p)


def test_metis_degenerate_graphs():
    lonely = graph_from([], [], 10)  # no edges: dealt like random, all parts used
    parts = metis(lonely, Topology(1, 4), seed=0)
    assert np.bincount(parts, minlength=4).max() - np.bincount(parts, minlength=4).min() <= 1
    tiny = graph_from([0, 1, 2], [1, 2, 3], 4)  # METIS may leave parts empty here
    parts = metis(tiny, Topology(1, 4), seed=1)
    assert sorted(parts.tolist()) == [0, 1, 2, 3]
    assert np.array_equal(metis(GRAPH, Topology(1, 1), seed=0), np.zeros(GRAPH.num_nodes, np.int64))


def test_metis_bad_parameters_raise():
    with pytest.raises(CdfgnnError, match="objective"):
        metis(GRAPH, Topology(1, 4), seed=0, objective="volume")
    with pytest.raises(CdfgnnError, match="unknown parameter"):
        metis(GRAPH, Topology(1, 4), seed=0, recursive=True)
    with pytest.raises(CdfgnnError, match="ufactor"):
        metis(GRAPH, Topology(1, 4), seed=0, ufactor=0)
    with pytest.raises(CdfgnnError, match="seed"):
        metis(GRAPH, Topology(1, 4), seed=-2)
    with pytest.raises(CdfgnnError, match="expected a Graph"):
        metis("graph", Topology(1, 4), seed=0)


def test_metis_ufactor_loosens_balance():
    strict = np.bincount(metis(GRAPH, Topology(1, 8), seed=0, ufactor=1), minlength=8)
    assert strict.max() <= np.ceil(1.001 * GRAPH.num_nodes / 8) + 1



@pytest.mark.parametrize("objective", ["cut", "vol"])
def test_metis_holds_every_balance_constraint(objective):
    """n x ncon vertex weights are ncon constraints, each balanced (DGL's
    balance_ntypes + balance_edges); pymetis alone passes one and would read the array
    as the first vertices' weights, leaving the degree constraints 1.2-2.5x off."""
    from cdfgnn.partition.edgecut import metis_node_parts
    from cdfgnn.twins.measure import dgl_balance_weights
    g = clustered_graph(blocks=16, size=120, p_in=0.08, p_out=0.003, seed=3)
    deg = np.diff(g.indptr)
    # training vertices: the high-degree half of each block, so degree and split correlate
    train = np.zeros(g.num_nodes, bool)
    for b in range(16):
        ids = np.arange(b * 120, (b + 1) * 120)
        train[ids[np.argsort(-deg[ids])[:60]]] = True
    w = dgl_balance_weights(g.indptr, train)
    for p in (2, 4):
        parts = metis_node_parts(g.indptr, g.indices, p, seed=0, objective=objective,
                                 vweights=w)
        assert parts.min() >= 0 and parts.max() < p
        for col in w.reshape(-1, 4).T:
            per_part = np.bincount(parts, weights=col, minlength=p)
            assert per_part.max() <= 1.08 * per_part.mean(), (p, per_part)
        assert np.array_equal(parts, metis_node_parts(g.indptr, g.indices, p, seed=0,
                                                      objective=objective, vweights=w))
    with pytest.raises(CdfgnnError, match="n x ncon"):
        metis_node_parts(g.indptr, g.indices, 2, seed=0, vweights=w[:-1])

@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), p=st.integers(1, 16), seed=st.integers(0, 2**32))
def test_round_robin_is_a_balanced_seeded_deal(n, p, seed):
    parts = round_robin_parts(n, p, seed)
    sizes = np.bincount(parts, minlength=p)
    assert parts.min() >= 0 and parts.max() < p
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == n
    assert np.array_equal(parts, round_robin_parts(n, p, seed))


def test_random_nodes_is_seeded_and_registered():
    t = Topology(2, 3)
    a = random_nodes(GRAPH, t, seed=1)
    assert np.array_equal(a, random_nodes(GRAPH, t, seed=1))
    assert not np.array_equal(a, random_nodes(GRAPH, t, seed=2))
    sizes = np.bincount(a, minlength=6)
    assert sizes.max() - sizes.min() <= 1
    with pytest.raises(CdfgnnError, match="unknown parameter"):
        random_nodes(GRAPH, t, seed=1, alpha=2)


@pytest.mark.parametrize("method,params", [("metis", {}), ("metis", {"objective": "vol"}),
                                           ("random-nodes", {})])
def test_partition_graph_packages_edge_cuts(method, params):
    part = partition_graph(GRAPH, method, Topology(2, 2), seed=4, **params)
    assert part.kind == "edge" and PARTITIONERS.get(method).kind == "edge"
    assert np.array_equal(part.master, part.assignment)
    assert part.params == dict(params, seed=4)


def test_metis_one_part_needs_no_pymetis(monkeypatch):
    # a GPU machine without pymetis still trains on one worker (benchmarks/gpu_check.sh)
    from cdfgnn.partition.edgecut import metis_node_parts

    monkeypatch.setitem(sys.modules, "pymetis", None)       # import pymetis -> ImportError
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    assert metis_node_parts(indptr, indices, 1, seed=0).tolist() == [0, 0]
    with pytest.raises(ImportError):
        metis_node_parts(indptr, indices, 2, seed=0)
