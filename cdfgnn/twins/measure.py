"""Partition statistics that twins are fitted to and checked against.

A :class:`Point` is one statistic of one graph at one P: METIS halo copies per vertex
(``halo``: the distinct remote neighbours each part needs, summed over parts, per vertex
of the partitioned graph) or the METIS edge-cut share (``cut``: cut edges / edges), of
the whole graph (``regime="full"``, transductive training) or of the subgraph induced by
the training vertices (``"train"``, inductive training). :func:`metis_values` measures
points on a CSR graph with ``metis_node_parts`` (seed 0 by default,
:func:`cdfgnn.partition.stats.halo_counts`), one METIS call per (regime, P).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.edgecut import metis_node_parts
from cdfgnn.partition.stats import halo_counts

METRICS = ("halo", "cut")
REGIMES = ("full", "train")
#: "metis": vertex-balanced k-way METIS, cut objective (DGL's metis_partition_assignment
#: defaults); "metis-dgl": DGL's ``partition_graph(..., balance_ntypes=train_mask,
#: balance_edges=True)``, four balance constraints (non-training and training vertices,
#: and the degrees of each); "metis-vol": vertex-balanced, communication-volume objective
#: (``partition_graph(..., objtype='vol')``)
PARTITIONERS = ("metis", "metis-dgl", "metis-vol")


@dataclass(frozen=True)
class Point:
    """One partition statistic at one P (module docstring)."""

    metric: str            # "halo" | "cut"
    parts: int
    value: float
    regime: str = "full"   # "full" | "train"
    weight: float = 1.0    # weight in the fit's objective
    partitioner: str = "metis"

    def __post_init__(self):
        if self.metric not in METRICS or self.regime not in REGIMES or self.parts < 2 \
                or self.partitioner not in PARTITIONERS:
            raise CdfgnnError(f"bad partition point {self!r}: metric in {METRICS}, regime in "
                              f"{REGIMES}, partitioner in {PARTITIONERS}, parts >= 2")


def induced(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the subgraph induced by the vertices where ``keep`` (renumbered in order)."""
    new_id = np.full(keep.shape[0], -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()), dtype=np.int64)
    rows = np.repeat(np.arange(keep.shape[0], dtype=np.int64), np.diff(indptr))
    ok = keep[rows] & keep[indices]
    src, dst = new_id[rows[ok]], new_id[indices[ok]]
    m = int(keep.sum())
    ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=m), out=ptr[1:])
    return ptr, dst      # rows stay sorted: src ascends with the original row order


def dgl_balance_weights(indptr: np.ndarray, train: np.ndarray) -> np.ndarray:
    """The four METIS balance constraints of "metis-dgl" (PARTITIONERS), vertex-major."""
    deg = np.diff(indptr).astype(np.int64)
    t = train.astype(np.int64)
    return np.stack([1 - t, t, deg * (1 - t), deg * t], axis=1).ravel()


def metis_counts(indptr: np.ndarray, indices: np.ndarray, parts: Sequence[int], *,
                 seed: int = 0, vweights: np.ndarray | None = None,
                 objective: str = "cut") -> dict[int, dict]:
    """:func:`halo_counts` of the METIS partition (``metis_node_parts``) at every P."""
    out = {}
    for p in sorted(set(int(x) for x in parts)):
        node_parts = metis_node_parts(indptr, indices, p, seed=seed, vweights=vweights,
                                      objective=objective)
        out[p] = halo_counts(indptr, indices, node_parts, p)
    return out


def part_sends(halo_rows) -> np.ndarray:
    """Rows each part sends per layer: ``sends[q] = sum_r halo_rows[r][q]`` (the
    distinct (vertex, remote part) pairs of q's vertices; :func:`halo_counts`)."""
    return np.asarray(halo_rows, dtype=np.float64).sum(axis=0)


def send_skew(sends) -> float:
    """How unevenly a partition spreads its halo over the senders: ``max_q sends[q] /
    mean_q sends[q]`` (1: every part sends as much; the slowest rank of a halo exchange
    sends the maximum)."""
    s = np.asarray(sends, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or not s.mean() > 0:
        raise CdfgnnError(f"send skew needs positive per-part send counts, got {s.tolist()}")
    return float(s.max() / s.mean())


def metis_values(indptr: np.ndarray, indices: np.ndarray, points: Sequence[Point], *,
                 train: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """The value of every point on this graph (``train``: the training mask, for the
    train regime and the "metis-dgl" balance)."""
    out = np.empty(len(points))
    for regime in REGIMES:
        for part_name in PARTITIONERS:
            idx = [i for i, pt in enumerate(points)
                   if pt.regime == regime and pt.partitioner == part_name]
            if not idx:
                continue
            if train is None and (regime == "train" or part_name == "metis-dgl"):
                raise CdfgnnError("train-regime and metis-dgl points need the training mask")
            ptr, ind, mask = indptr, indices, train
            if regime == "train":
                ptr, ind = induced(indptr, indices, train)
                mask = np.ones(ptr.shape[0] - 1, dtype=bool)
            vw = dgl_balance_weights(ptr, mask) if part_name == "metis-dgl" else None
            counts = metis_counts(ptr, ind, [points[i].parts for i in idx], seed=seed,
                                  vweights=vw,
                                  objective="vol" if part_name == "metis-vol" else "cut")
            for i in idx:
                c = counts[points[i].parts]
                out[i] = c["halo_copies_per_vertex"] if points[i].metric == "halo" \
                    else c["edge_cut_share"]
    return out
