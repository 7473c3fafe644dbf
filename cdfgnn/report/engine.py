"""Engine figures: is the engine right, and how does it scale?

* ``accuracy_vs_epoch``: test metric per epoch of the one-process full-graph
  oracle against distributed ``exact`` training at several P. Exact sync makes
  them the same computation, so the curves must lie on top of each other; a gap
  is an engine bug, not a technique effect. Mean over seeds per epoch.
* ``epoch_time_vs_workers``: epoch time against P, both the **measured** one
  (wall time per epoch, max over ranks, mean over timed epochs; on one machine all
  virtual ranks share its cores, so this grows with P) and the **modelled** one
  (max over ranks of compute CPU time + NetworkModel communication time,
  docs/architecture.md, Metrics). Mean +- unbiased std over seeds. The one-process oracle's
  measured epoch time is drawn as a horizontal reference when present.

Inputs are the tidy tables of :mod:`cdfgnn.report.aggregate`; figures are written
atomically as PNG (+ PDF). Both are registered reports (:mod:`cdfgnn.report.registry`).
"""
from __future__ import annotations

from cdfgnn.errors import CdfgnnError
from cdfgnn.report.aggregate import mean_std
from cdfgnn.report.registry import report
from cdfgnn.report.render import new_figure, save_figure


@report("accuracy-vs-epoch", kind="figure", reads=("runs",))
def accuracy_vs_epoch(inputs, params, out, md_out) -> None:
    """Test metric per epoch: the one-process oracle against each distributed configuration."""
    plot_accuracy_vs_epoch(inputs.epochs, out)


@report("epoch-time-vs-workers", kind="figure", reads=("runs",))
def epoch_time_vs_workers(inputs, params, out, md_out) -> None:
    """Measured and modelled epoch time against the number of workers P."""
    plot_epoch_time_vs_workers(inputs.runs, out)


def _title(df, dataset: str) -> str:
    sub = df[df["dataset"] == dataset]
    models = sorted({f"{m} {l}L h{h}" for m, l, h in zip(sub["model"], sub["layers"], sub["hidden"])})
    return f"{dataset} ({', '.join(models)})"


def plot_accuracy_vs_epoch(epochs, path: str) -> None:
    """Test metric per epoch: oracle (dashed, black) vs each distributed configuration."""
    if epochs.empty or "test" not in epochs:
        raise CdfgnnError("accuracy-vs-epoch: the run records have no epoch rows with 'test'")
    epochs = epochs[epochs["test"].notna()]
    datasets = sorted(epochs["dataset"].unique())
    fig, axes = new_figure(1, len(datasets), figsize=(6 * len(datasets), 4.2))
    for ax, ds in zip(axes[0], datasets):
        sub = epochs[epochs["dataset"] == ds]
        groups = sub.groupby(["trainer", "method", "partitioner", "workers", "topology"], sort=True)
        markers = iter("osD^vP*Xh<>")
        n_dist = max(1, sum(1 for key, _ in groups if key[0] == "distributed"))
        k = 0
        nseeds = 1
        for (trainer, method, part, workers, topo), g in groups:
            curve = g.groupby("epoch")["test"].mean()
            nseeds = max(nseeds, g["seed"].nunique())
            if trainer == "distributed":
                label = f"{method} P={workers} ({topo}, {part})"
                # markers staggered between curves so curves lying exactly on each
                # other (what exact sync must give) all stay visible
                step = max(1, len(curve) // 8)
                ax.plot(curve.index, curve.values, lw=1.5, alpha=0.85, label=label,
                        marker=next(markers, "o"), markevery=(k * step // n_dist, step),
                        markersize=5)
                k += 1
            else:
                label = f"oracle: {trainer}, 1 process"
                ax.plot(curve.index, curve.values, "k--", lw=2.2, label=label, zorder=5)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test metric (accuracy or micro-F1)")
        ax.set_title(_title(sub, ds) + (f", mean of {nseeds} seeds" if nseeds > 1 else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Distributed exact training vs the one-process oracle")
    save_figure(fig, path)


def workers_axis(ax, workers, label: str = "workers P") -> None:
    """A log2 x axis with one tick per worker count."""
    ps = sorted(int(p) for p in workers)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ps, [str(p) for p in ps])
    ax.minorticks_off()
    ax.set_xlabel(label)


def plot_epoch_time_vs_workers(runs, path: str) -> None:
    """Measured (solid) and modelled (dashed) epoch time against P, per dataset/method."""
    need = {"epoch_time_s", "modelled_epoch_time_s"}
    if runs.empty or not need <= set(runs.columns):
        raise CdfgnnError(f"epoch-time-vs-workers: run summaries lack {sorted(need - set(runs.columns))}")
    dist = runs[runs["trainer"] == "distributed"]
    if dist.empty:
        raise CdfgnnError("epoch-time-vs-workers: no distributed runs among the inputs")
    datasets = sorted(dist["dataset"].unique())
    fig, axes = new_figure(1, len(datasets), figsize=(6 * len(datasets), 4.2))
    for ax, ds in zip(axes[0], datasets):
        sub = dist[dist["dataset"] == ds]
        for i, ((method, part), g) in enumerate(sub.groupby(["method", "partitioner"], sort=True)):
            color = f"C{i}"
            for col, style, kind in (("epoch_time_s", "-o", "measured"),
                                     ("modelled_epoch_time_s", "--s", "modelled")):
                pts = []
                for p, gp in g.groupby("workers"):
                    m, s = mean_std(gp[col])
                    pts.append((p, m, s))
                xs, ms, ss = zip(*pts)
                ax.errorbar(xs, ms, yerr=ss, fmt=style, color=color, capsize=3,
                            label=f"{kind}: {method}, {part}")
        oracle = runs[(runs["trainer"] == "full-graph") & (runs["dataset"] == ds)]
        if not oracle.empty:
            m, _ = mean_std(oracle["epoch_time_s"])
            ax.axhline(m, color="k", ls=":", label="measured: one-process full-graph")
        workers_axis(ax, sub["workers"].unique())
        ax.set_yscale("log")
        ax.set_ylabel("epoch time (s)")
        ax.set_title(_title(sub, ds), fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle("Epoch time vs workers (measured: max over ranks; modelled: NetworkModel)")
    save_figure(fig, path)
