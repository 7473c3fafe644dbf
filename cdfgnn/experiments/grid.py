"""Pipeline configuration -> the concrete list of files to build (DESIGN.md sec. 6).

The Snakefile asks this module, never the config directly, which datasets,
partitions, runs, tables and figures exist and which command-line arguments each
job gets. That keeps the rules thin (they only call the CLI) and lets the tests
check the expansion without running Snakemake.

Config shape (validated first by ``workflow/schemas/config.schema.json``; the
cross-references between sections are checked here)::

    scale: small                     # size of the synthetic twins
    data_seed: 0                     # seed of the twin generators
    datasets: [synth-arxiv, ...]     # extra rows for results/tables/datasets.csv
    partitioners:                    # wildcard value -> registered partitioner + params
      ebv-g0.1: {name: ebv, params: {gamma: 0.1}}
    methods:                         # wildcard value -> registered method + params
      exact: {name: exact}
    experiments:                     # named training grids (cross products)
      engine: {datasets, partitioners, topologies, methods, seeds, single, train}
    partition_sets:                  # named partition grids (no training)
      table3: {datasets, partitioners, topologies, seeds, topologies_by_dataset}
    tables:  {name: {kind: table3, partition_set: table3}}
    figures: {paper/figure: {plot: <kind>, experiment | partition_set, filters...}}

File layout (the wildcards are dataset, partitioner, topology ``h{hosts}x{dph}``,
method, seed; runs add the experiment name so two grids with different model
settings never share a file)::

    results/data/{dataset}.npz, results/data/{dataset}.stats.json
    results/partitions/{dataset}/{partitioner}/{topology}/s{seed}.npz (+ .stats.json)
    results/runs/{experiment}/{dataset}/{partitioner}/{topology}/{method}/s{seed}.json
    results/runs/{experiment}/{dataset}/{trainer}/s{seed}.json   (one-process trainers)
    results/tables/{datasets,partitions,runs,epochs,<table>}.csv
    figures/{figure}.png
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from itertools import product
from typing import Any, Iterable

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology

SINGLE_TRAINERS = ("full-graph", "minibatch")
# plot kind -> what it reads: training runs or partition statistics
PLOTS = {
    "accuracy-vs-epoch": "runs",
    "epoch-time-vs-workers": "runs",
    "rf-vs-parts": "partitions",
}
TABLE_KINDS = {"table3": "partitions"}
# experiment "train" keys -> `cdfgnn train` flags (all TrainConfig fields a grid may set)
TRAIN_FLAGS = {
    "model": "--model", "layers": "--layers", "hidden": "--hidden", "dropout": "--dropout",
    "lr": "--lr", "weight_decay": "--weight-decay", "epochs": "--epochs",
    "backend": "--backend", "device": "--device", "warmup": "--warmup",
    "eval_every": "--eval-every", "timeout_s": "--timeout", "network": "--network",
    "fanouts": "--fanouts", "batch_size": "--batch-size",
}
BUILTIN_TABLES = ("datasets", "partitions", "runs", "epochs")


def check_schema(config: dict[str, Any], schema_path: str) -> None:
    """Validate ``config`` against the JSON Schema with a one-line error naming the key.

    Snakemake's own ``validate`` (called next in the Snakefile) prints the whole
    schema on failure; this message comes first and says only what is wrong where.
    """
    import json

    import jsonschema

    with open(schema_path) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    err = errors[0]
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = set(err.schema.get("properties", {}))
        unknown = sorted(set(err.instance) - known)
        raise CdfgnnError(f"config {where}: unknown key(s) {unknown}; valid: {sorted(known)}")
    raise CdfgnnError(f"config {where}: {err.message}")


def format_param(key: str, value: Any) -> str:
    """``key=value`` as `cdfgnn --param` parses it back (YAML scalars)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        text = "[" + ",".join(format_param("_", v)[2:] for v in value) + "]"
    else:
        text = str(value)
    return f"{key}={text}"


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
    trainer: str = "distributed"

    @property
    def path(self) -> str:
        base = f"results/runs/{self.experiment}/{self.dataset}"
        if self.trainer == "distributed":
            return f"{base}/{self.partitioner}/{self.topology}/{self.method}/s{self.seed}.json"
        return f"{base}/{self.trainer}/s{self.seed}.json"

    @property
    def partition(self) -> PartitionJob | None:
        if self.trainer != "distributed":
            return None
        return PartitionJob(self.dataset, self.partitioner, self.topology, self.seed)


class Grid:
    """The expanded pipeline for one (validated) config dict."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.scale = str(config.get("scale", "small"))
        self.data_seed = int(config.get("data_seed", 0))
        self.partitioners: dict[str, dict] = dict(config.get("partitioners") or {})
        self.methods: dict[str, dict] = dict(config.get("methods") or {})
        self.experiments: dict[str, dict] = dict(config.get("experiments") or {})
        self.partition_sets: dict[str, dict] = dict(config.get("partition_sets") or {})
        self.tables: dict[str, dict] = dict(config.get("tables") or {})
        self.figures: dict[str, dict] = dict(config.get("figures") or {})
        self.threads: dict[str, int] = {"prepare": 1, "partition": 1, "train": 1,
                                        **(config.get("threads") or {})}
        self._check()

    # ----------------------------------------------------------- validation
    def _check(self) -> None:
        """Cross-references the JSON Schema cannot express; errors name the key."""
        for label in self.partitioners:
            self._check_label(label, "partitioners")
        for label in self.methods:
            self._check_label(label, "methods")
        for name, exp in self.experiments.items():
            where = f"experiments.{name}"
            self._check_label(name, "experiments")
            self._refs(exp.get("partitioners", []), self.partitioners, f"{where}.partitioners", "partitioners")
            self._refs(exp.get("methods", []), self.methods, f"{where}.methods", "methods")
            for t in exp.get("topologies", []):
                self._topology(t, f"{where}.topologies")
            for tr in exp.get("single", []):
                if tr not in SINGLE_TRAINERS:
                    raise CdfgnnError(f"{where}.single: unknown trainer {tr!r}; valid: {', '.join(SINGLE_TRAINERS)}")
            for key in exp.get("train", {}):
                if key not in TRAIN_FLAGS:
                    raise CdfgnnError(f"{where}.train: unknown option {key!r}; valid: {', '.join(sorted(TRAIN_FLAGS))}")
            epochs = exp.get("train", {}).get("epochs", 1)
            if epochs < 1:
                raise CdfgnnError(f"{where}.train.epochs must be >= 1, got {epochs}")
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
        for name, tab in self.tables.items():
            where = f"tables.{name}"
            if name in BUILTIN_TABLES:
                raise CdfgnnError(f"{where}: the name is reserved for a built-in table ({', '.join(BUILTIN_TABLES)})")
            if tab["kind"] not in TABLE_KINDS:
                raise CdfgnnError(f"{where}.kind: unknown table kind {tab['kind']!r}; valid: {', '.join(TABLE_KINDS)}")
            self._refs([tab.get("partition_set")], self.partition_sets, f"{where}.partition_set", "partition_sets")
        for name, fig in self.figures.items():
            where = f"figures.{name}"
            kind = fig["plot"]
            if kind not in PLOTS:
                raise CdfgnnError(f"{where}.plot: unknown plot {kind!r}; valid: {', '.join(PLOTS)}")
            if PLOTS[kind] == "runs":
                if "experiment" not in fig:
                    raise CdfgnnError(f"{where}: plot {kind!r} needs an 'experiment'")
                self._refs([fig["experiment"]], self.experiments, f"{where}.experiment", "experiments")
                exp = self.experiments[fig["experiment"]]
                for key in ("datasets", "partitioners", "topologies", "methods", "seeds", "single"):
                    extra = [v for v in fig.get(key, []) if v not in exp.get(key, [])]
                    if extra:
                        raise CdfgnnError(f"{where}.{key}: {extra} not in experiments.{fig['experiment']}.{key}")
            else:
                if "partition_set" not in fig:
                    raise CdfgnnError(f"{where}: plot {kind!r} needs a 'partition_set'")
                self._refs([fig["partition_set"]], self.partition_sets, f"{where}.partition_set", "partition_sets")

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
    def experiment_runs(self, name: str, selection: dict | None = None) -> list[RunJob]:
        """Runs of experiment ``name``, optionally restricted by a figure's filters."""
        exp = self.experiments[name]
        sel = selection or {}

        def pick(key):
            return [v for v in exp.get(key, []) if key not in sel or v in sel[key]]

        runs = [RunJob(name, d, int(s), p, t, m)
                for d, p, t, m, s in product(pick("datasets"), pick("partitioners"),
                                             pick("topologies"), pick("methods"), pick("seeds"))]
        runs += [RunJob(name, d, int(s), trainer=tr)
                 for d, tr, s in product(pick("datasets"), pick("single"), pick("seeds"))]
        return runs

    def all_runs(self) -> list[RunJob]:
        return [r for name in self.experiments for r in self.experiment_runs(name)]

    def partition_set_jobs(self, name: str) -> list[PartitionJob]:
        ps = self.partition_sets[name]
        by_ds = ps.get("topologies_by_dataset") or {}
        jobs = []
        for d in ps.get("datasets", []):
            for p, t, s in product(ps.get("partitioners", []), by_ds.get(d, ps.get("topologies", [])),
                                   ps.get("seeds", [0])):
                jobs.append(PartitionJob(d, p, t, int(s)))
        return jobs

    def all_partitions(self) -> list[PartitionJob]:
        jobs = [r.partition for r in self.all_runs() if r.partition is not None]
        jobs += [j for name in self.partition_sets for j in self.partition_set_jobs(name)]
        return _unique(jobs)

    def datasets(self) -> list[str]:
        names = list(self.config.get("datasets") or [])
        for exp in self.experiments.values():
            names += exp.get("datasets", [])
        for ps in self.partition_sets.values():
            names += ps.get("datasets", [])
        return _unique(names)

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
        for name in self.tables:
            paths += [f"results/tables/{name}.csv", f"results/tables/{name}.md"]
        return paths

    def figure_paths(self) -> list[str]:
        return [f"figures/{name}.png" for name in self.figures]

    def all_targets(self) -> list[str]:
        return (self.table_paths() + self.figure_paths()
                + [self.dataset_path(d) for d in self.datasets()])

    # ------------------------------------------------------ per-rule inputs
    def figure_inputs(self, figure: str) -> list[str]:
        fig = self.figures[figure]
        if PLOTS[fig["plot"]] == "runs":
            return [r.path for r in self.experiment_runs(fig["experiment"], fig)]
        return [j.stats_path for j in self.partition_set_jobs(fig["partition_set"])]

    def table_inputs(self, table: str) -> list[str]:
        tab = self.tables[table]
        return [j.stats_path for j in self.partition_set_jobs(tab["partition_set"])]

    def figure_plot(self, figure: str) -> str:
        return self.figures[figure]["plot"]

    def figure_source(self, figure: str) -> str:
        """``runs`` or ``partitions``: the `cdfgnn plot` flag the inputs go to."""
        return PLOTS[self.figures[figure]["plot"]]

    def table_kind(self, table: str) -> str:
        return self.tables[table]["kind"]

    # ------------------------------------------------------- CLI arguments
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
                   method: str | None = None, trainer: str = "distributed") -> str:
        """`cdfgnn train` flags for one run, apart from the files and the seed."""
        exp = self.experiments[experiment]
        # the Graph file is given by the rule; the data seed is recorded for provenance
        args: list[str] = ["--trainer", trainer, "--data-seed", str(self.data_seed)]
        if trainer == "distributed":
            preset = self.methods[method]
            topo = Topology.parse(topology)
            args += ["--method", preset["name"], "--workers", str(topo.num_parts),
                     "--hosts", str(topo.hosts)]
            for k, v in (preset.get("params") or {}).items():
                args += ["--method-param", format_param(k, v)]
        else:
            args += ["--workers", "1", "--hosts", "1"]
        for key, value in (exp.get("train") or {}).items():
            flag = TRAIN_FLAGS[key]
            if isinstance(value, list):
                args += [flag, *map(str, value)]
            else:
                args += [flag, str(value)]
        return shlex.join(args)

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
            "trainer": alternation(SINGLE_TRAINERS),
            "table": alternation(self.tables),
            "figure": alternation(self.figures),
        }


def _unique(items: list) -> list:
    seen: dict = {}
    for it in items:
        seen.setdefault(it, None)
    return list(seen)
