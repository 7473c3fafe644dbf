"""Planted labels: learnable classes and features for a graph that has none.

A graph imported without features and labels is timing only: its random labels cannot be
learned, so no accuracy measured on it means anything. `cdfgnn compare` then plants a
task on the graph's own structure, as the synthetic twins are built
(:mod:`cdfgnn.data.synthetic`, steps 1 and 4):

* **classes** are the graph's communities: a METIS partition into ``k`` parts (``k``:
  the graph's label count, at most one class per :data:`MIN_CLASS_SIZE` vertices, unless
  given), so a class is a well-connected region and averaging neighbours (what a GNN
  layer does) helps to predict it;
* **features** are drawn around class centroids with noise,
  ``x_i = snr * mu_{c_i} + eps_i`` (:func:`cdfgnn.data.synthetic.centroid_features`),
  ``snr`` = :data:`SNR` noise standard deviations;
* the split is the graph's own (random 65/10/25 for an imported edge list).

The planted graph's ``meta["planted"]`` says how it was made, and ``timing_only`` is
False: accuracies on it are real measurements of a planted task, not of the user's.
Because classes follow METIS communities and `compare` partitions edge-cut methods with
METIS too, methods that drop cross-partition edges lose fewer class-relevant edges here
than on a graph whose labels cut across its communities.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError

#: centroid norm in noise standard deviations (the synth-powerlaw twin's feature SNR)
SNR = 2.0
#: default classes: no more than one per this many vertices (a small graph's 32 random
#: labels would leave a handful of training vertices per planted class)
MIN_CLASS_SIZE = 50


def plant_labels(graph: Graph, classes: int | None = None, seed: int = 0,
                 snr: float = SNR) -> Graph:
    """``graph`` with planted classes (its METIS communities) and features around class
    centroids; ``classes`` defaults to the graph's label count, at most
    ``num_nodes // MIN_CLASS_SIZE`` and at least 2."""
    from cdfgnn.data.synthetic import centroid_features
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    k = int(classes) if classes is not None else \
        max(2, min(graph.num_classes, graph.num_nodes // MIN_CLASS_SIZE))
    if not 2 <= k <= graph.num_nodes:
        raise CdfgnnError(f"--classes {k}: planted classes must be between 2 and the "
                          f"graph's {graph.num_nodes} vertices")
    communities = partition_graph(graph, "metis", Topology.for_workers(k, 1), seed=seed)
    y = np.asarray(communities.master, dtype=np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x91A47]))
    x = centroid_features(y, graph.num_features, snr, rng)
    meta = {**graph.meta, "timing_only": False, "num_classes": k,
            "planted": {"classes": k, "from": "METIS communities", "snr": float(snr),
                        "seed": int(seed), "features": "class centroid + N(0, 1) noise"},
            "labels": f"planted: {k} METIS communities", "features":
            f"planted: class centroids x {snr:g} + N(0, 1), {graph.num_features}-dim"}
    return replace(graph, x=x, y=y, meta=meta)


def describe(graph: Graph) -> str:
    """One sentence on the planted task of ``graph`` (empty when it has none)."""
    p = graph.meta.get("planted")
    if not p:
        return ""
    return (f"Labels planted: the graph has none, so its {p['classes']} classes are its "
            f"{p['from']} and its features are drawn around class centroids with noise "
            f"(SNR {p['snr']:g}); accuracies are on this planted task (--timing-only ranks "
            "by epoch time instead).")
