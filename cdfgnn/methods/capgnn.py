"""``capgnn``: CaPGNN (Neurocomputing) = JACA caches + RAPA halo pruning + overlap.

``jaca`` (:mod:`cdfgnn.methods.jaca`) and ``rapa`` (:mod:`cdfgnn.methods.rapa`) in one
method, with every parameter of both. ``overlap`` (the ablation's "+Pipe."): the halo
communication of an epoch overlaps the computation of the inner vertices, which need
no halo rows; the modelled epoch time is then ``max(compute, vertex communication) +
gradient all-reduce`` (the engine's overlap model, an upper bound on the gain: the
marginal vertices' aggregation in fact waits for the halo rows). The numbers it
computes are those of ``jaca`` + ``rapa``; overlap changes only the modelled time.
"""
from __future__ import annotations

from cdfgnn.methods.base import METHODS, Degenerate, Param
from cdfgnn.methods.jaca import Jaca
from cdfgnn.methods.rapa import RapaMixin


@METHODS.register("capgnn")
class Capgnn(RapaMixin, Jaca):
    name = "capgnn"
    degenerate = Degenerate({"prune": False, "staleness": 1})
    partition_kind = "edge"
    PARAMS = {"overlap": Param(True, bool, doc="overlap halo communication with the "
                                               "inner vertices' computation")}

    def overlaps(self, epoch: int) -> bool:
        return bool(self.params["overlap"])
