"""Dataset statistics: one row per graph, the analogue of each paper's Table 1.

Definitions (DESIGN.md section 4/5; CDFGNN digest, Table 1 notes): ``num_edges`` is the
undirected count |E| (each symmetric pair once), ``avg_degree = 2|E| / |V|``,
``max_degree`` and ``isolated_nodes`` use the neighbour count without self-loops.
``edge_homophily`` (single-label only) is the fraction of edges whose endpoints share a
label; it is not in the papers' tables but tells how much neighbourhood aggregation can
help on a synthetic twin.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cdfgnn.data.graph import Graph


def graph_stats(graph: Graph) -> dict[str, Any]:
    n = graph.num_nodes
    deg = graph.degrees()
    if graph.multilabel or graph.num_arcs == 0:
        homophily = None
    else:
        src = graph.row_of_arcs()
        homophily = float(np.mean(graph.y[src] == graph.y[graph.indices]))
    return {
        "name": graph.name,
        "num_nodes": n,
        "num_edges": graph.num_edges,
        "num_features": graph.num_features,
        "num_classes": graph.num_classes,
        "multilabel": graph.multilabel,
        "train": int(graph.train.sum()),
        "val": int(graph.val.sum()),
        "test": int(graph.test.sum()),
        "avg_degree": 2.0 * graph.num_edges / n if n else 0.0,
        "max_degree": int(deg.max()) if n else 0,
        "isolated_nodes": int(np.count_nonzero(deg == 0)),
        "edge_homophily": homophily,
    }
