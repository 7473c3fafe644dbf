"""``exact``: the vanilla full exchange (every boundary row, every sync, full precision).

Edge-cut: halo activations forward, halo gradients backward. Vertex-cut: CDFGNN's
"Baseline" (gather partial sums to masters, scatter back, in both directions).
Distributed training with this method equals one-process full-graph training to
float tolerance (tests/test_exactness.py).
"""
from __future__ import annotations

from cdfgnn.methods.base import METHODS, Degenerate, SyncStrategy


@METHODS.register("exact")
class Exact(SyncStrategy):
    name = "exact"
    degenerate = Degenerate({})
    #: every buffer follows the rows it is handed (clone, index_add_, new_zeros)
    supported_devices = ("cpu", "cuda")
    supported_dtypes = ("float32", "float64")

    def count_key(self, epoch: int):
        """Every pass issues the same kernels on the same shapes (the rows it sends
        follow the partition, never values): one key."""
        return ()

