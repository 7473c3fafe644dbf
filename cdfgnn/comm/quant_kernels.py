"""Fused numba kernels of the row quantisers of :mod:`cdfgnn.comm.codecs`, one pass each way.

Both codec families share one wire row: metadata bytes, then the ``B``-bit codes packed
low bits first (element ``j`` in byte ``j B / 8`` at bit ``(j B) mod 8``).

``encode_rows`` does, per row and while the row is in L1: the minimum and maximum, the
metadata (written into the wire row), then quantise and pack straight into the wire row
(codes narrower than a byte: 8 at a time, gathered from one uint64 by shift-or):

* ``mode`` 0, ``linear-B`` (CDFGNN): metadata ``min, max`` as float32;
  ``q = min(floor((h - min) * (inv * (2^B - 1)) + 0.5), 2^B - 1)`` with
  ``inv = 1 / (max - min)`` (0 for a constant row).
* ``mode`` 1, ``linear-B-midrise``: ``q = min(floor((h - min) * (inv * 2^B)), 2^B - 1)``.
* ``mode`` 2, ``stochastic-b`` (Sylvie eqs. 3-5): metadata float16 ``lo`` (the largest
  float16 <= min) and ``scale`` (the smallest float16 >= (max - lo) / (2^b - 1));
  ``q = min(floor((h - lo) * inv + u), 2^b - 1)``, ``inv = 1 / scale`` (0 if 0) and
  ``u`` uniform on [0, 1) with 24 random bits: ``_LANES`` xorshift128+ streams, seeded
  once per call by splitmix64 of ``seed + k``, are stepped together (LLVM vectorises the
  step); each 64-bit draw gives the uniform of element ``t`` (bits 40-63) and of element
  ``t + ceil(d / 2)`` (bits 16-39). Rows are drawn in order, so the result depends only
  on the seed.

Every float operation is the one of the torch reference in ``codecs.py`` in the same
order, in float32 (no FMA contraction), so the linear kernels equal the reference bit
for bit and the stochastic metadata equals it too. ``decode_rows`` reconstructs in
float32: ``code * step + min`` (linear, ``step = (max - min) / (2^B - 1)``),
``(code + 1/2) * step + min`` (midrise, ``step = (max - min) / 2^B``, constant rows give
``min``), ``code * scale + lo`` (stochastic). All kernels release the GIL (thread-backend
ranks run them concurrently) and run on the calling thread only (no numba
parallelism). Imported lazily by :mod:`cdfgnn.comm.codecs`.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_U24 = np.float32(1.0 / (1 << 24))
# min/max reductions vectorise with these; no "contract" (FMA) and no "arcp"/"afn"
# anywhere, so every float result is the correctly rounded float32 one
_MINMAX_FLAGS = {"nnan", "ninf", "nsz"}

LINEAR, MIDRISE, STOCHASTIC = 0, 1, 2
_LANES = 16  # independent xorshift128+ streams stepped together (vectorised by LLVM)
_KW = dict(cache=True, nogil=True, boundscheck=False)


@intrinsic
def _f32_bits(typingctx, x):
    """The IEEE bits of a float32 as uint32."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, b):
    """The float32 whose IEEE bits are the uint32 ``b``."""
    if b != types.uint32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@numba.njit(inline="always", **_KW)
def _mix(counter):
    """splitmix64 of a counter: 64 random bits."""
    z = counter * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


# ------------------------------------------------------------------ float16 metadata
@numba.njit(**_KW)
def _f16_directed(x, up):
    """Bits of the largest float16 <= float32 ``x`` (``up`` False) or the smallest >= x
    (``up`` True): truncate the magnitude, then step it away from zero when inexact and
    the direction asks for it. Equal to torch's cast + ``nextafter`` (tested)."""
    b = np.int64(_f32_bits(x))
    sign = (b >> 16) & 0x8000
    e = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    if e == 0xFF:
        return sign | 0x7C00 | (0x200 if m else 0)
    ex = e - 112  # float16 biased exponent
    if ex >= 31:  # |x| >= 65536: beyond the largest finite float16 (65504)
        t = 0x7BFF
        inexact = True
    elif ex <= 0:  # float16 subnormal or zero
        if ex < -10:
            t = 0
            inexact = (b & 0x7FFFFFFF) != 0
        else:
            mm = m | 0x800000
            shift = 14 - ex
            t = mm >> shift
            inexact = (mm & ((1 << shift) - 1)) != 0
    else:
        t = (ex << 10) | (m >> 13)
        inexact = (m & 0x1FFF) != 0
    if inexact and (up != (sign != 0)):
        t += 1  # 0x7BFF + 1 is inf, the right answer above 65504
    return sign | t


@numba.njit(**_KW)
def f16_down(x):
    """Bits of the largest float16 <= float32 ``x`` (torch: cast, then nextafter down)."""
    return _f16_directed(x, False)


@numba.njit(**_KW)
def f16_up(x):
    """Bits of the smallest float16 >= float32 ``x``."""
    return _f16_directed(x, True)


@numba.njit(**_KW)
def f16_value(h):
    """The float16 with bits ``h`` as a float32 (exact)."""
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        v = np.float32(m) * np.float32(2.0 ** -24)
        return -v if h & 0x8000 else v
    ex = 255 if e == 31 else e + 112
    return _bits_f32(np.uint32(((h & 0x8000) << 16) | (ex << 23) | (m << 13)))


# ------------------------------------------------------------------ encode
@numba.njit(fastmath=_MINMAX_FLAGS, **_KW)
def _row_min_max(xi):
    a = xi[0]
    b = xi[0]
    for j in range(1, xi.shape[0]):
        v = xi[j]
        a = min(a, v)
        b = max(b, v)
    return a, b


@numba.njit(**_KW)
def _put_u32(o, at, v):
    """Write uint32 ``v`` at ``o[at:at + 4]``, little endian."""
    for k in range(4):
        o[at + k] = np.uint8((v >> np.uint32(8 * k)) & np.uint32(0xFF))


@numba.njit(**_KW)
def _get_u32(o, at):
    v = np.uint32(0)
    for k in range(4):
        v |= np.uint32(np.uint32(o[at + k]) << np.uint32(8 * k))
    return np.uint32(v)


@numba.njit(inline="always", **_KW)
def _pack_consts(bits):
    """Shifts and masks of the shift-or (un)packing of 8 byte-wide codes of ``bits`` < 8
    bits held in one uint64 (dummies for 8 and 16 bits, which need none)."""
    b = bits if bits < 8 else 1
    return (np.uint64(8 - b), np.uint64(16 - 2 * b), np.uint64(32 - 4 * b),
            np.uint64((1 << b) - 1) * np.uint64(0x0101010101010101),
            np.uint64((1 << (2 * b)) - 1) * np.uint64(0x0001000100010001),
            np.uint64((1 << (4 * b)) - 1) * np.uint64(0x0000000100000001),
            np.uint64((1 << (8 * b)) - 1))


@numba.njit(inline="always", **_KW)
def _gather8(w, pk):
    """8 byte-wide codes of ``b`` bits in ``w`` -> their ``8 b`` packed bits, low code
    first: shift-or in three halvings (``pk`` from :func:`_pack_consts`)."""
    s1, s2, s3, m0, m1, m2, top = pk
    w = (w | (w >> s1)) & m1
    w = (w | (w >> s2)) & m2
    return (w | (w >> s3)) & top


@numba.njit(inline="always", **_KW)
def _spread8(w, pk):
    """Inverse of :func:`_gather8`."""
    s1, s2, s3, m0, m1, m2, top = pk
    w = (w | (w << s3)) & m2
    w = (w | (w << s2)) & m1
    return (w | (w << s1)) & m0


@numba.njit(**_KW)
def _scratch(d):
    """A zeroed row of byte-wide codes padded to whole uint64 words, and its uint8 view."""
    q64 = np.zeros((d + 7) // 8, dtype=np.uint64)
    return q64, q64.view(np.uint8)


@numba.njit(inline="always", **_KW)
def _uniforms(xs, u):
    """Fill ``u`` [d] with uniforms on [0, 1) of 24 random bits from ``_LANES``
    xorshift128+ streams. ``xs`` holds the streams' state sequences, lane ``k`` at step
    ``c`` in ``xs[c * _LANES + k]``: steps 0 and 1 on entry (the two state words), the
    recurrence ``x[c + 2] = f(x[c], x[c + 1])`` fills the rest (a single array with a
    fixed dependence distance, so LLVM vectorises it), draw ``t`` is
    ``xs[t] + xs[t + _LANES]`` (xorshift128+'s output), and the last two steps move to
    the front for the next call. Draw ``t`` gives the uniform of element ``t`` (bits
    40-63) and of element ``t + ceil(d / 2)`` (bits 16-39)."""
    d = u.shape[0]
    half = (d + 1) // 2
    end = xs.shape[0]
    for m in range(end - 2 * _LANES):
        a = xs[m]
        b = xs[m + _LANES]
        a ^= a << np.uint64(23)
        xs[m + 2 * _LANES] = a ^ b ^ (a >> np.uint64(18)) ^ (b >> np.uint64(5))
    mask24 = np.uint64(0xFFFFFF)
    for t in range(d - half):
        z = xs[t] + xs[t + _LANES]
        u[t] = np.float32(np.int32(z >> np.uint64(40))) * _U24
        u[t + half] = np.float32(np.int32((z >> np.uint64(16)) & mask24)) * _U24
    if d & 1:
        z = xs[half - 1] + xs[half - 1 + _LANES]
        u[half - 1] = np.float32(np.int32(z >> np.uint64(40))) * _U24
    for m in range(2 * _LANES):
        xs[m] = xs[end - 2 * _LANES + m]


@numba.njit(**_KW)
def encode_rows(x, out, bits, mode, seed):
    """x float32 [n, d >= 1] (C-contiguous); out uint8 [n, meta + ceil(bits d / 8)],
    filled with the wire rows. ``mode``: LINEAR, MIDRISE or STOCHASTIC; ``seed``: the
    stochastic codec's counter base (ignored by the linear ones)."""
    n, d = x.shape
    levels = np.int32((1 << bits) - 1)
    meta = 4 if mode == STOCHASTIC else 8
    nbytes = out.shape[1] - meta
    groups = (d + 7) // 8                 # 8 codes per uint64 word (bits < 8)
    q64, q8 = _scratch(d)                 # codes (bits < 8); padding stays 0
    pk = _pack_consts(bits)
    u = np.empty(d, dtype=np.float32)     # the addend: 0.5, 0 or the uniform draws
    if mode != STOCHASTIC:
        u[:] = np.float32(0.5) if mode == LINEAR else np.float32(0.0)
    half = (d + 1) // 2                   # 64-bit draws per row (two uniforms each)
    ndraw = -(-half // _LANES) * _LANES
    xs = np.empty(ndraw + 2 * _LANES, dtype=np.uint64)  # xorshift128+ lane states
    for k in range(2 * _LANES):
        xs[k] = _mix(np.uint64(seed) + np.uint64(k))
    for i in range(n):
        xi = x[i]
        oi = out[i]
        mn, mx = _row_min_max(xi)
        if mode == STOCHASTIC:
            h_lo = f16_down(mn)
            lo = np.float32(f16_value(h_lo))
            h_sc = f16_up(np.float32(np.float32(mx - lo) / np.float32(levels)))
            sc = np.float32(f16_value(h_sc))
            s = np.float32(np.float32(1.0) / sc) if sc > 0 else np.float32(0.0)
            oi[0] = np.uint8(h_lo & 0xFF)
            oi[1] = np.uint8(h_lo >> 8)
            oi[2] = np.uint8(h_sc & 0xFF)
            oi[3] = np.uint8(h_sc >> 8)
            _uniforms(xs, u)
        else:
            lo = mn
            span = np.float32(mx - mn)
            inv = np.float32(np.float32(1.0) / span) if span > 0 else np.float32(0.0)
            s = np.float32(inv * np.float32(levels if mode == LINEAR else levels + 1))
            _put_u32(oi, 0, _f32_bits(mn))
            _put_u32(oi, 4, _f32_bits(mx))
        # quantise ((h - lo) >= 0: truncation is floor) and pack into the wire row
        if bits == 16:
            for j in range(d):
                q = min(np.int32((xi[j] - lo) * s + u[j]), levels)
                oi[meta + 2 * j] = np.uint8(q & 0xFF)
                oi[meta + 2 * j + 1] = np.uint8(q >> 8)
            continue
        if bits == 8:
            for j in range(d):
                oi[meta + j] = np.uint8(min(np.int32((xi[j] - lo) * s + u[j]), levels))
            continue
        for j in range(d):
            q8[j] = np.uint8(min(np.int32((xi[j] - lo) * s + u[j]), levels))
        # 8 codes -> ``bits`` bytes, low code first (the last group may hold fewer bytes)
        nfull = nbytes // bits
        if bits == 1:
            for g in range(nfull):
                oi[meta + g] = np.uint8(_gather8(q64[g], pk))
        elif bits == 2:
            for g in range(nfull):
                w = _gather8(q64[g], pk)
                oi[meta + 2 * g] = np.uint8(w & np.uint64(0xFF))
                oi[meta + 2 * g + 1] = np.uint8(w >> np.uint64(8))
        else:
            for g in range(nfull):
                w = _gather8(q64[g], pk)
                _put_u32(oi, meta + 4 * g, np.uint32(w))
        if nfull < groups:
            w = _gather8(q64[nfull], pk)
            for k in range(nbytes - nfull * bits):
                oi[meta + nfull * bits + k] = np.uint8((w >> np.uint64(8 * k)) & np.uint64(0xFF))


# ------------------------------------------------------------------ decode
@numba.njit(**_KW)
def decode_rows(wire, bits, mode, out):
    """wire uint8 [n, meta + ceil(bits d / 8)]; out float32 [n, d] (filled)."""
    n, d = out.shape
    meta = 4 if mode == STOCHASTIC else 8
    nbytes = wire.shape[1] - meta
    levels = (1 << bits) - 1
    groups = (d + 7) // 8
    q64, q8 = _scratch(d)
    pk = _pack_consts(bits)
    for i in range(n):
        wi = wire[i]
        oi = out[i]
        if mode == STOCHASTIC:
            lo = np.float32(f16_value(np.int64(wi[0]) | (np.int64(wi[1]) << 8)))
            step = np.float32(f16_value(np.int64(wi[2]) | (np.int64(wi[3]) << 8)))
            off = np.float32(0.0)
        else:
            lo = _bits_f32(_get_u32(wi, 0))
            hi = _bits_f32(_get_u32(wi, 4))
            step = np.float32(np.float32(hi - lo) / np.float32(levels if mode == LINEAR
                                                               else levels + 1))
            off = np.float32(0.5) if mode == MIDRISE else np.float32(0.0)
            if mode == MIDRISE and not hi > lo:
                oi[:] = lo
                continue
        if bits == 16:
            for j in range(d):
                q = np.int32(wi[meta + 2 * j]) | (np.int32(wi[meta + 2 * j + 1]) << 8)
                oi[j] = (np.float32(q) + off) * step + lo
            continue
        if bits == 8:
            for j in range(d):
                oi[j] = (np.float32(wi[meta + j]) + off) * step + lo
            continue
        nfull = nbytes // bits            # ``bits`` bytes -> 8 byte-wide codes
        if bits == 1:
            for g in range(nfull):
                q64[g] = _spread8(np.uint64(wi[meta + g]), pk)
        elif bits == 2:
            for g in range(nfull):
                w = np.uint64(wi[meta + 2 * g]) | (np.uint64(wi[meta + 2 * g + 1]) << np.uint64(8))
                q64[g] = _spread8(w, pk)
        else:
            for g in range(nfull):
                q64[g] = _spread8(np.uint64(_get_u32(wi, meta + 4 * g)), pk)
        if nfull < groups:
            w = np.uint64(0)
            for k in range(nbytes - nfull * bits):
                w |= np.uint64(wi[meta + nfull * bits + k]) << np.uint64(8 * k)
            q64[nfull] = _spread8(w, pk)
        for j in range(d):
            oi[j] = (np.float32(q8[j]) + off) * step + lo
