"""GNN layers with one uniform signature ``layer(h, prop, index) -> z``.

``h`` holds the propagator's input rows; the result holds its output rows after
the layer's sync point. The linear transform runs *before* aggregation so that
messages are output-width (CDFGNN Sec. 3.1).
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
        prop.message_source = (h, self.weight)
        z = prop.aggregate(t, self.norm, index)
        prop.message_source = None
        k = prop.self_rows
        z = z + prop.local(prop.self_coef(self.norm)[:k, None] * t[:k] + self.bias)
        return prop.finish(z, index)


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
        prop.message_source = (h, self.w_neigh)
        z = prop.aggregate(h @ self.w_neigh, self.norm, index)
        prop.message_source = None
        z = z + prop.local(h[: prop.self_rows] @ self.w_self + self.bias)
        return prop.finish(z, index)


LAYERS = {"gcn": GCNLayer, "sage": SAGELayer}
