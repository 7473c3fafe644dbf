"""Fused numba kernels of the stochastic b-bit codec (Sylvie eqs. 3-5), one pass each way.

``encode_rows``: ``q = floor((h - lo) * inv + u)`` clamped to ``[0, 2^b - 1]``, packed
low bits first, ``8 / b`` values per byte; ``u`` is uniform on ``[0, 1)`` with 24
random bits, drawn by a counter-based generator (splitmix64 of ``seed + element
index``), so the result depends only on the seed, not on the order of work.
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
def _uniform(counter):
    z = counter * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z = z ^ (z >> np.uint64(31))
    return np.float32(z >> np.uint64(40)) * _U24


@numba.njit(cache=True, nogil=True)
def encode_rows(x, lo, inv, bits, seed, out):
    """x float32 [n, d]; lo, inv float32 [n]; out uint8 [n, ceil(b d / 8)] (may be a view)."""
    n, d = x.shape
    per = 8 // bits
    levels = np.float32((1 << bits) - 1)
    nbytes = out.shape[1]
    base = np.uint64(seed)
    for i in range(n):
        lo_i = lo[i]
        inv_i = inv[i]
        row = base + np.uint64(i) * np.uint64(d)
        for b in range(nbytes):
            byte = 0
            j0 = b * per
            for k in range(per):
                j = j0 + k
                if j < d:
                    v = (x[i, j] - lo_i) * inv_i + _uniform(row + np.uint64(j))
                    q = np.floor(v)
                    if q < 0:
                        q = np.float32(0.0)
                    elif q > levels:
                        q = levels
                    byte |= np.int64(q) << (k * bits)
            out[i, b] = byte


@numba.njit(cache=True, nogil=True)
def decode_rows(packed, lo, scale, bits, out):
    """packed uint8 [n, ceil(b d / 8)] (may be a view); out float32 [n, d]."""
    n, d = out.shape
    per = 8 // bits
    mask = (1 << bits) - 1
    for i in range(n):
        lo_i = lo[i]
        s_i = scale[i]
        for b in range(packed.shape[1]):
            byte = np.int64(packed[i, b])
            j0 = b * per
            for k in range(per):
                j = j0 + k
                if j < d:
                    out[i, j] = np.float32((byte >> (k * bits)) & mask) * s_i + lo_i
