"""Counter-based dropout: the mask of (vertex, feature) depends only on
(seed, epoch, layer, global vertex id, feature), never on which rank holds the row.

Why: replicas of a vertex on different ranks (vertex-cut mirrors) must drop the
same features, and a distributed run must drop exactly what the one-process
oracle drops, so that exactness holds with dropout > 0 too.
"""
from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF


def _mix32(h: torch.Tensor) -> torch.Tensor:
    # a 32-bit avalanche (lowbias32); values stay < 2**32 so int64 products never overflow
    h = h ^ (h >> 16)
    h = (h * 0x7FEB352D) & _M32
    h = h ^ (h >> 15)
    h = (h * 0x846CA68B) & _M32
    return h ^ (h >> 16)


def dropout_mask(global_ids: torch.Tensor, num_features: int, p: float, key: int) -> torch.Tensor:
    """Float mask [len(global_ids), F] with entries 0 or 1/(1-p)."""
    salt = _mix32(torch.tensor(key & _M32, dtype=torch.int64))
    rows = _mix32((global_ids.to(torch.int64) & _M32) ^ salt)
    cols = _mix32(torch.arange(num_features, dtype=torch.int64) * 0x9E3779B1 & _M32)
    h = _mix32((rows[:, None] * 31 + cols[None, :]) & _M32)
    keep = h.to(torch.float64) >= p * 4294967296.0
    return keep.to(torch.float32) / (1.0 - p)


def dropout_key(seed: int, epoch: int, layer: int) -> int:
    return (seed * 1_000_003 + epoch * 7919 + layer * 104_729) & _M32
