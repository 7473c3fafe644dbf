"""Run records and statistics rows -> tidy tables (DESIGN.md sec. 3, "report").

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
from pathlib import Path
from typing import Any, Iterable

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
    return int((rec.get("model") or {}).get("dropout_version", 1))


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


def _identity(rec: dict[str, Any]) -> dict[str, Any]:
    cfg = rec["config"]
    graph = rec.get("graph") or {}
    trainer = cfg.get("trainer", "distributed")
    distributed = trainer == "distributed"
    hosts = int(cfg.get("hosts", 1)) if distributed else 1
    workers = int(cfg.get("workers", 1)) if distributed else 1
    return {
        "experiment": _experiment_of(rec.get("_source", "")),
        "dataset": cfg.get("dataset") or graph.get("dataset") or graph.get("name"),
        "trainer": trainer,
        "partitioner": param_label(cfg.get("partitioner"), cfg.get("partition_params"))
        if distributed else "",
        "topology": f"h{hosts}x{workers // hosts}",
        "hosts": hosts,
        "workers": workers,
        "method": param_label(cfg.get("method"), cfg.get("method_params")) if distributed else trainer,
        "model": cfg.get("model"),
        "layers": cfg.get("layers"),
        "hidden": cfg.get("hidden"),
        "epochs": cfg.get("epochs"),
        "seed": cfg.get("seed"),
        "backend": cfg.get("backend"),
    }


# ------------------------------------------------------------------- tables
def runs_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in records:
        row = _identity(rec)
        for k, v in (rec.get("summary") or {}).items():
            if _scalar(v):
                row[k] = v
        per_epoch = ((rec.get("comm") or {}).get("per_epoch")) or {}
        for link in ("intra", "inter"):
            for unit in ("bytes", "msgs"):
                row[f"{link}_{unit}_per_epoch"] = (per_epoch.get(link) or {}).get(unit)
        part = rec.get("partition") or {}
        for k in ("rf", "edge_imbalance", "vertex_imbalance", "inner_max", "outer_max"):
            row[f"partition_{k}"] = part.get(k)
        ranks = rec.get("ranks") or []
        for k in ("compute_s", "comm_s", "reduce_s", "wall_s", "cpu_s"):
            vals = [r[k] for r in ranks if _scalar(r.get(k)) and r.get(k) is not None]
            row[f"max_rank_{k}"] = max(vals) if vals else None
        # random features/labels (an imported graph without them, Friendster): the
        # accuracy columns of this row mean nothing
        row["timing_only"] = bool((rec.get("graph") or {}).get("timing_only", False))
        row["source"] = rec.get("_source", "")
        rows.append(row)
    return _ordered(pd.DataFrame(rows), IDENTITY)


def epochs_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in records:
        ident = _identity(rec)
        for ep in rec.get("epochs") or []:
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
