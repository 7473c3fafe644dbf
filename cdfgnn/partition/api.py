"""Run a registered partitioner on a graph and package the result as a Partitioning."""
from __future__ import annotations

import time

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import PARTITIONERS, EdgeList, Partitioning, Topology


def select_masters(edges: EdgeList, edge_parts: np.ndarray, num_parts: int) -> np.ndarray:
    """Master part of every vertex for a vertex cut.

    Rule (CDFGNN, arXiv 2408.00232, is silent; we choose):
    the replica whose part holds most of the vertex's
    edges, ties to the lowest part id. Isolated vertices (no edge, so no replica)
    are dealt round-robin to parts in increasing order of their replica count, so
    every vertex, and every training label, has exactly one owner.
    """
    n = edges.num_nodes
    master = np.full(n, -1, dtype=np.int64)
    if edges.num_edges:
        parts = np.asarray(edge_parts, dtype=np.int64)
        keys = np.concatenate([edges.src * num_parts + parts, edges.dst * num_parts + parts])
        uniq, cnt = np.unique(keys, return_counts=True)
        v, p = uniq // num_parts, uniq % num_parts
        order = np.lexsort((p, -cnt, v))  # by vertex, then most edges, then lowest part
        v, p = v[order], p[order]
        first = np.ones(v.shape[0], dtype=bool)
        first[1:] = v[1:] != v[:-1]
        master[v[first]] = p[first]
        replicas = np.bincount(p, minlength=num_parts)
    else:
        replicas = np.zeros(num_parts, dtype=np.int64)
    isolated = np.flatnonzero(master < 0)
    if isolated.size:
        by_load = np.argsort(replicas, kind="stable")
        master[isolated] = by_load[np.arange(isolated.size) % num_parts]
    return master


def ensure_registered() -> None:
    """Import the partitioner modules so that PARTITIONERS lists every algorithm."""
    import cdfgnn.partition.edgecut  # noqa: F401
    import cdfgnn.partition.vertexcut  # noqa: F401


def partition_graph(graph: Graph, method: str, topology: Topology, *, seed: int = 0,
                    **params) -> Partitioning:
    """Partition ``graph`` for ``topology`` with the registered partitioner ``method``."""
    ensure_registered()
    fn = PARTITIONERS.get(method)
    p = topology.num_parts
    if graph.num_nodes == 0:
        raise CdfgnnError(f"graph {graph.name!r} is empty: nothing to partition")
    if p > graph.num_nodes:
        raise CdfgnnError(f"{p} workers for graph {graph.name!r} with only {graph.num_nodes} "
                          "vertices: use at most as many workers as vertices")
    t0 = time.perf_counter()
    if fn.kind == "edge":
        assignment = np.asarray(fn(graph, topology, seed=seed, **params), dtype=np.int64)
        if assignment.shape != (graph.num_nodes,):
            raise RuntimeError(f"partitioner {method} returned {assignment.shape}, "
                               f"expected ({graph.num_nodes},)")
        master = assignment
    else:
        edges = EdgeList.from_graph(graph)
        assignment = np.asarray(fn(edges, topology, seed=seed, **params), dtype=np.int64)
        if assignment.shape != (edges.num_edges,):
            raise RuntimeError(f"partitioner {method} returned {assignment.shape}, "
                               f"expected ({edges.num_edges},)")
        master = select_masters(edges, assignment, p)
    seconds = time.perf_counter() - t0
    if assignment.size and (assignment.min() < 0 or assignment.max() >= p):
        raise RuntimeError(f"partitioner {method} produced part ids outside [0, {p})")
    return Partitioning(fn.kind, assignment, master, topology, method, dict(params, seed=seed),
                        graph.fingerprint(), graph.name, graph.num_nodes, seconds)
