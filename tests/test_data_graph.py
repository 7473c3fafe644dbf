"""Graph container: save/load round trip, corrupt files, invariant checks, edge-list
construction (property-based), and the Table-1 statistics row."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cdfgnn.data.graph import Graph, csr_from_edges
from cdfgnn.arrays import unique_sorted
from cdfgnn.data.stats import graph_stats
from cdfgnn.errors import CorruptFileError


def tiny_graph(multilabel: bool = False) -> Graph:
    # path 0-1-2-3 plus edge 1-3, node 4 isolated
    src = np.array([0, 1, 2, 1, 3, 2])      # 3-2 repeats 2-3 reversed
    dst = np.array([1, 2, 3, 3, 2, 2])      # 2-2 is a self-loop
    n = 5
    y = (np.arange(n * 3).reshape(n, 3) % 2).astype(np.float32) if multilabel else np.array([0, 0, 1, 1, 2])
    return Graph.from_edges(src, dst, n, x=np.arange(n * 2, dtype=np.float32).reshape(n, 2), y=y,
                            train=np.array([1, 1, 0, 0, 0], bool), val=np.array([0, 0, 1, 0, 0], bool),
                            test=np.array([0, 0, 0, 1, 1], bool), name="tiny",
                            meta={"generator": "hand", "params": {"a": [1, 2]}})


def test_from_edges_symmetrises_and_cleans():
    g = tiny_graph()
    assert g.num_edges == 4 and g.num_arcs == 8
    np.testing.assert_array_equal(g.degrees(), [1, 3, 2, 2, 0])
    s, d = g.undirected_edges()
    assert list(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 2), (1, 3), (2, 3)]


@pytest.mark.parametrize("multilabel", [False, True])
def test_save_load_round_trip(tmp_path, multilabel):
    g = tiny_graph(multilabel)
    g.save(tmp_path / "g.npz")
    h = Graph.load(tmp_path / "g.npz")
    for f in ("indptr", "indices", "x", "y", "train", "val", "test"):
        a, b = getattr(g, f), getattr(h, f)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert h.name == "tiny" and h.meta == g.meta and h.fingerprint() == g.fingerprint()
    assert h.multilabel == multilabel


def test_corrupt_files_name_the_file(tmp_path):
    g = tiny_graph()
    path = tmp_path / "g.npz"
    g.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match="g.npz"):
        Graph.load(path)
    path.write_bytes(b"not a zip at all")
    with pytest.raises(CorruptFileError, match="g.npz"):
        Graph.load(path)
    with pytest.raises(CorruptFileError, match="missing.npz"):
        Graph.load(tmp_path / "missing.npz")
    np.savez(path, indptr=g.indptr)
    with pytest.raises(CorruptFileError, match="lacks arrays"):
        Graph.load(path)


def test_load_validates_content(tmp_path):
    g = tiny_graph()
    g.save(tmp_path / "g.npz")
    with np.load(tmp_path / "g.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["indices"] = arrays["indices"].copy()
    arrays["indices"][0] = 2  # row 0 now points to 2, but 2 does not point back
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(CorruptFileError, match="bad.npz.*symmetric"):
        Graph.load(tmp_path / "bad.npz")


def _broken(**changes) -> Graph:
    g = tiny_graph()
    fields = dict(indptr=g.indptr.copy(), indices=g.indices.copy(), x=g.x, y=g.y,
                  train=g.train.copy(), val=g.val.copy(), test=g.test.copy())
    fields.update(changes)
    return Graph(**fields, name="broken")


def test_validate_detects_asymmetry_self_loops_overlap_and_dtypes():
    g = tiny_graph()
    # asymmetric: row 1 is [0, 2, 3]; make it [0, 2, 4] (still sorted, 4 -> 1 missing)
    ind = g.indices.copy()
    ind[g.indptr[2] - 1] = 4
    with pytest.raises(CorruptFileError, match="symmetric"):
        _broken(indices=ind).validate()
    # self-loop: a symmetric graph 0-0 / 1-1 style loop
    with pytest.raises(CorruptFileError, match="self-loop"):
        Graph(np.array([0, 1, 1], dtype=np.int64), np.array([0], dtype=np.int64),
              np.zeros((2, 1), np.float32), np.zeros(2, np.int64), np.zeros(2, bool),
              np.zeros(2, bool), np.zeros(2, bool)).validate()
    train = g.train.copy()
    train[2] = True  # 2 is also in val
    with pytest.raises(CorruptFileError, match="overlap"):
        _broken(train=train).validate()
    with pytest.raises(CorruptFileError, match="float32"):
        _broken(x=g.x.astype(np.float64)).validate()
    with pytest.raises(CorruptFileError, match="int64"):
        _broken(indices=g.indices.astype(np.int32)).validate()
    ind = g.indices.copy()
    lo, hi = g.indptr[1], g.indptr[2]
    ind[lo:hi] = ind[lo:hi][::-1]
    with pytest.raises(CorruptFileError, match="increasing"):
        _broken(indices=ind).validate()


edge_lists = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120)))


@settings(max_examples=60, deadline=None)
@given(edge_lists)
def test_from_edges_always_valid_and_symmetric(case):
    n, pairs = case
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    z = np.zeros(n, bool)
    g = Graph.from_edges(src, dst, n, x=np.zeros((n, 1), np.float32), y=np.zeros(n, np.int64),
                         train=z, val=z, test=z)
    g.validate()
    expected = {(min(a, b), max(a, b)) for a, b in pairs if a != b}
    s, d = g.undirected_edges()
    assert set(zip(s.tolist(), d.tolist())) == expected and g.num_edges == len(expected)
    # the CSR equals a plain reference construction
    ref = sorted({(a, b) for a, b in pairs if a != b} | {(b, a) for a, b in pairs if a != b})
    ip, ix = csr_from_edges(src, dst, n)
    assert list(zip(np.repeat(np.arange(n), np.diff(ip)).tolist(), ix.tolist())) == ref


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=50))
def test_unique_sorted_matches_numpy(values):
    a = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(unique_sorted(a), np.unique(a))


def test_from_edges_rejects_bad_endpoints_naming_the_source():
    z = np.zeros(3, bool)
    with pytest.raises(CorruptFileError, match="edges.txt.*range"):
        Graph.from_edges(np.array([0, 3]), np.array([1, 1]), 3, x=np.zeros((3, 1)),
                         y=np.zeros(3), train=z, val=z, test=z, name="g", source="edges.txt")


def test_graph_stats_row():
    row = graph_stats(tiny_graph())
    assert row == {"name": "tiny", "num_nodes": 5, "num_edges": 4, "num_features": 2,
                   "num_classes": 3, "multilabel": False, "train": 2, "val": 1, "test": 2,
                   "avg_degree": 1.6, "max_degree": 3, "isolated_nodes": 1,
                   "edge_homophily": pytest.approx(0.5),  # (0,1) and (2,3) of 4 edges
                   "timing_only": False}
    json.dumps(row)
    ml = graph_stats(tiny_graph(multilabel=True))
    assert ml["multilabel"] and ml["num_classes"] == 3 and ml["edge_homophily"] is None
