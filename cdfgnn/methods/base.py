"""SyncStrategy: how a technique moves boundary rows at every sync point.

The engine calls :meth:`SyncStrategy.exchange` at each sync point with the rows
owed to each peer, already laid out by the PartitionBook (edge-cut: halo rows in
forward, halo gradients in backward; vertex-cut: gather partial sums to masters,
scatter results to mirrors, in both directions). The strategy returns what each
peer delivered. ``exact`` sends everything; later techniques (cache, quantisation,
staleness, sampling) override ``exchange`` and keep per-``SyncKey`` state, or hook
the loss and the partitioner. Adding a technique = one module registering a
subclass in :data:`METHODS` + one config entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cdfgnn.registry import Registry


@dataclass(frozen=True)
class SyncKey:
    layer: int
    direction: str      # "fwd" | "bwd"
    phase: str          # "halo" | "gather" | "scatter"
    training: bool = True

    @property
    def tag(self) -> str:
        return f"{self.phase}/{self.direction}/{self.layer}"


class SyncStrategy:
    """Base strategy: exact synchronisation through ``comm.all_to_all``."""

    name = "base"
    #: "edge", "vertex" or None (works with both partition kinds)
    partition_kind: str | None = None
    #: True if communication runs concurrently with computation (PipeGCN, CaPGNN):
    #: the modelled epoch is then max(compute, comm) instead of their sum
    overlaps_compute: bool = False

    def __init__(self, **params: Any):
        if params:
            raise TypeError(f"method {self.name!r} takes no parameters, got {sorted(params)}")
        self.params: dict[str, Any] = {}
        self.comm = None
        self.book = None

    def setup(self, comm, book) -> None:
        self.comm, self.book = comm, book

    def exchange(self, key: SyncKey, outgoing: list[torch.Tensor | None],
                 ) -> list[torch.Tensor | None]:
        return self.comm.all_to_all(outgoing, tag=key.tag)

    def on_epoch_end(self, epoch: int, metrics: dict[str, float]) -> dict[str, Any]:
        """Update state from the epoch's metrics; return extra columns for the epoch row."""
        return {}


METHODS: Registry[type[SyncStrategy]] = Registry("method")


def build_strategy(name: str, params: dict[str, Any] | None = None) -> SyncStrategy:
    cls = METHODS.get(name)
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        from cdfgnn.errors import CdfgnnError
        raise CdfgnnError(f"bad parameters for method {name!r}: {exc}") from None
