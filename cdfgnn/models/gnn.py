"""A stack of GNN layers: ReLU between layers, none on the output (CDFGNN Q13)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from cdfgnn.errors import CdfgnnError
from cdfgnn.models import dropout as counter_dropout
from cdfgnn.models.layers import LAYERS
from cdfgnn.models.propagate import Propagator


class GNN(nn.Module):
    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, layers: int,
                 dropout: float = 0.0, seed: int = 0):
        super().__init__()
        if model not in LAYERS:
            raise CdfgnnError(f"unknown model {model!r}; valid: {', '.join(sorted(LAYERS))}")
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        # a private generator: same seed -> bit-identical weights on every rank and in the
        # oracle, and thread ranks never race on the global RNG
        gen = torch.Generator().manual_seed(seed)
        self.layers = nn.ModuleList(LAYERS[model](a, b, gen) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout
        self.seed = seed
        self.epoch = 0  # set by the trainer: dropout masks depend on it
        if dropout > 0:
            counter_dropout.warm_up()  # load the compiled kernel before any timed epoch

    def forward(self, x: torch.Tensor, props: Propagator | Sequence[Propagator]) -> torch.Tensor:
        if isinstance(props, Propagator):
            props = [props] * len(self.layers)
        if len(props) != len(self.layers):
            raise ValueError(f"{len(self.layers)} layers need as many propagators, got {len(props)}")
        h = x
        for i, (layer, prop) in enumerate(zip(self.layers, props)):
            if self.training and self.dropout > 0:
                key = counter_dropout.dropout_key(self.seed, self.epoch, i)
                h = counter_dropout.dropout(h, prop.input_ids, self.dropout, key)
            h = layer(h, prop, i)
            if i < len(self.layers) - 1:
                h = torch.relu(h)
        return h
