"""PowerGraph's greedy ("oblivious") vertex cut (Gonzalez et al., OSDI 2012, §5.2.2).

One streaming pass. With A(x) the set of parts already holding vertex x, edge (u, v)
picks its candidate parts by four cases:

1. A(u) and A(v) intersect            -> candidates A(u) ∩ A(v);
2. both non-empty, disjoint            -> A(w) of the endpoint w with the most
                                          unassigned edges (tie: A(u) ∪ A(v));
3. exactly one of them non-empty       -> that set;
4. both empty                          -> all parts;

and goes to the least-loaded candidate (fewest edges so far). Ties among equally
loaded candidates are broken uniformly at random from a seeded stream.

Choices (documented in docs/methods.md):
* "unassigned edges" of w = full degree of w (one counting pass before streaming,
  a self-loop counting twice) minus the edges of w streamed so far;
* order: ``"shuffle"`` (default, seeded permutation) or ``"input"`` (edge id order);
* no balance slack beyond least-loaded choice (case 1 may load a part above the
  mean), exactly as the paper's rules;
* a self-loop (u, u) falls in case 1 or 3/4 like any edge; topology only supplies p.
"""
from __future__ import annotations

import numba
import numpy as np

from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import (STREAM_ORDERS, any_bit, check_choice,
                                                 check_no_extra, has_bit, new_bitset, parts_buffer,
                                                 prepare, rand_below, seed_state, set_bit,
                                                 stream_endpoints, stream_order, unstream)

_TAG = 0x475245  # "GRE"

# candidate-set cases (see module docstring)
_BOTH, _ONLY_U, _ONLY_V, _UNION, _ALL = 0, 1, 2, 3, 4


@numba.njit(cache=True)
def _greedy_kernel(s, d, p, rng, remaining, rep, load, parts):
    words = rep.shape[1]
    for k in range(s.shape[0]):
        u = s[k]
        v = d[k]
        has_u = any_bit(rep, u)
        has_v = any_bit(rep, v)
        meet = False
        for w in range(words):
            if rep[u, w] & rep[v, w] != 0:
                meet = True
                break
        if meet:
            case = _BOTH
        elif has_u and has_v:
            if remaining[u] > remaining[v]:
                case = _ONLY_U
            elif remaining[v] > remaining[u]:
                case = _ONLY_V
            else:
                case = _UNION
        elif has_u:
            case = _ONLY_U
        elif has_v:
            case = _ONLY_V
        else:
            case = _ALL
        best_load = np.iinfo(np.int64).max
        best_i = -1
        ties = 0
        for i in range(p):
            if case == _BOTH:
                ok = has_bit(rep, u, i) and has_bit(rep, v, i)
            elif case == _ONLY_U:
                ok = has_bit(rep, u, i)
            elif case == _ONLY_V:
                ok = has_bit(rep, v, i)
            elif case == _UNION:
                ok = has_bit(rep, u, i) or has_bit(rep, v, i)
            else:
                ok = True
            if not ok:
                continue
            if load[i] < best_load:
                best_load = load[i]
                best_i = i
                ties = 1
            elif load[i] == best_load:
                ties += 1
                if rand_below(rng, ties) == 0:
                    best_i = i
        parts[k] = best_i
        load[best_i] += 1
        remaining[u] -= 1
        remaining[v] -= 1
        set_bit(rep, u, best_i)
        set_bit(rep, v, best_i)


@partitioner("greedy", kind="vertex")
def greedy(edges: EdgeList, topology: Topology, *, seed: int, order: str = "shuffle",
           **params) -> np.ndarray:
    """PowerGraph greedy edge -> part assignment (int64 [M])."""
    check_no_extra("greedy", params)
    check_choice("greedy", "order", order, STREAM_ORDERS)
    src, dst, n, p = prepare("greedy", edges, topology)
    rng = seed_state("greedy", seed, _TAG + 1, 1)
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    visit = stream_order("greedy", order, m, seed, _TAG)
    remaining = np.bincount(src, minlength=n)
    remaining += np.bincount(dst, minlength=n)
    if 2 * m < 2**31:  # int32 halves this randomly accessed array (cache, not just memory)
        remaining = remaining.astype(np.int32)
    s, d = stream_endpoints(src, dst, visit, n)
    parts = parts_buffer(m, p)
    _greedy_kernel(s, d, p, rng, remaining, new_bitset(n, p, compact=True),
                   np.zeros(p, dtype=np.int64), parts)
    del s, d
    return unstream(visit, parts)
