"""Expansion-based vertex cuts (NE, HEP, DNE) and the METIS projection ("metis-edges")."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cdfgnn.partition.vertexcut  # noqa: F401  (registers every vertex-cut partitioner)
from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import PARTITIONERS, EdgeList, Topology
from cdfgnn.partition.vertexcut.dne import dne
from cdfgnn.partition.vertexcut.hep import hep
from cdfgnn.partition.vertexcut.ne import ne
from cdfgnn.partition.vertexcut.projected import (cross_edge_mask, metis_edges,
                                                  projected_node_parts)
from graphs import planted_edges

EXPANSION = ["ne", "hep", "dne"]
ALL = EXPANSION + ["metis-edges"]


# ----------------------------------------------------------------------------- helpers
def topo(p: int) -> Topology:
    return Topology(1, p)


def edge_list(pairs, n: int) -> EdgeList:
    a = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return EdgeList(a[:, 0].copy(), a[:, 1].copy(), n)


def plain_degrees(el: EdgeList) -> np.ndarray:
    keep = el.src != el.dst
    return (np.bincount(el.src[keep], minlength=el.num_nodes)
            + np.bincount(el.dst[keep], minlength=el.num_nodes))


def replication_factor(el: EdgeList, parts: np.ndarray, p: int) -> float:
    """sum_i |V_i| / |V_non-isolated|."""
    keys = np.unique(np.concatenate([el.src * p + parts, el.dst * p + parts]))
    return keys.size / np.unique(np.concatenate([el.src, el.dst])).size


def planted_partition(blocks=8, size=60, p_in=0.15, p_out=0.003, seed=0) -> EdgeList:
    """Clustered graph: dense blocks, sparse links between them (src < dst, unique)."""
    return EdgeList(*planted_edges(blocks, size, p_in, p_out, seed))


def power_law(n=3000, avg=8.0, seed=0) -> EdgeList:
    """Chung-Lu graph with Pareto(2.2) weights: a few hubs, many low-degree vertices."""
    rng = np.random.default_rng(seed)
    w = (1.0 - rng.random(n)) ** (-1.0 / 1.2)
    prob = w / w.sum()
    m = int(n * avg / 2)
    s = rng.choice(n, m, p=prob)
    d = rng.choice(n, m, p=prob)
    key = np.unique(np.minimum(s, d)[s != d] * n + np.maximum(s, d)[s != d])
    return EdgeList(key // n, key % n, n)


def run(name, el, p, seed=0, **kw):
    return PARTITIONERS.get(name)(el, topo(p), seed=seed, **kw)


@st.composite
def edge_lists(draw, max_n=30, max_m=90, loops=True):
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(0, max_m))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    if not loops:
        pairs = [(a, b) for a, b in zip(src, dst) if a != b]
        src, dst = [a for a, _ in pairs], [b for _, b in pairs]
    return EdgeList(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), n)


FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------- every partitioner
@pytest.mark.parametrize("name", ALL)
@FAST
@given(el=edge_lists(), p=st.integers(1, 9), seed=st.integers(0, 3))
def test_every_edge_gets_one_part_in_range_and_is_deterministic(name, el, p, seed):
    # arbitrary multigraphs: duplicates, self-loops, isolated vertices, p > |E|
    parts = run(name, el, p, seed)
    assert parts.dtype == np.int64 and parts.shape == (el.num_edges,)
    if parts.size:
        assert parts.min() >= 0 and parts.max() < p
    assert np.array_equal(parts, run(name, el, p, seed))


@pytest.mark.parametrize("name", ALL)
def test_degenerate_inputs(name):
    empty = EdgeList(np.zeros(0, np.int64), np.zeros(0, np.int64), 5)
    assert run(name, empty, 4).shape == (0,)
    el = power_law(n=200, avg=4.0)
    assert np.array_equal(run(name, el, 1), np.zeros(el.num_edges, np.int64))
    few = edge_list([(0, 1), (1, 2)], 10)  # more parts than edges
    parts = run(name, few, 8)
    assert parts.shape == (2,) and parts.min() >= 0 and parts.max() < 8


@pytest.mark.parametrize("name", EXPANSION)
def test_self_loops_change_nothing_else_and_add_no_replica(name):
    base = power_law(n=400, avg=6.0, seed=3)
    loops_at = np.array([0, 5, 5, 17], dtype=np.int64)     # 5 has two self-loops
    only_loop = base.num_nodes                              # a vertex with only a self-loop
    el = EdgeList(np.concatenate([base.src, loops_at, [only_loop]]),
                  np.concatenate([base.dst, loops_at, [only_loop]]), base.num_nodes + 1)
    p = 4
    plain = run(name, EdgeList(base.src, base.dst, el.num_nodes), p, seed=2)
    parts = run(name, el, p, seed=2)
    m = base.num_edges
    assert np.array_equal(parts[:m], plain)  # self-loops take no part in the expansion
    for e, v in enumerate(loops_at, start=m):
        holders = set(parts[:m][(base.src == v) | (base.dst == v)])
        assert parts[e] in holders  # placed on an existing replica of v
    assert 0 <= parts[-1] < p


@pytest.mark.parametrize("name", ["ne", "dne"])
def test_bad_parameters_raise(name):
    el = power_law(n=100, avg=4.0)
    with pytest.raises(CdfgnnError, match="alpha"):
        run(name, el, 4, alpha=0.0 if name == "ne" else 0.9)
    with pytest.raises(CdfgnnError, match="unknown parameter"):
        run(name, el, 4, bogus=1)
    with pytest.raises(CdfgnnError, match="seed"):
        run(name, el, 4, seed=-1)
    with pytest.raises(CdfgnnError, match="endpoints"):
        run(name, EdgeList(np.array([0]), np.array([7]), 3), 2)


def test_hep_and_dne_bad_parameters_raise():
    el = power_law(n=100, avg=4.0)
    with pytest.raises(CdfgnnError, match="tau"):
        hep(el, topo(4), seed=0, tau=-1.0)
    with pytest.raises(CdfgnnError, match="expand_ratio"):
        dne(el, topo(4), seed=0, expand_ratio=0.0)
    with pytest.raises(CdfgnnError, match="drop_cross"):
        metis_edges(el, topo(4), seed=0, drop_cross="yes")
    with pytest.raises(CdfgnnError, match="objective"):
        metis_edges(el, topo(4), seed=0, objective="volume")


# ------------------------------------------------------------------------------ balance
@FAST
@given(el=edge_lists(max_n=40, max_m=150, loops=False), p=st.integers(2, 8),
       seed=st.integers(0, 3))
def test_ne_balance_bound(el, p, seed):
    """Parts 0..p-2 stop at floor(|E|/p)+1 plus at most the last core vertex's edges;
    the leftover part p-1 then holds at most |E|/p."""
    m = el.num_edges
    loads = np.bincount(ne(el, topo(p), seed=seed), minlength=p)
    maxdeg = int(plain_degrees(el).max())
    assert loads.max() <= m // p + 1 + maxdeg
    assert loads[p - 1] <= m / p


@FAST
@given(el=edge_lists(max_n=40, max_m=150, loops=False), p=st.integers(2, 8),
       seed=st.integers(0, 3), alpha=st.sampled_from([1.0, 1.1, 1.5]))
def test_dne_balance_bound(el, p, seed, alpha):
    """A part passes its capacity only through the edges of the vertex it selected last."""
    m = el.num_edges
    loads = np.bincount(dne(el, topo(p), seed=seed, alpha=alpha), minlength=p)
    maxdeg = int(plain_degrees(el).max())
    assert loads.max() <= int(alpha * m / p) + maxdeg


def test_ne_and_dne_balance_on_a_power_law_graph():
    el = power_law()
    m, p = el.num_edges, 8
    loads = np.bincount(ne(el, topo(p), seed=0), minlength=p)
    assert loads.max() <= 1.05 * m / p
    loads = np.bincount(dne(el, topo(p), seed=0), minlength=p)
    assert loads.max() <= 1.1 * m / p + plain_degrees(el).max()


# ---------------------------------------------------------------------------- structure
def test_ne_restarts_on_every_component():
    # 60 disjoint 5-cycles: the queue empties after each cycle, NE must take a new seed
    cycles = [(5 * c + i, 5 * c + (i + 1) % 5) for c in range(60) for i in range(5)]
    el = edge_list(cycles, 300)
    p = 3
    parts = ne(el, topo(p), seed=1)
    loads = np.bincount(parts, minlength=p)
    cap = el.num_edges // p + 1
    assert (loads[:-1] >= cap).all()        # each expanded part filled across many cycles
    assert loads.sum() == el.num_edges
    # growing cycle by cycle, at most one cycle per part boundary is split
    comp = el.src // 5
    split = sum(len(set(parts[comp == c])) > 1 for c in range(60))
    assert split <= p - 1


@pytest.mark.parametrize("name", EXPANSION)
def test_star(name):
    leaves = 40
    el = edge_list([(0, i) for i in range(1, leaves + 1)], leaves + 1)
    parts = run(name, el, 4)
    assert parts.shape == (leaves,) and parts.min() >= 0 and parts.max() < 4
    # a leaf has one edge, so only the centre can be replicated
    assert replication_factor(el, parts, 4) <= (leaves + 4) / (leaves + 1)


@pytest.mark.parametrize("name", EXPANSION + ["metis-edges"])
def test_lower_replication_than_random_on_a_clustered_graph(name):
    el = planted_partition()
    p = 8
    rf_random = replication_factor(el, run("random", el, p), p)
    rf = replication_factor(el, run(name, el, p), p)
    assert rf < 0.6 * rf_random, (name, rf, rf_random)


def test_dne_conflicts_are_resolved_and_rounds_terminate_on_a_clique():
    # every part reaches the same vertices in the first rounds of a clique
    n = 30
    iu, ju = np.triu_indices(n, 1)
    el = EdgeList(iu.astype(np.int64), ju.astype(np.int64), n)
    for p in (2, 5, 8):
        parts = dne(el, topo(p), seed=0)
        loads = np.bincount(parts, minlength=p)
        assert loads.sum() == el.num_edges
        assert loads.max() <= int(1.1 * el.num_edges / p) + n - 1


# --------------------------------------------------------------------------------- HEP
@FAST
@given(el=edge_lists(max_n=40, max_m=150), p=st.integers(2, 8), seed=st.integers(0, 3))
def test_hep_without_high_degree_vertices_is_ne(el, p, seed):
    """tau -> inf: nothing is high-degree, NE++ is NE (same seed stream) and HDRF only
    ever sees NE's leftovers, which the capacity rule keeps in the last part."""
    assert np.array_equal(hep(el, topo(p), seed=seed, tau=1e12), ne(el, topo(p), seed=seed))


def _reference_hdrf(el: EdgeList, p: int, lam: float) -> np.ndarray:
    """HEP's streaming phase written out plainly: edge-id order, full degrees,
    capacity floor(|E|/p)+1, exact min/max loads, lowest-id ties."""
    deg = plain_degrees(el)
    m = int((el.src != el.dst).sum())
    cap = m // p + 1
    rep = [set() for _ in range(el.num_nodes)]
    loads = [0] * p
    out = np.full(el.num_edges, -1, np.int64)
    for e, (u, v) in enumerate(zip(el.src.tolist(), el.dst.tolist())):
        if u == v:
            continue
        lo, hi = min(loads), max(loads)
        best, best_score = -1, -1.0
        for i in range(p):
            if loads[i] >= cap:
                continue
            score = lam * (hi - loads[i]) / (1.0 + hi - lo)
            if i in rep[u]:
                score += 2.0 - deg[u] / (deg[u] + deg[v])
            if i in rep[v]:
                score += 2.0 - deg[v] / (deg[u] + deg[v])
            if score > best_score:
                best, best_score = i, score
        out[e] = best
        loads[best] += 1
        rep[u].add(best)
        rep[v].add(best)
    return out


@FAST
@given(el=edge_lists(max_n=25, max_m=80, loops=False), p=st.integers(2, 6),
       lam=st.sampled_from([0.5, 1.1, 3.0]))
def test_hep_with_tau_zero_is_pure_hdrf(el, p, lam):
    assert np.array_equal(hep(el, topo(p), seed=0, tau=0.0, lam=lam), _reference_hdrf(el, p, lam))


def test_hep_routes_hub_edges_through_hdrf_and_keeps_low_degree_vertices_whole():
    el = power_law(n=3000, avg=8.0, seed=1)
    p = 8
    deg = plain_degrees(el)
    tau = 3.0
    high = deg > tau * (2.0 * el.num_edges / el.num_nodes)
    h2h = high[el.src] & high[el.dst]
    assert 0 < h2h.sum() < el.num_edges and high.sum() < 0.1 * el.num_nodes
    parts = hep(el, topo(p), seed=0, tau=tau)
    # the hubs absorb the cuts: low-degree vertices are far less replicated than hubs
    keys = np.unique(np.concatenate([el.src * p + parts, el.dst * p + parts]))
    replicas = np.bincount(keys // p, minlength=el.num_nodes)
    assert replicas[high].mean() > 2 * replicas[~high & (deg > 0)].mean()
    # and the whole is far better than random and within HEP's usual balance
    rf_random = replication_factor(el, run("random", el, p), p)
    assert replication_factor(el, parts, p) < 0.6 * rf_random
    assert np.bincount(parts, minlength=p).max() <= 1.3 * el.num_edges / p


# ------------------------------------------------------------------------- metis-edges
def _graph(el: EdgeList) -> Graph:
    n = el.num_nodes
    return Graph.from_edges(el.src, el.dst, n, x=np.zeros((n, 1), np.float32),
                            y=np.zeros(n, np.int64), train=np.ones(n, bool),
                            val=np.zeros(n, bool), test=np.zeros(n, bool), name="planted")


@pytest.mark.parametrize("objective", ["cut", "vol"])
def test_metis_edges_projects_the_metis_node_parts(objective):
    el = planted_partition(seed=4)
    p = 8
    node_parts = projected_node_parts(el, topo(p), seed=3, objective=objective)
    parts = metis_edges(el, topo(p), seed=3, objective=objective)
    internal = node_parts[el.src] == node_parts[el.dst]
    assert internal.mean() > 0.8  # METIS found the blocks
    assert np.array_equal(parts[internal], node_parts[el.src[internal]])
    cross = ~internal
    assert np.array_equal(parts[cross], node_parts[np.minimum(el.src, el.dst)[cross]])


def test_cross_edge_mask_round_trip():
    el = planted_partition(seed=5)
    graph = _graph(el)
    p = topo(4)
    kept = partition_graph(graph, "metis-edges", p, seed=7, drop_cross=True)
    node_parts = projected_node_parts(EdgeList.from_graph(graph), p, seed=7)
    s, d = graph.undirected_edges()
    mask = cross_edge_mask(graph, kept)
    assert np.array_equal(mask, node_parts[s] != node_parts[d]) and mask.any()
    whole = partition_graph(graph, "metis-edges", p, seed=7, drop_cross=False)
    assert not cross_edge_mask(graph, whole).any()
    kept.assignment = kept.assignment.copy()
    kept.assignment[np.flatnonzero(~mask)[0]] ^= 1  # no longer the METIS projection
    with pytest.raises(CdfgnnError, match="projection"):
        cross_edge_mask(graph, kept)
