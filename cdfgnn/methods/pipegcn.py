"""``pipegcn``: PipeGCN (Wan et al., ICLR 2022), a re-implementation.

Boundary communication is pipelined with computation: every training sync point
(halo activations forward, halo gradients backward) consumes the rows received at
the previous epoch, through the engine's shared stale exchange; the first epoch
consumes zeros (as Sylvie-A). Messages are float32 unless ``codec`` says otherwise.

``smoothing`` is PipeGCN's optional variants (-F features, -G gradients, -GF both):
the buffer consumed next epoch is the moving average
``s <- gamma s + (1 - gamma) fresh`` of the received rows instead of the rows
themselves (the first received rows start the average). Off by default, as in the
Sylvie comparison.
"""
from __future__ import annotations

from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy

SMOOTHING = {"none": (), "features": ("fwd",), "gradients": ("bwd",), "both": ("fwd", "bwd")}


@METHODS.register("pipegcn")
class PipeGCN(SyncStrategy):
    """Re-implementation: one-epoch-stale float32 boundary rows, overlapped."""

    name = "pipegcn"
    degenerate = Degenerate(None, reason=(
        "every training sync point consumes the rows of the previous epoch (zeros at "
        "epoch 0): no parameter makes it synchronous"))
    partition_kind = "edge"
    overlaps_compute = True
    #: the stale buffers are zeros_like / mul / add of the rows handed over: device-generic
    supported_devices = ("cpu", "cuda")
    supported_dtypes = ("float32", "float64")
    PARAMS = {
        "smoothing": Param("none", str, choices=tuple(SMOOTHING),
                           doc="moving average of stale features, gradients or both"),
        "gamma": Param(0.95, float, check=lambda g: 0.0 <= g < 1.0, expect="in [0, 1)",
                       doc="decay of the moving average"),
    }

    def setup(self, ctx) -> None:
        super().setup(ctx)
        self._started: set[str] = set()

    def stale(self, key: SyncKey) -> bool:
        return True

    def count_key(self, epoch: int):
        """Epoch 0 consumes zeros, epoch 1 starts the moving averages, later epochs
        update them: one key each, by ``min(epoch, 2)``."""
        return min(epoch, 2)

    def merge_stale(self, key: SyncKey, previous: list, fresh: list) -> list:
        if key.direction not in SMOOTHING[self.params["smoothing"]]:
            return fresh
        if key.tag not in self._started:  # the zeros of epoch 0 do not enter the average
            self._started.add(key.tag)
            return fresh
        g = self.params["gamma"]
        return [f if p is None or f is None else p.mul(g).add_(f, alpha=1.0 - g)
                for p, f in zip(previous, fresh)]
