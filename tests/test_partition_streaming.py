"""Streaming vertex-cut partitioners: random, dbh, hdrf, greedy, ebv.

Properties (hypothesis) on arbitrary small edge lists with self-loops, duplicates and
isolated vertices; exact agreement of the numba kernels with plain-Python
re-statements of each paper's rule; balance/quality bounds on a power-law graph;
the CDFGNN hierarchical-EBV claims (gamma has no effect with one device per host,
and gamma = 0.1 cuts cross-host replicas on 2 hosts x 4 devices).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cdfgnn.partition.vertexcut  # noqa: F401  (registers the partitioners)
from cdfgnn.data.graph import Graph, csr_from_edges
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import partition_graph, select_masters
from cdfgnn.partition.base import PARTITIONERS, EdgeList, Topology
from cdfgnn.partition.vertexcut import dbh as dbh_mod
from cdfgnn.partition.vertexcut import ebv as ebv_mod
from cdfgnn.partition.vertexcut import greedy as greedy_mod
from cdfgnn.partition.vertexcut import hdrf as hdrf_mod
from cdfgnn.partition.vertexcut._kernels import (popcount_rows, replica_bitset, seed_state,
                                                 stream_order, vertex_hash_parts)

OURS = ("random", "dbh", "hdrf", "greedy", "ebv")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# topologies including p > 64 (multi-word device bitsets) and hosts > 64 (multi-word host bitsets)
TOPOLOGIES = [(1, 1), (1, 3), (2, 1), (2, 4), (3, 2), (4, 1), (1, 65), (2, 33), (70, 1)]


def run(name: str, edges: EdgeList, topo: Topology, seed: int = 0, **params) -> np.ndarray:
    return PARTITIONERS.get(name)(edges, topo, seed=seed, **params)


@st.composite
def edge_lists(draw, max_nodes: int = 25, max_edges: int = 70) -> EdgeList:
    """Arbitrary edge lists: duplicates, both orientations, self-loops, isolated vertices."""
    n = draw(st.integers(1, max_nodes))
    m = draw(st.integers(0, max_edges))
    ends = st.lists(st.integers(0, n - 1), min_size=m, max_size=m)
    return EdgeList(np.array(draw(ends), dtype=np.int64), np.array(draw(ends), dtype=np.int64), n)


topologies = st.sampled_from(TOPOLOGIES).map(lambda t: Topology(*t))


def power_law(num_nodes: int, draws: int, seed: int) -> EdgeList:
    """Chung-Lu graph (weights (i+1)^-2/3, ids shuffled), simple, edges in CSR order."""
    rng = np.random.default_rng(seed)
    w = (np.arange(num_nodes) + 1.0) ** (-2.0 / 3.0)
    w /= w.sum()
    label = rng.permutation(num_nodes)
    a = label[rng.choice(num_nodes, draws, p=w)]
    b = label[rng.choice(num_nodes, draws, p=w)]
    indptr, indices = csr_from_edges(a, b, num_nodes)
    rows = np.repeat(np.arange(num_nodes), np.diff(indptr))
    keep = rows < indices
    return EdgeList(rows[keep], indices[keep], num_nodes)


@pytest.fixture(scope="module")
def plaw() -> EdgeList:
    return power_law(4000, 24000, seed=7)  # 23152 simple edges


def replication(edges: EdgeList, parts: np.ndarray, p: int) -> float:
    reps = popcount_rows(replica_bitset(edges, parts, p))
    return float(reps[reps > 0].mean())


def edge_imbalance(parts: np.ndarray, p: int) -> float:
    return float(np.bincount(parts, minlength=p).max() / (parts.size / p))


def cross_host_replicas(edges: EdgeList, parts: np.ndarray, topo: Topology) -> int:
    """sum over vertices of (hosts holding it - 1): mirrors that live on another host."""
    reps = popcount_rows(replica_bitset(edges, parts // topo.devices_per_host, topo.hosts))
    return int((reps[reps > 0] - 1).sum())


# ----------------------------------------------------------------------------- registry
def test_registered_as_vertex_cut():
    for name in OURS:
        fn = PARTITIONERS.get(name)
        assert fn.kind == "vertex" and fn.partitioner_name == name
    assert "ebv-h" not in PARTITIONERS


# ------------------------------------------------------------------ generic properties
@FAST
@given(edges=edge_lists(), topo=topologies, seed=st.integers(0, 2**32))
def test_every_edge_assigned_once_in_range_and_deterministic(edges, topo, seed):
    p = topo.num_parts
    for name in OURS:
        parts = run(name, edges, topo, seed)
        assert parts.dtype == np.int64 and parts.shape == (edges.num_edges,), name
        if parts.size:
            assert parts.min() >= 0 and parts.max() < p, name
        assert np.array_equal(parts, run(name, edges, topo, seed)), name
        if p == 1:
            assert not parts.any(), name


@FAST
@given(edges=edge_lists(), hosts=st.integers(1, 5), gamma=st.floats(0.0, 1.0),
       norm=st.sampled_from(["vertices", "replicas"]),
       order=st.sampled_from(["degree", "shuffle", "input"]))
def test_ebv_gamma_has_no_effect_with_one_device_per_host(edges, hosts, gamma, norm, order):
    topo = Topology(hosts, 1)
    base = run("ebv", edges, topo, gamma=0.0, vertex_norm=norm, order=order)
    assert np.array_equal(run("ebv", edges, topo, gamma=gamma, vertex_norm=norm, order=order), base)
    assert np.array_equal(run("ebv", edges, topo, gamma=0.1, vertex_norm=norm, order=order), base)


def test_ebv_gamma_identity_two_hosts_one_device(plaw):
    topo = Topology(2, 1)
    assert np.array_equal(run("ebv", plaw, topo, gamma=0.1), run("ebv", plaw, topo, gamma=0.0))


@FAST
@given(edges=edge_lists(), topo=topologies, seed=st.integers(0, 1000), data=st.data())
def test_random_is_a_function_of_the_unordered_edge(edges, topo, seed, data):
    """Permuting edges and flipping their orientation permutes the output the same way."""
    m = edges.num_edges
    perm = np.array(data.draw(st.permutations(range(m))), dtype=np.int64)
    flip = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool)
    s, d = edges.src[perm], edges.dst[perm]
    moved = EdgeList(np.where(flip, d, s), np.where(flip, s, d), edges.num_nodes)
    assert np.array_equal(run("random", moved, topo, seed), run("random", edges, topo, seed)[perm])


@FAST
@given(edges=edge_lists(), topo=topologies, seed=st.integers(0, 1000))
def test_dbh_rule(edges, topo, seed):
    """part = h(lower-degree endpoint, ties to src); 'mod' hash is the id itself."""
    p = topo.num_parts
    deg = edges.degrees()
    chosen = np.where(deg[edges.src] <= deg[edges.dst], edges.src, edges.dst)
    assert np.array_equal(run("dbh", edges, topo, seed, hash="mod"), chosen % p)
    salted = run("dbh", edges, topo, seed)
    if p > 1:
        table = vertex_hash_parts(edges.num_nodes, p, seed_state("dbh", seed, dbh_mod._TAG, 1)[0])
        assert np.array_equal(salted, table[chosen])
    # every vertex's edges where it is the chosen endpoint share one part
    for v in np.unique(chosen):
        assert np.unique(salted[chosen == v]).size == 1


# ------------------------------------------------- kernels == plain-Python statements
_MASK = (1 << 64) - 1


class SplitMix:
    """Python twin of _kernels.rand_below (same stream, same reduction)."""

    def __init__(self, state: int):
        self.state = int(state)

    def below(self, k: int) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return (z ^ (z >> 31)) % k


def ref_hdrf(edges, p, seed, lam=1.0, eps=1.0, order="shuffle"):
    rng = SplitMix(seed_state("hdrf", seed, hdrf_mod._TAG + 1, 1)[0])
    A = [set() for _ in range(edges.num_nodes)]
    pdeg = [0] * edges.num_nodes
    load = [0] * p
    out = np.zeros(edges.num_edges, dtype=np.int64)
    for e in stream_order("hdrf", order, edges.num_edges, seed, hdrf_mod._TAG):
        u, v = int(edges.src[e]), int(edges.dst[e])
        pdeg[u] += 1
        pdeg[v] += 1
        tu = pdeg[u] / (pdeg[u] + pdeg[v])
        tv = 1.0 - tu
        mx, mn = max(load), min(load)
        best, pick, ties = -math.inf, 0, 0
        for i in range(p):
            c = lam * (mx - load[i]) / (eps + (mx - mn))
            c += (1.0 + (1.0 - tu)) if i in A[u] else 0.0
            c += (1.0 + (1.0 - tv)) if i in A[v] else 0.0
            if c > best:
                best, pick, ties = c, i, 1
            elif c == best:
                ties += 1
                if rng.below(ties) == 0:
                    pick = i
        out[e] = pick
        load[pick] += 1
        A[u].add(pick)
        A[v].add(pick)
    return out


def ref_greedy(edges, p, seed, order="shuffle"):
    rng = SplitMix(seed_state("greedy", seed, greedy_mod._TAG + 1, 1)[0])
    A = [set() for _ in range(edges.num_nodes)]
    left = list(edges.degrees())
    load = [0] * p
    out = np.zeros(edges.num_edges, dtype=np.int64)
    for e in stream_order("greedy", order, edges.num_edges, seed, greedy_mod._TAG):
        u, v = int(edges.src[e]), int(edges.dst[e])
        if A[u] & A[v]:
            cand = A[u] & A[v]
        elif A[u] and A[v]:
            cand = A[u] if left[u] > left[v] else A[v] if left[v] > left[u] else A[u] | A[v]
        elif A[u] or A[v]:
            cand = A[u] or A[v]
        else:
            cand = set(range(p))
        best, pick, ties = math.inf, -1, 0
        for i in sorted(cand):
            if load[i] < best:
                best, pick, ties = load[i], i, 1
            elif load[i] == best:
                ties += 1
                if rng.below(ties) == 0:
                    pick = i
        out[e] = pick
        load[pick] += 1
        left[u] -= 1
        left[v] -= 1
        A[u].add(pick)
        A[v].add(pick)
    return out


def ref_ebv(edges, topo, gamma=0.1, alpha=1.0, beta=1.0, norm="vertices", visit=None):
    """Eq. 24 in plain Python; ``visit``: edge order (default: ascending degree sum, stable)."""
    p, g = topo.num_parts, topo.devices_per_host
    n, m = edges.num_nodes, edges.num_edges
    deg = edges.degrees()
    D = [set() for _ in range(n)]
    H = [set() for _ in range(n)]
    ecount, vcount = [0] * p, [0] * p
    out = np.zeros(m, dtype=np.int64)
    if visit is None:
        visit = sorted(range(m), key=lambda e: (deg[edges.src[e]] + deg[edges.dst[e]], e))
    for e in visit:
        u, v = int(edges.src[e]), int(edges.dst[e])
        vnorm = sum(vcount) / p if norm == "replicas" else n / p
        scores = []
        for i in range(p):
            xd = float(i not in D[u]) + float(i not in D[v])
            xh = float(i // g not in H[u]) + float(i // g not in H[v])
            s = xd + gamma * (xh - xd) + alpha * (ecount[i] / (m / p))  # eq. 24, xd-first form
            if vnorm > 0:
                s += beta * (vcount[i] / vnorm)
            scores.append(s)
        pick = scores.index(min(scores))  # first minimum = lowest part id
        out[e] = pick
        ecount[pick] += 1
        for x in {u, v}:
            if pick not in D[x]:
                D[x].add(pick)
                vcount[pick] += 1
            H[x].add(pick // g)
    return out


@FAST
@given(edges=edge_lists(), topo=topologies, seed=st.integers(0, 2**20),
       order=st.sampled_from(["shuffle", "input"]))
def test_hdrf_and_greedy_match_reference(edges, topo, seed, order):
    p = topo.num_parts
    if p == 1:
        return
    assert np.array_equal(run("hdrf", edges, topo, seed, order=order), ref_hdrf(edges, p, seed, order=order))
    assert np.array_equal(run("hdrf", edges, topo, seed, lam=2.5, epsilon=0.5),
                          ref_hdrf(edges, p, seed, lam=2.5, eps=0.5))
    assert np.array_equal(run("greedy", edges, topo, seed, order=order), ref_greedy(edges, p, seed, order=order))


@FAST
@given(edges=edge_lists(), topo=topologies, gamma=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
       norm=st.sampled_from(["vertices", "replicas"]))
def test_ebv_matches_reference(edges, topo, gamma, norm):
    if topo.num_parts == 1:
        return
    assert np.array_equal(run("ebv", edges, topo, gamma=gamma, vertex_norm=norm),
                          ref_ebv(edges, topo, gamma=gamma, norm=norm))
    assert np.array_equal(run("ebv", edges, topo, gamma=gamma, alpha=0.5, beta=2.0),
                          ref_ebv(edges, topo, gamma=gamma, alpha=0.5, beta=2.0))


@FAST
@given(edges=edge_lists(), topo=topologies, seed=st.integers(0, 2**20),
       order=st.sampled_from(["shuffle", "input"]), gamma=st.sampled_from([0.0, 0.1]))
def test_ebv_stream_orders_match_reference(edges, topo, seed, order, gamma):
    """order="shuffle"/"input" visit edges in stream_order's permutation, nothing else changes."""
    if topo.num_parts == 1:
        return
    visit = [int(e) for e in stream_order("ebv", order, edges.num_edges, seed, ebv_mod._TAG)]
    got = run("ebv", edges, topo, seed, gamma=gamma, order=order)
    assert np.array_equal(got, ref_ebv(edges, topo, gamma=gamma, visit=visit))
    # the default order ignores the seed; "input" too
    if order == "input":
        assert np.array_equal(got, run("ebv", edges, topo, seed + 1, gamma=gamma, order=order))
    assert np.array_equal(run("ebv", edges, topo, seed, gamma=gamma),
                          run("ebv", edges, topo, seed + 1, gamma=gamma, order="degree"))


def test_ebv_shuffle_order_depends_on_seed(plaw):
    topo = Topology(2, 4)
    a = run("ebv", plaw, topo, 0, order="shuffle")
    assert np.array_equal(a, run("ebv", plaw, topo, 0, order="shuffle"))
    assert not np.array_equal(a, run("ebv", plaw, topo, 1, order="shuffle"))
    assert not np.array_equal(a, run("ebv", plaw, topo, 0))


def test_ebv_reference_agrees_on_power_law_graph(plaw):
    small = EdgeList(plaw.src[:3000], plaw.dst[:3000], plaw.num_nodes)
    topo = Topology(2, 4)
    assert np.array_equal(run("ebv", small, topo), ref_ebv(small, topo))


# ---------------------------------------------------------------------- degenerate inputs
@pytest.mark.parametrize("name", OURS)
def test_degenerate_inputs(name):
    topo = Topology(2, 4)
    empty = np.zeros(0, dtype=np.int64)
    assert run(name, EdgeList(empty, empty, 0), topo).shape == (0,)
    assert run(name, EdgeList(empty, empty, 5), topo).shape == (0,)
    # P = 1: everything on part 0
    e = EdgeList(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 2]), 6)
    assert np.array_equal(run(name, e, Topology(1, 1), seed=3), np.zeros(4, dtype=np.int64))
    # P > M, self-loops, isolated vertices (3, 4, 5), int32 input
    e32 = EdgeList(e.src.astype(np.int32), e.dst.astype(np.int32), 6)
    for edges in (e, e32):
        parts = run(name, edges, Topology(3, 5), seed=1)
        assert parts.shape == (4,) and parts.min() >= 0 and parts.max() < 15
    loops = EdgeList(np.arange(6), np.arange(6), 6)
    parts = run(name, loops, topo)
    assert parts.shape == (6,) and parts.min() >= 0 and parts.max() < 8


def test_first_edges_of_ebv_on_self_loops_spread_by_balance():
    # Each self-loop is a fresh vertex: indicator terms tie, the edge term sends the
    # k-th loop to part k (lowest id among the least loaded).
    loops = EdgeList(np.arange(8), np.arange(8), 8)
    assert np.array_equal(run("ebv", loops, Topology(2, 4), gamma=0.0), np.arange(8))


# ------------------------------------------------------------------ seeds, balance, quality
def test_random_seed_changes_result_and_is_uniform():
    rng = np.random.default_rng(0)
    m, p = 100_000, 8
    edges = EdgeList(rng.integers(0, 10_000, m), rng.integers(0, 10_000, m), 10_000)
    topo = Topology(2, 4)
    a, b = run("random", edges, topo, seed=0), run("random", edges, topo, seed=1)
    assert not np.array_equal(a, b)
    assert (a == b).mean() < 0.2  # independent uniform draws agree w.p. 1/p = 0.125
    # For distinct edges the part counts are Binomial(m', 1/p) (duplicate draws share a
    # part, so use distinct edges only); 6 sigma per part => failure prob < 1e-8.
    _, first = np.unique(np.minimum(edges.src, edges.dst) * 10_000
                         + np.maximum(edges.src, edges.dst), return_index=True)
    for parts in (a, b):
        counts = np.bincount(parts[first], minlength=p)
        mu = first.size / p
        sigma = math.sqrt(first.size * (1 / p) * (1 - 1 / p))
        assert np.all(np.abs(counts - mu) <= 6 * sigma), counts


def test_shuffled_streams_depend_on_seed(plaw):
    topo = Topology(2, 4)
    for name in ("hdrf", "greedy", "dbh"):
        assert not np.array_equal(run(name, plaw, topo, seed=0), run(name, plaw, topo, seed=1)), name
    # EBV is deterministic by construction (degree order, lowest-id ties)
    assert np.array_equal(run("ebv", plaw, topo, seed=0), run("ebv", plaw, topo, seed=1))


def test_balance_bounds(plaw):
    """Edge imbalance (max/mean) bounds on a ~23k-edge power-law graph, p = 8.

    EBV: Table 3 reports <= 1.0054 on 10^6-10^9-edge graphs and the benchmark measures
    ~1.008 at 2M edges; with ~2.9k edges per part we allow 1.05 (measured 1.010-1.021).
    HDRF with lambda = 1 keeps parts within a few edges (the paper's balance term
    dominates once sizes differ): 1.01 (measured 1.0003). Greedy and DBH have no
    balance term; 1.5 only guards against gross regressions (measured 1.002, 1.10)."""
    p = 8
    for topo in (Topology(2, 4), Topology(1, 8), Topology(8, 1)):
        for gamma in (0.0, 0.1):
            assert edge_imbalance(run("ebv", plaw, topo, gamma=gamma), p) <= 1.05
        assert edge_imbalance(run("ebv", plaw, topo, vertex_norm="replicas"), p) <= 1.05
        assert edge_imbalance(run("hdrf", plaw, topo), p) <= 1.01
        assert edge_imbalance(run("greedy", plaw, topo), p) <= 1.5
        assert edge_imbalance(run("dbh", plaw, topo), p) <= 1.5


def test_replication_below_random_hashing(plaw):
    """All four heuristics exist to beat random hashing's replication on power-law graphs."""
    topo = Topology(2, 4)
    rf = {name: replication(plaw, run(name, plaw, topo), 8) for name in OURS}
    for name in ("dbh", "hdrf", "greedy", "ebv"):
        assert rf[name] < 0.9 * rf["random"], rf
    assert rf["hdrf"] < rf["dbh"], rf  # HDRF paper: HDRF beats DBH on power-law graphs


def test_ebv_host_term_cuts_cross_host_replicas():
    """CDFGNN Table 3: gamma = 0.1 lowers inter-host replication (Outer) vs gamma = 0 on
    2 hosts x 4 GPUs. Measured here on 4 power-law graphs (~2.8k edges each): 1438 ->
    1115 cross-host replicas in total (-22.5%), every graph lower (365->288, 381->294,
    350->266, 342->267). Tested: each graph lower, and the total at least 10% lower."""
    topo = Topology(2, 4)
    before = after = 0
    for seed in range(4):
        g = power_law(800, 3000, seed)
        c0 = cross_host_replicas(g, run("ebv", g, topo, gamma=0.0), topo)
        c1 = cross_host_replicas(g, run("ebv", g, topo, gamma=0.1), topo)
        assert c1 < c0, (seed, c0, c1)
        before, after = before + c0, after + c1
    assert after <= 0.90 * before, (before, after)


# ------------------------------------------------------------------------------ bad input
def test_bad_input_raises_cdfgnn_error():
    topo = Topology(2, 2)
    ok = EdgeList(np.array([0, 1]), np.array([1, 2]), 3)
    bad_edges = [
        EdgeList(np.array([0, 1]), np.array([1]), 3),  # length mismatch
        EdgeList(np.array([0, 3]), np.array([1, 2]), 3),  # endpoint >= num_nodes
        EdgeList(np.array([0, -1]), np.array([1, 2]), 3),  # negative endpoint
        EdgeList(np.array([0.0, 1.0]), np.array([1.0, 2.0]), 3),  # floats
        EdgeList(np.zeros((2, 1), dtype=np.int64), np.zeros((2, 1), dtype=np.int64), 3),
    ]
    for name in OURS:
        for edges in bad_edges:
            with pytest.raises(CdfgnnError, match=name):
                run(name, edges, topo)
        for seed in (-1, "7", 1.5):
            with pytest.raises(CdfgnnError, match="seed"):
                run(name, ok, topo, seed=seed)
        with pytest.raises(CdfgnnError, match="unknown parameter"):
            run(name, ok, topo, bogus=1)
    bad_params = [("ebv", {"gamma": 1.5}), ("ebv", {"gamma": float("nan")}), ("ebv", {"alpha": -1}),
                  ("ebv", {"vertex_norm": "edges"}), ("ebv", {"order": "sorted"}),
                  ("hdrf", {"order": "sorted"}),
                  ("hdrf", {"epsilon": 0}), ("hdrf", {"lam": "x"}), ("greedy", {"order": None}),
                  ("dbh", {"hash": "md5"})]
    for name, params in bad_params:
        with pytest.raises(CdfgnnError, match=next(iter(params))):
            run(name, ok, topo, **params)
    # 'lambda' is accepted as the paper's spelling of 'lam'
    assert np.array_equal(run("hdrf", ok, topo, **{"lambda": 2.0}), run("hdrf", ok, topo, lam=2.0))


# ---------------------------------------------------------------------------- integration
def test_outputs_feed_select_masters(plaw):
    for name in OURS:
        parts = run(name, plaw, Topology(2, 2), seed=5)
        master = select_masters(plaw, parts, 4)
        assert master.shape == (plaw.num_nodes,) and master.min() >= 0 and master.max() < 4
        # a non-isolated vertex's master holds at least one of its edges
        holds = replica_bitset(plaw, parts, 4)
        v = np.flatnonzero(plaw.degrees() > 0)
        assert np.all((holds[v, 0] >> master[v].astype(np.uint64)) & np.uint64(1))


def test_partition_graph_runs_vertex_cut_end_to_end(plaw):
    # partition_graph imports both partitioner packages; the edge-cut one is written elsewhere
    pytest.importorskip("cdfgnn.partition.edgecut")
    n = plaw.num_nodes
    g = Graph.from_edges(plaw.src, plaw.dst, n, x=np.zeros((n, 1), np.float32),
                         y=np.zeros(n, np.int64), train=np.ones(n, bool),
                         val=np.zeros(n, bool), test=np.zeros(n, bool))
    for name in OURS:
        part = partition_graph(g, name, Topology(2, 2), seed=5)
        assert part.kind == "vertex" and part.assignment.shape == (g.num_edges,)
        assert part.master.min() >= 0 and part.master.max() < 4
