"""SampledMethod: the plug-in interface of a sampled-track (mini-batch) method.

The sampled track (``track = "minibatch"``, run by ``cdfgnn/train/minibatch.py``)
trains sampled GraphSAGE-style batches on P workers; a method decides only the data
path of the batches' input features (DistDGL's on-demand pulls, RapidGNN's schedule,
cache and prefetch). The engine calls these hooks on every worker, in this order, and
never looks at a method's name:

=========================  ==================================  =========================
hook                       called                              returns
=========================  ==================================  =========================
``plan(ctx)``              once, before epoch 0 (timed apart)  columns for the record's
                                                               ``minibatch.workers``
``on_epoch_start(e)``      every epoch, before its first step  -
``inputs(e, i)``           every step ``i`` of epoch ``e``     ``(Batch, x_inputs)``
``on_epoch_end(e)``        after the epoch's last step,        columns for the epoch row
                           inside the timed epoch              (summed over workers)
``summary()``              once, after the last epoch          run-level columns
=========================  ==================================  =========================

``on_epoch_end`` takes no metrics: it runs inside the timed epoch, before evaluation
(a cache fill or swap is training work). The defaults keep this worker's per-epoch
counts of remote input rows and cache hits (``self.counts``) and return them, reset,
from ``on_epoch_end``. Every pull goes through ``ctx.store``
(:class:`cdfgnn.sampling.feature_store.FeatureStore`); a pull is a collective, so
every worker must call it the same number of times.

Device: feature rows a method holds (caches, staged batches) belong on ``ctx.device``,
the store's (``ctx.store.empty_rows``, ``ctx.store.index`` for host positions); a method
that does so declares ``supported_devices = ("cpu", "cuda")``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cdfgnn.comm.timers import THREAD_CPU, WALL, Clock
from cdfgnn.data.graph import Graph
from cdfgnn.methods.base import Degenerate, Method
from cdfgnn.sampling.feature_store import FeatureStore
from cdfgnn.sampling.schedule import Batch, Schedule


@dataclass
class SampledContext:
    """What a sampled method may use on its worker (given to ``plan``)."""

    comm: Any                # Communicator
    graph: Graph             # the whole graph (read-only: structure for sampling)
    store: FeatureStore      # this worker's feature shard; pulls of remote rows
    schedule: Schedule       # this worker's deterministic batches
    epochs: int
    num_batches: int         # steps per epoch (the same on every worker)
    workdir: Path            # private folder of this worker (schedule files)
    wall_clock: Clock = WALL              # the run's clocks (cdfgnn.comm.timers)
    compute_clock: Clock = THREAD_CPU
    #: the run's device: where feature rows, caches and staged batches live (the store's)
    device: torch.device = torch.device("cpu")


class SampledMethod(Method, ABC):
    """Base of the sampled track's methods (``inputs`` is the one hook to write)."""

    track = "minibatch"
    #: the feature store shards rows by the owner of a node partition
    partition_kind = "edge"
    #: the per-epoch counters every sampled method reports (columns of the epoch row)
    COUNTS = ("remote_inputs", "cache_hits")
    degenerate = Degenerate(None, reason=(
        "sampled track: every worker samples its own batches from a per-worker schedule, "
        "which no one-process trainer draws, so there is no reference to equal (rapidgnn "
        "with cache_fraction=0, prefetch=0 equals distdgl-metis, tests/test_rapidgnn.py)"))

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.ctx: SampledContext | None = None
        self.store: FeatureStore | None = None
        self.epoch = 0
        self.counts = dict.fromkeys(self.COUNTS, 0)

    def plan(self, ctx: SampledContext) -> dict[str, Any]:
        """Once, before epoch 0: keep the context; precompute what the method needs."""
        self.ctx, self.store = ctx, ctx.store
        return {}

    def on_epoch_start(self, epoch: int) -> None:
        self.epoch = epoch

    @abstractmethod
    def inputs(self, epoch: int, index: int) -> tuple[Batch, torch.Tensor]:
        """Step ``index``'s batch and its input features (rows in ``batch.inputs`` order)."""

    def on_epoch_end(self, epoch: int) -> dict[str, Any]:
        """The epoch's counts (columns of the epoch row); the counters restart."""
        out, self.counts = self.counts, dict.fromkeys(self.COUNTS, 0)
        return out

    def summary(self) -> dict[str, Any]:
        """Run-level columns of this worker (memory bound, cache statistics, ...)."""
        return {}
