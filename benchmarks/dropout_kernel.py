"""Dropout kernels on one core (issue 13): forward and forward + backward of

  * ``tensor-passes``: the version-1 hash as int64 tensor passes + a float mask
    (the implementation before issue 13, kept as ``dropout.reference_mask``);
  * ``fused``: :func:`cdfgnn.models.dropout.dropout` (numba, one pass, backward
    recomputes the mask on the gradient);
  * ``fused+bitmask``: the same forward also writing a packed bit mask that the
    backward reads instead of rehashing (the alternative the issue asks to measure);
  * ``torch``: ``torch.nn.functional.dropout`` (not rank-independent; the yardstick).

Usage: python benchmarks/dropout_kernel.py [--rows 50000] [--features 128] [--repeat 20]
"""
from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np
import torch
import torch.nn.functional as F

from cdfgnn.models import dropout as D


@numba.njit(cache=True, nogil=True)
def _apply_bits(x, ids, key, threshold, scale, out, bits):
    """Fused forward that also records the keep bits (row-major, 8 per byte)."""
    n, f = x.shape
    salt = D._mix32(np.uint32(key))
    cols = D._column_hashes(f)
    s = x.dtype.type(scale)
    zero = x.dtype.type(0)
    keep = np.zeros(bits.shape[1] * 8, dtype=np.uint8)
    for i in range(n):
        r = D._mix32(np.uint32(np.uint32(ids[i] & 0xFFFFFFFF) ^ salt))
        r31 = np.uint32(r * np.uint32(31))
        for j in range(f):  # vectorisable: hash, apply, keep flag
            k = np.int64(D._mix32(np.uint32(r31 + cols[j]))) >= threshold
            out[i, j] = x[i, j] * s if k else zero
            keep[j] = np.uint8(k)
        for b in range(bits.shape[1]):
            byte = np.uint8(0)
            for t in range(8):
                byte |= np.uint8(keep[b * 8 + t] << t)
            bits[i, b] = byte


@numba.njit(cache=True, nogil=True)
def _apply_from_bits(g, bits, scale, out):
    n, f = g.shape
    s = g.dtype.type(scale)
    zero = g.dtype.type(0)
    keep = np.empty(bits.shape[1] * 8, dtype=np.uint8)
    for i in range(n):
        for b in range(bits.shape[1]):
            byte = bits[i, b]
            for t in range(8):
                keep[b * 8 + t] = (byte >> t) & np.uint8(1)
        for j in range(f):
            out[i, j] = g[i, j] * s if keep[j] else zero


class _BitmaskDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ids, p, key):
        x = x.detach().contiguous()
        out = torch.empty_like(x)
        bits = np.empty((x.shape[0], (x.shape[1] + 7) // 8), dtype=np.uint8)
        _apply_bits(x.numpy(), D._ids(ids), key & D._M32, D._threshold(p), D._scale(p),
                    out.numpy(), bits)
        ctx.bits, ctx.p = bits, p
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        out = torch.empty_like(grad)
        _apply_from_bits(grad.numpy(), ctx.bits, D._scale(ctx.p), out.numpy())
        return out, None, None, None


def _time(fn, repeat: int) -> tuple[float, float]:
    """(median, min) seconds; on a shared machine the minimum is the steadier estimate."""
    fn()  # warm-up (compilation, allocator)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(np.min(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--p", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    n, f, p = args.rows, args.features, args.p
    gen = torch.Generator().manual_seed(0)
    ids = torch.randperm(4 * n, generator=gen)[:n]
    x = torch.randn(n, f, generator=gen)
    key = D.dropout_key(0, 3, 1)
    D.warm_up()

    # the fused kernels must equal the reference before they are timed
    ref = x * D.reference_mask(ids, f, p, key)
    assert torch.equal(D.dropout(x, ids, p, key), ref)
    assert torch.equal(_BitmaskDropout.apply(x, ids, p, key), ref)

    xg = x.clone().requires_grad_(True)
    grad = torch.randn(n, f, generator=gen)

    def fwd_bwd(op):
        def run():
            xg.grad = None
            op(xg).backward(grad)
        return run

    ops = {
        "tensor-passes": lambda t: t * D.reference_mask(ids, f, p, key),
        "fused": lambda t: D.dropout(t, ids, p, key),
        "fused+bitmask": lambda t: _BitmaskDropout.apply(t, ids, p, key),
        "torch": lambda t: F.dropout(t, p, training=True),
    }
    rows = {}
    w = torch.randn(f, f, generator=gen)
    mm = _time(lambda: x @ w, args.repeat)
    print(f"{n} x {f}, p = {p}, one thread; ms as median (min) of {args.repeat}")
    print(f"  (dense [{n} x {f}] @ [{f} x {f}] for scale: {mm[0] * 1e3:.1f} ({mm[1] * 1e3:.1f}))")
    print(f"  {'kernel':16s} {'forward':>17s} {'forward+backward':>17s}")
    for name, op in ops.items():
        t_f = _time(lambda: op(x), args.repeat)
        t_fb = _time(fwd_bwd(op), args.repeat)
        rows[name] = {"forward_ms": t_f[0] * 1e3, "forward_min_ms": t_f[1] * 1e3,
                      "forward_backward_ms": t_fb[0] * 1e3,
                      "forward_backward_min_ms": t_fb[1] * 1e3}
        print(f"  {name:16s} {t_f[0] * 1e3:8.1f} ({t_f[1] * 1e3:6.1f}) "
              f"{t_fb[0] * 1e3:8.1f} ({t_fb[1] * 1e3:6.1f})")
    rows["dense_mm_ms"], rows["dense_mm_min_ms"] = mm[0] * 1e3, mm[1] * 1e3
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
