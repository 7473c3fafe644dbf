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
import torch.nn.functional as F
from torch import nn

from cdfgnn.models.propagate import Propagator


class GCNLayer(nn.Module):
    r"""GCN (Kipf & Welling): :math:`Z = \tilde D^{-1/2}(A+I)\tilde D^{-1/2} H W + b`,
    :math:`\tilde D` the **global** degree + 1 (self-loop)."""

    norm = "gcn"
    OPTIONS: tuple[str, ...] = ()

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
    OPTIONS: tuple[str, ...] = ()

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

    def precompute(self, x: torch.Tensor, prop: Propagator, index: int):
        # every replica of a vertex holds its input row, so x[:num_out] is the self input
        agg = prop.finish(prop.aggregate(x, self.norm, index), index)
        return [x[: prop.num_out], agg], prop.input_ids[: prop.num_out]

    def forward_pre(self, pre: list[torch.Tensor], prop: Propagator, index: int) -> torch.Tensor:
        return pre[0] @ self.w_self + pre[1] @ self.w_neigh + self.bias


class GATLayer(nn.Module):
    r"""GAT (Velickovic et al.; PyG ``GATConv(concat=False)``, DGL ``GATConv`` heads averaged):
    :math:`e_{vu} = \mathrm{LeakyReLU}_{0.2}(a_s^\top W h_u + a_d^\top W h_v)` over
    :math:`u \in N(v) \cup \{v\}`, :math:`\alpha = \mathrm{softmax}_u(e_{vu})`,
    :math:`z_v = \frac{1}{H}\sum_{heads} \sum_u \alpha_{vu} W h_u + b`.

    Distributed (edge-cut): the projected rows ``W h`` of the halo come through the
    propagator's halo exchange (``prop.attend``), so codecs, staleness and the
    backward gradient exchange apply as for GCN; the attention scores of halo rows are
    computed locally from them. Vertex-cut is not supported (the softmax would need a
    replica sync of its maximum and denominator).
    """

    norm = None
    OPTIONS = ("heads",)

    def __init__(self, fin: int, fout: int, gen: torch.Generator | None = None, heads: int = 1):
        super().__init__()
        self.heads, self.fout = heads, fout
        self.weight = nn.Parameter(torch.empty(fin, heads * fout))
        self.att_src = nn.Parameter(torch.empty(heads, fout))
        self.att_dst = nn.Parameter(torch.empty(heads, fout))
        self.bias = nn.Parameter(torch.zeros(fout))
        bound = math.sqrt(6.0 / (fin + heads * fout))
        nn.init.uniform_(self.weight, -bound, bound, generator=gen)
        bound = math.sqrt(6.0 / (heads + fout))
        nn.init.uniform_(self.att_src, -bound, bound, generator=gen)
        nn.init.uniform_(self.att_dst, -bound, bound, generator=gen)

    def forward(self, h: torch.Tensor, prop: Propagator, index: int) -> torch.Tensor:
        return prop.attend(h @ self.weight, self._attention, index)

    def _attention(self, t: torch.Tensor, prop: Propagator) -> torch.Tensor:
        """Edge softmax and weighted sum over ``t`` (input rows: owned + halo)."""
        n, heads, fout = prop.num_out, self.heads, self.fout
        rows, cols = prop.arcs_with_self_loops()
        t3 = t.view(-1, heads, fout)
        s_src = (t3 * self.att_src).sum(-1)
        s_dst = (t3[:n] * self.att_dst).sum(-1)
        e = F.leaky_relu(s_src[cols] + s_dst[rows], 0.2)                  # [arcs, heads]
        # buffers in t's dtype and device (float64 runs: no float32 rounding in between)
        top = torch.full((n, heads), -math.inf, dtype=t.dtype, device=t.device).scatter_reduce(
            0, rows[:, None].expand_as(e), e.detach(), "amax")
        ex = torch.exp(e - top[rows])
        den = t.new_zeros(n, heads).index_add(0, rows, ex)
        alpha = ex / den[rows]
        z = t.new_zeros(n, heads, fout).index_add(0, rows, alpha[:, :, None] * t3[cols])
        return z.mean(1) + self.bias

    def precompute(self, x: torch.Tensor, prop: Propagator, index: int):
        # attention depends on W x: fetch the halo's input rows once (Sylvie's use_pp
        # for GAT) and attend locally over them every pass
        return [prop.expand(x, index)], prop.expanded_ids()

    def forward_pre(self, pre: list[torch.Tensor], prop: Propagator, index: int) -> torch.Tensor:
        return self._attention(pre[0] @ self.weight, prop)


LAYERS = {"gcn": GCNLayer, "sage": SAGELayer, "gat": GATLayer}
