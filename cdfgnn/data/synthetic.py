"""Synthetic twins of the papers' datasets: degree-corrected SBM with power-law degrees.

Follows docs/architecture.md, Datasets ("Synthetic twins"). Friendster stand-in: CDFGNN
(arXiv 2408.00232, Table 1) generates 64-dim features and 32 classes at random; the paper
does not say how, nor the split: we choose N(0,1) features, uniform labels, 65/10/25.

Generative model (all steps vectorised numpy, one ``SeedSequence`` per twin and seed):

1. **Blocks and labels.** Single-label twins: block = class, drawn with probabilities
   ``pi_c ∝ (c+1)^-class_skew`` (real label distributions are skewed, so the
   majority-class rate is a meaningful baseline); with probability ``label_noise`` a
   vertex's label is redrawn from ``pi`` while its features and edges keep following its
   block, which caps the reachable accuracy near ``1 - label_noise`` as real datasets'
   label noise does. Multi-label twins: ``num_blocks`` latent blocks; block b owns
   ``labels_per_block`` "typical" labels that a member carries with probability ``p_hi``
   each, every other label with ``p_lo``.
2. **Degree propensities.** ``theta_i = (1-u)^(-1/(gamma-1))`` (Pareto, so
   ``P(theta) ∝ theta^-gamma``), rescaled to mean ``d`` (the target average degree) and
   clipped at ``d_max = max_degree_frac * N`` with a few rescale/clip rounds.
3. **Edges (Chung-Lu inside a nested SBM, v2).** Each class block is split into
   communities of mean size ``COMMUNITY_DEGREES * d`` (log-normal sizes), and every
   vertex gets a label-independent *region* (``N / sqrt(N * community size)``
   regions). Vertex i emits ``Poisson(theta_i M' / sum(theta))`` edge stubs,
   ``M' = (1 - closure_frac) N d / 2``. A stub is homophilous with probability
   ``homophily``: it then stays in the source's community with probability
   ``community_frac`` (times ``min(1, community size / (2 theta_i))``, so a hub is not
   asked for more distinct neighbours than its community has), else goes anywhere in
   the block; any other stub goes into the source's region with probability
   ``region_frac``, else anywhere. Each draw is ∝ theta within its range: one
   ``searchsorted`` into the cumulative theta of the vertices sorted by community (or
   by region), so expected degrees stay ∝ theta. Self-loops and duplicate pairs are
   dropped and the deficit is re-sampled (a few rounds). Then **triangle closure**
   adds the remaining ``closure_frac`` of the edges: a centre v uniform over vertices
   of degree >= 2, two random neighbours u, w of v, edge u-w (a wedge whose ends are
   in different blocks is closed with probability :func:`closure_cross_accept`, which
   keeps the closed edges' homophily near ``homophily``). Duplicates fall mostly
   inside blocks, so the realised edge homophily is somewhat below ``homophily`` on
   dense small graphs (label noise lowers the label-measured value further).
   v1 (``dcsbm-powerlaw-v1``) had no communities, regions or closure: no locality
   finer than the classes (issue 11; docs/methods.md has v1 -> v2 measurements).
4. **Features.** ``x_i = snr * mu_{b_i} + eps_i`` with unit-norm random block centroids
   ``mu`` and ``eps ~ N(0, I_F)``. Pairwise class separation of one vertex is therefore
   ``~ snr * sqrt(2)`` noise standard deviations: a per-vertex classifier is well above
   chance but noisy, and averaging homophilous neighbours (what a GCN layer does)
   sharpens it. Multi-label twins add ``label_snr * (Y_i E) / sqrt(|Y_i|)`` with random
   unit label embeddings ``E`` so labels beyond the block's typical ones are learnable.
   Friendster's twin uses pure N(0,1) features and uniform labels independent of its
   latent blocks (``meta["timing_only"]``).
5. **Split.** A random permutation cut at the real dataset's train/val/test ratios;
   a twin with a tiny labelled share (papers100M: 1.09% / 0.11% / 0.19%) sets
   ``min_split_size``, the fewest vertices of each split, so that small graphs keep
   enough labelled vertices to train and evaluate on (0, every other twin: ratios alone).

``scale`` changes only N: feature width, classes, split ratios, degree exponent and
homophily are kept, and the average degree is kept up to ``min(d, N / 40)`` so the tiny
graphs stay sparse instead of turning into near-cliques.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.arrays import unique_sorted
from cdfgnn.data.graph import csr_from_sorted_pairs
from cdfgnn.errors import CdfgnnError

GENERATOR = "dcsbm-nested-closure-v2"

#: Named sizes; an int (or a decimal string) asks for that many vertices.
SCALES: dict[str, int] = {"tiny": 2_000, "small": 10_000, "medium": 100_000}
MIN_NODES = 100
#: average degree is capped at N / DENSITY_CAP_DIV so tiny graphs stay sparse
DENSITY_CAP_DIV = 40
_TOPUP_ROUNDS = 6
#: default community size, in units of the target average degree (module doc, step 3)
COMMUNITY_DEGREES = 3.0
MIN_COMMUNITY = 16
#: synth-papers100m's fewest vertices per split (its real shares give ~22 training and
#: ~4 test vertices at the tiny scale; docs/methods.md, "Synthetic twins")
MIN_SPLIT_PAPERS = 200


@dataclass(frozen=True)
class TwinSpec:
    """Shape parameters of one twin (the real dataset's where it has one)."""

    name: str
    twin_of: str | None             # real dataset it mirrors
    num_features: int
    num_classes: int                # classes, or labels for a multi-label twin
    avg_degree: float               # target 2|E|/|V| (real value, before the density cap)
    degree_exponent: float          # gamma in P(theta) ∝ theta^-gamma
    split: tuple[float, float, float]
    homophily: float                # P(an edge's destination is drawn from the source's block)
    feature_snr: float              # block-centroid norm in noise standard deviations
    class_skew: float = 0.0         # pi_c ∝ (c+1)^-skew (single-label twins)
    label_noise: float = 0.0        # P(a vertex's label is redrawn from pi, ignoring its block)
    max_degree_frac: float = 0.1    # expected-degree cap as a fraction of N
    multilabel: bool = False
    num_blocks: int = 0             # multi-label: latent blocks (0: = num_classes)
    labels_per_block: int = 0       # multi-label: typical labels of a block
    p_hi: float = 0.0               # multi-label: P(member carries a typical label)
    p_lo: float = 0.0               # multi-label: P(member carries any other label)
    label_snr: float = 0.0          # multi-label: norm of the per-label feature signal
    random_features: bool = False   # Friendster: N(0,1) features, uniform labels
    real_num_nodes: int | None = None
    # locality (generator v2): communities nested in each block, triangle closure
    community_size: float = 0.0     # mean community size (0: COMMUNITY_DEGREES x avg degree)
    community_frac: float = 0.8     # P(a homophilous stub stays in its community)
    region_frac: float = 0.8        # P(any other stub stays in its source's region)
    closure_frac: float = 0.3       # fraction of the edges made by closing wedges
    min_split_size: int = 0         # fewest vertices of each split (0: the ratios alone)


# Real values from the papers: CDFGNN Table 1 (reddit = GraphSAINT's 0.66/0.10/0.24 split,
# avg degree 99.65; products 50.52; friendster 55.06), CoFree / Sylvie tables (yelp 19.47,
# 0.75/0.10/0.15; amazon-products 264.3M directed arcs / 1.57M nodes = 168.4, train
# 1,255,968 = 0.80), CaPGNN table (flickr 10.08), OGB (arxiv 13.77, time split 54/18/28;
# products sales-rank split 8.0/1.6/90.4). Exponents, homophily and skews are
# plausible values, not fitted to the real graphs.
TWINS: dict[str, TwinSpec] = {s.name: s for s in [
    TwinSpec("synth-reddit", "reddit", 602, 41, 99.65, 2.3, (0.66, 0.10, 0.24),
             homophily=0.75, feature_snr=3.5, class_skew=0.7, label_noise=0.05,
             real_num_nodes=232_965),
    TwinSpec("synth-products", "ogbn-products", 100, 47, 50.52, 2.3, (0.0803, 0.0161, 0.9036),
             homophily=0.80, feature_snr=3.0, class_skew=1.0, label_noise=0.2,
             real_num_nodes=2_449_029),
    TwinSpec("synth-arxiv", "ogbn-arxiv", 128, 40, 13.77, 2.6, (0.537, 0.176, 0.287),
             homophily=0.65, feature_snr=3.0, class_skew=0.8, label_noise=0.2,
             real_num_nodes=169_343),
    TwinSpec("synth-yelp", "yelp", 300, 100, 19.47, 2.4, (0.75, 0.10, 0.15),
             homophily=0.65, feature_snr=1.5, multilabel=True, num_blocks=25,
             labels_per_block=6, p_hi=0.8, p_lo=0.01, label_snr=3.0, real_num_nodes=716_847),
    TwinSpec("synth-amazon", "amazon-products", 200, 107, 168.4, 2.3, (0.80, 0.05, 0.15),
             homophily=0.7, feature_snr=2.0, multilabel=True, num_blocks=30,
             labels_per_block=5, p_hi=0.8, p_lo=0.01, label_snr=4.0, real_num_nodes=1_569_960),
    TwinSpec("synth-flickr", "flickr", 500, 7, 10.08, 2.5, (0.50, 0.25, 0.25),
             homophily=0.35, feature_snr=2.5, class_skew=0.9, label_noise=0.35,
             real_num_nodes=89_250),
    # latent blocks give Friendster's twin locality; its labels ignore them (timing only)
    TwinSpec("synth-friendster", "friendster", 64, 32, 55.06, 2.5, (0.65, 0.10, 0.25),
             homophily=0.7, feature_snr=0.0, random_features=True, real_num_nodes=65_608_366),
    # OGB papers100M: 111,059,956 nodes, 1,615,685,872 directed citation arcs, so
    # 2 x arcs / nodes = 29.10 if no citation is reciprocated (symmetrised, like the others);
    # 128 features, 172 arXiv subject classes; labelled share 1.09 / 0.11 / 0.19% of the
    # nodes (train 1,207,179, val 125,265, test 214,338). Exponent and homophily as the
    # arxiv (citation) twin; min_split_size keeps small twins trainable (docs/methods.md).
    TwinSpec("synth-papers100m", "ogbn-papers100M", 128, 172, 29.10, 2.6,
             (0.01087, 0.00113, 0.00193), homophily=0.65, feature_snr=3.0, class_skew=0.8,
             label_noise=0.2, real_num_nodes=111_059_956, min_split_size=MIN_SPLIT_PAPERS),
    TwinSpec("synth-powerlaw", None, 64, 8, 20.0, 2.2, (0.6, 0.2, 0.2),
             homophily=0.7, feature_snr=2.0, class_skew=0.5, label_noise=0.1),
]}


def resolve_scale(scale: str | int) -> int:
    """Vertex count for a named scale, an int, or a decimal string (CLI/config values)."""
    if isinstance(scale, bool):
        raise CdfgnnError(f"scale must be one of {sorted(SCALES)} or a node count, got {scale!r}")
    if isinstance(scale, (int, np.integer)):
        n = int(scale)
    elif isinstance(scale, str) and scale in SCALES:
        n = SCALES[scale]
    elif isinstance(scale, str) and scale.strip().isdigit():
        n = int(scale.strip())
    else:
        raise CdfgnnError(f"scale must be one of {sorted(SCALES)} or a node count, got {scale!r}")
    if n < MIN_NODES:
        raise CdfgnnError(f"scale {scale!r} gives {n} nodes; at least {MIN_NODES} are needed")
    return n


def effective_avg_degree(spec: TwinSpec, num_nodes: int) -> float:
    """Target average degree at this size: the real one, capped so the graph stays sparse."""
    return float(min(spec.avg_degree, num_nodes / DENSITY_CAP_DIV))


def generate_twin(name: str, scale: str | int = "small", seed: int = 0) -> Graph:
    """Generate the twin ``name`` (a key of :data:`TWINS`) at ``scale``; same seed, same arrays."""
    if name not in TWINS:
        raise CdfgnnError(f"unknown synthetic twin {name!r}; valid: {', '.join(sorted(TWINS))}")
    return generate_from_spec(TWINS[name], scale, seed)


def generate_from_spec(spec: TwinSpec, scale: str | int = "small", seed: int = 0) -> Graph:
    """Generate a graph from any :class:`TwinSpec` (e.g. a registered twin with another
    average degree, ``dataclasses.replace(TWINS[name], avg_degree=...)``, as
    ``benchmarks/time_model.py`` does to match a peer's denser copy of a dataset)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CdfgnnError(f"seed must be a non-negative int, got {seed!r}")
    name = spec.name
    n = resolve_scale(scale)
    d = effective_avg_degree(spec, n)
    # one stream per stage, keyed by twin name too, so twins with the same seed differ
    ss = np.random.SeedSequence([int(seed), zlib.crc32(name.encode())])
    r_lab, r_deg, r_edge, r_feat, r_split = (np.random.default_rng(s) for s in ss.spawn(5))

    if spec.multilabel:
        blocks, y = _multilabel_blocks(spec, n, r_lab)
    elif spec.random_features:
        # edges follow latent blocks (locality), labels are uniform and independent of them
        blocks = r_lab.integers(0, spec.num_classes, size=n, dtype=np.int64)
        y = r_lab.integers(0, spec.num_classes, size=n, dtype=np.int64)
    else:
        pi = _class_probs(spec.num_classes, spec.class_skew)
        blocks = r_lab.choice(spec.num_classes, size=n, p=pi).astype(np.int64)
        # features and edges follow the block; a noisy label does not: irreducible error
        noisy = r_lab.random(n) < spec.label_noise
        y = np.where(noisy, r_lab.choice(spec.num_classes, size=n, p=pi), blocks).astype(np.int64)
    if not spec.multilabel and n >= spec.num_classes:
        # Graph.num_classes is max(y) + 1: plant every class once so small graphs keep the width
        first = r_lab.choice(n, size=spec.num_classes, replace=False)
        blocks[first] = np.arange(spec.num_classes)
        y[first] = np.arange(spec.num_classes)
    theta = powerlaw_propensities(n, d, spec.degree_exponent, spec.max_degree_frac * n, r_deg)
    size = spec.community_size or max(MIN_COMMUNITY, COMMUNITY_DEGREES * d)
    # regions: label-independent locality between the communities and the whole graph
    num_regions = max(1, int(round(n / np.sqrt(n * size))))
    region = r_edge.integers(0, num_regions, size=n, dtype=np.int64)
    comm = nested_communities(blocks, size, r_edge)
    m_total = n * d / 2.0
    src, dst = sample_sbm_edges(blocks, theta, m_total * (1.0 - spec.closure_frac), spec.homophily,
                                r_edge, communities=comm, community_frac=spec.community_frac,
                                regions=region, region_frac=spec.region_frac)
    if spec.closure_frac > 0:
        src, dst = close_triangles(src, dst, n, int(round(m_total)) - src.shape[0], blocks,
                                   closure_cross_accept(spec.homophily, int(blocks.max()) + 1),
                                   r_edge)
    x = _features(spec, blocks, y, r_feat)
    train, val, test = random_split(n, spec.split, r_split, min_size=spec.min_split_size)
    meta: dict[str, Any] = {
        # params pass through JSON so the in-memory meta equals the one read back from disk
        "generator": GENERATOR, "params": json.loads(json.dumps(asdict(spec))), "seed": int(seed),
        "scale": scale if isinstance(scale, str) else int(scale), "num_nodes": n,
        "avg_degree_target": d, "twin_of": spec.twin_of, "community_size": size,
        "communities": int(comm.max()) + 1,
        "regions": num_regions,
    }
    if spec.random_features:
        meta["timing_only"] = True
    indptr, indices = csr_from_sorted_pairs(src, dst, n)
    g = Graph(indptr, indices, x, y, train, val, test, name, meta)
    g.validate()
    return g


# ----------------------------------------------------------------------------- stages
def _class_probs(k: int, skew: float) -> np.ndarray:
    w = np.arange(1, k + 1, dtype=np.float64) ** -float(skew)
    return w / w.sum()


def powerlaw_propensities(n: int, mean: float, gamma: float, cap: float,
                          rng: np.random.Generator) -> np.ndarray:
    """Pareto(gamma) weights with the given mean, clipped at ``cap``.

    Rescaling after clipping pushes mass back onto the body; a few rounds converge
    because the clipped set only grows.
    """
    if gamma <= 2.0:
        raise CdfgnnError(f"degree exponent must be > 2 for a finite mean, got {gamma}")
    theta = (1.0 - rng.random(n)) ** (-1.0 / (gamma - 1.0))
    cap = max(float(cap), float(mean))
    for _ in range(20):
        theta *= mean / theta.mean()
        if theta.max() <= cap * (1 + 1e-9):
            break
        np.minimum(theta, cap, out=theta)
    return theta


def nested_communities(blocks: np.ndarray, size: float, rng: np.random.Generator) -> np.ndarray:
    """Community of every vertex: each block split into ~|block| / size communities.

    Community ids are numbered block by block, so sorting by community also sorts by
    block. Sizes vary (log-normal weights, sigma 0.5) as real communities do.
    """
    nb = int(blocks.max()) + 1
    counts = np.bincount(blocks, minlength=nb)
    k = np.maximum(1, np.round(counts / float(size)).astype(np.int64))
    first = np.concatenate([[0], np.cumsum(k)[:-1]])
    weights = rng.lognormal(0.0, 0.5, size=int(k.sum()))
    comm = np.empty(blocks.shape[0], dtype=np.int64)
    order = np.argsort(blocks, kind="stable")
    start = 0
    for b in range(nb):  # loop over blocks (tens), not vertices
        members = order[start:start + counts[b]]
        start += counts[b]
        w = weights[first[b]:first[b] + k[b]]
        comm[members] = first[b] + rng.choice(k[b], size=members.shape[0], p=w / w.sum())
    return comm


def _ranges(keys: np.ndarray, theta: np.ndarray, k: int):
    """Per key value: start of its theta mass, its mass, its last sorted position
    (in the order that sorts ``keys``)."""
    mass = np.bincount(keys, weights=theta, minlength=k)
    start = np.concatenate([[0.0], np.cumsum(mass)[:-1]])
    end_pos = np.cumsum(np.bincount(keys, minlength=k)) - 1
    return start, mass, end_pos


def sample_sbm_edges(blocks: np.ndarray, theta: np.ndarray, num_edges: float, homophily: float,
                     rng: np.random.Generator, communities: np.ndarray | None = None,
                     community_frac: float = 0.0, regions: np.ndarray | None = None,
                     region_frac: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges (src < dst, unique, no self-loops, sorted) of about ``num_edges``.

    A stub is homophilous with probability ``homophily``: then it stays in its source's
    community with probability ``community_frac``, else goes anywhere in the source's
    block. Any other stub goes to the source's region (label-independent locality) with
    probability ``region_frac``, else anywhere. Every draw is ∝ theta within its range.
    Communities must nest in blocks, numbered block by block
    (:func:`nested_communities`), so block and community ranges are contiguous in one
    order.
    """
    n = blocks.shape[0]
    target = int(round(num_edges))
    nb = int(blocks.max()) + 1
    if regions is None:
        regions, region_frac = np.zeros(n, dtype=np.int64), 0.0
    if communities is None:
        communities, community_frac = blocks, 0.0
    # order A: by community, hence by block
    order = np.argsort(communities, kind="stable")
    cum = np.cumsum(theta[order])
    total = cum[-1]
    c_start, c_mass, c_end = _ranges(communities, theta, int(communities.max()) + 1)
    b_start, b_mass, b_end = _ranges(blocks, theta, nb)
    c_size = np.bincount(communities)[communities].astype(np.float64)
    p_comm = np.minimum(1.0, 0.5 * c_size / np.maximum(theta, 1e-12))
    # order R: by region
    order_r = np.argsort(regions, kind="stable")
    cum_r = np.cumsum(theta[order_r])
    r_start, r_mass, r_end = _ranges(regions, theta, int(regions.max()) + 1)
    nodes = np.arange(n, dtype=np.int64)

    keys = np.empty(0, dtype=np.int64)
    want = float(target)
    for _ in range(_TOPUP_ROUNDS):
        if want < 1:
            break
        # Poisson stub counts give sources ∝ theta without a search per edge
        src = np.repeat(nodes, rng.poisson(theta * (want / total)))
        m = src.shape[0]
        homo = rng.random(m) < homophily
        # a hub cannot find theta distinct neighbours in a small community: the share of
        # its stubs kept there shrinks to about half the community's size
        in_comm = homo & (rng.random(m) < community_frac * p_comm[src])
        local = ~homo & (rng.random(m) < region_frac)
        u = rng.random(m)
        # range of each draw: community, block (order A), region (order R), or all (A)
        kind = np.where(in_comm, 0, np.where(homo, 1, np.where(local, 2, 3)))
        c, b, r = communities[src], blocks[src], regions[src]
        start = np.choose(kind, [c_start[c], b_start[b], r_start[r], 0.0])
        mass = np.choose(kind, [c_mass[c], b_mass[b], r_mass[r], total])
        end = np.choose(kind, [c_end[c], b_end[b], r_end[r], n - 1])
        pick = start + u * mass
        pos = np.where(local, np.searchsorted(cum_r, pick, side="right"),
                       np.searchsorted(cum, pick, side="right"))
        # float rounding at a range's upper end may step into the next one
        pos = np.minimum(pos, end)
        dst = np.where(local, order_r[pos], order[pos])
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        new = unique_sorted(lo[lo != hi] * n + hi[lo != hi])
        before = keys.shape[0]
        if before:
            # two sorted runs: the stable (merge-based) sort just merges them
            merged = np.sort(np.concatenate([keys, new]), kind="stable")
            keys = merged[np.concatenate([[True], merged[1:] != merged[:-1]])]
        else:
            keys = new
        gained = keys.shape[0] - before
        deficit = target - keys.shape[0]
        if deficit <= 0.01 * target:
            break
        # the next round's yield is about this round's gained/sampled ratio
        want = min(deficit * max(m, 1) / max(gained, 1), 4.0 * deficit + 16)
    return keys // n, keys % n


def _merge_keys(keys: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Union of two sorted unique key arrays."""
    merged = np.sort(np.concatenate([keys, new]), kind="stable")
    return merged[np.concatenate([[True], merged[1:] != merged[:-1]])]


def closure_cross_accept(h: float, k: int) -> float:
    """P(closing a wedge whose ends lie in different blocks) that keeps the closed edges'
    same-block rate near h: the ends of a wedge share a block with s ~ h^2 + (1-h)^2 / k,
    and s / (s + (1 - s) q) = h gives q = s (1 - h) / (h (1 - s))."""
    s = h * h + (1.0 - h) ** 2 / max(k, 1)
    if h <= 1.0 / max(k, 1) or s >= 1.0:
        return 1.0
    return float(min(1.0, s * (1.0 - h) / (h * (1.0 - s))))


def close_triangles(src: np.ndarray, dst: np.ndarray, n: int, extra: int, blocks: np.ndarray,
                    cross_accept: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Add about ``extra`` edges that close wedges u - v - w (a triangle each).

    The centre v is uniform over vertices of degree >= 2 (so low-degree vertices gain
    clustering, as in real graphs), u and w two distinct random neighbours of v, hence
    the new edge's ends are drawn about ∝ degree and the degree shape is kept. A wedge
    whose ends lie in different blocks is closed only with probability
    ``cross_accept`` (:func:`closure_cross_accept` keeps the edge homophily near h). Rounds on the
    growing graph until the count is reached (or a round adds nothing).
    """
    keys = src * n + dst
    target = keys.shape[0] + max(int(extra), 0)
    for _ in range(4 * _TOPUP_ROUNDS):
        deficit = target - keys.shape[0]
        if deficit <= 0.01 * target:
            break
        indptr, indices = csr_from_sorted_pairs(keys // n, keys % n, n)
        deg = np.diff(indptr)
        cand = np.flatnonzero(deg >= 2)
        if cand.size == 0:
            break
        k = int(min(deficit, max(keys.shape[0] // 2, 1000)) * 1.3) + 16
        v = cand[rng.integers(0, cand.shape[0], size=k)]
        i = rng.integers(0, deg[v])
        j = rng.integers(0, deg[v] - 1)
        j += j >= i
        a, b = indices[indptr[v] + i], indices[indptr[v] + j]
        keep = ((blocks[a] == blocks[b]) | (rng.random(k) < cross_accept)) & (a != b)
        a, b = a[keep], b[keep]
        new = unique_sorted(np.minimum(a, b) * n + np.maximum(a, b))
        before = keys.shape[0]
        new = new[~np.isin(new, keys, assume_unique=True)][:deficit]
        if new.size == 0:
            break
        keys = _merge_keys(keys, rng.permutation(new)[:deficit] if new.size > deficit else new)
        if keys.shape[0] == before:
            break
    return keys // n, keys % n


def _multilabel_blocks(spec: TwinSpec, n: int, rng: np.random.Generator):
    nb = spec.num_blocks or spec.num_classes
    blocks = rng.integers(0, nb, size=n, dtype=np.int64)
    probs = np.full((nb, spec.num_classes), spec.p_lo, dtype=np.float64)
    for b in range(nb):  # loop over blocks (tens), not vertices
        probs[b, rng.choice(spec.num_classes, size=spec.labels_per_block, replace=False)] = spec.p_hi
    y = (rng.random((n, spec.num_classes)) < probs[blocks]).astype(np.float32)
    return blocks, y


def _unit_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    m = rng.standard_normal((rows, cols))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def centroid_features(classes: np.ndarray, num_features: int, snr: float,
                      rng: np.random.Generator) -> np.ndarray:
    """Features drawn around class centroids (module doc, step 4): ``x_i = snr * mu_{c_i} +
    eps_i``, unit-norm random centroids ``mu`` (one per class id up to ``max(classes)``),
    ``eps ~ N(0, I)``, float32 of shape (len(classes), num_features). The twins' features,
    and the planted features of a graph without labels (`cdfgnn compare`)."""
    x = rng.standard_normal((classes.shape[0], num_features), dtype=np.float32)
    centroids = _unit_rows(rng, int(classes.max()) + 1, num_features) * np.float32(snr)
    x += centroids[classes]
    return x


def _features(spec: TwinSpec, blocks: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if spec.random_features:
        return rng.standard_normal((blocks.shape[0], spec.num_features), dtype=np.float32)
    x = centroid_features(blocks, spec.num_features, spec.feature_snr, rng)
    f = spec.num_features
    if spec.multilabel and spec.label_snr > 0:
        emb = _unit_rows(rng, spec.num_classes, f)
        count = np.maximum(y.sum(axis=1, keepdims=True), 1.0)
        x += (y @ emb) * (np.float32(spec.label_snr) / np.sqrt(count)).astype(np.float32)
    return x


def random_split(n: int, ratios: tuple[float, float, float], rng: np.random.Generator,
                 min_size: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint train/val/test masks with sizes max(round(ratio * n), min_size) for each
    ratio > 0 (sum capped at n; ``min_size`` 0 gives the plain ratios)."""
    if any(r < 0 for r in ratios) or sum(ratios) > 1 + 1e-9:
        raise CdfgnnError(f"split ratios must be >= 0 and sum to <= 1, got {ratios}")
    perm = rng.permutation(n)
    tr, va, te = (max(int(round(r * n)), int(min_size)) if r > 0 else 0 for r in ratios)
    n_tr = min(tr, n)
    n_va = min(va, n - n_tr)
    n_te = min(te, n - n_tr - n_va)
    masks = []
    for lo, hi in ((0, n_tr), (n_tr, n_tr + n_va), (n_tr + n_va, n_tr + n_va + n_te)):
        m = np.zeros(n, dtype=bool)
        m[perm[lo:hi]] = True
        masks.append(m)
    return masks[0], masks[1], masks[2]
