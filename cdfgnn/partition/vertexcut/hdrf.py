"""HDRF: High-Degree (are) Replicated First (Petroni et al., CIKM 2015).

One streaming pass; edge (u, v) goes to the part maximising

    C(p) = C_rep(u, v, p) + C_bal(p)
    C_rep(u, v, p) = g(u, p) + g(v, p),   g(x, p) = [p in A(x)] * (1 + (1 - theta(x)))
    theta(u) = delta(u) / (delta(u) + delta(v)),   theta(v) = 1 - theta(u)
    C_bal(p) = lambda * (maxsize - |p|) / (epsilon + maxsize - minsize)

where A(x) is the set of parts already holding x, delta(x) the *partial* degree of x
(edges of x seen so far, the current one included, as in the paper's streaming
setting) and |p| the edges in part p so far. Defaults lambda = 1, epsilon = 1.

Choices (documented in docs/methods.md):
* order: ``"shuffle"`` (default, seeded permutation) or ``"input"`` (edge id order);
* ties of C(p) are broken uniformly at random from a seeded stream (reservoir
  sampling over the tied parts), as in the paper's reference implementation;
* a self-loop (u, u) is scored like any edge: delta(u) grows by 2, theta = 1/2 and
  g(u, p) counts twice;
* topology only supplies p = hosts * devices_per_host (HDRF has no host term).
CoFree-GNN (arXiv 2308.03209) uses HDRF only inside HEP; this is the stand-alone partitioner.
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import (STREAM_ORDERS, check_choice, check_no_extra,
                                                 check_real, has_bit, new_bitset, parts_buffer,
                                                 prepare, rand_below, seed_state, set_bit,
                                                 stream_endpoints, stream_order, unstream)

_TAG = 0x48445246  # "HDRF"


@numba.njit(cache=True)
def _hdrf_kernel(s, d, p, lam, eps, rng, pdeg, rep, load, parts):
    maxload = 0
    for k in range(s.shape[0]):
        u = s[k]
        v = d[k]
        pdeg[u] += 1
        pdeg[v] += 1
        du = float(pdeg[u])
        dv = float(pdeg[v])
        theta_u = du / (du + dv)
        theta_v = 1.0 - theta_u
        minload = load[0]
        for i in range(1, p):
            if load[i] < minload:
                minload = load[i]
        denom = eps + (maxload - minload)
        best = -np.inf
        best_i = 0
        ties = 0
        for i in range(p):
            score = lam * (maxload - load[i]) / denom
            if has_bit(rep, u, i):
                score += 1.0 + (1.0 - theta_u)
            if has_bit(rep, v, i):
                score += 1.0 + (1.0 - theta_v)
            if score > best:
                best = score
                best_i = i
                ties = 1
            elif score == best:
                ties += 1
                if rand_below(rng, ties) == 0:
                    best_i = i
        parts[k] = best_i
        load[best_i] += 1
        if load[best_i] > maxload:
            maxload = load[best_i]
        set_bit(rep, u, best_i)
        set_bit(rep, v, best_i)


@partitioner("hdrf", kind="vertex")
def hdrf(edges: EdgeList, topology: Topology, *, seed: int, lam: float = 1.0,
         epsilon: float = 1.0, order: str = "shuffle", **params) -> np.ndarray:
    """HDRF edge -> part assignment (int64 [M]). ``lam`` is the paper's lambda
    (``lambda`` is also accepted as a parameter name)."""
    if "lambda" in params:
        if lam != 1.0:
            raise CdfgnnError("partitioner 'hdrf': give lambda either as 'lam' or as 'lambda', not both")
        lam = params.pop("lambda")
    check_no_extra("hdrf", params)
    lam = check_real("hdrf", "lambda", lam, 0.0)
    epsilon = check_real("hdrf", "epsilon", epsilon, 0.0)
    if epsilon <= 0.0:
        # epsilon > 0 keeps C_bal finite when all parts have equal size.
        raise CdfgnnError(f"partitioner 'hdrf': epsilon must be > 0, got {epsilon!r}")
    check_choice("hdrf", "order", order, STREAM_ORDERS)
    src, dst, n, p = prepare("hdrf", edges, topology)
    rng = seed_state("hdrf", seed, _TAG + 1, 1)
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    visit = stream_order("hdrf", order, m, seed, _TAG)
    # Partial degrees fit int32 unless one vertex has >= 2**31 edge endpoints.
    pdeg = np.zeros(n, dtype=np.int32 if 2 * m < 2**31 else np.int64)
    s, d = stream_endpoints(src, dst, visit, n)
    parts = parts_buffer(m, p)
    _hdrf_kernel(s, d, p, lam, epsilon, rng, pdeg, new_bitset(n, p, compact=True),
                 np.zeros(p, dtype=np.int64), parts)
    del s, d
    return unstream(visit, parts)
