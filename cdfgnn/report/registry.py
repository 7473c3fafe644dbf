"""Report plug-ins: every figure and table the pipeline draws is a registered report.

A report is a function ``fn(inputs, params, out, md_out)`` registered with::

    @report("cdfgnn-fig7", kind="figure", reads=("runs",), params={"layer": 0})
    def fig7(inputs, params, out, md_out):
        df = inputs.epochs            # tidy epochs table of the given run records
        ...                           # draw; save with cdfgnn.report.render.save_figure

* ``kind``: ``"figure"`` (writes the PNG ``out``) or ``"table"`` (writes the CSV
  ``out`` and its markdown rendering ``md_out``, both atomically; see
  :func:`cdfgnn.report.render.write_table`).
* ``reads``: which inputs it needs, ``("runs",)``, ``("partitions",)`` or both.
  The pipeline hands it the run records of the configured experiment(s) and the
  partition statistics of the configured partition set(s); ``cdfgnn report``
  takes them as ``--runs`` / ``--partitions``.
* ``params``: accepted parameters and their defaults (``--param K=V``, or the
  ``params:`` mapping of a figure or table in a config). Unknown keys are refused.

:data:`REPORTS` is filled by importing the modules of ``cdfgnn/report/``;
:func:`discover` imports all of them, so a paper adds its reports with one module
(``cdfgnn/report/<paper>.py``) and no edit elsewhere. The Snakefile discovers the
reports while parsing, so a report module's top level stays light: numpy and
pandas are fine, matplotlib and torch are imported inside the report function (a
test checks this).
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

from cdfgnn.errors import CdfgnnError
from cdfgnn.registry import Registry

KINDS = ("figure", "table")
SOURCES = ("runs", "partitions")
_discovered = False


@dataclass(frozen=True)
class ReportSpec:
    """A registered report: its name, kind, the inputs it reads, parameter defaults."""
    name: str
    kind: str
    reads: tuple[str, ...]
    fn: Callable[..., None]
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """First line of the function's docstring (for `cdfgnn report --list`)."""
        return (self.fn.__doc__ or "").strip().split("\n", 1)[0]

    def resolve_params(self, given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
        """Defaults updated by ``given``; an unknown key names the valid ones."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            valid = ", ".join(sorted(self.params)) or "(none)"
            raise CdfgnnError(f"{where}: report {self.name!r} takes no parameter(s) {unknown}; "
                              f"valid: {valid}")
        return {**self.params, **given}


REPORTS: Registry[ReportSpec] = Registry("report")


def report(name: str, kind: str, reads: Sequence[str],
           params: Mapping[str, Any] | None = None) -> Callable:
    """Register ``fn(inputs, params, out, md_out)`` as report ``name`` (see the module doc)."""
    if kind not in KINDS:
        raise ValueError(f"report {name!r}: kind must be one of {KINDS}, got {kind!r}")
    reads = tuple(reads)
    if not reads or any(r not in SOURCES for r in reads) or len(set(reads)) != len(reads):
        raise ValueError(f"report {name!r}: reads must be a non-empty subset of {SOURCES}, "
                         f"got {reads!r}")

    def deco(fn: Callable) -> Callable:
        REPORTS.register(name)(ReportSpec(name, kind, reads, fn, dict(params or {})))
        return fn

    return deco


def discover() -> Registry[ReportSpec]:
    """Import every module of ``cdfgnn.report`` so that :data:`REPORTS` is complete."""
    global _discovered
    if not _discovered:
        import cdfgnn.report as pkg

        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
        _discovered = True
    return REPORTS


def get_report(name: str) -> ReportSpec:
    """The registered report ``name``; unknown names list the valid ones."""
    return discover().get(name)


class ReportInputs:
    """Lazy access to a report's inputs; each is loaded once, on first use.

    * ``records``: RunRecord dicts (:func:`cdfgnn.report.aggregate.load_runs`);
    * ``rows``: those records flattened (:class:`cdfgnn.report.aggregate.RunRow`), what
      every per-paper report reads;
    * ``runs`` / ``epochs``: the tidy runs / epochs DataFrames of those records;
    * ``partition_rows``: partition statistics dicts (one per partitioning);
    * ``partitions``: the tidy partitions DataFrame of those rows.
    """

    def __init__(self, report: str, runs: Sequence[str] | None = None,
                 partitions: Sequence[str] | None = None):
        self.report = report
        self.run_paths = list(runs or [])
        self.partition_paths = list(partitions or [])

    def _need(self, paths: list[str], source: str) -> list[str]:
        if not paths:
            raise CdfgnnError(f"report {self.report!r} used --{source} inputs but none were given")
        return paths

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        from cdfgnn.report.aggregate import load_runs

        return load_runs(self._need(self.run_paths, "runs"))

    @cached_property
    def rows(self):
        from cdfgnn.report.aggregate import run_rows

        return run_rows(self.records)

    @cached_property
    def runs(self):
        from cdfgnn.report.aggregate import runs_table

        return runs_table(self.records)

    @cached_property
    def epochs(self):
        from cdfgnn.report.aggregate import epochs_table

        return epochs_table(self.records)

    def device_view(self) -> "ReportInputs":
        """The same inputs with every run record's times device-modelled
        (:func:`cdfgnn.report.aggregate.device_view`)."""
        from cdfgnn.report.aggregate import device_view

        view = ReportInputs(self.report, self.run_paths, self.partition_paths)
        view.__dict__["records"] = [device_view(r) for r in self.records]
        return view

    @cached_property
    def device_profiles(self) -> dict[str, str]:
        """``{record path: 'device profile on network profile'}`` of every run record."""
        from cdfgnn.report.aggregate import device_profile_label

        return {r["_source"]: device_profile_label(r) for r in self.records}

    @cached_property
    def partition_rows(self) -> list[dict[str, Any]]:
        from cdfgnn.report.aggregate import load_rows

        return load_rows(self._need(self.partition_paths, "partitions"), "partition statistics")

    @cached_property
    def partitions(self):
        from cdfgnn.report.aggregate import partitions_table

        return partitions_table(self.partition_rows)


def check_inputs(spec: ReportSpec, given: Mapping[str, bool], how: Callable[[str], str]) -> None:
    """Every source in ``spec.reads`` given, none other; ``how(source)`` names the source
    for the message (a flag on the command line, a config key in the pipeline)."""
    missing = [how(s) for s in spec.reads if not given.get(s)]
    extra = [how(s) for s in SOURCES if given.get(s) and s not in spec.reads]
    problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"it does not read {', '.join(extra)}"] if extra else [])
    if problems:
        reads = " and ".join(how(s) for s in spec.reads)
        raise CdfgnnError(f"report {spec.name!r} reads {reads}; {'; '.join(problems)}")


def run_report(name: str, out: str, *, runs: Sequence[str] | None = None,
               partitions: Sequence[str] | None = None, md_out: str | None = None,
               params: Mapping[str, Any] | None = None, kind: str | None = None) -> ReportSpec:
    """Check the request against the report's declaration, then run it.

    Everything that can be checked before reading the inputs is (name, kind, inputs,
    parameters, the markdown path of a table), so bad input writes nothing.
    """
    spec = get_report(name)
    if kind is not None and spec.kind != kind:
        valid = ", ".join(n for n in REPORTS.names() if REPORTS.get(n).kind == kind)
        raise CdfgnnError(f"{name!r} is a {spec.kind} report, not a {kind}; {kind}s: {valid}")
    check_inputs(spec, {"runs": bool(runs), "partitions": bool(partitions)}, lambda s: f"--{s}")
    if spec.kind == "table" and not md_out:
        raise CdfgnnError(f"table report {name!r} needs --md-out FILE.md as well as --out")
    if spec.kind == "figure" and md_out:
        raise CdfgnnError(f"figure report {name!r} writes no markdown: drop --md-out")
    resolved = spec.resolve_params(params, "--param")
    before = {p: _stamp(p) for p in (out, md_out) if p}
    spec.fn(ReportInputs(name, runs, partitions), resolved, str(out), md_out and str(md_out))
    stale = [p for p, stamp in before.items() if _stamp(p) in (None, stamp)]
    if stale:
        raise RuntimeError(f"report {name!r} returned without writing {stale}")
    return spec


def _stamp(path: str | os.PathLike) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_ino)
