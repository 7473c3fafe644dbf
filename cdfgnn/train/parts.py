"""What a rank trains, one part at a time: the part's data (:class:`LocalData`) and its
propagator and strategy (:class:`TrainPart`), with the per-split metric counts that every
evaluation path sums (the epoch loop, per-part evaluation, the oracle)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from cdfgnn.data.graph import Graph
from cdfgnn.models.gnn import Precomputed
from cdfgnn.models.propagate import Propagator

EVAL_TAG = "eval"


@dataclass
class LocalData:
    """What a part (or the oracle) trains on: input rows, and labels of its label rows.

    Label rows are the first ``len(y)`` output rows (edge-cut: owned rows; vertex-cut:
    every local replica, masters first); metrics count only the first ``owned``.
    """

    x: torch.Tensor                 # [rows of the propagator's input, F]
    y: torch.Tensor                 # [label rows] int64 or [label rows, C] float (multilabel)
    train: torch.Tensor             # bool [label rows]
    val: torch.Tensor
    test: torch.Tensor
    num_train_global: int
    multilabel: bool
    owned: int = -1                 # label rows that count for metrics (-1: all)

    def __post_init__(self) -> None:
        if self.owned < 0:
            self.owned = int(self.y.shape[0])

    def to(self, device: torch.device | str | None,
           dtype: torch.dtype | None = None) -> "LocalData":
        """The same rows on ``device``, features (and multilabel targets) in ``dtype``
        (self when nothing changes; None keeps the device or the dtype)."""
        same_device = device is None or torch.device(device) == self.x.device
        if same_device and (dtype is None or dtype == self.x.dtype):
            return self
        moved = {k: getattr(self, k).to(device) for k in ("x", "y", "train", "val", "test")}
        if dtype is not None:
            moved["x"] = moved["x"].to(dtype)
            if moved["y"].is_floating_point():
                moved["y"] = moved["y"].to(dtype)
        return replace(self, **moved)


@dataclass
class TrainPart:
    """One part a rank trains: its propagator, data and strategy (None: the oracle)."""

    prop: Propagator
    data: LocalData
    strategy: Any = None
    pre: Precomputed | None = None  # first-layer precompute (GNN.precompute_first_layer)


def metric_counts(out: torch.Tensor, data: LocalData) -> torch.Tensor:
    """Per split: (correct, total) for accuracy or (tp, fp, fn) for micro-F1, as one vector."""
    k = data.owned
    out, y = out[:k], data.y[:k]
    vals = []
    for mask in (data.train[:k], data.val[:k], data.test[:k]):
        if data.multilabel:
            pred = out[mask] > 0
            true = y[mask] > 0.5
            vals += [(pred & true).sum(), (pred & ~true).sum(), (~pred & true).sum()]
        else:
            vals += [(out[mask].argmax(1) == y[mask]).sum(), mask.sum(),
                     torch.tensor(0, device=out.device)]
    return torch.stack([v.to(torch.float64) for v in vals])


def full_graph_data(graph: Graph, device: torch.device | None = None,
                    dtype: torch.dtype | None = None) -> LocalData:
    return LocalData(torch.from_numpy(graph.x), torch.from_numpy(graph.y),
                     torch.from_numpy(graph.train), torch.from_numpy(graph.val),
                     torch.from_numpy(graph.test), int(graph.train.sum()),
                     graph.multilabel).to(device, dtype)
