"""``sar``: sequential aggregation and rematerialization (Mostafa, MLSys 2022), a
re-implementation for the edge-cut halo engine. Exact.

Each layer's neighbour aggregation ``A @ [t_owned; t_halo]`` is split by the owner
of the columns: ``A_own @ t_owned + sum_q A_q @ t_q``. In round ``k = 1 .. P-1`` a
rank sends its rows to ``(rank + k) % P`` and receives the rows of
``(rank - k) % P``, adds ``A_q @ t_q`` and drops them, so at most one peer's halo
rows are held at a time instead of the whole halo. Nothing is kept for backward:
the aggregation is linear, so the gradient of peer q's rows is ``A_q^T g``, sent
back to q in the same round order (for GCN and GraphSAGE the halo rows need no
rematerialization at all; SAR's rematerialization is for attention, and ``gat`` is
refused here). The rows and bytes on the wire are those of ``exact``, in ``P - 1``
rounds of one message; every method parameter (``codec``) applies per round.

Measured effect: ``sar_peak_halo_rows`` in the epoch rows (the most halo rows this
rank held at once), beside ``sar_halo_rows`` (the whole halo, what ``exact`` holds).
"""
from __future__ import annotations

import numpy as np
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, SyncKey, SyncStrategy
from cdfgnn.models.propagate import SparseMatrix


class _Blocks:
    """A normalised matrix split by column owner: own block and one block per peer."""

    def __init__(self, mat: SparseMatrix, n_own: int, recv: list[torch.Tensor]):
        # split once on the host (numpy), then each block goes to the matrix's device
        crow = mat.a.crow_indices().cpu().numpy()
        col = mat.a.col_indices().cpu().numpy()
        val = mat.a.values().cpu().numpy()
        self.device = mat.a.device
        n_out, n_in = mat.shape
        owner = np.full(n_in, -1, dtype=np.int64)
        pos = np.arange(n_in, dtype=np.int64)
        for q, idx in enumerate(recv):
            i = idx.cpu().numpy()
            owner[i] = q
            pos[i] = np.arange(i.size)
        rows = np.repeat(np.arange(n_out), np.diff(crow))
        self.own = self._block(rows, col, val, owner == -1, pos, n_out, n_own, self.device)
        self.peer = [self._block(rows, col, val, owner == q, pos, n_out, int(idx.numel()),
                                 self.device)
                     if idx.numel() else None for q, idx in enumerate(recv)]

    @staticmethod
    def _block(rows, col, val, col_mask, pos, n_out, width, device) -> SparseMatrix:
        keep = col_mask[col]
        indptr = np.zeros(n_out + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=n_out), out=indptr[1:])
        return SparseMatrix(indptr, pos[col[keep]], val[keep], (n_out, width), device)


def _mm(m: SparseMatrix, x: torch.Tensor, forward: bool) -> torch.Tensor:
    """``m @ x`` (forward) or ``m^T @ x`` (backward), no autograd."""
    rows = m.shape[0] if forward else m.shape[1]
    if m.shape[0] == 0 or m.shape[1] == 0:
        return x.new_zeros((rows, x.shape[1]))
    return (m.a if forward else m.at) @ x


class SequentialAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, strategy, prop, blocks, layer):
        ctx.strategy, ctx.prop, ctx.blocks, ctx.layer = strategy, prop, blocks, layer
        return strategy.rounds(prop, blocks, layer, t, "fwd")

    @staticmethod
    def backward(ctx, grad):
        out = ctx.strategy.rounds(ctx.prop, ctx.blocks, ctx.layer, grad.contiguous(), "bwd")
        return out, None, None, None, None


@METHODS.register("sar")
class SAR(SyncStrategy):
    name = "sar"
    degenerate = Degenerate({})   # sequential per-peer aggregation is exact
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "edge"
    supported_models = ("gcn", "sage")

    def __init__(self, **params):
        super().__init__(**params)
        self._blocks: dict = {}
        self._peak = 0
        self._round = 0

    def generator(self, key: SyncKey) -> torch.Generator:
        """Codec noise of one round: the sync point's seed mixed with the round."""
        base = int(super().generator(key).initial_seed())
        return torch.Generator().manual_seed(hash((base, self._round)) & 0x7FFFFFFFFFFF)

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        self._peak = 0

    def count_key(self, epoch: int):
        """Every pass aggregates every peer's block, one at a time: one key."""
        return ()

    def on_epoch_end(self, epoch: int, metrics: dict) -> dict:
        halo = int(sum(i.size for i in self.book.recv_idx)) if self.book is not None else 0
        return {"sar_peak_halo_rows": self._peak, "sar_halo_rows": halo}

    def aggregate(self, prop, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        if not prop.view.sync or self.comm is None or self.comm.world_size == 1:
            return super().aggregate(prop, t, norm, layer)
        key = (prop.view.key, norm)
        blocks = self._blocks.get(key)
        if blocks is None:
            blocks = self._blocks[key] = _Blocks(prop.matrix(norm), prop.book.num_owned,
                                                 prop.recv)
        return SequentialAggregate.apply(t, self, prop, blocks, layer)

    def attend(self, prop, t, fn, layer):
        raise CdfgnnError("method 'sar' supports models gcn and sage; gat (attention needs "
                          "rematerialized halo rows) is not implemented")

    def rounds(self, prop, blocks: _Blocks, layer: int, x: torch.Tensor, direction: str):
        """Forward: ``A @ [x; halo]`` one peer at a time. Backward: ``x`` is the output
        gradient; returns the gradient of the owned rows, halo parts sent to owners."""
        p, me = self.comm.world_size, self.comm.rank
        width = int(x.shape[1])
        fwd = direction == "fwd"
        acc = _mm(blocks.own, x, fwd)
        for k in range(1, p):
            dst, src = (me + k) % p, (me - k) % p
            outgoing: list = [None] * p
            if fwd:
                if prop.send[dst].numel():
                    outgoing[dst] = x[prop.send[dst]]
            elif blocks.peer[src] is not None:
                outgoing[src] = _mm(blocks.peer[src], x, False)
            key = SyncKey(layer, direction, "halo", True, width)
            self._round = k
            incoming = self.send(key, outgoing)
            if fwd:
                rows = incoming[src]
                if rows is not None and blocks.peer[src] is not None:
                    self._peak = max(self._peak, int(rows.shape[0]))
                    acc = acc + _mm(blocks.peer[src], rows, True)
                del rows, incoming  # nothing of the peer's rows outlives its round
            elif incoming[dst] is not None:
                acc.index_add_(0, prop.send[dst], incoming[dst])
        return acc
