"""Counter-based dropout: the mask of (vertex, feature) depends only on
(seed, epoch, layer, global vertex id, feature), never on which rank holds the row.

Why: replicas of a vertex on different ranks (vertex-cut mirrors) must drop the
same features, and a distributed run must drop exactly what the one-process
oracle drops, so that exactness holds with dropout > 0 too.
"""
from __future__ import annotations

import math

import torch

_M32 = 0xFFFFFFFF
_CHUNK_ROWS = 65536  # bounds the int64 work buffer of a mask to 8 * 64k * F bytes


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """lowbias32 avalanche, in place; values stay < 2**32 so int64 products never overflow."""
    h.bitwise_xor_(h >> 16)
    h.mul_(0x7FEB352D).bitwise_and_(_M32)
    h.bitwise_xor_(h >> 15)
    h.mul_(0x846CA68B).bitwise_and_(_M32)
    h.bitwise_xor_(h >> 16)
    return h


def dropout_mask(global_ids: torch.Tensor, num_features: int, p: float, key: int) -> torch.Tensor:
    """Float mask [len(global_ids), F] with entries 0 or 1/(1-p)."""
    salt = int(_mix32(torch.tensor([key & _M32], dtype=torch.int64))[0])
    rows = _mix32((global_ids.to(torch.int64) & _M32) ^ salt)
    cols = _mix32(torch.arange(num_features, dtype=torch.int64).mul_(0x9E3779B1)
                  .bitwise_and_(_M32))
    threshold = math.ceil(p * 2.0 ** 32)  # integer h >= p * 2**32  <=>  h >= ceil(p * 2**32)
    out = torch.empty(rows.shape[0], num_features, dtype=torch.float32)
    for start in range(0, rows.shape[0], _CHUNK_ROWS):
        h = rows[start: start + _CHUNK_ROWS, None] * 31 + cols[None, :]
        keep = _mix32(h.bitwise_and_(_M32)) >= threshold
        torch.mul(keep, 1.0 / (1.0 - p), out=out[start: start + _CHUNK_ROWS])
    return out


def dropout_key(seed: int, epoch: int, layer: int) -> int:
    return (seed * 1_000_003 + epoch * 7919 + layer * 104_729) & _M32
