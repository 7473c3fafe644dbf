"""Distributed Neighbour Expansion (DNE; Hanai et al., VLDB 2019), simulated on one core.

CDFGNN (arXiv 2408.00232) Table 3 compares HEP, DNE and EBV. DNE grows all p parts at
the same time, in synchronous rounds, each part from its own seed vertex. The
capacity of a part is ``floor(alpha |E| / p) + 1`` edges (alpha = 1.1); a part that
reaches it stops expanding. One round:

1. **Select.** Every part i below capacity takes from its boundary queue (vertices
   holding an edge of part i, keyed by remaining degree = incident edges not yet
   allocated to any part) the ``max(1, floor(ratio * |queue_i|))`` vertices of least
   remaining degree (ratio = 0.1, the reference code's expansion ratio), stopping
   early once ``load_i + sum of their remaining degrees`` reaches the capacity. A
   part whose queue is empty takes a seed vertex instead (seeded permutation, first
   preferring remaining degree <= 2 x mean degree, as in :mod:`.ne`).
2. **One-hop allocation.** Each part requests every unallocated edge of its selected
   vertices. An edge requested by several parts in the same round goes to the
   requester with the lowest load at the start of the round (ties: lowest part id).
3. **Two-hop allocation.** For every vertex that joined a part in this round, each of
   its unallocated edges (y, z) whose endpoints are both already in some part goes to
   the least-loaded such part that is below capacity (ties: lowest id). This closes
   triangles without creating replicas, like NE's boundary rule.
4. Parts enter the vertices that gained a replica into their queues.

Rounds repeat until every edge is allocated; with alpha >= 1 some part is always
below capacity, so every round allocates at least one edge.

What is simulated and how (the reference is MPI + OpenMP, this is one process):

* the p expansion processes and the edge-owner processes are loops over arrays; a
  round's phases run in the order above, so every part selects from the state at the
  start of the round and conflicts are resolved as if all requests arrived together;
  conflict resolution is deterministic (lowest load, then lowest id) where the
  reference uses whichever atomic compare-and-swap wins;
* two-hop requests are served one vertex after the other, each seeing the loads left
  by the previous one (the reference serves them in parallel with per-thread counters);
* the boundary queue of part i is a binary min-heap keyed by (remaining degree,
  vertex id). Keys are refreshed lazily: when a popped entry's degree has fallen, it
  is pushed back with the current degree, so the selected vertex's key is exact and
  no larger than every stored key (the reference re-sorts its queue each round with
  the degrees of the vertices touched in the round);
* a part selects at most ``|V| // p`` vertices per round (bounded round buffer);
* balance: a part can pass its capacity only through the edges of the vertex selected
  last, so every part holds at most ``floor(alpha |E| / p) + max_degree`` edges;
* self-loops do not take part; each goes to the part of its vertex's lowest-id other
  edge (or the least-loaded part), as in :mod:`.ne`.
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import (check_no_extra, check_real, has_bit, new_bitset,
                                                 prepare, seed_state, set_bit)
from cdfgnn.partition.vertexcut.ne import (count_self_loops, finish_self_loops, incidence,
                                           index_dtype, max_degree, next_seed, swap_out)

_TAG = 0x444E45  # "DNE"
_SHIFT = np.int64(32)
_LOW32 = np.int64(0xFFFFFFFF)


# ------------------------------------------------------------------ per-part binary heaps
@numba.njit(cache=True, inline="always")
def _h_push(heap, hsize, seg, i, key):
    base = i * seg
    pos = hsize[i]
    if pos >= seg:
        raise RuntimeError("dne: boundary heap overflow (bound violated)")
    hsize[i] = pos + 1
    while pos > 0:
        parent = (pos - 1) >> 1
        pk = heap[base + parent]
        if pk <= key:
            break
        heap[base + pos] = pk
        pos = parent
    heap[base + pos] = key


@numba.njit(cache=True, inline="always")
def _h_pop(heap, hsize, seg, i):
    base = i * seg
    top = heap[base]
    size = hsize[i] - 1
    hsize[i] = size
    if size > 0:
        key = heap[base + size]
        pos = 0
        while True:
            c = 2 * pos + 1
            if c >= size:
                break
            if c + 1 < size and heap[base + c + 1] < heap[base + c]:
                c += 1
            if heap[base + c] >= key:
                break
            heap[base + pos] = heap[base + c]
            pos = c
        heap[base + pos] = key
    return top


@numba.njit(cache=True, inline="always")
def _wins(i, j, loads):
    """Does part i beat part j for a contested edge (lower load, then lower id)?"""
    return loads[i] < loads[j] or (loads[i] == loads[j] and i < j)


# ----------------------------------------------------------------------------- one round
@numba.njit(cache=True)
def _select_and_request(i, ratio, quota_cap, cap, rem, heap, hsize, seg, order, cursor,
                        seed_limit, blocked, sel, nsel, ptr, end, inc_e, inc_v, parts, loads):
    """Phase 1+2 for part i: pick vertices, request their edges; returns the new nsel."""
    if loads[i] >= cap:
        return nsel
    quota = int(ratio * hsize[i])
    if quota > quota_cap:
        quota = quota_cap
    if quota < 1:
        quota = 1
    start = nsel
    pending = 0
    while nsel - start < quota and loads[i] + pending < cap and hsize[i] > 0:
        key = _h_pop(heap, hsize, seg, i)
        v = key & _LOW32
        r = rem[v]
        if r == 0:
            continue
        if r < (key >> _SHIFT):
            _h_push(heap, hsize, seg, i, (np.int64(r) << _SHIFT) | v)
            continue
        sel[nsel] = v
        nsel += 1
        pending += r
    if nsel == start:
        v = next_seed(order, cursor, rem, blocked, seed_limit)
        if v >= 0:
            cursor[0] += 1  # the seed's edges are all allocated this round
            sel[nsel] = v
            nsel += 1
    claim = -2 - i
    for t in range(start, nsel):
        v = sel[t]
        k = ptr[v]
        while k < end[v]:
            e = inc_e[k]
            cur = parts[e]
            if cur >= 0:
                swap_out(v, k, end, inc_e, inc_v)
                continue
            if cur == -1 or _wins(i, -2 - cur, loads):
                parts[e] = claim
            k += 1
    return nsel


@numba.njit(cache=True)
def _allocate(e, u, v, i, parts, loads, rem):
    parts[e] = i
    loads[i] += 1
    rem[u] -= 1
    rem[v] -= 1


@numba.njit(cache=True)
def _join(w, i, rep, rem, heap, hsize, seg, touched, nt, tflag):
    """w got an edge of part i: record the replica, queue w, mark it for the two-hop pass."""
    if not has_bit(rep, w, i):
        set_bit(rep, w, i)
        if rem[w] > 0:
            _h_push(heap, hsize, seg, i, (np.int64(rem[w]) << _SHIFT) | w)
        if tflag[w] == 0:
            tflag[w] = 1
            touched[nt] = w
            nt += 1
    return nt


@numba.njit(cache=True)
def _dne_rounds(ptr, end, inc_e, inc_v, rem, rep, heap, hsize, seg, order, cursor, seed_limit,
                blocked, sel, sel_start, touched, tflag, ratio, quota_cap, cap, parts, loads,
                remaining):
    p = loads.shape[0]
    words = rep.shape[1]
    rounds = 0
    while remaining > 0:
        rounds += 1
        before = remaining
        # phases 1 + 2: selection and requests (state of the round start)
        nsel = 0
        for i in range(p):
            sel_start[i] = nsel
            nsel = _select_and_request(i, ratio, quota_cap, cap, rem, heap, hsize, seg, order,
                                       cursor, seed_limit, blocked, sel, nsel, ptr, end, inc_e,
                                       inc_v, parts, loads)
        sel_start[p] = nsel
        # every requested edge goes to its winner
        nt = 0
        for i in range(p):
            claim = -2 - i
            for t in range(sel_start[i], sel_start[i + 1]):
                v = sel[t]
                k = ptr[v]
                while k < end[v]:
                    e = inc_e[k]
                    cur = parts[e]
                    if cur >= 0:
                        swap_out(v, k, end, inc_e, inc_v)
                        continue
                    if cur == claim:
                        z = inc_v[k]
                        _allocate(e, v, z, i, parts, loads, rem)
                        remaining -= 1
                        nt = _join(v, i, rep, rem, heap, hsize, seg, touched, nt, tflag)
                        nt = _join(z, i, rep, rem, heap, hsize, seg, touched, nt, tflag)
                        swap_out(v, k, end, inc_e, inc_v)
                        continue
                    k += 1
        # phase 3: two-hop allocation around the vertices that joined a part
        for t in range(nt):
            y = touched[t]
            tflag[y] = 0
            k = ptr[y]
            while k < end[y] and rem[y] > 0:
                e = inc_e[k]
                if parts[e] >= 0:
                    swap_out(y, k, end, inc_e, inc_v)
                    continue
                z = inc_v[k]
                best = -1
                for w in range(words):
                    common = rep[y, w] & rep[z, w]
                    if common == 0:
                        continue
                    for b in range(64):
                        if (common >> np.uint64(b)) & np.uint64(1):
                            i = 64 * w + b
                            if loads[i] < cap and (best < 0 or loads[i] < loads[best]):
                                best = i
                if best >= 0:
                    _allocate(e, y, z, best, parts, loads, rem)
                    remaining -= 1
                    swap_out(y, k, end, inc_e, inc_v)
                    continue
                k += 1
        if remaining == before:
            raise RuntimeError("dne: a round allocated no edge")
    return rounds


@partitioner("dne", kind="vertex")
def dne(edges: EdgeList, topology: Topology, *, seed: int, alpha: float = 1.1,
        expand_ratio: float = 0.1, **params) -> np.ndarray:
    """DNE edge -> part assignment (int64 [M]); ``alpha`` balance factor (>= 1),
    ``expand_ratio`` fraction of a part's boundary expanded per round."""
    check_no_extra("dne", params)
    alpha = check_real("dne", "alpha", alpha, 1.0)
    expand_ratio = check_real("dne", "expand_ratio", expand_ratio, 0.0, 1.0)
    if expand_ratio <= 0.0:
        raise CdfgnnError(f"partitioner 'dne': expand_ratio must be in (0, 1], got {expand_ratio!r}")
    src, dst, n, p = prepare("dne", edges, topology)
    rng = np.random.Generator(np.random.PCG64(seed_state("dne", seed, _TAG, 4)))
    order = rng.permutation(n).astype(index_dtype(n, 0), copy=False)
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    if n >= 2**32:
        raise CdfgnnError(f"partitioner 'dne': at most 2**32 vertices supported, got {n}")
    loops = int(count_self_loops(src, dst))
    m_plain = m - loops
    parts = np.full(m, -1, dtype=np.int64)
    loads = np.zeros(p, dtype=np.int64)
    if m_plain:
        cap = int(alpha * m_plain / p) + 1
        ptr, end, inc_e, inc_v = incidence(src, dst, n, np.ones(n, dtype=np.uint8))
        idt = inc_e.dtype
        rem = (end - ptr[:-1]).astype(idt)
        maxdeg = int(max_degree(ptr, end))
        # part i's heap holds <= |V_i| <= 2 * load_i entries, load_i < cap + maxdeg
        seg = min(n, 2 * (cap + maxdeg)) + 2
        heap = np.empty(p * seg, dtype=np.int64)
        hsize = np.zeros(p, dtype=np.int64)
        quota_cap = max(1, n // p)
        sel = np.empty(p * quota_cap + p, dtype=idt)
        _dne_rounds(ptr, end, inc_e, inc_v, rem, new_bitset(n, p), heap, hsize, seg, order,
                    np.zeros(2, dtype=np.int64), 2.0 * (2.0 * m_plain / n),
                    np.zeros(n, dtype=np.uint8), sel, np.zeros(p + 1, dtype=np.int64),
                    np.empty(n, dtype=idt), np.zeros(n, dtype=np.uint8), expand_ratio,
                    quota_cap, cap, parts, loads, m_plain)
    finish_self_loops(src, dst, n, parts, loads, loops)
    return parts
