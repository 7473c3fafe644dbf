"""Column locality of an aggregation matrix: how many of its arcs read its hottest columns.

An SpMM ``A @ X`` reads row ``u`` of ``X`` once per arc into column ``u``. What a cache of
``C`` rows can serve depends on how those reads are spread over the columns: with every
column read equally often, a cache holding a fraction ``q`` of the columns serves a
fraction ``q`` of the repeated reads; on a skewed graph (a power-law degree tail) the
``q`` most-read columns take far more. This module counts that curve from the matrix's
column indices; :func:`cdfgnn.pricing.roofline.spmm_bytes` reads it at the fraction of
the input rows the card's L2 holds.

The curve ("arc share") is, for the grid ``q_k = 2^-k`` (``k = 0 .. GRID_STEPS``),

    share(q_k) = (arcs into the ceil(q_k x cols) most-read columns) / arcs,

non-increasing in ``k``, ``share(1) = 1``, and ``share(q) >= q``. Without a curve (an SpMM
whose matrix was not counted) pricing takes the uniform one, ``share(q) = q``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

#: grid points q_k = 2^-k, k = 0 .. GRID_STEPS (down to about one column in a million)
GRID_STEPS = 20
#: decimals kept in a record: the curve is a model input, not a count
DECIMALS = 5


def grid() -> np.ndarray:
    """The column fractions ``q_k = 2^-k`` of the curve, largest first."""
    return 2.0 ** -np.arange(GRID_STEPS + 1, dtype=np.float64)


def arc_share(indices: np.ndarray, num_cols: int, self_loops: int = 0) -> list[float] | None:
    """The curve of a matrix whose arcs read columns ``indices`` (``num_cols`` columns),
    plus one read of each of the first ``self_loops`` columns (the self loops of rows whose
    local id is their column's, as a part's aggregating rows); None without reads."""
    if num_cols <= 0:
        return None
    reads = np.bincount(np.asarray(indices, dtype=np.int64), minlength=int(num_cols))
    reads[: int(self_loops)] += 1
    return share_of_reads(reads)


def share_of_reads(reads: np.ndarray) -> list[float] | None:
    """The curve from the number of arcs that read each column (one entry per column,
    zeros included); None without arcs."""
    reads = np.sort(np.asarray(reads, dtype=np.int64))[::-1]
    total = float(reads.sum())
    if total <= 0:
        return None
    top = np.cumsum(reads, dtype=np.float64) / total
    take = np.ceil(grid() * reads.size).astype(np.int64)       # >= 1 column each
    return [round(float(v), DECIMALS) for v in top[np.minimum(take, reads.size) - 1]]


def combine(curves: Sequence[list[float] | None], arcs: Sequence[float]) -> list[float] | None:
    """The arc-weighted mean of several matrices' curves (a rank holding several parts:
    its SpMMs are counted together, so their reads are too); None where none has one."""
    pairs = [(np.asarray(c, dtype=np.float64), float(a)) for c, a in zip(curves, arcs)
             if c is not None and a > 0]
    if not pairs:
        return None
    total = sum(a for _, a in pairs)
    mean = sum(c * a for c, a in pairs) / total
    return [round(float(v), DECIMALS) for v in mean]


def share_at(curve: Sequence[float] | None, q: float) -> float:
    """The share of arcs that read the most-read fraction ``q`` of the columns: the curve
    interpolated linearly in ``log2 q`` (below the grid's last point, in proportion to
    ``q``); the uniform ``q`` without a curve."""
    q = min(max(float(q), 0.0), 1.0)
    if curve is None:
        return q
    c = np.asarray(curve, dtype=np.float64)
    if q <= 0.0:
        return 0.0
    x = -np.log2(q)                      # 0 at q = 1, GRID_STEPS at the last point
    if x >= len(c) - 1:
        return float(c[-1] * q / 2.0 ** -(len(c) - 1))
    k = int(np.floor(x))
    t = x - k
    return float(max((1.0 - t) * c[k] + t * c[k + 1], q))
