"""Partition statistics: replication, balance and per-device sync traffic (CDFGNN Table 3).

Definitions (docs/architecture.md, Metrics; CDFGNN arXiv 2408.00232 Table 3;
CoFree-GNN arXiv 2308.03209 eq. 1, Thm 4.2):

Replica sets V_i
  * vertex-cut: V_i = endpoints of the undirected edges assigned to part i, plus every
    vertex's master part. An isolated vertex therefore has exactly one replica, at its
    master; for a non-isolated vertex :func:`~cdfgnn.partition.api.select_masters`
    already picks a part holding one of its edges, so the union adds nothing there.
  * edge-cut: V_i = inner nodes (``node_parts == i``) plus the 1-hop halo (neighbours of
    inner nodes owned by another part), the rows :mod:`cdfgnn.partition.book` builds.

Quality
  * RF = sum_i |V_i| / |V|.
  * Edge imbalance = max_i |E_i| / (|E| / p), |E| = undirected edges. |E_i| is the
    aggregation work of part i in undirected-edge units, so that sum_i |E_i| = |E| for
    both kinds:
      - vertex-cut: the undirected edges assigned to i (part i aggregates both arcs);
      - edge-cut: (arcs whose destination is inner to i) / 2 = internal edges of i +
        half of its cut edges. Part i aggregates only into its inner rows, so a cut edge
        is one arc of work on each side. ``part_local_edges`` additionally gives the
        edges part i *stores* (internal + cut, halo edges included); those sum to
        |E| + cut edges and are not used for the imbalance.
  * Vertex imbalance = max_i |V_i| / (sum_i |V_i| / p).

Sync traffic (Inner / Outer), rows per device per sync, credited to the sender
  * vertex-cut (CDFGNN gives no formula; we choose):
    every mirror (replica of v on part s != master m) costs one
    gather message s -> m (credited to s) and one scatter message m -> s (credited to m).
  * edge-cut (the analogue): every halo copy (v inner to owner o, halo on part h) costs
    one forward row o -> h (credited to o) and one backward gradient row h -> o
    (credited to h). This is the vertex-cut rule with owner = master, halo = mirror.
  A message is Inner when both devices are on the same host (host = device // dph),
  Outer otherwise. ``inner_max`` / ``outer_max`` are the maxima over devices (the
  Table 3 numbers). Summed over devices, Inner + Outer = 2 (RF - 1) |V| for both kinds;
  our sanity check compares max(Inner) + max(Outer) with 2 (RF - 1) |V| / p
  (``inner_plus_outer_check`` is that ratio: 1 for perfectly even traffic).

Everything is vectorised: replica pairs are found by sorting keys v * p + part (or a
bitmap over N * p when that is small), never by per-vertex Python loops.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import jsonable
from cdfgnn.partition.base import Partitioning, Topology

# Below this many (vertex, part) cells a boolean bitmap beats sorting the keys.
_BITMAP_MAX_CELLS = 1 << 26


# --------------------------------------------------------------------- checks
def _checked(graph: Graph, partitioning: Partitioning) -> tuple[np.ndarray, np.ndarray]:
    """Validated (assignment, master) as int64 arrays; raises CdfgnnError naming the input."""
    what = f"partitioning {partitioning.method!r} of graph {graph.name!r}"
    if graph.num_nodes == 0:
        raise CdfgnnError(f"{what}: the graph has no vertices")
    if partitioning.graph_fingerprint:
        partitioning.check_graph(graph, what)
    if partitioning.kind not in ("edge", "vertex"):
        raise CdfgnnError(f"{what}: kind must be 'edge' or 'vertex', got {partitioning.kind!r}")
    p = partitioning.num_parts
    n = graph.num_nodes
    assignment = np.asarray(partitioning.assignment)
    master = np.asarray(partitioning.master)
    if assignment.dtype.kind not in "iu" or master.dtype.kind not in "iu":
        raise CdfgnnError(f"{what}: assignment and master must be integer arrays")
    assignment = assignment.astype(np.int64, copy=False)
    master = master.astype(np.int64, copy=False)
    expected = n if partitioning.kind == "edge" else graph.num_edges
    if assignment.shape != (expected,):
        unit = "vertices" if partitioning.kind == "edge" else "undirected edges"
        raise CdfgnnError(f"{what}: assignment has shape {assignment.shape}, expected "
                          f"({expected},) = one part per {unit[:-1]} ({expected} {unit})")
    if master.shape != (n,):
        raise CdfgnnError(f"{what}: master has shape {master.shape}, expected ({n},)")
    for name, arr in (("assignment", assignment), ("master", master)):
        if arr.size and (arr.min() < 0 or arr.max() >= p):
            raise CdfgnnError(f"{what}: {name} has part ids outside [0, {p})")
    if partitioning.kind == "edge" and not np.array_equal(master, assignment):
        raise CdfgnnError(f"{what}: edge-cut master must equal node_parts (the owner)")
    return assignment, master


def _unique_pairs(v: np.ndarray, part: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (v, part) pairs sorted by vertex then part."""
    if n * p <= _BITMAP_MAX_CELLS:
        seen = np.zeros(n * p, dtype=bool)
        seen[v * p + part] = True
        keys = np.flatnonzero(seen)
    else:
        # sort + neighbour compare: np.unique in numpy 2.x takes a hash-table path that
        # is an order of magnitude slower on millions of int64 keys
        keys = np.sort(v * p + part)
        if keys.size:
            first = np.empty(keys.size, dtype=bool)
            first[0] = True
            np.not_equal(keys[1:], keys[:-1], out=first[1:])
            keys = keys[first]
    return keys // p, keys % p


# ------------------------------------------------------------------- replicas
def replicas(graph: Graph, partitioning: Partitioning) -> tuple[np.ndarray, np.ndarray]:
    """Every replica as parallel arrays ``(vertex, part)``, sorted by vertex then part.

    Vertex-cut: endpoints of each part's edges plus each vertex's master part.
    Edge-cut: each vertex at its owner plus at every other part owning a neighbour.
    ``np.bincount(part, minlength=p)`` gives |V_i|; ``np.bincount(vertex)`` the
    per-vertex replica count.
    """
    assignment, master = _checked(graph, partitioning)
    return _replicas(graph, partitioning.kind, assignment, master, partitioning.num_parts)


def replication_counts(graph: Graph, partitioning: Partitioning) -> np.ndarray:
    """Vertex-cut RF(v): the number of parts holding at least one edge of v (0 for an
    isolated v, which :func:`replicas` counts once, at its master)."""
    src, dst = graph.undirected_edges()
    p = partitioning.num_parts
    parts = np.asarray(partitioning.assignment, dtype=np.int64)
    pair = np.unique(np.concatenate([src * p + parts, dst * p + parts]))
    return np.bincount(pair // p, minlength=graph.num_nodes)


def _replicas(graph: Graph, kind: str, assignment: np.ndarray, master: np.ndarray,
              p: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    n = graph.num_nodes
    own_v = np.arange(n, dtype=np.int64)
    if kind == "vertex":
        src, dst = graph.undirected_edges()
        v = np.concatenate([src, dst, own_v])
        part = np.concatenate([assignment, assignment, master])
    else:
        rows = graph.row_of_arcs() if rows is None else rows
        cols = graph.indices
        # arc rows -> cols: the row's owner needs col as a halo when owners differ
        need = assignment[rows]
        cross = need != assignment[cols]
        v = np.concatenate([own_v, cols[cross]])
        part = np.concatenate([assignment, need[cross]])
    return _unique_pairs(v, part, n, p)


# ------------------------------------------------------------ sync messages
def sync_messages(rep_v: np.ndarray, rep_p: np.ndarray, master: np.ndarray,
                  topology: Topology) -> dict[str, np.ndarray]:
    """Rows each device sends per sync, split by link class (module docstring rule).

    Returns int64 arrays of length p: ``inner``, ``outer`` (totals per sender) and
    ``gather_inner``/``gather_outer`` (sent by the copy's device to the owner) and
    ``scatter_inner``/``scatter_outer`` (sent by the owner to the copy's device). For
    edge-cut read gather as the backward gradient rows and scatter as the forward
    halo rows.
    """
    p = topology.num_parts
    copy = rep_p != master[rep_v]
    copy_dev = rep_p[copy]
    owner_dev = master[rep_v[copy]]
    cross = topology.host_of(copy_dev) != topology.host_of(owner_dev)

    def count(devs: np.ndarray) -> np.ndarray:
        return np.bincount(devs, minlength=p).astype(np.int64)

    out = {"gather_inner": count(copy_dev[~cross]), "gather_outer": count(copy_dev[cross]),
           "scatter_inner": count(owner_dev[~cross]), "scatter_outer": count(owner_dev[cross])}
    out["inner"] = out["gather_inner"] + out["scatter_inner"]
    out["outer"] = out["gather_outer"] + out["scatter_outer"]
    return out


# ---------------------------------------------------------------- statistics
def partition_stats(graph: Graph, partitioning: Partitioning) -> dict[str, Any]:
    """Flat, JSON-serialisable statistics of ``partitioning`` on ``graph``.

    Keys (see the module docstring for every definition):
      identity: dataset, method, kind, num_parts, hosts, devices_per_host, topology,
        params, seconds (partitioning time), num_nodes, num_edges (undirected);
      quality: rf, edge_imbalance, vertex_imbalance, replicas_total, duplicated
        (= sum |V_i| - |V|), isolated_vertices;
      per part: part_vertices (|V_i|), part_edges (|E_i|, aggregation work in
        undirected edges; float for edge-cut where halves occur), part_local_edges;
        vertex-cut: part_masters, part_mirrors, mirrors_max, mirrors_mean;
        edge-cut: part_inner, part_halo, halo_max, halo_mean, cut_edges;
      traffic per device: device_inner, device_outer, device_gather_inner,
        device_gather_outer, device_scatter_inner, device_scatter_outer; inner_max,
        outer_max, inner_sum, outer_sum, inner_mean, outer_mean, messages_total;
        inner_plus_outer_max (= max Inner + max Outer), inner_plus_outer_expected
        (= 2 (RF - 1) |V| / p) and inner_plus_outer_check (their ratio, None if the
        expected value is 0).
    """
    assignment, master = _checked(graph, partitioning)
    topo = partitioning.topology
    p = topo.num_parts
    n = graph.num_nodes
    m = graph.num_edges
    kind = partitioning.kind
    rows = graph.row_of_arcs() if kind == "edge" else None
    rep_v, rep_p = _replicas(graph, kind, assignment, master, p, rows)

    part_vertices = np.bincount(rep_p, minlength=p).astype(np.int64)
    part_owned = np.bincount(master, minlength=p).astype(np.int64)
    part_copies = part_vertices - part_owned
    deg = graph.degrees()

    stats: dict[str, Any] = {
        "dataset": graph.name, "method": partitioning.method, "kind": kind, "num_parts": p,
        "hosts": topo.hosts, "devices_per_host": topo.devices_per_host,
        "topology": topo.label, "params": jsonable(partitioning.params),
        "seconds": float(partitioning.seconds), "num_nodes": n, "num_edges": m,
    }
    total = int(part_vertices.sum())
    stats["replicas_total"] = total
    stats["duplicated"] = total - n
    stats["isolated_vertices"] = int(np.count_nonzero(deg == 0))
    stats["rf"] = total / n

    if kind == "vertex":
        part_edges = np.bincount(assignment, minlength=p).astype(np.int64)
        part_local = part_edges
        stats["part_edges"] = part_edges.tolist()
    else:
        # aggregation work of part i: arcs into its inner rows, in undirected units
        arcs_in = np.bincount(assignment, weights=deg, minlength=p)
        part_edges = arcs_in / 2.0
        internal_arcs = assignment[rows] == assignment[graph.indices]
        internal = np.bincount(assignment[rows[internal_arcs]], minlength=p) // 2
        cut = np.bincount(assignment[rows[~internal_arcs]], minlength=p)
        part_local = (internal + cut).astype(np.int64)
        stats["part_edges"] = [float(x) for x in part_edges]
        stats["cut_edges"] = int(np.count_nonzero(~internal_arcs)) // 2
    stats["part_local_edges"] = part_local.tolist()
    # no edges: nothing to balance, reported as None rather than a NaN that is not JSON
    stats["edge_imbalance"] = float(part_edges.max()) / (m / p) if m else None
    stats["vertex_imbalance"] = float(part_vertices.max()) / (total / p)
    stats["part_vertices"] = part_vertices.tolist()
    if kind == "vertex":
        stats["part_masters"] = part_owned.tolist()
        stats["part_mirrors"] = part_copies.tolist()
        stats["mirrors_max"] = int(part_copies.max())
        stats["mirrors_mean"] = float(part_copies.mean())
    else:
        stats["part_inner"] = part_owned.tolist()
        stats["part_halo"] = part_copies.tolist()
        stats["halo_max"] = int(part_copies.max())
        stats["halo_mean"] = float(part_copies.mean())

    msg = sync_messages(rep_v, rep_p, master, topo)
    for key in ("inner", "outer", "gather_inner", "gather_outer", "scatter_inner", "scatter_outer"):
        stats[f"device_{key}"] = msg[key].tolist()
    inner, outer = msg["inner"], msg["outer"]
    stats["inner_max"] = int(inner.max())
    stats["outer_max"] = int(outer.max())
    stats["inner_sum"] = int(inner.sum())
    stats["outer_sum"] = int(outer.sum())
    stats["inner_mean"] = float(inner.mean())
    stats["outer_mean"] = float(outer.mean())
    stats["messages_total"] = stats["inner_sum"] + stats["outer_sum"]
    expected = 2.0 * (total - n) / p
    stats["inner_plus_outer_max"] = stats["inner_max"] + stats["outer_max"]
    stats["inner_plus_outer_expected"] = expected
    stats["inner_plus_outer_check"] = stats["inner_plus_outer_max"] / expected if expected else None
    return stats


def halo_counts(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray, p: int,
                labelled: np.ndarray | None = None) -> dict[str, Any]:
    """Edge-cut halo statistics of ``parts`` (vertex -> part) on a symmetric CSR.

    Per part r: ``owned`` rows, ``labelled`` rows (where a mask is given), ``inner_arcs``
    / ``halo_arcs`` (arcs into r's rows whose other end r owns / another part owns) and
    ``halo_rows[r][q]``, the distinct vertices owned by q that r needs (a neighbour of
    one of r's vertices). ``halo_copies_per_vertex`` = sum of halo_rows / N (the halo of
    the module docstring's edge-cut replica sets: RF - 1); ``edge_cut_share`` = cut arcs
    / arcs (= cut edges / edges); ``cut_arcs``, ``arcs``.
    """
    n = indptr.shape[0] - 1
    parts = np.asarray(parts, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    need, owner = parts[rows], parts[indices]
    cross = need != owner
    # distinct (halo vertex, needing part) pairs
    vertex, need_part = _unique_pairs(indices[cross], need[cross], n, p)
    halo = np.zeros((p, p), dtype=np.int64)
    np.add.at(halo, (need_part, parts[vertex]), 1)
    arcs = int(indices.shape[0])
    cut = int(np.count_nonzero(cross))
    out = {"owned": np.bincount(parts, minlength=p).tolist(),
           "inner_arcs": np.bincount(need[~cross], minlength=p).tolist(),
           "halo_arcs": np.bincount(need[cross], minlength=p).tolist(),
           "halo_rows": halo.tolist(),
           "halo_copies_per_vertex": float(halo.sum()) / max(n, 1),
           "edge_cut_share": cut / arcs if arcs else 0.0, "cut_arcs": cut, "arcs": arcs}
    if labelled is not None:
        out["labelled"] = np.bincount(parts[labelled], minlength=p).tolist()
    return out


def halo_by_hops(graph: Graph, partitioning: Partitioning, hops: int = 2) -> list[list[int]]:
    """Edge-cut: per hop count k = 1..``hops``, per part, the vertices within k hops of
    the part's inner vertices that it does not own (its k-hop halo; CaPGNN Fig. 4).
    k = 1 equals ``part_halo``. One sparse product per part and hop."""
    import scipy.sparse as sp

    if partitioning.kind != "edge":
        raise CdfgnnError(f"halo hops need an edge-cut partitioning, "
                          f"{partitioning.method!r} is {partitioning.kind}-cut")
    if hops < 1:
        raise CdfgnnError(f"halo hops: hops={hops}, expected an integer >= 1")
    owner, _ = _checked(graph, partitioning)
    n, p = graph.num_nodes, partitioning.topology.num_parts
    adj = sp.csr_matrix((np.ones(graph.indices.shape[0], dtype=np.float32),
                         graph.indices, graph.indptr), shape=(n, n))
    out = [[0] * p for _ in range(hops)]
    for i in range(p):
        inner = owner == i
        reach = inner.copy()
        for k in range(hops):
            reach |= (adj @ reach.astype(np.float32)) > 0
            out[k][i] = int(np.count_nonzero(reach & ~inner))
    return out


# ------------------------------------------------------ replication by degree
def expected_random_replicas(degree: np.ndarray, p: int, kind: str = "vertex") -> np.ndarray:
    """Expected replicas of a vertex of each degree under a uniformly random partition.

    vertex-cut, random edge assignment (CoFree Theorem 4.2): p (1 - (1 - 1/p)^d) for
    d >= 1; a degree-0 vertex has 1 (its master, as :func:`replicas` counts it).
    edge-cut, random vertex assignment: 1 + (p - 1) (1 - (1 - 1/p)^d) (its own part
    plus every other part that owns at least one neighbour).
    """
    d = np.asarray(degree, dtype=np.float64)
    hit = 1.0 - (1.0 - 1.0 / p) ** d
    if kind == "vertex":
        return np.where(d > 0, p * hit, 1.0)
    if kind == "edge":
        return 1.0 + (p - 1) * hit
    raise CdfgnnError(f"kind must be 'edge' or 'vertex', got {kind!r}")


def replication_by_degree(graph: Graph, partitioning: Partitioning,
                          buckets: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Mean replicas per vertex by degree bucket, beside the random-partition expectation.

    ``buckets`` are increasing lower bounds; bucket k holds degrees in
    [buckets[k], buckets[k+1]) and the last one is open. Default: log2 buckets
    0, 1, 2, 4, 8, ... up to the maximum degree. Empty buckets are omitted. Each row:
    degree_lo, degree_hi (inclusive; None for the open last bucket), vertices,
    mean_degree, mean_replicas, max_replicas, expected_random (the mean over the
    bucket's vertices of :func:`expected_random_replicas`, so it is the exact
    expectation of mean_replicas under a uniformly random partition).
    """
    assignment, master = _checked(graph, partitioning)
    p = partitioning.num_parts
    rep_v, _ = _replicas(graph, partitioning.kind, assignment, master, p)
    per_vertex = np.bincount(rep_v, minlength=graph.num_nodes)
    deg = graph.degrees()
    max_deg = int(deg.max()) if deg.size else 0
    if buckets is None:
        bounds = [0, 1]
        while bounds[-1] * 2 <= max_deg:
            bounds.append(bounds[-1] * 2)
    else:
        bounds = [int(b) for b in buckets]
        if not bounds or any(b < 0 for b in bounds) or any(
                b1 <= b0 for b0, b1 in zip(bounds, bounds[1:])):
            raise CdfgnnError(f"buckets must be non-empty, non-negative and strictly "
                              f"increasing, got {list(buckets)}")
    bounds_arr = np.asarray(bounds, dtype=np.int64)
    which = np.searchsorted(bounds_arr, deg, side="right") - 1  # -1: below the first bound
    expected = expected_random_replicas(deg, p, partitioning.kind)
    ok = which >= 0
    nb = len(bounds)
    count = np.bincount(which[ok], minlength=nb)
    sum_rep = np.bincount(which[ok], weights=per_vertex[ok], minlength=nb)
    sum_deg = np.bincount(which[ok], weights=deg[ok], minlength=nb)
    sum_exp = np.bincount(which[ok], weights=expected[ok], minlength=nb)
    max_rep = np.zeros(nb, dtype=np.int64)
    np.maximum.at(max_rep, which[ok], per_vertex[ok])
    rows = []
    for k in range(nb):
        if count[k] == 0:
            continue
        c = int(count[k])
        rows.append({"degree_lo": bounds[k],
                     "degree_hi": bounds[k + 1] - 1 if k + 1 < nb else None,
                     "vertices": c, "mean_degree": float(sum_deg[k] / c),
                     "mean_replicas": float(sum_rep[k] / c), "max_replicas": int(max_rep[k]),
                     "expected_random": float(sum_exp[k] / c)})
    return rows

