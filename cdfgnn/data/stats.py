"""Dataset statistics: one row per graph, the analogue of each paper's Table 1.

Definitions (docs/architecture.md, Metrics; CDFGNN arXiv 2408.00232 Table 1): ``num_edges`` is the
undirected count |E| (each symmetric pair once), ``avg_degree = 2|E| / |V|``,
``max_degree`` and ``isolated_nodes`` use the neighbour count without self-loops.
``edge_homophily`` is the fraction of edges whose endpoints share a label (multi-label
graphs: the mean Jaccard similarity of the endpoints' label sets, in the
:func:`dataset_row` of `cdfgnn prepare` only; run records leave it empty); it is not in the
papers' tables but tells how much neighbourhood aggregation can help on a twin.
``timing_only`` marks a graph whose features and labels are random (Friendster, an
imported graph without features/labels): its accuracy numbers mean nothing.

:func:`structure_stats` adds what tells a twin's locality from its dataset's,
for the statistics row of `cdfgnn prepare` only (too slow for every run record):

* ``avg_clustering`` -- the mean local clustering coefficient over all vertices
  (networkx's ``average_clustering`` convention: 0 for degree < 2). Exact up to
  :data:`CLUSTERING_EXACT_NODES` vertices; above, the mean over
  :data:`CLUSTERING_SAMPLE` vertices drawn uniformly (seed 0; standard error below
  0.01 since local values lie in [0, 1]); ``clustering_sample`` says how many were used.
* ``louvain_modularity`` / ``louvain_communities`` -- modularity of the partition found
  by networkx's ``louvain_communities`` (seed 0, resolution 1). Skipped (empty, with
  ``louvain_note``) above :data:`LOUVAIN_MAX_EDGES` edges, where networkx's pure-Python
  Louvain would take hours.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cdfgnn.data.graph import Graph


CLUSTERING_EXACT_NODES = 50_000
CLUSTERING_SAMPLE = 20_000
LOUVAIN_MAX_EDGES = 5_000_000


def edge_homophily(graph: Graph) -> float | None:
    if graph.num_arcs == 0:
        return None
    src = graph.row_of_arcs()
    if not graph.multilabel:
        return float(np.mean(graph.y[src] == graph.y[graph.indices]))
    total, step = 0.0, 1 << 20
    for lo in range(0, graph.num_arcs, step):  # [arcs, C] blocks bound the memory
        a, b = graph.y[src[lo:lo + step]], graph.y[graph.indices[lo:lo + step]]
        inter, union = (a * b).sum(1), np.maximum(a, b).sum(1)
        total += float(np.where(union > 0, inter / np.maximum(union, 1), 1.0).sum())
    return total / graph.num_arcs


def graph_stats(graph: Graph) -> dict[str, Any]:
    n = graph.num_nodes
    deg = graph.degrees()
    # multi-label Jaccard costs [arcs, C] work: only in the prepare row (dataset_row)
    homophily = None if graph.multilabel else edge_homophily(graph)
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
        "timing_only": bool(graph.meta.get("timing_only", False)),
    }


def _adjacency(graph: Graph):
    import scipy.sparse as sp

    n = graph.num_nodes
    return sp.csr_matrix((np.ones(graph.num_arcs, dtype=np.float64), graph.indices,
                          graph.indptr), shape=(n, n))


def local_clustering(graph: Graph, nodes: np.ndarray) -> np.ndarray:
    """Local clustering coefficient of ``nodes``: closed wedges at v / (d_v (d_v - 1))."""
    a = _adjacency(graph)
    deg = graph.degrees()[nodes].astype(np.float64)
    out = np.zeros(nodes.shape[0])
    for lo in range(0, nodes.shape[0], 512):  # rows of A[S] A stay small per block
        rows = a[nodes[lo:lo + 512]]
        tri2 = np.asarray((rows @ a).multiply(rows).sum(axis=1)).ravel()  # 2 x triangles
        d = deg[lo:lo + 512]
        out[lo:lo + 512] = np.where(d > 1, tri2 / np.maximum(d * (d - 1), 1), 0.0)
    return out


def average_clustering(graph: Graph, seed: int = 0) -> tuple[float, int]:
    """(mean local clustering, vertices it averages): all, or a uniform sample."""
    n = graph.num_nodes
    if n == 0:
        return 0.0, 0
    if n <= CLUSTERING_EXACT_NODES:
        nodes = np.arange(n, dtype=np.int64)
    else:
        nodes = np.sort(np.random.default_rng(seed).choice(n, CLUSTERING_SAMPLE, replace=False))
    return float(local_clustering(graph, nodes).mean()), int(nodes.shape[0])


def louvain_modularity(graph: Graph, seed: int = 0) -> tuple[float | None, int | None, str]:
    """(modularity, communities, note) of networkx's Louvain partition."""
    if graph.num_edges > LOUVAIN_MAX_EDGES:
        return None, None, f"skipped: more than {LOUVAIN_MAX_EDGES} edges"
    if graph.num_edges == 0:
        return 0.0, graph.num_nodes, ""
    import networkx as nx

    src, dst = graph.undirected_edges()
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    comms = nx.community.louvain_communities(g, seed=seed)
    label = np.empty(graph.num_nodes, dtype=np.int64)
    for i, c in enumerate(comms):
        label[np.fromiter(c, dtype=np.int64, count=len(c))] = i
    return modularity(graph, label), len(comms), ""


def modularity(graph: Graph, community: np.ndarray) -> float:
    """Newman modularity of a vertex labelling: sum_c (e_c / m - (d_c / 2m)^2)."""
    m = graph.num_edges
    src = graph.row_of_arcs()
    inside = np.count_nonzero(community[src] == community[graph.indices]) / 2.0
    dsum = np.bincount(community, weights=graph.degrees().astype(np.float64))
    return float(inside / m - np.sum((dsum / (2.0 * m)) ** 2))


def structure_stats(graph: Graph) -> dict[str, Any]:
    clustering, sample = average_clustering(graph)
    q, k, note = louvain_modularity(graph)
    return {"avg_clustering": clustering, "clustering_sample": sample,
            "louvain_modularity": q, "louvain_communities": k, "louvain_note": note}


def dataset_row(graph: Graph, dataset: str, scale: Any, seed: int) -> dict[str, Any]:
    """The row of results/tables/datasets.csv for one prepared graph."""
    row = {"dataset": dataset, "scale": scale, "seed": seed, **graph_stats(graph),
           **structure_stats(graph)}
    if graph.multilabel:
        row["edge_homophily"] = edge_homophily(graph)
    if graph.meta.get("twin_of"):
        row["twin_of"] = graph.meta["twin_of"]
    if graph.meta.get("generator"):
        row["generator"] = graph.meta["generator"]
    return row
