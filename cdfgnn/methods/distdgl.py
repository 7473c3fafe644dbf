"""``distdgl-metis`` / ``distdgl-random``: DistDGL-style distributed mini-batch GraphSAGE
(re-implementation; RapidGNN's baselines "DGL-METIS" and "DGL-Random").

Mini-batch track (``track = "minibatch"``, ``cdfgnn/train/minibatch.py``): every worker
samples its batches online from the deterministic schedule and pulls **every** remote
input row of the batch from its owner inside the step (the default KV-store path),
on the critical path. The two names share this data path; they differ only in the
partitioner ``cdfgnn compare`` picks by default (METIS or random node partitions); in
a pipeline experiment the partitioner comes from the experiment.

Mini-batch data-path hooks (called by ``cdfgnn/train/minibatch.py``): ``plan(ctx)``,
``on_epoch_start(e)``, ``inputs(e, i) -> (Batch, x)``, ``on_epoch_end(e) -> columns``,
``summary() -> dict``. The full-batch hooks of :class:`SyncStrategy` are not used.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, SyncStrategy


class DistDGL(SyncStrategy):
    name = "distdgl"
    degenerate = Degenerate(None, reason=(
        "sampled track: every worker samples its own batches from a per-worker schedule, "
        "which no one-process trainer draws, so there is no reference to equal (rapidgnn "
        "with cache_fraction=0, prefetch=0 equals distdgl-metis, tests/test_rapidgnn.py)"))
    track = "minibatch"
    partition_kind = "edge"

    def check_params(self) -> None:
        if self.params.get("codec", "none") != "none":
            raise CdfgnnError(f"method {self.name!r}: parameter codec="
                              f"{self.params['codec']!r}: the mini-batch track sends "
                              "feature rows uncompressed; valid: none")

    def plan(self, ctx) -> dict[str, Any]:
        self.mb = ctx
        self.store = ctx.store
        self.counts = {"remote_inputs": 0, "cache_hits": 0}
        return {}

    def on_epoch_start(self, epoch: int) -> None:
        self.epoch = epoch
        self._seeds = self.mb.schedule.seeds(epoch)

    def remote_mask(self, batch) -> np.ndarray:
        return self.store.owner[batch.inputs] != self.store.rank

    def inputs(self, epoch: int, index: int):
        batch = self.mb.schedule.sample(epoch, index, self._seeds[index])
        mask = self.remote_mask(batch)
        self.counts["remote_inputs"] += int(mask.sum())
        rows = self.store.pull(batch.inputs[mask], "sync")
        return batch, self.store.gather(batch, rows, mask)

    def on_epoch_end(self, epoch: int, metrics: dict | None = None) -> dict[str, Any]:
        out, self.counts = self.counts, {k: 0 for k in self.counts}
        return out

    def summary(self) -> dict[str, Any]:
        return {}


@METHODS.register("distdgl-metis")
class DistDGLMetis(DistDGL):
    name = "distdgl-metis"
    default_partitioner = "metis"


@METHODS.register("distdgl-random")
class DistDGLRandom(DistDGL):
    name = "distdgl-random"
    default_partitioner = "random-nodes"
