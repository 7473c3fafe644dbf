"""Memory guard: estimate a run's peak memory and refuse a run that cannot fit.

A run that would exhaust memory halfway (after minutes of partitioning and
training) must instead stop at once with the estimate and the limit. The
estimate is a sum of the large arrays a run holds, per part, from the graph and
the partition statistics (``cdfgnn.partition.stats``), in bytes:

* graph: CSR (8 B per arc and per vertex), features (4 F B per vertex), labels,
  masks; held once per process (the thread backend shares it; every process of
  the process backend loads its own copy);
* per part: input rows and labels (4 F B per local row), the local CSR and its
  transpose with values (2 x (8 + 4) B per local arc), the send/receive index
  lists (8 B per replica), and the activations of forward and backward: for every
  layer ``l`` with widths ``d_in -> d_out``, about ``(d_in + 4 d_out)`` floats per
  local row kept for backward, doubled for the gradients of the backward pass;
* model: weights, gradients and Adam's two moments (4 x 4 B per parameter) per rank;
* method state: ``SyncStrategy.memory_bytes(rows, widths)`` when a method keeps
  caches or buffers (optional hook; 0 otherwise).

Every 4 B float above is 8 B with ``--dtype float64`` (features are cast per part;
the graph file stays float32).

The estimate is deliberately simple and slightly conservative; it is a guard,
not a profiler. ``check`` compares it with a budget (default: MemAvailable).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from cdfgnn.errors import CdfgnnError

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1024, "m": 1e6, "mb": 1e6,
          "mib": 1024 ** 2, "g": 1e9, "gb": 1e9, "gib": 1024 ** 3, "t": 1e12, "tb": 1e12,
          "tib": 1024 ** 4}


def parse_bytes(text: str | int | float) -> int:
    """'16GiB', '512M', '2.5G' or a plain number of bytes -> bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise CdfgnnError(f"bad memory size {text!r}; expected a number with an optional "
                              "unit (B, K, M, G, T, KiB, MiB, GiB, TiB), e.g. 16GiB")
        value = float(m.group(1)) * _UNITS[unit]
    if not value > 0:
        raise CdfgnnError(f"memory size must be > 0, got {text!r}")
    return int(value)


def available_bytes() -> int | None:
    """MemAvailable of this machine (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@dataclass
class MemoryEstimate:
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return float(sum(self.parts.values()))

    def describe(self) -> str:
        inner = ", ".join(f"{k} {human(v)}" for k, v in self.parts.items() if v)
        return f"{human(self.total)} ({inner})"


def graph_bytes(graph) -> float:
    arrays = [graph.indptr, graph.indices, graph.x, graph.y, graph.train, graph.val, graph.test]
    return float(sum(a.nbytes for a in arrays))


def _layer_widths(cfg, graph) -> list[tuple[int, int]]:
    dims = [graph.num_features] + [cfg.hidden] * (cfg.layers - 1) + [graph.num_classes]
    return list(zip(dims[:-1], dims[1:]))


def float_bytes(cfg) -> float:
    """Bytes of one float of the run (``--dtype``; 4 for configs without one)."""
    return 8.0 if getattr(cfg, "dtype", "float32") == "float64" else 4.0


def model_bytes(cfg, graph) -> float:
    gat = cfg.model == "gat"  # heads x (weight + two attention vectors)
    heads = getattr(cfg, "heads", 1) if gat else 1
    mult = 2 if cfg.model == "sage" else heads
    params = sum(mult * a * b + (2 * heads * b if gat else 0) + b
                 for a, b in _layer_widths(cfg, graph))
    return 4.0 * float_bytes(cfg) * params


def part_bytes(cfg, graph, rows: float, arcs: float) -> float:
    """Bytes of one part with ``rows`` local rows and ``arcs`` local arcs (see module doc)."""
    widths = _layer_widths(cfg, graph)
    f = float_bytes(cfg)
    data = rows * (f * graph.num_features + 16.0)
    sparse = 2.0 * (8.0 + f) * arcs + 16.0 * rows
    act = 2.0 * f * rows * sum(a + 4 * b for a, b in widths)
    if cfg.model == "gat":  # the edge softmax keeps per-arc messages and scores for backward
        heads = getattr(cfg, "heads", 1)
        act += 2.0 * f * (arcs + rows) * sum(heads * (2 * b + 6) for _, b in widths)
    return data + sparse + act + 8.0 * rows


def estimate(cfg, graph, stats: dict | None = None, method_bytes: float = 0.0,
             ) -> MemoryEstimate:
    """Peak bytes of the run ``cfg`` on ``graph`` (``stats``: the partition statistics;
    None before partitioning gives a lower bound: 1/P of the graph per part, no halo)."""
    one_process = cfg.trainer != "distributed"
    workers = 1 if one_process else cfg.workers
    processes = workers if (cfg.backend == "process" and workers > 1) else 1
    est = MemoryEstimate()
    est.parts["graph"] = graph_bytes(graph) * processes
    est.parts["model"] = model_bytes(cfg, graph) * workers
    if one_process or stats is None:
        parts = 1 if one_process else workers
        rows = np.full(parts, graph.num_nodes / parts)
        arcs = np.full(parts, graph.num_arcs / parts)
    else:
        rows = np.asarray(stats["part_vertices"], dtype=float)
        local = np.asarray(stats["part_local_edges"], dtype=float)
        arcs = 2.0 * local
    est.parts["parts"] = float(sum(part_bytes(cfg, graph, r, a) for r, a in zip(rows, arcs)))
    est.parts["method"] = float(method_bytes)
    return est


def check(est: MemoryEstimate, budget: int | None, what: str = "this run") -> None:
    """Raise CdfgnnError naming the estimate and the limit when ``est`` exceeds ``budget``."""
    limit = budget if budget is not None else available_bytes()
    if limit is None:
        return
    if est.total > limit:
        source = "--memory-budget" if budget is not None else "the memory available"
        raise CdfgnnError(f"{what} needs about {est.describe()}, more than {source} "
                          f"({human(limit)}); use fewer workers per machine, a smaller graph "
                          "or a larger budget")
