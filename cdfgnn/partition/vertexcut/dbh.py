"""Degree-Based Hashing (DBH; Xie et al., NeurIPS 2014), in CoFree-GNN Table 4 (arXiv 2308.03209).

For an edge (u, v) with full degrees d(u), d(v) (computed first, one pass; a
self-loop counts twice, as in :meth:`EdgeList.degrees`)::

    w = u if d(u) <= d(v) else v          # lower-degree endpoint, ties to the first (src)
    part(u, v) = h(w) mod p

so a low-degree vertex keeps all of its edges in one part and hubs absorb the cuts.

``hash="salted"`` (default): ``h(w) = mix64(w ^ salt)`` (SplitMix64 finaliser, salt
from the seed), so the vertex -> part map is uniform and unrelated to how ids were
numbered (ids often correlate with degree or locality, which ``w mod p`` would turn
into imbalance). ``hash="mod"``: ``h(w) = w``, the public reference code's choice;
deterministic and seed independent.
Topology only supplies p = hosts * devices_per_host.
"""
from __future__ import annotations

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Topology, partitioner
from cdfgnn.partition.vertexcut._kernels import check_no_extra, prepare, seed_state, vertex_hash_parts

_TAG = 0x444248  # "DBH"
HASHES = ("salted", "mod")


@partitioner("dbh", kind="vertex")
def dbh(edges: EdgeList, topology: Topology, *, seed: int, hash: str = "salted",
        **params) -> np.ndarray:
    """DBH edge -> part assignment (int64 [M])."""
    check_no_extra("dbh", params)
    if hash not in HASHES:
        raise CdfgnnError(f"partitioner 'dbh': hash must be one of {list(HASHES)}, got {hash!r}")
    src, dst, n, p = prepare("dbh", edges, topology)
    salt = seed_state("dbh", seed, _TAG, 1)[0]
    m = src.shape[0]
    if p == 1 or m == 0:
        return np.zeros(m, dtype=np.int64)
    deg = np.bincount(src, minlength=n)
    deg += np.bincount(dst, minlength=n)
    if hash == "salted":
        vertex_part = vertex_hash_parts(n, p, salt)
    else:
        vertex_part = np.arange(n, dtype=np.int64) % p
    take_dst = deg[src] > deg[dst]  # strict: ties keep the first endpoint
    out = vertex_part[src]
    out[take_dst] = vertex_part[dst[take_dst]]
    return out
