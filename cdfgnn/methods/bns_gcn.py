"""``bns-gcn``: BNS-GCN (Wan et al., MLSys 2022), random boundary-node sampling; a
re-implementation.

Every training epoch each part keeps each of its halo (boundary) rows independently
with probability ``rate`` and drops the others: only kept rows are sent forward
(activations) and backward (gradients), at every layer of that epoch. The sample of
part ``i``'s halo rows owned by ``q`` is drawn from a generator seeded by (seed,
epoch, i, q), so owner and receiver draw the same sample without exchanging ids
(the ids the real system sends are a few bytes per row and are not modelled).

Scaling (``scaling``, not fixed by the papers; we choose): ``inverse-rate`` (default)
multiplies every kept halo row by ``1/rate`` on receipt (and its gradient by
``1/rate`` before it is returned, the adjoint) and keeps the global degrees, so the
aggregation is an unbiased estimate of the full one; ``none`` keeps kept rows as they
are (dropped neighbours count as 0). Dropped rows are zeros: the same as removing
their edges for GCN and GraphSAGE, with no per-epoch rebuild of the local graph.
``rate=1.0`` keeps every row with weight 1: the method is then ``exact``.
Evaluation uses the full graph (exact sync), as the engine does for every method.
"""
from __future__ import annotations

import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy


def _sample_seed(seed: int, epoch: int, receiver: int, sender: int) -> int:
    h = 1469598103934665603
    for v in (seed, epoch, receiver, sender):  # FNV-1a over the four integers
        h = ((h ^ (int(v) & 0xFFFFFFFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


@METHODS.register("bns-gcn")
class BNSGCN(SyncStrategy):
    """Re-implementation: a random ``rate`` of boundary rows per epoch, scaled 1/rate."""

    name = "bns-gcn"
    degenerate = Degenerate({"rate": 1.0})   # every boundary vertex sampled
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "edge"
    supported_models = ("gcn", "sage")   # GAT's edge softmax would need the sampled halo
    PARAMS = {
        "rate": Param(0.1, float, check=lambda r: 0.0 < r <= 1.0, expect="in (0, 1]",
                      doc="probability that a boundary row is kept in an epoch"),
        "scaling": Param("inverse-rate", str, choices=("inverse-rate", "none"),
                         doc="weight of a kept boundary row: 1/rate (unbiased) or 1"),
    }

    def setup(self, ctx) -> None:
        super().setup(ctx)
        self._keep_recv: list[torch.Tensor] = []
        self._keep_send: list[torch.Tensor] = []
        self._sampled_epoch = -1

    # ------------------------------------------------------------ sampling
    def _mask(self, n: int, receiver: int, sender: int) -> torch.Tensor:
        """The kept boundary rows of one (receiver, sender) pair this epoch, on the CPU:
        drawn by a CPU generator, so the same rows are kept on every device (one bool a
        row; the engine's copy to the run's device is in ``on_epoch_start``)."""
        if n == 0:
            return torch.zeros(0, dtype=torch.bool)
        g = torch.Generator().manual_seed(_sample_seed(self.ctx.seed, self.epoch, receiver, sender))
        return torch.rand(n, generator=g) < self.params["rate"]

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        if self._sampled_epoch == epoch:
            return
        me = self.ctx.part
        keep_recv = [self._mask(len(i), me, q) for q, i in enumerate(self.book.recv_idx)]
        keep_send = [self._mask(len(i), q, me) for q, i in enumerate(self.book.send_idx)]
        self._lists = ([i[k.numpy()] for i, k in zip(self.book.send_idx, keep_send)],
                       [i[k.numpy()] for i, k in zip(self.book.recv_idx, keep_recv)])
        # the masks select rows of tensors on the run's device: they live there too
        self._keep_recv = [k.to(self.device) for k in keep_recv]
        self._keep_send = [k.to(self.device) for k in keep_send]
        self._sampled_epoch = epoch

    @property
    def weight(self) -> float:
        """Weight of a kept boundary row: 1/rate (unbiased) or 1."""
        return 1.0 / self.params["rate"] if self.params["scaling"] == "inverse-rate" else 1.0

    def attend(self, prop, t, fn, layer):
        raise CdfgnnError("method 'bns-gcn' supports models gcn and sage; gat (its edge "
                          "softmax must drop the unsampled neighbours) is not implemented")

    # ------------------------------------------------------------ sync points
    def index_lists(self, key: SyncKey) -> tuple[list, list]:
        """The sampled lists in training (the codec decodes by their lengths)."""
        if not key.training:
            return super().index_lists(key)
        send, recv = self._lists
        return (recv, send) if key.direction == "bwd" else (send, recv)

    def halo_rows(self, prop, t: torch.Tensor, key: SyncKey) -> list:
        if not key.training:
            return super().halo_rows(prop, t, key)
        out = [t[i[k]] if k.any() else None for i, k in zip(prop.send, self._keep_send)]
        return _widen(self.send(key, out), self._keep_recv, t.shape[1], self.weight)

    def halo_grads(self, prop, grad_halo: list, key: SyncKey) -> list:
        # the adjoint of the forward's weighting: d(w x)/dx = w, applied before sending
        w = self.weight
        out = [None if g is None or not k.any() else (g[k] * w if w != 1.0 else g[k])
               for g, k in zip(grad_halo, self._keep_recv)]
        return _widen(self.send(key, out), self._keep_send, key.width, 1.0)


def _widen(incoming: list, keep: list[torch.Tensor], width: int, weight: float) -> list:
    """Rows received for the kept entries -> full blocks, times ``weight`` (zeros where
    not kept)."""
    out = []
    for rows, k in zip(incoming, keep):
        if rows is None or k.numel() == 0:
            out.append(None)
            continue
        full = torch.zeros((k.numel(), width), dtype=rows.dtype, device=rows.device)
        full[k] = rows * weight if weight != 1.0 else rows
        out.append(full)
    return out
