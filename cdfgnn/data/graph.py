"""The Graph container: symmetric CSR, features, labels, split masks, one file on disk.

Invariants (checked by :meth:`Graph.validate`, always on load):
  * ``indptr`` int64 [N+1], non-decreasing, ``indptr[0] == 0``, ``indptr[-1] == nnz``;
  * ``indices`` int64 [nnz] in ``[0, N)``, sorted within each row, no duplicates,
    no self-loops (models add the self term themselves);
  * the adjacency is symmetric (every directed arc has its reverse);
  * ``x`` float32 [N, F]; ``y`` int64 [N] (single label) or float32 [N, C] (multi-label);
  * ``train``/``val``/``test`` bool [N], pairwise disjoint.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cdfgnn.arrays import unique_sorted
from cdfgnn.errors import CorruptFileError
from cdfgnn.fileio import atomic_write_bytes

FORMAT_VERSION = 1


@dataclass
class Graph:
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray
    y: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    name: str = "graph"
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ shape
    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_arcs(self) -> int:
        """Directed arcs in the CSR (= 2 x undirected edges)."""
        return int(self.indices.shape[0])

    @property
    def num_edges(self) -> int:
        """Undirected edges (the |E| the papers report)."""
        return self.num_arcs // 2

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def multilabel(self) -> bool:
        return self.y.ndim == 2

    @property
    def num_classes(self) -> int:
        if self.multilabel:
            return int(self.y.shape[1])
        if "num_classes" in self.meta:  # a subgraph may lack the highest labels
            return int(self.meta["num_classes"])
        return int(self.y.max()) + 1 if self.y.size else 0

    def degrees(self) -> np.ndarray:
        """Global degree (neighbour count, self-loop excluded) of every vertex."""
        return np.diff(self.indptr)

    def row_of_arcs(self) -> np.ndarray:
        """Source vertex of every arc, aligned with ``indices``."""
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.degrees())

    def undirected_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Each undirected edge once as (src, dst) with src < dst, in CSR order.

        This order defines the edge ids that vertex-cut partitionings refer to.
        """
        src = self.row_of_arcs()
        keep = src < self.indices
        return src[keep], self.indices[keep]

    def fingerprint(self) -> str:
        """Content hash of the topology: partition files carry it to detect mismatches."""
        h = hashlib.blake2b(digest_size=16)
        h.update(np.int64(self.num_nodes).tobytes())
        h.update(np.ascontiguousarray(self.indptr).tobytes())
        h.update(np.ascontiguousarray(self.indices).tobytes())
        return h.hexdigest()

    # ------------------------------------------------------------- building
    @classmethod
    def from_edges(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        num_nodes: int,
        *,
        x: np.ndarray,
        y: np.ndarray,
        train: np.ndarray,
        val: np.ndarray,
        test: np.ndarray,
        name: str = "graph",
        meta: dict[str, Any] | None = None,
        source: str | None = None,
    ) -> "Graph":
        """Symmetrise, drop self-loops and duplicates, build CSR.

        ``source`` names the file(s) the arrays came from, so a violated invariant is
        reported against them.
        """
        where = source or f"graph {name!r}"
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape or src.ndim != 1:
            raise CorruptFileError(f"{where}: edge source and target lists differ in shape")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
            raise CorruptFileError(f"{where}: edge endpoints out of range [0, {num_nodes})")
        indptr, indices = csr_from_edges(src, dst, num_nodes)
        g = cls(indptr, indices, np.ascontiguousarray(x, dtype=np.float32),
                _as_labels(y), np.asarray(train, bool), np.asarray(val, bool),
                np.asarray(test, bool), name, dict(meta or {}))
        g.validate(source)
        return g

    # ------------------------------------------------------------ validation
    def validate(self, source: str | None = None) -> None:
        """Raise :class:`CorruptFileError` naming ``source`` if an invariant fails."""
        where = source or f"graph {self.name!r}"

        def bad(msg: str) -> CorruptFileError:
            return CorruptFileError(f"{where}: {msg}")

        ip, ix = self.indptr, self.indices
        if ip.ndim != 1 or ip.shape[0] < 1 or ip.dtype != np.int64:
            raise bad("indptr must be a 1-d int64 array of length N+1")
        if ix.ndim != 1 or ix.dtype != np.int64:
            raise bad("indices must be a 1-d int64 array")
        n = ip.shape[0] - 1
        if ip[0] != 0 or ip[-1] != ix.shape[0]:
            raise bad(f"indptr must start at 0 and end at nnz={ix.shape[0]}, got {ip[0]}..{ip[-1]}")
        if np.any(np.diff(ip) < 0):
            raise bad("indptr is not non-decreasing")
        if ix.size and (ix.min() < 0 or ix.max() >= n):
            raise bad(f"indices out of range [0, {n})")
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(ip))
        if np.any(rows == ix):
            raise bad("self-loops present (the model adds the self term)")
        if ix.size > 1:
            same_row = rows[1:] == rows[:-1]
            if np.any(same_row & (ix[1:] <= ix[:-1])):
                raise bad("neighbour lists not strictly increasing (duplicate or unsorted edges)")
        if ix.size:
            fwd = rows * n + ix
            rev = ix * n + rows
            if not np.array_equal(np.sort(rev), fwd):  # fwd is sorted by construction
                raise bad("adjacency is not symmetric")
        if self.x.ndim != 2 or self.x.shape[0] != n or self.x.dtype != np.float32:
            raise bad(f"x must be float32 [N={n}, F], got {self.x.dtype} {self.x.shape}")
        if self.y.shape[0] != n:
            raise bad(f"y has {self.y.shape[0]} rows, expected N={n}")
        if self.y.ndim == 1 and self.y.dtype != np.int64:
            raise bad("single-label y must be int64")
        if self.y.ndim == 2 and self.y.dtype != np.float32:
            raise bad("multi-label y must be float32 [N, C]")
        if self.y.ndim == 1 and self.y.size and self.y.min() < 0:
            raise bad("labels must be non-negative")
        for mname in ("train", "val", "test"):
            m = getattr(self, mname)
            if m.shape != (n,) or m.dtype != np.bool_:
                raise bad(f"{mname} mask must be bool [N={n}]")
        if np.any(self.train & self.val) or np.any(self.train & self.test) or np.any(self.val & self.test):
            raise bad("train/val/test masks overlap")

    # ------------------------------------------------------------------- io
    def save(self, path: str | os.PathLike) -> None:
        """Write atomically: a killed writer never leaves a file that loads."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": "cdfgnn-graph", "version": FORMAT_VERSION,
                  "name": self.name, "meta": self.meta}
        buf = io.BytesIO()
        np.savez(buf, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                 indptr=self.indptr, indices=self.indices, x=self.x, y=self.y,
                 train=self.train, val=self.val, test=self.test)
        atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Graph":
        path = Path(path)
        if not path.exists():
            raise CorruptFileError(f"{path}: graph file does not exist")
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
            raise CorruptFileError(f"{path}: not a readable graph file ({exc})") from None
        missing = {"header", "indptr", "indices", "x", "y", "train", "val", "test"} - set(arrays)
        if missing:
            raise CorruptFileError(f"{path}: graph file lacks arrays {sorted(missing)}")
        try:
            header = json.loads(arrays["header"].tobytes().decode())
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CorruptFileError(f"{path}: graph header is not valid JSON") from None
        if header.get("format") != "cdfgnn-graph":
            raise CorruptFileError(f"{path}: not a cdfgnn graph file")
        g = cls(arrays["indptr"], arrays["indices"], arrays["x"], arrays["y"], arrays["train"],
                arrays["val"], arrays["test"], header.get("name", path.stem), header.get("meta", {}))
        g.validate(str(path))
        return g


def csr_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric, deduplicated, self-loop-free CSR from an arbitrary edge list."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    n = int(num_nodes)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keep = lo != hi
    pairs = unique_sorted(lo[keep] * n + hi[keep])  # each undirected edge once, lo < hi
    return csr_from_sorted_pairs(pairs // n, pairs % n, n)


def csr_from_sorted_pairs(a: np.ndarray, b: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR from distinct undirected pairs with ``a < b``, sorted by ``(a, b)``.

    Row r lists its smaller neighbours (from the reversed pairs) before its larger ones
    (from the forward pairs), each run already ascending, so only the reversed half
    needs a sort and every arc's slot is computed directly.
    """
    n = int(num_nodes)
    m = a.shape[0]
    rev = np.sort(b * n + a)
    rev_row, rev_col = rev // n, rev % n
    cnt_f = np.bincount(a, minlength=n)
    cnt_r = np.bincount(rev_row, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt_f + cnt_r, out=indptr[1:])
    ar = np.arange(m, dtype=np.int64)
    start_f = np.cumsum(cnt_f) - cnt_f
    start_r = np.cumsum(cnt_r) - cnt_r
    indices = np.empty(2 * m, dtype=np.int64)
    indices[indptr[rev_row] + (ar - start_r[rev_row])] = rev_col
    indices[indptr[a] + cnt_r[a] + (ar - start_f[a])] = b
    return indptr, indices


def _as_labels(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    return y.astype(np.float32) if y.ndim == 2 else y.astype(np.int64)
