"""Fit a twin's three locality parameters to partition statistics of its real graph.

The parameters (``reach``, ``decay``, ``hub_reach``; :mod:`cdfgnn.data.hierarchy`) are
fitted at ``n`` vertices (100,000, the medium scale, for the registered twins) so that
METIS on the twin gives the target :class:`~cdfgnn.twins.measure.Point` values (halo
copies per vertex, edge-cut share; P = 2, 4, 8 for the registered twins). The objective
is ``sum_i w_i log(twin_i / target_i)^2``.

Calling METIS at every step would cost minutes per step on the dense twins, so the fit
alternates two stages (space mapping):

1. **Surrogate.** :func:`cdfgnn.data.hierarchy.planted_halo` estimates the statistics of
   the *planted* partition (P equal ranges of the hierarchy's positions) from a few
   thousand vertices whose neighbours are drawn from the model, with common random
   numbers so that the objective is smooth in the parameters. Each point's estimate is
   multiplied by a correction ``c_i`` (1 at first) and Nelder-Mead minimises the
   objective over the free parameters (on a log scale).
2. **Check.** The twin is generated at n vertices with those parameters and
   partitioned by METIS; ``c_i = METIS_i / surrogate_i``, and stage 1 runs again.

After ``rounds`` checks (or once every point is within ``tol``), the parameters whose
*METIS* values had the smallest objective are returned, with every check's values.
Parameters not in ``free`` keep the spec's values. ``direct_evals`` adds Nelder-Mead steps
on METIS itself after the checks; with ``rounds=1`` the fit is those steps alone (what
``cdfgnn prepare --twin-of`` runs where a METIS step is cheap: docs/twins.md, "A twin of
any graph").
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import minimize

from cdfgnn.data.graph import csr_from_sorted_pairs
from cdfgnn.data.hierarchy import Levels, planted_halo
from cdfgnn.data.synthetic import (LOCALITY_PARAMS, TwinSpec, locality, twin_edges, twin_skeleton,
                                   twin_split)
from cdfgnn.errors import CdfgnnError
from cdfgnn.twins.measure import Point, metis_values

#: neighbour draws per surrogate evaluation (sampled vertices = this / average degree)
SURROGATE_DRAWS = 1_000_000
BOUNDS = {"reach": (1e-6, 1.0), "decay": (0.05, 4.0), "hub_reach": (0.0, 3.0)}
_LOG = ("reach", "decay")       # optimised on a log scale (hub_reach: linear)
#: first trust radius of stage 1, in the encoded space (log reach, log decay, hub_reach)
TRUST_START = 2.5


@dataclass
class FitResult:
    """Fitted parameters and the record of the fit."""

    params: dict[str, float]
    targets: list[float]
    metis: list[float]                    # METIS values at ``params``
    checks: list[dict] = field(default_factory=list)
    cpu_seconds: float = 0.0
    surrogate_evals: int = 0

    def objective(self, points: Sequence[Point]) -> float:
        return _objective(np.asarray(self.metis), points)


def _objective(values: np.ndarray, points: Sequence[Point]) -> float:
    t = np.array([p.value for p in points])
    w = np.array([p.weight for p in points])
    v = np.maximum(values, 1e-12)
    return float(np.sum(w * np.log(v / t) ** 2))


def with_params(spec: TwinSpec, params: dict[str, float]) -> TwinSpec:
    return dataclasses.replace(spec, **{k: float(v) for k, v in params.items()})


def surrogate_values(spec: TwinSpec, n: int, points: Sequence[Point], *, seed: int = 0,
                     draws: int = SURROGATE_DRAWS, skeleton=None) -> np.ndarray:
    """Planted-partition estimate of every point (module docstring, stage 1).
    ``skeleton`` = (theta, hierarchy, train mask) reuses the draws."""
    theta, h, train = skeleton if skeleton is not None else _skeleton(spec, n, seed)
    lv = Levels(theta, h, locality(spec))
    sample = max(500, int(draws / max(float(theta.mean()), 1.0)))
    out = np.empty(len(points))
    for regime in ("full", "train"):
        idx = [i for i, p in enumerate(points) if p.regime == regime]
        if not idx:
            continue
        # the same stream for every call: common random numbers across parameters
        stats = planted_halo(lv, sorted({points[i].parts for i in idx}), sample,
                             np.random.default_rng([seed, 0x5EED, regime == "train"]),
                             keep=train if regime == "train" else None)
        for i in idx:
            halo, cut = stats[points[i].parts]
            out[i] = halo if points[i].metric == "halo" else cut
    return out


def _skeleton(spec: TwinSpec, n: int, seed: int):
    theta, h, _ = twin_skeleton(spec, n, seed)
    return theta, h, twin_split(spec, n, seed)[0]


def generated_values(spec: TwinSpec, n: int, points: Sequence[Point], *, seed: int = 0
                     ) -> np.ndarray:
    """METIS (seed 0) on the twin generated at n vertices (stage 2)."""
    src, dst, _ = twin_edges(spec, n, seed)
    indptr, indices = csr_from_sorted_pairs(src, dst, n)
    del src, dst
    return metis_values(indptr, indices, points, train=twin_split(spec, n, seed)[0])


def fit_locality(spec: TwinSpec, points: Sequence[Point], *, n: int, seed: int = 0,
                 free: Sequence[str] = LOCALITY_PARAMS, rounds: int = 6, tol: float = 0.03,
                 draws: int = SURROGATE_DRAWS, direct_evals: int = 0,
                 prior: dict[str, tuple[float, float]] | None = None,
                 measure: Callable[[TwinSpec], np.ndarray] | None = None,
                 log: Callable[[str], None] | None = None) -> FitResult:
    """Fit ``free`` locality parameters of ``spec`` to ``points`` (module docstring).

    ``prior``: ``{name: (centre, weight)}`` adds ``weight (value - centre)^2`` to the
    objective, a tie-breaker where the points leave a parameter loose (three halo points
    and three parameters: a ridge of equally good fits).
    ``direct_evals`` > 0 (small graphs, where a METIS check costs well under a second):
    after the checks, Nelder-Mead runs on the METIS objective itself from the best
    parameters for at most that many evaluations.

    ``rounds`` checks at most; stage 1 stays inside a trust region around the best
    checked parameters (``TRUST_START`` in the encoded space: log reach, log decay,
    hub_reach), which grows after a check that improves the objective and shrinks after
    one that does not. ``measure(spec) -> values`` replaces stage 2 (default:
    :func:`generated_values` at n vertices); ``log`` receives one line per check.
    """
    if not points:
        raise CdfgnnError("a locality fit needs at least one target point")
    free = list(free)
    for name in free:
        if name not in LOCALITY_PARAMS:
            raise CdfgnnError(f"unknown locality parameter {name!r}; valid: {LOCALITY_PARAMS}")
    for p in points:
        if not p.value > 0:
            raise CdfgnnError(f"fit points need a positive value: {p}")
    measure = measure or (lambda s: generated_values(s, n, points, seed=seed))
    prior = dict(prior or {})

    def penalty(x: np.ndarray) -> float:
        params = _decode(x, free)
        return float(sum(w * (params[k] - c) ** 2 for k, (c, w) in prior.items() if k in params))

    t0 = time.process_time()
    skeleton = _skeleton(spec, n, seed)
    evals = 0

    def surrogate(x: np.ndarray) -> np.ndarray:
        nonlocal evals
        evals += 1
        return surrogate_values(with_params(spec, _decode(x, free)), n, points, seed=seed,
                                draws=draws, skeleton=skeleton)

    def check(x: np.ndarray, rnd: int, corrects: bool) -> dict:
        """METIS at x; ``corrects``: also the surrogate's correction for the next round
        (the direct stage and a fit without rounds need none)."""
        params = _decode(x, free)
        got = measure(with_params(spec, params))
        corr = np.ones_like(got)
        if corrects:
            sur = surrogate(x)
            corr = np.where(sur > 0, got / np.maximum(sur, 1e-12), 1.0)
        out = {"round": rnd, "x": x, "params": _full(spec, params), "metis": got, "corr": corr,
               "objective": _objective(got, points) + penalty(x)}
        if log:
            ratio = " ".join(f"{g / p.value:.3f}" for g, p in zip(got, points))
            log(f"  check {rnd}: {_show(out['params'])} objective {out['objective']:.4f} "
                f"twin/target {ratio}")
        return out

    best = check(_encode(spec, free), 0, corrects=rounds > 1)
    checks = [best]
    radius = TRUST_START
    lo_b = np.array([_enc_bound(k, 0) for k in free])
    hi_b = np.array([_enc_bound(k, 1) for k in free])
    for rnd in range(1, rounds):
        if not free or _within(best["metis"], points, tol):
            break
        corr = best["corr"]
        bounds = list(zip(np.maximum(best["x"] - radius, lo_b), np.minimum(best["x"] + radius, hi_b)))
        res = minimize(lambda x: _objective(surrogate(x) * corr, points) + penalty(x), best["x"],
                       method="Nelder-Mead", bounds=bounds,
                       options={"xatol": 1e-3, "fatol": 1e-6, "maxfev": 80 * len(free),
                                "initial_simplex": _simplex(best["x"], radius, lo_b, hi_b)})
        got = check(res.x, rnd, corrects=rnd < rounds - 1)
        checks.append(got)
        if got["objective"] < best["objective"]:
            best, radius = got, min(radius * 1.5, TRUST_START)
        else:
            radius *= 0.4
    if direct_evals > 0 and free and not _within(best["metis"], points, tol):
        # Nelder-Mead evaluates its start first: that is the best check already
        memo: dict[tuple, dict] = {_memo_key(best["x"]): best}

        def direct(x: np.ndarray) -> float:
            k = _memo_key(x)
            if k not in memo:
                memo[k] = check(np.asarray(x, dtype=np.float64), len(checks), corrects=False)
                checks.append(memo[k])
            return memo[k]["objective"]

        step = min(radius, 0.5)
        minimize(direct, best["x"], method="Nelder-Mead", bounds=list(zip(lo_b, hi_b)),
                 options={"xatol": 1e-2, "fatol": 1e-4, "maxfev": direct_evals,
                          "initial_simplex": _simplex(best["x"], 2 * step, lo_b, hi_b)})
        best = min(checks, key=lambda c: c["objective"])
    return FitResult(best["params"], [p.value for p in points], best["metis"].tolist(),
                     checks=[{k: (v.tolist() if isinstance(v, np.ndarray) else v)
                              for k, v in c.items() if k != "x"} for c in checks],
                     cpu_seconds=time.process_time() - t0, surrogate_evals=evals)


def _memo_key(x: np.ndarray) -> tuple:
    return tuple(np.round(x, 6))


def _within(values: np.ndarray, points: Sequence[Point], tol: float) -> bool:
    t = np.array([p.value for p in points])
    return bool(np.all(np.abs(np.log(np.maximum(values, 1e-12) / t)) < tol))


def _enc_bound(k: str, which: int) -> float:
    v = BOUNDS[k][which]
    return math.log(v) if k in _LOG else v


def _encode(spec: TwinSpec, free: list[str]) -> np.ndarray:
    return np.array([math.log(getattr(spec, k)) if k in _LOG else getattr(spec, k) for k in free])


def _decode(x: np.ndarray, free: list[str]) -> dict[str, float]:
    out = {}
    for k, v in zip(free, x):
        lo, hi = BOUNDS[k]
        val = math.exp(v) if k in _LOG else float(v)
        out[k] = min(max(val, lo), hi)
    return out


def _simplex(x0: np.ndarray, radius: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A start simplex with steps of half the trust radius, kept inside the bounds."""
    pts = [x0]
    for i in range(x0.shape[0]):
        e = x0.copy()
        step = 0.5 * radius
        e[i] = x0[i] + step if x0[i] + step <= hi[i] else x0[i] - step
        e[i] = min(max(e[i], lo[i]), hi[i])
        pts.append(e)
    return np.array(pts)


def _full(spec: TwinSpec, params: dict[str, float]) -> dict[str, float]:
    return {k: float(params.get(k, getattr(spec, k))) for k in LOCALITY_PARAMS}


def _show(params: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in params.items())
