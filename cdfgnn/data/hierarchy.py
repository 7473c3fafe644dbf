"""Hierarchical locality of the synthetic twins: nested blocks and a Rent-like leak.

**The hierarchy.** A binary tree of K = ceil(log2 n) + EXTRA_LEVELS levels whose nodes
split their share of the graph u : 1 - u with ``u ~ U(1/2 - SPLIT_SPREAD, 1/2 +
SPLIT_SPREAD)`` (a binomial cascade, so blocks of one level differ in size as real
communities do, and P parts fit it as well for P = 3 as for P = 4). The vertices sit at
the cascade's quantiles in a seeded order: vertex v has a position ``pos`` in [0, n) and
a leaf ``code`` in [0, 2^K), non-decreasing in the position. The *level-k block* of v is
``code >> k``, a contiguous range of positions (level 0: v's leaf, about one vertex;
level K: the whole graph); two vertices *part* at the lowest level whose block holds
both.

**Edges (three locality parameters).** Vertex i with degree propensity ``theta_i`` has a
*reach* ``r_i = max(sigma n (theta_i / d)^alpha, KAPPA theta_i, 2)`` (``d`` the mean of
theta): ``sigma`` (``reach``) is the reach of an average-degree vertex as a share of the
graph, ``alpha`` (``hub_reach``) lets hubs reach further (alpha = 1: reach ∝ degree), and
the floor ``KAPPA theta_i`` (KAPPA = 1) keeps a vertex's nearest block at least as large
as its expected degree, so that no block has to be a clique (a constant of the model,
the same for every twin, not a knob). Each edge stub of i draws a span
``S = r_i U^(-1/beta)`` (Pareto with scale ``r_i``, exponent ``beta`` = ``decay``) and
goes to the smallest block of i holding at least S vertices: level k with probability

    q_ik = F_i(k) - F_i(k - 1),   F_i(k) = 1 - (s_ik / r_i)^(-beta) for s_ik > r_i
                                   (0 below, 1 at the root),

``s_ik`` the size of i's level-k block. The share of i's edges that leave a block of
``s >= r_i`` vertices is ``(s / r_i)^(-beta)``: Rent's rule with exponent ``1 - beta``
(a block's boundary grows as ``s^(1 - beta)``), nested to any depth. Inside the chosen
block the other end j is drawn ∝ ``w_jk = theta_j q_jk`` (one ``searchsorted`` into
per-level cumulative weights over the positions). A block emits as many level-k stubs
as it has level-k weight and every member receives ∝ its own level-k weight, so the
expected degree of j is ``2 sum_k w_jk = 2 theta_j``: the Chung-Lu degree. Self-loops
and duplicate pairs are dropped and the deficit is re-drawn (a few rounds).

**Size rule.** ``sigma`` is a share of n, so the reach in vertices scales with the
graph: a block holding a share x of the graph leaks ``(x / (sigma (theta/d)^alpha))^-beta``
of its edges at every n, and the METIS halo copies per vertex at a given P do not depend
on n while the floor ``KAPPA theta`` does not bind (``sigma n (theta/d)^alpha >= theta``;
for alpha = 1, ``sigma n >= d``). A real graph under Rent's rule has fewer halo copies
per vertex the larger it is (``(N / P)^(-beta)``): a twin of n < N vertices with the
parameters fitted to the real graph's halo copies has them at the same P, its locality
stronger in absolute terms (a reach of ``sigma n`` vertices instead of ``sigma N``).

**Classes planted on the hierarchy (no locality knob).** Latent classes never move an
edge: they are planted after the edges. The positions are cut into contiguous *class
regions*, ``chunks`` per class, each holding ``probs[c] / chunks`` of the positions, in a
seeded order; ``chunks`` is the largest power of two (regions of at least
:data:`MIN_REGION` vertices) whose regions still reach the target homophily, so classes
are as finely mixed as the homophily allows. With one region per class and the target
still out of reach, up to :data:`VOTE_ROUNDS` rounds of a majority vote move every vertex
to the class most of its neighbours have (ties keep its own), so class borders follow
the drawn edges. Then every block of level ``k <= k_top`` (blocks small enough that there
are at least :data:`MUTATION_BLOCKS_PER_CLASS` of them per class, so that class shares
stay near the probabilities) becomes a *patch* of a fresh class drawn from the
probabilities with probability ``eps`` (the deepest patch wins). ``eps`` is found by
bisection on the drawn edges (common random numbers) so that the share of edges whose
ends share a latent class equals the target homophily, or comes as near as the planting
allows (``eps = 0``; the realised share is recorded in the graph's meta).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdfgnn.arrays import unique_sorted

#: a vertex's reach is at least KAPPA times its degree propensity (model constant)
KAPPA = 1.0
#: split shares of the hierarchy's nodes are uniform in 1/2 +- SPLIT_SPREAD (model constant)
SPLIT_SPREAD = 0.15
#: levels beyond log2(n), so that a leaf holds about one vertex despite uneven splits
EXTRA_LEVELS = 2
#: patches are planted only in blocks small enough that there are this many per class
MUTATION_BLOCKS_PER_CLASS = 8
#: at most this many majority-vote rounds raise the regions' homophily toward the target
VOTE_ROUNDS = 2
#: class regions hold at least this many vertices on average
MIN_REGION = 16
#: edges sampled to evaluate the planted homophily during the bisection
HOMOPHILY_SAMPLE = 200_000
_TOPUP_ROUNDS = 6
_STUB_CHUNK = 1 << 22
_BISECT_STEPS = 30


@dataclass(frozen=True)
class Hierarchy:
    """n vertices on a binary hierarchy of K levels with random split shares.

    ``pos``: vertex -> position in [0, n); ``code``: vertex -> leaf in [0, 2^K), non-
    decreasing in the position; ``leaf_start[c]``: the first position of leaf c
    (``leaf_start[2^K] = n``), so the level-k block b holds the positions
    ``[leaf_start[b 2^k], leaf_start[(b + 1) 2^k])``.
    """

    n: int
    levels: int
    pos: np.ndarray
    code: np.ndarray
    leaf_start: np.ndarray

    @classmethod
    def draw(cls, n: int, rng: np.random.Generator) -> "Hierarchy":
        """Split shares ``u ~ U(1/2 - SPLIT_SPREAD, 1/2 + SPLIT_SPREAD)`` at every node (a
        binomial cascade): blocks of one level differ in size, as real communities do,
        and P parts for a P that is not a power of two fit the blocks as well as P = 2^j
        do. The positions sit at the cascade's quantiles ``(p + 1/2) / n``."""
        k = max(1, int(np.ceil(np.log2(max(n, 2))))) + EXTRA_LEVELS
        mass = np.ones(1)
        for _ in range(k):
            u = rng.uniform(0.5 - SPLIT_SPREAD, 0.5 + SPLIT_SPREAD, size=mass.shape[0])
            mass = np.stack([mass * u, mass * (1.0 - u)], axis=1).ravel()
        cum = np.cumsum(mass)
        cum /= cum[-1]
        leaves = 1 << k
        code_of_pos = np.minimum(np.searchsorted(cum, (np.arange(n) + 0.5) / n, side="right"),
                                 leaves - 1).astype(np.int64)
        pos = rng.permutation(n).astype(np.int64)
        leaf_start = np.searchsorted(code_of_pos, np.arange(leaves + 1), side="left")
        return cls(n, k, pos, code_of_pos[pos], leaf_start.astype(np.int64))

    def block_start(self, b: np.ndarray, k: np.ndarray) -> np.ndarray:
        """First position of block ``b`` of level ``k`` (``b = 2^(K-k)`` gives n)."""
        return self.leaf_start[b << k]

    def block_size(self, vertices: np.ndarray, k: np.ndarray | int) -> np.ndarray:
        """Vertices in the level-k block of each of ``vertices``."""
        b = self.code[vertices] >> k
        return self.leaf_start[(b + 1) << k] - self.leaf_start[b << k]

    def parting_level(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Lowest level whose block holds both u and v (0 when they share a leaf)."""
        x = (self.code[u] ^ self.code[v]).astype(np.float64)
        return np.where(x > 0, np.floor(np.log2(np.maximum(x, 1.0))) + 1, 0).astype(np.int64)


@dataclass(frozen=True)
class Locality:
    """The three locality parameters of a twin (module docstring)."""

    reach: float      # sigma: reach of an average-degree vertex, as a share of n
    decay: float      # beta: the leak beyond a block of s >= reach vertices is (s / reach)^-beta
    hub_reach: float  # alpha: reach grows as (theta / d)^alpha


def reach_of(theta: np.ndarray, n: int, loc: Locality) -> np.ndarray:
    """``r_i = max(sigma n (theta_i / d)^alpha, KAPPA theta_i, 2)`` (module docstring)."""
    d = float(theta.mean())
    return np.maximum(np.maximum(loc.reach * n * (theta / d) ** loc.hub_reach, KAPPA * theta), 2.0)


def level_cdf(size: np.ndarray, r: np.ndarray, decay: float) -> np.ndarray:
    """``F_i(k)``: P(an edge stub of a vertex of reach r stays in its block of ``size``)."""
    return np.where(size > r, 1.0 - (size / np.maximum(r, 1e-300)) ** (-decay), 0.0)


class Levels:
    """Per-level draw weights ``w_jk = theta_j q_jk`` of one graph: the destination
    sampler of the module docstring, shared by the edge sampler and the fit's surrogate."""

    def __init__(self, theta: np.ndarray, h: Hierarchy, loc: Locality):
        n, K = h.n, h.levels
        self.h, self.theta, self.loc = h, theta, loc
        self.r = reach_of(theta, n, loc)
        self.inv = np.empty(n, dtype=np.int64)
        self.inv[h.pos] = np.arange(n, dtype=np.int64)
        # level-major cumulative weights over positions, levels 0..K; level k's run is
        # offset by k * (total + 1) so one searchsorted serves every level
        self.total = float(theta.sum())
        self.flat = np.empty((K + 1) * n, dtype=np.float64)
        th_pos, r_pos = theta[self.inv], self.r[self.inv]
        prev = np.zeros(n)
        for k in range(K + 1):
            cdf = np.ones(n) if k == K else level_cdf(h.block_size(self.inv, k), r_pos, loc.decay)
            run = self.flat[k * n:(k + 1) * n]
            np.cumsum(th_pos * (cdf - prev), out=run)
            run += k * (self.total + 1.0)
            prev = cdf

    def level_of(self, src: np.ndarray, span: np.ndarray) -> np.ndarray:
        """Smallest level whose block of ``src`` holds at least ``span`` vertices
        (vectorised bisection over the levels; the root holds all n)."""
        lo = np.zeros(src.shape[0], dtype=np.int64)
        hi = np.full(src.shape[0], self.h.levels, dtype=np.int64)
        while True:
            open_ = lo < hi
            if not open_.any():
                return hi
            mid = (lo + hi) >> 1
            fits = self.h.block_size(src, mid) >= span
            hi = np.where(open_ & fits, mid, hi)
            lo = np.where(open_ & ~fits, mid + 1, lo)

    def draw(self, src: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One destination per stub of ``src``: its level from the source's reach, then a
        vertex of that level's block ∝ its level weight (may be ``src`` itself)."""
        h, n = self.h, self.h.n
        m = src.shape[0]
        span = self.r[src] * rng.random(m) ** (-1.0 / self.loc.decay)
        k = self.level_of(src, span)
        b = h.code[src] >> k
        start = h.block_start(b, k)
        end = h.block_start(b + 1, k)
        off = k * n
        lo = np.where(start > 0, self.flat[off + np.maximum(start - 1, 0)], k * (self.total + 1.0))
        hi = self.flat[off + end - 1]
        j = np.searchsorted(self.flat, lo + rng.random(m) * (hi - lo), side="right")
        # float rounding at a block's ends may step outside it
        return self.inv[np.clip(j, off + start, off + end - 1) - off]


def sample_edges(theta: np.ndarray, num_edges: float, h: Hierarchy, loc: Locality,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """About ``num_edges`` undirected edges (src < dst, unique, no self-loops, sorted by
    (src, dst)) drawn level by level as in the module docstring."""
    n = h.n
    target = int(round(num_edges))
    if n < 2 or target <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lv = Levels(theta, h, loc)
    keys = np.zeros(0, dtype=np.int64)
    want = float(target)
    for _ in range(_TOPUP_ROUNDS):
        if want < 1:
            break
        counts = rng.poisson(theta * (want / lv.total))
        drawn = int(counts.sum())
        new_parts = []
        for lo, hi in _chunks(counts):
            src = np.repeat(np.arange(lo, hi, dtype=np.int64), counts[lo:hi])
            dst = lv.draw(src, rng)
            a, c = np.minimum(src, dst), np.maximum(src, dst)
            ok = a != c
            new_parts.append(unique_sorted(a[ok] * n + c[ok]))
        new = unique_sorted(np.concatenate(new_parts)) if new_parts else keys[:0]
        before = keys.shape[0]
        keys = _merge(keys, new)
        gained = keys.shape[0] - before
        deficit = target - keys.shape[0]
        if deficit <= 0.01 * target:
            break
        # the next round's yield is about this round's gained/drawn ratio
        want = min(deficit * max(drawn, 1) / max(gained, 1), 4.0 * deficit + 16)
    return keys // n, keys % n


def planted_halo(lv: Levels, parts: list[int], sample: int, rng: np.random.Generator,
                 keep: np.ndarray | None = None) -> dict[int, tuple[float, float]]:
    """Surrogate of METIS on the model: per P, the halo copies per vertex and the cut
    share of edges of the *planted* partition into P equal ranges of positions (unions
    of the hierarchy's blocks, balanced as METIS's parts are), estimated from ``sample`` vertices whose neighbours are drawn
    from the model (a vertex of propensity theta has about theta neighbours, half its
    own stubs and half the stubs that land on it, which follow the same level law).
    ``keep`` (bool [n]): the statistics of the subgraph induced by those vertices."""
    h = lv.h
    pool = np.arange(h.n) if keep is None else np.flatnonzero(keep)
    who = rng.choice(pool, size=min(sample, pool.shape[0]), replace=False)
    counts = rng.poisson(lv.theta[who])
    src = np.repeat(who, counts)
    dst = lv.draw(src, rng)
    row = np.repeat(np.arange(who.shape[0], dtype=np.int64), counts)
    ok = src != dst if keep is None else (src != dst) & keep[dst]
    # distinct neighbours, as the drawn graph keeps them
    pair = unique_sorted(row[ok] * h.n + dst[ok])
    row, dst = pair // h.n, pair % h.n
    src = who[row]
    out = {}
    for p in parts:
        own, other = h.pos[src] * p // h.n, h.pos[dst] * p // h.n
        cross = own != other
        # distinct (sampled vertex, other part) pairs = parts that need the vertex
        pairs = unique_sorted(row[cross] * p + other[cross])
        out[p] = (pairs.shape[0] / max(who.shape[0], 1),
                  float(cross.sum()) / max(src.shape[0], 1))
    return out


def _chunks(counts: np.ndarray):
    """Vertex ranges whose stubs number at most about _STUB_CHUNK (bounded memory)."""
    cum = np.cumsum(counts)
    lo = 0
    n = counts.shape[0]
    while lo < n:
        base = cum[lo - 1] if lo else 0
        hi = int(np.searchsorted(cum, base + _STUB_CHUNK, side="right"))
        hi = min(max(hi, lo + 1), n)
        yield lo, hi
        lo = hi


def _merge(keys: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Union of two sorted unique key arrays."""
    if keys.shape[0] == 0:
        return new
    merged = np.sort(np.concatenate([keys, new]), kind="stable")
    keep = np.empty(merged.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


# ----------------------------------------------------------------- planted classes
def plant_classes(h: Hierarchy, probs: np.ndarray, src: np.ndarray, dst: np.ndarray,
                  homophily: float, rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """Latent class of every vertex (module docstring), the patch rate ``eps`` and the
    realised share of edges whose ends share a class."""
    n, K = h.n, h.levels
    c = probs.shape[0]
    k_top = max(0, K - int(np.ceil(np.log2(MUTATION_BLOCKS_PER_CLASS * c))))
    unif = [rng.random(1 << (K - k)) for k in range(k_top + 1)]
    fresh = [rng.choice(c, size=1 << (K - k), p=probs) for k in range(k_top + 1)]
    chunk_rng = rng.spawn(1)[0]
    base = class_regions(h, probs, 1, chunk_rng)

    def classes(eps: float, who: np.ndarray, regions: np.ndarray) -> np.ndarray:
        patch = np.full(who.shape[0], -1, dtype=np.int64)
        for k in range(k_top, -1, -1):   # deeper patches override
            node = h.code[who] >> k
            patch = np.where(unif[k][node] < eps, fresh[k][node], patch)
        return np.where(patch >= 0, patch, regions[who])

    m = src.shape[0]
    if m == 0:
        return classes(0.0, np.arange(n), base), 0.0, float("nan")
    pick = np.sort(rng.choice(m, size=HOMOPHILY_SAMPLE, replace=False)) if m > HOMOPHILY_SAMPLE \
        else np.arange(m)
    ends, inv = np.unique(np.concatenate([src[pick], dst[pick]]), return_inverse=True)
    a, b = inv[:pick.shape[0]], inv[pick.shape[0]:]

    def share(eps: float, regions: np.ndarray) -> float:
        cl = classes(eps, ends, regions)
        return float(np.mean(cl[a] == cl[b]))

    # the finest regions that still reach the target (classes as mixed as it allows)
    chunks = max(1, n // (MIN_REGION * c))
    while chunks > 1:
        regions = class_regions(h, probs, chunks, chunk_rng)
        if share(0.0, regions) >= homophily:
            base = regions
            break
        chunks //= 2
    for _ in range(VOTE_ROUNDS if chunks == 1 else 0):
        if share(0.0, base) >= homophily:
            break
        base = majority_vote(base, src, dst, c)
    lo, hi = 0.0, 1.0
    if share(0.0, base) <= homophily:
        hi = 0.0
    else:
        for _ in range(_BISECT_STEPS):
            mid = 0.5 * (lo + hi)
            if share(mid, base) > homophily:
                lo = mid
            else:
                hi = mid
    eps = hi
    return classes(eps, np.arange(n), base), eps, share(eps, base)


def class_regions(h: Hierarchy, probs: np.ndarray, chunks: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Class of every vertex by its position: ``chunks`` contiguous ranges per class, each
    of ``probs[c] / chunks`` of the positions, in a seeded order."""
    c = probs.shape[0]
    label = np.repeat(np.arange(c), chunks)
    order = rng.permutation(label.shape[0])
    sizes = np.repeat(probs / chunks, chunks)[order]
    bounds = np.round(np.cumsum(sizes) * h.n).astype(np.int64)
    return label[order][np.minimum(np.searchsorted(bounds, h.pos, side="right"), order.shape[0] - 1)]


def majority_vote(cls: np.ndarray, src: np.ndarray, dst: np.ndarray, c: int) -> np.ndarray:
    """Every vertex takes the class most of its neighbours have; ties and vertices
    without neighbours keep their own (sort-based counts, no N x C table)."""
    n = cls.shape[0]
    v = np.concatenate([src, dst, np.arange(n, dtype=np.int64)])
    w = np.concatenate([cls[dst], cls[src], cls])
    keys = np.sort(v * c + w)
    first = np.concatenate([[True], keys[1:] != keys[:-1]])
    uniq = keys[first]
    counts = np.diff(np.append(np.flatnonzero(first), keys.shape[0]))
    vert, kls = uniq // c, uniq % c
    # own class wins ties: it scores 2 count + 1, any other 2 count
    score = 2 * counts + (kls == cls[vert])
    order = np.lexsort((score, vert))
    last = np.concatenate([vert[order][1:] != vert[order][:-1], [True]])
    out = cls.copy()
    out[vert[order][last]] = kls[order][last]
    return out
