"""CDFGNN's Figures 5-8 and its claims table, from the suite's run records.

Two experiments feed them (names are report parameters; defaults below):

* ``cdfgnn-ablation``: the four ablation variants (``cdfgnn-baseline``,
  ``cdfgnn-cache``, ``cdfgnn-quant``, ``cdfgnn``) on EBV gamma 0.1, with the
  one-process full-graph and mini-batch references (Figs. 6b, 7, 8);
* ``cdfgnn-scaling``: ``cdfgnn`` on EBV gamma 0.1 / 0.0, HEP and DNE against the
  re-implemented peers ``sancus`` and ``cagnet`` (edge-cut, METIS) at 2 hosts x
  1..8 workers (Figs. 5, 6a).

Times: *modelled* is the record's NetworkModel time (compute CPU time + the
paper's Table 2 link bandwidths for the bytes sent, cache and codec CPU time
counted as communication); *measured* is wall time on this machine, where every
virtual rank shares its cores. Panels keep the two apart.
"""
from __future__ import annotations

from cdfgnn.errors import CdfgnnError
from cdfgnn.report.aggregate import mean_std
from cdfgnn.report.engine import workers_axis
from cdfgnn.report.registry import report
from cdfgnn.report.render import new_figure, save_figure

ABLATION = ("cdfgnn-baseline", "cdfgnn-cache", "cdfgnn-quant", "cdfgnn")
ABLATION_LABEL = {"cdfgnn-baseline": "Baseline", "cdfgnn-cache": "Cache",
                  "cdfgnn-quant": "Quantify", "cdfgnn": "Cache+Quantify (CDFGNN)"}
PEERS = {"sancus": "Sancus (re-implementation)", "cagnet": "CAGNET 1D (re-implementation)"}
SYNCS = ("fwd/0", "fwd/1", "bwd/1", "bwd/0")
_EXP = {"ablation": "cdfgnn-ablation", "scaling": "cdfgnn-scaling"}


def _base_method(label: str) -> str:
    """'cdfgnn-cache(epsilon=0.01)' -> 'cdfgnn-cache'."""
    return str(label).split("(", 1)[0]


def _select(df, experiment: str):
    if "experiment" in df and experiment and (df["experiment"] == experiment).any():
        return df[df["experiment"] == experiment]
    return df


def _series_label(method: str, partitioner: str) -> str:
    base = _base_method(method)
    if base in PEERS:
        return f"{PEERS[base]}, {partitioner}"
    return f"{ABLATION_LABEL.get(base, method)}, {partitioner}"


def _records_by_source(inputs) -> dict[str, dict]:
    return {rec.get("_source", ""): rec for rec in inputs.records}


# --------------------------------------------------------------------- Figure 5
@report("cdfgnn-fig5", kind="figure", reads=("runs",), params={"experiment": _EXP["scaling"]})
def fig5(inputs, params, out, md_out) -> None:
    """Epoch time against workers: CDFGNN per partitioner and the two re-implemented peers."""
    runs = _select(inputs.runs, params["experiment"])
    runs = runs[runs["trainer"] == "distributed"]
    if runs.empty:
        raise CdfgnnError("cdfgnn-fig5: no distributed runs among the inputs")
    datasets = sorted(runs["dataset"].unique())
    fig, axes = new_figure(len(datasets), 2, figsize=(12, 4.2 * len(datasets)))
    for row, ds in enumerate(datasets):
        sub = runs[runs["dataset"] == ds]
        for col, (key, kind) in enumerate((("modelled_epoch_time_s", "modelled (Table 2 links)"),
                                           ("epoch_time_s", "measured wall time"))):
            ax = axes[row][col]
            for i, ((method, part), g) in enumerate(sub.groupby(["method", "partitioner"])):
                pts = sorted((p, *mean_std(gp[key])) for p, gp in g.groupby("workers"))
                xs, ms, ss = zip(*pts)
                style = "--s" if _base_method(method) in PEERS else "-o"
                ax.errorbar(xs, ms, yerr=ss, fmt=style, color=f"C{i}", capsize=3,
                            label=_series_label(method, part))
            workers_axis(ax, sub["workers"].unique(), "workers (2 hosts)")
            ax.set_ylabel("epoch time (s)")
            ax.set_title(f"{ds}: {kind}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("CDFGNN Fig. 5 analogue: average epoch time against workers "
                 "(mean over seeds; peers are re-implementations)")
    save_figure(fig, out)


# --------------------------------------------------------------------- Figure 6
def _per_rank(rec: dict) -> tuple[list[float], list[float]]:
    """Modelled compute (CPU x slowdown) and communication seconds of every rank."""
    mt = rec["model_time"]
    slow = mt.get("slowdown") or [1.0] * len(mt["compute_s"])
    return [c * s for c, s in zip(mt["compute_s"], slow)], list(mt["comm_s"])


def _breakdown(ax, groups: list[tuple[str, list[dict]]], title: str) -> None:
    """Per-device stacked bars (compute, communication), one cluster per group."""
    width = 0.8
    x0 = 0.0
    ticks, labels = [], []
    for gi, (label, recs) in enumerate(groups):
        comp = [_per_rank(r)[0] for r in recs]
        comm = [_per_rank(r)[1] for r in recs]
        p = len(comp[0])
        c = [sum(v[k] for v in comp) / len(comp) for k in range(p)]
        m = [sum(v[k] for v in comm) / len(comm) for k in range(p)]
        xs = [x0 + k * width for k in range(p)]
        ax.bar(xs, c, width * 0.9, color="C0", label="compute" if gi == 0 else None)
        ax.bar(xs, m, width * 0.9, bottom=c, color="C1",
               label="communication (incl. cache/codec CPU)" if gi == 0 else None)
        epoch = sum(r["summary"]["modelled_epoch_time_s"] for r in recs) / len(recs)
        ax.hlines(epoch, xs[0] - width / 2, xs[-1] + width / 2, colors="k", linestyles="--")
        ticks.append((xs[0] + xs[-1]) / 2)
        labels.append(label)
        x0 = xs[-1] + 2 * width
    ax.set_xticks(ticks, labels, fontsize=7, rotation=15)
    ax.set_ylabel("modelled seconds per epoch, per device")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")


@report("cdfgnn-fig6", kind="figure", reads=("runs",),
        params={"scaling_experiment": _EXP["scaling"], "ablation_experiment": _EXP["ablation"],
                "topology": "h2x4"})
def fig6(inputs, params, out, md_out) -> None:
    """Per-device compute and communication time: (a) by partitioner, (b) ablation variants."""
    runs = inputs.runs
    runs = runs[(runs["trainer"] == "distributed") & (runs["topology"] == params["topology"])]
    if runs.empty:
        raise CdfgnnError(f"cdfgnn-fig6: no distributed runs at {params['topology']}")
    recs = _records_by_source(inputs)
    datasets = sorted(runs["dataset"].unique())
    fig, axes = new_figure(len(datasets), 2, figsize=(14, 4.5 * len(datasets)))
    for row, ds in enumerate(datasets):
        sub = runs[runs["dataset"] == ds]
        scal = _select(sub, params["scaling_experiment"])
        scal = scal[scal["method"].map(_base_method) == "cdfgnn"]
        groups_a = [(part, [recs[s] for s in g["source"]])
                    for part, g in scal.groupby("partitioner")]
        abl = _select(sub, params["ablation_experiment"])
        groups_b = [(ABLATION_LABEL[m], [recs[s] for s in g["source"]])
                    for m in ABLATION
                    for _, g in [(m, abl[abl["method"].map(_base_method) == m])] if len(g)]
        for col, (groups, what) in enumerate(((groups_a, "(a) CDFGNN by partitioner"),
                                              (groups_b, "(b) optimisations, EBV"))):
            ax = axes[row][col]
            if groups:
                _breakdown(ax, groups, f"{ds} {params['topology']}: {what}")
            else:
                ax.set_axis_off()
                ax.set_title(f"{ds}: {what}: no runs", fontsize=9)
    fig.suptitle("CDFGNN Fig. 6 analogue: per-device modelled compute and communication time "
                 "(dashed: modelled epoch time)")
    save_figure(fig, out)


# --------------------------------------------------------------------- Figure 7
@report("cdfgnn-fig7", kind="figure", reads=("runs",),
        params={"experiment": _EXP["ablation"], "method": "cdfgnn-cache"})
def fig7(inputs, params, out, md_out) -> None:
    """Send ratio per layer and direction, and epsilon, against epoch (the cache's runs)."""
    ep = _select(inputs.epochs, params["experiment"])
    ep = ep[(ep["trainer"] == "distributed") & (ep["method"] == params["method"])]
    cols = [f"send_ratio/{s}" for s in SYNCS]
    if ep.empty or not set(cols) <= set(ep.columns):
        raise CdfgnnError(f"cdfgnn-fig7: no runs of {params['method']!r} with send ratios")
    panels = sorted({(d, t) for d, t in zip(ep["dataset"], ep["topology"])})
    fig, axes = new_figure(1, len(panels), figsize=(7 * len(panels), 4.2), layout="constrained")
    for ax, (ds, topo) in zip(axes[0], panels):
        sub = ep[(ep["dataset"] == ds) & (ep["topology"] == topo)]
        mean = sub.groupby("epoch")[cols + ["epsilon"]].mean()
        names = {"fwd/0": "Z layer 1", "fwd/1": "Z layer 2", "bwd/1": "delta layer 2",
                 "bwd/0": "delta layer 1"}
        for col, s in zip(cols, SYNCS):
            ax.plot(mean.index, 100 * mean[col], label=f"sent: {names[s]}")
        ax.set_ylim(-2, 102)
        ax.set_xlabel("epoch")
        ax.set_ylabel("rows sent / rows of an exact sync (%)")
        tw = ax.twinx()
        tw.plot(mean.index, mean["epsilon"], "k--", label="epsilon")
        tw.set_ylabel("cache threshold epsilon")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = tw.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7)
        ax.set_title(f"{ds} {topo}, {params['method']} (mean of {sub['seed'].nunique()} "
                     f"seed(s))", fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle("CDFGNN Fig. 7 analogue: share of messages sent and the cache threshold")
    save_figure(fig, out)


# --------------------------------------------------------------------- Figure 8
@report("cdfgnn-fig8", kind="figure", reads=("runs",),
        params={"experiment": _EXP["ablation"], "topology": "h2x4"})
def fig8(inputs, params, out, md_out) -> None:
    """Test accuracy against epoch: one-process full-graph and mini-batch, the four variants."""
    ep = _select(inputs.epochs, params["experiment"])
    ep = ep[ep["test"].notna()]
    keep = (ep["trainer"] != "distributed") | (ep["topology"] == params["topology"])
    ep = ep[keep]
    if ep.empty:
        raise CdfgnnError("cdfgnn-fig8: no epoch rows with a test metric")
    datasets = sorted(ep["dataset"].unique())
    fig, axes = new_figure(1, len(datasets), figsize=(6 * len(datasets), 4.2))
    for ax, ds in zip(axes[0], datasets):
        sub = ep[ep["dataset"] == ds]
        for trainer, style in (("full-graph", "k--"), ("minibatch", "k:")):
            g = sub[sub["trainer"] == trainer]
            if len(g):
                curve = g.groupby("epoch")["test"].mean()
                ax.plot(curve.index, curve.values, style, lw=2,
                        label=f"one process, {trainer}")
        dist = sub[sub["trainer"] == "distributed"]
        for i, m in enumerate(ABLATION):
            g = dist[dist["method"].map(_base_method) == m]
            if len(g):
                curve = g.groupby("epoch")["test"].mean()
                ax.plot(curve.index, curve.values, color=f"C{i}", alpha=0.85,
                        label=f"{ABLATION_LABEL[m]} ({params['topology']})")
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{ds} (mean of {sub['seed'].nunique()} seed(s))", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("CDFGNN Fig. 8 analogue: test accuracy against epoch")
    save_figure(fig, out)


# --------------------------------------------------------------------- claims
def _rows_total(rec: dict) -> float:
    """Vertex rows sent over every epoch of a run (the paper's remote vertex accesses)."""
    return float(sum(sum(e["rows"].values()) for e in rec["comm"]["epochs"]))


def _vertex_bytes(rec: dict) -> float:
    """Vertex-row bytes (gather, scatter, halo) per timed epoch, summed over ranks."""
    return float(sum(d["bytes"] for tag, d in rec["comm"]["by_tag"].items()
                     if tag.startswith(("gather/", "scatter/", "halo/"))))


def _pairs(runs, a: str, b: str, keys=("dataset", "topology", "partitioner", "seed")):
    """Matched (run of method a, run of method b) sources on the same configuration."""
    base = runs.assign(base=runs["method"].map(_base_method))
    left = base[base["base"] == a].set_index(list(keys))["source"]
    right = base[base["base"] == b].set_index(list(keys))["source"]
    both = left.index.intersection(right.index)
    return [(left[k], right[k]) for k in both]


def cdfgnn_claims(runs, records: dict[str, dict], partitions=None,
                  ablation: str = _EXP["ablation"], scaling: str = _EXP["scaling"]) -> list:
    """The paper's headline claims and the issue's targets, measured (a list of Claim)."""
    from cdfgnn.report.claims import Claim, verdict_for

    claims = []
    dist = runs[runs["trainer"] == "distributed"]
    abl = _select(dist, ablation)
    cfg = _describe(abl)
    # 1. remote vertex accesses, cache against baseline
    pairs = _pairs(abl, "cdfgnn-cache", "cdfgnn-baseline")
    cuts = [100 * (1 - _rows_total(records[c]) / _rows_total(records[b]))
            for c, b in pairs if _rows_total(records[b]) > 0]
    cut = sum(cuts) / len(cuts) if cuts else None
    claims.append(Claim(
        claim="adaptive cache cuts remote vertex accesses (rows sent, all epochs) on average",
        paper_value="-63.14%", measured=None if cut is None else -cut, unit="%",
        config=f"{cfg}; cdfgnn-cache vs cdfgnn-baseline, {len(cuts)} matched runs",
        verdict=verdict_for(cut, 63.14, better="higher"),
        note="synthetic twins, not the paper's graphs; default epsilon0 0.001, digest rule",
        runs=[s for p in pairs for s in p]))
    # 2. accuracy: cache/quantisation change test accuracy little (Fig. 8)
    gaps, srcs = [], []
    for m in ("cdfgnn-cache", "cdfgnn-quant", "cdfgnn"):
        for a, b in _pairs(abl, m, "cdfgnn-baseline"):
            ta, tb = records[a]["summary"]["final_test"], records[b]["summary"]["final_test"]
            if ta is not None and tb is not None:
                gaps.append(100 * abs(ta - tb))
                srcs += [a, b]
    gap = max(gaps) if gaps else None
    claims.append(Claim(
        claim="cache and quantisation barely change accuracy (largest final-test gap to "
              "Baseline over variants and runs, points)",
        paper_value="almost no impact (Fig. 8); issue target <= 0.5 points",
        measured=gap, unit=" pts", config=cfg,
        verdict="not measured" if gap is None else ("reproduced" if gap <= 0.5
                                                    else "not reproduced"),
        runs=srcs))
    # 3. issue target: cache sends >= 50% fewer rows, accuracy within 0.5 points
    acc = [100 * abs(records[c]["summary"]["final_test"] - records[b]["summary"]["final_test"])
           for c, b in pairs]
    ok = cut is not None and cut >= 50 and acc and max(acc) <= 0.5
    claims.append(Claim(
        claim="issue target: cdfgnn-cache sends >= 50% fewer rows than cdfgnn-baseline with "
              "final test accuracy within 0.5 points",
        paper_value=">= 50% fewer rows, <= 0.5 pts",
        measured=None if cut is None else f"{cut:.1f}% fewer rows, largest gap "
                                          f"{max(acc) if acc else float('nan'):.2f} pts",
        config=cfg, verdict="not measured" if cut is None else
        ("reproduced" if ok else "not reproduced"), runs=[s for p in pairs for s in p]))
    # 4. issue target / Fig. 6b: full CDFGNN has the lowest modelled epoch time
    means = {}
    for m in ABLATION:
        g = abl[abl["method"].map(_base_method) == m]
        if len(g):
            means[m] = float(g["modelled_epoch_time_s"].mean())
    if len(means) == len(ABLATION):
        order = sorted(means, key=means.get)
        text = " < ".join(f"{ABLATION_LABEL[m]} {1e3 * means[m]:.1f} ms" for m in order)
        verdict = "reproduced" if order[0] == "cdfgnn" else "not reproduced"
    else:
        text, verdict = None, "not measured"
    claims.append(Claim(
        claim="cache + quantisation (cdfgnn) has the lowest modelled epoch time of the four "
              "ablation variants (Fig. 6b; issue target)",
        paper_value="Cache+Quantify fastest", measured=text, config=cfg, verdict=verdict,
        note="modelled: CPU compute time + Table 2 link bandwidths; cache and codec CPU time "
             "counted as communication",
        runs=list(abl[abl["method"].map(_base_method).isin(ABLATION)]["source"])))
    # 4b. Fig. 6b in bytes: each optimisation cuts the vertex bytes, both together most
    vb = {}
    for m in ABLATION:
        srcs_m = list(abl[abl["method"].map(_base_method) == m]["source"])
        if srcs_m:
            vb[m] = sum(_vertex_bytes(records[s]) for s in srcs_m) / len(srcs_m)
    if len(vb) == len(ABLATION) and vb["cdfgnn-baseline"] > 0:
        base_b = vb["cdfgnn-baseline"]
        text = ", ".join(f"{ABLATION_LABEL[m]} {100 * vb[m] / base_b:.1f}%" for m in ABLATION)
        ok = (vb["cdfgnn-cache"] < base_b and vb["cdfgnn-quant"] < base_b
              and vb["cdfgnn"] == min(vb.values()))
        verdict = "reproduced" if ok else "not reproduced"
    else:
        text, verdict = None, "not measured"
    claims.append(Claim(
        claim="cache and quantisation each cut the vertex bytes sent, both together the most "
              "(Fig. 6b, counted in bytes; bytes per epoch relative to Baseline)",
        paper_value="each shrinks communication; both best", measured=text, config=cfg,
        verdict=verdict, note="bytes include the cache's bitmaps and the codec's min/max",
        runs=list(abl[abl["method"].map(_base_method).isin(ABLATION)]["source"])))
    # 5. epoch time against Sancus
    scal = _select(dist, scaling)
    cuts5, srcs5 = [], []
    for (ds, topo, seed), g in scal.groupby(["dataset", "topology", "seed"]):
        ours = g[(g["method"].map(_base_method) == "cdfgnn")
                 & (g["partitioner"] == "ebv(gamma=0.1)")]
        peer = g[g["method"].map(_base_method) == "sancus"]
        if len(ours) and len(peer):
            a = float(ours["modelled_epoch_time_s"].iloc[0])
            b = float(peer["modelled_epoch_time_s"].iloc[0])
            cuts5.append(100 * (1 - a / b))
            srcs5 += [ours["source"].iloc[0], peer["source"].iloc[0]]
    cut5 = sum(cuts5) / len(cuts5) if cuts5 else None
    claims.append(Claim(
        claim="CDFGNN (EBV gamma 0.1) cuts epoch time against Sancus on average",
        paper_value="-30.39%", measured=None if cut5 is None else -cut5, unit="%",
        config=f"{_describe(scal)}; modelled epoch time; {len(cuts5)} matched configurations",
        verdict=verdict_for(cut5, 30.39, better="higher", setting_differs=True),
        note="Sancus re-implemented (edge-cut METIS, staleness 4, threshold 0.1); modelled "
             "time on CPU compute, not the paper's GPUs", runs=srcs5))
    # 6. gamma 0.1 against 0.0: cross-host messages
    cut6, n6 = None, 0
    if partitions is not None and len(partitions):
        cut6, n6 = _outer_cut(partitions)
    claims.append(Claim(
        claim="EBV gamma 0.1 cuts cross-host (Outer) messages against gamma 0.0 on average",
        paper_value="-31.08%", measured=None if cut6 is None else -cut6, unit="%",
        config=f"partition statistics, {n6} (dataset, 2 hosts x >= 2 devices) configurations",
        verdict=verdict_for(cut6, 31.08, better="higher"),
        note="max over devices of Outer, as Table 3; synthetic twins"))
    return claims


def _outer_cut(partition_rows) -> tuple[float | None, int]:
    """Mean Outer cut of gamma 0.1 against 0.0 (Table 3 pairs, >= 2 GPUs per host)."""
    from cdfgnn.report.partitions import derived_gamma_table, gamma_summary, table3

    summary = gamma_summary(derived_gamma_table(table3(partition_rows)))
    return summary["outer_cut"], summary["pairs"]


def _describe(runs) -> str:
    if runs.empty:
        return "no runs"
    ds = ",".join(sorted(runs["dataset"].unique()))
    topo = ",".join(sorted(runs["topology"].unique()))
    seeds = runs["seed"].nunique()
    epochs = ",".join(str(int(e)) for e in sorted(runs["epochs"].unique()))
    return f"{ds}; {topo}; {seeds} seed(s); {epochs} epochs"


@report("cdfgnn-claims", kind="table", reads=("runs", "partitions"),
        params={"ablation_experiment": _EXP["ablation"],
                "scaling_experiment": _EXP["scaling"]})
def claims_table(inputs, params, out, md_out) -> None:
    """CDFGNN's headline claims and the issue's targets beside the values measured here."""
    from cdfgnn.report.claims import write_claims

    claims = cdfgnn_claims(inputs.runs, _records_by_source(inputs), inputs.partition_rows,
                           params["ablation_experiment"], params["scaling_experiment"])
    write_claims("CDFGNN", claims, out, md_out, notes=(
        "Measured on the synthetic twins with the thread backend; modelled times use the "
        "paper's Table 2 link bandwidths with this machine's CPU compute time.",))

