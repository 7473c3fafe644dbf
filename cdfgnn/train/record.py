"""RunRecord: one JSON document per run, validated by workflow/schemas/run.schema.json.

Timing conventions (docs/architecture.md, Metrics): the first ``warmup`` epochs are excluded;
per-rank phase times are means over timed epochs; the run's measured epoch time
is the max over ranks of the rank's mean wall time; the modelled epoch time is
max over ranks of (compute CPU time x device slowdown + modelled comm time), or
the max of the two terms for overlapping methods.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import cdfgnn
from cdfgnn.fileio import atomic_write_json

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "run.schema.json"


@lru_cache(maxsize=1)
def _git_sha() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB.

    Reads VmHWM (peak of the current address space) where /proc exists: unlike
    ``ru_maxrss`` it is not inherited from a large parent across fork + exec.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss() -> None:
    """Start :func:`peak_rss_mb` afresh from the current resident memory (Linux: VmHWM
    reset through /proc/self/clear_refs), so that a run made after another in the same
    process (`cdfgnn train ... --then train ...`) records its own peak. Where that is not
    possible the peak stays the process's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def reset_device_peak(device) -> None:
    """Start the device's peak-memory counter afresh (cuda; nothing on the CPU)."""
    import torch
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def device_peak_mb(device) -> float | None:
    """``torch.cuda.max_memory_allocated`` since :func:`reset_device_peak`, in MB (None on
    the CPU, where :func:`peak_rss_mb` is the peak). With the thread backend every rank
    shares one GPU, so this is the peak of all of them together."""
    import torch
    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(dev) / 2 ** 20


def provenance(backend: str, device: str) -> dict[str, Any]:
    import torch
    return {
        "package_version": cdfgnn.__version__,
        "git_sha": _git_sha(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "backend": backend,
        "device": device,
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def timed_slice(num_epochs: int, warmup: int) -> slice:
    """Epochs that count for timing: all but the warm-up ones (the last if none remain)."""
    return slice(warmup, None) if num_epochs > warmup else slice(num_epochs - 1, None)


def summarise_epochs(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    evaluated = [e for e in epochs if "val" in e]
    best = max(evaluated, key=lambda e: e["val"]) if evaluated else None
    last = evaluated[-1] if evaluated else {}
    return {
        "final_loss": epochs[-1]["loss"] if epochs else None,
        "final_train": last.get("train"),
        "final_val": last.get("val"),
        "final_test": last.get("test"),
        "best_val": best["val"] if best else None,
        "test_at_best_val": best["test"] if best else None,
        "best_epoch": best["epoch"] if best else None,
    }


def mean_times(times: list[dict[str, float]], sl: slice) -> dict[str, float]:
    sel = times[sl]
    keys = ("wall_s", "cpu_s", "compute_s", "comm_s", "reduce_s", "overhead_cpu_s",
            "part_cpu_max_s")
    return {k: float(np.mean([t.get(k, 0.0) for t in sel])) if sel else 0.0 for k in keys}


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=1)
def _record_validator():
    """The schema, checked once per process (``jsonschema.validate`` re-checks the schema
    itself at every call: 0.1 CPU-s per record)."""
    import jsonschema

    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_record(record: dict) -> None:
    """Raise the error ``jsonschema.validate`` would raise for an invalid record."""
    from jsonschema.exceptions import best_match

    error = best_match(_record_validator().iter_errors(record))
    if error is not None:
        raise error


def write_record(record: dict, path: str | os.PathLike) -> None:
    """Validate, then write atomically (a killed run never leaves a file that looks complete)."""
    validate_record(record)
    atomic_write_json(path, record)
