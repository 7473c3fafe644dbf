"""Synthetic twins of the papers' datasets: power-law degrees on a hierarchy of nested blocks.

Follows docs/architecture.md, Datasets ("Synthetic twins"); the model, its parameters, the
size rule and the fit are explained in docs/twins.md. Friendster stand-in: CDFGNN
(arXiv 2408.00232, Table 1) generates 64-dim features and 32 classes at random; the paper
does not say how, nor the split: we choose N(0,1) features, uniform labels, 65/10/25.

Generative model (all steps vectorised numpy, one ``SeedSequence`` per twin and seed):

1. **Degree propensities.** ``theta_i = (1-u)^(-1/(gamma-1))`` (Pareto, so
   ``P(theta) ∝ theta^-gamma``), rescaled to mean ``d`` (the target average degree) and
   clipped at ``d_max = max_degree_frac * N`` with a few rescale/clip rounds.
2. **Edges: hierarchical locality** (:mod:`cdfgnn.data.hierarchy`). The vertices sit on a
   binary hierarchy of nested blocks; a vertex's edges reach beyond a block of s vertices
   with probability ``(s / r_i)^-decay`` (Rent's rule, any depth), ``r_i = reach * N *
   (theta_i / d)^hub_reach`` (at least theta_i). Inside the chosen block the other end is
   drawn ∝ its own weight at that level, so expected degrees stay ∝ theta. These three
   parameters (``reach``, ``decay``, ``hub_reach``) are the only ones that move an edge
   besides the degree fields; they are fitted to published METIS partition statistics
   of the real graph (``python benchmarks/fit_twins.py``; ``TwinSpec.fitted`` says on
   what).
3. **Latent classes and labels**, planted on the hierarchy after the edges (so no label
   knob moves an edge): contiguous class regions sized ∝ ``pi_c ∝ (c+1)^-class_skew``
   with patches of other classes, the patch rate set so that a share ``homophily`` of the
   edges joins two vertices of one latent class. Single-label twins: with probability
   ``label_noise`` a vertex's label is redrawn from ``pi`` while its features keep
   following its latent class, which caps the reachable accuracy near
   ``1 - label_noise`` as real datasets' label noise does (and lowers the
   label-measured edge homophily by about that factor). Multi-label twins: ``num_blocks``
   latent blocks (uniform); block b owns ``labels_per_block`` "typical" labels that a
   member carries with probability ``p_hi`` each, every other label with ``p_lo``.
4. **Features.** ``x_i = snr * mu_{b_i} + eps_i`` with unit-norm random class centroids
   ``mu`` and ``eps ~ N(0, I_F)``. Pairwise class separation of one vertex is therefore
   ``~ snr * sqrt(2)`` noise standard deviations: a per-vertex classifier is well above
   chance but noisy, and averaging homophilous neighbours (what a GCN layer does)
   sharpens it. Multi-label twins add ``label_snr * (Y_i E) / sqrt(|Y_i|)`` with random
   unit label embeddings ``E`` so labels beyond the block's typical ones are learnable.
   Friendster's twin uses pure N(0,1) features and uniform labels (``meta["timing_only"]``).
5. **Split.** A random permutation cut at the real dataset's train/val/test ratios;
   a twin with a tiny labelled share (papers100M: 1.09% / 0.11% / 0.19%) sets
   ``min_split_size``, the fewest vertices of each split, so that small graphs keep
   enough labelled vertices to train and evaluate on (0, every other twin: ratios alone).

``scale`` changes only N: feature width, classes, split ratios, degree exponent,
homophily and the three locality parameters are kept (``reach`` is a share of N, which is
the size rule: docs/twins.md), and the average degree is kept up to ``min(d, N / 40)`` so
the tiny graphs stay sparse instead of turning into near-cliques.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cdfgnn.data.graph import Graph, csr_from_sorted_pairs
from cdfgnn.data.hierarchy import Hierarchy, Locality, plant_classes, sample_edges
from cdfgnn.errors import CdfgnnError

GENERATOR = "dcsbm-hierarchical-v3"

#: Named sizes; an int (or a decimal string) asks for that many vertices.
SCALES: dict[str, int] = {"tiny": 2_000, "small": 10_000, "medium": 100_000}
MIN_NODES = 100
#: average degree is capped at N / DENSITY_CAP_DIV so tiny graphs stay sparse
DENSITY_CAP_DIV = 40
#: synth-papers100m's fewest vertices per split (its real shares give ~22 training and
#: ~4 test vertices at the tiny scale; docs/methods.md, "Synthetic twins")
MIN_SPLIT_PAPERS = 200
#: the only TwinSpec fields that move an edge besides size and degrees (docs/twins.md)
LOCALITY_PARAMS = ("reach", "decay", "hub_reach")
#: the command that fits LOCALITY_PARAMS of the registered twins
FIT_COMMAND = "python benchmarks/fit_twins.py"


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
    homophily: float                # target share of edges inside one latent class
    feature_snr: float              # class-centroid norm in noise standard deviations
    class_skew: float = 0.0         # pi_c ∝ (c+1)^-skew (single-label twins)
    label_noise: float = 0.0        # P(a vertex's label is redrawn from pi, ignoring its class)
    max_degree_frac: float = 0.1    # expected-degree cap as a fraction of N
    multilabel: bool = False
    num_blocks: int = 0             # multi-label: latent blocks (0: = num_classes)
    labels_per_block: int = 0       # multi-label: typical labels of a block
    p_hi: float = 0.0               # multi-label: P(member carries a typical label)
    p_lo: float = 0.0               # multi-label: P(member carries any other label)
    label_snr: float = 0.0          # multi-label: norm of the per-label feature signal
    random_features: bool = False   # Friendster: N(0,1) features, uniform labels
    real_num_nodes: int | None = None
    # locality (generator v3, cdfgnn.data.hierarchy): the only three knobs that move edges
    # defaults: the median of the three twins fitted to METIS halo copies and cuts
    # (reddit-dgl, products, arxiv), each parameter on its own
    reach: float = 0.004012         # sigma: reach of an average-degree vertex, share of N
    decay: float = 0.9649           # beta: P(an edge leaves a block of s >= reach) = (s/reach)^-beta
    hub_reach: float = 1.999        # alpha: reach grows as (theta / d)^alpha
    fitted: str = ""                # what the locality was fitted to ("": model defaults)
    min_split_size: int = 0         # fewest vertices of each split (0: the ratios alone)


# Real values from the papers: CDFGNN Table 1 (reddit = GraphSAINT's 0.66/0.10/0.24 split,
# avg degree 99.65; products 50.52; friendster 55.06), CoFree / Sylvie tables (yelp 19.47,
# 0.75/0.10/0.15; amazon-products 264.3M directed arcs / 1.57M nodes = 168.4, train
# 1,255,968 = 0.80), CaPGNN table (flickr 10.08), OGB (arxiv 13.77, time split 54/18/28;
# products sales-rank split 8.0/1.6/90.4). Exponents, homophily and skews are
# plausible values, not fitted to the real graphs. The locality parameters (reach, decay,
# hub_reach) are fitted by FIT_COMMAND where a twin's ``fitted`` says so (docs/twins.md);
# the others keep the model defaults.
_FIT_HALO = (f"{FIT_COMMAND}: METIS halo copies per vertex and EmbedPart's edge-cut "
             "shares (four balance constraints) at P = 2, 4, 8")
#: Yelp and AmazonProducts: ``reach`` alone (decay and hub_reach at the defaults) to
#: Sylvie's halo volume at P = 8 (arXiv 2303.01277, Table 3), their only target
_FIT_VOLUME = f"{FIT_COMMAND}: reach alone, to Sylvie's Table 3 halo volume at P = 8"
#: DGL's Reddit's fitted locality; GraphSAINT's copy (the same vertices, no METIS target)
#: takes it too
_REDDIT_LOCALITY = dict(reach=0.004012, decay=0.8031, hub_reach=2.193)
TWINS: dict[str, TwinSpec] = {s.name: s for s in [
    # GraphSAINT's copy has no METIS target: DGL's copy's locality (the same vertices)
    TwinSpec("synth-reddit", "reddit", 602, 41, 99.65, 2.3, (0.66, 0.10, 0.24),
             homophily=0.75, feature_snr=3.5, class_skew=0.7, label_noise=0.05,
             real_num_nodes=232_965, **_REDDIT_LOCALITY,
             fitted="synth-reddit-dgl's parameters (no METIS target for this copy)"),
    # DGL's RedditDataset (the copy the peers' code loads): 114,615,892 arcs, 492.0 per
    # vertex, the same vertices, features, classes and split as GraphSAINT's copy
    TwinSpec("synth-reddit-dgl", "reddit", 602, 41, 491.99, 2.3, (0.66, 0.10, 0.24),
             homophily=0.75, feature_snr=3.5, class_skew=0.7, label_noise=0.05,
             real_num_nodes=232_965, **_REDDIT_LOCALITY,
             fitted=_FIT_HALO + " of DGL's Reddit (841 s CPU)"),
    TwinSpec("synth-products", "ogbn-products", 100, 47, 50.52, 2.3, (0.0803, 0.0161, 0.9036),
             homophily=0.80, feature_snr=3.0, class_skew=1.0, label_noise=0.2,
             real_num_nodes=2_449_029, reach=0.002385, decay=0.9649, hub_reach=0.9413,
             fitted=_FIT_HALO + " of ogbn-products (463 s CPU)"),
    TwinSpec("synth-arxiv", "ogbn-arxiv", 128, 40, 13.77, 2.6, (0.537, 0.176, 0.287),
             homophily=0.65, feature_snr=3.0, class_skew=0.8, label_noise=0.2,
             real_num_nodes=169_343, reach=0.01549, decay=1.201, hub_reach=1.999,
             fitted=_FIT_HALO + " of ogbn-arxiv (437 s CPU)"),
    TwinSpec("synth-yelp", "yelp", 300, 100, 19.47, 2.4, (0.75, 0.10, 0.15),
             homophily=0.65, feature_snr=1.5, multilabel=True, num_blocks=25,
             labels_per_block=6, p_hi=0.8, p_lo=0.01, label_snr=3.0, real_num_nodes=716_847,
             reach=0.002061, decay=0.9649, hub_reach=1.999,
             fitted=_FIT_VOLUME + " of Yelp (61 s CPU)"),
    TwinSpec("synth-amazon", "amazon-products", 200, 107, 168.4, 2.3, (0.80, 0.05, 0.15),
             homophily=0.7, feature_snr=2.0, multilabel=True, num_blocks=30,
             labels_per_block=5, p_hi=0.8, p_lo=0.01, label_snr=4.0, real_num_nodes=1_569_960,
             # reach below degree / N (0.00168 at 100,000 vertices) leaves most vertices
             # at their smallest window, their own degree: the volume stays 1.46x the target
             reach=0.001476, decay=0.9649, hub_reach=1.999,
             fitted=_FIT_VOLUME + " of AmazonProducts, saturated at 1.46x (116 s CPU)"),
    TwinSpec("synth-flickr", "flickr", 500, 7, 10.08, 2.5, (0.50, 0.25, 0.25),
             homophily=0.35, feature_snr=3.5, class_skew=0.9, label_noise=0.35,
             real_num_nodes=89_250),
    # Friendster's labels and features are random (timing only); its edges are local
    TwinSpec("synth-friendster", "friendster", 64, 32, 55.06, 2.5, (0.65, 0.10, 0.25),
             homophily=0.7, feature_snr=0.0, random_features=True, real_num_nodes=65_608_366),
    # OGB papers100M: 111,059,956 nodes, 1,615,685,872 directed citation arcs, so
    # 2 x arcs / nodes = 29.10 if no citation is reciprocated (symmetrised, like the others);
    # 128 features, 172 arXiv subject classes; labelled share 1.09 / 0.11 / 0.19% of the
    # nodes (train 1,207,179, val 125,265, test 214,338). Exponent and homophily as the
    # arxiv (citation) twin; min_split_size keeps small twins trainable (docs/methods.md).
    TwinSpec("synth-papers100m", "ogbn-papers100M", 128, 172, 29.10, 2.6,
             (0.01087, 0.00113, 0.00193), homophily=0.65, feature_snr=3.0, class_skew=0.8,
             label_noise=0.2, real_num_nodes=111_059_956, min_split_size=MIN_SPLIT_PAPERS,
             reach=0.007314, decay=4.0, hub_reach=3.0,
             fitted=f"{FIT_COMMAND}: EmbedPart's METIS edge-cut shares at P = 2, 4, 8 of "
                    "ogbn-papers100M, its only METIS statistic, measured with all four of "
                    "EmbedPart's balance constraints (2026-11-28 refit, 228 s CPU; decay "
                    "and hub_reach on their upper bounds)"),
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


def check_locality(spec: TwinSpec) -> None:
    """The three locality parameters are in range (reach in (0, 1], decay > 0, hub_reach >= 0)."""
    if not 0.0 < spec.reach <= 1.0:
        raise CdfgnnError(f"twin {spec.name!r}: reach must be in (0, 1], got {spec.reach!r}")
    if not spec.decay > 0.0:
        raise CdfgnnError(f"twin {spec.name!r}: decay must be > 0, got {spec.decay!r}")
    if not spec.hub_reach >= 0.0:
        raise CdfgnnError(f"twin {spec.name!r}: hub_reach must be >= 0, got {spec.hub_reach!r}")


def locality(spec: TwinSpec) -> Locality:
    """The spec's three locality parameters."""
    return Locality(spec.reach, spec.decay, spec.hub_reach)


def twin_skeleton(spec: TwinSpec, n: int, seed: int
                  ) -> tuple[np.ndarray, Hierarchy, np.random.Generator]:
    """Degree propensities and hierarchy of ``spec`` at n vertices, and the edge stream
    positioned after them (what :func:`twin_edges` draws its edges from)."""
    check_locality(spec)
    d = effective_avg_degree(spec, n)
    r_deg, r_edge = _streams(spec.name, seed)[1:3]
    theta = powerlaw_propensities(n, d, spec.degree_exponent, spec.max_degree_frac * n, r_deg)
    return theta, Hierarchy.draw(n, r_edge), r_edge


def twin_edges(spec: TwinSpec, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, Hierarchy]:
    """The undirected edges (src < dst, sorted) of ``spec`` at n vertices, and the hierarchy.

    Depends only on n, the seed, the twin's name, the degree fields (avg_degree,
    degree_exponent, max_degree_frac) and :data:`LOCALITY_PARAMS`: labels, features and
    homophily never move an edge (their streams are separate).
    """
    theta, h, r_edge = twin_skeleton(spec, n, seed)
    src, dst = sample_edges(theta, theta.sum() / 2.0, h, locality(spec), r_edge)
    return src, dst, h


def twin_split(spec: TwinSpec, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The train/val/test masks :func:`generate_from_spec` gives ``spec`` at n vertices."""
    return random_split(n, spec.split, _streams(spec.name, seed)[4], min_size=spec.min_split_size)


def _streams(name: str, seed: int) -> list[np.random.Generator]:
    """One stream per stage (labels, degrees, edges, features, split), keyed by twin name
    too, so twins with the same seed differ."""
    ss = np.random.SeedSequence([int(seed), zlib.crc32(name.encode())])
    return [np.random.default_rng(s) for s in ss.spawn(5)]


def generate_from_spec(spec: TwinSpec, scale: str | int = "small", seed: int = 0) -> Graph:
    """Generate a graph from any :class:`TwinSpec` (e.g. a registered twin with other
    locality parameters, ``dataclasses.replace(TWINS[name], reach=...)``, or the fitted
    twin of an imported graph, :mod:`cdfgnn.data.twin_of`)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CdfgnnError(f"seed must be a non-negative int, got {seed!r}")
    name = spec.name
    n = resolve_scale(scale)
    d = effective_avg_degree(spec, n)
    src, dst, h = twin_edges(spec, n, seed)
    r_lab, _, _, r_feat, _ = _streams(name, seed)
    eps, planted = 0.0, None
    if spec.random_features:
        # labels are uniform and independent of the (local) edges: timing only
        blocks = np.zeros(n, dtype=np.int64)
        y = r_lab.integers(0, spec.num_classes, size=n, dtype=np.int64)
    elif spec.multilabel:
        nb = spec.num_blocks or spec.num_classes
        blocks, eps, planted = plant_classes(h, np.full(nb, 1.0 / nb), src, dst, spec.homophily,
                                             r_lab)
        y = _multilabel_labels(spec, blocks, r_lab)
    else:
        pi = _class_probs(spec.num_classes, spec.class_skew)
        blocks, eps, planted = plant_classes(h, pi, src, dst, spec.homophily, r_lab)
        # features follow the latent class; a noisy label does not: irreducible error
        noisy = r_lab.random(n) < spec.label_noise
        y = np.where(noisy, r_lab.choice(spec.num_classes, size=n, p=pi), blocks).astype(np.int64)
        if n >= spec.num_classes:
            # Graph.num_classes is max(y) + 1: plant every class once so small graphs keep
            # the width
            first = r_lab.choice(n, size=spec.num_classes, replace=False)
            blocks[first] = np.arange(spec.num_classes)
            y[first] = np.arange(spec.num_classes)
    x = _features(spec, blocks, y, r_feat)
    train, val, test = twin_split(spec, n, seed)
    meta: dict[str, Any] = {
        # params pass through JSON so the in-memory meta equals the one read back from disk
        "generator": GENERATOR, "params": json.loads(json.dumps(asdict(spec))), "seed": int(seed),
        "scale": scale if isinstance(scale, str) else int(scale), "num_nodes": n,
        "avg_degree_target": d, "twin_of": spec.twin_of, "hierarchy_levels": h.levels,
        "reach_vertices": spec.reach * n, "patch_rate": eps,
        "latent_homophily": None if planted is None or planted != planted else planted,
    }
    if spec.random_features:
        meta["timing_only"] = True
    indptr, indices = csr_from_sorted_pairs(src, dst, n)
    g = Graph(indptr, indices, x, y, train, val, test, name, meta)
    g.validate()
    return g

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


def _multilabel_labels(spec: TwinSpec, blocks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """0/1 label matrix: each latent block's typical labels with p_hi, the others with p_lo."""
    nb = spec.num_blocks or spec.num_classes
    probs = np.full((nb, spec.num_classes), spec.p_lo, dtype=np.float64)
    for b in range(nb):  # loop over blocks (tens), not vertices
        probs[b, rng.choice(spec.num_classes, size=spec.labels_per_block, replace=False)] = spec.p_hi
    return (rng.random((blocks.shape[0], spec.num_classes)) < probs[blocks]).astype(np.float32)


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
