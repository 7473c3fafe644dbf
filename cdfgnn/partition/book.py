"""PartitionBook: what one rank knows about its piece of the graph.

Local row order (both kinds): the rank's **owned** vertices first (edge-cut: inner
nodes; vertex-cut: masters), sorted by global id, then the **remote** rows
(edge-cut: 1-hop halo; vertex-cut: mirrors) grouped by owning rank, sorted by
global id within a group. ``send_idx[q]`` and ``recv_idx[q]`` are therefore
aligned element-wise with the peer's lists, since both sides sort by global id.

Edge-cut (halo exchange, docs/architecture.md):
  * ``adj_rows`` = owned rows; columns index owned + halo rows;
  * forward: rank sends ``rows[send_idx[q]]`` to q, receives halo ``recv_idx[q]``;
  * backward: gradients of halo rows go back and are summed into ``send_idx``.
Vertex-cut (CDFGNN Alg. 1, Fig. 4):
  * ``adj_rows`` = all local replicas, columns the same; each undirected edge of the
    part contributes both arcs;
  * gather: a mirror sends its partial row to the master (``send_idx`` on the
    mirror side = mirror rows whose master is q; ``recv_idx`` on the master side =
    its master rows that have a mirror on q); the master sums;
  * scatter: the reverse direction over the same lists; mirrors take the value.
Normalisation always uses **global** degrees (``global_degree``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdfgnn.arrays import ranges, unique_sorted
from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Partitioning


@dataclass
class PartitionBook:
    rank: int
    num_parts: int
    kind: str                      # "edge" | "vertex"
    local_nodes: np.ndarray        # global id of every local row
    num_owned: int                 # rows [0, num_owned) are owned here
    adj_indptr: np.ndarray         # local CSR: rows = adj_rows, cols = local row ids
    adj_indices: np.ndarray
    send_idx: list[np.ndarray]     # per peer: local rows whose value goes to the peer
    recv_idx: list[np.ndarray]     # per peer: local rows that take / add the peer's value
    global_degree: np.ndarray      # global degree (no self-loop) of every local row

    @property
    def num_local(self) -> int:
        return int(self.local_nodes.shape[0])

    @property
    def adj_rows(self) -> int:
        """Rows that aggregate locally: owned rows (edge-cut) or every replica (vertex-cut)."""
        return self.num_owned if self.kind == "edge" else self.num_local

    @property
    def owned_nodes(self) -> np.ndarray:
        return self.local_nodes[: self.num_owned]



def build_books(graph: Graph, part: Partitioning, ranks: list[int] | None = None,
                drop_arcs: np.ndarray | None = None) -> list[PartitionBook]:
    """Books for ``ranks`` (default all). Shared work is done once for all of them.

    ``drop_arcs`` (bool per arc of ``graph``, CSR order; edge-cut only): arcs (v, u)
    that v no longer aggregates over (a method's ``prepare`` hook, e.g. RAPA's halo
    pruning). Normalisation keeps the global degrees of the original graph.
    """
    part.check_graph(graph)
    ranks = list(range(part.num_parts)) if ranks is None else list(ranks)
    if drop_arcs is not None:
        drop_arcs = np.asarray(drop_arcs, dtype=bool)
        if drop_arcs.shape != graph.indices.shape:
            raise CdfgnnError(f"drop_arcs has {drop_arcs.shape[0]} entries, graph "
                              f"{graph.name!r} has {graph.indices.shape[0]} arcs")
        if part.kind != "edge":
            raise CdfgnnError("dropping arcs is supported for edge-cut partitionings only")
        if not drop_arcs.any():
            drop_arcs = None
    if part.kind == "edge":
        return _edge_cut_books(graph, part, ranks, drop_arcs)
    return _vertex_cut_books(graph, part, ranks)


# --------------------------------------------------------------------- edge cut
def _edge_cut_books(graph: Graph, part: Partitioning, ranks: list[int],
                    drop_arcs: np.ndarray | None = None) -> list[PartitionBook]:
    n, p = graph.num_nodes, part.num_parts
    node_part = part.assignment
    row, col = graph.row_of_arcs(), graph.indices
    deg = graph.degrees()
    keep = None if drop_arcs is None else ~drop_arcs
    cross = node_part[row] != node_part[col]
    if keep is not None:
        cross &= keep
    # arc (v, u) across parts: v's owner q needs u, owned by r: u is in q's halo.
    need_part, need_node = node_part[row[cross]], col[cross]
    # (needing part q, owner r, gid u): q's halo holds u, r sends u to q.
    key = unique_sorted((need_part * p + node_part[need_node]) * n + need_node)
    pair_groups = _Groups(key // n, p * p)               # group id = needer * p + owner
    needed = key % n
    books = []
    for r in ranks:
        inner = np.flatnonzero(node_part == r)
        halo = needed[pair_groups.span(r * p, r * p + p)]     # by owner, then gid
        local_nodes = np.concatenate([inner, halo])
        g2l = _global_to_local(local_nodes, n)
        lo, hi = graph.indptr[inner], graph.indptr[inner + 1]
        counts = hi - lo
        arcs = ranges(lo, counts)
        if keep is not None:
            mine = keep[arcs]
            counts = np.bincount(np.repeat(np.arange(inner.size), counts)[mine],
                                 minlength=inner.size)
            arcs = arcs[mine]
        indptr = np.zeros(inner.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        indices = g2l[graph.indices[arcs]]
        send_idx = [g2l[needed[pair_groups.slice(q * p + r)]] for q in range(p)]
        recv_idx = [g2l[needed[pair_groups.slice(r * p + q)]] for q in range(p)]
        books.append(PartitionBook(r, p, "edge", local_nodes, int(inner.size), indptr, indices,
                                   send_idx, recv_idx, deg[local_nodes]))
    return books


# ------------------------------------------------------------------- vertex cut
def _vertex_cut_books(graph: Graph, part: Partitioning, ranks: list[int]) -> list[PartitionBook]:
    n, p = graph.num_nodes, part.num_parts
    esrc, edst = graph.undirected_edges()
    eparts = part.assignment
    master = part.master
    deg = graph.degrees()
    # every (vertex, part) replica pair, masters included (isolated vertices have only that)
    pair = unique_sorted(np.concatenate([esrc * p + eparts, edst * p + eparts,
                                     np.arange(n, dtype=np.int64) * p + master]))
    rep_v, rep_p = pair // p, pair % p
    is_mirror = rep_p != master[rep_v]
    mir_v, mir_p = rep_v[is_mirror], rep_p[is_mirror]
    # mirrors grouped by (mirror part, master part), gid-sorted within a group
    order = np.lexsort((mir_v, master[mir_v], mir_p))
    mir_v = mir_v[order]
    groups = _Groups(mir_p[order] * p + master[mir_v], p * p)
    books = []
    for r in ranks:
        owned = np.flatnonzero(master == r)
        here = mir_v[groups.span(r * p, r * p + p)]      # my mirrors, by master then gid
        local_nodes = np.concatenate([owned, here])
        g2l = _global_to_local(local_nodes, n)
        mine = eparts == r
        indptr, indices = _sym_csr(g2l[esrc[mine]], g2l[edst[mine]], local_nodes.size)
        # gather direction: my mirrors mastered by q go to q; q's mirrors of my masters come in
        send_idx = [g2l[mir_v[groups.slice(r * p + q)]] if q != r else _EMPTY for q in range(p)]
        recv_idx = [g2l[mir_v[groups.slice(q * p + r)]] if q != r else _EMPTY for q in range(p)]
        books.append(PartitionBook(r, p, "vertex", local_nodes, int(owned.size), indptr, indices,
                                   send_idx, recv_idx, deg[local_nodes]))
    return books


# ---------------------------------------------------------------------- helpers
_EMPTY = np.zeros(0, dtype=np.int64)


class _Groups:
    """Contiguous runs of a sorted group-id array, addressable by group id."""

    def __init__(self, group_ids: np.ndarray, num_groups: int):
        self.bounds = np.searchsorted(group_ids, np.arange(num_groups + 1))

    def slice(self, g: int) -> slice:
        return slice(int(self.bounds[g]), int(self.bounds[g + 1]))

    def span(self, g0: int, g1: int) -> slice:
        return slice(int(self.bounds[g0]), int(self.bounds[g1]))


def _global_to_local(local_nodes: np.ndarray, n: int) -> np.ndarray:
    g2l = np.full(n, -1, dtype=np.int64)
    g2l[local_nodes] = np.arange(local_nodes.size, dtype=np.int64)
    return g2l


def _sym_csr(s: np.ndarray, d: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the symmetric closure of local edges (s, d), sorted columns."""
    rows = np.concatenate([s, d])
    cols = np.concatenate([d, s])
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, cols
