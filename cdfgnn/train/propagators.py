"""Distributed propagators: a rank's PartitionBook + a SyncStrategy as a Propagator.

Both sync operations are autograd functions whose backward is itself a
communication step, so ``loss.backward()`` performs the gradient exchange:

* :class:`HaloExchange` (edge-cut): forward ``[t_owned] -> [t_owned; t_halo]``;
  backward sends halo gradients to their owners, which add them to their rows.
* :class:`ReplicaSync` (vertex-cut): ``z_v <- sum over replicas of v`` on every
  replica (gather to master, scatter to mirrors). Its adjoint is the same
  operation, so backward gathers and scatters gradients (CDFGNN eq. 3).
"""
from __future__ import annotations

import torch

from cdfgnn.methods.base import SyncKey, SyncStrategy
from cdfgnn.models.propagate import Propagator
from cdfgnn.partition.book import PartitionBook


def _index(idx) -> torch.Tensor:
    return torch.from_numpy(idx).to(torch.int64)


class _BookPropagator(Propagator):
    def __init__(self, book: PartitionBook, strategy: SyncStrategy):
        rows = book.adj_rows
        super().__init__(book.adj_indptr, book.adj_indices, book.global_degree[:rows],
                         book.global_degree, book.num_local)
        self.book = book
        self.strategy = strategy
        self.send = [_index(i) for i in book.send_idx]
        self.recv = [_index(i) for i in book.recv_idx]
        self.training = True

    def _exchange(self, layer: int, direction: str, phase: str, outgoing):
        key = SyncKey(layer, direction, phase, self.training)
        return self.strategy.exchange(key, outgoing)


class EdgeCutPropagator(_BookPropagator):
    """Rows: owned (inner) vertices; aggregation reads owned + halo rows."""

    def __init__(self, book: PartitionBook, strategy: SyncStrategy):
        super().__init__(book, strategy)
        self.input_ids = torch.from_numpy(book.local_nodes[: book.num_owned])

    def expand(self, t: torch.Tensor, layer: int) -> torch.Tensor:
        return HaloExchange.apply(t, self, layer)


class VertexCutPropagator(_BookPropagator):
    """Rows: every local replica; per-vertex terms only on masters; sync after aggregation."""

    def __init__(self, book: PartitionBook, strategy: SyncStrategy):
        super().__init__(book, strategy)
        self.input_ids = torch.from_numpy(book.local_nodes)

    @property
    def self_rows(self) -> int:
        return self.book.num_owned  # masters come first; mirrors get the term by the sync

    def finish(self, z: torch.Tensor, layer: int) -> torch.Tensor:
        return ReplicaSync.apply(z, self, layer)


def make_propagator(book: PartitionBook, strategy: SyncStrategy) -> _BookPropagator:
    cls = EdgeCutPropagator if book.kind == "edge" else VertexCutPropagator
    return cls(book, strategy)


class HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t: torch.Tensor, prop: EdgeCutPropagator, layer: int) -> torch.Tensor:
        ctx.prop, ctx.layer = prop, layer
        incoming = prop._exchange(layer, "fwd", "halo", [t[i] if i.numel() else None
                                                         for i in prop.send])
        # halo rows are laid out by owner, so peer order is row order
        parts = [t] + [incoming[q] for q in range(len(prop.recv)) if prop.recv[q].numel()]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        prop = ctx.prop
        n = prop.book.num_owned
        incoming = prop._exchange(ctx.layer, "bwd", "halo", [grad[i] if i.numel() else None
                                                             for i in prop.recv])
        out = grad[:n].clone()
        for q, idx in enumerate(prop.send):
            if idx.numel():
                out.index_add_(0, idx, incoming[q])
        return out, None, None


def _gather_scatter(z: torch.Tensor, prop: VertexCutPropagator, layer: int,
                    direction: str) -> torch.Tensor:
    incoming = prop._exchange(layer, direction, "gather", [z[i] if i.numel() else None
                                                           for i in prop.send])
    out = z.clone()
    for q, idx in enumerate(prop.recv):
        if idx.numel():
            out.index_add_(0, idx, incoming[q])
    incoming = prop._exchange(layer, direction, "scatter", [out[i] if i.numel() else None
                                                            for i in prop.recv])
    for q, idx in enumerate(prop.send):
        if idx.numel():
            out[idx] = incoming[q]
    return out


class ReplicaSync(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z: torch.Tensor, prop: VertexCutPropagator, layer: int) -> torch.Tensor:
        ctx.prop, ctx.layer = prop, layer
        return _gather_scatter(z, prop, layer, "fwd")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _gather_scatter(grad.contiguous(), ctx.prop, ctx.layer, "bwd"), None, None
