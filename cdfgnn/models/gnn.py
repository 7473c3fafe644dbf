"""A stack of GNN layers: ReLU between layers, none on the output (CDFGNN Alg. 1 is silent).

With ``precompute_first_layer`` the first layer reads :class:`Precomputed` inputs
(its neighbour aggregation of the input features, done once by :meth:`GNN.precompute`)
instead of aggregating ``x`` every pass; see :mod:`cdfgnn.models.layers`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from cdfgnn.errors import CdfgnnError
from cdfgnn.models import dropout as counter_dropout
from cdfgnn.models.layers import LAYERS
from cdfgnn.models.propagate import Propagator


@dataclass
class Precomputed:
    """The first layer's precomputed inputs and the global ids of their rows."""

    tensors: list[torch.Tensor]
    ids: torch.Tensor


class GNN(nn.Module):
    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, layers: int,
                 dropout: float = 0.0, seed: int = 0, precompute_first_layer: bool = False,
                 heads: int = 1):
        super().__init__()
        if model not in LAYERS:
            raise CdfgnnError(f"unknown model {model!r}; valid: {', '.join(sorted(LAYERS))}")
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        # a private generator: same seed -> bit-identical weights on every rank and in the
        # oracle, and thread ranks never race on the global RNG
        gen = torch.Generator().manual_seed(seed)
        cls = LAYERS[model]
        opts = {k: v for k, v in {"heads": heads}.items() if k in cls.OPTIONS}
        self.layers = nn.ModuleList(cls(a, b, gen, **opts) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout
        self.seed = seed
        self.epoch = 0  # set by the trainer: dropout masks depend on it
        self.precompute_first_layer = precompute_first_layer
        if dropout > 0:
            counter_dropout.warm_up()  # load the compiled kernel before any timed epoch

    @torch.no_grad()
    def precompute(self, x: torch.Tensor, prop: Propagator) -> Precomputed:
        """The first layer's aggregation of ``x`` over ``prop``'s current view (once)."""
        tensors, ids = self.layers[0].precompute(x, prop, 0)
        return Precomputed([t.detach() for t in tensors], ids)

    def forward(self, x: torch.Tensor, props: Propagator | Sequence[Propagator],
                pre: Precomputed | None = None) -> torch.Tensor:
        if self.precompute_first_layer and pre is None:
            raise CdfgnnError("precompute_first_layer is on: pass pre=model.precompute(x, prop)")
        if isinstance(props, Propagator):
            props = [props] * len(self.layers)
        if len(props) != len(self.layers):
            raise ValueError(f"{len(self.layers)} layers need as many propagators, got {len(props)}")
        h = x
        for i, (layer, prop) in enumerate(zip(self.layers, props)):
            if i == 0 and pre is not None:
                h = layer.forward_pre(self._drop_pre(pre), prop, 0)
            else:
                if self.training and self.dropout > 0:
                    key = counter_dropout.dropout_key(self.seed, self.epoch, i)
                    h = counter_dropout.dropout(h, prop.input_ids, self.dropout, key)
                h = layer(h, prop, i)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h

    def _drop_pre(self, pre: Precomputed) -> list[torch.Tensor]:
        """Dropout on the precomputed inputs: one mask over their concatenated columns."""
        if not (self.training and self.dropout > 0):
            return pre.tensors
        widths = [t.shape[1] for t in pre.tensors]
        key = counter_dropout.dropout_key(self.seed, self.epoch, 0)
        dropped = counter_dropout.dropout(torch.cat(pre.tensors, dim=1), pre.ids, self.dropout, key)
        return list(dropped.split(widths, dim=1))
