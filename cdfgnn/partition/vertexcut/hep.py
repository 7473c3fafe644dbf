"""HEP, the Hybrid Edge Partitioner (Mayer & Jacobsen, SIGMOD 2021), as in CoFree-GNN
Table 4 (arXiv 2308.03209).

With full degrees d(v) (self-loops excluded) and mean degree dbar = 2|E| / |V|, a
vertex is *high-degree* when ``d(v) > tau * dbar`` (CoFree gives
no tau; 10 is a value of the HEP paper;
the reference code's default is 100). Then:

1. **NE++ (in memory)** on the edges with at least one low-degree endpoint: the NE
   expansion of :mod:`.ne` in which high-degree vertices keep no adjacency list, are
   never queued, never expanded and never seeds; an edge from a vertex joining the
   boundary of part k to a high-degree vertex goes to part k at once (as if the hub
   were core) -- or to part k+1 once part k holds more than the global capacity
   ``floor(|E|/p) + 1`` (the reference code's spill rule). Parts 0..p-2 are grown up
   to the in-memory capacity ``floor(|E_mem| / p) + 1``, |E_mem| = |E| - |E_h2h|.
2. **Remaining in-memory edges** (those NE would put into the last part) and then
3. **the h2h edges** (both endpoints high-degree) are streamed, each in edge-id order,
   through HDRF that sees the state NE++ left behind::

       score(i) = g(u, i) + g(v, i) + lam * (maxload - load_i) / (1 + maxload - minload)
       g(x, i)  = [x already has an edge in part i] * (1 + (1 - d(x) / (d(u) + d(v))))

   Parts holding ``floor(|E|/p) + 1`` edges or more are not eligible (reference code);
   ties go to the lowest part id; lam = 1.1 (reference default).

Choices where the papers are silent or the reference differs (docs/methods.md):

* degrees for HDRF are the full degrees (HEP knows them from the CSR build), not
  HDRF's streaming partial degrees; replica sets are the true ones (every part that
  holds an edge of the vertex); min/max loads are exact at every step (the reference
  code tracks them loosely and starts the leftover stream with max = 0);
* NE++ seeds are drawn like NE's (seeded permutation, first preferring remaining
  degree <= 2 dbar) instead of the reference's vertex-id scan, and use the same random
  stream as "ne" for the same seed. Hence with tau large enough that no vertex is high
  (E_h2h empty), HEP returns exactly ``ne(seed, alpha=1)``: parts 0..p-2 are NE's, each
  at or above the global capacity (or no edge is left), so HDRF may only put NE's
  leftovers into part p-1;
* with tau = 0 every vertex with an edge is high and HEP is pure HDRF in edge-id order
  with full degrees, the capacity rule and lowest-id ties;
* self-loops: as in :mod:`.ne` (part of the vertex's lowest-id other edge).
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import (check_no_extra, check_real, has_bit, new_bitset,
                                                 prepare, set_bit)
from cdfgnn.partition.vertexcut.ne import (count_self_loops, finish_self_loops, run_expansion,
                                           seed_vertex_order)


@numba.njit(cache=True)
def _degrees(src, dst, deg):
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        if u != v:
            deg[u] += 1
            deg[v] += 1


@numba.njit(cache=True)
def _count_h2h(src, dst, high):
    c = 0
    for e in range(src.shape[0]):
        if src[e] != dst[e] and high[src[e]] and high[dst[e]]:
            c += 1
    return c


@numba.njit(cache=True)
def _fill_replicas(src, dst, parts, rep):
    for e in range(src.shape[0]):
        k = parts[e]
        if k >= 0:
            set_bit(rep, src[e], k)
            set_bit(rep, dst[e], k)


@numba.njit(cache=True)
def hdrf_stream(src, dst, parts, high, want_h2h, deg, rep, loads, lam, cap):
    """Assign the unassigned non-self-loop edges of one class (h2h or not) with HDRF."""
    p = loads.shape[0]
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        if u == v or parts[e] >= 0:
            continue
        if (high[u] != 0 and high[v] != 0) != want_h2h:
            continue
        minl = loads[0]
        maxl = loads[0]
        for i in range(1, p):
            if loads[i] < minl:
                minl = loads[i]
            if loads[i] > maxl:
                maxl = loads[i]
        du = float(deg[u])
        dv = float(deg[v])
        gu = 2.0 - du / (du + dv)
        gv = 2.0 - dv / (du + dv)
        denom = 1.0 + (maxl - minl)
        best = -1
        best_score = -1.0
        for i in range(p):
            if loads[i] >= cap:
                continue
            score = lam * (maxl - loads[i]) / denom
            if has_bit(rep, u, i):
                score += gu
            if has_bit(rep, v, i):
                score += gv
            if score > best_score:
                best_score = score
                best = i
        if best < 0:  # every part at capacity: cannot happen while edges are left, kept safe
            best = 0
            for i in range(1, p):
                if loads[i] < loads[best]:
                    best = i
        parts[e] = best
        loads[best] += 1
        set_bit(rep, u, best)
        set_bit(rep, v, best)


@partitioner("hep", kind="vertex")
def hep(edges: EdgeList, topology: Topology, *, seed: int, tau: float = 10.0, lam: float = 1.1,
        **params) -> np.ndarray:
    """HEP edge -> part assignment (int64 [M]); ``tau``: high-degree factor, ``lam``: HDRF lambda."""
    check_no_extra("hep", params)
    tau = check_real("hep", "tau", tau, 0.0)
    lam = check_real("hep", "lam", lam, 0.0)
    src, dst, n, p = prepare("hep", edges, topology)
    order = seed_vertex_order("hep", seed, n)
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    loops = int(count_self_loops(src, dst))
    m_plain = m - loops
    deg = np.zeros(n, dtype=np.int64)
    _degrees(src, dst, deg)
    mean_degree = 2.0 * m_plain / n
    high = (deg > tau * mean_degree).view(np.uint8)
    m_h2h = int(_count_h2h(src, dst, high))
    cap_global = m_plain // p + 1
    cap_mem = (m_plain - m_h2h) // p + 1
    parts = np.full(m, -1, dtype=np.int64)
    loads = np.zeros(p, dtype=np.int64)
    if m_plain > m_h2h:
        run_expansion(src, dst, n, p, order, high, cap_mem, cap_global, 2.0 * mean_degree,
                      parts, loads)
    rep = new_bitset(n, p)
    _fill_replicas(src, dst, parts, rep)
    hdrf_stream(src, dst, parts, high, False, deg, rep, loads, lam, cap_global)
    hdrf_stream(src, dst, parts, high, True, deg, rep, loads, lam, cap_global)
    del rep
    finish_self_loops(src, dst, n, parts, loads, loops)
    return parts
