"""The real-topology fixtures (tests/fixtures/README.md) import as the sizes they state.

Each file is a gzip SNAP edge list cut from a registry package (OpenStreetMap roads,
WordNet, a word-adjacency network of the King James Bible); ``cdfgnn prepare --from``
must read it whole: every vertex, every edge once, one connected component.
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from cdfgnn.cli import main
from cdfgnn.data.graph import Graph
from cdfgnn.data.importers import import_graph

FIXTURES = Path(__file__).parent / "fixtures"
# file -> (vertices, undirected edges), as tests/fixtures/README.md lists them
REAL = {
    "osm_helsinki_roads.txt.gz": (7_582, 9_021),
    "wordnet_plants.txt.gz": (7_939, 13_359),
    "kjv_word_adjacency.txt.gz": (12_756, 134_885),
}


@pytest.fixture(scope="module", params=sorted(REAL))
def real(request) -> tuple[str, Graph]:
    return request.param, import_graph(FIXTURES / request.param, progress=False)


def test_counts_match_the_readme(real):
    name, g = real
    n, m = REAL[name]
    assert g.num_nodes == n
    assert g.num_edges == m and g.num_arcs == 2 * m
    assert n >= 5_000


def test_file_header_states_the_same_counts(real):
    name, g = real
    with gzip.open(FIXTURES / name, "rt") as fh:
        head = "".join(line for line in fh if line.startswith("#"))
    stated = re.search(r"(\d+) vertices, (\d+) undirected edges", head)
    assert stated and tuple(map(int, stated.groups())) == REAL[name]
    assert "license" in head.lower() or "public domain" in head.lower() or "ODbL" in head


def test_one_component_no_loops_symmetric(real):
    _, g = real
    n = g.num_nodes
    rows = np.repeat(np.arange(n), np.diff(g.indptr))
    assert not np.any(rows == g.indices)
    adj = csr_matrix((np.ones(g.indices.size), g.indices, g.indptr), shape=(n, n))
    assert (adj != adj.T).nnz == 0
    assert connected_components(adj, directed=False)[0] == 1
    assert np.diff(g.indptr).min() >= 1


def test_readme_names_every_fixture():
    readme = (FIXTURES / "README.md").read_text()
    for name, (n, m) in REAL.items():
        assert name in readme
        assert f"{n:,}" in readme and f"{m:,}" in readme


def test_prepare_from_reads_a_fixture(tmp_path, capsys):
    out = tmp_path / "roads.npz"
    assert main(["prepare", "--from", str(FIXTURES / "osm_helsinki_roads.txt.gz"),
                 "--out", str(out)]) == 0
    assert "7582 nodes, 9021 edges" in capsys.readouterr().out
    g = Graph.load(out)
    assert (g.num_nodes, g.num_edges) == REAL["osm_helsinki_roads.txt.gz"]
