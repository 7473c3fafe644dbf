"""Readers for the published on-disk formats of the real datasets (no DGL / PyG / ogb needed).

Follows docs/architecture.md, Datasets (read the published formats directly). Every reader
checks what it reads and raises :class:`CorruptFileError` naming the offending file
(truncated gzip or zip, wrong column count, row counts that disagree, ids out of range,
overlapping splits). Every graph is symmetrised, deduplicated and stripped of
self-loops (CDFGNN, arXiv 2408.00232, Table 1: its |E| match undirected counts).

Formats:

* **reddit** (DGL mirror ``reddit.zip``): ``reddit_data.npz`` with ``feature`` [N, 602],
  ``label`` [N], ``node_types`` [N] (1 = train, 2 = val, 3 = test), ``node_ids``; and
  ``reddit_graph.npz``, a ``scipy.sparse.save_npz`` matrix [N, N].
* **OGB node property prediction** (``<root>/ogbn_<name>/``): ``raw/edge.csv.gz`` (E x 2
  ints, one direction per undirected edge), ``raw/node-feat.csv.gz`` (N x F floats),
  ``raw/node-label.csv.gz`` (N x 1, NaN = unlabelled), optional ``raw/num-node-list.csv.gz``
  / ``raw/num-edge-list.csv.gz``; or the binary layout of ogbn-papers100M:
  ``raw/data.npz`` (``edge_index`` [2, E], ``node_feat``, ``num_nodes_list``,
  ``num_edges_list``) and ``raw/node-label.npz`` (``node_label``). Splits:
  ``split/<split_name>/{train,valid,test}.csv.gz`` (one node id per line).
* **GraphSAINT** (yelp, flickr, amazon-products): ``adj_full.npz`` (scipy sparse),
  ``feats.npy`` [N, F], ``class_map.json`` ({"node": label} or {"node": [0/1, ...]} for
  multi-label), ``role.json`` ({"tr": [...], "va": [...], "te": [...]}).
* **friendster** (SNAP ``com-friendster.ungraph.txt.gz``): tab-separated edge list with
  ``#`` comments; ids are compacted in increasing order. It has no features or labels:
  as in CDFGNN (arXiv 2408.00232, Table 1) they are generated, N(0,1) 64-dim features and
  uniform 32-class labels with a random 65/10/25 split, seeded by ``seed``.
"""
from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cdfgnn.arrays import unique_sorted
from cdfgnn.data.graph import Graph
from cdfgnn.errors import CorruptFileError

# Errors a parser may raise on bad bytes; anything else (MemoryError, bugs) propagates.
_READ_ERRORS = (OSError, EOFError, ValueError, KeyError, IndexError, TypeError,
                zlib.error, zipfile.BadZipFile, UnicodeDecodeError)


# --------------------------------------------------------------------------- builders
def _masks_from_index(n: int, parts: dict[str, np.ndarray], where: str,
                      files: dict[str, str] | None = None):
    masks = []
    for key, idx in parts.items():
        src = (files or {}).get(key, where)
        idx = np.asarray(idx)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise CorruptFileError(f"{src}: split {key!r} is not a list of integer node ids")
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise CorruptFileError(f"{src}: split {key!r} has node ids outside [0, {n})")
        m = np.zeros(n, dtype=bool)
        m[idx] = True
        masks.append(m)
    if np.any(masks[0] & masks[1]) or np.any(masks[0] & masks[2]) or np.any(masks[1] & masks[2]):
        raise CorruptFileError(f"{where}: train/valid/test splits overlap")
    return masks


def _need(path: Path) -> Path:
    if not path.is_file():
        raise CorruptFileError(f"{path}: required file is missing")
    return path


def _guard(path: Path, what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except CorruptFileError:
        raise
    except _READ_ERRORS as exc:
        raise CorruptFileError(f"{path}: cannot read {what} ({type(exc).__name__}: {exc})") from None


def _load_npz(path: Path, keys: list[str]) -> dict[str, np.ndarray]:
    def read():
        with np.load(_need(path), allow_pickle=False) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise CorruptFileError(f"{path}: lacks arrays {missing} (has {sorted(z.files)})")
            return {k: z[k] for k in keys}
    return _guard(path, "npz archive", read)


def _load_sparse(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    import scipy.sparse as sp

    def read():
        m = sp.load_npz(_need(path)).tocoo()
        return m.row.astype(np.int64), m.col.astype(np.int64), tuple(int(s) for s in m.shape)
    return _guard(path, "scipy sparse matrix", read)


def _read_csv_gz(path: Path, *, columns: int | None, dtype, what: str) -> np.ndarray:
    """A headerless gzip csv as a 2-d array; wrong column counts and bad bytes name the file."""
    import pandas as pd

    def read():
        df = pd.read_csv(_need(path), header=None, compression="gzip", dtype=dtype)
        return df.to_numpy()
    arr = _guard(path, what, read)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise CorruptFileError(f"{path}: {what} is empty")
    if columns is not None and arr.shape[1] != columns:
        raise CorruptFileError(f"{path}: {what} must have {columns} column(s), found {arr.shape[1]}")
    return arr


def _labels_with_nan(label: np.ndarray, n: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """OGB labels as int64 (NaN, i.e. unlabelled, becomes 0) and the labelled mask."""
    label = np.asarray(label)
    if label.ndim == 2 and label.shape[1] == 1:
        label = label[:, 0]
    if label.ndim != 1 or label.shape[0] != n:
        raise CorruptFileError(f"{path}: expected {n} labels (one per node), found shape {label.shape}")
    lab = label.astype(np.float64)
    known = ~np.isnan(lab)
    if np.any(lab[known] < 0) or np.any(lab[known] != np.round(lab[known])):
        raise CorruptFileError(f"{path}: labels must be non-negative integers")
    y = np.zeros(n, dtype=np.int64)
    y[known] = lab[known].astype(np.int64)
    return y, known


# ------------------------------------------------------------------------------ reddit
REDDIT_FILES = ("reddit_data.npz", "reddit_graph.npz")


def load_reddit(raw_dir: str | Path, name: str = "reddit") -> Graph:
    raw = Path(raw_dir)
    data_path, graph_path = raw / REDDIT_FILES[0], raw / REDDIT_FILES[1]
    d = _load_npz(data_path, ["feature", "label", "node_types"])
    feat, label, types = d["feature"], d["label"], d["node_types"]
    if feat.ndim != 2:
        raise CorruptFileError(f"{data_path}: 'feature' must be 2-d, got shape {feat.shape}")
    n = feat.shape[0]
    if label.shape != (n,) or not np.issubdtype(label.dtype, np.integer) or (n and label.min() < 0):
        raise CorruptFileError(f"{data_path}: 'label' must hold {n} non-negative ints, got "
                               f"{label.dtype} {label.shape}")
    if types.shape != (n,) or not np.isin(types, (1, 2, 3)).all():
        raise CorruptFileError(f"{data_path}: 'node_types' must hold {n} values in {{1, 2, 3}}")
    row, col, shape = _load_sparse(graph_path)
    if shape != (n, n):
        raise CorruptFileError(f"{graph_path}: adjacency is {shape[0]}x{shape[1]}, "
                               f"but {data_path.name} has {n} nodes")
    return Graph.from_edges(row, col, n, x=feat, y=label, train=types == 1, val=types == 2,
                                test=types == 3, name=name, source=str(graph_path),
                                meta={"source": "dgl-reddit", "raw_dir": str(raw)})


# --------------------------------------------------------------------------------- OGB
OGB_SPLITS = {"ogbn-arxiv": "time", "ogbn-products": "sales_ranking", "ogbn-papers100M": "time"}


def ogb_dir_name(name: str) -> str:
    """OGB's folder naming: ``ogbn-arxiv`` -> ``ogbn_arxiv``."""
    return name.replace("-", "_")


def load_ogb_nodeprop(dataset_dir: str | Path, name: str, split: str | None = None) -> Graph:
    """Read an OGB node property prediction dataset from its extracted folder."""
    root = Path(dataset_dir)
    raw = root / "raw"
    split = split or OGB_SPLITS.get(name, "time")
    if (raw / "data.npz").is_file():
        src, dst, x, n = _ogb_binary_graph(raw)
        lab_path = raw / "node-label.npz"
        label = _load_npz(lab_path, ["node_label"])["node_label"]
    else:
        src, dst, x, n = _ogb_csv_graph(raw)
        lab_path = raw / "node-label.csv.gz"
        label = _read_csv_gz(lab_path, columns=1, dtype=np.float64, what="node labels")
    y, labelled = _labels_with_nan(label, n, lab_path)
    parts, files = {}, {}
    for key in ("train", "valid", "test"):
        p = root / "split" / split / f"{key}.csv.gz"
        parts[key] = _read_csv_gz(p, columns=1, dtype=np.int64, what=f"{key} split")[:, 0]
        files[key] = str(p)
    train, val, test = _masks_from_index(n, parts, str(root / "split" / split), files)
    if np.any((train | val | test) & ~labelled):
        raise CorruptFileError(f"{lab_path}: some split nodes have no label (NaN)")
    return Graph.from_edges(src, dst, n, x=x, y=y, train=train, val=val, test=test, name=name,
                                source=str(raw), meta={"source": "ogb", "split": split,
                                                       "raw_dir": str(raw)})


def _ogb_csv_graph(raw: Path):
    e_path, f_path = raw / "edge.csv.gz", raw / "node-feat.csv.gz"
    edges = _read_csv_gz(e_path, columns=2, dtype=np.int64, what="edge list")
    feat = _read_csv_gz(f_path, columns=None, dtype=np.float32, what="node features")
    n = feat.shape[0]
    nn_path = raw / "num-node-list.csv.gz"
    if nn_path.is_file():
        counts = _read_csv_gz(nn_path, columns=1, dtype=np.int64, what="node count")
        if int(counts.sum()) != n:
            raise CorruptFileError(f"{f_path}: has {n} rows but {nn_path.name} says {int(counts.sum())} nodes")
    ne_path = raw / "num-edge-list.csv.gz"
    if ne_path.is_file():
        counts = _read_csv_gz(ne_path, columns=1, dtype=np.int64, what="edge count")
        if int(counts.sum()) != edges.shape[0]:
            raise CorruptFileError(f"{e_path}: has {edges.shape[0]} rows but {ne_path.name} says "
                                   f"{int(counts.sum())} edges")
    if edges.min() < 0 or edges.max() >= n:
        raise CorruptFileError(f"{e_path}: node ids outside [0, {n}) (node-feat has {n} rows)")
    return edges[:, 0], edges[:, 1], feat, n


def _ogb_binary_graph(raw: Path):
    path = raw / "data.npz"
    d = _load_npz(path, ["edge_index", "node_feat", "num_nodes_list", "num_edges_list"])
    ei, feat = d["edge_index"], d["node_feat"]
    n = int(d["num_nodes_list"].sum())
    if ei.ndim != 2 or ei.shape[0] != 2 or ei.shape[1] != int(d["num_edges_list"].sum()):
        raise CorruptFileError(f"{path}: edge_index must be [2, num_edges], got {ei.shape}")
    if feat.ndim != 2 or feat.shape[0] != n:
        raise CorruptFileError(f"{path}: node_feat must be [{n}, F], got {feat.shape}")
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise CorruptFileError(f"{path}: edge_index ids outside [0, {n})")
    return ei[0], ei[1], feat, n


# --------------------------------------------------------------------------- GraphSAINT
SAINT_FILES = ("adj_full.npz", "feats.npy", "class_map.json", "role.json")


def load_graphsaint(raw_dir: str | Path, name: str) -> Graph:
    """Yelp / Flickr / AmazonProducts in the GraphSAINT release layout."""
    raw = Path(raw_dir)
    adj_p, feat_p, cls_p, role_p = (raw / f for f in SAINT_FILES)
    feat = _guard(feat_p, "feature matrix", lambda: np.load(_need(feat_p), allow_pickle=False))
    if feat.ndim != 2:
        raise CorruptFileError(f"{feat_p}: features must be 2-d, got shape {feat.shape}")
    n = feat.shape[0]
    row, col, shape = _load_sparse(adj_p)
    if shape != (n, n):
        raise CorruptFileError(f"{adj_p}: adjacency is {shape[0]}x{shape[1]}, but {feat_p.name} has {n} rows")
    class_map = _guard(cls_p, "class map", lambda: json.loads(_need(cls_p).read_text()))
    if not isinstance(class_map, dict) or len(class_map) != n:
        raise CorruptFileError(f"{cls_p}: expected a mapping with {n} entries (one per node), "
                               f"found {len(class_map) if isinstance(class_map, dict) else type(class_map).__name__}")
    y = _guard(cls_p, "class map", lambda: _saint_labels(class_map, n))
    role = _guard(role_p, "role file", lambda: json.loads(_need(role_p).read_text()))
    if not isinstance(role, dict) or any(k not in role for k in ("tr", "va", "te")):
        raise CorruptFileError(f"{role_p}: expected keys 'tr', 'va', 'te'")
    parts = {k: _guard(role_p, "role file", lambda k=k: np.asarray(role[k], dtype=np.int64))
             for k in ("tr", "va", "te")}
    train, val, test = _masks_from_index(n, parts, str(role_p))
    return Graph.from_edges(row, col, n, x=feat, y=y, train=train, val=val, test=test,
                                name=name, source=str(adj_p),
                                meta={"source": "graphsaint", "raw_dir": str(raw)})


def _saint_labels(class_map: dict, n: int) -> np.ndarray:
    ids = np.fromiter((int(k) for k in class_map), dtype=np.int64, count=n)
    if ids.min() < 0 or ids.max() >= n or np.unique(ids).shape[0] != n:
        raise ValueError(f"node ids must be exactly 0..{n - 1}")
    values = list(class_map.values())
    if isinstance(values[0], list):
        width = len(values[0])
        if any(not isinstance(v, list) or len(v) != width for v in values):
            raise ValueError("multi-label rows have different lengths")
        y = np.zeros((n, width), dtype=np.float32)
        y[ids] = np.asarray(values, dtype=np.float32)
        if not np.isin(y, (0.0, 1.0)).all():
            raise ValueError("multi-label entries must be 0 or 1")
        return y
    y = np.zeros(n, dtype=np.int64)
    y[ids] = np.asarray(values, dtype=np.int64)
    if y.min() < 0:
        raise ValueError("labels must be non-negative")
    return y


# --------------------------------------------------------------------------- friendster
FRIENDSTER_FILE = "com-friendster.ungraph.txt.gz"


def load_friendster(raw_dir: str | Path, name: str = "friendster", seed: int = 0,
                    num_features: int = 64, num_classes: int = 32,
                    split: tuple[float, float, float] = (0.65, 0.10, 0.25)) -> Graph:
    import pandas as pd

    path = Path(raw_dir) / FRIENDSTER_FILE

    def read():
        df = pd.read_csv(_need(path), sep=r"\s+", comment="#", header=None, dtype=np.int64,
                         compression="gzip")
        return df.to_numpy()
    edges = _guard(path, "edge list", read)
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.shape[0] == 0:
        raise CorruptFileError(f"{path}: expected two node ids per line, found {edges.shape[1:]} columns")
    ids = unique_sorted(edges.ravel())
    compact = np.searchsorted(ids, edges)  # SNAP ids are sparse: renumber 0..n-1 in id order
    n = ids.shape[0]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, num_features), dtype=np.float32)
    y = rng.integers(0, num_classes, size=n, dtype=np.int64)
    perm = rng.permutation(n)
    cut1, cut2 = int(round(split[0] * n)), int(round((split[0] + split[1]) * n))
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][perm[:cut1]] = True
    masks[1][perm[cut1:cut2]] = True
    masks[2][perm[cut2:]] = True
    return Graph.from_edges(compact[:, 0], compact[:, 1], n, x=x, y=y, train=masks[0],
                                val=masks[1], test=masks[2], name=name, source=str(path),
                                meta={"source": "snap", "raw_dir": str(raw_dir), "seed": seed,
                                      "features": "random N(0,1)", "labels": "uniform random",
                                      "timing_only": True})

