"""EBV with CDFGNN's hierarchical host term (CDFGNN, arXiv 2408.00232, Sec. 6, eq. 24).

Edges are visited in ascending order of deg(u) + deg(v) (full degrees, a self-loop
counting twice; stable, so equal sums keep edge id order) and each edge (u, v) goes to

    argmin_i Eva(i),  Eva(i) = (1 - gamma) * ([i not in d_rep(u)] + [i not in d_rep(v)])
                             + gamma * ([host(i) not in h_rep(u)] + [host(i) not in h_rep(v)])
                             + alpha * ecount[i] / (|E| / p)
                             + beta  * vcount[i] / norm

with ties to the lowest part id. d_rep(x): devices holding x; h_rep(x): hosts holding
x (a host joins as soon as x lands on any of its devices); host(i) = i // dph;
ecount[i], vcount[i]: edges and vertex replicas on device i so far.

Parameters: ``gamma`` (default 0.1; 0.0 is plain EBV), ``alpha`` = ``beta`` = 1,
``vertex_norm``: ``"vertices"`` (default, norm = |V| / p as printed in eq. 24, |V| =
``edges.num_nodes`` including isolated vertices) or ``"replicas"`` (norm = current
total replicas / p, the public EBV code; the term is 0 while no replica exists, where
the public code divides by zero). ``order``: ``"degree"`` (default, the ascending
deg(u) + deg(v) order above, from the public EBV code; CDFGNN does not state one),
``"shuffle"`` (a seeded uniform permutation, the line the public code leaves commented
out before its sort) or ``"input"`` (edge id order). ``seed`` is validated and used
only by ``"shuffle"``: the other orders and the tie rule are deterministic.

The two indicator sums are evaluated as ``xd + gamma * (xh - xd)`` (algebraically
eq. 24) so that when every host has one device (h_rep == d_rep, xh == xd) the gamma
term is exactly 0.0 and the partition is bit-for-bit the gamma = 0 one, as the paper
states for 2 hosts x 1 GPU.
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import (STREAM_ORDERS, check_choice, check_no_extra,
                                                 check_real, has_bit, index_dtype, new_bitset,
                                                 parts_buffer, prepare, seed_state, set_bit,
                                                 stream_endpoints, stream_order, unstream)

_TAG = 0x454256  # "EBV"
VERTEX_NORMS = ("vertices", "replicas")
EBV_ORDERS = ("degree",) + STREAM_ORDERS


@numba.njit(cache=True)
def _max_degree_sum(src, dst, deg):
    best = 0
    for e in range(src.shape[0]):
        key = deg[src[e]] + deg[dst[e]]
        if key > best:
            best = key
    return best


@numba.njit(cache=True)
def _degree_sum_order(src, dst, deg, counts, order):
    """Stable counting sort of edge ids by deg(src) + deg(dst); ``counts`` zeroed, len max+2."""
    m = src.shape[0]
    for e in range(m):
        counts[deg[src[e]] + deg[dst[e]] + 1] += 1
    for j in range(1, counts.shape[0]):
        counts[j] += counts[j - 1]
    for e in range(m):
        key = deg[src[e]] + deg[dst[e]]
        order[counts[key]] = e
        counts[key] += 1


@numba.njit(cache=True)
def _ebv_kernel(s, d, p, dph, gamma, alpha, beta, edge_avg, vertex_avg,
                by_replicas, drep, hrep, ecount, vcount, parts):
    total_replicas = 0
    for k in range(s.shape[0]):
        u = s[k]
        v = d[k]
        norm = total_replicas / p if by_replicas else vertex_avg
        best = np.inf
        best_i = 0
        for i in range(p):
            h = i // dph
            xd = 0.0
            if not has_bit(drep, u, i):
                xd += 1.0
            if not has_bit(drep, v, i):
                xd += 1.0
            xh = 0.0
            if not has_bit(hrep, u, h):
                xh += 1.0
            if not has_bit(hrep, v, h):
                xh += 1.0
            score = xd + gamma * (xh - xd) + alpha * (ecount[i] / edge_avg)
            if norm > 0.0:
                score += beta * (vcount[i] / norm)
            if score < best:  # strict: ties stay with the lowest part id
                best = score
                best_i = i
        parts[k] = best_i
        ecount[best_i] += 1
        h = best_i // dph
        # checking after each set_bit makes a self-loop add one replica, not two
        if not has_bit(drep, u, best_i):
            set_bit(drep, u, best_i)
            vcount[best_i] += 1
            total_replicas += 1
        if not has_bit(drep, v, best_i):
            set_bit(drep, v, best_i)
            vcount[best_i] += 1
            total_replicas += 1
        set_bit(hrep, u, h)
        set_bit(hrep, v, h)


@partitioner("ebv", kind="vertex")
def ebv(edges: EdgeList, topology: Topology, *, seed: int, gamma: float = 0.1,
        alpha: float = 1.0, beta: float = 1.0, vertex_norm: str = "vertices",
        order: str = "degree", **params) -> np.ndarray:
    """Hierarchical EBV edge -> part assignment (int64 [M]); gamma = 0 is plain EBV."""
    check_no_extra("ebv", params)
    gamma = check_real("ebv", "gamma", gamma, 0.0, 1.0)
    alpha = check_real("ebv", "alpha", alpha, 0.0)
    beta = check_real("ebv", "beta", beta, 0.0)
    check_choice("ebv", "vertex_norm", vertex_norm, VERTEX_NORMS)
    check_choice("ebv", "order", order, EBV_ORDERS)
    src, dst, n, p = prepare("ebv", edges, topology)
    seed_state("ebv", seed, _TAG, 1)  # validates seed; only order="shuffle" uses it
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    if order == "degree":
        deg = np.bincount(src, minlength=n)
        deg += np.bincount(dst, minlength=n)
        visit = np.empty(m, dtype=index_dtype(m))
        _degree_sum_order(src, dst, deg,
                          np.zeros(_max_degree_sum(src, dst, deg) + 2, dtype=np.int64), visit)
        del deg
    else:
        visit = stream_order("ebv", order, m, seed, _TAG)
    s, d = stream_endpoints(src, dst, visit, n)
    parts = parts_buffer(m, p)
    _ebv_kernel(s, d, p, topology.devices_per_host, gamma, alpha, beta, m / p, n / p,
                vertex_norm == "replicas", new_bitset(n, p, compact=True),
                new_bitset(n, topology.hosts, compact=True),
                np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64), parts)
    del s, d
    return unstream(visit, parts)
