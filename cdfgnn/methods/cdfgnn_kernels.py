"""Fused numba kernels of the CDFGNN vertex cache (Algorithm 2), one pass over the rows each.

Used by :class:`cdfgnn.methods.cdfgnn_cache.CdfgnnCache`; each kernel replaces a chain
of torch passes (gather, subtract, abs, row max, compare, index_put, index_add) and
computes the same float32 values in the same order, so results are bit-identical to
the torch formulation (``tests/test_cdfgnn_kernels.py`` checks both on random input).

Conventions: row blocks are C-contiguous float32 ``[rows, d]``; a peer list is a
segment ``idx[off[q]:off[q+1]]`` of one concatenated int64 array; the bitmap of peer
q (bit k = element k of its list, low bits first, as ``pack_bits(mask, 1)``) is the
segment ``bitmap[boff[q]:boff[q+1]]`` of one uint8 array; the rows a kernel selects
for peer q are written compactly from row ``ooff[q]`` of the output block (``off``
itself, or the row offsets of per-peer messages in one wire buffer), and their count
to ``counts[q]``. Every kernel releases the GIL (thread-backend ranks run them
concurrently).

The threshold test is the relative L-inf change of a row, ``max_j |z - p| > eps *
max_j |z|`` in float32 (``eps`` is rounded to float32 first, as torch does for a
Python scalar); a row with a NaN never passes (a NaN row maximum compares false, as
with ``torch.amax``).
"""
from __future__ import annotations

import numba
import numpy as np

#: what a mirror's ``pushed`` row becomes when it sends (push_changed's ``mode``)
FEEDBACK_EXACT = 0   # pushed += (z - pushed): error feedback through a lossless codec
FEEDBACK_LITERAL = 1  # pushed <- z (error_feedback=false, Alg. 2 as printed)
FEEDBACK_LATER = 2   # left alone: the caller adds the decoded difference (lossy codec)


@numba.njit(cache=True, nogil=True, inline="always")
def _over(z, p, r, eps):
    """Relative L-inf change of row r since the last push exceeds eps (NaN sticks)."""
    d = z.shape[1]
    zm = abs(z[r, 0])
    dm = abs(z[r, 0] - p[r, 0])
    for j in range(1, d):
        a = abs(z[r, j])
        if a > zm or a != a:   # once NaN, no later value compares greater
            zm = a
        b = abs(z[r, j] - p[r, j])
        if b > dm or b != b:
            dm = b
    return dm > eps * zm


@numba.njit(cache=True, nogil=True, inline="always")
def _set_bit(bitmap, base, k):
    """Flag entry ``k`` of the peer list whose bitmap starts at byte ``base``."""
    bitmap[base + (k >> 3)] |= np.uint8(1 << (k & 7))


@numba.njit(cache=True, nogil=True)
def push_changed(z, pushed, idx, off, eps, mode, bitmap, boff, out, ooff, sel, counts):
    """Mirrors (phase 1): per peer, flag the rows over the threshold in the bitmap, write
    their difference ``z - pushed`` to ``out`` (from row ``ooff[q]``) and their row ids
    to ``sel`` (from ``off[q]``), and update ``pushed`` as ``mode`` says."""
    d = z.shape[1]
    for q in range(off.shape[0] - 1):
        bitmap[boff[q]:boff[q + 1]] = 0
        lo = off[q]
        c = 0
        for k in range(off[q + 1] - lo):
            r = idx[lo + k]
            if not _over(z, pushed, r, eps):
                continue
            _set_bit(bitmap, boff[q], k)
            o = ooff[q] + c
            sel[lo + c] = r
            for j in range(d):
                diff = z[r, j] - pushed[r, j]
                out[o, j] = diff
                if mode == FEEDBACK_EXACT:
                    pushed[r, j] = pushed[r, j] + diff
                elif mode == FEEDBACK_LITERAL:
                    pushed[r, j] = z[r, j]
            c += 1
        counts[q] = c


@numba.njit(cache=True, nogil=True)
def add_rows(dst, rows, vals):
    """``dst[rows[i]] += vals[i]`` (distinct rows; the decoded differences of error feedback)."""
    d = dst.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(d):
            dst[r, j] = dst[r, j] + vals[i, j]


@numba.njit(cache=True, nogil=True)
def add_flagged(agg, active, idx, bitmap, vals):
    """Masters (phase 2), one peer's message: ``agg[idx[k]] += vals[c]`` for the c-th
    flagged element k of the list, and mark the row active."""
    d = agg.shape[1]
    c = 0
    for k in range(idx.shape[0]):
        if (bitmap[k >> 3] >> (k & 7)) & 1:
            r = idx[k]
            for j in range(d):
                agg[r, j] = agg[r, j] + vals[c, j]
            active[r] = 1
            c += 1


@numba.njit(cache=True, nogil=True)
def master_own(z, pushed, agg, active, masters, eps):
    """Masters (phase 2), their own contribution: rows over the threshold add ``z -
    pushed`` to the aggregate, set ``pushed <- z`` and become active."""
    d = z.shape[1]
    for i in range(masters.shape[0]):
        r = masters[i]
        if not _over(z, pushed, r, eps):
            continue
        for j in range(d):
            agg[r, j] = agg[r, j] + (z[r, j] - pushed[r, j])
            pushed[r, j] = z[r, j]
        active[r] = 1


@numba.njit(cache=True, nogil=True)
def select_active(agg, active, idx, off, bitmap, boff, out, ooff, counts):
    """Masters (phase 3): per peer, flag the active rows of its list and copy their
    aggregates to ``out`` (from row ``ooff[q]``)."""
    d = agg.shape[1]
    for q in range(off.shape[0] - 1):
        bitmap[boff[q]:boff[q + 1]] = 0
        lo = off[q]
        c = 0
        for k in range(off[q + 1] - lo):
            r = idx[lo + k]
            if active[r]:
                _set_bit(bitmap, boff[q], k)
                o = ooff[q] + c
                for j in range(d):
                    out[o, j] = agg[r, j]
                c += 1
        counts[q] = c


@numba.njit(cache=True, nogil=True)
def set_flagged(agg, idx, bitmap, vals):
    """Mirrors (phase 4), one peer's message: ``agg[idx[k]] = vals[c]`` for the c-th
    flagged element k of the list."""
    d = agg.shape[1]
    c = 0
    for k in range(idx.shape[0]):
        if (bitmap[k >> 3] >> (k & 7)) & 1:
            r = idx[k]
            for j in range(d):
                agg[r, j] = vals[c, j]
            c += 1


@numba.njit(cache=True, nogil=True)
def assemble(z, agg, cached, out):
    """The synchronised rows: the cached aggregate where ``cached[r]``, else ``z``."""
    n, d = z.shape
    for r in range(n):
        if cached[r]:
            for j in range(d):
                out[r, j] = agg[r, j]
        else:
            for j in range(d):
                out[r, j] = z[r, j]
