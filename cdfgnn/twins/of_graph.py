"""A synthetic twin of any graph (``cdfgnn prepare --twin-of GRAPH --scale N``).

1. **Measure** the graph: vertices, average degree, the degree exponent (Hill estimator
   on the top 5% of degrees, clipped to [2.1, 6]: a graph without a heavy tail gets an
   almost constant propensity), the largest degree as a share of N, the average
   clustering (reported, not fitted), the split shares, and METIS (seed 0) halo copies
   per vertex and edge-cut share at P = 2, 4, 8. Labels: where the graph has real ones
   (``meta["timing_only"]`` false), their classes, skew (a Zipf exponent fitted to the
   class frequencies) and edge homophily; otherwise the twin plants
   :data:`DEFAULT_LABELS`.
2. **Fit** the three locality parameters (:func:`cdfgnn.twins.fit.fit_locality`) to the
   six METIS points at ``min(N, FIT_NODES)`` vertices (the size rule carries them to any
   size: docs/twins.md): Nelder-Mead on METIS itself from the registered twins' median
   (:func:`direct_steps`: up to 60 steps, fewer on larger graphs), or, on graphs too large
   for 25 steps, the surrogate fit with METIS checks. The direct fit is the better one
   where it is affordable: the surrogate's planted-partition estimate can lead it to a
   region where METIS on the twin is unstable (docs/twins.md, "A twin of any graph").
3. **Generate** the twin at ``scale`` vertices with planted features and labels, as the
   registered twins are; its meta holds what was measured and the fit, and the twin's own
   average clustering beside the graph's (not fitted: the three locality parameters
   cannot reach a lexical network's triangles, which a vertex cut sees; docs/twins.md).

A user who cannot share a graph can share its twin; a user can scale a graph up or down.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.data.stats import average_clustering, edge_homophily
from cdfgnn.data.synthetic import TwinSpec, generate_from_spec, resolve_scale
from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import jsonable
from cdfgnn.twins.fit import fit_locality
from cdfgnn.twins.measure import Point, metis_counts

FIT_PARTS = (2, 4, 8)
#: the fit runs at no more vertices than this (the medium scale)
FIT_NODES = 100_000
#: surrogate draws per fit step (fewer than the registered twins' fit: a 2-minute budget)
FIT_DRAWS = 250_000
#: weight of the edge-cut points (the halo copies are what the twin must match; the cut
#: pins hub_reach)
CUT_WEIGHT = 0.25
#: METIS steps of the direct fit: at most DIRECT_EVALS, and at most DIRECT_ARC_EVALS arcs
#: (at the fit's size) generated and partitioned in all; a step costs about 1.2 s of CPU
#: here on a graph of 490,000 arcs (generation and METIS at P = 2, 4, 8)
DIRECT_EVALS = 60
DIRECT_ARC_EVALS = 30_000_000
#: fewer direct steps than this (more than 1.2M arcs at the fit's size) and the fit runs
#: on the surrogate instead. Measured (docs/twins.md): on a graph of 990,000 arcs, 30 steps
#: took 63 s of CPU and the surrogate 148 s, equally good; on a 1M-vertex graph (1.38M
#: arcs at the fit's 100,000 vertices) 21 steps left the twin 15-24% low at P = 2-8, the
#: surrogate within 13%
MIN_DIRECT_EVALS = 25
#: METIS checks of the surrogate fit (the graphs too large for MIN_DIRECT_EVALS steps)
SURROGATE_ROUNDS = 4
#: smallest graph a twin is fitted to (METIS at P = 8 needs parts of a few hundred)
MIN_SOURCE_NODES = 1_000
#: planted labels of a graph without real ones
DEFAULT_LABELS = {"num_classes": 16, "class_skew": 0.5, "homophily": 0.7, "feature_snr": 2.5}


def degree_exponent(deg: np.ndarray) -> float:
    """Hill estimate of the degree tail exponent gamma (P(d) ∝ d^-gamma), clipped to
    [2.1, 6]; the top 5% of the degrees (at least 10) form the tail."""
    d = np.sort(deg[deg > 0].astype(np.float64))[::-1]
    k = max(10, d.shape[0] // 20)
    if d.shape[0] <= k or d[k] <= 0:
        return 6.0
    logs = np.log(d[:k] / d[k])
    alpha = 1.0 / max(float(logs.mean()), 1e-9)
    return float(np.clip(1.0 + alpha, 2.1, 6.0))


def class_skew(y: np.ndarray, num_classes: int) -> float:
    """Zipf exponent s of the class frequencies (frequency ∝ rank^-s, least squares on
    log-log ranks of the non-empty classes), clipped to [0, 3]."""
    counts = np.sort(np.bincount(y, minlength=num_classes))[::-1].astype(np.float64)
    counts = counts[counts > 0]
    if counts.shape[0] < 2:
        return 0.0
    rank = np.log(np.arange(1, counts.shape[0] + 1))
    slope = np.polyfit(rank, np.log(counts), 1)[0]
    return float(np.clip(-slope, 0.0, 3.0))


def measure_graph(graph: Graph, *, seed: int = 0) -> dict[str, Any]:
    """Everything a twin of ``graph`` takes from it (module docstring, step 1)."""
    n = graph.num_nodes
    deg = graph.degrees()
    clustering, sample = average_clustering(graph, seed)
    counts = metis_counts(graph.indptr, graph.indices, FIT_PARTS, seed=seed)
    shares = [float(m.sum()) / n for m in (graph.train, graph.val, graph.test)]
    out: dict[str, Any] = {
        "name": graph.name, "num_nodes": n, "num_edges": graph.num_edges,
        "avg_degree": 2.0 * graph.num_edges / n, "max_degree": int(deg.max()),
        "degree_exponent": degree_exponent(deg), "avg_clustering": clustering,
        "clustering_sample": sample, "split": shares,
        "num_features": graph.num_features, "timing_only": bool(graph.meta.get("timing_only")),
        "metis": {p: {"halo_copies_per_vertex": c["halo_copies_per_vertex"],
                      "edge_cut_share": c["edge_cut_share"]} for p, c in counts.items()},
    }
    if not out["timing_only"] and not graph.multilabel:
        out["num_classes"] = graph.num_classes
        out["class_skew"] = class_skew(graph.y, graph.num_classes)
        out["homophily"] = edge_homophily(graph)
    return out


def spec_of(measured: dict[str, Any], name: str) -> TwinSpec:
    """The TwinSpec of a measured graph, before its locality is fitted."""
    labels = dict(DEFAULT_LABELS)
    if "num_classes" in measured:
        labels.update(num_classes=measured["num_classes"], class_skew=measured["class_skew"],
                      homophily=float(np.clip(measured["homophily"], 0.0, 0.99)))
    n = measured["num_nodes"]
    return TwinSpec(
        name=name, twin_of=measured["name"], num_features=measured["num_features"],
        num_classes=int(labels["num_classes"]), avg_degree=measured["avg_degree"],
        degree_exponent=measured["degree_exponent"],
        split=tuple(measured["split"]), homophily=float(labels["homophily"]),
        feature_snr=float(labels["feature_snr"]), class_skew=float(labels["class_skew"]),
        max_degree_frac=float(min(1.0, max(measured["max_degree"] / n, 1.0 / n))),
        real_num_nodes=n)


def fit_points(measured: dict[str, Any]) -> list[Point]:
    """The six METIS points of a measured graph (halo and cut at P = 2, 4, 8)."""
    pts = []
    for p, c in measured["metis"].items():
        pts.append(Point("halo", int(p), max(c["halo_copies_per_vertex"], 1e-6)))
        pts.append(Point("cut", int(p), max(c["edge_cut_share"], 1e-6), weight=CUT_WEIGHT))
    return pts


def direct_steps(arcs: float) -> int:
    """METIS steps of the direct fit for a graph of ``arcs`` arcs at the fit's size, or 0
    where it would take fewer than MIN_DIRECT_EVALS (the surrogate fit runs instead)."""
    steps = min(DIRECT_EVALS, int(DIRECT_ARC_EVALS // max(arcs, 1.0)))
    return steps if steps >= MIN_DIRECT_EVALS else 0


def twin_of(graph: Graph, scale: str | int, *, seed: int = 0, name: str | None = None,
            log: Callable[[str], None] | None = None) -> tuple[Graph, dict[str, Any]]:
    """The fitted twin of ``graph`` at ``scale`` vertices and the record of the fit."""
    n_out = resolve_scale(scale)
    what = f"--twin-of {graph.meta.get('from', graph.name)}"
    if graph.num_edges == 0:
        raise CdfgnnError(f"{what}: the graph has no edges; a twin fits its locality to "
                          f"how METIS cuts the edges")
    if graph.num_nodes < MIN_SOURCE_NODES:
        raise CdfgnnError(f"{what}: the graph has {graph.num_nodes} vertices; a twin needs at "
                          f"least {MIN_SOURCE_NODES} to measure METIS at P = 8")
    t0 = time.process_time()
    measured = measure_graph(graph, seed=seed)
    spec = spec_of(measured, name or f"twin-of-{graph.name}")
    n_fit = min(graph.num_nodes, FIT_NODES)
    points = fit_points(measured)
    direct = direct_steps(graph.num_arcs * n_fit / graph.num_nodes)
    result = fit_locality(spec, points, n=n_fit, seed=seed, draws=FIT_DRAWS,
                          rounds=1 if direct else SURROGATE_ROUNDS, direct_evals=direct, log=log)
    spec = TwinSpec(**{**asdict(spec), **result.params,
                       "fitted": f"cdfgnn prepare --twin-of: METIS halo and cut of "
                                 f"{graph.name} at P = 2, 4, 8, fitted at {n_fit} vertices"})
    twin = generate_from_spec(spec, n_out, seed)
    twin_clustering, _ = average_clustering(twin, seed)   # not fitted: the record says how far
    record = {"measured": measured, "fit_nodes": n_fit, "params": result.params,
              "twin_avg_clustering": twin_clustering,
              "fit_method": "direct" if direct else "surrogate",
              "metis_checks": len(result.checks),
              "points": [{"metric": pt.metric, "parts": pt.parts, "graph": pt.value, "twin": v}
                         for pt, v in zip(points, result.metis)],
              "fit_cpu_seconds": result.cpu_seconds, "cpu_seconds": time.process_time() - t0}
    twin.meta["twin_of_graph"] = jsonable(record)
    return twin, record

