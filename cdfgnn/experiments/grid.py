"""Pipeline configuration -> the concrete list of files to build (docs/architecture.md).

The Snakefile asks this module, never the config directly, which datasets,
partitions, runs, tables and figures exist and which command-line arguments each
job gets. That keeps the rules thin (they only call the CLI) and lets the tests
check the expansion without running Snakemake. The config arrives merged and
schema-checked (:mod:`cdfgnn.experiments.config`); the cross-references between
sections and the names of registered plug-ins are checked here.

Config shape::

    scale: small                     # size of the synthetic twins
    data_seed: 0                     # seed of the twin generators
    batch: 1                         # runs / partitionings per job (below)
    device: cpu                      # default device of the training jobs (cuda: on the
                                     # process backend, one GPU per rank; an experiment's
                                     # own train.device wins; `--config device=cpu`)
    datasets: [synth-arxiv, {mygraph: {from: g.txt.gz, format: snap}}, ...]
    partitioners:                    # wildcard value -> registered partitioner + params
      ebv-g0.1: {name: ebv, params: {gamma: 0.1}}
    methods:                         # wildcard value -> registered method + params
      exact: {name: exact}
    experiments:                     # named training grids (cross products)
      engine: {datasets, partitioners, topologies, methods, seeds, single, train}
    partition_sets:                  # named partition grids (no training)
      table3: {datasets, partitioners, topologies, seeds, topologies_by_dataset}
    tables:  {name: {kind: <table report>, <inputs>}}
    figures: {paper/figure: {plot: <figure report>, <inputs>}}

where ``<inputs>`` is ``experiment: X`` or ``experiments: [..]`` (run records),
``partition_set: Y`` or ``partition_sets: [..]`` (partition statistics), as the
report's ``reads`` asks, optional filters (datasets, partitioners, topologies,
methods, seeds, single) and ``params`` for the report.

An experiment's distributed runs are the cross product datasets x partitioners x
topologies x methods x seeds, less the (partitioner, method) pairs whose partition
kinds differ (a vertex-cut-only method never runs on an edge-cut partition).

Every table and figure belongs to a **group**, the prefix of its name (figure
``cdfgnn/fig7_send_ratio`` -> ``cdfgnn``; table ``cdfgnn_claims`` -> ``cdfgnn``);
the Snakefile makes one target rule per group (``snakemake --cores 2 cdfgnn``).

**Batches.** A job is a process, and for short jobs starting Python and importing torch,
pandas or matplotlib is most of their time. So files that are always needed together
are made by one job, its commands chained in one process (`cdfgnn A ... --then B ...`),
one generated rule per batch:

* tables and figures of one group that read the same files (always);
* with ``batch: N`` > 1, runs and partitionings read by the same configured tables and
  figures, up to N per job (every run and partitioning is then made by a batch rule).

Asking for one table or figure still builds only what it reads: a batch never holds a
file that some table or figure reads without reading the others.

File layout (the wildcards are dataset, partitioner, topology ``h{hosts}x{dph}``,
method, seed; runs add the experiment name so two grids with different model
settings never share a file)::

    results/data/{dataset}.npz, results/data/{dataset}.stats.json
    results/partitions/{dataset}/{partitioner}/{topology}/s{seed}.npz (+ .stats.json)
    results/runs/{experiment}/{dataset}/{partitioner}/{topology}/{method}/s{seed}.json
    results/runs/{experiment}/{dataset}/{trainer}/s{seed}.json   (one-process trainers)
    results/tables/{datasets,partitions,runs,epochs}.csv, results/tables/{table}.csv + .md
    figures/{figure}.png
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import product
from typing import Any, Iterable, Mapping

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import (DEVICE_TRAINERS, DEVICES, DISTRIBUTED, ONE_PROCESS_TRAINERS,
                                 grid_options)

# experiment "train" keys -> `cdfgnn train` flags: the TrainConfig fields marked grid=True
TRAIN_FLAGS: dict[str, str] = {name: opt.flag for name, opt in grid_options().items()}
BUILTIN_TABLES = ("datasets", "partitions", "runs", "epochs")
CLAIMS_PAGE = "results/tables/claims.md"   # every paper's claims on one page
# filters of a figure or table; the last two select runs only
FILTERS = ("datasets", "partitioners", "topologies", "seeds", "methods", "single")
RUN_FILTERS = ("methods", "single")
#: the word that chains `cdfgnn` commands in one process (cdfgnn.cli.THEN)
THEN = "--then"
FILE_DATASET_FLAGS = {"from": "--from", "format": "--format", "features": "--features",
                      "labels": "--labels"}


def format_param(key: str, value: Any) -> str:
    """``key=value`` as `cdfgnn --param` parses it back (YAML scalars)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, (list, tuple)):
        text = "[" + ",".join(format_param("_", v)[2:] for v in value) + "]"
    else:
        text = str(value)
    return f"{key}={text}"


class Plugins:
    """The registries a config names, imported on first use (tests substitute fakes)."""

    @lru_cache(maxsize=None)
    def partitioner_kind(self, name: str) -> str:
        """'edge' or 'vertex' for a registered partitioner."""
        from cdfgnn.partition.api import ensure_registered
        from cdfgnn.partition.base import PARTITIONERS

        ensure_registered()
        return PARTITIONERS.get(name).kind

    @lru_cache(maxsize=None)
    def method_kind(self, name: str) -> str | None:
        """The partition kind a registered method needs (None: either)."""
        from cdfgnn.methods import METHODS  # imports torch: only when a config has methods

        return METHODS.get(name).partition_kind

    def method_devices(self, name: str) -> tuple[str, ...]:
        """The devices a registered method declares (``SyncStrategy.supported_devices``)."""
        from cdfgnn.methods import METHODS
        return tuple(METHODS.get(name).supported_devices)

    def check_method(self, name: str, params: Mapping[str, Any]) -> None:
        """A method preset's parameters pass the method's own declaration (PARAMS)."""
        from cdfgnn.methods import build_strategy

        build_strategy(name, dict(params))

    def report(self, name: str):
        from cdfgnn.report.registry import get_report

        return get_report(name)

    def check_train(self, options: Mapping[str, Any]) -> None:
        """The experiment's ``train:`` values pass TrainConfig's own checks."""
        from cdfgnn.train.config import TrainConfig

        TrainConfig(**options).validate()

    def check_run(self, options: Mapping[str, Any], parts: int) -> None:
        """One distributed run's `cdfgnn train` options pass TrainConfig's checks, the
        method's ``check_compatible`` among them (``parts``: the topology's parts)."""
        from cdfgnn.train.config import TrainConfig

        TrainConfig(**options).validate(parts=parts)


@dataclass(frozen=True)
class PartitionJob:
    dataset: str
    partitioner: str
    topology: str
    seed: int

    @property
    def path(self) -> str:
        return f"results/partitions/{self.dataset}/{self.partitioner}/{self.topology}/s{self.seed}.npz"

    @property
    def stats_path(self) -> str:
        return self.path[: -len(".npz")] + ".stats.json"


@dataclass(frozen=True)
class RunJob:
    experiment: str
    dataset: str
    seed: int
    # distributed runs: partitioner, topology, method; one-process runs: trainer
    partitioner: str | None = None
    topology: str | None = None
    method: str | None = None
    trainer: str = DISTRIBUTED

    @property
    def path(self) -> str:
        base = f"results/runs/{self.experiment}/{self.dataset}"
        if self.trainer == DISTRIBUTED:
            return f"{base}/{self.partitioner}/{self.topology}/{self.method}/s{self.seed}.json"
        return f"{base}/{self.trainer}/s{self.seed}.json"

    @property
    def partition(self) -> PartitionJob | None:
        if self.trainer != DISTRIBUTED:
            return None
        return PartitionJob(self.dataset, self.partitioner, self.topology, self.seed)


@dataclass(frozen=True)
class Output:
    """A configured figure or table: which report draws it from which inputs."""
    name: str
    kind: str                          # "figure" | "table"
    report: str
    experiments: tuple[str, ...]
    partition_sets: tuple[str, ...]
    filters: Mapping[str, list] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.kind}s.{self.name}"

    @property
    def paths(self) -> list[str]:
        if self.kind == "figure":
            return [f"figures/{self.name}.png"]
        return [f"results/tables/{self.name}.csv", f"results/tables/{self.name}.md"]

    @property
    def group(self) -> str:
        """Name up to the first '/' (figures) or '_' (tables): the paper it belongs to."""
        return self.name.split("/" if self.kind == "figure" else "_", 1)[0]

    @classmethod
    def parse(cls, name: str, kind: str, entry: Mapping[str, Any]) -> "Output":
        key = "plot" if kind == "figure" else "kind"
        where = f"{kind}s.{name}"
        for one, many in (("experiment", "experiments"), ("partition_set", "partition_sets")):
            if one in entry and many in entry:
                raise CdfgnnError(f"{where}: give '{one}' or '{many}', not both")
        def sources(one: str, many: str) -> tuple[str, ...]:
            return tuple(entry[many]) if many in entry else (entry[one],) if one in entry else ()

        return cls(name, kind, entry[key], sources("experiment", "experiments"),
                   sources("partition_set", "partition_sets"),
                   {k: entry[k] for k in FILTERS if k in entry}, dict(entry.get("params") or {}))


@dataclass(frozen=True)
class Batch:
    """Jobs of one kind made by one process, one after another: a generated rule."""
    rule: str
    kind: str                          # "report" | "train" | "partition"
    members: tuple                     # Output | RunJob | PartitionJob


class Grid:
    """The expanded pipeline for one (merged, schema-checked) config dict."""

    def __init__(self, config: dict[str, Any], plugins: Plugins | None = None):
        self.config = config
        self.plugins = plugins or Plugins()
        self.scale = str(config.get("scale", "small"))
        self.data_seed = int(config.get("data_seed", 0))
        self.device = str(config.get("device", "cpu"))
        if self.device not in DEVICES:
            raise CdfgnnError(f"config device: {self.device!r}; valid: {', '.join(DEVICES)}")
        self.partitioners: dict[str, dict] = dict(config.get("partitioners") or {})
        self.methods: dict[str, dict] = dict(config.get("methods") or {})
        self.experiments: dict[str, dict] = dict(config.get("experiments") or {})
        self.partition_sets: dict[str, dict] = dict(config.get("partition_sets") or {})
        self.tables: dict[str, Output] = {n: Output.parse(n, "table", t)
                                          for n, t in (config.get("tables") or {}).items()}
        self.figures: dict[str, Output] = {n: Output.parse(n, "figure", f)
                                           for n, f in (config.get("figures") or {}).items()}
        self.batch = int(config.get("batch", 1))
        self.threads: dict[str, int] = {"prepare": 1, "partition": 1, "train": 1,
                                        **(config.get("threads") or {})}
        self.extra_datasets, self.file_datasets = _parse_datasets(config.get("datasets"))
        self._check()

    # ----------------------------------------------------------- validation
    def _check(self) -> None:
        """Cross-references and plug-in names the JSON Schema cannot check; errors name the key."""
        for section, lookup in (("partitioners", self.plugins.partitioner_kind),
                                ("methods", self.plugins.method_kind)):
            for label, preset in getattr(self, section).items():
                self._check_label(label, section)
                _named(lambda: lookup(preset["name"]), f"{section}.{label}.name")
        for label, preset in self.methods.items():
            _named(lambda: self.plugins.check_method(preset["name"], preset.get("params") or {}),
                   f"methods.{label}.params")
        for name, exp in self.experiments.items():
            self._check_experiment(name, exp)
        self._check_runs()
        for name, ps in self.partition_sets.items():
            where = f"partition_sets.{name}"
            self._refs(ps.get("partitioners", []), self.partitioners, f"{where}.partitioners", "partitioners")
            for t in ps.get("topologies", []):
                self._topology(t, f"{where}.topologies")
            for ds, tops in (ps.get("topologies_by_dataset") or {}).items():
                if ds not in ps.get("datasets", []):
                    raise CdfgnnError(f"{where}.topologies_by_dataset: {ds!r} is not in {where}.datasets")
                for t in tops:
                    self._topology(t, f"{where}.topologies_by_dataset.{ds}")
        for name in self.tables:
            if name in (*BUILTIN_TABLES, "claims"):
                raise CdfgnnError(f"tables.{name}: the name is reserved for a built-in table "
                                  f"({', '.join(BUILTIN_TABLES)}, claims)")
        for out in self.outputs():
            self._check_output(out)

    def _check_experiment(self, name: str, exp: dict) -> None:
        where = f"experiments.{name}"
        self._check_label(name, "experiments")
        self._refs(exp.get("partitioners", []), self.partitioners, f"{where}.partitioners", "partitioners")
        self._refs(exp.get("methods", []), self.methods, f"{where}.methods", "methods")
        for t in exp.get("topologies", []):
            self._topology(t, f"{where}.topologies")
        for tr in exp.get("single", []):
            if tr not in ONE_PROCESS_TRAINERS:
                raise CdfgnnError(f"{where}.single: unknown trainer {tr!r}; "
                                  f"valid: {', '.join(ONE_PROCESS_TRAINERS)}")
        cap = exp.get("workers")
        for t in exp.get("topologies", []) if cap is not None else []:
            parts = Topology.parse(t).num_parts
            if cap < parts and parts % cap:
                raise CdfgnnError(f"{where}.workers: {cap} does not divide the {parts} parts "
                                  f"of topology {t!r}")
        train = exp.get("train") or {}
        for key in train:
            if key not in TRAIN_FLAGS:
                raise CdfgnnError(f"{where}.train: unknown option {key!r}; "
                                  f"valid: {', '.join(sorted(TRAIN_FLAGS))}")
        _named(lambda: self.plugins.check_train(train), f"{where}.train")
        parts = exp.get("partitioners", [])
        for m in exp.get("methods", []):
            if not parts:
                raise CdfgnnError(f"{where}.methods: method {m!r} has no partitioner to run on "
                                  f"({where}.partitioners is empty)")
            if not any(self.compatible(p, m) for p in parts):
                need = self.plugins.method_kind(self.methods[m]["name"])
                kinds = sorted({self.plugins.partitioner_kind(self.partitioners[p]["name"])
                                for p in parts})
                raise CdfgnnError(f"{where}.methods: method {m!r} needs a {need}-cut partitioner, "
                                  f"but {where}.partitioners {parts} are all {'/'.join(kinds)}-cut")

    def _check_runs(self) -> None:
        """Every distributed run of every experiment passes the checks `cdfgnn train`
        makes before it starts (a method's ``check_compatible``: model, devices, parts
        per worker, ...), so an impossible pairing stops the workflow at its start. The
        dataset and seed do not change the answer: one check per (experiment,
        partitioner, topology, method)."""
        seen = set()
        for run in self.all_runs():
            key = (run.experiment, run.partitioner, run.topology, run.method)
            if run.trainer != DISTRIBUTED or key in seen:
                continue
            seen.add(key)
            _named(lambda: self.plugins.check_run(self.run_options(run),
                                                  Topology.parse(run.topology).num_parts),
                   f"experiments.{run.experiment}: run {run.partitioner}/{run.topology}/"
                   f"{run.method}")

    def run_options(self, run: RunJob) -> dict[str, Any]:
        """The TrainConfig fields of a distributed run (what its `cdfgnn train` flags say,
        apart from the files)."""
        method, part = self.methods[run.method], self.partitioners[run.partitioner]
        workers, hosts = self.run_workers(run.experiment, run.topology)
        train = self.train_options(run.experiment, method=run.method)
        return {**{k: v for k, v in train.items() if v is not None},
                "dataset": run.dataset, "seed": run.seed,
                "method": method["name"], "method_params": dict(method.get("params") or {}),
                "partitioner": part["name"], "partition_params": dict(part.get("params") or {}),
                "workers": workers, "hosts": hosts}

    def _check_output(self, out: Output) -> None:
        where = out.where
        spec = _named(lambda: self.plugins.report(out.report),
                      f"{where}.{'plot' if out.kind == 'figure' else 'kind'}")
        if spec.kind != out.kind:
            raise CdfgnnError(f"{where}: report {out.report!r} draws a {spec.kind}, not a {out.kind}"
                              f" (put it under '{spec.kind}s')")
        self._refs(out.experiments, self.experiments, f"{where}.experiment", "experiments")
        self._refs(out.partition_sets, self.partition_sets, f"{where}.partition_set", "partition_sets")
        from cdfgnn.report.registry import check_inputs

        _named(lambda: check_inputs(spec, {"runs": bool(out.experiments),
                                           "partitions": bool(out.partition_sets)},
                                    lambda s: {"runs": "'experiment(s)'",
                                               "partitions": "'partition_set(s)'"}[s]), where)
        for key, values in out.filters.items():
            if key in RUN_FILTERS and not out.experiments:
                raise CdfgnnError(f"{where}.{key}: filters runs, but the {out.kind} shows no experiment")
            known = self._source_values(out, key)
            extra = [v for v in values if v not in known]
            if extra:
                raise CdfgnnError(f"{where}.{key}: {extra} not in the {key} of its "
                                  f"experiment(s)/partition set(s): {known}")
        spec.resolve_params(out.params, f"{where}.params")

    def _source_values(self, out: Output, key: str) -> list:
        values = [v for e in out.experiments for v in self.experiments[e].get(key, [])]
        for name in out.partition_sets:
            ps = self.partition_sets[name]
            values += ps.get(key, [0] if key == "seeds" else [])
            if key == "topologies":
                values += [t for tops in (ps.get("topologies_by_dataset") or {}).values() for t in tops]
        return _unique(values)

    def compatible(self, partitioner: str, method: str) -> bool:
        """Whether preset ``method`` can run on partitions of preset ``partitioner``."""
        need = self.plugins.method_kind(self.methods[method]["name"])
        return need is None or need == self.plugins.partitioner_kind(self.partitioners[partitioner]["name"])

    @staticmethod
    def _check_label(label: str, section: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", label):
            raise CdfgnnError(f"{section}: name {label!r} must be letters, digits and . _ + - "
                              "(it becomes a path component)")

    @staticmethod
    def _refs(names: Iterable[str], known: dict, where: str, section: str) -> None:
        for n in names:
            if n not in known:
                raise CdfgnnError(f"{where}: {n!r} is not defined in '{section}'; defined: "
                                  f"{', '.join(sorted(known)) or '(none)'}")

    @staticmethod
    def _topology(label: str, where: str) -> Topology:
        if not re.fullmatch(r"h[0-9]+x[0-9]+", str(label)):
            raise CdfgnnError(f"{where}: bad topology {label!r}; expected h<hosts>x<devices_per_host>")
        return Topology.parse(label)

    # -------------------------------------------------------------- expansion
    def experiment_runs(self, name: str, selection: Mapping[str, list] | None = None) -> list[RunJob]:
        """Runs of experiment ``name``, optionally restricted by a figure's filters."""
        exp = self.experiments[name]
        sel = selection or {}

        def pick(key):
            return [v for v in exp.get(key, []) if key not in sel or v in sel[key]]

        runs = [RunJob(name, d, int(s), p, t, m)
                for d, p, t, m, s in product(pick("datasets"), pick("partitioners"),
                                             pick("topologies"), pick("methods"), pick("seeds"))
                if self.compatible(p, m)]
        runs += [RunJob(name, d, int(s), trainer=tr)
                 for d, tr, s in product(pick("datasets"), pick("single"), pick("seeds"))]
        return runs

    def all_runs(self) -> list[RunJob]:
        return [r for name in self.experiments for r in self.experiment_runs(name)]

    def partition_set_jobs(self, name: str, selection: Mapping[str, list] | None = None,
                           ) -> list[PartitionJob]:
        ps = self.partition_sets[name]
        sel = selection or {}

        def keep(key, values):
            return [v for v in values if key not in sel or v in sel[key]]

        by_ds = ps.get("topologies_by_dataset") or {}
        jobs = []
        for d in keep("datasets", ps.get("datasets", [])):
            for p, t, s in product(keep("partitioners", ps.get("partitioners", [])),
                                   keep("topologies", by_ds.get(d, ps.get("topologies", []))),
                                   keep("seeds", ps.get("seeds", [0]))):
                jobs.append(PartitionJob(d, p, t, int(s)))
        return jobs

    def all_partitions(self) -> list[PartitionJob]:
        jobs = [r.partition for r in self.all_runs() if r.partition is not None]
        jobs += [j for name in self.partition_sets for j in self.partition_set_jobs(name)]
        return _unique(jobs)

    def datasets(self) -> list[str]:
        names = list(self.extra_datasets)
        for exp in self.experiments.values():
            names += exp.get("datasets", [])
        for ps in self.partition_sets.values():
            names += ps.get("datasets", [])
        return _unique(names)

    def outputs(self) -> list[Output]:
        """Every configured table and figure."""
        return [*self.tables.values(), *self.figures.values()]

    def groups(self, reserved: Iterable[str] = ()) -> dict[str, list[str]]:
        """Group name -> the files of its tables and figures (one target rule each).

        ``reserved`` are names already taken (the Snakefile's rules); a group may not
        shadow one, since ``snakemake NAME`` must mean one thing.
        """
        reserved = set(reserved)
        out: dict[str, list[str]] = {}
        for o in self.outputs():
            if o.group in reserved:
                raise CdfgnnError(f"{o.where}: its group {o.group!r} (the name up to the first "
                                  f"{'/' if o.kind == 'figure' else '_'}) is the name of a "
                                  f"pipeline rule; rename the {o.kind}")
            out.setdefault(o.group, []).extend(o.paths)
        return out

    # ---------------------------------------------------------------- paths
    @staticmethod
    def dataset_path(dataset: str) -> str:
        return f"results/data/{dataset}.npz"

    @staticmethod
    def dataset_stats_path(dataset: str) -> str:
        return f"results/data/{dataset}.stats.json"

    def table_paths(self) -> list[str]:
        # a built-in table over nothing would be an empty file: leave it out instead
        paths = [f"results/tables/{t}.csv" for t in BUILTIN_TABLES
                 if {"datasets": self.datasets(), "partitions": self.all_partitions(),
                     "runs": self.all_runs(), "epochs": self.all_runs()}[t]]
        return paths + [p for t in self.tables.values() for p in t.paths]

    def figure_paths(self) -> list[str]:
        return [p for f in self.figures.values() for p in f.paths]

    def all_targets(self) -> list[str]:
        page = [CLAIMS_PAGE] if self.claims_tables() else []
        return (self.table_paths() + self.figure_paths() + page
                + [self.dataset_path(d) for d in self.datasets()])

    def claims_tables(self) -> list[str]:
        """CSV of every configured paper claims table (``<paper>_claims``), for claims.md."""
        return [t.paths[0] for name, t in self.tables.items() if name.endswith("_claims")]

    # ------------------------------------------------------ per-rule inputs
    def output(self, kind: str, name: str) -> Output:
        return (self.figures if kind == "figure" else self.tables)[name]

    def output_runs(self, out: Output) -> list[RunJob]:
        return [r for e in out.experiments for r in self.experiment_runs(e, out.filters)]

    def output_partitions(self, out: Output) -> list[PartitionJob]:
        return _unique([j for s in out.partition_sets
                        for j in self.partition_set_jobs(s, out.filters)])

    def report_inputs(self, kind: str, name: str) -> list[str]:
        """Files a figure or table reads: its run records, then its partition statistics."""
        out = self.output(kind, name)
        return ([r.path for r in self.output_runs(out)]
                + [j.stats_path for j in self.output_partitions(out)])

    def report_args(self, kind: str, name: str) -> str:
        """`cdfgnn report` arguments of a figure or table, apart from the output files."""
        out = self.output(kind, name)
        args = [out.report]
        runs = [r.path for r in self.output_runs(out)]
        parts = [j.stats_path for j in self.output_partitions(out)]
        if runs:
            args += ["--runs", *runs]
        if parts:
            args += ["--partitions", *parts]
        for k, v in out.params.items():
            args += ["--param", format_param(k, v)]
        return shlex.join(args)

    def caption(self, kind: str, name: str) -> str:
        """What a figure or table shows and from which configuration (report captions)."""
        out = self.output(kind, name)
        lines = [f"**{name}** ({kind}, report ``{out.report}``): "
                 f"{self.plugins.report(out.report).summary}"]
        for exp in out.experiments:
            e = self.experiments[exp]
            keep = {k: [v for v in e.get(k, []) if k not in out.filters or v in out.filters[k]]
                    for k in ("datasets", "partitioners", "topologies", "methods", "seeds",
                              "single")}
            parts = [f"{k}: {', '.join(map(str, v))}" for k, v in keep.items() if v]
            train = ", ".join(f"{k}={v}" for k, v in (e.get("train") or {}).items())
            lines.append(f"Experiment ``{exp}`` — {'; '.join(parts)}"
                         + (f"; training: {train}" if train else "") + ".")
        for ps in out.partition_sets:
            p = self.partition_sets[ps]
            lines.append(f"Partition set ``{ps}`` — datasets: {', '.join(p.get('datasets', []))}; "
                         f"partitioners: {', '.join(p.get('partitioners', []))}.")
        if out.params:
            lines.append("Parameters: " + ", ".join(f"{k}={v}" for k, v in out.params.items())
                         + ".")
        lines.append(f"Synthetic twins at scale ``{self.scale}`` (data seed {self.data_seed}) "
                     "unless a dataset is a real one.")
        return "\n\n".join(lines)

    def train_options(self, experiment: str, trainer: str = DISTRIBUTED,
                      method: str | None = None) -> dict[str, Any]:
        """The experiment's ``train`` block as its jobs run it: where the block names no
        ``device`` and the config's ``device`` is not the CPU, jobs of a trainer that
        runs there (distributed, full-graph) get that device, and distributed ones the
        process backend (one GPU per rank: thread ranks would share one GPU). The
        mini-batch trainer, and a ``method`` preset whose method does not declare the
        device, stay on the CPU."""
        train = dict(self.experiments[experiment].get("train") or {})
        if "device" in train or self.device == "cpu" or trainer not in DEVICE_TRAINERS:
            return train
        if method is not None and self.device not in self.plugins.method_devices(
                self.methods[method]["name"]):
            return train
        train["device"] = self.device
        if trainer == DISTRIBUTED:
            train["backend"] = "process"
        return train

    def gpus(self, experiment: str, topology: str | None = None, method: str | None = None,
             trainer: str | None = None) -> int:
        """GPUs a training job of ``experiment`` holds (Snakemake resource): 0 on the CPU;
        on cuda one per rank with the process backend (nccl: a GPU each), else 1 (thread
        ranks share one GPU; one-process trainers). ``topology`` (and ``method``): a
        distributed job; else a one-process ``trainer`` (default full-graph)."""
        trainer = DISTRIBUTED if topology is not None else (trainer or "full-graph")
        train = self.train_options(experiment, trainer, method)
        if not str(train.get("device", "cpu")).startswith("cuda"):
            return 0
        if topology is not None and train.get("backend", "thread") == "process":
            return self.run_workers(experiment, topology)[0]
        return 1

    def figure_inputs(self, figure: str) -> list[str]:
        return self.report_inputs("figure", figure)

    def table_inputs(self, table: str) -> list[str]:
        return self.report_inputs("table", table)

    # -------------------------------------------------------------- batches
    @cached_property
    def _readers(self) -> dict[Any, frozenset[str]]:
        """Run or partitioning -> the configured tables and figures that read it (what
        reads a run also needs the run's partitioning)."""
        readers: dict[Any, set[str]] = {}
        for out in self.outputs():
            for run in self.output_runs(out):
                readers.setdefault(run, set()).add(out.where)
                if run.partition is not None:
                    readers.setdefault(run.partition, set()).add(out.where)
            for job in self.output_partitions(out):
                readers.setdefault(job, set()).add(out.where)
        return {job: frozenset(names) for job, names in readers.items()}

    def _read_together(self, kind: str, jobs: list) -> list[Batch]:
        """``jobs`` in batches of at most :attr:`batch`, each from one class of jobs read
        by the same tables and figures, split evenly."""
        classes: dict[frozenset[str], list] = {}
        for job in jobs:
            classes.setdefault(self._readers.get(job, frozenset()), []).append(job)
        batches = []
        for members in classes.values():
            n = -(-len(members) // self.batch)
            for i in range(n):
                part = members[i * len(members) // n:(i + 1) * len(members) // n]
                batches.append(Batch(f"{kind}_batch_{len(batches) + 1}", kind, tuple(part)))
        return batches

    def run_batches(self) -> list[Batch]:
        """Every run in batches (``batch`` > 1), else none: one job per run."""
        return self._read_together("train", self.all_runs()) if self.batch > 1 else []

    def partition_batches(self) -> list[Batch]:
        """Every partitioning in batches (``batch`` > 1), else none: one job each."""
        return self._read_together("partition", self.all_partitions()) if self.batch > 1 else []

    def report_batches(self) -> list[Batch]:
        """Tables and figures of one group that read the same files, two or more to a
        batch (the others: one job each, rules ``table`` and ``figure``)."""
        same: dict[tuple, list[Output]] = {}
        for out in self.outputs():
            same.setdefault((out.group, tuple(self.report_inputs(out.kind, out.name))),
                            []).append(out)
        members = [outs for outs in same.values() if len(outs) > 1]
        return [Batch(f"report_batch_{i}", "report", tuple(outs))
                for i, outs in enumerate(members, 1)]

    def batched_outputs(self, kind: str) -> set[str]:
        """Names of the tables or figures (``kind``) drawn by a report batch."""
        return {o.name for b in self.report_batches() for o in b.members if o.kind == kind}

    def batch_inputs(self, batch: Batch) -> list[str]:
        if batch.kind == "report":
            return _unique([p for o in batch.members for p in self.report_inputs(o.kind, o.name)])
        if batch.kind == "partition":
            return _unique([self.dataset_path(j.dataset) for j in batch.members])
        return _unique([p for r in batch.members
                        for p in [self.dataset_path(r.dataset)]
                        + ([r.partition.path] if r.partition is not None else [])])

    def batch_outputs(self, batch: Batch) -> list[str]:
        if batch.kind == "report":
            return [p for o in batch.members for p in o.paths]
        if batch.kind == "partition":
            return [p for j in batch.members for p in (j.path, j.stats_path)]
        return [r.path for r in batch.members]

    def batch_commands(self, batch: Batch) -> str:
        """The batch's `cdfgnn` commands, chained (the arguments after `cdfgnn`)."""
        command = {"report": self.report_command, "partition": self.partition_command,
                   "train": self.train_command}[batch.kind]
        return f" {THEN} ".join(shlex.join(command(m)) for m in batch.members)

    def batch_gpus(self, batch: Batch) -> int:
        """GPUs a run batch holds: the most any of its runs needs (they run one by one)."""
        return max((self.run_gpus(r) for r in batch.members), default=0)

    def batch_caption(self, batch: Batch) -> str:
        """The captions of every table and figure of a report batch, one after another."""
        return "\n\n".join(self.caption(o.kind, o.name) for o in batch.members)

    def run_gpus(self, run: RunJob) -> int:
        if run.trainer == DISTRIBUTED:
            return self.gpus(run.experiment, run.topology, run.method)
        return self.gpus(run.experiment, trainer=run.trainer)

    # ------------------------------------------- commands (what a rule's shell line says)
    def partition_command(self, job: PartitionJob) -> list[str]:
        """`cdfgnn partition` of one partitioning (rule ``partition_graph``)."""
        return ["partition", "--graph", self.dataset_path(job.dataset),
                *shlex.split(self.partition_args(job.partitioner, job.topology)),
                "--seed", str(job.seed), "--out", job.path, "--stats-out", job.stats_path]

    def train_command(self, run: RunJob) -> list[str]:
        """`cdfgnn train` of one run (rules ``train`` and ``train_single``)."""
        files = ["--graph", self.dataset_path(run.dataset)]
        if run.trainer == DISTRIBUTED:
            files += ["--partition", run.partition.path]
            args = self.train_args(run.experiment, run.topology, run.method)
        else:
            args = self.train_args(run.experiment, trainer=run.trainer)
        return ["train", "--dataset", run.dataset, *files, *shlex.split(args),
                "--seed", str(run.seed), "--out", run.path]

    def report_command(self, out: Output) -> list[str]:
        """`cdfgnn report` of one table or figure (rules ``table`` and ``figure``)."""
        files = ["--out", out.paths[0]] + (["--md-out", out.paths[1]] if out.kind == "table" else [])
        return ["report", *shlex.split(self.report_args(out.kind, out.name)), *files]

    # ------------------------------------------------------- CLI arguments
    def prepare_args(self, dataset: str) -> str:
        """`cdfgnn prepare` flags besides the name and outputs: a twin's scale and seed,
        or a file dataset's files and format."""
        spec = self.file_datasets.get(dataset)
        if spec is None:
            return shlex.join(["--scale", self.scale, "--seed", str(self.data_seed)])
        args: list[str] = []
        for key, flag in FILE_DATASET_FLAGS.items():
            if key in spec:
                args += [flag, str(spec[key])]
        return shlex.join(args)

    def dataset_files(self, dataset: str) -> list[str]:
        """Input files of a dataset imported from files (none for named datasets), so a
        changed file re-runs `cdfgnn prepare` and everything after it."""
        spec = self.file_datasets.get(dataset) or {}
        return [str(spec[k]) for k in ("from", "features", "labels") if k in spec]

    def partition_args(self, partitioner: str, topology: str) -> str:
        """`cdfgnn partition` flags for a partitioner preset on a topology label."""
        preset = self.partitioners[partitioner]
        topo = Topology.parse(topology)
        args = ["--partitioner", preset["name"], "--workers", str(topo.num_parts),
                "--hosts", str(topo.hosts), "--label", partitioner]
        for k, v in (preset.get("params") or {}).items():
            args += ["--param", format_param(k, v)]
        return shlex.join(args)

    def train_args(self, experiment: str, topology: str | None = None,
                   method: str | None = None, trainer: str = DISTRIBUTED) -> str:
        """`cdfgnn train` flags for one run, apart from the files and the seed."""
        exp = self.experiments[experiment]
        # the Graph file is given by the rule; the data seed is recorded for provenance
        args: list[str] = ["--trainer", trainer, "--data-seed", str(self.data_seed)]
        if trainer == DISTRIBUTED:
            preset = self.methods[method]
            workers, hosts = self.run_workers(experiment, topology)
            args += ["--method", preset["name"], "--workers", str(workers),
                     "--hosts", str(hosts)]
            for k, v in (preset.get("params") or {}).items():
                args += ["--method-param", format_param(k, v)]
        else:
            args += ["--workers", "1", "--hosts", "1"]
        for key, value in self.train_options(experiment, trainer, method).items():
            flag = TRAIN_FLAGS[key]
            if value is None:  # null: the option's default
                continue
            if isinstance(value, list):
                args += [flag, *map(str, value)]
            elif isinstance(value, bool):
                args += [flag, "true" if value else "false"]
            else:
                args += [flag, str(value)]
        return shlex.join(args)

    def run_workers(self, experiment: str, topology: str) -> tuple[int, int]:
        """(workers, hosts) of a distributed run: one worker per part, or the experiment's
        ``workers`` cap (several parts per worker; hosts kept when they divide it)."""
        topo = Topology.parse(topology)
        cap = self.experiments[experiment].get("workers")
        if cap is None or cap >= topo.num_parts:
            return topo.num_parts, topo.hosts
        return cap, topo.hosts if cap % topo.hosts == 0 else 1

    # ---------------------------------------------------- wildcard regexes
    def wildcard_constraints(self) -> dict[str, str]:
        """Regexes that make every path pattern unambiguous (no '/' inside a value)."""
        def alternation(names: Iterable[str]) -> str:
            names = sorted(set(names), key=len, reverse=True)
            # "(?!)" never matches: a rule with no configured names is unreachable
            return "|".join(re.escape(n) for n in names) or "(?!)"

        return {
            "dataset": r"[^/]+",
            "partitioner": alternation(self.partitioners),
            "method": alternation(self.methods),
            "experiment": alternation(self.experiments),
            "topology": r"h[0-9]+x[0-9]+",
            "seed": r"[0-9]+",
            "trainer": alternation(ONE_PROCESS_TRAINERS),
            # a table or figure of a report batch is made by the batch's rule alone
            "table": alternation(set(self.tables) - self.batched_outputs("table")),
            "figure": alternation(set(self.figures) - self.batched_outputs("figure")),
        }


def _parse_datasets(entry: Any) -> tuple[list[str], dict[str, dict]]:
    """Top-level ``datasets``: names, and the specs of those imported from files.

    Accepts a list of names and one-key mappings ``{name: {from, format, ...}}``, or
    one mapping ``name -> spec`` (null for a named dataset).
    """
    items: list[tuple[str, dict | None]] = []
    if isinstance(entry, dict):
        items = list(entry.items())
    for item in entry if isinstance(entry, list) else []:
        items += list(item.items()) if isinstance(item, dict) else [(item, None)]
    names: list[str] = []
    files: dict[str, dict] = {}
    for name, spec in items:
        names.append(name)
        if spec is None:
            continue
        if name in files and files[name] != spec:
            raise CdfgnnError(f"datasets.{name}: defined twice, as {files[name]} and {spec}")
        files[name] = dict(spec)
    return _unique(names), files


def _named(check, where: str):
    """Run ``check()``; a CdfgnnError it raises is prefixed with the config key."""
    try:
        return check()
    except CdfgnnError as exc:
        raise CdfgnnError(f"{where}: {exc}") from None


def _unique(items: list) -> list:
    seen: dict = {}
    for it in items:
        seen.setdefault(it, None)
    return list(seen)
