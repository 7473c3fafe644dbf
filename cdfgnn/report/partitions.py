"""Partition reports: the CDFGNN Table 3 analogue, its γ-derived table, RF vs P figure.

Inputs are rows of :func:`cdfgnn.partition.stats.partition_stats` (one per dataset x
partitioner x topology x seed). Outputs:

* :func:`table3` — one row per (dataset, partitioner, hosts, gpus_per_host), numbers
  averaged over seeds: inner / outer (max over devices of rows sent per sync inside /
  across hosts, as in partition/stats.py), rf, edge_if, vertex_if (docs/architecture.md, Metrics).
* :func:`derived_gamma_table` — our derived table under CDFGNN Table 3
  (arXiv 2408.00232): for every (dataset, topology) holding both EBV γ=0.0 and EBV γ=0.1,
  the relative change γ=0.1 vs γ=0.0 of Outer, Inner, RF, Inner+Outer and the
  bandwidth-weighted cost Inner/22.70 + Outer/8.27 (Table 2 peer-to-peer GB/s). The
  headline "γ=0.1 cuts Outer by X%" is the mean over pairs of
  (Outer_γ0 - Outer_γ0.1) / Outer_γ0, the paper's 31.08% for its Table 3.
* :func:`write_table3` — CSV (atomic) plus a markdown page that puts the transcribed
  paper numbers (:data:`PAPER_TABLE3`) beside the measured ones and ends with the
  paper's claim and the measured figure.
* :func:`plot_rf_vs_parts` — RF and edge imbalance against the number of parts.

Registered reports (:mod:`cdfgnn.report.registry`): ``table3`` (parameter
``min_gpus_per_host``, default 2) and ``rf-vs-parts`` (parameter ``dataset``:
keep one dataset; default all).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import atomic_write_text
from cdfgnn.report.registry import report
from cdfgnn.report.render import format_cell, markdown_table, new_figure, save_figure

# CDFGNN Table 2 peer-to-peer bandwidths (GB/s): PCIe inside a host, InfiniBand across.
INTRA_GBPS = 22.70
INTER_GBPS = 8.27

TABLE3_COLUMNS = ["dataset", "partitioner", "hosts", "gpus_per_host", "inner", "outer",
                  "rf", "edge_if", "vertex_if"]

# Transcription of the published CDFGNN Table 3 (arXiv 2408.00232). These are
# the paper's numbers, not measurements of this suite. Columns as TABLE3_COLUMNS; the
# paper does not report Vertex IF (None).
PAPER_TABLE3: tuple[tuple[Any, ...], ...] = (
    ("reddit", "EBV γ=0.0", 2, 2, 104217, 138583, 2.9027, 1.0054, None),
    ("reddit", "EBV γ=0.1", 2, 2, 105412, 117879, 3.0860, 1.0022, None),
    ("reddit", "HEP", 2, 2, 36662, 52886, 1.6084, 1.2693, None),
    ("reddit", "DNE", 2, 2, 65578, 118788, 2.1025, 1.2558, None),
    ("ogbn-products", "EBV γ=0.0", 2, 4, 695905, 639459, 3.1788, 1.0002, None),
    ("ogbn-products", "EBV γ=0.1", 2, 4, 952727, 481147, 3.3379, 1.0008, None),
    ("ogbn-products", "HEP", 2, 4, 143711, 127261, 1.3304, 1.2323, None),
    ("ogbn-products", "DNE", 2, 4, 367460, 406408, 1.9363, 1.1527, None),
    ("friend", "EBV γ=0.0", 2, 8, 12395102, 9988776, 3.7237, 1.0002, None),
    ("friend", "EBV γ=0.1", 2, 8, 19586785, 5465465, 4.0322, 1.0011, None),
    ("friend", "HEP", 2, 8, 5794009, 4675810, 1.7048, 1.776, None),
    ("friend", "DNE", 2, 8, 8737134, 11670478, 2.3546, 1.7455, None),
    ("papers100M", "EBV γ=0.0", 2, 8, 20438528, 16362561, 3.6503, 1.0000, None),
    ("papers100M", "EBV γ=0.1", 2, 8, 32241760, 9924817, 4.0347, 1.0001, None),
    ("papers100M", "HEP", 2, 8, 5826661, 3085959, 1.3144, 2.0204, None),
    ("papers100M", "DNE", 2, 8, 10021186, 13819120, 2.1475, 1.3866, None),
)
# The paper's headline for Table 3 (CDFGNN sec. 6): mean Outer cut of γ=0.1 vs γ=0.0.
PAPER_OUTER_CUT_PCT = 31.08

EBV0, EBV1 = "EBV γ=0.0", "EBV γ=0.1"
_LABELS = {"hep": "HEP", "dne": "DNE", "ne": "NE", "hdrf": "HDRF", "dbh": "DBH",
           "random": "random", "metis": "METIS", "greedy": "greedy"}
_ORDER = [EBV0, EBV1, "HEP", "DNE", "NE", "HDRF", "DBH", "greedy", "random", "METIS"]
_REQUIRED = ("dataset", "method", "hosts", "devices_per_host", "inner_max", "outer_max",
             "rf", "edge_imbalance", "vertex_imbalance")


# ------------------------------------------------------------------- labels
def partitioner_label(method: str, params: dict[str, Any] | None = None) -> str:
    """Display label of a partitioner: 'EBV γ=0.1', 'HEP', 'random', ...

    Any method whose name contains 'ebv' is labelled by its ``gamma`` parameter
    ('EBV γ=0.0' when gamma is 0); without a gamma it is plain 'EBV'. Unknown
    methods keep their registry name.
    """
    params = params or {}
    name = str(method).lower()
    if "ebv" in name:
        gamma = params.get("gamma", params.get("γ"))
        if gamma is None:
            return "EBV"
        g = float(gamma)
        text = f"{g:.1f}" if round(g, 1) == g else f"{g:g}"
        return f"EBV γ={text}"
    return _LABELS.get(name, str(method))


def _order_key(label: str) -> tuple[int, str]:
    return (_ORDER.index(label) if label in _ORDER else len(_ORDER), label)


# ------------------------------------------------------------------- table 3
def table3(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """CDFGNN Table 3 analogue from :func:`partition_stats` rows.

    Columns: TABLE3_COLUMNS plus ``runs`` (rows averaged: seeds). Rows with the same
    dataset, partitioner label and topology are averaged. Sorted by dataset, hosts,
    gpus_per_host, then partitioner in the paper's order.
    """
    records = []
    for k, row in enumerate(rows):
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise CdfgnnError(f"partition stats row {k} ({row.get('dataset')!r}, "
                              f"{row.get('method')!r}) lacks {missing}")
        records.append({
            "dataset": str(row["dataset"]),
            "partitioner": partitioner_label(row["method"], row.get("params")),
            "hosts": int(row["hosts"]), "gpus_per_host": int(row["devices_per_host"]),
            "inner": float(row["inner_max"]), "outer": float(row["outer_max"]),
            "rf": float(row["rf"]), "edge_if": _num(row["edge_imbalance"]),
            "vertex_if": _num(row["vertex_imbalance"])})
    if not records:
        return pd.DataFrame(columns=TABLE3_COLUMNS + ["runs"])
    df = pd.DataFrame.from_records(records)
    keys = ["dataset", "partitioner", "hosts", "gpus_per_host"]
    out = df.groupby(keys, sort=False).agg(
        inner=("inner", "mean"), outer=("outer", "mean"), rf=("rf", "mean"),
        edge_if=("edge_if", "mean"), vertex_if=("vertex_if", "mean"),
        runs=("rf", "size")).reset_index()
    return _sorted(out)


def paper_table3() -> pd.DataFrame:
    """:data:`PAPER_TABLE3` (published numbers, transcribed) as a DataFrame."""
    df = pd.DataFrame.from_records(list(PAPER_TABLE3), columns=TABLE3_COLUMNS)
    df["vertex_if"] = df["vertex_if"].astype(float)
    return df


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    order = df["partitioner"].map(lambda s: _order_key(s)[0])
    df = df.assign(_o=order).sort_values(["dataset", "hosts", "gpus_per_host", "_o", "partitioner"],
                                         kind="stable")
    return df.drop(columns="_o").reset_index(drop=True)


def _num(x: Any) -> float:
    return float("nan") if x is None else float(x)


# ------------------------------------------------------------ derived table
def derived_gamma_table(df: pd.DataFrame, min_gpus_per_host: int = 2) -> pd.DataFrame:
    """Relative change (%) of γ=0.1 against γ=0.0 per (dataset, hosts, gpus_per_host).

    Columns: dataset, hosts, gpus_per_host, outer_change, inner_change, rf_change,
    inner_outer_change, cost_change (all in percent, (new - old) / old * 100; cost =
    Inner/22.70 + Outer/8.27). Topologies with fewer than ``min_gpus_per_host``
    GPUs per host are left out: there the host term of eq. (24) equals the GPU term,
    so both γ give the same partition by construction (eq. 24), and the
    paper only reports 2+ GPUs per host. Pairs whose γ=0.0 Outer is 0 (one host) are
    left out since the relative change is undefined.
    """
    keys = ["dataset", "hosts", "gpus_per_host"]
    cols = keys + ["outer_change", "inner_change", "rf_change", "inner_outer_change",
                   "cost_change"]
    vals = keys + ["inner", "outer", "rf"]
    both = df.loc[df["partitioner"] == EBV0, vals].merge(
        df.loc[df["partitioner"] == EBV1, vals], on=keys, how="inner", suffixes=("_0", "_1"))
    both = both[(both["outer_0"] > 0) & (both["gpus_per_host"] >= min_gpus_per_host)]
    if both.empty:
        return pd.DataFrame(columns=cols)

    def change(new: pd.Series, old: pd.Series) -> pd.Series:
        return (new - old) / old * 100.0

    cost0 = both["inner_0"] / INTRA_GBPS + both["outer_0"] / INTER_GBPS
    cost1 = both["inner_1"] / INTRA_GBPS + both["outer_1"] / INTER_GBPS
    out = pd.DataFrame({
        "outer_change": change(both["outer_1"], both["outer_0"]),
        "inner_change": change(both["inner_1"], both["inner_0"]),
        "rf_change": change(both["rf_1"], both["rf_0"]),
        "inner_outer_change": change(both["inner_1"] + both["outer_1"],
                                     both["inner_0"] + both["outer_0"]),
        "cost_change": change(cost1, cost0)})
    return pd.concat([both[keys], out], axis=1)[cols].reset_index(drop=True)


def gamma_summary(derived: pd.DataFrame) -> dict[str, Any]:
    """Means over the derived table's pairs: outer_cut (= -mean Outer change), etc."""
    n = int(len(derived))
    if n == 0:
        return {"pairs": 0, "outer_cut": None, "inner_change": None, "rf_change": None,
                "cost_change": None}
    return {"pairs": n, "outer_cut": -float(derived["outer_change"].mean()),
            "inner_change": float(derived["inner_change"].mean()),
            "rf_change": float(derived["rf_change"].mean()),
            "cost_change": float(derived["cost_change"].mean())}


def claim_lines(df: pd.DataFrame, min_gpus_per_host: int = 2) -> list[str]:
    """The two closing lines: the paper's claim, then the measured figure."""
    paper = (f"Paper: γ=0.1 cuts Outer by {PAPER_OUTER_CUT_PCT:.2f}% on average vs γ=0.0 "
             "(at the cost of more Inner).")
    s = gamma_summary(derived_gamma_table(df, min_gpus_per_host))
    if s["pairs"] == 0:
        measured = ("Measured: no (dataset, topology) pair with both EBV γ=0.0 and EBV γ=0.1, "
                    f"at least {min_gpus_per_host} GPUs per host and Outer > 0; nothing to compare.")
    else:
        verb = "cuts" if s["outer_cut"] >= 0 else "raises"
        measured = (f"Measured: γ=0.1 {verb} Outer by {abs(s['outer_cut']):.2f}% on average over "
                    f"{s['pairs']} (dataset, topology) pairs; Inner changes by "
                    f"{s['inner_change']:+.2f}%; RF changes by {s['rf_change']:+.2f}%.")
    return [paper, measured]


# ------------------------------------------------------------ side by side
def _relative_to_ebv0(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["dataset", "hosts", "gpus_per_host"]
    base = df.loc[df["partitioner"] == EBV0, keys + ["inner", "outer"]].rename(
        columns={"inner": "inner_ebv0", "outer": "outer_ebv0"})
    joined = df.merge(base, on=keys, how="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        joined["inner_rel"] = joined["inner"] / joined["inner_ebv0"].where(joined["inner_ebv0"] > 0)
        joined["outer_rel"] = joined["outer"] / joined["outer_ebv0"].where(joined["outer_ebv0"] > 0)
    return joined


def side_by_side(measured: pd.DataFrame) -> pd.DataFrame:
    """Per partitioner in both tables: paper vs measured means over (dataset, topology).

    Inner and Outer are shown relative to EBV γ=0.0 on the same dataset and topology
    (absolute counts scale with the graph and are not comparable across graphs).
    """
    paper = _relative_to_ebv0(paper_table3())
    mine = _relative_to_ebv0(measured)
    labels = sorted(set(paper["partitioner"]) & set(mine["partitioner"]), key=_order_key)
    rows = []
    for lab in labels:
        p, m = paper[paper["partitioner"] == lab], mine[mine["partitioner"] == lab]
        rows.append({"partitioner": lab,
                     "paper_rf": p["rf"].mean(), "measured_rf": m["rf"].mean(),
                     "paper_edge_if": p["edge_if"].mean(), "measured_edge_if": m["edge_if"].mean(),
                     "paper_inner_vs_ebv0": p["inner_rel"].mean(),
                     "measured_inner_vs_ebv0": m["inner_rel"].mean(),
                     "paper_outer_vs_ebv0": p["outer_rel"].mean(),
                     "measured_outer_vs_ebv0": m["outer_rel"].mean()})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- markdown
def _pct(val: Any) -> str:
    return format_cell(val) if val is None or (isinstance(val, float) and math.isnan(val)) \
        else f"{val:+.2f}%"


def _count(val: Any) -> str:
    """Inner / Outer: whole counts, one decimal when averaged over seeds."""
    if isinstance(val, (float, np.floating)) and not math.isnan(val):
        return f"{val:.0f}" if float(val).is_integer() else f"{val:.1f}"
    return format_cell(val)


def _md(df: pd.DataFrame, headers: Sequence[str] | None = None, digits: int = 4,
        pct: Sequence[str] = ()) -> list[str]:
    formats = {"inner": _count, "outer": _count, **{c: _pct for c in pct}}
    return markdown_table(df, headers, digits, formats)


def _derived_md(derived: pd.DataFrame) -> list[str]:
    heads = ["dataset", "hosts", "GPU/host", "Outer change", "Inner change", "RF change",
             "Inner+Outer change", "cost change (Inner/22.70 + Outer/8.27)"]
    pct = ["outer_change", "inner_change", "rf_change", "inner_outer_change", "cost_change"]
    if derived.empty:
        return ["(no pair with both EBV γ=0.0 and EBV γ=0.1)"]
    lines = _md(derived, heads, pct=pct)
    means = [f"**{derived[c].mean():+.2f}%**" for c in pct]
    lines.append("| **mean** | | | " + " | ".join(means) + " |")
    return lines


def table3_markdown(df: pd.DataFrame, min_gpus_per_host: int = 2) -> str:
    """The markdown page: measured table, paper table, side by side, derived, claim."""
    heads = ["dataset", "partitioner", "hosts", "GPU/host", "Inner", "Outer", "RF",
             "Edge IF", "Vertex IF"]
    measured = df[TABLE3_COLUMNS]
    paper = paper_table3()
    out = ["# Table 3 analogue: statistics of graph partitioners (CDFGNN Table 3)", "",
           "Inner / Outer: largest per-device count of vertex rows sent per sync to GPUs on "
           "the same / another host (one gather + one scatter message per mirror, CDFGNN "
           "a gather + a scatter per mirror; edge-cut: forward halo rows + backward gradient rows). RF, Edge IF, "
           "Vertex IF as in docs/architecture.md, Metrics. Measured rows are means over seeds.", "",
           "## Measured", ""]
    out += _md(measured, heads) if len(measured) else ["(no rows)"]
    out += ["", "## Paper (CDFGNN Table 3: published numbers, transcribed; Vertex IF not "
            "reported)", ""]
    out += _md(paper, heads)
    sbs = side_by_side(df)
    out += ["", "## Paper vs measured, same partitioners", "",
            "Means over (dataset, topology). Inner and Outer are relative to EBV γ=0.0 on the "
            "same dataset and topology, since absolute counts scale with the graph.", ""]
    if len(sbs):
        out += _md(sbs, ["partitioner", "RF paper", "RF measured", "Edge IF paper",
                         "Edge IF measured", "Inner/EBV0 paper", "Inner/EBV0 measured",
                         "Outer/EBV0 paper", "Outer/EBV0 measured"], digits=3)
    else:
        out += ["(no partitioner appears in both tables)"]
    out += ["", "## γ=0.1 against γ=0.0 (the mean relative change behind the paper's 31.08%)", "",
            "Per (dataset, topology): (value at γ=0.1 - value at γ=0.0) / value at γ=0.0. "
            f"Topologies with fewer than {min_gpus_per_host} GPUs per host are left out "
            "(both γ give the same partition there).", "",
            "### Paper (derived from the transcribed Table 3)", ""]
    out += _derived_md(derived_gamma_table(paper, min_gpus_per_host))
    out += ["", "### Measured", ""]
    out += _derived_md(derived_gamma_table(df, min_gpus_per_host))
    out += [""] + claim_lines(df, min_gpus_per_host)
    return "\n".join(out) + "\n"


def write_table3(df: pd.DataFrame, csv_path: str | os.PathLike, md_path: str | os.PathLike,
                 min_gpus_per_host: int = 2) -> None:
    """Write ``df`` (from :func:`table3`) as CSV and its markdown page, both atomically."""
    missing = [c for c in TABLE3_COLUMNS if c not in df.columns]
    if missing:
        raise CdfgnnError(f"table 3 frame lacks columns {missing}; build it with table3()")
    atomic_write_text(csv_path, df.to_csv(index=False))
    atomic_write_text(md_path, table3_markdown(df, min_gpus_per_host))


# ------------------------------------------------------------------ figure
def plot_rf_vs_parts(rows: Iterable[dict[str, Any]], png_path: str | os.PathLike,
                     dataset: str | None = None) -> list[Path]:
    """Two panels, RF vs P and edge imbalance vs P, one line per partitioner.

    ``rows`` are :func:`partition_stats` dicts; values at the same (dataset,
    partitioner, P) are averaged (seeds, and topologies with equal P). Each dataset
    gets its own row of panels; ``dataset`` keeps only that one. Writes
    ``png_path`` and the same name with ``.pdf``, each via a temporary file and
    :func:`os.replace`. Returns both paths.
    """
    recs = [{"dataset": str(r["dataset"]),
             "partitioner": partitioner_label(r["method"], r.get("params")),
             "P": int(r["num_parts"]), "rf": float(r["rf"]),
             "edge_if": _num(r.get("edge_imbalance"))}
            for r in rows if dataset is None or str(r.get("dataset")) == dataset]
    if not recs:
        raise CdfgnnError("plot_rf_vs_parts: no partition stats rows"
                          + (f" for dataset {dataset!r}" if dataset else ""))
    df = pd.DataFrame.from_records(recs).groupby(
        ["dataset", "partitioner", "P"], as_index=False)[["rf", "edge_if"]].mean()
    datasets = sorted(df["dataset"].unique())
    labels = sorted(df["partitioner"].unique(), key=_order_key)
    markers = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">"]

    # one row of (RF, imbalance) panels per dataset, one shared legend on the right
    fig, axes = new_figure(len(datasets), 2, figsize=(10, 2.6 * len(datasets) + 0.6),
                           layout="constrained")
    ps = sorted(df["P"].unique())
    for row, ds in zip(axes, datasets):
        for k, lab in enumerate(labels):
            part = df[(df["partitioner"] == lab) & (df["dataset"] == ds)].sort_values("P")
            if part.empty:
                continue
            kw = dict(color=f"C{k % 10}", marker=markers[k % len(markers)], label=lab,
                      linestyle="--" if k >= 10 else "-")
            row[0].plot(part["P"], part["rf"], **kw)
            row[1].plot(part["P"], part["edge_if"], **kw)
        for ax, ylabel in zip(row, ["replication factor RF", "edge imbalance"]):
            ax.set_xscale("log", base=2)
            ax.set_xticks(ps, [str(p) for p in ps])
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
        row[0].set_title(f"{ds}: RF = sum |V_i| / |V|", fontsize=9)
        row[1].set_title(f"{ds}: max |E_i| / (|E|/P)", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("parts P")
    legend: dict[str, Any] = {}
    for ax in axes[:, 0]:
        for h, name in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(name, h)
    names = [lab for lab in labels if lab in legend]
    fig.legend([legend[n] for n in names], names, loc="outside right upper", fontsize=8)
    fig.suptitle("Partition quality vs number of parts")

    return save_figure(fig, png_path)


# ----------------------------------------------------------------- reports
@report("table3", kind="table", reads=("partitions",), params={"min_gpus_per_host": 2})
def table3_report(inputs, params, out, md_out) -> None:
    """CDFGNN Table 3 analogue (Inner/Outer, RF, imbalance) beside the paper's numbers."""
    write_table3(table3(inputs.partition_rows), out, md_out,
                 min_gpus_per_host=int(params["min_gpus_per_host"]))


@report("rf-vs-parts", kind="figure", reads=("partitions",), params={"dataset": None})
def rf_vs_parts_report(inputs, params, out, md_out) -> None:
    """RF and edge imbalance against the number of parts P, one line per partitioner."""
    plot_rf_vs_parts(inputs.partition_rows, out, dataset=params["dataset"])
