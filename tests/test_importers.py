"""`cdfgnn prepare --from PATH`: every import format, features/labels files, bad input."""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from cdfgnn.cli import main
from cdfgnn.data import importers
from cdfgnn.data.graph import Graph
from cdfgnn.data.importers import import_graph
from cdfgnn.errors import CdfgnnError, CorruptFileError

# a 5-cycle 0-1-2-3-4 plus the chord 0-2, with sparse SNAP-like ids 10*i + 7
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)]
PAIRS = {(min(a, b), max(a, b)) for a, b in EDGES}


def _pairs(g: Graph) -> set[tuple[int, int]]:
    s, d = g.undirected_edges()
    return set(zip(s.tolist(), d.tolist()))


def _snap_text(ids=lambda v: str(10 * v + 7), sep="\t") -> str:
    lines = [f"{ids(a)}{sep}{ids(b)}\n" for a, b in EDGES]
    return ("# Directed graph (each unordered pair of nodes is saved once)\n# FromNodeId\tToNodeId\n"
            + "".join(lines[:3]) + "\n" + "".join(lines[3:]) + "1007\t1007\n")  # blank, self-loop


def test_snap_gzip_sparse_int_ids_are_compacted(tmp_path):
    p = tmp_path / "g.txt.gz"
    p.write_bytes(gzip.compress(_snap_text().encode()))
    g = import_graph(p, "snap", progress=False)
    # ids 7, 17, ..., 47 and 1007 (only in a self-loop) -> 0..5 in increasing order
    assert g.num_nodes == 6 and _pairs(g) == PAIRS
    assert g.name == "g" and g.meta["timing_only"] is True and g.meta["ids"] == "int"
    assert g.num_features == importers.DEFAULT_FEATURES
    assert g.num_classes == importers.DEFAULT_CLASSES
    assert g.train.sum() + g.val.sum() + g.test.sum() == 6


def test_snap_comma_string_ids_in_sorted_order(tmp_path):
    names = "abcde"
    p = tmp_path / "g.csv"
    p.write_text("".join(f"{names[b]},{names[a]},1.5\n" for a, b in EDGES))  # weights ignored
    g = import_graph(p, progress=False)  # format guessed from .csv
    assert g.meta["ids"] == "str" and g.num_nodes == 5 and _pairs(g) == PAIRS


def test_snap_small_blocks_keep_line_numbers(tmp_path, monkeypatch):
    """Blocks cut inside the file: the edges are all read and a bad line is still named."""
    monkeypatch.setattr(importers, "BLOCK_BYTES", 7)
    p = tmp_path / "g.txt"
    p.write_text(_snap_text())
    g = import_graph(p, "snap", progress=False)
    assert _pairs(g) == PAIRS
    lines = _snap_text().splitlines()
    lines[6] = "27 x9"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptFileError, match=r"g\.txt: line 7: 'x9' is not an integer id"):
        import_graph(p, "snap", progress=False)


def test_features_and_labels_files_give_a_trainable_graph(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("".join(f"{a} {b}\n" for a, b in EDGES))
    x = np.arange(15, dtype=np.float64).reshape(5, 3)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "y.csv").write_text("0\n1\n1\n0\n2\n")
    g = import_graph(p, "snap", features=tmp_path / "x.npy", labels=tmp_path / "y.csv",
                     progress=False)
    assert g.meta["timing_only"] is False
    np.testing.assert_array_equal(g.x, x.astype(np.float32))
    np.testing.assert_array_equal(g.y, [0, 1, 1, 0, 2])
    # with a features file, ids are its rows: an isolated vertex 5 is kept
    np.save(tmp_path / "x6.npy", np.zeros((6, 2)))
    assert import_graph(p, "snap", features=tmp_path / "x6.npy", progress=False).num_nodes == 6


def test_matrix_market(tmp_path):
    p = tmp_path / "g.mtx"
    rows = "".join(f"{b + 1} {a + 1} 1.0\n" for a, b in EDGES)
    p.write_text("%%MatrixMarket matrix coordinate real symmetric\n% comment\n"
                 f"5 5 {len(EDGES)}\n" + rows)
    g = import_graph(p, progress=False)
    assert g.num_nodes == 5 and _pairs(g) == PAIRS
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n5 5 2\n1 2\n6 1\n")
    with pytest.raises(CorruptFileError, match=r"g\.mtx: line 4: index 6 out of range \[1, 5\]"):
        import_graph(p, progress=False)
    p.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n")
    with pytest.raises(CorruptFileError, match="coordinate"):
        import_graph(p, progress=False)


def test_npz_with_arrays_and_masks(tmp_path):
    src, dst = np.array(EDGES).T
    n = 5
    train = np.array([1, 1, 0, 0, 0], bool)
    val = np.array([0, 0, 1, 0, 0], bool)
    test = ~(train | val)
    y = np.array([0, 1, 0, 1, 0])
    x = np.ones((n, 4), np.float32)
    np.savez(tmp_path / "g.npz", src=src, dst=dst, x=x, y=y, train_mask=train, val_mask=val,
             test_mask=test)
    g = import_graph(tmp_path / "g.npz", "npz")
    assert g.meta["timing_only"] is False and _pairs(g) == PAIRS
    np.testing.assert_array_equal(g.train, train)
    np.testing.assert_array_equal(g.y, y)
    np.savez(tmp_path / "bad.npz", src=src, dst=dst, num_nodes=4)
    with pytest.raises(CorruptFileError, match=r"bad\.npz: vertex id 4 out of range \[0, 4\)"):
        import_graph(tmp_path / "bad.npz", "npz")
    np.savez(tmp_path / "none.npz", a=src)
    with pytest.raises(CorruptFileError, match="'src' and 'dst'"):
        import_graph(tmp_path / "none.npz", "npz")


def test_ogb_layout(tmp_path):
    import pandas as pd

    root = tmp_path / "ogbn_toy"
    (root / "raw").mkdir(parents=True)
    (root / "split" / "random").mkdir(parents=True)

    def gz(path, arr):
        pd.DataFrame(arr).to_csv(path, header=False, index=False, compression="gzip")

    gz(root / "raw" / "edge.csv.gz", np.array(EDGES))
    gz(root / "raw" / "node-feat.csv.gz", np.eye(5, 3))
    gz(root / "raw" / "node-label.csv.gz", np.array([[0], [1], [2], [0], [1]]))
    for k, ids in (("train", [0, 1]), ("valid", [2]), ("test", [3, 4])):
        gz(root / "split" / "random" / f"{k}.csv.gz", np.array(ids)[:, None])
    g = import_graph(root, progress=False)  # a folder with raw/: ogb
    assert g.num_nodes == 5 and _pairs(g) == PAIRS and g.meta["timing_only"] is False
    np.testing.assert_array_equal(np.flatnonzero(g.val), [2])


def test_dgl_binary(tmp_path):
    import sys
    import types

    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        import dgl
        import torch
    except Exception as exc:  # pragma: no cover - depends on the crosscheck extra
        pytest.skip(f"crosscheck extra not importable: dgl ({exc})")
    src, dst = np.array(EDGES).T
    dg = dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=6)
    dg.ndata["feat"] = torch.randn(6, 3)
    dg.ndata["label"] = torch.tensor([0, 1, 0, 1, 0, 1])
    dgl.save_graphs(str(tmp_path / "g.bin"), [dg])
    g = import_graph(tmp_path / "g.bin", "dgl")
    assert g.num_nodes == 6 and _pairs(g) == PAIRS and g.meta["timing_only"] is False
    np.testing.assert_allclose(g.x, dg.ndata["feat"].numpy())


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("text,match", [
    ("1 2\n2\n", r"line 2: expected 2 columns like the first edge line, found 1"),
    ("# c\n1\n", r"line 2: expected at least 2 columns, found 1"),
    ("# only a comment\n\n", r"no edges"),
])
def test_malformed_edge_list_names_file_and_line(tmp_path, text, match):
    p = tmp_path / "e.txt"
    p.write_text(text)
    with pytest.raises(CorruptFileError, match=rf"e\.txt: {match}"):
        import_graph(p, "snap", progress=False)


def test_id_out_of_range_and_row_mismatch(tmp_path):
    p = tmp_path / "e.txt"
    p.write_text("0 1\n1 7\n")
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    with pytest.raises(CorruptFileError, match=r"e\.txt: vertex id 7 out of range \[0, 3\)"):
        import_graph(p, "snap", features=tmp_path / "x.npy")
    p.write_text("0 1\n1 2\n")
    np.save(tmp_path / "y.npy", np.zeros(4, np.int64))
    with pytest.raises(CorruptFileError, match=r"y\.npy: has 4 rows but .*x\.npy has 3"):
        import_graph(p, "snap", features=tmp_path / "x.npy", labels=tmp_path / "y.npy")
    np.savez(tmp_path / "g.npz", src=np.array([0, 1]), dst=np.array([1, 2]))
    with pytest.raises(CorruptFileError, match=r"x\.npy: has 3 rows but .*g\.npz has 3|"
                                               r"y\.npy: has 4 rows"):
        import_graph(tmp_path / "g.npz", "npz", labels=tmp_path / "y.npy")


def test_cli_prepare_from_file(tmp_path, capsys):
    p = tmp_path / "edges.txt.gz"
    p.write_bytes(gzip.compress(_snap_text().encode()))
    out, stats = tmp_path / "g.npz", tmp_path / "g.stats.json"
    code = main(["prepare", "--from", str(p), "--format", "snap", "--out", str(out),
                 "--stats-out", str(stats)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "timing only" in captured.out
    assert captured.err == ""  # not a terminal: no progress line
    row = json.loads(stats.read_text())
    assert row["dataset"] == "edges" and row["timing_only"] is True and row["num_edges"] == 6
    assert 0 < row["avg_clustering"] <= 1 and row["louvain_modularity"] is not None
    assert Graph.load(out).num_nodes == 6


@pytest.mark.parametrize("args,match", [
    (["--format", "foo"], r"edges\.txt: unknown format 'foo'; valid: snap, mtx"),
    (["--format", "snap"], r"edges\.txt: line 2: 'a' is not an integer id"),
])
def test_cli_bad_input_one_line_nothing_written(tmp_path, capsys, args, match):
    p = tmp_path / "edges.txt"
    p.write_text("0 1\na b\n")
    out = tmp_path / "g.npz"
    code = main(["prepare", "--from", str(p), *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(match, err), err
    assert list(tmp_path.iterdir()) == [p]


def test_cli_format_without_from_is_refused(tmp_path, capsys):
    code = main(["prepare", "--dataset", "synth-arxiv", "--format", "snap", "--out",
                 str(tmp_path / "g.npz")])
    assert code == 2 and "--from" in capsys.readouterr().err


def test_unknown_suffix_needs_format(tmp_path):
    p = tmp_path / "edges.dat"
    p.write_text("0 1\n")
    with pytest.raises(CdfgnnError, match="give --format"):
        import_graph(p)


def test_progress_line_only_when_asked(tmp_path, capsys):
    p = tmp_path / "g.txt"
    p.write_text(_snap_text())
    import_graph(p, "snap", progress=False)
    assert capsys.readouterr().err == ""
    import_graph(p, "snap", progress=True)  # what a terminal gets
    assert "100.0%" in capsys.readouterr().err


def test_random_feature_width_must_be_positive(tmp_path):
    p = tmp_path / "e.txt"
    p.write_text("0 1\n")
    with pytest.raises(CdfgnnError, match="--num-features must be a positive integer, got 0"):
        import_graph(p, "snap", num_features=0)
