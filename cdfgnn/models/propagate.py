"""Propagators: where a layer's neighbour aggregation happens.

A GNN layer never knows whether it runs on the full graph, on one rank's
partition or on a sampled block; it talks to a :class:`Propagator`:

* ``aggregate(t, norm)``: ``A_norm @ expand(t)`` for the output rows, where
  ``expand`` completes ``t`` with the rows other ranks own (edge-cut halo
  exchange; identity elsewhere) and ``norm`` is ``"gcn"`` (``1/sqrt(d~_u d~_v)``,
  ``d~ = deg + 1``) or ``"mean"`` (``1/max(deg_v, 1)``), always with **global**
  degrees;
* ``self_coef(norm)``: the weight of the self term for the output rows (``1/d~_v``
  for gcn, unused for mean);
* ``self_rows``: how many leading output rows take a per-vertex term (self term,
  bias), which must be added exactly once per vertex (vertex-cut: masters only;
  elsewhere: every output row); ``local(x)`` pads such a term to all output rows;
* ``finish(z)``: the layer's sync point after aggregation (vertex-cut:
  gather-to-master + scatter-to-mirrors; identity elsewhere).

This module holds the one-process propagators (full graph, sampled block); the
distributed ones live in :mod:`cdfgnn.train.propagators`.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Hashable

import numpy as np
import torch


#: the numpy type of each supported floating-point type (``--dtype``)
_NUMPY_FLOAT = {torch.float32: np.float32, torch.float64: np.float64}


class SpMM(torch.autograd.Function):
    """``A @ x`` with ``A`` sparse CSR and its transpose precomputed for backward.

    torch's own autograd for CSR @ dense builds the transpose on every backward
    call; precomputing it once makes full-batch epochs ~2x cheaper.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, at: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.at = at
        return a @ x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, None, ctx.at @ grad.contiguous()


class SparseMatrix:
    """A CSR matrix with its transpose, built once from (indptr, indices, values)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                 shape: tuple[int, int], device: torch.device | None = None,
                 dtype: torch.dtype = torch.float32):
        self.shape = shape
        crow = torch.from_numpy(np.ascontiguousarray(indptr, dtype=np.int64))
        col = torch.from_numpy(np.ascontiguousarray(indices, dtype=np.int64))
        # the values are computed in float64 (norm_values) and rounded once to ``dtype``
        val = torch.from_numpy(np.ascontiguousarray(values, dtype=_NUMPY_FLOAT[dtype]))
        with warnings.catch_warnings():  # "CSR support is in beta": known, and tested here
            warnings.simplefilter("ignore", UserWarning)
            self.a = torch.sparse_csr_tensor(crow, col, val, size=shape)
        # transpose via COO -> CSR (sorted), once
        rows = torch.repeat_interleave(torch.arange(shape[0]), crow[1:] - crow[:-1])
        t = torch.sparse_coo_tensor(torch.stack([col, rows]), val, (shape[1], shape[0]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self.at = t.coalesce().to_sparse_csr()
        if device is not None and device.type != "cpu":  # built on the host, used there
            self.a, self.at = self.a.to(device), self.at.to(device)

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        if self.shape[0] == 0 or self.shape[1] == 0:
            return x.new_zeros((self.shape[0], x.shape[1])) + 0 * x.sum()
        return SpMM.apply(self.a, self.at, x)


def norm_values(norm: str, row_deg: np.ndarray, col_deg: np.ndarray, indptr: np.ndarray,
                indices: np.ndarray, row_scale: np.ndarray | None = None) -> np.ndarray:
    """Edge weights of the normalised adjacency for local CSR rows.

    ``row_deg``/``col_deg`` are global degrees of the rows and of the column
    vertices; ``row_scale`` multiplies each row (used by sampled blocks to keep the
    aggregation unbiased: deg_v / |sampled neighbours of v|).
    """
    counts = np.diff(indptr)
    rdeg = np.repeat(row_deg, counts).astype(np.float64)
    if norm == "gcn":
        vals = 1.0 / np.sqrt((rdeg + 1.0) * (col_deg[indices].astype(np.float64) + 1.0))
    elif norm == "mean":
        vals = 1.0 / np.maximum(rdeg, 1.0)
    else:
        raise ValueError(f"unknown normalisation {norm!r}")
    if row_scale is not None:
        vals = vals * np.repeat(row_scale, counts)
    return vals


def self_coefficients(norm: str, deg: np.ndarray, dtype: torch.dtype = torch.float32,
                      ) -> torch.Tensor:
    if norm == "gcn":
        return torch.from_numpy(1.0 / (deg.astype(np.float64) + 1.0)).to(dtype)
    return torch.ones(deg.shape[0], dtype=dtype)


@dataclass(frozen=True, eq=False)
class LocalView:
    """The local graph one forward pass aggregates over.

    A propagator holds a base view (its book's graph with **global** degrees, sync
    on); a method may substitute another per forward pass through
    ``SyncStrategy.local_view`` (CoFree: local degrees and no sync; DropEdge-K: a
    masked adjacency; BNS-GCN: scaled halo columns). Views with the same ``key``
    share cached normalised matrices, so a method that cycles through K views
    builds each matrix once.

    * ``indptr``/``indices``: CSR, rows = output rows, columns = input rows;
    * ``row_deg``/``col_deg``: the degrees the normalisation uses;
    * ``row_scale``/``col_scale``: optional factors on each row / column of A;
    * ``self_rows``: leading output rows that take the per-vertex terms (self term,
      bias); ``sync``: False skips every halo exchange and replica sync;
    * ``loss_weight``: weight of every label row in the loss (None: 1 on the first
      ``owned`` rows, 0 elsewhere).
    """

    key: Hashable
    indptr: np.ndarray
    indices: np.ndarray
    row_deg: np.ndarray
    col_deg: np.ndarray
    num_in: int
    self_rows: int
    sync: bool = True
    training: bool = True
    row_scale: np.ndarray | None = None
    col_scale: np.ndarray | None = None
    loss_weight: torch.Tensor | None = None

    @property
    def num_out(self) -> int:
        return int(len(self.indptr) - 1)

    def but(self, **changes) -> "LocalView":
        """A copy with some fields changed (give a new ``key`` when the graph changes)."""
        return replace(self, **changes)


class Propagator:
    """Aggregation over the current :class:`LocalView` (rows: output, cols: input rows)."""

    #: global ids of the input rows (for counter-based dropout masks)
    input_ids: torch.Tensor
    #: normalised matrices kept per (view key, norm); a few views (DropEdge-K) are reused
    CACHE_SIZE = 32
    #: (layer input rows, weight) with ``t = h @ weight`` while a layer aggregates ``t``
    #: (set by the layers, None otherwise): methods that exchange a layer's *input* rows
    #: instead of its messages (CaPGNN's input-feature cache) read it in ``aggregate``
    message_source: tuple | None = None
    #: where this propagator's matrices, coefficients and index tensors live (the run's
    #: device; the CSR structure and the views stay numpy on the host)
    device: torch.device = torch.device("cpu")
    #: the floating-point type of its matrices and coefficients (the run's ``--dtype``)
    dtype: torch.dtype = torch.float32

    def __init__(self, indptr, indices, row_deg, col_deg, num_in: int,
                 row_scale: np.ndarray | None = None, device: torch.device | None = None,
                 dtype: torch.dtype | None = None):
        if device is not None:
            self.device = torch.device(device)
        if dtype is not None:
            self.dtype = dtype
        view = LocalView("base", indptr, indices, row_deg, col_deg, num_in,
                         int(len(indptr) - 1), row_scale=row_scale)
        self.base_view = view
        self.view = view
        self._mats: OrderedDict[tuple, SparseMatrix] = OrderedDict()
        self._self: dict[tuple, torch.Tensor] = {}

    def use_view(self, view: LocalView) -> None:
        self.view = view

    @property
    def num_out(self) -> int:
        return self.view.num_out

    @property
    def num_in(self) -> int:
        return self.view.num_in

    @property
    def training(self) -> bool:
        return self.view.training

    def matrix(self, norm: str) -> SparseMatrix:
        v = self.view
        key = (v.key, norm)
        mat = self._mats.get(key)
        if mat is None:
            vals = norm_values(norm, v.row_deg, v.col_deg, v.indptr, v.indices, v.row_scale)
            if v.col_scale is not None:
                vals = vals * v.col_scale[v.indices]
            mat = SparseMatrix(v.indptr, v.indices, vals, (v.num_out, v.num_in), self.device,
                               self.dtype)
            self._mats[key] = mat
            if len(self._mats) > self.CACHE_SIZE:
                self._mats.popitem(last=False)
        else:
            self._mats.move_to_end(key)
        return mat

    def self_coef(self, norm: str) -> torch.Tensor:
        key = (self.view.key, norm)
        if key not in self._self:
            self._self[key] = self_coefficients(norm, self.view.row_deg[: self.view.num_out],
                                                self.dtype).to(self.device)
        return self._self[key]

    def expand(self, t: torch.Tensor, layer: int) -> torch.Tensor:
        return t

    def aggregate(self, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        return self.matrix(norm) @ self.expand(t, layer)

    def attend(self, t: torch.Tensor, fn, layer: int) -> torch.Tensor:
        """``fn(expand(t), self)``: attention (GAT) over the input rows, halo included."""
        return fn(self.expand(t, layer), self)

    def expanded_ids(self) -> torch.Tensor:
        """Global ids of the rows ``expand`` returns."""
        return self.input_ids

    def arcs_with_self_loops(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(output row, input row) of every arc of the view, then a self loop per output
        row (output row i is input row i); cached per view."""
        v = self.view
        key = (v.key, "arcs")
        if key not in self._self:
            n = v.num_out
            counts = torch.from_numpy(np.diff(v.indptr).astype(np.int64))
            rows = torch.repeat_interleave(torch.arange(n), counts)
            cols = torch.from_numpy(np.asarray(v.indices, dtype=np.int64))
            self._self[key] = (torch.cat([rows, torch.arange(n)]).to(self.device),
                               torch.cat([cols, torch.arange(n)]).to(self.device))
        return self._self[key]

    @property
    def self_rows(self) -> int:
        return self.view.self_rows

    def local(self, x: torch.Tensor) -> torch.Tensor:
        """Pad a per-vertex term computed for ``self_rows`` rows to all output rows."""
        if x.shape[0] == self.num_out:
            return x
        return torch.cat([x, x.new_zeros((self.num_out - x.shape[0], x.shape[1]))])

    def finish(self, z: torch.Tensor, layer: int) -> torch.Tensor:
        return z


class FullGraphPropagator(Propagator):
    """The whole graph in one process: the exactness oracle."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray,
                 device: torch.device | None = None, dtype: torch.dtype | None = None):
        deg = np.diff(indptr)
        super().__init__(indptr, indices, deg, deg, len(indptr) - 1, device=device, dtype=dtype)
        self.input_ids = torch.arange(self.num_out, dtype=torch.int64, device=self.device)
