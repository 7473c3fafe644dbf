"""Import a user's graph from common file formats (``cdfgnn prepare --from PATH``).

Formats (``--format``; :func:`guess_format` infers one from the file name):

* ``snap`` -- an edge list, one edge per line: two ids separated by whitespace or a
  comma, optional further columns (weights, timestamps) ignored, ``#`` and ``%``
  comment lines and blank lines skipped, plain or gzip (``.gz``). Ids are integers or
  arbitrary strings (decided on the first edge line). Without a features or labels
  file the ids are renumbered 0..n-1 in increasing order (integers numerically,
  strings in byte order), so sparse SNAP ids do not create isolated vertices; with
  one, integer ids are the row numbers of that file (an id outside its rows is an
  error) and string ids map to rows in their sorted order.
* ``mtx`` -- MatrixMarket ``coordinate`` (``pattern``, ``real``, ``integer``; general
  or symmetric); 1-based ``row col [value]``; the matrix must be square.
* ``npz`` -- a numpy archive with int arrays ``src`` and ``dst``; optional
  ``num_nodes``, ``x`` [N, F], ``y`` [N] (or [N, C] 0/1), ``train``/``val``/``test``
  (or ``*_mask``) bool [N].
* ``ogb`` -- an extracted OGB node-property folder (``raw/``, ``split/<name>/``),
  read by :func:`cdfgnn.data.real.load_ogb_nodeprop`.
* ``dgl`` -- a DGL binary graph file (``dgl.save_graphs``); needs the ``crosscheck``
  extra. Node data ``feat``/``x``, ``label``/``y``, ``train_mask``/``val_mask``/
  ``test_mask`` are used when present.

Every graph is symmetrised, deduplicated and stripped of self-loops like the built-in
datasets. Features and labels may come from ``.npy`` or ``.csv`` files (one row per
vertex; labels one column). A graph without both real features and real labels gets
N(0,1) features and uniform random labels (as CDFGNN does for Friendster) and
``meta["timing_only"] = True``: its statistics row and the run tables carry the flag,
and its accuracy numbers mean nothing. Without split masks the split is random
65/10/25 (seeded).

Text files are read in blocks of :data:`BLOCK_BYTES` (a progress line on stderr only
where :func:`cdfgnn.progress.progress_enabled`: a terminal, not CI); the edge arrays are the only thing that grows with the file.
Bad input raises :class:`CorruptFileError` with the file name (and the line number of a
malformed line); the output file is written atomically by :meth:`Graph.save`, so an
error leaves nothing behind.
"""
from __future__ import annotations

import gzip
import io
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from cdfgnn.data.graph import Graph, csr_from_edges
from cdfgnn.data.synthetic import random_split
from cdfgnn.errors import CdfgnnError, CorruptFileError

FORMATS = ("snap", "mtx", "npz", "ogb", "dgl")
BLOCK_BYTES = 32 << 20
DEFAULT_SPLIT = (0.65, 0.10, 0.25)
DEFAULT_FEATURES = 64
DEFAULT_CLASSES = 32
_COMMENT = re.compile(rb"^[ \t]*[#%]")
_MTX_FIELDS = ("pattern", "real", "integer", "double")
_MTX_SYMMETRY = ("general", "symmetric", "skew-symmetric", "hermitian")


def guess_format(path: str | Path) -> str | None:
    """The format a file name suggests, or None."""
    p = Path(path)
    if p.is_dir():
        return "ogb" if (p / "raw").is_dir() else None
    name = p.name.lower().removesuffix(".gz")
    if name.endswith(".mtx"):
        return "mtx"
    if name.endswith(".npz"):
        return "npz"
    if name.endswith((".bin", ".dgl")):
        return "dgl"
    if name.endswith((".txt", ".csv", ".tsv", ".edges", ".el")):
        return "snap"
    return None


def import_graph(path: str | Path, fmt: str | None = None, *, features: str | Path | None = None,
                 labels: str | Path | None = None, name: str | None = None, seed: int = 0,
                 num_features: int = DEFAULT_FEATURES, num_classes: int = DEFAULT_CLASSES,
                 progress: bool | None = None) -> Graph:
    """Read ``path`` in format ``fmt`` (None: guessed from the name) into a validated Graph."""
    path = Path(path)
    if fmt is None:
        fmt = guess_format(path)
        if fmt is None:
            raise CdfgnnError(f"{path}: cannot tell the format from the name; give --format "
                              f"(one of {', '.join(FORMATS)})")
    if fmt not in FORMATS:
        raise CdfgnnError(f"{path}: unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if not path.exists():
        raise CdfgnnError(f"{path}: file does not exist")
    for flag, value in (("--num-features", num_features), ("--num-classes", num_classes)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise CdfgnnError(f"{flag} must be a positive integer, got {value!r}")
    name = name or _stem(path)
    if progress is None:
        from cdfgnn.progress import progress_enabled

        progress = progress_enabled()  # a terminal, and not CI
    show = progress
    fx = _read_table(features, "features") if features is not None else None
    fy = _read_table(labels, "labels") if labels is not None else None
    if fx is not None and fy is not None and fx.shape[0] != fy.shape[0]:
        raise CorruptFileError(f"{labels}: has {fy.shape[0]} rows but {features} has {fx.shape[0]}")
    rows = fx.shape[0] if fx is not None else (fy.shape[0] if fy is not None else None)
    if fmt == "snap":
        src, dst, n, ids = read_edge_list(path, num_nodes=rows, progress=show)
        data: dict[str, Any] = {}
    elif fmt == "mtx":
        src, dst, n = read_matrix_market(path, progress=show)
        data = {}
    elif fmt == "npz":
        src, dst, n, data = _read_npz(path)
    elif fmt == "ogb":
        return _with_files(_read_ogb(path, name), fx, fy, features, labels, path)
    else:
        src, dst, n, data = _read_dgl(path)
    if rows is not None and fmt != "snap" and rows != n:
        f = features if features is not None else labels
        raise CorruptFileError(f"{f}: has {rows} rows but {path} has {n} vertices")
    x = _check_rows(fx, n, str(features), 2) if fx is not None else data.get("x")
    y = _check_label_array(fy, n, str(labels)) if fy is not None else data.get("y")
    timing_only = x is None or y is None
    rng = np.random.default_rng(seed)
    if x is None:
        x = rng.standard_normal((n, num_features), dtype=np.float32)
    meta_extra: dict[str, Any] = {}
    if y is None:
        y = rng.integers(0, num_classes, size=n, dtype=np.int64)
        meta_extra["num_classes"] = int(num_classes)
    masks = data.get("masks")
    if masks is None:
        masks = random_split(n, DEFAULT_SPLIT, rng)
    meta = {"source": fmt, "from": str(path), "timing_only": bool(timing_only),
            "features": str(features) if features is not None else
            ("file" if "x" in data else f"random N(0,1) {x.shape[1]}-dim"),
            "labels": str(labels) if labels is not None else
            ("file" if "y" in data else f"uniform random, {num_classes} classes"),
            "split": "file" if "masks" in data else f"random {DEFAULT_SPLIT}", "seed": int(seed)}
    meta.update(meta_extra)
    if fmt == "snap":
        meta["ids"] = ids
    indptr, indices = csr_from_edges(src, dst, n)
    del src, dst
    g = Graph(indptr, indices, np.ascontiguousarray(x, dtype=np.float32), _as_labels(y),
              *(np.asarray(m, dtype=bool) for m in masks), name, meta)
    g.validate(str(path))
    return g


def is_graph_file(path: str | Path) -> bool:
    """True for a Graph file written by `cdfgnn prepare` (an npz archive with a header)."""
    import zipfile

    p = Path(path)
    if not p.is_file() or not p.name.lower().endswith(".npz"):
        return False
    try:
        with zipfile.ZipFile(p) as z:
            return "header.npy" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def read_any_graph(path: str | Path, fmt: str | None = None, **kwargs: Any) -> Graph:
    """A Graph file as `cdfgnn prepare` writes, or anything :func:`import_graph` reads."""
    if fmt is None and is_graph_file(path):
        return Graph.load(path)
    return import_graph(path, fmt, **kwargs)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".txt", ".csv", ".tsv", ".edges", ".el", ".mtx", ".npz", ".bin", ".dgl"):
        name = name.removesuffix(suffix)
    return name or "graph"


def _as_labels(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    return y.astype(np.float32) if y.ndim == 2 else y.astype(np.int64)


# ------------------------------------------------------------------- text files
class _Progress:
    """``\\r``-updated byte counter on stderr; silent unless enabled (a terminal)."""

    def __init__(self, path: Path, enabled: bool):
        self.enabled = enabled
        self.total = path.stat().st_size
        self.path = path
        self.last = 0.0
        self.done = 0

    def update(self, edges: int, final: bool = False) -> None:
        """Show bytes read so far (``self.done``, set by the reader) and edges parsed."""
        now = time.monotonic()
        if not self.enabled or (not final and now - self.last < 0.5):
            return
        self.last = now
        done = self.total if final else self.done
        pct = 100.0 * done / self.total if self.total else 100.0
        end = "\n" if final else ""
        print(f"\r{self.path.name}: {pct:5.1f}% of {self.total / 2**20:.0f} MiB, "
              f"{edges:,} edges", end=end, file=sys.stderr, flush=True)


def _open_text(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    raw = open(path, "rb")
    return raw, (gzip.GzipFile(fileobj=raw) if gz else raw)


def _blocks(path: Path, progress: _Progress) -> Iterator[tuple[int, bytes]]:
    """(number of the first line, bytes of whole lines) blocks, line numbers from 1."""
    raw, f = _open_text(path)
    lineno, tail = 1, b""
    try:
        while True:
            try:
                chunk = f.read(BLOCK_BYTES)
            except (OSError, EOFError) as exc:  # truncated or corrupt gzip
                raise CorruptFileError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None
            if not chunk:
                break
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if cut:
                yield lineno, data[:cut]
                lineno += data.count(b"\n", 0, cut)
            progress.done = raw.tell()  # compressed bytes for a gzip file
        if tail:
            yield lineno, tail + b"\n"
    finally:
        f.close()
        raw.close()


class _Columns:
    """What the first data line fixed: column count, separator, id kind."""

    def __init__(self, comment: str):
        self.ncols = 0
        self.sep = r"\s+"
        self.kind = ""
        self.comment = comment


def _parse_block(data: bytes, first: int, path: Path, cols: _Columns, min_cols: int) -> np.ndarray | None:
    """The first two columns of a block's data lines, row-major (a0 b0 a1 b1 ...): int64
    (integer ids) or an object array of str; None for a block without data lines.

    pandas' C parser reads the block; if it disagrees with the file's shape (another
    column count, a missing field, a non-integer id, a comment char it does not know),
    the block is re-read line by line, which names the first malformed line or returns
    the same result where pandas was merely too strict.
    """
    import pandas as pd

    if not cols.ncols:
        lines = data[:1 << 16].split(b"\n")[:-1] if len(data) > 1 << 16 else data.split(b"\n")
        flat, ncols = _split_block(lines, first, path, [], min_cols)
        if not flat:
            if len(data) <= 1 << 16:
                return None
            lines = data.split(b"\n")  # 64 KiB of comments: look at the whole block
            flat, ncols = _split_block(lines, first, path, [], min_cols)
            if not flat:
                return None
        line = next(ln for ln in lines if ln.split() and not _COMMENT.match(ln))
        cols.ncols = ncols
        cols.sep = "," if b"," in line else r"\s+"
        cols.kind = "int" if _ints(flat[:2]) is not None else "str"
        if cols.kind == "str" and len(flat) >= 4 and _ints(flat[2:4]) is not None:
            raise CorruptFileError(f"{path}: line {first + lines.index(line)}: {_show(line)} looks "
                                   f"like a header above integer ids; comment it out with '#'")
    try:
        df = pd.read_csv(io.BytesIO(data), sep=cols.sep, header=None, comment=cols.comment,
                         engine="c", skip_blank_lines=True, skipinitialspace=True,
                         dtype=str if cols.kind == "str" else None)
        ok = df.shape[1] == cols.ncols and not df.isna().to_numpy().any()
        if ok and cols.kind == "int":
            ok = all(pd.api.types.is_integer_dtype(df[c]) for c in df.columns[:2])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError):
        ok = False
    if ok:
        if df.shape[0] == 0:
            return None
        two = df.iloc[:, :2].to_numpy()
        return (two.astype(np.int64) if cols.kind == "int" else two.astype(object)).ravel()
    lines = data.split(b"\n")
    flat, _ = _split_block(lines, first, path, [cols.ncols], min_cols)
    if not flat:
        return None
    if cols.kind == "str":
        return np.array([t.decode("utf-8", "surrogateescape") for t in flat], dtype=object)
    arr = _ints(flat)
    if arr is None:
        raise _bad_token_line(lines, first, path)
    return arr


def _split_block(lines: list[bytes], first: int, path: Path, ncols: list[int],
                 min_cols: int) -> tuple[list[bytes], int]:
    """Tokens of the data lines of a block and their column count.

    ``ncols`` holds the file's column count once the first data line fixed it; a line
    with another count is malformed.
    """
    tokens = [ln.replace(b",", b" ").split() for ln in lines]
    counts = [len(t) for t in tokens]
    flat: list[bytes] = []
    for i, (t, c) in enumerate(zip(tokens, counts)):
        if c == 0 or _COMMENT.match(lines[i]):
            continue
        if not ncols:
            if c < min_cols:
                raise CorruptFileError(f"{path}: line {first + i}: expected at least {min_cols} "
                                       f"columns, found {c}: {_show(lines[i])}")
            ncols.append(c)
        if c != ncols[0]:
            raise CorruptFileError(f"{path}: line {first + i}: expected {ncols[0]} columns "
                                   f"like the first edge line, found {c}: {_show(lines[i])}")
        flat.extend(t[:2])
    return flat, (ncols[0] if ncols else 0)


def _show(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _ints(flat: list[bytes]) -> np.ndarray | None:
    """The tokens as int64, or None if one is not an integer (caller finds the line)."""
    try:
        return np.array(flat, dtype=np.bytes_).astype(np.int64)
    except (ValueError, OverflowError):
        return None


def _bad_token_line(lines: list[bytes], first: int, path: Path) -> CorruptFileError:
    for i, ln in enumerate(lines):
        if _COMMENT.match(ln):
            continue
        for tok in ln.replace(b",", b" ").split()[:2]:
            try:
                int(tok)
            except ValueError:
                return CorruptFileError(f"{path}: line {first + i}: {tok.decode('utf-8', 'replace')!r} "
                                        f"is not an integer id (the first edge line has integer ids)")
    return CorruptFileError(f"{path}: lines {first}..{first + len(lines) - 1}: unreadable ids")


def read_edge_list(path: str | Path, num_nodes: int | None = None, progress: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, int, str]:
    """(src, dst, n, id kind) of a SNAP-style edge list (module doc for the id rules)."""
    import pandas as pd

    path = Path(path)
    prog = _Progress(path, progress)
    cols = _Columns("#")
    parts: list[np.ndarray] = []
    known = pd.Index([], dtype=object)  # string ids seen so far, in first-seen order
    edges = 0
    for first, data in _blocks(path, prog):
        arr = _parse_block(data, first, path, cols, 2)
        if arr is None:
            continue
        if cols.kind == "str":  # local codes -> global first-seen numbers
            codes, uniques = pd.factorize(arr)
            where = known.get_indexer(uniques)
            new = where < 0
            where[new] = len(known) + np.arange(int(new.sum()))
            known = known.append(pd.Index(uniques[new], dtype=object))
            arr = where[codes].astype(np.int64)
        parts.append(arr)
        edges += arr.shape[0] // 2
        prog.update(edges)
    prog.update(edges, final=True)
    if not parts:
        raise CorruptFileError(f"{path}: no edges (only comments or blank lines)")
    ends = np.concatenate(parts)
    del parts
    if cols.kind == "int":
        if num_nodes is not None:
            lo, hi = int(ends.min()), int(ends.max())
            if lo < 0 or hi >= num_nodes:
                bad = lo if lo < 0 else hi
                raise CorruptFileError(f"{path}: vertex id {bad} out of range [0, {num_nodes}) "
                                       f"(the features/labels file has {num_nodes} rows)")
            n = num_nodes
        else:
            ends, n = _compact(ends)
    else:
        rank = np.empty(len(known), dtype=np.int64)
        rank[np.argsort(known.to_numpy().astype(str), kind="stable")] = np.arange(len(known))
        ends = rank[ends]
        n = len(known)
        if num_nodes is not None:
            if n > num_nodes:
                raise CorruptFileError(f"{path}: {n} distinct vertex ids but the features/labels "
                                       f"file has only {num_nodes} rows")
            n = num_nodes
    return ends[0::2], ends[1::2], n, cols.kind


def _compact(ends: np.ndarray) -> tuple[np.ndarray, int]:
    """Ids renumbered 0..n-1 in increasing order (in place where the id range is small)."""
    lo, hi = int(ends.min()), int(ends.max())
    if hi - lo + 1 <= 2 * ends.shape[0]:  # a lookup table costs at most 16 bytes per edge
        seen = np.zeros(hi - lo + 1, dtype=bool)
        seen[ends - lo] = True
        lut = np.cumsum(seen, dtype=np.int64) - 1
        n = int(lut[-1]) + 1
        if n == hi + 1 and lo == 0:
            return ends, n  # already 0..n-1
        step = 1 << 24
        for i in range(0, ends.shape[0], step):
            ends[i:i + step] = lut[ends[i:i + step] - lo]
        return ends, n
    ids, inverse = np.unique(ends, return_inverse=True)
    return inverse.astype(np.int64, copy=False).ravel(), int(ids.shape[0])


def read_matrix_market(path: str | Path, progress: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """(src, dst, n) of a square MatrixMarket coordinate file, ids 0-based."""
    path = Path(path)
    prog = _Progress(path, progress)
    size: tuple[int, int, int] | None = None
    parts: list[np.ndarray] = []
    cols = _Columns("%")
    for first, data in _blocks(path, prog):
        if size is None:
            first, data, size = _mtx_head(path, first, data)
            if size is None:
                continue
        arr = _parse_block(data, first, path, cols, 2)
        if arr is None:
            continue
        if cols.kind != "int":
            raise _bad_token_line(data.split(b"\n"), first, path)
        if arr.min() < 1 or arr.max() > size[0]:
            bad = int(arr.min()) if arr.min() < 1 else int(arr.max())
            for i, ln in enumerate(data.split(b"\n")):  # name the line
                toks = ln.replace(b",", b" ").split()[:2]
                if not _COMMENT.match(ln) and str(bad).encode() in toks:
                    raise CorruptFileError(f"{path}: line {first + i}: index {bad} out of "
                                           f"range [1, {size[0]}]")
        parts.append(arr - 1)
        prog.update(sum(p.shape[0] for p in parts) // 2)
    prog.update(sum(p.shape[0] for p in parts) // 2, final=True)
    if size is None:
        raise CorruptFileError(f"{path}: no MatrixMarket size line")
    ends = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if ends.shape[0] // 2 != size[2]:
        raise CorruptFileError(f"{path}: the size line announces {size[2]} entries, "
                               f"found {ends.shape[0] // 2}")
    return ends[0::2], ends[1::2], size[0]


def _mtx_head(path: Path, first: int, data: bytes):
    """Check the header (on line 1) and find the size line: (first body line, body, size)."""
    pos = 0
    if first == 1:
        end = data.index(b"\n")
        head = data[:end].decode("ascii", "replace").split()
        if len(head) < 5 or head[0].lower() != "%%matrixmarket" or head[1].lower() != "matrix":
            raise CorruptFileError(f"{path}: line 1: not a MatrixMarket header "
                                   f"('%%MatrixMarket matrix coordinate FIELD SYMMETRY')")
        kind, field, symmetry = (h.lower() for h in head[2:5])
        if kind != "coordinate":
            raise CorruptFileError(f"{path}: line 1: only 'coordinate' MatrixMarket files "
                                   f"are graphs, found {kind!r}")
        if field not in _MTX_FIELDS or symmetry not in _MTX_SYMMETRY:
            raise CorruptFileError(f"{path}: line 1: unsupported field/symmetry "
                                   f"{field!r}/{symmetry!r}")
        pos, first = end + 1, 2
    while pos < len(data):
        end = data.index(b"\n", pos)
        ln = data[pos:end]
        if ln.strip() and not _COMMENT.match(ln):
            try:
                r, c, nnz = (int(v) for v in ln.split())
            except ValueError:
                raise CorruptFileError(f"{path}: line {first}: expected the size line "
                                       f"'rows cols entries', found {_show(ln)}") from None
            if r != c:
                raise CorruptFileError(f"{path}: line {first}: matrix is {r}x{c}; "
                                       f"an adjacency matrix must be square")
            return first + 1, data[end + 1:], (r, c, nnz)
        pos, first = end + 1, first + 1
    return first, b"", None


# --------------------------------------------------------------- binary formats
def _read_npz(path: Path):
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as exc:  # noqa: BLE001 - any unreadable archive is the user's file
        raise CorruptFileError(f"{path}: not a readable npz archive ({type(exc).__name__}: {exc})") from None
    if "src" not in arrays or "dst" not in arrays:
        raise CorruptFileError(f"{path}: needs int arrays 'src' and 'dst', has {sorted(arrays)}")
    src, dst = arrays["src"], arrays["dst"]
    if src.ndim != 1 or src.shape != dst.shape or not (
            np.issubdtype(src.dtype, np.integer) and np.issubdtype(dst.dtype, np.integer)):
        raise CorruptFileError(f"{path}: 'src' and 'dst' must be 1-d int arrays of one length, "
                               f"got {src.dtype}{src.shape} and {dst.dtype}{dst.shape}")
    data: dict[str, Any] = {}
    x, y = arrays.get("x"), arrays.get("y")
    if "num_nodes" in arrays:
        n = int(arrays["num_nodes"])
    elif x is not None:
        n = int(x.shape[0])
    elif y is not None:
        n = int(y.shape[0])
    else:
        n = int(max(src.max(), dst.max())) + 1 if src.size else 0
    _check_range(src, dst, n, path)
    if x is not None:
        data["x"] = _check_rows(x, n, f"{path} array 'x'", 2)
    if y is not None:
        data["y"] = _check_label_array(y, n, f"{path} array 'y'")
    masks = [arrays.get(k, arrays.get(f"{k}_mask")) for k in ("train", "val", "test")]
    if any(m is not None for m in masks):
        if any(m is None for m in masks):
            raise CorruptFileError(f"{path}: give all of train, val, test masks or none")
        for k, m in zip(("train", "val", "test"), masks):
            if m.shape != (n,):
                raise CorruptFileError(f"{path}: mask {k!r} has shape {m.shape}, expected ({n},)")
        data["masks"] = masks
    return src.astype(np.int64), dst.astype(np.int64), n, data


def _read_dgl(path: Path):
    import types

    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        import dgl
    except Exception as exc:  # noqa: BLE001 - the optional extra is missing or broken
        raise CdfgnnError(f"{path}: reading DGL graphs needs the crosscheck extra "
                          f"(pip install 'cdfgnn[crosscheck]'): {type(exc).__name__}: {exc}") from None
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except Exception as exc:  # noqa: BLE001
        raise CorruptFileError(f"{path}: not a readable DGL graph file ({type(exc).__name__}: {exc})") from None
    if not graphs:
        raise CorruptFileError(f"{path}: holds no graph")
    g = graphs[0]
    s, d = g.edges()
    n = int(g.num_nodes())
    nd = {k: v.numpy() for k, v in g.ndata.items()}
    data: dict[str, Any] = {}
    for key in ("feat", "features", "x"):
        if key in nd:
            data["x"] = _check_rows(nd[key], n, f"{path} ndata {key!r}", 2)
            break
    for key in ("label", "labels", "y"):
        if key in nd:
            data["y"] = _check_label_array(nd[key], n, f"{path} ndata {key!r}")
            break
    masks = [nd.get(f"{k}_mask") for k in ("train", "val", "test")]
    if all(m is not None for m in masks):
        data["masks"] = [m.astype(bool) for m in masks]
    return s.numpy().astype(np.int64), d.numpy().astype(np.int64), n, data


def _read_ogb(path: Path, name: str) -> Graph:
    from cdfgnn.data.real import load_ogb_nodeprop

    splits = sorted(p.name for p in (path / "split").iterdir() if p.is_dir()) \
        if (path / "split").is_dir() else []
    split = splits[0] if len(splits) == 1 else None
    g = load_ogb_nodeprop(path, name, split)
    g.meta.update({"from": str(path), "timing_only": False})
    return g


def _with_files(g: Graph, fx, fy, features, labels, path: Path) -> Graph:
    """Replace an OGB graph's features/labels by the given files."""
    if fx is not None:
        g.x = _check_rows(fx, g.num_nodes, str(features), 2).astype(np.float32)
    if fy is not None:
        g.y = _as_labels(_check_label_array(fy, g.num_nodes, str(labels)))
    g.validate(str(path))
    return g


# ---------------------------------------------------------- features and labels
def _check_range(src: np.ndarray, dst: np.ndarray, n: int, path: Path) -> None:
    if src.size == 0:
        return
    lo, hi = int(min(src.min(), dst.min())), int(max(src.max(), dst.max()))
    if lo < 0 or hi >= n:
        raise CorruptFileError(f"{path}: vertex id {lo if lo < 0 else hi} out of range [0, {n})")


def _check_rows(a: np.ndarray, n: int, where: str, ndim: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 1 and ndim == 2:
        a = a[:, None]
    if a.ndim != ndim or a.shape[0] != n:
        raise CorruptFileError(f"{where}: has {a.shape[0] if a.ndim else 0} rows, "
                               f"expected one per vertex ({n})")
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
        raise CorruptFileError(f"{where}: values must be finite numbers")
    return a


def _check_label_array(y: np.ndarray, n: int, where: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise CorruptFileError(f"{where}: has {y.shape[0] if y.ndim else 0} rows, "
                               f"expected one per vertex ({n})")
    if y.ndim == 1:
        if not np.all(np.isfinite(y)) or np.any(y < 0) or np.any(y != np.round(y)):
            raise CorruptFileError(f"{where}: labels must be non-negative integers")
    elif not np.isin(y, (0, 1)).all():
        raise CorruptFileError(f"{where}: multi-label rows must hold 0/1 values")
    return y


def _read_table(path: str | Path, what: str) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise CdfgnnError(f"{path}: {what} file does not exist")
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.name.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
            import pandas as pd

            sep = "\t" if path.name.endswith(".tsv") else ","
            return pd.read_csv(path, header=None, sep=sep, comment="#").to_numpy()
    except Exception as exc:  # noqa: BLE001 - unreadable user file
        raise CorruptFileError(f"{path}: cannot read {what} ({type(exc).__name__}: {exc})") from None
    raise CdfgnnError(f"{path}: {what} must be a .npy or .csv file")


def describe(g: Graph) -> str:
    """One line for the CLI."""
    tag = " (timing only: random features/labels)" if g.meta.get("timing_only") else ""
    return f"{g.name}: {g.num_nodes} nodes, {g.num_edges} edges{tag}"

