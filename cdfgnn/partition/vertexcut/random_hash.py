"""Random vertex cut: every undirected edge goes to a uniformly random part.

This is the model of CoFree-GNN Theorem 4.2 (arXiv 2308.03209; Table 4's "Random"): each edge
independently and uniformly to one of the p parts. It is realised as a salted hash of
the edge rather than a draw per position::

    part(u, v) = mix64(mix64(min(u, v) ^ salt) ^ max(u, v)) mod p

with ``mix64`` the SplitMix64 finaliser and ``salt`` drawn from the seed. Hashing the
canonical (unordered) endpoint pair makes the result independent of edge order and of
the orientation of each edge; duplicate edges (multigraph input) share a part. For
distinct edges, the parts behave as independent uniform draws (modulo bias <= p/2**64).
Topology only supplies p = hosts * devices_per_host: hashing ignores hosts.
"""
from __future__ import annotations

import numpy as np

from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import check_no_extra, mix64_inplace, prepare, seed_state

_TAG = 0x52414E44  # "RAND": separates this salt from the other partitioners' salts


@partitioner("random", kind="vertex")
def random_vertex_cut(edges: EdgeList, topology: Topology, *, seed: int, **params) -> np.ndarray:
    """Uniform random edge -> part assignment (int64 [M]) by salted hash of the edge."""
    check_no_extra("random", params)
    src, dst, _, p = prepare("random", edges, topology)
    salt = seed_state("random", seed, _TAG, 1)[0]
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    # Two m-sized uint64 buffers in total: h (becomes the result) and tmp (scratch).
    h = np.minimum(src, dst).view(np.uint64)
    tmp = np.empty_like(h)
    h ^= salt
    mix64_inplace(h, tmp)
    np.maximum(src, dst, out=tmp.view(np.int64))
    h ^= tmp
    mix64_inplace(h, tmp)
    del tmp
    np.remainder(h, np.uint64(p), out=h)
    return h.view(np.int64)
