"""METIS node partition projected to edges ("metis-edges"): CoFree-GNN (arXiv 2308.03209)
Table 4, "Edge Cut" row, and Theorem 4.1 (constructive reading).

METIS splits the vertices into p parts (:func:`cdfgnn.partition.edgecut.metis_node_parts`
on the symmetric, deduplicated, self-loop-free CSR of the edge list; ``objective``
"cut" or "vol", seeded). Then every undirected edge (u, v), node parts P(.):

* internal edge, P(u) == P(v): part P(u);
* cross edge, P(u) != P(v): part P(min(u, v)) -- the lower-id endpoint's part, which
  is P(src) for Graph-derived edges (src < dst);
* self-loop (v, v): part P(v).

Two readings share this one assignment:

``drop_cross=True`` (default): CoFree's edge-cut ablation. METIS node parts with the
    cross edges *dropped*, no halos (CoFree Table 4). A vertex-cut assignment must name a part for
    every edge and part ids must lie in [0, p), so the cross edges keep the part above
    and the flag, recorded in the Partitioning's params, tells the training layer to
    drop them: :func:`cross_edge_mask` recomputes the METIS node parts from the
    recorded seed and params (METIS is deterministic given them), checks that the
    stored assignment is their projection, and returns the boolean mask of cross edges
    to remove. Note that a vertex whose edges are all cross loses every edge; in the
    ablation it still belongs to its METIS part as an isolated training vertex, which
    only the node parts (not the edge assignment) can say: use
    :func:`projected_node_parts`.
``drop_cross=False``: a plain vertex cut derived from METIS (Theorem 4.1): every cut
    edge goes to one of its endpoint parts, so the replicas are at most the halo nodes
    of the METIS edge cut.
"""
from __future__ import annotations

import numpy as np

from cdfgnn.data.graph import Graph, csr_from_edges
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Partitioning, Topology, partitioner
from cdfgnn.partition.edgecut import OBJECTIVES, metis_node_parts
from cdfgnn.partition.vertexcut._kernels import check_choice, check_no_extra, prepare, seed_state


def _seed(seed) -> int:
    # reuse the shared seed validation (raises CdfgnnError on bad seeds)
    seed_state("metis-edges", seed, 0, 1)
    return int(seed)


def projected_node_parts(edges: EdgeList, topology: Topology, *, seed: int,
                         objective: str = "cut") -> np.ndarray:
    """The METIS node parts (int64 [n]) that "metis-edges" projects, for these arguments."""
    src, dst, n, p = prepare("metis-edges", edges, topology)
    check_choice("metis-edges", "objective", objective, OBJECTIVES)
    indptr, indices = csr_from_edges(src, dst, n)
    return metis_node_parts(indptr, indices, p, seed=_seed(seed), objective=objective)


def project(src: np.ndarray, dst: np.ndarray, node_parts: np.ndarray) -> np.ndarray:
    """Edge parts: the common part of internal edges, the lower-id endpoint's part otherwise."""
    return node_parts[np.minimum(src, dst)]


@partitioner("metis-edges", kind="vertex")
def metis_edges(edges: EdgeList, topology: Topology, *, seed: int, objective: str = "cut",
                drop_cross: bool = True, **params) -> np.ndarray:
    """METIS node parts projected to edges (int64 [M]); see the module docstring."""
    check_no_extra("metis-edges", params)
    if not isinstance(drop_cross, bool):
        raise CdfgnnError(f"partitioner 'metis-edges': drop_cross must be true or false, "
                          f"got {drop_cross!r}")
    node_parts = projected_node_parts(edges, topology, seed=seed, objective=objective)
    src, dst, _, _ = prepare("metis-edges", edges, topology)
    return project(src, dst, node_parts)


def cross_edge_mask(graph: Graph, partitioning: Partitioning) -> np.ndarray:
    """Boolean [M] mask of the edges a ``drop_cross`` "metis-edges" partitioning drops.

    Recomputes the METIS node parts from the partitioning's recorded seed and params
    and raises :class:`CdfgnnError` if the stored assignment is not their projection
    (other pymetis build, edited file, other graph). All False when ``drop_cross`` is
    off: then every edge is kept.
    """
    what = f"partitioning {partitioning.method!r} of graph {graph.name!r}"
    if partitioning.method != "metis-edges":
        raise CdfgnnError(f"{what}: cross edges are defined only for method 'metis-edges'")
    if partitioning.graph_fingerprint:
        partitioning.check_graph(graph, what)
    params = dict(partitioning.params)
    seed = params.pop("seed", 0)
    drop = params.pop("drop_cross", True)
    objective = params.pop("objective", "cut")
    edges = EdgeList.from_graph(graph)
    if not drop:
        return np.zeros(edges.num_edges, dtype=bool)
    node_parts = projected_node_parts(edges, partitioning.topology, seed=seed, objective=objective)
    if not np.array_equal(project(edges.src, edges.dst, node_parts),
                          np.asarray(partitioning.assignment, dtype=np.int64)):
        raise CdfgnnError(f"{what}: the stored edge parts are not the projection of the METIS "
                          "node parts recomputed from its seed and params; re-run `cdfgnn "
                          "partition` with this pymetis build")
    return node_parts[edges.src] != node_parts[edges.dst]
