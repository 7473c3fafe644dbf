"""Fused numba kernels of the stochastic b-bit codec (Sylvie eqs. 3-5), one pass each way.

``encode_rows``: ``q = floor((h - lo) * inv + u)`` clamped to ``[0, 2^b - 1]``, packed
low bits first, ``8 / b`` values per byte; ``u`` is uniform on ``[0, 1)`` with 24
random bits, drawn by a counter-based generator (one splitmix64 of ``seed + row
* ceil(d / 2) + j // 2`` gives the two 24-bit draws of elements ``j`` and ``j + 1``),
so the result depends only on the seed, not on the order of work.
``decode_rows``: ``lo + q * scale`` in float32 (multiply, then add: the same
operations as the torch reference). Both release the GIL (thread-backend ranks run
them concurrently). Imported lazily by :mod:`cdfgnn.comm.codecs`.
"""
from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_U24 = np.float32(1.0 / (1 << 24))


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(counter):
    """splitmix64 of a counter: 64 random bits, two 24-bit uniforms per call."""
    z = counter * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, fastmath=True)
def row_min_max(x, lo, hi):
    """Per-row minimum and maximum of float32 ``x`` [n, d >= 1] (vectorised by LLVM;
    ``fastmath``: rows holding NaN give unspecified bounds)."""
    n, d = x.shape
    for i in range(n):
        a = x[i, 0]
        b = x[i, 0]
        for j in range(1, d):
            v = x[i, j]
            a = min(a, v)
            b = max(b, v)
        lo[i] = a
        hi[i] = b


@numba.njit(cache=True, nogil=True)
def encode_rows(x, lo, inv, bits, seed, out):
    """x float32 [n, d]; lo, inv float32 [n]; out uint8 [n, ceil(b d / 8)] (may be a view)."""
    n, d = x.shape
    per = 8 // bits
    levels = np.int64((1 << bits) - 1)
    nbytes = out.shape[1]
    base = np.uint64(seed)
    pairs = np.uint64((d + 1) // 2)
    mask24 = np.uint64(0xFFFFFF)
    z = np.uint64(0)
    for i in range(n):
        lo_i = lo[i]
        inv_i = inv[i]
        row = base + np.uint64(i) * pairs
        for b in range(nbytes):
            byte = 0
            j0 = b * per
            for k in range(per):
                j = j0 + k
                if j < d:
                    if j & 1 == 0:  # one splitmix64 call feeds two elements
                        z = _mix(row + np.uint64(j >> 1))
                        u = np.float32(z >> np.uint64(40)) * _U24
                    else:
                        u = np.float32((z >> np.uint64(16)) & mask24) * _U24
                    # (x - lo) >= 0 (lo is rounded down), so truncation is floor
                    q = np.int64((x[i, j] - lo_i) * inv_i + u)
                    if q > levels:
                        q = levels
                    byte |= q << (k * bits)
            out[i, b] = byte


@numba.njit(cache=True, nogil=True)
def decode_rows(packed, lo, scale, bits, out):
    """packed uint8 [n, ceil(b d / 8)] (may be a view); out float32 [n, d]."""
    n, d = out.shape
    shift = 3 if bits == 1 else 2 if bits == 2 else 1 if bits == 4 else 0  # log2(8 / bits)
    low = (1 << shift) - 1
    mask = np.uint8((1 << bits) - 1)
    for i in range(n):
        lo_i = lo[i]
        s_i = scale[i]
        row = packed[i]
        o = out[i]
        for j in range(d):
            q = (row[j >> shift] >> np.uint8((j & low) * bits)) & mask
            o[j] = np.float32(q) * s_i + lo_i
