"""Distributed propagators: a rank's PartitionBook + a SyncStrategy as a Propagator.

Both sync operations are autograd functions whose backward is itself a
communication step, so ``loss.backward()`` performs the gradient exchange:

* :class:`HaloExchange` (edge-cut): forward ``[t_owned] -> [t_owned; t_halo]``;
  backward sends halo gradients to their owners, which add them to their rows.
* :class:`ReplicaSync` (vertex-cut): ``z_v <- sum over replicas of v`` on every
  replica (gather to master, scatter to mirrors). Its adjoint is the same
  operation, so backward gathers and scatters gradients (CDFGNN eq. 3).

In training, every step goes through the strategy's hooks (``halo_rows``,
``halo_grads``, ``replica_sync``, ``aggregate``; see :mod:`cdfgnn.methods.base`);
evaluation always syncs exactly (the base implementation of the hooks), so an
approximate technique is judged on what it learnt, not on how it evaluates. The
local graph of each forward pass is the strategy's :class:`LocalView`; a view
with ``sync=False`` (communication-free training) aggregates over local rows only.
"""
from __future__ import annotations

import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import SyncKey, SyncStrategy
from cdfgnn.models.propagate import LocalView, Propagator
from cdfgnn.partition.book import PartitionBook


def _index(idx, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(idx).to(device=device, dtype=torch.int64)


class _BookPropagator(Propagator):
    def __init__(self, book: PartitionBook, strategy: SyncStrategy,
                 device: torch.device | None = None, dtype: torch.dtype | None = None):
        rows = book.adj_rows
        super().__init__(book.adj_indptr, book.adj_indices, book.global_degree[:rows],
                         book.global_degree, book.num_local, device=device, dtype=dtype)
        self.base_view = self.view = self.base_view.but(self_rows=self._default_self_rows(book))
        self.book = book
        self.strategy = strategy
        self.exact = SyncStrategy()
        if strategy.ctx is not None:
            self.exact.setup(strategy.ctx)
        self.send = [_index(i, self.device) for i in book.send_idx]
        self.recv = [_index(i, self.device) for i in book.recv_idx]

    @staticmethod
    def _default_self_rows(book: PartitionBook) -> int:
        return book.num_owned

    @property
    def active(self) -> SyncStrategy:
        """The strategy of this pass: the method's in training, exact sync in evaluation
        (unless the method evaluates through its own hooks: ``evaluates_with_method``)."""
        if self.view.training or self.strategy.evaluates_with_method:
            return self.strategy
        return self.exact

    def aggregate(self, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        return self.active.aggregate(self, t, norm, layer)

    def attend(self, t: torch.Tensor, fn, layer: int) -> torch.Tensor:
        return self.active.attend(self, t, fn, layer)

    def key(self, layer: int, direction: str, phase: str, width: int) -> SyncKey:
        return SyncKey(layer, direction, phase, self.view.training, width)


class EdgeCutPropagator(_BookPropagator):
    """Rows: owned (inner) vertices; aggregation reads owned + halo rows."""

    def __init__(self, book: PartitionBook, strategy: SyncStrategy,
                 device: torch.device | None = None, dtype: torch.dtype | None = None):
        super().__init__(book, strategy, device, dtype)
        self.input_ids = torch.from_numpy(book.local_nodes[: book.num_owned]).to(self.device)

    def expanded_ids(self) -> torch.Tensor:
        return torch.from_numpy(self.book.local_nodes).to(self.device)

    def expand(self, t: torch.Tensor, layer: int) -> torch.Tensor:
        if not self.view.sync:
            return t
        return HaloExchange.apply(t, self, layer)


class VertexCutPropagator(_BookPropagator):
    """Rows: every local replica; per-vertex terms only on masters; sync after aggregation."""

    def __init__(self, book: PartitionBook, strategy: SyncStrategy,
                 device: torch.device | None = None, dtype: torch.dtype | None = None):
        super().__init__(book, strategy, device, dtype)
        self.input_ids = torch.from_numpy(book.local_nodes).to(self.device)

    def finish(self, z: torch.Tensor, layer: int) -> torch.Tensor:
        if not self.view.sync:
            return z
        return ReplicaSync.apply(z, self, layer)

    def arcs_with_self_loops(self):
        raise CdfgnnError("model 'gat' needs an edge-cut partitioning: its edge softmax "
                          "over a vertex split across replicas is not supported")


def make_propagator(book: PartitionBook, strategy: SyncStrategy,
                    device: torch.device | None = None,
                    dtype: torch.dtype | None = None) -> _BookPropagator:
    """The part's propagator; its matrices and index tensors live on ``device`` (the
    run's device, ``RankContext.device``; default CPU), its matrices in ``dtype`` (the
    run's ``--dtype``; default float32)."""
    cls = EdgeCutPropagator if book.kind == "edge" else VertexCutPropagator
    return cls(book, strategy, device, dtype)


class HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t: torch.Tensor, prop: EdgeCutPropagator, layer: int) -> torch.Tensor:
        ctx.prop, ctx.layer, ctx.strategy = prop, layer, prop.active
        key = prop.key(layer, "fwd", "halo", int(t.shape[1]))
        incoming = ctx.strategy.halo_rows(prop, t, key)
        # halo rows are laid out by owner, so peer order is row order; a peer that
        # delivers nothing for a non-empty list (a sampled-out block) leaves zeros
        parts = [t]
        for q, idx in enumerate(prop.recv):
            if idx.numel():
                rows = incoming[q]
                parts.append(rows if rows is not None else t.new_zeros((idx.numel(), t.shape[1])))
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        prop = ctx.prop
        n = prop.book.num_owned
        key = SyncKey(ctx.layer, "bwd", "halo", True, int(grad.shape[1]))
        incoming = ctx.strategy.halo_grads(prop, [grad[i] if i.numel() else None
                                                   for i in prop.recv], key)
        out = grad[:n].clone()
        for q, idx in enumerate(prop.send):
            if idx.numel() and incoming[q] is not None:
                out.index_add_(0, idx, incoming[q])
        return out, None, None


class ReplicaSync(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z: torch.Tensor, prop: VertexCutPropagator, layer: int) -> torch.Tensor:
        ctx.prop, ctx.layer, ctx.strategy = prop, layer, prop.active
        return ctx.strategy.replica_sync(prop, z, layer, "fwd", prop.view.training)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out = ctx.strategy.replica_sync(ctx.prop, grad.contiguous(), ctx.layer, "bwd", True)
        return out, None, None


__all__ = ["EdgeCutPropagator", "VertexCutPropagator", "HaloExchange", "ReplicaSync",
           "LocalView", "make_propagator"]
