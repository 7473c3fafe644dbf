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

import numpy as np
import torch


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
                 shape: tuple[int, int]):
        self.shape = shape
        crow = torch.from_numpy(np.ascontiguousarray(indptr, dtype=np.int64))
        col = torch.from_numpy(np.ascontiguousarray(indices, dtype=np.int64))
        val = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
        with warnings.catch_warnings():  # "CSR support is in beta": known, and tested here
            warnings.simplefilter("ignore", UserWarning)
            self.a = torch.sparse_csr_tensor(crow, col, val, size=shape)
        # transpose via COO -> CSR (sorted), once
        rows = torch.repeat_interleave(torch.arange(shape[0]), crow[1:] - crow[:-1])
        t = torch.sparse_coo_tensor(torch.stack([col, rows]), val, (shape[1], shape[0]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self.at = t.coalesce().to_sparse_csr()

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


def self_coefficients(norm: str, deg: np.ndarray) -> torch.Tensor:
    if norm == "gcn":
        return torch.from_numpy((1.0 / (deg.astype(np.float64) + 1.0)).astype(np.float32))
    return torch.ones(deg.shape[0], dtype=torch.float32)


class Propagator:
    """Aggregation over a fixed local CSR (rows: output rows, cols: input rows)."""

    #: global ids of the input rows (for counter-based dropout masks)
    input_ids: torch.Tensor
    num_out: int

    def __init__(self, indptr, indices, row_deg, col_deg, num_in: int,
                 row_scale: np.ndarray | None = None):
        self._csr = (indptr, indices, row_deg, col_deg, row_scale)
        self.num_out = int(len(indptr) - 1)
        self.num_in = num_in
        self._mats: dict[str, SparseMatrix] = {}
        self._self: dict[str, torch.Tensor] = {}

    def matrix(self, norm: str) -> SparseMatrix:
        if norm not in self._mats:
            indptr, indices, row_deg, col_deg, row_scale = self._csr
            vals = norm_values(norm, row_deg, col_deg, indptr, indices, row_scale)
            self._mats[norm] = SparseMatrix(indptr, indices, vals, (self.num_out, self.num_in))
        return self._mats[norm]

    def self_coef(self, norm: str) -> torch.Tensor:
        if norm not in self._self:
            self._self[norm] = self_coefficients(norm, self._csr[2])
        return self._self[norm]

    def expand(self, t: torch.Tensor, layer: int) -> torch.Tensor:
        return t

    def aggregate(self, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        return self.matrix(norm) @ self.expand(t, layer)

    @property
    def self_rows(self) -> int:
        return self.num_out

    def local(self, x: torch.Tensor) -> torch.Tensor:
        """Pad a per-vertex term computed for ``self_rows`` rows to all output rows."""
        if x.shape[0] == self.num_out:
            return x
        return torch.cat([x, x.new_zeros((self.num_out - x.shape[0], x.shape[1]))])

    def finish(self, z: torch.Tensor, layer: int) -> torch.Tensor:
        return z


class FullGraphPropagator(Propagator):
    """The whole graph in one process: the exactness oracle."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray):
        deg = np.diff(indptr)
        super().__init__(indptr, indices, deg, deg, len(indptr) - 1)
        self.input_ids = torch.arange(self.num_out, dtype=torch.int64)
