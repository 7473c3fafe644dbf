"""RapidGNN reports: Tables 2-3, Figures 3-9 and the claims table (mini-batch track).

Inputs are run records of the mini-batch track (``rapidgnn``, ``distdgl-metis``,
``distdgl-random``; re-implementations) and of full-batch ``exact`` with a GCN (the
"GCN" column of Table 2). Matching: a baseline run belongs to a RapidGNN run when
dataset, workers, batch size, fan-outs and seed agree (``exact`` runs: dataset,
workers and seed). All speed-ups are baseline / RapidGNN.

Definitions (arXiv 2509.05207, Table 2; the paper gives no
formulas): *step speed-up* = ratio of the modelled step
times (mean over timed epochs; the measured wall-time ratio is given beside it);
*network speed-up* = ratio of the modelled seconds of every remote-feature pull of an
epoch (cache fills and prefetches included, wherever they run); the full-batch GCN
has one step per epoch, so its column compares epoch times and per-epoch
communication (halo exchange). Rows/bytes ratios count remote feature rows fetched
per epoch (RapidGNN: misses + cache fills + the initial fill spread over the epochs).
Energy: measured (RAPL/NVML) where the record has it, else "not measured"; the
modelled CPU energy is labelled "modelled" everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cdfgnn.errors import CdfgnnError
from cdfgnn.report.aggregate import RunRow
from cdfgnn.report.claims import (ClaimSpec, DeviceModel, Measurement, at_least, at_most, below, evaluate,
                                  near, write_claims)
from cdfgnn.report.registry import report

PAPER = "RapidGNN"
RAPID = "rapidgnn"
METIS, RANDOM, GCN = "distdgl-metis", "distdgl-random", "exact"
LABEL = {RAPID: "RapidGNN (re-impl.)", METIS: "DGL-METIS (re-impl.)",
         RANDOM: "DGL-Random (re-impl.)", GCN: "full-batch GCN (exact)"}
#: the graphs of the paper's Table 2 as this suite stands them in (offline: the twins)
GRAPH_LABEL = {"synth-reddit": "Reddit twin", "synth-products": "products twin",
               "synth-papers100m": "papers100M-like twin", "reddit": "Reddit",
               "ogbn-products": "ogbn-products", "ogbn-papers100M": "ogbn-papers100M"}


def graph_label(dataset: str) -> str:
    """Table 2's name for a dataset: "papers100M-like twin" for ``synth-papers100m``."""
    return GRAPH_LABEL.get(dataset, dataset)


# ------------------------------------------------------------------ records
def _row(run: RunRow) -> dict[str, Any]:
    mb = run.minibatch
    workers = mb.get("workers") or []
    return {
        "dataset": run.dataset, "method": run.method, "params": run.method_params,
        "workers": run.workers, "hosts": run.hosts, "seed": run.seed,
        "batch_size": run.batch_size, "fanouts": run.fanouts if mb else None,
        "minibatch": bool(mb), "run": run, "source": run.source,
        "epoch_s": run.modelled_epoch_s,
        "step_s": mb.get("modelled_step_s", run.modelled_epoch_s),
        "wall_step_s": mb.get("step_time_s", run.epoch_s),
        "net_s": mb.get("modelled_network_s", max(run.comm_s or (0.0,))),
        "rows": mb.get("rows_fetched_per_epoch_with_setup"),
        "bytes": mb.get("fetch_bytes_per_epoch_with_setup", mb.get("fetch_bytes_per_epoch")),
        "num_batches": mb.get("num_batches", 1),
        "n_hot": float(np.mean([w["n_hot"] for w in workers])) if workers and
        "n_hot" in workers[0] else None,
    }


def _frame(rows: list[RunRow]) -> pd.DataFrame:
    if not rows:
        raise CdfgnnError("rapidgnn reports: no run records given")
    return pd.DataFrame([_row(r) for r in rows])


def _plain(df: pd.DataFrame, method: str) -> pd.DataFrame:
    """Runs of ``method`` with default parameters (sweeps are kept out of the tables)."""
    return df[(df["method"] == method) & (df["params"].map(len) == 0)]


def _need(df: pd.DataFrame, what: str) -> pd.DataFrame:
    if df.empty:
        raise CdfgnnError(f"rapidgnn reports: no {what} runs among the inputs")
    return df


def _match(base: pd.DataFrame, r: pd.Series, minibatch: bool = True) -> pd.Series | None:
    keys = ["dataset", "workers", "seed"] + (["batch_size", "fanouts"] if minibatch else [])
    m = base
    for k in keys:
        m = m[m[k] == r[k]]
    return m.iloc[0] if len(m) else None


def _ratio(a, b) -> float:
    return float(a) / float(b) if a is not None and b and float(b) > 0 else float("nan")


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """One row per RapidGNN run: step / network / rows / bytes ratios against each baseline."""
    rapid = _need(_plain(df, RAPID), "rapidgnn")
    base = {m: _plain(df, m) for m in (METIS, RANDOM)}
    gcn = df[(df["method"] == GCN) & ~df["minibatch"]]
    rows = []
    for _, r in rapid.iterrows():
        row = {"dataset": r["dataset"], "workers": r["workers"], "batch_size": r["batch_size"],
               "seed": r["seed"]}
        for tag, m in (("metis", METIS), ("random", RANDOM)):
            b = _match(base[m], r)
            row[f"step_{tag}"] = _ratio(b["step_s"], r["step_s"]) if b is not None else np.nan
            row[f"wall_step_{tag}"] = (_ratio(b["wall_step_s"], r["wall_step_s"])
                                       if b is not None else np.nan)
            row[f"net_{tag}"] = _ratio(b["net_s"], r["net_s"]) if b is not None else np.nan
            row[f"rows_{tag}"] = _ratio(b["rows"], r["rows"]) if b is not None else np.nan
            row[f"bytes_{tag}"] = _ratio(b["bytes"], r["bytes"]) if b is not None else np.nan
        g = _match(gcn, r, minibatch=False)
        row["epoch_gcn"] = _ratio(g["epoch_s"], r["epoch_s"]) if g is not None else np.nan
        row["net_gcn"] = _ratio(g["net_s"], r["net_s"]) if g is not None else np.nan
        row["sources"] = [r["source"]] + [x["source"] for x in (
            _match(base[METIS], r), _match(base[RANDOM], r), g) if x is not None]
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------- tables
@report("rapidgnn-table2", kind="table", reads=("runs",))
def table2(inputs, params, out, md_out) -> None:
    """Table 2 analogue: step and network speed-up of RapidGNN over the baselines."""
    from cdfgnn.report.render import write_table

    sp = speedups(_frame(inputs.rows)).drop(columns=["sources"])
    cols = [c for c in sp.columns if c != "seed"]
    t = sp.groupby(["dataset", "workers", "batch_size"], as_index=False)[cols[3:]].mean()
    t.insert(1, "graph", t["dataset"].map(graph_label))
    avg = {"dataset": "Average", "graph": "", "workers": "", "batch_size": ""}
    avg.update({c: t[c].mean() for c in cols[3:]})
    t["workers"] = t["workers"].astype(int).astype(str)
    t["batch_size"] = t["batch_size"].astype(int).astype(str)
    t = pd.concat([t, pd.DataFrame([avg])], ignore_index=True)
    write_table(t, out, md_out, digits=2,
                title="RapidGNN Table 2 analogue: speed-up of RapidGNN over DGL-METIS, "
                      "DGL-Random (re-implementations) and full-batch GCN",
                notes=["Ratios baseline / RapidGNN (higher: RapidGNN better), mean over seeds. "
                       "`step_*`: modelled step time; `wall_step_*`: measured step wall time "
                       "(simulated workers share this host's cores); `net_*`: modelled seconds "
                       "of every remote-feature pull per epoch; `rows_*`/`bytes_*`: remote "
                       "feature rows / bytes fetched per epoch (RapidGNN: misses + cache "
                       "fills). `*_gcn`: full-batch GCN (`exact`, one step per epoch): "
                       "epoch time and per-epoch halo communication.",
                       "Synthetic twins of the paper's graphs, network modelled with the "
                       "`rapidgnn-chameleon` profile unless the runs say otherwise."])


@report("rapidgnn-table3-energy", kind="table", reads=("runs",))
def table3(inputs, params, out, md_out) -> None:
    """Table 3 analogue: energy of RapidGNN and DGL-METIS (measured where readable, else
    not measured; modelled CPU energy labelled)."""
    from cdfgnn.report.render import write_table

    rows = []
    for _, r in energy_rows(_frame(inputs.rows)).iterrows():
        rows.append(r)
    write_table(pd.DataFrame(rows), out, md_out, digits=2,
                title="RapidGNN Table 3 analogue: energy of RapidGNN and DGL-METIS",
                notes=["`status`: *measured* (RAPL package counters for the CPU, NVML for "
                       "GPUs), *not measured* (counter not readable here: no number is "
                       "given), or *modelled* (CPU power model P_idle T + (P_busy - P_idle) "
                       "x compute per worker, constants in cdfgnn/train/energy.py; not a "
                       "measurement). RAPL covers the whole package, other load included."])


def energy_rows(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for m in (RAPID, METIS):
        for _, r in _plain(df, m).iterrows():
            en = r["run"].energy
            for part, key in (("CPU", "cpu"), ("GPU", "gpu"), ("CPU", "modelled_cpu")):
                e = en.get(key) or {"status": "not measured"}
                rows.append({"dataset": r["dataset"], "workers": r["workers"],
                             "batch_size": r["batch_size"], "method": LABEL[m],
                             "component": part, "status": e.get("status"),
                             "total_j": e.get("total_j"), "mean_epoch_j": e.get("mean_epoch_j"),
                             "min_epoch_j": e.get("min_epoch_j"),
                             "max_epoch_j": e.get("max_epoch_j"),
                             "mean_power_w": e.get("mean_power_w"),
                             "duration_s": e.get("duration_s")})
    return _need(pd.DataFrame(rows), "rapidgnn / distdgl-metis")


# ------------------------------------------------------------------ figures
def _dataset_pick(df: pd.DataFrame, wanted: str) -> str:
    names = sorted(df["dataset"].unique())
    if wanted and wanted in names:
        return wanted
    return names[0]


@report("rapidgnn-fig3", kind="figure", reads=("runs",), params={"dataset": "synth-products"})
def fig3(inputs, params, out, md_out) -> None:
    """Fig. 3: how often each remote vertex is needed in one epoch (worker 0, epoch 0)."""
    from cdfgnn.report.render import new_figure, save_figure

    rapid = _need(_plain(_frame(inputs.rows), RAPID), "rapidgnn")
    ds = _dataset_pick(rapid, params["dataset"])
    r = rapid[rapid["dataset"] == ds].sort_values(["workers", "batch_size"]).iloc[0]
    hist = np.asarray(r["run"].minibatch["workers"][0]["freq_hist_epoch0"], dtype=float)
    freq = np.arange(hist.size)
    total = hist[1:].sum()
    fig, axes = new_figure(1, 2, figsize=(11, 4))
    ax = axes[0][0]
    ax.bar(freq[1:], hist[1:], width=0.9)
    ax.set_yscale("log")
    ax.set_xlabel("batches of the epoch that need the vertex")
    ax.set_ylabel("remote vertices")
    once = hist[1] / total if total and hist.size > 1 else float("nan")
    ax.set_title(f"{ds}, P={r['workers']}, batch {int(r['batch_size'])}: {once:.1%} needed once, "
                 f"max {int(freq[hist > 0].max()) if total else 0}", fontsize=9)
    # right: the top 10% most accessed vertices
    counts = np.repeat(freq, hist.astype(np.int64))
    top = np.sort(counts)[::-1][: max(1, counts.size // 10)]
    ax2 = axes[0][1]
    vals, cnt = np.unique(top, return_counts=True)
    ax2.bar(vals, cnt, width=0.9, color="tab:orange")
    ax2.set_xlabel("batches of the epoch that need the vertex")
    ax2.set_title("top 10% most accessed remote vertices", fontsize=9)
    for a in (ax, ax2):
        a.grid(alpha=0.3)
    fig.suptitle("RapidGNN Fig. 3 analogue: access frequency of remote features (worker 0)")
    save_figure(fig, out)


def _bars(ax, labels: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    x = np.arange(len(labels))
    w = 0.8 / max(len(series), 1)
    for k, (name, vals) in enumerate(series.items()):
        ax.bar(x + (k - (len(series) - 1) / 2) * w, vals, w, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=20, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)


@report("rapidgnn-fig4", kind="figure", reads=("runs",))
def fig4(inputs, params, out, md_out) -> None:
    """Fig. 4: mean remote feature data per training step and worker, RapidGNN vs DGL-METIS."""
    from cdfgnn.report.render import new_figure, save_figure

    df = _frame(inputs.rows)
    rapid = _need(_plain(df, RAPID), "rapidgnn")
    metis = _plain(df, METIS)
    labels, a, b = [], [], []
    for _, r in rapid.sort_values(["dataset", "workers", "batch_size"]).iterrows():
        m = _match(metis, r)
        per = r["num_batches"] * r["workers"] * 1e6
        labels.append(f"{r['dataset']}\nP={r['workers']} b={int(r['batch_size'])}")
        a.append(r["bytes"] / per)
        b.append(m["bytes"] / per if m is not None else np.nan)
    fig, axes = new_figure(1, 1, figsize=(max(6, 1.4 * len(labels)), 4))
    _bars(axes[0][0], labels, {LABEL[RAPID]: a, LABEL[METIS]: b}, "MB per step and worker")
    fig.suptitle("RapidGNN Fig. 4 analogue: remote feature data per step (requests + rows)")
    save_figure(fig, out)


@report("rapidgnn-fig5", kind="figure", reads=("runs",))
def fig5(inputs, params, out, md_out) -> None:
    """Fig. 5: remote feature rows fetched per epoch against the cache size n_hot."""
    from cdfgnn.report.render import new_figure, save_figure

    df = _frame(inputs.rows)
    rapid = _need(df[df["method"] == RAPID], "rapidgnn")
    fig, axes = new_figure(1, 1, figsize=(6.5, 4.2))
    ax = axes[0][0]
    for (ds, p, bs), g in rapid.groupby(["dataset", "workers", "batch_size"]):
        g = g.sort_values("n_hot")
        ax.plot(g["n_hot"], g["rows"], "o-", label=f"{ds} P={p} batch {int(bs)}")
        m = _match(_plain(df, METIS), g.iloc[0])
        if m is not None:
            ax.axhline(m["rows"], ls=":", lw=1, color=ax.lines[-1].get_color())
    ax.set_xlabel("cache rows per worker (n_hot)")
    ax.set_ylabel("remote rows fetched per epoch (all workers)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="dotted: DGL-METIS (re-impl.)", title_fontsize=7)
    fig.suptitle("RapidGNN Fig. 5 analogue: fetches vs cache size")
    save_figure(fig, out)


@report("rapidgnn-fig6", kind="figure", reads=("runs",))
def fig6(inputs, params, out, md_out) -> None:
    """Fig. 6: modelled throughput (seed vertices / s) against the number of workers."""
    from cdfgnn.report.render import new_figure, save_figure

    df = _frame(inputs.rows)
    datasets = sorted(df["dataset"].unique())
    fig, axes = new_figure(1, len(datasets), figsize=(5.5 * len(datasets), 4))
    for ax, ds in zip(axes[0], datasets):
        for m in (RAPID, METIS):
            g = _plain(df[df["dataset"] == ds], m)
            if g.empty:
                continue
            n_train = g["run"].map(lambda r: sum(r.minibatch["train_seeds"]))
            thr = (n_train / g["epoch_s"]).groupby(g["workers"]).mean().sort_index()
            ax.plot(thr.index, thr.values, "o-", label=LABEL[m])
            for p, v in thr.items():
                ax.annotate(f"{v / thr.iloc[0]:.2f}x", (p, v), fontsize=7,
                            textcoords="offset points", xytext=(0, 5))
        ax.set_xlabel("workers P")
        ax.set_ylabel("seed vertices per modelled second")
        ax.set_title(ds, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("RapidGNN Fig. 6 analogue: scalability (labels: speed-up over the smallest P)")
    save_figure(fig, out)


@report("rapidgnn-fig7", kind="figure", reads=("runs",))
def fig7(inputs, params, out, md_out) -> None:
    """Fig. 7: memory: peak RSS per run, and RapidGNN's cache + queue against its bound."""
    from cdfgnn.report.render import new_figure, save_figure

    df = _frame(inputs.rows)
    rapid = _need(_plain(df, RAPID), "rapidgnn")
    metis = _plain(df, METIS)
    labels, ra, me, used, bound = [], [], [], [], []
    for _, r in rapid.sort_values(["dataset", "workers", "batch_size"]).iterrows():
        m = _match(metis, r)
        labels.append(f"{r['dataset']}\nP={r['workers']} b={int(r['batch_size'])}")
        ra.append(r["run"].peak_memory_mb)
        me.append(m["run"].peak_memory_mb if m is not None else np.nan)
        ws = r["run"].minibatch["workers"]
        used.append(max(w["memory_used_bytes"] for w in ws) / 2 ** 20)
        bound.append(max(w["memory_bound_bytes"] for w in ws) / 2 ** 20)
    fig, axes = new_figure(1, 2, figsize=(max(10, 2.4 * len(labels)), 4))
    _bars(axes[0][0], labels, {LABEL[RAPID]: ra, LABEL[METIS]: me},
          "peak RSS of the run (MB, one process)")
    _bars(axes[0][1], labels, {"cache + prefetch queue (measured)": used,
                               "bound 2 n_hot d + Q m_max d": bound},
          "MB per worker (max over workers)")
    fig.suptitle("RapidGNN Fig. 7 analogue: host memory and the device-memory bound")
    save_figure(fig, out)


@report("rapidgnn-fig8", kind="figure", reads=("runs",))
def fig8(inputs, params, out, md_out) -> None:
    """Fig. 8: CPU and GPU energy, RapidGNN vs DGL-METIS (measured, or modelled, labelled)."""
    from cdfgnn.report.render import new_figure, save_figure

    rows = energy_rows(_frame(inputs.rows))
    rows = rows[rows["status"] != "not measured"]
    rows = rows.assign(kind=rows["component"] + " " + rows["status"])
    labels = sorted({f"{d}\nP={p} b={int(b)}" for d, p, b in
                     zip(rows["dataset"], rows["workers"], rows["batch_size"])})
    series = {}
    for (method, kind), g in rows.groupby(["method", "kind"]):
        vals = {f"{d}\nP={p} b={int(b)}": t for d, p, b, t in
                zip(g["dataset"], g["workers"], g["batch_size"], g["total_j"])}
        series[f"{method}: {kind}"] = [vals.get(lb, np.nan) for lb in labels]
    fig, axes = new_figure(1, 1, figsize=(max(7, 2 * len(labels)), 4.2))
    _bars(axes[0][0], labels, series, "energy over the run (J)")
    fig.suptitle("RapidGNN Fig. 8 analogue: energy (modelled values are a power model, "
                 "not measurements)", fontsize=10)
    save_figure(fig, out)


@report("rapidgnn-fig9", kind="figure", reads=("runs",))
def fig9(inputs, params, out, md_out) -> None:
    """Fig. 9: training accuracy per epoch for each batch size, RapidGNN vs the baselines."""
    from cdfgnn.report.render import new_figure, save_figure

    df = _frame(inputs.rows)
    df = df[df["minibatch"] & (df["params"].map(len) == 0)]
    panels = sorted({(d, b) for d, b in zip(df["dataset"], df["batch_size"])})
    if not panels:
        raise CdfgnnError("rapidgnn-fig9: no mini-batch runs among the inputs")
    fig, axes = new_figure(1, len(panels), figsize=(4.5 * len(panels), 3.8))
    styles = {RAPID: ("-", "o"), METIS: ("--", "s"), RANDOM: (":", "^")}
    for ax, (ds, bs) in zip(axes[0], panels):
        sub = df[(df["dataset"] == ds) & (df["batch_size"] == bs)]
        for m, g in sub.groupby("method"):
            curves = [[e.get("train", np.nan) for e in r.epochs] for r in g["run"]]
            n = min(len(c) for c in curves)
            y = np.nanmean([c[:n] for c in curves], axis=0)
            ls, mk = styles.get(m, ("-", "x"))
            ax.plot(np.arange(n), y, ls=ls, marker=mk, label=LABEL.get(m, m), markersize=4)
        ax.set_title(f"{ds}, batch {int(bs)}", fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("training accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("RapidGNN Fig. 9 analogue: accuracy vs batch size (same schedule: "
                 "RapidGNN and DGL-METIS coincide)")
    save_figure(fig, out)


# ------------------------------------------------------------------- claims
TWIN = "synthetic twins, modelled network (rapidgnn-chameleon)"


@dataclass(frozen=True)
class ClaimContext:
    """What RapidGNN's claim queries read: one row per run and one per RapidGNN run
    with its speed-ups over the matched baselines."""

    runs: pd.DataFrame
    speedups: pd.DataFrame

    @property
    def config(self) -> str:
        return _configs(self.speedups)

    @property
    def sources(self) -> list[str]:
        return sorted({s for ss in self.speedups["sources"] for s in ss})

    def measured(self, value, **kw) -> list[Measurement]:
        """One measurement over every configuration and run of the speed-up table."""
        return [Measurement.one(value, kw.pop("config", self.config), runs=self.sources, **kw)]


def mean_speedup(column: str):
    """A query: the mean of a speed-up column over the RapidGNN runs (None: no value)."""
    def measure(ctx: ClaimContext) -> list[Measurement]:
        v = ctx.speedups[column].dropna()
        return ctx.measured(float(v.mean()) if len(v) else None)
    return measure


def measure_rows_ratio(ctx: ClaimContext) -> list[Measurement]:
    sp = ctx.speedups
    sub = sp[sp["dataset"].str.contains("products") & (sp["workers"] == 4)]
    sub = sub if len(sub) else sp
    v = float(sub["rows_metis"].dropna().mean()) if sub["rows_metis"].notna().any() else None
    return ctx.measured(v, config=_configs(sub))


def public_setting_rows(df: pd.DataFrame) -> list[dict]:
    """RapidGNN runs with one hot set per window (the public re-implementation's setting,
    ``rapidgnn-public``) against DistDGL-METIS at the same batch size and fan-outs: rows
    fetched per epoch with every fill, and the step misses only (the public code's count,
    arefinniam/greendy-gnn code/cache.py), as reduction factors."""
    pub = df[(df["method"] == RAPID)
             & df["params"].map(lambda p: p.get("cache_scope") == "window")]
    out = []
    for _, r in pub.iterrows():
        m = _match(_plain(df, METIS), r)
        if m is None:
            continue
        eps = r["run"].epochs
        misses = sum(e["remote_inputs"] - e.get("cache_hits", 0) for e in eps) / len(eps)
        out.append({"config": f"{r['dataset']} P={r['workers']} b={r['batch_size']} "
                              f"fan-outs {list(r['fanouts'])} n_hot={r['n_hot']:.0f} "
                              f"window={r['params'].get('window', 16)}",
                    "rows": _ratio(m["rows"], r["rows"]), "misses": _ratio(m["rows"], misses),
                    "runs": [r["source"], m["source"]]})
    return out


def measure_public_setting(ctx: ClaimContext) -> list[Measurement]:
    """One measurement per run of the public re-implementation's setting (both counts)."""
    return [Measurement(row["config"], {"rows": row["rows"], "misses": row["misses"]},
                        runs=row["runs"]) for row in public_setting_rows(ctx.runs)]


def measure_loss_gap(ctx: ClaimContext) -> list[Measurement]:
    """Largest absolute loss difference over epochs, RapidGNN against DGL-METIS."""
    rapid, metis = _plain(ctx.runs, RAPID), _plain(ctx.runs, METIS)
    diffs = []
    for _, r in rapid.iterrows():
        m = _match(metis, r)
        if m is not None:
            a = [e["loss"] for e in r["run"].epochs]
            b = [e["loss"] for e in m["run"].epochs]
            diffs.append(max(abs(x - y) for x, y in zip(a, b)))
    return ctx.measured(max(diffs) if diffs else None)


def measure_precompute(ctx: ClaimContext) -> list[Measurement]:
    """Schedule precompute over training time: CPU seconds of the worst worker (wall
    seconds on a loaded host mostly measure waiting for a core); records without CPU
    times fall back to wall time."""
    mbs = [r.minibatch for r in _plain(ctx.runs, RAPID)["run"]]
    cpu_fr = [m["precompute_cpu_fraction"] for m in mbs
              if m.get("precompute_cpu_fraction") is not None]
    wall_fr = [m["precompute_fraction"] for m in mbs if m.get("precompute_fraction") is not None]
    f = max(cpu_fr) if cpu_fr else (max(wall_fr) if wall_fr else None)
    note = "max over runs; measured wall times"
    if cpu_fr:
        note = ("max over runs; CPU seconds of the worst worker: sampling every batch + "
                "counts + hot sets + schedule files, over its training epochs (which read "
                f"the stored samples, they do not sample); wall-time fraction {max(wall_fr):.3f}")
    return ctx.measured(f, note=note)


def measure_once_share(ctx: ClaimContext) -> list[Measurement]:
    once = [_once_share(r) for _, r in _plain(ctx.runs, RAPID).iterrows()]
    once = [x for x in once if x is not None]
    return ctx.measured(100.0 * float(np.mean(once)) if once else None)


def measure_scaling(ctx: ClaimContext) -> list[Measurement]:
    return ctx.measured(_scaling(_plain(ctx.runs, RAPID)),
                        config="all datasets and batch sizes with both P")


def energy_cut(component: str):
    """A query: mean energy reduction (%) of RapidGNN against DGL-METIS for ``component``,
    from measured counters, else from the power model (then a different setting)."""
    def measure(ctx: ClaimContext) -> list[Measurement]:
        en = energy_rows(ctx.runs)
        measured = en[(en["component"] == component) & (en["status"] == "measured")]
        modelled = en[(en["component"] == component) & (en["status"] == "modelled")]
        use, label = (measured, "measured") if len(measured) else (modelled, "modelled")
        red = _reduction(use)
        if red is None:
            return [Measurement.one(None, ctx.config, labels={"how": ""},
                                    note="no readable counter on this host")]
        return ctx.measured(red, labels={"how": f" ({label})"},
                            setting_differs=label == "modelled",
                            note="power model, not a measurement" if label == "modelled"
                            else "RAPL whole package")
    return measure


def _speedup_claim(column: str, paper: float, what: str) -> ClaimSpec:
    return ClaimSpec(f"{what}: mean speed-up", f"{paper:.2f}x", mean_speedup(column),
                     (at_least(paper, rel_tol=0.25),), unit="x", note=TWIN, speed=True)


#: RapidGNN's headline claims (Table 2-3, Figs. 3, 4, 6, 9) and the suite's targets
CLAIMS = (
    _speedup_claim("step_metis", 2.46, "step time vs DGL-METIS"),
    _speedup_claim("step_random", 2.26, "step time vs DGL-Random"),
    _speedup_claim("epoch_gcn", 3.00, "step time vs GCN (here: epoch time vs full-batch GCN)"),
    _speedup_claim("net_metis", 12.70, "network time vs DGL-METIS"),
    _speedup_claim("net_random", 9.70, "network time vs DGL-Random"),
    _speedup_claim("net_gcn", 15.39, "network time vs GCN (full-batch halo)"),
    ClaimSpec("remote feature data per step, DGL-METIS / RapidGNN (Fig. 4, products)",
              "2.24-2.40x", mean_speedup("bytes_metis"), (at_least(2.24, rel_tol=0.25),),
              unit="x", note=TWIN),
    ClaimSpec("remote feature rows fetched per epoch, DGL-METIS / RapidGNN (products twin at "
              "4 workers)", ">= 5x (suite target)", measure_rows_ratio,
              (at_least(5.0),), unit="x", note="rows include cache fills and the initial fill",
              suite_target=True),
    # the public re-implementation's setting (docs/fidelity.md, case 3), both counts
    ClaimSpec("remote feature rows fetched per epoch, DGL-METIS / RapidGNN, public "
              "re-implementation's setting (suite's count)", ">= 5x (suite target)",
              measure_public_setting, (at_least(5.0),), value="rows", unit="x",
              note="rows include cache fills and the initial fill; docs/fidelity.md case 3",
              suite_target=True),
    ClaimSpec("remote feature rows fetched per epoch, DGL-METIS / RapidGNN, public "
              "re-implementation's setting (public code's count)", ">= 5x (suite target)",
              measure_public_setting, (at_least(5.0),), value="misses", unit="x",
              note="step misses only, cache fills not counted (arefinniam/greendy-gnn "
                   "code/cache.py); docs/fidelity.md case 3", suite_target=True),
    ClaimSpec("same convergence as the baseline (same schedule: max abs loss difference over "
              "epochs)", "indistinguishable curves (Fig. 9)", measure_loss_gap, (at_most(0.0),)),
    ClaimSpec("schedule precompute / training time below 10%",
              "not reported (excluded from t_e); < 10% (suite target)", measure_precompute,
              (below(0.10),), suite_target=True),
    ClaimSpec("remote vertices needed by exactly one batch of an epoch (Fig. 3, products)",
              "45.3%", measure_once_share, (near(45.3, rel_tol=0.25),), unit="%",
              note="worker 0, epoch 0, mean over runs; within 25% counts"),
    ClaimSpec("throughput, 4 workers / 2 workers (Fig. 6)", "1.7x-2.1x", measure_scaling,
              (at_least(1.7, rel_tol=0.25),), unit="x", speed=True,
              note="modelled epoch time; seeds per modelled second"),
    ClaimSpec("CPU energy reduction vs DGL-METIS{how}", "44%", energy_cut("CPU"),
              (at_least(44.0, rel_tol=0.25),), unit="%"),
    ClaimSpec("GPU energy reduction vs DGL-METIS{how}", "32%", energy_cut("GPU"),
              (at_least(32.0, rel_tol=0.25),), unit="%"),
)


@report("rapidgnn-claims", kind="table", reads=("runs",))
def claims(inputs, params, out, md_out) -> None:
    """RapidGNN's headline claims beside the values measured here."""
    def context_of(view) -> ClaimContext:
        df = _frame(view.rows)
        return ClaimContext(df, speedups(df))

    write_claims(PAPER, evaluate(CLAIMS, context_of(inputs), DeviceModel.of(inputs, context_of)),
                 out, md_out,
                 title="RapidGNN: headline claims against this suite",
                 notes=["Speed-ups are means over the configurations listed (baseline / "
                        "RapidGNN); the paper's are means over 3 datasets x 3 batch sizes "
                        "on 4 machines with P100 GPUs and 10 GbE."])


def _configs(sp: pd.DataFrame) -> str:
    return "; ".join(sorted({f"{d} P={int(p)} b={int(b)}" for d, p, b in
                             zip(sp["dataset"], sp["workers"], sp["batch_size"])}))


def _once_share(r: pd.Series) -> float | None:
    hist = r["run"].minibatch["workers"][0].get("freq_hist_epoch0") or []
    total = sum(hist[1:])
    return hist[1] / total if total and len(hist) > 1 else None


def _scaling(rapid: pd.DataFrame) -> float | None:
    """Mean over (dataset, batch size, seed) of throughput(P=4) / throughput(P=2)."""
    vals = []
    for _, g in rapid.groupby(["dataset", "batch_size", "seed"]):
        by_p = {int(p): t for p, t in zip(g["workers"], g["epoch_s"])}
        if 2 in by_p and 4 in by_p and by_p[4]:
            vals.append(by_p[2] / by_p[4])     # same seeds per epoch in total
    return float(np.mean(vals)) if vals else None


def _reduction(rows: pd.DataFrame) -> float | None:
    """Mean over matched configurations of 100 (1 - E_rapid / E_metis)."""
    vals = []
    rapid = rows[rows["method"] == LABEL[RAPID]]
    metis = rows[rows["method"] == LABEL[METIS]]
    for _, r in rapid.iterrows():
        m = metis[(metis["dataset"] == r["dataset"]) & (metis["workers"] == r["workers"])
                  & (metis["batch_size"] == r["batch_size"])]
        if len(m) and r["total_j"] is not None and m.iloc[0]["total_j"]:
            vals.append(100.0 * (1.0 - r["total_j"] / m.iloc[0]["total_j"]))
    return float(np.mean(vals)) if vals else None
