"""Twins v2 (issue 11): nested communities and triangle closure give locality; the
statistics row reports clustering, homophily and Louvain modularity."""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.data import stats
from cdfgnn.data.synthetic import (GENERATOR, TWINS, closure_cross_accept, generate_twin,
                                   nested_communities)


def test_generator_version_is_recorded():
    g = generate_twin("synth-arxiv", "tiny", 0)
    assert g.meta["generator"] == GENERATOR != "dcsbm-powerlaw-v1"
    assert g.meta["communities"] > TWINS["synth-arxiv"].num_classes


def test_communities_nest_in_blocks_and_are_numbered_block_by_block():
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 5, size=3000)
    comm = nested_communities(blocks, 50, rng)
    order = np.argsort(comm, kind="stable")
    assert np.all(np.diff(blocks[order]) >= 0)  # sorting by community sorts by block
    for c in np.unique(comm):
        assert np.unique(blocks[comm == c]).shape[0] == 1
    assert 40 <= comm.max() + 1 <= 80  # ~3000 / 50 communities


@pytest.mark.parametrize("h,k", [(0.75, 41), (0.35, 7), (0.0, 32), (0.99, 2)])
def test_closure_cross_accept_is_a_probability_matching_h(h, k):
    q = closure_cross_accept(h, k)
    assert 0.0 <= q <= 1.0
    s = h * h + (1 - h) ** 2 / k
    if q < 1.0:
        assert abs(s / (s + (1 - s) * q) - h) < 1e-9


def test_locality_raises_clustering_but_keeps_degree_and_homophily():
    """A sparse twin: clustering well above a Chung-Lu graph's, degree and split kept."""
    spec = TWINS["synth-arxiv"]
    g = generate_twin("synth-arxiv", "tiny", 0)
    clustering, _ = stats.average_clustering(g)
    assert clustering > 0.15  # a Chung-Lu SBM of this size gives about 0.08 (old generator)
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
    # labels ignore the latent blocks: edge homophily near chance (1/32)
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
