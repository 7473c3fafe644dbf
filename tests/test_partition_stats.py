"""Partition statistics (cdfgnn.partition.stats) and partition reports (cdfgnn.report.partitions).

Hand-worked examples use Topology(2, 2): devices 0, 1 on host 0 and 2, 3 on host 1.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.api import select_masters
from cdfgnn.partition.base import EdgeList, Partitioning, Topology
from cdfgnn.partition import stats as S
from cdfgnn.partition.stats import partition_stats, replicas, replication_by_degree
from cdfgnn.report import partitions as R


def make_graph(edges, n, name="g"):
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return Graph.from_edges(e[:, 0], e[:, 1], n, x=np.zeros((n, 1), np.float32),
                            y=np.zeros(n, np.int64), train=np.zeros(n, bool),
                            val=np.zeros(n, bool), test=np.zeros(n, bool), name=name)


def vertex_cut(graph, edge_parts, topo, method="test", **params):
    edge_parts = np.asarray(edge_parts, dtype=np.int64)
    master = select_masters(EdgeList.from_graph(graph), edge_parts, topo.num_parts)
    return Partitioning("vertex", edge_parts, master, topo, method, params,
                        graph.fingerprint(), graph.name, graph.num_nodes, 0.5)


def edge_cut(graph, node_parts, topo, method="test"):
    node_parts = np.asarray(node_parts, dtype=np.int64)
    return Partitioning("edge", node_parts, node_parts, topo, method, {},
                        graph.fingerprint(), graph.name, graph.num_nodes, 0.25)


def pairs(graph, part):
    v, p = replicas(graph, part)
    return sorted(zip(v.tolist(), p.tolist()))


# ------------------------------------------------------------- vertex cut
def test_star_vertex_cut_two_hosts_by_hand():
    # star 0-{1..6} plus isolated vertex 7; edge ids follow CSR order: (0,1), ..., (0,6)
    g = make_graph([(0, k) for k in range(1, 7)], 8)
    part = vertex_cut(g, [0, 0, 0, 1, 2, 3], Topology(2, 2))
    # master of 0: part 0 (3 edges). Replica counts per part before isolated: 4, 2, 2, 2,
    # so the isolated vertex goes to the least loaded part in id order: part 1.
    assert part.master.tolist() == [0, 0, 0, 0, 1, 2, 3, 1]
    assert pairs(g, part) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (2, 0), (3, 0),
                              (4, 1), (5, 2), (6, 3), (7, 1)]
    s = partition_stats(g, part)
    json.dumps(s)  # flat and serialisable
    assert s["part_vertices"] == [4, 3, 2, 2]
    assert s["rf"] == pytest.approx(11 / 8)
    assert s["part_edges"] == [3, 1, 1, 1]
    assert s["edge_imbalance"] == pytest.approx(3 / (6 / 4))
    assert s["vertex_imbalance"] == pytest.approx(4 / (11 / 4))
    assert s["part_masters"] == [4, 2, 1, 1]
    assert s["part_mirrors"] == [0, 1, 1, 1]
    # mirrors of vertex 0 on devices 1 (same host), 2 and 3 (other host):
    # gather: 1 -> 0 Inner on dev 1, 2 -> 0 and 3 -> 0 Outer on devs 2, 3;
    # scatter from dev 0: one Inner (to 1) and two Outer (to 2, 3).
    assert s["device_inner"] == [1, 1, 0, 0]
    assert s["device_outer"] == [2, 0, 1, 1]
    assert s["device_gather_outer"] == [0, 0, 1, 1]
    assert s["device_scatter_outer"] == [2, 0, 0, 0]
    assert (s["inner_max"], s["outer_max"]) == (1, 2)
    assert s["inner_sum"] + s["outer_sum"] == 2 * (11 - 8)
    assert s["inner_plus_outer_expected"] == pytest.approx(2 * (11 / 8 - 1) * 8 / 4)
    assert s["inner_plus_outer_check"] == pytest.approx(3 / 1.5)
    assert s["isolated_vertices"] == 1
    assert (s["method"], s["kind"], s["hosts"], s["devices_per_host"], s["seconds"]) == \
        ("test", "vertex", 2, 2, 0.5)


def test_path_vertex_cut_crediting_by_hand():
    # path 0-1-2-3-4, edge k -> part k; masters of 1, 2, 3 are parts 0, 1, 2 (ties low id)
    g = make_graph([(0, 1), (1, 2), (2, 3), (3, 4)], 5)
    part = vertex_cut(g, [0, 1, 2, 3], Topology(2, 2))
    assert part.master.tolist() == [0, 0, 1, 2, 3]
    s = partition_stats(g, part)
    assert s["rf"] == pytest.approx(8 / 5)
    assert s["edge_imbalance"] == pytest.approx(1.0)
    assert s["vertex_imbalance"] == pytest.approx(1.0)
    # mirror (1 on dev 1, master 0): intra -> dev1 gather, dev0 scatter
    # mirror (2 on dev 2, master 1): inter -> dev2 gather, dev1 scatter
    # mirror (3 on dev 3, master 2): intra -> dev3 gather, dev2 scatter
    assert s["device_inner"] == [1, 1, 1, 1]
    assert s["device_outer"] == [0, 1, 1, 0]
    assert s["inner_sum"] == 4 and s["outer_sum"] == 2


def test_triangle_vertex_cut_one_part():
    g = make_graph([(0, 1), (1, 2), (0, 2)], 3)
    s = partition_stats(g, vertex_cut(g, [0, 0, 0], Topology(1, 2)))
    assert s["rf"] == 1.0
    assert s["edge_imbalance"] == pytest.approx(2.0)
    assert s["vertex_imbalance"] == pytest.approx(2.0)
    assert s["inner_max"] == s["outer_max"] == 0
    assert s["inner_plus_outer_check"] is None


def test_isolated_vertex_counted_once_at_master():
    g = make_graph([(0, 1), (1, 2)], 5)  # 3 and 4 isolated
    part = vertex_cut(g, [0, 1], Topology(1, 3))
    s = partition_stats(g, part)
    v, p = replicas(g, part)
    for iso in (3, 4):
        assert p[v == iso].tolist() == [part.master[iso]]
    assert s["replicas_total"] == 4 + 2  # 0,1 | 1,2 | plus one each for 3, 4
    assert s["rf"] == pytest.approx(6 / 5)


def test_master_outside_edge_replicas_is_added():
    # a hand-chosen master on a part without the vertex's edges still holds a replica
    g = make_graph([(0, 1)], 2)
    part = Partitioning("vertex", np.array([0]), np.array([0, 1]), Topology(1, 2), "m")
    assert pairs(g, part) == [(0, 0), (1, 0), (1, 1)]
    s = partition_stats(g, part)
    assert s["part_mirrors"] == [1, 0] and s["device_inner"] == [1, 1]


# --------------------------------------------------------------- edge cut
def test_path_edge_cut_halo_by_hand():
    g = make_graph([(0, 1), (1, 2), (2, 3)], 4)
    part = edge_cut(g, [0, 0, 1, 1], Topology(2, 1))
    assert pairs(g, part) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (3, 1)]
    s = partition_stats(g, part)
    assert s["part_inner"] == [2, 2] and s["part_halo"] == [1, 1]
    assert s["halo_max"] == 1 and s["halo_mean"] == 1.0
    assert s["rf"] == pytest.approx(1.5)
    assert s["part_edges"] == [1.5, 1.5]      # arcs into inner rows / 2
    assert s["part_local_edges"] == [2, 2]    # internal + cut edges stored
    assert s["cut_edges"] == 1
    assert s["edge_imbalance"] == pytest.approx(1.0)
    # halo 2 on dev 0 (owner 1): fwd row 1->0 (dev1), grad row 0->1 (dev0); same for 1 on dev 1
    assert s["device_outer"] == [2, 2] and s["device_inner"] == [0, 0]
    assert s["device_scatter_outer"] == [1, 1] and s["device_gather_outer"] == [1, 1]


def test_star_edge_cut_halo_and_imbalance():
    # star 0-{1..4}; 0 on part 0, leaves 1,2 on part 1 and 3,4 on part 2 (one host)
    g = make_graph([(0, k) for k in range(1, 5)], 5)
    s = partition_stats(g, edge_cut(g, [0, 1, 1, 2, 2], Topology(1, 3)))
    assert s["part_halo"] == [4, 1, 1]
    assert s["part_vertices"] == [5, 3, 3]
    assert s["rf"] == pytest.approx(11 / 5)
    assert s["part_edges"] == [2.0, 1.0, 1.0]
    assert s["edge_imbalance"] == pytest.approx(2.0 / (4 / 3))
    assert s["vertex_imbalance"] == pytest.approx(5 / (11 / 3))
    # dev0 sends 0's row to parts 1, 2 and 4 gradient rows back: 6; others: 2 + 1
    assert s["device_inner"] == [6, 3, 3] and s["outer_max"] == 0
    assert s["inner_sum"] == 2 * (11 - 5)


def test_triangle_edge_cut_each_vertex_own_part():
    g = make_graph([(0, 1), (1, 2), (0, 2)], 3)
    s = partition_stats(g, edge_cut(g, [0, 1, 2], Topology(1, 3)))
    assert s["rf"] == 3.0 and s["part_halo"] == [2, 2, 2]
    assert s["edge_imbalance"] == pytest.approx(1.0)
    assert s["device_inner"] == [4, 4, 4]


# ------------------------------------------------------------ bad input
def test_bad_partitionings_raise():
    g = make_graph([(0, 1), (1, 2)], 3)
    with pytest.raises(CdfgnnError, match="assignment has shape"):
        partition_stats(g, Partitioning("vertex", np.array([0]), np.zeros(3, np.int64),
                                         Topology(1, 2), "x"))
    with pytest.raises(CdfgnnError, match="outside"):
        partition_stats(g, Partitioning("vertex", np.array([0, 5]), np.zeros(3, np.int64),
                                        Topology(1, 2), "x"))
    with pytest.raises(CdfgnnError, match="kind"):
        partition_stats(g, Partitioning("both", np.array([0, 1]), np.zeros(3, np.int64),
                                        Topology(1, 2), "x"))
    other = make_graph([(0, 1)], 3, name="other")
    with pytest.raises(CdfgnnError, match="re-run"):
        partition_stats(other, vertex_cut(g, [0, 1], Topology(1, 2)))
    with pytest.raises(CdfgnnError, match="buckets"):
        replication_by_degree(g, vertex_cut(g, [0, 1], Topology(1, 2)), buckets=[0, 4, 2])


# ----------------------------------------------------------- properties
def _brute_force_replicas(src, dst, n, kind, assignment, master):
    sets = {}
    if kind == "vertex":
        for (u, w), q in zip(zip(src, dst), assignment):
            sets.setdefault(q, set()).update((u, w))
        for v in range(n):
            sets.setdefault(master[v], set()).add(v)
    else:
        for v in range(n):
            sets.setdefault(assignment[v], set()).add(v)
        for u, w in zip(src, dst):
            for a, b in ((u, w), (w, u)):
                sets.setdefault(assignment[a], set()).add(b)
    return sorted((v, q) for q, vs in sets.items() for v in vs)


@st.composite
def partitioned_graphs(draw):
    n = draw(st.integers(2, 14))
    hosts = draw(st.integers(1, 3))
    dph = draw(st.integers(1, 3))
    raw = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))
    g = make_graph(raw if raw else np.zeros((0, 2), np.int64), n)
    topo = Topology(hosts, dph)
    p = topo.num_parts
    if draw(st.booleans()):
        a = draw(st.lists(st.integers(0, p - 1), min_size=g.num_edges, max_size=g.num_edges))
        return g, vertex_cut(g, a, topo)
    a = draw(st.lists(st.integers(0, p - 1), min_size=n, max_size=n))
    return g, edge_cut(g, a, topo)


@settings(max_examples=120, deadline=None)
@given(partitioned_graphs())
def test_stats_properties(gp):
    g, part = gp
    s = partition_stats(g, part)
    json.dumps(s)
    src, dst = g.undirected_edges()
    assert pairs(g, part) == _brute_force_replicas(src.tolist(), dst.tolist(), g.num_nodes,
                                                   part.kind, part.assignment.tolist(),
                                                   part.master.tolist())
    assert s["rf"] >= 1.0
    assert s["vertex_imbalance"] >= 1.0 - 1e-12
    assert sum(s["part_vertices"]) == s["replicas_total"]
    assert sum(s["part_edges"]) == pytest.approx(g.num_edges)
    if g.num_edges:
        assert s["edge_imbalance"] >= 1.0 - 1e-12
    else:
        assert s["edge_imbalance"] is None
    # every copy costs two rows per sync, one each way
    assert s["inner_sum"] + s["outer_sum"] == 2 * s["duplicated"]
    if part.topology.hosts == 1:
        assert s["outer_sum"] == 0
    if part.kind == "edge":
        assert s["part_inner"] == np.bincount(part.assignment, minlength=part.num_parts).tolist()
        assert sum(s["part_local_edges"]) == g.num_edges + s["cut_edges"]


# ------------------------------------------------- replication by degree
def test_replication_by_degree_random_vertex_cut_matches_theorem():
    rng = np.random.default_rng(7)
    n, p = 4000, 16
    # Zipf-like sources so several log2 degree buckets (1 .. 31) are well populated
    w = np.arange(1, n + 1, dtype=float) ** -1.0
    src = rng.choice(n, 16000, p=w / w.sum())
    dst = rng.integers(0, n, 16000)
    g = make_graph(np.stack([src, dst], 1), n)
    part = vertex_cut(g, rng.integers(0, p, g.num_edges), Topology(2, 8))
    rows = replication_by_degree(g, part)
    assert sum(r["vertices"] for r in rows) == n
    checked = 0
    for r in rows:
        if r["vertices"] >= 100:
            assert r["mean_replicas"] == pytest.approx(r["expected_random"], rel=0.03), r
            checked += 1
    assert checked >= 5
    d = np.array([1, 2, 10])
    assert np.allclose(S.expected_random_replicas(d, p), p * (1 - (1 - 1 / p) ** d))
    # replicas grow with degree, the Theorem 4.2 imbalance
    means = [r["mean_replicas"] for r in rows]
    assert means == sorted(means)


def test_replication_by_degree_buckets_and_edge_cut():
    g = make_graph([(0, 1), (1, 2), (2, 3)], 5)  # degrees 1, 2, 2, 1, 0
    part = edge_cut(g, [0, 0, 1, 1, 1], Topology(1, 2))
    rows = replication_by_degree(g, part, buckets=[0, 1, 2])
    assert [(r["degree_lo"], r["degree_hi"], r["vertices"]) for r in rows] == \
        [(0, 0, 1), (1, 1, 2), (2, None, 2)]
    assert [r["mean_replicas"] for r in rows] == [1.0, 1.0, 2.0]
    assert rows[2]["expected_random"] == pytest.approx(1 + (1 - 0.25))


# --------------------------------------------------------------- reports
def _row(dataset, method, hosts, dph, inner, outer, rf, eif=1.0, vif=1.0, **params):
    return {"dataset": dataset, "method": method, "params": params, "hosts": hosts,
            "devices_per_host": dph, "num_parts": hosts * dph, "inner_max": inner,
            "outer_max": outer, "rf": rf, "edge_imbalance": eif, "vertex_imbalance": vif}


def test_labels():
    assert R.partitioner_label("ebv", {"gamma": 0}) == "EBV γ=0.0"
    assert R.partitioner_label("ebv", {"gamma": 0.1, "seed": 3}) == "EBV γ=0.1"
    assert R.partitioner_label("hep") == "HEP"
    assert R.partitioner_label("random") == "random"
    assert R.partitioner_label("metis") == "METIS"


def test_paper_table3_transcription_reproduces_derived_gamma_table():
    d = R.derived_gamma_table(R.paper_table3()).set_index("dataset")
    assert d.loc["reddit", "outer_change"] == pytest.approx(-14.94, abs=0.005)
    assert d.loc["ogbn-products", "inner_change"] == pytest.approx(36.90, abs=0.005)
    assert d.loc["friend", "rf_change"] == pytest.approx(8.28, abs=0.005)
    assert d.loc["papers100M", "inner_outer_change"] == pytest.approx(14.58, abs=0.005)
    assert d.loc["reddit", "cost_change"] == pytest.approx(-11.48, abs=0.005)
    assert R.gamma_summary(d.reset_index())["outer_cut"] == pytest.approx(R.PAPER_OUTER_CUT_PCT,
                                                                          abs=0.005)


def test_table3_and_markdown_claim(tmp_path):
    rows = [
        _row("synth-a", "ebv", 2, 2, 200, 100, 2.0, gamma=0.0, seed=0),
        _row("synth-a", "ebv", 2, 2, 240, 70, 2.2, gamma=0.1, seed=0),
        _row("synth-b", "ebv", 2, 4, 100, 50, 3.0, gamma=0.0, seed=0),
        _row("synth-b", "ebv", 2, 4, 110, 40, 3.3, gamma=0.1, seed=0),
        # two seeds are averaged: Outer (100 + 60) / 2 = 80 at γ=0.1 on synth-c
        _row("synth-c", "ebv", 2, 2, 100, 100, 2.0, gamma=0.0, seed=0),
        _row("synth-c", "ebv", 2, 2, 100, 100, 2.0, gamma=0.1, seed=0),
        _row("synth-c", "ebv", 2, 2, 100, 60, 2.0, gamma=0.1, seed=1),
        # one GPU per host: left out of the γ comparison
        _row("synth-a", "ebv", 2, 1, 0, 100, 1.5, gamma=0.0),
        _row("synth-a", "ebv", 2, 1, 0, 10, 1.5, gamma=0.1),
        _row("synth-a", "hep", 2, 2, 50, 40, 1.4, eif=1.3),
    ]
    df = R.table3(rows)
    assert list(df.columns) == R.TABLE3_COLUMNS + ["runs"]
    c = df[(df["dataset"] == "synth-c") & (df["partitioner"] == "EBV γ=0.1")].iloc[0]
    assert c["outer"] == 80 and c["runs"] == 2
    a = df[(df["dataset"] == "synth-a") & (df["gpus_per_host"] == 2)]
    assert a["partitioner"].tolist() == ["EBV γ=0.0", "EBV γ=0.1", "HEP"]

    derived = R.derived_gamma_table(df)
    assert len(derived) == 3
    # Outer cuts: 30%, 20%, 20% -> mean 23.33%; Inner: +20%, +10%, 0% -> +10.00%;
    # RF: +10%, +10%, 0% -> +6.67%
    csv, md = tmp_path / "t3.csv", tmp_path / "t3.md"
    R.write_table3(df, csv, md)
    text = md.read_text()
    last = text.strip().splitlines()[-2:]
    assert last[0] == ("Paper: γ=0.1 cuts Outer by 31.08% on average vs γ=0.0 "
                       "(at the cost of more Inner).")
    assert last[1] == ("Measured: γ=0.1 cuts Outer by 23.33% on average over 3 (dataset, "
                       "topology) pairs; Inner changes by +10.00%; RF changes by +6.67%.")
    assert "| synth-a | 2 | 2 | -30.00% | +20.00% | +10.00% |" in text
    assert "published numbers, transcribed" in text
    assert "| friend | EBV γ=0.1 | 2 | 8 | 19586785 | 5465465 | 4.0322 |" in text
    back = pd.read_csv(csv)
    assert back["outer"].tolist() == df["outer"].tolist()


def test_single_pair_outer_100_to_70():
    df = R.table3([_row("d", "ebv", 2, 2, 10, 100, 2.0, gamma=0.0),
                   _row("d", "ebv", 2, 2, 10, 70, 2.0, gamma=0.1)])
    assert "cuts Outer by 30.00% on average over 1 (dataset, topology) pairs" in \
        R.claim_lines(df)[1]
    empty = R.table3([_row("d", "hep", 2, 2, 10, 70, 2.0)])
    assert "nothing to compare" in R.claim_lines(empty)[1]


def test_table3_rejects_incomplete_rows():
    with pytest.raises(CdfgnnError, match="lacks"):
        R.table3([{"dataset": "d", "method": "hep"}])


def test_plot_rf_vs_parts(tmp_path):
    rows = [_row("d", m, 2, k, 1, 1, rf, eif=e, **kw)
            for m, kw in (("ebv", {"gamma": 0.1}), ("hep", {}))
            for k, rf, e in ((1, 1.2, 1.0), (2, 1.5, 1.1), (4, 1.9, 1.2))]
    png, pdf = R.plot_rf_vs_parts(rows, tmp_path / "figures" / "rf_vs_parts.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in png.parent.iterdir()) == ["rf_vs_parts.pdf", "rf_vs_parts.png"]
    with pytest.raises(CdfgnnError, match="no partition stats rows"):
        R.plot_rf_vs_parts(rows, tmp_path / "x.png", dataset="missing")


def test_sorting_and_bitmap_paths_agree(monkeypatch):
    rng = np.random.default_rng(3)
    n = 300
    g = make_graph(rng.integers(0, n, (1500, 2)), n)
    topo = Topology(2, 3)
    parts = [vertex_cut(g, rng.integers(0, 6, g.num_edges), topo),
             edge_cut(g, rng.integers(0, 6, n), topo)]
    dense = [partition_stats(g, p) for p in parts]
    monkeypatch.setattr(S, "_BITMAP_MAX_CELLS", 0)  # force np.unique over v * p + part
    assert [partition_stats(g, p) for p in parts] == dense


def test_a_rise_in_outer_is_called_a_rise():
    df = R.table3([_row("d", "ebv", 2, 2, 10, 100, 2.0, gamma=0.0),
                   _row("d", "ebv", 2, 2, 10, 110, 2.0, gamma=0.1)])
    assert "γ=0.1 raises Outer by 10.00% on average" in R.claim_lines(df)[1]
