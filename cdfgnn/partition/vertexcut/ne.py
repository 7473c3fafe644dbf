"""Neighbour Expansion (NE; Zhang et al., KDD 2017): CoFree-GNN's default (arXiv 2308.03209).

NE grows the parts one after the other. While growing part k it keeps a core set C
and a boundary set S (C ⊆ S) and a min-priority queue over S \\ C keyed by each
vertex's *remaining degree* (its incident edges not yet assigned to any part)::

    capacity = floor(alpha * |E| / p) + 1          (alpha = 1.0, as the reference code)
    for k in 0 .. p-2:
        while |E_k| < capacity:
            x = pop-min(queue)  or, if the queue is empty, a new seed vertex
            C += {x};  for every unassigned edge (x, y): add y to S
            (a vertex y joining S takes its unassigned edges (y, z) into E_k when z is in
             C, and, while |E_k| < capacity, when z is already in S)
        clear the queue (S is per part; C is global: a core vertex has no edges left)
    part p-1 takes every edge still unassigned.

Popping the vertex of minimal remaining degree minimises |N(x) \\ S|, the number of
new boundary vertices, i.e. the growth of the replication factor.

Implementation (all loops in numba, one core):

* incidence CSR over the non-self-loop edges: for each vertex the ids of its edges
  and the opposite endpoints (int32 unless the graph needs int64); lists are compacted
  lazily (assigned entries are swapped past a per-vertex live end), so every edge is
  looked at O(1) times per endpoint between assignments;
* the priority queue is a bucket queue keyed by remaining degree (doubly linked lists
  per key, pointer to the lowest non-empty bucket): insert, decrease-key and delete
  are O(1); the scan for the minimum is paid for by the edges of the popped vertex;
* seed vertices: a seeded random permutation of the vertices is scanned once; the
  first pass accepts vertices with remaining degree <= 2 x the mean degree
  (2|E|/|V|), as the reference implementation does, the second pass any vertex with
  edges left. This replaces the reference code's "random start, probe on" scan with
  an O(|V|)-total cursor and is deterministic by ``seed``.

Choices where the papers are silent (also in docs/methods.md):

* ties in the queue: the most recently inserted vertex of the minimal key first;
* balance: parts 0..p-2 can exceed the capacity by at most the remaining degree of
  the last core vertex (its edges are assigned unconditionally), so every part holds
  at most ``floor(alpha |E| / p) + 1 + max_degree`` edges; with alpha = 1 the leftover
  part p-1 holds at most ``|E| / p`` edges;
* self-loops (absent from Graph-derived edge lists) do not take part in the
  expansion; afterwards each goes to the part of its vertex's lowest-id other edge
  (no new replica), or, for a vertex that has only self-loops, to the least-loaded
  part (ties: lowest id).

The expansion kernel is shared with HEP's NE++ phase (:mod:`.hep`): vertices flagged
"high" have no adjacency stored, are never queued or used as seeds, and their edges
to an expanding vertex are taken like edges to a core vertex. With no high vertex the
kernel is exactly NE.
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import check_no_extra, check_real, prepare, seed_state

_TAG = 0x4E45  # "NE": seed-vertex order; HEP uses the same stream so that tau -> inf gives NE


# ----------------------------------------------------------------------- shared helpers
def index_dtype(n: int, m: int):
    """int32 index arrays unless vertex or edge ids do not fit."""
    return np.int32 if max(n, m) < 2**31 - 1 else np.int64


def seed_vertex_order(name: str, seed, n: int) -> np.ndarray:
    """Seeded random permutation of the vertices (order in which seed vertices are tried)."""
    rng = np.random.Generator(np.random.PCG64(seed_state(name, seed, _TAG, 4)))
    return rng.permutation(n).astype(index_dtype(n, 0), copy=False)


@numba.njit(cache=True)
def _count_incidence(src, dst, stored, ptr):
    """ptr[v+1] = number of non-self-loop edges of stored vertex v; returns their total."""
    n = ptr.shape[0] - 1
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        if u == v:
            continue
        if stored[u]:
            ptr[u + 1] += 1
        if stored[v]:
            ptr[v + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    return ptr[n]


@numba.njit(cache=True)
def _fill_incidence(src, dst, stored, ptr, end, inc_e, inc_v):
    n = ptr.shape[0] - 1
    for i in range(n):
        end[i] = ptr[i]
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        if u == v:
            continue
        if stored[u]:
            j = end[u]
            inc_e[j] = e
            inc_v[j] = v
            end[u] = j + 1
        if stored[v]:
            j = end[v]
            inc_e[j] = e
            inc_v[j] = u
            end[v] = j + 1


def incidence(src: np.ndarray, dst: np.ndarray, n: int, stored: np.ndarray):
    """Incidence CSR of the non-self-loop edges at the ``stored`` vertices.

    Returns ``(ptr, end, inc_e, inc_v)``: the entries of v are
    ``inc_e[ptr[v]:end[v]]`` (edge ids) and ``inc_v[...]`` (opposite endpoints);
    ``end`` starts at ``ptr[1:]`` and shrinks as the kernels compact the lists.
    """
    ptr = np.zeros(n + 1, dtype=np.int64)
    total = int(_count_incidence(src, dst, stored, ptr))
    idt = index_dtype(n, src.shape[0])
    inc_e = np.empty(total, dtype=idt)
    inc_v = np.empty(total, dtype=idt)
    end = np.empty(n, dtype=np.int64)
    _fill_incidence(src, dst, stored, ptr, end, inc_e, inc_v)
    return ptr, end, inc_e, inc_v


@numba.njit(cache=True)
def assign_leftovers(src, dst, parts, loads, part):
    """Every unassigned non-self-loop edge goes to ``part``."""
    for e in range(src.shape[0]):
        if parts[e] < 0 and src[e] != dst[e]:
            parts[e] = part
            loads[part] += 1


@numba.njit(cache=True)
def place_self_loops(src, dst, parts, loads, first_part):
    """Self-loop (v, v) -> part of v's lowest-id other edge, else the least-loaded part.

    ``first_part``: int64 [n] scratch, filled with -1 by the caller.
    """
    m = src.shape[0]
    for e in range(m):
        u = src[e]
        v = dst[e]
        if u == v:
            continue
        if first_part[u] < 0:
            first_part[u] = parts[e]
        if first_part[v] < 0:
            first_part[v] = parts[e]
    for e in range(m):
        v = src[e]
        if v != dst[e]:
            continue
        if first_part[v] < 0:
            best = 0
            for i in range(1, loads.shape[0]):
                if loads[i] < loads[best]:
                    best = i
            first_part[v] = best
        parts[e] = first_part[v]
        loads[first_part[v]] += 1


def finish_self_loops(src: np.ndarray, dst: np.ndarray, n: int, parts: np.ndarray,
                      loads: np.ndarray, num_loops: int) -> None:
    if num_loops:
        place_self_loops(src, dst, parts, loads, np.full(n, -1, dtype=np.int64))


@numba.njit(cache=True)
def count_self_loops(src, dst):
    c = 0
    for e in range(src.shape[0]):
        if src[e] == dst[e]:
            c += 1
    return c


@numba.njit(cache=True)
def max_degree(ptr, end):
    best = 0
    for v in range(end.shape[0]):
        d = end[v] - ptr[v]
        if d > best:
            best = d
    return best


@numba.njit(cache=True, inline="always")
def swap_out(v, i, end, inc_e, inc_v):
    """Drop entry i of v's live list by swapping it with the last live entry."""
    last = end[v] - 1
    te = inc_e[i]
    inc_e[i] = inc_e[last]
    inc_e[last] = te
    tv = inc_v[i]
    inc_v[i] = inc_v[last]
    inc_v[last] = tv
    end[v] = last


@numba.njit(cache=True)
def next_seed(order, cursor, rem, blocked, limit):
    """Next vertex of ``order`` with edges left and not ``blocked`` (cursor: [pos, pass]).

    Pass 0 only accepts remaining degree <= ``limit``; pass 1 accepts any. The cursor
    stays on the returned vertex; remaining degrees only fall, so skipped vertices of
    pass 1 never qualify again. Returns -1 when no vertex has edges left.
    """
    n = order.shape[0]
    while cursor[1] < 2:
        while cursor[0] < n:
            v = order[cursor[0]]
            r = rem[v]
            if r > 0 and blocked[v] == 0 and (cursor[1] == 1 or r <= limit):
                return v
            cursor[0] += 1
        cursor[1] += 1
        cursor[0] = 0
    return -1


# ------------------------------------------------------------------------ bucket queue
@numba.njit(cache=True, inline="always")
def _q_push(v, key, qhead, qnext, qprev, qkey, qstate):
    qkey[v] = key
    qprev[v] = -1
    h = qhead[key]
    qnext[v] = h
    if h >= 0:
        qprev[h] = v
    qhead[key] = v
    if key < qstate[0]:
        qstate[0] = key
    if key > qstate[1]:
        qstate[1] = key


@numba.njit(cache=True, inline="always")
def _q_unlink(v, qhead, qnext, qprev, qkey):
    pv = qprev[v]
    nx = qnext[v]
    if pv >= 0:
        qnext[pv] = nx
    else:
        qhead[qkey[v]] = nx
    if nx >= 0:
        qprev[nx] = pv
    qkey[v] = -1


@numba.njit(cache=True, inline="always")
def _q_decrement(v, qhead, qnext, qprev, qkey, qstate):
    key = qkey[v]
    if key > 0:
        _q_unlink(v, qhead, qnext, qprev, qkey)
        _q_push(v, key - 1, qhead, qnext, qprev, qkey, qstate)


@numba.njit(cache=True)
def _q_pop(qhead, qnext, qprev, qkey, qstate):
    b = qstate[0]
    while b <= qstate[1]:
        h = qhead[b]
        if h >= 0:
            _q_unlink(h, qhead, qnext, qprev, qkey)
            qstate[0] = b
            return h
        b += 1
    qstate[0] = b
    return -1


@numba.njit(cache=True)
def _q_clear(qhead, qnext, qkey, qstate):
    for b in range(qstate[1] + 1):
        v = qhead[b]
        while v >= 0:
            qkey[v] = -1
            v = qnext[v]
        qhead[b] = -1
    qstate[0] = qhead.shape[0]
    qstate[1] = -1


# --------------------------------------------------------------------- expansion kernel
@numba.njit(cache=True, inline="always")
def _assign(e, u, v, k, parts, loads, high, rem, qhead, qnext, qprev, qkey, qstate):
    parts[e] = k
    loads[k] += 1
    if high[u] == 0:
        rem[u] -= 1
        if qkey[u] >= 0:
            _q_decrement(u, qhead, qnext, qprev, qkey, qstate)
    if high[v] == 0:
        rem[v] -= 1
        if qkey[v] >= 0:
            _q_decrement(v, qhead, qnext, qprev, qkey, qstate)


@numba.njit(cache=True)
def _add_boundary(y, k, stamp, cap, spill_cap, ptr, end, inc_e, inc_v, high, rem, core, bnd,
                  parts, loads, qhead, qnext, qprev, qkey, qstate):
    if bnd[y] == stamp:
        return
    bnd[y] = stamp
    if high[y]:
        return  # NE++: a high-degree vertex is never expanded (and has no stored list)
    if core[y] == 0:
        _q_push(y, rem[y], qhead, qnext, qprev, qkey, qstate)
    i = ptr[y]
    while i < end[y]:
        e = inc_e[i]
        if parts[e] >= 0:
            swap_out(y, i, end, inc_e, inc_v)
            continue
        z = inc_v[i]
        if high[z]:
            # HEP: edges to high-degree vertices are taken as if the hub were core; once
            # part k is over the global capacity they spill to part k+1 (reference code).
            target = k if loads[k] < spill_cap else k + 1
            _assign(e, y, z, target, parts, loads, high, rem, qhead, qnext, qprev, qkey, qstate)
            swap_out(y, i, end, inc_e, inc_v)
        elif core[z] or (bnd[z] == stamp and loads[k] < cap):
            _assign(e, y, z, k, parts, loads, high, rem, qhead, qnext, qprev, qkey, qstate)
            swap_out(y, i, end, inc_e, inc_v)
        else:
            i += 1


@numba.njit(cache=True)
def _occupy(x, k, stamp, cap, spill_cap, ptr, end, inc_e, inc_v, high, rem, core, bnd,
            parts, loads, qhead, qnext, qprev, qkey, qstate):
    core[x] = 1
    if rem[x] == 0:
        return
    _add_boundary(x, k, stamp, cap, spill_cap, ptr, end, inc_e, inc_v, high, rem, core, bnd,
                  parts, loads, qhead, qnext, qprev, qkey, qstate)
    i = ptr[x]
    while i < end[x]:
        e = inc_e[i]
        if parts[e] < 0:
            z = inc_v[i]
            if bnd[z] != stamp:
                # y joins S; since x is core, this assigns (z, x) to part k
                _add_boundary(z, k, stamp, cap, spill_cap, ptr, end, inc_e, inc_v, high, rem,
                              core, bnd, parts, loads, qhead, qnext, qprev, qkey, qstate)
            if parts[e] < 0:
                # z was already in S but the capacity stopped that edge: a core vertex
                # keeps no edge behind, so take it now
                _assign(e, x, z, k, parts, loads, high, rem, qhead, qnext, qprev, qkey, qstate)
        swap_out(x, i, end, inc_e, inc_v)


@numba.njit(cache=True)
def expand(ptr, end, inc_e, inc_v, high, rem, core, bnd, qhead, qnext, qprev, qkey, qstate,
           order, cursor, n_expand, cap, spill_cap, seed_limit, parts, loads):
    """Grow parts 0 .. n_expand-1 by neighbour expansion (module docstring)."""
    for k in range(n_expand):
        stamp = k + 1
        exhausted = False
        while loads[k] < cap:
            x = _q_pop(qhead, qnext, qprev, qkey, qstate)
            if x < 0:
                x = next_seed(order, cursor, rem, core, seed_limit)
                if x < 0:
                    exhausted = True
                    break
            _occupy(x, k, stamp, cap, spill_cap, ptr, end, inc_e, inc_v, high, rem, core, bnd,
                    parts, loads, qhead, qnext, qprev, qkey, qstate)
        _q_clear(qhead, qnext, qkey, qstate)
        if exhausted:
            break


def run_expansion(src: np.ndarray, dst: np.ndarray, n: int, p: int, order: np.ndarray,
                  high: np.ndarray, cap: int, spill_cap: int, seed_limit: float,
                  parts: np.ndarray, loads: np.ndarray) -> None:
    """Allocate the expansion state and grow parts 0..p-2 (shared by NE and HEP's NE++).

    ``high``: uint8 [n], 1 for vertices NE++ skips (all zeros for NE). Vertices with
    ``high`` set are also blocked as seeds through ``core`` (they never expand).
    """
    stored = (high == 0).view(np.uint8)
    ptr, end, inc_e, inc_v = incidence(src, dst, n, stored)
    idt = inc_e.dtype
    rem = (end - ptr[:-1]).astype(idt)
    maxdeg = int(max_degree(ptr, end))
    core = high.copy()  # high vertices behave as core: never seeds, never queued twice
    bnd = np.zeros(n, dtype=idt)
    qhead = np.full(maxdeg + 1, -1, dtype=idt)
    qnext = np.empty(n, dtype=idt)
    qprev = np.empty(n, dtype=idt)
    qkey = np.full(n, -1, dtype=idt)
    qstate = np.array([maxdeg + 1, -1], dtype=np.int64)
    cursor = np.zeros(2, dtype=np.int64)
    expand(ptr, end, inc_e, inc_v, high, rem, core, bnd, qhead, qnext, qprev, qkey, qstate,
           order, cursor, p - 1, cap, spill_cap, seed_limit, parts, loads)


# ---------------------------------------------------------------------------- partitioner
@partitioner("ne", kind="vertex")
def ne(edges: EdgeList, topology: Topology, *, seed: int, alpha: float = 1.0,
       **params) -> np.ndarray:
    """Neighbour Expansion edge -> part assignment (int64 [M]); ``alpha``: balance factor."""
    check_no_extra("ne", params)
    alpha = check_real("ne", "alpha", alpha, 0.0)
    if alpha <= 0.0:
        raise CdfgnnError(f"partitioner 'ne': alpha must be > 0, got {alpha!r}")
    src, dst, n, p = prepare("ne", edges, topology)
    order = seed_vertex_order("ne", seed, n)
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    loops = int(count_self_loops(src, dst))
    m_plain = m - loops
    parts = np.full(m, -1, dtype=np.int64)
    loads = np.zeros(p, dtype=np.int64)
    cap = int(alpha * m_plain / p) + 1
    seed_limit = 2.0 * (2.0 * m_plain / n)
    run_expansion(src, dst, n, p, order, np.zeros(n, dtype=np.uint8), cap, cap, seed_limit,
                  parts, loads)
    assign_leftovers(src, dst, parts, loads, p - 1)
    finish_self_loops(src, dst, n, parts, loads, loops)
    return parts
