"""Twins v3: hierarchical locality with three parameters, classes planted on the
hierarchy; the statistics row reports clustering, homophily and Louvain modularity."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cdfgnn.data import stats
from cdfgnn.data.graph import csr_from_sorted_pairs
from cdfgnn.data.hierarchy import (KAPPA, Hierarchy, Levels, Locality, majority_vote,
                                   plant_classes, reach_of)
from cdfgnn.data.synthetic import (GENERATOR, LOCALITY_PARAMS, TWINS, TwinSpec, generate_from_spec,
                                   generate_twin, twin_edges)
from cdfgnn.errors import CdfgnnError


def test_generator_version_is_recorded():
    g = generate_twin("synth-arxiv", "tiny", 0)
    assert g.meta["generator"] == GENERATOR == "dcsbm-hierarchical-v3"
    assert g.meta["hierarchy_levels"] >= int(np.ceil(np.log2(g.num_nodes)))


def test_at_most_three_locality_parameters_and_nothing_else_moves_an_edge():
    """Every TwinSpec field but the three locality ones, the degree fields and the name
    leaves the edges as they are: labels, features, homophily and split are planted on
    the drawn graph."""
    assert len(LOCALITY_PARAMS) <= 3
    base = TWINS["synth-arxiv"]
    src, dst, _ = twin_edges(base, 3000, 1)
    others = dict(num_features=7, num_classes=5, split=(0.3, 0.3, 0.3), homophily=0.2,
                  feature_snr=9.0, class_skew=2.0, label_noise=0.5, multilabel=True,
                  num_blocks=4, labels_per_block=2, p_hi=0.5, p_lo=0.1, label_snr=1.0,
                  random_features=True, real_num_nodes=7, fitted="x", min_split_size=50,
                  twin_of="y")
    degree = {"avg_degree", "degree_exponent", "max_degree_frac"}
    fields = {f.name for f in dataclasses.fields(TwinSpec)} - {"name"} - degree
    assert fields == set(others) | set(LOCALITY_PARAMS)
    for field, value in others.items():
        s2, d2, _ = twin_edges(dataclasses.replace(base, **{field: value}), 3000, 1)
        assert np.array_equal(src, s2) and np.array_equal(dst, d2), field
    for field, value in (("reach", 0.05), ("decay", 0.3), ("hub_reach", 0.0)):
        s2, d2, _ = twin_edges(dataclasses.replace(base, **{field: value}), 3000, 1)
        assert not np.array_equal(src, s2), field


@pytest.mark.parametrize("field,value", [("reach", 0.0), ("reach", 2.0), ("decay", 0.0),
                                         ("hub_reach", -1.0)])
def test_bad_locality_is_refused(field, value):
    with pytest.raises(CdfgnnError, match=field):
        generate_from_spec(dataclasses.replace(TWINS["synth-arxiv"], **{field: value}), 500)


def test_hierarchy_blocks_are_contiguous_nested_ranges():
    h = Hierarchy.draw(5000, np.random.default_rng(3))
    order = np.argsort(h.pos)
    assert np.all(np.diff(h.code[order]) >= 0)          # codes follow the positions
    assert h.leaf_start[0] == 0 and h.leaf_start[-1] == 5000
    v = np.arange(5000)
    for k in (0, 3, 7, h.levels):
        size = h.block_size(v, k)
        b = h.code >> k
        start = h.block_start(b, k)
        assert np.all((h.pos >= start) & (h.pos < start + size))
        assert np.array_equal(np.bincount(b)[b], size)  # every member counted once
    assert np.all(h.block_size(v, h.levels) == 5000)
    # uneven splits: blocks of one level differ in size (P = 3 parts fit as well as 4)
    sizes = np.bincount(h.code >> (h.levels - 1))
    assert sizes.min() != sizes.max()
    u, w = np.array([0, 1]), np.array([0, 2])
    lvl = h.parting_level(u, w)
    assert lvl[0] == 0 and np.all(h.code[u[1]] >> lvl[1] == h.code[w[1]] >> lvl[1])


def test_reach_is_floored_at_the_degree():
    theta = np.array([1.0, 10.0, 100.0, 1000.0])
    r = reach_of(theta, 1000, Locality(0.001, 1.0, 1.0))
    assert np.all(r >= KAPPA * theta) and np.all(r >= 2.0)
    r2 = reach_of(theta, 1000, Locality(0.5, 1.0, 0.0))   # hub_reach 0: same reach for all
    assert np.allclose(r2[:3], 500.0)


def test_expected_degree_follows_the_propensity():
    """Destinations are drawn ∝ the level weights, so a vertex's degree is ∝ theta (the
    few duplicate draws aside)."""
    spec = TWINS["synth-products"]
    g = generate_twin("synth-products", 20_000, 0)
    deg = g.degrees().astype(np.float64)
    assert abs(deg.mean() - spec.avg_degree) < 0.03 * spec.avg_degree
    from cdfgnn.data.synthetic import twin_skeleton
    theta = twin_skeleton(spec, 20_000, 0)[0]
    mid = (theta > 20) & (theta < 200)
    assert 0.8 < deg[mid].sum() / theta[mid].sum() < 1.25
    assert np.corrcoef(np.log(theta), np.log(np.maximum(deg, 1)))[0, 1] > 0.8


def test_locality_decays_with_the_block_size():
    """The share of edges parting above a block of s >= reach vertices falls as s grows
    (Rent-like), and a steeper decay keeps more edges local."""
    spec = TWINS["synth-arxiv"]
    shares = []
    for decay in (0.5, 1.5):
        s = dataclasses.replace(spec, decay=decay, reach=0.01, hub_reach=0.0)
        src, dst, h = twin_edges(s, 20_000, 0)
        lvl = h.parting_level(src, dst)
        shares.append([np.mean(lvl > k) for k in range(8, h.levels)])
    for row in shares:
        assert np.all(np.diff(row) <= 1e-12) and row[0] > row[-1]
    assert np.all(np.array(shares[1]) <= np.array(shares[0]) + 1e-12)


def test_planted_classes_hit_the_homophily_and_keep_the_class_shares():
    rng = np.random.default_rng(0)
    spec = TWINS["synth-arxiv"]
    src, dst, h = twin_edges(spec, 20_000, 0)
    probs = np.arange(1, 11, dtype=np.float64) ** -0.8
    probs /= probs.sum()
    for target in (0.3, 0.6):
        cls, eps, got = plant_classes(h, probs, src, dst, target, rng)
        assert abs(got - target) < 0.02 and 0 < eps < 1
        assert abs(np.mean(cls[src] == cls[dst]) - target) < 0.02
        share = np.bincount(cls, minlength=10) / cls.shape[0]
        assert np.all(np.abs(share - probs) < 0.05)
    # an unreachable target: no patches, the most homophilous planting
    cls, eps, got = plant_classes(h, probs, src, dst, 0.999, rng)
    assert eps == 0.0 and got < 0.999


def test_majority_vote_takes_the_neighbours_class_and_keeps_ties():
    cls = np.array([0, 1, 1, 2, 0])
    src = np.array([0, 0, 1, 3])
    dst = np.array([1, 2, 2, 4])
    out = majority_vote(cls, src, dst, 3)
    # vertex 0: neighbours 1, 2 (class 1, 1) beat itself; vertex 3 and 4: a tie each
    assert out.tolist() == [1, 1, 1, 2, 0]


def test_size_rule_keeps_halo_copies_across_sizes():
    """reach is a share of N: while the degree floor does not bind, a twin at 2N has the
    same METIS halo copies per vertex at a given P as at N."""
    from cdfgnn.partition.edgecut import metis_node_parts
    from cdfgnn.partition.stats import halo_counts

    spec = dataclasses.replace(TWINS["synth-arxiv"], avg_degree=8.0, reach=0.01, decay=1.0,
                               hub_reach=0.5)
    halo = {}
    for n in (15_000, 30_000):
        src, dst, _ = twin_edges(spec, n, 0)
        ip, ix = csr_from_sorted_pairs(src, dst, n)
        halo[n] = [halo_counts(ip, ix, metis_node_parts(ip, ix, p, seed=0), p)
                   ["halo_copies_per_vertex"] for p in (2, 4, 8)]
    ratio = np.array(halo[30_000]) / np.array(halo[15_000])
    assert np.all(np.abs(ratio - 1) < 0.15), ratio


def test_levels_draw_stays_in_the_chosen_block():
    spec = TWINS["synth-products"]
    from cdfgnn.data.synthetic import locality, twin_skeleton
    theta, h, _ = twin_skeleton(spec, 5000, 0)
    lv = Levels(theta, h, locality(spec))
    src = np.repeat(np.arange(200), 20)
    dst = lv.draw(src, np.random.default_rng(1))
    assert dst.min() >= 0 and dst.max() < 5000
    lvl = h.parting_level(src, dst)
    assert np.all(lvl <= h.levels)


def test_clustering_of_a_sparse_twin():
    """Nested blocks make neighbours of a vertex neighbours of each other: the sparse
    arxiv twin's clustering is well above a Chung-Lu graph's (about 0.08 at this size)."""
    spec = TWINS["synth-arxiv"]
    g = generate_twin("synth-arxiv", "tiny", 0)
    clustering, _ = stats.average_clustering(g)
    assert clustering > 0.12
    assert abs(2 * g.num_edges / g.num_nodes - g.meta["avg_degree_target"]) \
        <= 0.03 * g.meta["avg_degree_target"]
    h = stats.edge_homophily(g)
    assert 0.6 * spec.homophily * (1 - spec.label_noise) < h < spec.homophily
    q, k, note = stats.louvain_modularity(g)
    assert q > 0.3 and k > 1 and note == ""


def test_friendster_twin_is_timing_only_with_local_edges():
    g = generate_twin("synth-friendster", "tiny", 0)
    assert g.meta["timing_only"] is True
    assert stats.graph_stats(g)["timing_only"] is True
    # labels ignore the edges: edge homophily near chance (1/32)
    assert stats.edge_homophily(g) < 0.1


def test_clustering_matches_networkx_and_sampling_is_documented(monkeypatch):
    nx = pytest.importorskip("networkx")
    g = generate_twin("synth-flickr", 300, 0)
    s, d = g.undirected_edges()
    G = nx.Graph()
    G.add_nodes_from(range(g.num_nodes))
    G.add_edges_from(zip(s.tolist(), d.tolist()))
    exact, used = stats.average_clustering(g)
    assert used == g.num_nodes and abs(exact - nx.average_clustering(G)) < 1e-9
    monkeypatch.setattr(stats, "CLUSTERING_EXACT_NODES", 100)
    monkeypatch.setattr(stats, "CLUSTERING_SAMPLE", 150)
    sampled, used = stats.average_clustering(g)
    assert used == 150 and abs(sampled - exact) < 0.1


def test_modularity_of_a_labelling_matches_networkx():
    nx = pytest.importorskip("networkx")
    g = generate_twin("synth-arxiv", 300, 1)
    label = g.y
    s, d = g.undirected_edges()
    G = nx.Graph()
    G.add_nodes_from(range(g.num_nodes))
    G.add_edges_from(zip(s.tolist(), d.tolist()))
    comms = [set(np.flatnonzero(label == c).tolist()) for c in np.unique(label)]
    assert abs(stats.modularity(g, label) - nx.community.modularity(G, comms)) < 1e-9


def test_dataset_row_has_every_structure_column(monkeypatch):
    monkeypatch.setattr(stats, "LOUVAIN_MAX_EDGES", 10)
    row = stats.dataset_row(generate_twin("synth-yelp", 200, 0), "synth-yelp", "200", 0)
    for key in ("avg_clustering", "clustering_sample", "edge_homophily", "louvain_modularity",
                "louvain_note", "timing_only", "generator", "twin_of"):
        assert key in row
    assert row["louvain_modularity"] is None and "skipped" in row["louvain_note"]
    assert 0.0 <= row["edge_homophily"] <= 1.0  # multi-label: mean Jaccard
