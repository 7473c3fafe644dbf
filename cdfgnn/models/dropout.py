"""Counter-based dropout: the mask of (vertex, feature) depends only on
(seed, epoch, layer, global vertex id, feature), never on which rank holds the row.

Why: replicas of a vertex on different ranks (vertex-cut mirrors) must drop the
same features, and a distributed run must drop exactly what the one-process
oracle drops, so that exactness holds with dropout > 0 too.

The hash (version :data:`DROPOUT_VERSION`) of entry ``(v, f)`` under key ``k``::

    salt = mix32(k);  r = mix32(v ^ salt);  c = mix32(f * 0x9E3779B1)
    keep  <=>  mix32(r * 31 + c) >= ceil(p * 2**32)      (all arithmetic mod 2**32)

with ``mix32`` the lowbias32 avalanche. :func:`dropout` computes the hash and
applies it in one fused pass (numba, one thread, no float mask); its backward
recomputes the mask on the gradient (measured faster than storing a bit mask:
see benchmarks/epoch_breakdown.py and the issue 13 note). Any change to the hash
must bump :data:`DROPOUT_VERSION`, which every run record carries
(``model.dropout_version``), so that runs of different masks are never mixed.
"""
from __future__ import annotations

import math

import numba
import numpy as np
import torch

#: version of the mask hash; recorded in every run record as ``model.dropout_version``
DROPOUT_VERSION = 1

_M32 = 0xFFFFFFFF
_C1 = np.uint32(0x7FEB352D)
_C2 = np.uint32(0x846CA68B)
_GOLDEN = np.uint32(0x9E3779B1)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix32(h):
    """lowbias32 avalanche of a uint32."""
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * _C1)
    h = np.uint32(h ^ (h >> np.uint32(15)))
    h = np.uint32(h * _C2)
    return np.uint32(h ^ (h >> np.uint32(16)))


@numba.njit(cache=True, nogil=True)
def _column_hashes(num_features):
    cols = np.empty(num_features, dtype=np.uint32)
    for j in range(num_features):
        cols[j] = _mix32(np.uint32(np.uint32(j) * _GOLDEN))
    return cols


@numba.njit(cache=True, nogil=True)
def _apply(x, ids, key, threshold, scale, out):
    """``out = x * scale`` where kept, 0 where dropped (x, out: C-contiguous [n, F])."""
    n, f = x.shape
    salt = _mix32(np.uint32(key))
    cols = _column_hashes(f)
    zero = x.dtype.type(0)
    s = x.dtype.type(scale)
    for i in range(n):
        r = _mix32(np.uint32(np.uint32(ids[i] & 0xFFFFFFFF) ^ salt))
        r31 = np.uint32(r * np.uint32(31))
        for j in range(f):
            h = _mix32(np.uint32(r31 + cols[j]))
            out[i, j] = x[i, j] * s if np.int64(h) >= threshold else zero


def _threshold(p: float) -> int:
    # integer h >= p * 2**32  <=>  h >= ceil(p * 2**32)
    return math.ceil(p * 2.0 ** 32)


def _scale(p: float) -> float:
    # the float32 value of 1/(1-p), whatever the tensor's dtype (as the version-1 float mask)
    return float(np.float32(1.0 / (1.0 - p)))


def _ids(global_ids: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(global_ids.numpy(), dtype=np.int64)


def apply_mask(x: torch.Tensor, global_ids: torch.Tensor, p: float, key: int) -> torch.Tensor:
    """``x * mask`` in one pass, without autograd (also the backward of :func:`dropout`)."""
    if x.dim() != 2 or x.shape[0] != global_ids.shape[0]:
        raise ValueError(f"dropout needs [rows, F] with one global id per row, got "
                         f"{tuple(x.shape)} and {tuple(global_ids.shape)} ids")
    if x.device.type != "cpu":  # the kernel is CPU code; same mask by tensor passes
        return x * reference_mask(global_ids.to(x.device), x.shape[1], p, key).to(x.dtype)
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel():
        _apply(x.numpy(), _ids(global_ids), key & _M32, _threshold(p), _scale(p), out.numpy())
    return out


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, global_ids, p, key):
        ctx.ids, ctx.p, ctx.key = global_ids, p, key
        return apply_mask(x.detach(), global_ids, p, key)

    @staticmethod
    def backward(ctx, grad):
        # the same mask, recomputed on the gradient: d(x * m)/dx = m
        return apply_mask(grad, ctx.ids, ctx.p, ctx.key), None, None, None


def dropout(x: torch.Tensor, global_ids: torch.Tensor, p: float, key: int) -> torch.Tensor:
    """Counter-based dropout of ``x`` ([rows, F], row ``i`` = global vertex ``global_ids[i]``)."""
    if p <= 0.0:
        return x
    if x.requires_grad and torch.is_grad_enabled():
        return _Dropout.apply(x, global_ids, p, key)
    return apply_mask(x, global_ids, p, key)


def dropout_mask(global_ids: torch.Tensor, num_features: int, p: float, key: int) -> torch.Tensor:
    """Float mask [len(global_ids), F] with entries 0 or 1/(1-p) (reference; tests)."""
    return apply_mask(torch.ones(global_ids.shape[0], num_features), global_ids, p, key)


def reference_mask(global_ids: torch.Tensor, num_features: int, p: float, key: int,
                   ) -> torch.Tensor:
    """The same float mask by plain int64 tensor passes (the pre-numba implementation):
    an independent reference of the version-1 hash for tests and benchmarks."""
    def mix(h: torch.Tensor) -> torch.Tensor:
        h.bitwise_xor_(h >> 16)
        h.mul_(0x7FEB352D).bitwise_and_(_M32)
        h.bitwise_xor_(h >> 15)
        h.mul_(0x846CA68B).bitwise_and_(_M32)
        return h.bitwise_xor_(h >> 16)

    salt = int(mix(torch.tensor([key & _M32], dtype=torch.int64))[0])
    rows = mix((global_ids.to(torch.int64) & _M32) ^ salt)
    cols = torch.arange(num_features, dtype=torch.int64, device=global_ids.device)
    cols = mix(cols.mul_(0x9E3779B1).bitwise_and_(_M32))
    h = mix((rows[:, None] * 31 + cols[None, :]).bitwise_and_(_M32))
    return (h >= _threshold(p)).to(torch.float32) * _scale(p)


def warm_up() -> None:
    """Load (or compile) the kernels now, not inside a timed epoch: the overloads
    :func:`apply_mask` calls (float32 and float64 rows, int64 ids), on numpy arrays, so
    that no torch operation runs (the process backend's forkserver warms them up before
    it forks ranks: cdfgnn/train/rank_preload.py)."""
    ids = np.arange(2, dtype=np.int64)
    for dtype in (np.float32, np.float64):
        x = np.ones((2, 2), dtype=dtype)
        _apply(x, ids, 1, _threshold(0.5), _scale(0.5), np.empty_like(x))


def dropout_key(seed: int, epoch: int, layer: int) -> int:
    return (seed * 1_000_003 + epoch * 7919 + layer * 104_729) & _M32
