"""`cdfgnn compare`: which technique wins on *my* graph and *my* cluster?

Partitions the graph once per partitioner the chosen methods need, trains every
method on the same graph, topology, model and seed, and ranks them by what it knows
(``exact`` always runs: it is the reference):

* **labels** (the graph's own, or planted): by the modelled time to reach 99% of
  ``exact``'s best validation accuracy, then, for methods that never reach it, by
  modelled epoch time; accuracy is shown. A graph without labels gets planted ones by
  default (:mod:`cdfgnn.experiments.planted`: classes from its METIS communities,
  features around class centroids), and the outputs say so;
* **timing only** (``timing_only=True``, ``--timing-only``): by modelled epoch time. On
  a graph without labels no accuracy is measured, so a method that changes the model's
  function (:meth:`cdfgnn.methods.base.Method.same_function_as_exact`, from the method's
  declared degenerate setting: dropped edges, stale or quantised rows, sampling) is
  marked "accuracy unmeasured" and ranked below the exact-equivalent methods, unless
  ``exact_first=False`` (``--rank-all-by-time``).

Columns (one row per method):

* ``function``: ``= exact`` (the method at its degenerate setting trains exact's model)
  or ``changed`` (its accuracy can differ from exact's);
* ``modelled_epoch_s`` / ``measured_epoch_s``: the run record's mean over timed
  epochs (NetworkModel of ``--network``; wall clock of this machine);
* ``modelled_tta_s`` / ``measured_tta_s``: time to target, the sum of per-epoch
  modelled / measured times up to the first epoch whose validation metric reaches
  the target ("not reached" when none does; "timing only" without a target);
* ``device_epoch_s`` / ``device_tta_s``: the same on the device model, the run's
  operation ledger priced on ``--devices`` (default profile without it) plus the
  network model (``model_time.device``); the ranking uses it whenever every run has it;
* ``bytes_per_epoch`` (all link classes, whole bytes), ``peak_memory_mb``,
  ``final_test``, ``best_val`` ("timing only" / "accuracy unmeasured" without labels),
  ``status`` (``ok`` or the error of a run that failed: one failing method never stops
  the comparison).

Times are printed with as many significant digits as it takes for different values to
print differently (:func:`table_formats`), so equal cells are real ties.

Because the counts are priced after the run, ``compare`` also prices the same runs
again, without training, across a sweep of inter-host bandwidth
(:data:`SWEEP_GBITS`, Gbit/s) and across device profiles, and reports where the
winner changes (``sweep.csv``/``.md``).

A method is written ``name`` or ``name:key=value,key=value`` (its parameters). Its
partitioner is the method's ``default_partitioner`` or, by the partition kind it
needs, ``metis`` (edge cut) / ``ebv`` (vertex cut).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.experiments.config import parse_params

TARGET_FRACTION = 0.99
DEFAULT_PARTITIONER = {"edge": "metis", "vertex": "ebv", None: "metis"}
COLUMNS = ["rank", "method", "partitioner", "function", "device_tta_s", "device_epoch_s",
           "modelled_tta_s", "measured_tta_s", "modelled_epoch_s", "measured_epoch_s",
           "bytes_per_epoch", "peak_memory_mb", "final_test", "best_val", "status"]
TIME_COLUMNS = ("device_tta_s", "device_epoch_s", "modelled_tta_s", "measured_tta_s",
                "modelled_epoch_s", "measured_epoch_s")
#: how the comparison knows accuracy (:func:`rank`'s ``mode``)
LABELS, PLANTED, TIMING = "labels", "planted labels", "timing only"
#: cell texts where a number is not there, and why
TIMING_ONLY, NOT_REACHED, UNMEASURED = "timing only", "not reached", "accuracy unmeasured"
SAME, CHANGED = "= exact", "changed"
#: inter-host bandwidths (Gbit/s) of the re-pricing sweep
SWEEP_GBITS = (1, 2, 5, 10, 25, 50, 100, 200, 400)


@dataclass(frozen=True)
class MethodSpec:
    label: str
    name: str
    params: dict[str, Any]

    def same_function_as_exact(self) -> bool:
        """The method's own declaration (its degenerate setting), never its name."""
        from cdfgnn.methods import METHODS

        return METHODS.get(self.name).same_function_as_exact(self.params)


def parse_method(text: str) -> MethodSpec:
    """``name`` or ``name:key=value,key=value`` (values are YAML scalars)."""
    name, _, rest = text.partition(":")
    params = parse_params([kv for kv in rest.split(",") if kv], f"--methods {text}")
    return MethodSpec(text, name.strip(), params)


def partitioner_for(method_cls) -> str:
    return getattr(method_cls, "default_partitioner", None) or \
        DEFAULT_PARTITIONER[method_cls.partition_kind]


def default_methods() -> list[str]:
    """Every registered method (each with its default parameters)."""
    from cdfgnn.methods import METHODS

    return [n for n in METHODS.names() if not getattr(METHODS.get(n), "hidden", False)]


def compare(graph_path: str, *, workers: int, hosts: int, network: str,
            methods: Sequence[str] | None = None, epochs: int = 20, seed: int = 0,
            out_dir: str = "compare", train: dict[str, Any] | None = None,
            log: Callable[[str], None] = print, devices: str | None = None,
            timing_only: bool = False, exact_first: bool = True,
            classes: int | None = None) -> pd.DataFrame:
    """Run the comparison; writes partitions, run records, ``compare.csv``/``.md``/``.png``
    and the re-pricing sweep ``sweep.csv``/``.md`` under ``out_dir`` and returns the
    ranked table (``attrs``: ``mode``, ``cluster``, ``notes``, ``flips``). ``devices``: the
    ``--devices`` the ledgers are priced on; ``timing_only``, ``exact_first``, ``classes``:
    the module docstring (a graph without labels gets ``classes`` planted ones)."""
    from cdfgnn.comm.network import get_profile
    from cdfgnn.data.graph import Graph
    from cdfgnn.methods import METHODS
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    get_profile(network)  # an unknown profile fails before any work
    from cdfgnn.pricing.hardware import parse_gpus
    parse_gpus(devices, workers)  # so does an unknown device or a wrong count
    topology = Topology.for_workers(workers, hosts)
    train = {**(train or {}), **({"devices": devices} if devices else {})}
    specs = [parse_method(m) for m in (methods or default_methods())]
    if not any(s.name == "exact" and not s.params for s in specs):
        specs.insert(0, MethodSpec("exact", "exact", {}))
    for spec in specs:
        from cdfgnn.methods.base import build_strategy
        build_strategy(spec.name, spec.params)  # unknown names / bad params fail up front
    graph = Graph.load(graph_path)
    mode = LABELS if not graph.meta.get("timing_only") else TIMING if timing_only else PLANTED
    if classes is not None and mode != PLANTED:
        raise CdfgnnError("--classes applies to a graph without labels, without --timing-only")
    out = Path(out_dir)
    (out / "partitions").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    notes = []
    if mode == PLANTED:
        from cdfgnn.experiments.planted import describe, plant_labels

        log("the graph has no labels: planting classes from its METIS communities ...")
        graph = plant_labels(graph, classes, seed)
        graph_path = str(out / "graph-planted.npz")
        graph.save(graph_path)
        notes.append(describe(graph))
    elif mode == TIMING:
        notes.append("Timing only: the graph has no labels, so no accuracy is measured; "
                     + ("methods that change the model's function are ranked below the "
                        "exact-equivalent ones." if exact_first else
                        "every method is ranked by epoch time alone (--rank-all-by-time)."))
    elif timing_only:
        notes.append("Timing only: ranked by epoch time; the accuracy shown is measured.")
    part_files: dict[str, str] = {}
    records: dict[str, dict | str] = {}
    for spec in specs:
        pname = partitioner_for(METHODS.get(spec.name))
        if pname not in part_files:
            log(f"partitioning with {pname} for {topology.label} ...")
            path = out / "partitions" / f"{pname}.npz"
            partition_graph(graph, pname, topology, seed=seed).save(path)
            part_files[pname] = str(path)
        log(f"training {spec.label} ({pname}, {epochs} epochs) ...")
        records[spec.label] = _train(graph_path, part_files[pname], spec, workers, hosts,
                                     network, epochs, seed, train,
                                     out / "runs" / f"{_safe(spec.label)}.json")
    same = {s.label: s.same_function_as_exact() for s in specs}
    table = rank(records, {s.label: partitioner_for(METHODS.get(s.name)) for s in specs},
                 mode=mode, timing_only=timing_only, same=same, exact_first=exact_first)
    where = cluster(records)
    notes.insert(0, f"Ranked on the device model: {where}." if where else
                 "Ranked on the CPU-measured model.")
    demote = {k for k, v in same.items() if not v} if mode == TIMING and exact_first else set()
    _write(table, out, graph.name, topology.label, network, epochs, where, mode, notes)
    swept = sweep(records, network, timing_only or mode == TIMING, demote=demote)
    _write_sweep(swept, out, where)
    table.attrs.update(cluster=where, flips=flips(swept), mode=mode, notes=notes)
    return table


def _train(graph_path, part_file, spec, workers, hosts, network, epochs, seed, train, out):
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(graph=graph_path, dataset=None, partition_file=part_file,
                      method=spec.name, method_params=dict(spec.params), workers=workers,
                      hosts=hosts, network=network, epochs=epochs, seed=seed,
                      warmup=min(5, max(epochs - 1, 0)), out=str(out), **train)
    try:
        return run_training(cfg)
    except (CdfgnnError, WorkerFailedError) as exc:
        return f"failed: {exc}"


def time_to_target(epochs: list[dict], target: float, key: str) -> float | None:
    """Sum of per-epoch ``key`` times up to the first epoch whose ``val`` >= target."""
    total = 0.0
    for row in epochs:
        total += float(row.get(key, 0.0))
        if row.get("val") is not None and row["val"] >= target:
            return total
    return None


def rank(records: dict[str, dict | str], partitioners: dict[str, str],
         timing_only: bool = False, *, mode: str | None = None,
         same: dict[str, bool] | None = None, exact_first: bool = True) -> pd.DataFrame:
    """The ranked comparison table from the run records (``str`` values: failures).

    ``mode``: :data:`LABELS` / :data:`PLANTED` (rank by time to target unless
    ``timing_only``) or :data:`TIMING` (no labels, no accuracy); default: :data:`TIMING`
    when ``timing_only`` else :data:`LABELS`. ``same``: label -> whether the method trains
    exact's model (default: every method changes it, except ``exact`` itself).
    """
    mode = mode or (TIMING if timing_only else LABELS)
    timing_only = timing_only or mode == TIMING
    same = same if same is not None else {k: k == "exact" for k in records}
    ref = records.get("exact")
    target = None
    if isinstance(ref, dict) and mode != TIMING and ref["summary"].get("best_val") is not None:
        target = TARGET_FRACTION * ref["summary"]["best_val"]
    rows = []
    for label, rec in records.items():
        row: dict[str, Any] = {"method": label, "partitioner": partitioners[label],
                               "function": SAME if same.get(label) else CHANGED}
        if isinstance(rec, str):
            rows.append({**row, "status": rec})
            continue
        s = rec["summary"]
        per = rec["comm"]["per_epoch"]
        dev = rec.get("model_time", {}).get("device")
        if dev is not None:
            row.update(device_epoch_s=dev["epoch_s"])
            if target is not None:
                row["device_tta_s"] = time_to_target(rec["epochs"], target, "device_s")
        row.update(status="ok", modelled_epoch_s=s["modelled_epoch_time_s"],
                   measured_epoch_s=s["epoch_time_s"],
                   bytes_per_epoch=int(round(per["intra"]["bytes"] + per["inter"]["bytes"])),
                   peak_memory_mb=s["peak_memory_mb"])
        if mode == TIMING:
            text = TIMING_ONLY if same.get(label) else UNMEASURED
            row.update(final_test=text, best_val=text)
        else:
            row.update(final_test=s.get("final_test"), best_val=s.get("best_val"))
        if target is not None:
            row["modelled_tta_s"] = time_to_target(rec["epochs"], target, "modelled_s")
            row["measured_tta_s"] = time_to_target(rec["epochs"], target, "wall_s")
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in df:
            df[col] = None
    df["bytes_per_epoch"] = df["bytes_per_epoch"].astype("Int64")   # whole bytes, even beside
    ok = df["status"] == "ok"                                         # a failed run's blank
    # the device model when every run has it (the cluster's answer), else the CPU one
    model = "device" if ok.any() and df.loc[ok, "device_epoch_s"].notna().all() else "modelled"
    tta, epoch = f"{model}_tta_s", f"{model}_epoch_s"
    if timing_only:
        demoted = (df["function"] == CHANGED) & (mode == TIMING) & exact_first
        df["_k1"] = (~ok).astype(int) * 2 + demoted.astype(int)
        df["_k2"] = df[epoch].astype(float).fillna(math.inf)
    else:
        reached = df[tta].notna() & ok
        df["_k1"] = (~reached).astype(int) + (~ok).astype(int)
        df["_k2"] = df[tta].where(reached, df[epoch]).astype(float).fillna(math.inf)
    df = df.sort_values(["_k1", "_k2"], kind="stable").drop(columns=["_k1", "_k2"])
    df["rank"] = range(1, len(df) + 1)
    # say why a time to target is missing: never reached, or no target at all
    for col in ("device_tta_s", "modelled_tta_s", "measured_tta_s"):
        df[col] = df[col].astype(object)
        missing = df[col].isna() & (df["status"] == "ok")
        if target is None:
            df.loc[missing, col] = TIMING_ONLY
        elif col != "device_tta_s" or model == "device":
            df.loc[missing, col] = NOT_REACHED
    return df[COLUMNS].reset_index(drop=True)


def significant_digits(values: Sequence[Any], least: int = 3, most: int = 12) -> int:
    """The fewest significant digits (at least ``least``) at which different numbers of
    ``values`` print differently, so that equal printed cells are real ties."""
    nums = sorted({float(v) for v in values if isinstance(v, (int, float, np.floating))
                   and not isinstance(v, bool) and math.isfinite(float(v))})
    for digits in range(least, most + 1):
        if len({f"{v:.{digits}g}" for v in nums}) == len(nums):
            return digits
    return most


def table_formats(df: pd.DataFrame) -> dict[str, Callable[[Any], str]]:
    """Cell formats of the comparison table: times with :func:`significant_digits`, bytes
    as whole numbers, memory with one decimal, accuracy with four."""
    from cdfgnn.report.render import format_cell

    def number(digits: int, spec: str = "g"):
        def fmt(x: Any) -> str:
            if isinstance(x, (int, float, np.floating)) and not isinstance(x, bool) \
                    and math.isfinite(float(x)):
                # "#g" keeps trailing zeros: every time shows the same significant digits
                return f"{float(x):{'#' if spec == 'g' else ''}.{digits}{spec}}".rstrip(".")
            return format_cell(x)
        return fmt

    times = [v for col in TIME_COLUMNS if col in df for v in df[col]]
    out = {col: number(significant_digits(times)) for col in TIME_COLUMNS}
    out.update(bytes_per_epoch=number(0, "f"), peak_memory_mb=number(1, "f"),
               final_test=number(4, "f"), best_val=number(4, "f"))
    return out


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in label)


def cluster(records: dict[str, dict | str]) -> str:
    """'devices X, network Y' of the device model behind the ranking ('' without it)."""
    for rec in records.values():
        dev = rec.get("model_time", {}).get("device") if isinstance(rec, dict) else None
        if dev:
            names = sorted(set(dev["profiles"]), key=dev["profiles"].index)
            default = " (default)" if dev["default"] else ""
            return f"devices {','.join(names)}{default}, network {dev['network']}"
    return ""


def _winner(times: dict[str, tuple[float, float | None]], demote: set[str] = frozenset()
            ) -> str:
    """The method reaching the target first (else the fastest epoch, a method of
    ``demote`` only when no other ran): times = label -> (epoch s, epochs to target or None)."""
    def key(item):
        epoch_s, n = item[1]
        return (item[0] in demote, n is None, epoch_s * n if n is not None else epoch_s)
    return min(times.items(), key=key)[0]


def _epochs_to_target(rec: dict, target: float | None) -> int | None:
    if target is None:
        return None
    for i, row in enumerate(rec["epochs"]):
        if row.get("val") is not None and row["val"] >= target:
            return i + 1
    return None


def sweep(records: dict[str, dict | str], network: str, timing_only: bool = False,
          gbits: Sequence[float] = SWEEP_GBITS, devices: Sequence[str] | None = None,
          demote: set[str] = frozenset()) -> pd.DataFrame:
    """The winner when the same runs are priced again (no training) at every inter-host
    bandwidth of ``gbits`` (Gbit/s; intra-host links as ``network``) and on every device
    profile of ``devices`` (default: all registered), one row per setting; a method of
    ``demote`` (accuracy unmeasured) wins only where nothing else ran."""
    from dataclasses import replace

    from cdfgnn.comm.network import get_profile
    from cdfgnn.pricing.hardware import registered
    from cdfgnn.pricing.record import reprice

    ok = {k: r for k, r in records.items()
          if isinstance(r, dict) and r.get("model_time", {}).get("device")}
    if not ok:
        return pd.DataFrame(columns=["sweep", "setting", "winner", "epoch_s"])
    ref = ok.get("exact")
    target = None
    if ref is not None and not timing_only and ref["summary"].get("best_val") is not None:
        target = TARGET_FRACTION * ref["summary"]["best_val"]
    steps = {k: _epochs_to_target(r, target) for k, r in ok.items()}
    base = get_profile(network)
    rows = []
    settings = [("inter-host Gbit/s", f"{g:g}", None,
                 replace(base, name=f"{base.name}@{g:g}Gbit", inter_gbps=g / 8,
                         inter_bcast_gbps=g / 8)) for g in gbits]
    settings += [("device", d, d, base) for d in (devices or list(registered()))]
    for kind, label, dev, link in settings:
        times = {k: (reprice(r, devices=dev, network=link)["epoch_s"], steps[k])
                 for k, r in ok.items()}
        win = _winner(times, demote)
        rows.append({"sweep": kind, "setting": label, "winner": win,
                     "epoch_s": times[win][0]})
    return pd.DataFrame(rows)


def flips(df: pd.DataFrame) -> list[str]:
    """One line per sweep: the winner and the settings where it changes."""
    out = []
    for kind, sub in df.groupby("sweep", sort=False):
        runs, prev = [], None
        for _, row in sub.iterrows():
            if row["winner"] != prev:
                runs.append([row["winner"], row["setting"], row["setting"]])
                prev = row["winner"]
            else:
                runs[-1][2] = row["setting"]
        parts = [f"{w} ({a}" + ("" if a == b else f" to {b}") + ")" for w, a, b in runs]
        verdict = "no change" if len(runs) == 1 else f"{len(runs) - 1} change(s)"
        out.append(f"{kind}: {' -> '.join(parts)} [{verdict}]")
    return out


def _write_sweep(df: pd.DataFrame, out: Path, where: str) -> None:
    from cdfgnn.report.render import write_table

    notes = [f"Device model re-priced from the runs' counts (no training); base: {where}. "
             "inter-host rows change only the inter-host bandwidth; device rows put every "
             "rank on that profile.", *flips(df)]
    write_table(df, str(out / "sweep.csv"), str(out / "sweep.md"),
                title="Where does the winner change?", notes=notes, digits=8)


def _write(df: pd.DataFrame, out: Path, graph: str, topo: str, network: str,
           epochs: int, where: str = "", mode: str = LABELS,
           notes: Sequence[str] = ()) -> None:
    """``compare.csv``, ``compare.md`` (notes, then the table with :func:`table_formats`)
    and ``compare.png`` (epoch time; time to target, or "timing only")."""
    from cdfgnn.fileio import atomic_write_text
    from cdfgnn.report.render import markdown_table

    target = (f"tta = time to reach {TARGET_FRACTION:.0%} of exact's best validation metric "
              "(device: the operation ledger priced on the device profiles + NetworkModel "
              "communication; modelled: compute CPU time + NetworkModel communication; "
              f"measured: wall clock on this machine); '{NOT_REACHED}': the run never "
              "reached it.")
    timing = ("Timing only: ranked by epoch time, no accuracy target. function '= exact': "
              "the method at its declared degenerate setting trains exact's model; "
              f"'{CHANGED}': it changes the model's function (dropped edges, stale or "
              f"quantised rows, sampling), so its accuracy is '{UNMEASURED}' on this graph.")
    lines = [f"Graph {graph}, topology {topo}, network profile {network}, {epochs} epochs.",
             *notes, timing if mode == TIMING else target]
    atomic_write_text(out / "compare.csv", df.to_csv(index=False))
    atomic_write_text(out / "compare.md", "\n".join(
        ["# Which technique for this graph?", "", *lines, "",
         *markdown_table(df, formats=table_formats(df))]) + "\n")
    _figure(df, out, graph, topo, network, where, mode)


def _figure(df: pd.DataFrame, out: Path, graph: str, topo: str, network: str, where: str,
            mode: str) -> None:
    from cdfgnn.report.render import new_figure, save_figure

    ok = df[df["status"] == "ok"]
    fig, axes = new_figure(1, 2, figsize=(11, 0.45 * max(len(ok), 3) + 1.5))
    ax1, ax2 = axes[0]
    y = list(range(len(ok)))
    model = "device" if len(ok) and ok["device_epoch_s"].notna().all() else "modelled"
    changed = (ok["function"] == CHANGED).to_numpy()
    bars = ax1.barh(y, ok[f"{model}_epoch_s"].astype(float), color="C0")
    if mode == TIMING:
        for bar, hatch in zip(bars, changed):
            if hatch:
                bar.set_hatch("//")
                bar.set_alpha(0.6)
    ax1.set_title(f"{model}-modelled epoch time (s)")
    names = [m + (f" ({UNMEASURED})" if mode == TIMING and c else "")
             for m, c in zip(ok["method"], changed)]
    ax1.set_yticks(y, names)
    ax2.set_yticks(y, [""] * len(ok))
    tta = pd.to_numeric(ok[f"{model}_tta_s"], errors="coerce")
    if mode == TIMING:
        ax2.set_title("time to accuracy")
        ax2.text(0.5, 0.5, "timing only:\nno labels, no accuracy target", ha="center",
                 va="center", transform=ax2.transAxes, fontsize=11)
        ax2.set_xticks([])
    else:
        ax2.barh(y, tta.fillna(0.0), color="C1")
        what = " (planted labels)" if mode == PLANTED else ""
        ax2.set_title(f"{model}-modelled time to {TARGET_FRACTION:.0%} of exact's best "
                      f"validation accuracy{what} (s)", fontsize=9)
        for i, (v, text) in enumerate(zip(tta, ok[f"{model}_tta_s"])):
            if pd.isna(v):
                ax2.text(0, i, f" {text}", va="center", fontsize=8)
    for ax in (ax1, ax2):
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        ax.locator_params(axis="x", nbins=5)
    fig.suptitle(f"{graph}, {topo}, " + (where if model == "device" else
                                         f"network {network} (CPU-measured model)")
                 + (" - timing only" if mode == TIMING else
                    " - planted labels" if mode == PLANTED else ""), y=1.04)
    save_figure(fig, str(out / "compare.png"))
