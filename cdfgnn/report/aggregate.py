"""Run records and statistics rows -> tidy tables (docs/architecture.md).

Tables (one CSV each, long format so pandas/R can group freely):

* ``runs``: one row per RunRecord: identity (experiment, dataset, trainer,
  partitioner, topology, workers, method, model, seed, ...) + the record's
  ``summary`` (measured and modelled epoch time, accuracy figures, peak memory)
  + bytes and messages per epoch by link class + the partition's RF and imbalance.
* ``epochs``: one row per run and epoch: identity + loss, train, val, test.
* ``datasets``: the `cdfgnn prepare` statistics rows (the papers' Table 1).
* ``partitions``: the `cdfgnn partition` statistics rows, scalar columns only
  (the per-part lists stay in the JSON files).

Labels: a partitioner or method with parameters is labelled ``name(k=v,...)``
(seed excluded) so that e.g. EBV gamma 0.0 and 0.1 are distinct rows without
relying on file names. The experiment is read from the file's location
(``.../runs/<experiment>/...``) when it follows the pipeline layout.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from cdfgnn.errors import CdfgnnError, CorruptFileError
from cdfgnn.fileio import atomic_write_text

IDENTITY = ["experiment", "dataset", "trainer", "partitioner", "topology", "hosts", "workers",
            "method", "model", "layers", "hidden", "epochs", "seed", "backend"]


# ------------------------------------------------------------------ loading
def expand_paths(paths: Iterable[str], pattern: str) -> list[Path]:
    """Files given directly, plus every ``pattern`` match under given folders (sorted)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(q for q in path.rglob(pattern) if not q.name.startswith("."))
        elif path.is_file():
            out.append(path)
        else:
            raise CdfgnnError(f"{p}: no such file or folder")
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{path}: not a readable JSON file ({exc})") from None


def _load_objects(paths: Iterable[str], pattern: str, what: str) -> list[tuple[Path, dict]]:
    """(path, JSON object) for every ``pattern`` file under ``paths``; non-objects fail."""
    files = expand_paths(paths, pattern)
    if not files:
        raise CdfgnnError(f"no {what} ({pattern}) found in {list(paths)}")
    out = []
    for f in files:
        obj = _read_json(f)
        if not isinstance(obj, dict):
            raise CorruptFileError(f"{f}: expected one JSON object of {what}")
        out.append((f, obj))
    return out


def load_runs(paths: Iterable[str]) -> list[dict[str, Any]]:
    """RunRecords from files or folders (``*.json``); each gets ``_source`` = its path."""
    records = []
    for f, rec in _load_objects(paths, "*.json", "run records"):
        if "config" not in rec or "epochs" not in rec:
            raise CorruptFileError(f"{f}: not a run record (needs 'config' and 'epochs')")
        if rec.get("status") != "complete":
            raise CorruptFileError(f"{f}: run status is {rec.get('status')!r}, not 'complete'")
        rec["_source"] = str(f)
        records.append(rec)
    check_dropout_versions(records)
    return records


def dropout_version(rec: dict[str, Any]) -> int | None:
    """The dropout mask version of a run with dropout > 0 (records before the field: 1)."""
    if not float(rec["config"].get("dropout") or 0.0) > 0.0:
        return None
    return int(_section(rec, "model").get("dropout_version", 1))


def check_dropout_versions(records: list[dict[str, Any]]) -> None:
    """Runs with dropout drawn from different mask hashes are not comparable: refuse to mix."""
    by_version: dict[int, str] = {}
    for rec in records:
        v = dropout_version(rec)
        if v is not None:
            by_version.setdefault(v, rec.get("_source", "?"))
    if len(by_version) > 1:
        seen = ", ".join(f"v{v} (e.g. {src})" for v, src in sorted(by_version.items()))
        raise CdfgnnError(f"run records mix dropout mask versions {seen}; re-run the older "
                          f"runs with this version of cdfgnn")


def load_rows(paths: Iterable[str], what: str) -> list[dict[str, Any]]:
    """One-object JSON rows (statistics files) from files or folders (``*.stats.json``)."""
    return [row for _, row in _load_objects(paths, "*.stats.json", what)]


# -------------------------------------------------------------- device view
def device_profile_label(rec: Mapping[str, Any]) -> str:
    """``a800 on cdfgnn-table2``: the device and network profiles that priced a run
    (``""`` for a record without the device model)."""
    dev = _section(_section(rec, "model_time"), "device")
    if not dev:
        return ""
    device = _section(rec, "summary").get("device_profile", "")
    if _section(rec, "config").get("trainer", "distributed") != "distributed":
        return f"{device} (one process)"
    return f"{device} on {dev.get('network', '')}"


def device_view(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The record with every time device-modelled (docs/time-model.md), so that a report
    computes the same numbers from the device model that it computes from the CPU-measured
    one. A time the device model does not price (every ``*_s`` field of the summary, the
    ranks, the epoch rows and the mini-batch section that it does not replace: a record
    without ``model_time.device``, the precompute's seconds) becomes missing (NaN, so
    that arithmetic on it stays missing), never the CPU-measured value. A rank's
    ``part_cpu_max_s`` becomes its largest part's priced compute (``part_compute_max_s``);
    a sampled record's step, network, exposed and epoch times come from its step model."""
    from cdfgnn.pricing.record import reprice

    mt = dict(_section(rec, "model_time"))
    priced = reprice(dict(rec)) if mt.get("device") else None
    summary, minibatch = _untimed(_section(rec, "summary")), _untimed(_section(rec, "minibatch"))
    ranks = [_untimed(r) for r in rec.get("ranks") or ()]
    epochs = [{**_untimed(e), "modelled_s": e.get("device_s", math.nan),
               "wall_s": e.get("device_s", math.nan)} for e in rec.get("epochs") or ()]
    mt.update(epoch_s=math.nan, compute_s=[], comm_s=[], slowdown=[1.0] * len(ranks))
    if priced is not None:
        summary.update(modelled_epoch_time_s=priced["epoch_s"], epoch_time_s=priced["epoch_s"],
                       device_epoch_time_s=priced["epoch_s"])
        mt.update(epoch_s=priced["epoch_s"], compute_s=priced["compute_s"],
                  comm_s=priced["comm_s"])
        for r, rank in enumerate(ranks):
            comp, over = priced["compute_s"][r], priced["overhead_s"][r]
            vert, red = priced["vertex_s"][r], priced["reduce_s"][r]
            rank.update(cpu_s=comp + over, wall_s=comp + vert + red, overhead_cpu_s=over,
                        modelled_comm_s=vert + red, modelled_vertex_s=vert,
                        modelled_reduce_s=red,
                        part_cpu_max_s=_part_compute(rec, priced, r))
    if minibatch and priced is not None and "step_s" in priced:   # the sampled step model
        minibatch.update(_device_minibatch(priced))
    out = {**rec, "model_time": mt, "summary": summary, "ranks": ranks, "epochs": epochs}
    if minibatch:
        out["minibatch"] = minibatch
    return out


def _part_compute(rec: Mapping[str, Any], priced: Mapping[str, Any], r: int) -> float:
    """Rank r's largest part's priced compute; missing for a rank holding several parts
    whose record predates per-part ledgers (its ledger is all its parts' together)."""
    several = len((rec.get("ranks") or ())[r].get("parts") or ()) > 1
    counted = all("part_ledgers" in item for item in
                  rec["model_time"]["device"]["inputs"]["ranks"][r]["patterns"])
    return priced["part_compute_max_s"][r] if counted or not several else math.nan


def _device_minibatch(priced: Mapping[str, Any]) -> dict[str, float]:
    """The mini-batch section's times from the sampled track's device model
    (:func:`cdfgnn.pricing.step.step_device_model`): modelled step, network, exposed
    network and epoch; the step's wall time is the modelled step."""
    step, net, exposed, epoch = (priced[k] for k in ("step_s", "network_s", "exposed_s",
                                                     "epoch_s"))
    return {"modelled_step_s": step, "step_time_s": step, "modelled_network_s": net,
            "exposed_network_s": exposed, "modelled_epoch_s": epoch, "device_step_s": step,
            "device_network_s": net, "device_exposed_s": exposed, "device_epoch_s": epoch}


def _untimed(section: Mapping[str, Any]) -> dict[str, Any]:
    """``section`` with its times (``*_s`` keys) missing."""
    return {k: (math.nan if k.endswith("_s") else v) for k, v in section.items()}


# ------------------------------------------------------------------- labels
def param_label(name: str | None, params: dict[str, Any] | None) -> str:
    """``ebv(gamma=0.1)``; plain ``name`` when there are no parameters besides the seed."""
    items = {k: v for k, v in (params or {}).items() if k != "seed"}
    if not items:
        return str(name)
    inner = ",".join(f"{k}={items[k]}" for k in sorted(items))
    return f"{name}({inner})"


def _experiment_of(source: str) -> str:
    parts = Path(source).parts
    for i, part in enumerate(parts[:-1]):
        if part == "runs" and i + 1 < len(parts) - 1:
            return parts[i + 1]
    return ""


def _section(rec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """An optional section of a record: ``{}`` when it is absent or null."""
    value = rec.get(key)
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float:
    """A record number as a float; NaN when absent (null)."""
    return math.nan if value is None else float(value)


def _floats(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values or ())


@dataclass(frozen=True)
class RunRow:
    """One RunRecord, flattened into the typed fields that reports read.

    :meth:`from_record` is the one place that decides what an absent optional
    section means (no ``model_time``, ``comm``, ``partition``, ``minibatch``,
    ``energy``: empty mappings and tuples, NaN numbers), so a report reads
    ``row.overlap`` instead of ``(rec.get("model_time") or {}).get("overlap")``.
    Numbers a record may lack are NaN (``summary`` values) or ``None`` (the
    mini-batch settings of a full-batch run); ``record`` keeps the whole record for
    the few per-paper sections no other report reads.
    """

    source: str
    experiment: str
    trainer: str
    dataset: str | None
    method: str | None
    method_params: Mapping[str, Any]
    partitioner: str | None
    partition_params: Mapping[str, Any]
    hosts: int
    workers: int
    model: str | None
    layers: int | None
    hidden: int | None
    epochs_configured: int | None
    seed: int | None
    warmup: int
    network: str | None
    backend: str | None
    batch_size: int | None
    fanouts: tuple[int, ...]
    # summary (NaN when absent)
    modelled_epoch_s: float
    epoch_s: float
    final_test: float
    test_at_best_val: float
    peak_memory_mb: float
    timed_epochs: int | None
    summary: Mapping[str, Any]
    # modelled time
    overlap: bool
    compute_s: tuple[float, ...]
    comm_s: tuple[float, ...]
    slowdown: tuple[float, ...]
    devices: tuple[Mapping[str, Any], ...]
    # traffic
    by_tag: Mapping[str, Mapping[str, Any]]
    per_epoch: Mapping[str, Mapping[str, Any]]
    comm_epochs: tuple[Mapping[str, Any], ...]
    # partition
    num_parts: int
    rf: float | None
    dropped_arcs: int
    prepare: Mapping[str, Any]
    partition: Mapping[str, Any]
    # per rank, per epoch, optional tracks
    ranks: tuple[Mapping[str, Any], ...]
    epochs: tuple[Mapping[str, Any], ...]
    minibatch: Mapping[str, Any]
    energy: Mapping[str, Any]
    timing_only: bool
    graph_name: str | None
    record: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> "RunRow":
        cfg = rec["config"]
        graph, summ = _section(rec, "graph"), _section(rec, "summary")
        mt, comm, part = _section(rec, "model_time"), _section(rec, "comm"), _section(rec, "partition")
        ranks = tuple(rec.get("ranks") or ())
        slowdown = _floats(mt.get("slowdown")) or (1.0,) * len(ranks)
        minibatch = _section(rec, "minibatch")
        timed = summ.get("timed_epochs")
        return cls(
            source=rec.get("_source", ""), experiment=_experiment_of(rec.get("_source", "")),
            trainer=cfg.get("trainer", "distributed"),
            dataset=cfg.get("dataset") or graph.get("dataset") or graph.get("name"),
            method=cfg.get("method"), method_params=dict(cfg.get("method_params") or {}),
            partitioner=cfg.get("partitioner"),
            partition_params=dict(cfg.get("partition_params") or {}),
            hosts=int(cfg.get("hosts", 1)), workers=int(cfg.get("workers", 1)),
            model=cfg.get("model"), layers=cfg.get("layers"), hidden=cfg.get("hidden"),
            epochs_configured=cfg.get("epochs"), seed=cfg.get("seed"),
            warmup=int(cfg.get("warmup", 0) or 0), network=cfg.get("network"),
            backend=cfg.get("backend"),
            batch_size=cfg.get("batch_size") if minibatch else None,
            fanouts=tuple(cfg.get("fanouts") or ()) if minibatch else (),
            modelled_epoch_s=_number(summ.get("modelled_epoch_time_s")),
            epoch_s=_number(summ.get("epoch_time_s")),
            final_test=_number(summ.get("final_test")),
            test_at_best_val=_number(summ.get("test_at_best_val")),
            peak_memory_mb=_number(summ.get("peak_memory_mb")),
            timed_epochs=int(timed) if timed else None, summary=dict(summ),
            overlap=bool(mt.get("overlap", False)), compute_s=_floats(mt.get("compute_s")),
            comm_s=_floats(mt.get("comm_s")), slowdown=slowdown,
            devices=tuple(mt.get("devices") or ()),
            by_tag=dict(comm.get("by_tag") or {}), per_epoch=dict(comm.get("per_epoch") or {}),
            comm_epochs=tuple(comm.get("epochs") or ()),
            num_parts=int(part.get("num_parts", 1)), rf=part.get("rf"),
            dropped_arcs=int(part.get("dropped_arcs", 0)),
            prepare=dict(part.get("prepare") or {}), partition=dict(part),
            ranks=ranks, epochs=tuple(rec.get("epochs") or ()), minibatch=dict(minibatch),
            energy=dict(_section(rec, "energy")), timing_only=bool(graph.get("timing_only", False)),
            graph_name=graph.get("name"), record=rec)

    # ---- derived values every report computes the same way
    @property
    def distributed(self) -> bool:
        return self.trainer == "distributed"

    @property
    def method_label(self) -> str:
        """``method(k=v,...)`` (seed left out), see :func:`param_label`."""
        return param_label(self.method, self.method_params)

    @property
    def topology(self) -> str:
        return f"h{self.hosts}x{self.workers // max(self.hosts, 1)}"

    def tag_total(self, unit: str, prefixes: tuple[str, ...]) -> float:
        """``bytes`` (or ``rows``, ``msgs``) per timed epoch over the tags with ``prefixes``."""
        return sum(d[unit] for tag, d in self.by_tag.items() if tag.startswith(prefixes))

    def link_total(self, unit: str, links: tuple[str, ...] = ("intra", "inter")) -> float:
        """``bytes`` or ``msgs`` per epoch over the given link classes (0 where absent)."""
        return sum((self.per_epoch.get(k) or {}).get(unit, 0.0) for k in links)

    @property
    def test_metric(self) -> float:
        """Test metric at the best validation epoch, the final one when there is none."""
        return self.final_test if "test_at_best_val" not in self.summary else self.test_at_best_val


def run_rows(records: Iterable[Mapping[str, Any]]) -> list[RunRow]:
    """:meth:`RunRow.from_record` of every record, in order."""
    return [RunRow.from_record(rec) for rec in records]


def _identity(rec: dict[str, Any]) -> dict[str, Any]:
    row = RunRow.from_record(rec)
    distributed = row.distributed
    hosts = row.hosts if distributed else 1
    workers = row.workers if distributed else 1
    return {
        "experiment": row.experiment,
        "dataset": row.dataset,
        "trainer": row.trainer,
        "partitioner": param_label(row.partitioner, row.partition_params) if distributed else "",
        "topology": f"h{hosts}x{workers // hosts}",
        "hosts": hosts,
        "workers": workers,
        "method": row.method_label if distributed else row.trainer,
        "model": row.model,
        "layers": row.layers,
        "hidden": row.hidden,
        "epochs": row.epochs_configured,
        "seed": row.seed,
        "backend": row.backend,
    }


# ------------------------------------------------------------------- tables
def runs_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in records:
        run = RunRow.from_record(rec)
        row = _identity(rec)
        for k, v in run.summary.items():
            if _scalar(v):
                row[k] = v
        for link in ("intra", "inter"):
            for unit in ("bytes", "msgs"):
                row[f"{link}_{unit}_per_epoch"] = (run.per_epoch.get(link) or {}).get(unit)
        for k in ("rf", "edge_imbalance", "vertex_imbalance", "inner_max", "outer_max"):
            row[f"partition_{k}"] = run.partition.get(k)
        for k in ("compute_s", "comm_s", "reduce_s", "wall_s", "cpu_s"):
            vals = [r[k] for r in run.ranks if _scalar(r.get(k)) and r.get(k) is not None]
            row[f"max_rank_{k}"] = max(vals) if vals else None
        # random features/labels (an imported graph without them, Friendster): the
        # accuracy columns of this row mean nothing
        row["timing_only"] = run.timing_only
        row["source"] = run.source
        rows.append(row)
    return _ordered(pd.DataFrame(rows), IDENTITY)


def epochs_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in records:
        ident = _identity(rec)
        for ep in RunRow.from_record(rec).epochs:
            row = dict(ident)
            for k, v in ep.items():
                if _scalar(v):
                    row[k] = v
            row["source"] = rec.get("_source", "")
            rows.append(row)
    return _ordered(pd.DataFrame(rows), IDENTITY + ["epoch", "loss", "train", "val", "test"])


def datasets_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame([{k: v for k, v in r.items() if _scalar(v)} for r in rows])
    if "dataset" in df:
        df = df.sort_values("dataset", kind="stable")
    return _ordered(df, ["dataset"])


def partitions_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    flat = []
    for r in rows:
        row = {k: v for k, v in r.items() if _scalar(v)}
        if isinstance(r.get("params"), dict):
            row["params"] = json.dumps({k: v for k, v in r["params"].items() if k != "seed"},
                                       sort_keys=True)
        flat.append(row)
    df = pd.DataFrame(flat)
    keys = [c for c in ("dataset", "partitioner", "hosts", "devices_per_host", "seed") if c in df]
    if keys:
        df = df.sort_values(keys, kind="stable")
    return _ordered(df, ["dataset", "partitioner", "algorithm", "topology", "hosts",
                         "devices_per_host", "num_parts", "seed", "rf", "edge_imbalance",
                         "vertex_imbalance", "inner_max", "outer_max"])


def write_csv(df: pd.DataFrame, path: str) -> None:
    """Atomic CSV write (a killed writer never leaves a table that looks complete)."""
    atomic_write_text(path, df.to_csv(index=False))


# ------------------------------------------------------------------ helpers
def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float))


def _ordered(df: pd.DataFrame, first: list[str]) -> pd.DataFrame:
    lead = [c for c in first if c in df.columns]
    return df[lead + [c for c in df.columns if c not in lead]].reset_index(drop=True)


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and unbiased standard deviation (0 for a single value; OGB reporting rule)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return math.nan, math.nan
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
