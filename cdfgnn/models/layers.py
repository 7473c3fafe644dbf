"""GNN layers with one uniform signature ``layer(h, prop, index) -> z``.

``h`` holds the propagator's input rows; the result holds its output rows after
the layer's sync point. The linear transform runs *before* aggregation so that
messages are output-width (CDFGNN Sec. 3.1).

First-layer precompute (``--precompute-first-layer``; BNS-GCN, PipeGCN and Sylvie's
``use_pp``): ``precompute(x, prop, index)`` does the layer's neighbour aggregation
of the fixed input features once, with the full halo, and returns
``(inputs, ids)``: the tensors ``forward_pre(inputs, prop, index)`` needs and the
global ids of their rows (dropout masks). Afterwards the layer exchanges nothing.
Since aggregation is linear, ``(A X) W == A (X W)``: the result equals ``forward``
up to float rounding (with dropout off; with dropout the mask falls on the
aggregated rows, as in the public code).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from cdfgnn.models.propagate import Propagator


class GCNLayer(nn.Module):
    r"""GCN (Kipf & Welling): :math:`Z = \tilde D^{-1/2}(A+I)\tilde D^{-1/2} H W + b`,
    :math:`\tilde D` the **global** degree + 1 (self-loop)."""

    norm = "gcn"

    def __init__(self, fin: int, fout: int, gen: torch.Generator | None = None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fin, fout))
        self.bias = nn.Parameter(torch.zeros(fout))
        bound = math.sqrt(6.0 / (fin + fout))  # Glorot uniform, as PyG/DGL
        nn.init.uniform_(self.weight, -bound, bound, generator=gen)

    def forward(self, h: torch.Tensor, prop: Propagator, index: int) -> torch.Tensor:
        t = h @ self.weight
        z = prop.aggregate(t, self.norm, index)
        k = prop.self_rows
        z = z + prop.local(prop.self_coef(self.norm)[:k, None] * t[:k] + self.bias)
        return prop.finish(z, index)

    def precompute(self, x: torch.Tensor, prop: Propagator, index: int):
        z = prop.aggregate(x, self.norm, index)
        k = prop.self_rows
        z = z + prop.local(prop.self_coef(self.norm)[:k, None] * x[:k])
        return [prop.finish(z, index)], prop.input_ids[: prop.num_out]

    def forward_pre(self, pre: list[torch.Tensor], prop: Propagator, index: int) -> torch.Tensor:
        return pre[0] @ self.weight + self.bias


class SAGELayer(nn.Module):
    r"""GraphSAGE-mean: :math:`z_v = W_s h_v + W_n \frac{1}{|N(v)|}\sum_{u\in N(v)} h_u + b`
    (mean over the **global** neighbourhood; an isolated vertex aggregates 0)."""

    norm = "mean"

    def __init__(self, fin: int, fout: int, gen: torch.Generator | None = None):
        super().__init__()
        self.w_self = nn.Parameter(torch.empty(fin, fout))
        self.w_neigh = nn.Parameter(torch.empty(fin, fout))
        self.bias = nn.Parameter(torch.zeros(fout))
        bound = math.sqrt(6.0 / (fin + fout))
        nn.init.uniform_(self.w_self, -bound, bound, generator=gen)
        nn.init.uniform_(self.w_neigh, -bound, bound, generator=gen)

    def forward(self, h: torch.Tensor, prop: Propagator, index: int) -> torch.Tensor:
        z = prop.aggregate(h @ self.w_neigh, self.norm, index)
        z = z + prop.local(h[: prop.self_rows] @ self.w_self + self.bias)
        return prop.finish(z, index)

    def precompute(self, x: torch.Tensor, prop: Propagator, index: int):
        # every replica of a vertex holds its input row, so x[:num_out] is the self input
        agg = prop.finish(prop.aggregate(x, self.norm, index), index)
        return [x[: prop.num_out], agg], prop.input_ids[: prop.num_out]

    def forward_pre(self, pre: list[torch.Tensor], prop: Propagator, index: int) -> torch.Tensor:
        return pre[0] @ self.w_self + pre[1] @ self.w_neigh + self.bias


LAYERS = {"gcn": GCNLayer, "sage": SAGELayer}
