"""The adaptive cache's state per (layer, direction): what a rank last pushed and the
cached aggregate, as torch tensors and numpy views of the same memory (the numba kernels
of :mod:`cdfgnn.methods.cdfgnn_kernels` work on the views; the torch path of
:mod:`cdfgnn.methods.cdfgnn_cache_torch` on the tensors). A module of its own so that both
paths of :mod:`cdfgnn.methods.cdfgnn_cache` use it without importing each other."""
from __future__ import annotations

import torch


class CacheState:
    """Per (layer, direction): the last pushed contribution and the cached aggregate
    (torch tensors and numpy views of the same memory, for the kernels)."""

    __slots__ = ("pushed", "agg", "pushed_np", "agg_np")

    def __init__(self, rows: int, width: int, device: torch.device = torch.device("cpu")):
        self.pushed = torch.zeros(rows, width, device=device)
        self.agg = torch.zeros(rows, width, device=device)
        on_host = self.pushed.device.type == "cpu"   # the kernels' views: host state only
        self.pushed_np = self.pushed.numpy() if on_host else None
        self.agg_np = self.agg.numpy() if on_host else None
