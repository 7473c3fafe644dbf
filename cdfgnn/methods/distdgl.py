"""``distdgl-metis`` / ``distdgl-random``: DistDGL-style distributed mini-batch GraphSAGE
(re-implementation; RapidGNN's baselines "DGL-METIS" and "DGL-Random").

Sampled track (:class:`cdfgnn.methods.sampled.SampledMethod`, run by
``cdfgnn/train/minibatch.py``): every worker samples its batches online from the
deterministic schedule and pulls **every** remote input row of the batch from its
owner inside the step (the default KV-store path), on the critical path. The two
names share this data path; they differ only in the partitioner ``cdfgnn compare``
picks by default (METIS or random node partitions); in a pipeline experiment the
partitioner comes from the experiment. Feature rows travel uncompressed (the method
takes no ``codec``).

Device: the feature shard, the pulled rows and the gathered input matrix live on the
run's device (:class:`cdfgnn.sampling.feature_store.FeatureStore`); sampling stays on
the host.
"""
from __future__ import annotations

from cdfgnn.methods.base import METHODS
from cdfgnn.methods.sampled import SampledMethod


class DistDGL(SampledMethod):
    """On-demand pulls: the batch is sampled online, its remote inputs pulled in the step."""

    name = "distdgl"
    #: pulled rows and the batch's input matrix live on the run's device (``ctx.store``'s)
    supported_devices = ("cpu", "cuda")

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        self._seeds = self.ctx.schedule.seeds(epoch)

    def inputs(self, epoch: int, index: int):
        batch = self.ctx.schedule.sample(epoch, index, self._seeds[index])
        mask = self.store.remote_mask(batch.inputs)
        self.counts["remote_inputs"] += int(mask.sum())
        rows = self.store.pull(batch.inputs[mask], "sync")
        return batch, self.store.gather(batch, rows, mask)


@METHODS.register("distdgl-metis")
class DistDGLMetis(DistDGL):
    name = "distdgl-metis"
    default_partitioner = "metis"


@METHODS.register("distdgl-random")
class DistDGLRandom(DistDGL):
    name = "distdgl-random"
    default_partitioner = "random-nodes"
