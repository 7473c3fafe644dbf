"""The Snakemake pipeline: config merging and expansion (fast) and a real smoke run (slow).

The smoke run executes configs/smoke.yaml into a temporary folder with the
repository's Snakefile and checks every target exists and is well formed: every
configured figure (PNG magic bytes) and table (readable CSV, non-empty markdown),
whichever paper added it, the built-in tables' columns, every RunRecord valid
against workflow/schemas/run.schema.json. A second invocation must find nothing
to do (resumption), and removing one run must re-run only that run and what reads it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shlex
import re
import time
from pathlib import Path

import jsonschema
import nbformat
import pandas as pd
import pytest
import yaml

from cdfgnn.cli import THEN, build_parser, build_train_config, parse_params, split_commands
from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.config import check_schema, load_config, load_schema
from cdfgnn.experiments import grid as grid_module
from cdfgnn.experiments.grid import TRAIN_FLAGS, Grid, Plugins, format_param
from cdfgnn.train.config import ONE_PROCESS_TRAINERS, TrainConfig, grid_options, train_options
from smoke import job_counts, planned_files, planned_jobs, snakemake, snakemake_side_by_side

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.json"
RUN_SCHEMA = json.loads((REPO / "workflow" / "schemas" / "run.schema.json").read_text())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CONFIGS = ["smoke", "quick", "full"]


def load(*names: str) -> dict:
    """configs/<name>.yaml with its includes, several names layered in order."""
    return load_config([REPO / "configs" / f"{n}.yaml" for n in names], root=REPO)


# ------------------------------------------------------------ config files
@pytest.mark.parametrize("name", CONFIGS)
def test_configs_validate_and_expand(name):
    cfg = load(name)
    check_schema(cfg, str(SCHEMA))
    grid = Grid(cfg)
    targets = grid.all_targets()
    for t in ("results/tables/datasets.csv", "results/tables/partitions.csv",
              "results/tables/runs.csv", "results/tables/epochs.csv",
              "results/tables/cdfgnn_table3_partitions.csv",
              "results/tables/cdfgnn_table3_partitions.md",
              "figures/engine/accuracy_vs_epoch.png", "figures/engine/epoch_time_vs_workers.png",
              "figures/partition/rf_vs_parts.png"):
        assert t in targets, (name, t)
    # issue 3: 2 hosts x {1,2,4,8} and every listed partitioner, EBV at both gammas
    t3 = cfg["partition_sets"]["cdfgnn_table3"]
    assert t3["topologies"] == ["h2x1", "h2x2", "h2x4", "h2x8"]
    presets = {cfg["partitioners"][p]["name"] for p in t3["partitioners"]}
    assert {"ebv", "hep", "dne", "ne", "hdrf", "dbh", "random", "metis"} <= presets
    gammas = {cfg["partitioners"][p].get("params", {}).get("gamma") for p in t3["partitioners"]
              if cfg["partitioners"][p]["name"] == "ebv"}
    assert gammas == {0.0, 0.1}
    # issue 2: the accuracy figure compares the oracle with exact at P = 2, 4, 8
    acc = grid.figure_inputs("engine/accuracy_vs_epoch")
    assert any("/full-graph/" in p for p in acc)
    ps = {Grid._topology(p.split("/")[5], "x").num_parts for p in acc if "/full-graph/" not in p}
    assert ps == {2, 4, 8}


def test_override_file_layers_on_quick():
    cfg = load("quick")
    merged = load("quick", "cdfgnn")
    check_schema(merged, str(SCHEMA))
    grid = Grid(merged)
    assert set(grid.all_targets()) > set(Grid(cfg).all_targets())
    assert "results/tables/cdfgnn_table3_paper.md" in grid.groups()["cdfgnn"]


def test_figure_inputs_are_only_what_it_shows():
    grid = Grid(load("quick"))
    acc = set(grid.figure_inputs("engine/accuracy_vs_epoch"))
    assert not any("/h1x1/" in p for p in acc)           # P=1 is not in the accuracy figure
    assert all(p.startswith("results/runs/engine/") for p in acc)
    rf = grid.figure_inputs("partition/rf_vs_parts")
    assert rf and all(p.endswith(".stats.json") and p.startswith("results/partitions/") for p in rf)
    # every run's partition is among all partitions (the DAG is closed)
    parts = {j.path for j in grid.all_partitions()}
    assert {r.partition.path for r in grid.all_runs() if r.partition} <= parts


def test_partitioner_params_round_trip_through_cli_args():
    grid = Grid(load("quick"))
    args = grid.partition_args("ebv-g0.1", "h2x4")
    assert "--partitioner ebv" in args and "--workers 8" in args and "--hosts 2" in args
    assert "--param gamma=0.1" in args
    for value in (0.1, 0.0, 3, True, "vol", [10, 5]):
        key, _, text = format_param("k", value).partition("=")
        assert parse_params([f"{key}={text}"], "--param") == {"k": value}


def test_train_args_map_the_experiment():
    grid = Grid(load("smoke"))
    args = grid.train_args("engine", "h2x2", "exact").split()
    assert args[args.index("--workers") + 1] == "4" and args[args.index("--hosts") + 1] == "2"
    assert args[args.index("--method") + 1] == "exact"
    assert args[args.index("--epochs") + 1] == str(load("smoke")["experiments"]["engine"]["train"]["epochs"])
    single = grid.train_args("engine", trainer="full-graph").split()
    assert single[single.index("--trainer") + 1] == "full-graph"


@pytest.mark.parametrize("mutate,needle", [
    (lambda c: c.update(scael="tiny"), "scael"),
    (lambda c: c["experiments"]["engine"]["train"].update(epohcs=3), "epohcs"),
    (lambda c: c["partition_sets"]["cdfgnn_table3"].update(topologies=["2x4"]), "topologies"),
    (lambda c: c["experiments"]["engine"].update(single=["full-grpah"]), "full-grpah"),
    (lambda c: c["experiments"]["engine"]["train"].update(epochs="many"), "epochs"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(plott="x"), "plott"),
    (lambda c: c["tables"]["cdfgnn_table3_partitions"].update(partition_sett="x"), "partition_sett"),
    (lambda c: c.update(datasets=[{"g": {"from": "e.txt"}}]), "format"),
])
def test_schema_errors_name_the_key(mutate, needle):
    cfg = load("smoke")
    mutate(cfg)
    with pytest.raises(CdfgnnError, match=needle):
        check_schema(cfg, str(SCHEMA))


@pytest.mark.parametrize("mutate,needle", [
    (lambda c: c["experiments"]["engine"].update(partitioners=["metiss"]), "metiss"),
    (lambda c: c["experiments"]["engine"].update(methods=["exactt"]), "exactt"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(experiment="nope"), "nope"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(topologies=["h4x4"]), "h4x4"),
    (lambda c: c["tables"].update(runs={"kind": "table3", "partition_set": "cdfgnn_table3"}), "reserved"),
    (lambda c: c["experiments"]["engine"]["train"].update(epochs=0), "epochs"),
    (lambda c: c["experiments"]["engine"]["train"].update(model="gnc"), "gnc"),
    (lambda c: c["methods"]["exact"].update(name="exactt"), "methods.exact.name"),
    (lambda c: c["methods"]["exact"].update(params={"codec": "zzz"}), "methods.exact.params.*zzz"),
    (lambda c: c["partitioners"]["metis"].update(name="metiss"), "partitioners.metis.name"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(plot="acc"), "accuracy-vs-epoch"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(plot="table3"), "draws a table"),
    (lambda c: c["tables"]["cdfgnn_table3_partitions"].update(kind="rf-vs-parts"), "draws a figure"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(experiments=["engine"]), "not both"),
    (lambda c: c["figures"]["engine/accuracy_vs_epoch"].update(partition_set="cdfgnn_table3"),
     "does not read 'partition_set"),
    (lambda c: c["figures"]["partition/rf_vs_parts"].pop("partition_set"), "missing 'partition_set"),
    (lambda c: c["figures"]["partition/rf_vs_parts"].update(methods=["exact"]), "filters runs"),
    (lambda c: c["figures"]["partition/rf_vs_parts"].update(params={"dataset": "synth-reddit",
                                                                     "colour": 1}), "colour"),
])
def test_cross_reference_errors_name_the_key(mutate, needle):
    cfg = load("smoke")
    mutate(cfg)
    check_schema(cfg, str(SCHEMA))
    with pytest.raises(CdfgnnError, match=needle):
        Grid(cfg)


# ---------------------------------------------------------------- includes
def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_include_merges_mappings_unions_lists_and_nests(tmp_path):
    write(tmp_path / "top.yaml", {"scale": "tiny", "datasets": ["a", "b"],
                                  "methods": {"exact": {"name": "exact"}},
                                  "include": ["frag/one.yaml", "frag/two.yaml"]})
    write(tmp_path / "frag/one.yaml", {"datasets": ["c", "a"], "scale": "tiny",
                                       "methods": {"q": {"name": "q", "params": {"bits": 4}}},
                                       "include": ["frag/deep.yaml"]})
    write(tmp_path / "frag/two.yaml", {"methods": {"q": {"params": {"rate": 0.5}}},
                                       "include": ["frag/deep.yaml"]})   # read once
    write(tmp_path / "frag/deep.yaml", {"datasets": ["d"], "data_seed": 3})
    cfg = load_config([tmp_path / "top.yaml"], root=tmp_path)
    assert cfg == {"scale": "tiny", "datasets": ["a", "b", "c", "d"], "data_seed": 3,
                   "methods": {"exact": {"name": "exact"},
                               "q": {"name": "q", "params": {"bits": 4, "rate": 0.5}}}}


@pytest.mark.parametrize("a,b", [(0.1, 0.2), ("x", "y"), (True, 1), ([1], {"k": 1}), (1, "1")])
def test_include_conflict_names_key_and_both_files(tmp_path, a, b):
    write(tmp_path / "top.yaml", {"include": ["p/one.yaml", "p/two.yaml"]})
    write(tmp_path / "p/one.yaml", {"methods": {"q": {"params": {"bits": a}}}})
    write(tmp_path / "p/two.yaml", {"methods": {"q": {"params": {"bits": b}}}})
    with pytest.raises(CdfgnnError) as exc:
        load_config([tmp_path / "top.yaml"], root=tmp_path)
    msg = str(exc.value)
    assert "methods.q.params.bits" in msg and "p/one.yaml" in msg and "p/two.yaml" in msg


def test_include_equal_values_and_int_float_agree(tmp_path):
    write(tmp_path / "top.yaml", {"x": {"lr": 1, "on": True}, "include": ["f.yaml"]})
    write(tmp_path / "f.yaml", {"x": {"lr": 1.0, "on": True}})
    assert load_config([tmp_path / "top.yaml"], root=tmp_path) == {"x": {"lr": 1, "on": True}}


@pytest.mark.parametrize("files,needle", [
    ({"top.yaml": {"include": ["a.yaml"]}, "a.yaml": {"include": ["top.yaml"]}}, "cycle"),
    ({"top.yaml": {"include": ["missing.yaml"]}}, "missing.yaml"),
    ({"top.yaml": {"include": "a.yaml"}}, "list of paths"),
    ({"top.yaml": {"include": ["a.yaml"]}, "a.yaml": ["not", "a", "mapping"]}, "a.yaml"),
])
def test_include_errors(tmp_path, files, needle):
    for name, data in files.items():
        write(tmp_path / name, data)
    with pytest.raises(CdfgnnError, match=needle):
        load_config([tmp_path / "top.yaml"], root=tmp_path)


def test_layered_file_may_change_a_value_from_a_fragment(tmp_path):
    """`--configfile smoke.yaml mine.yaml`: each file is resolved, then later files win."""
    over = write(tmp_path / "mine.yaml", {"experiments": {"engine": {"train": {"epochs": 3}}}})
    cfg = load_config([REPO / "configs" / "smoke.yaml", over], root=REPO,
                      overrides={"data_seed": 7})
    assert cfg["experiments"]["engine"]["train"]["epochs"] == 3
    assert cfg["experiments"]["engine"]["train"]["hidden"] == 16      # kept from the fragment
    assert cfg["data_seed"] == 7 and "include" not in cfg


@pytest.mark.parametrize("level", CONFIGS)
def test_every_fragment_is_included(level):
    """configs/<level>/*.yaml are the papers' fragments: each one is in its level's include list."""
    top = yaml.safe_load((REPO / "configs" / f"{level}.yaml").read_text())
    fragments = {f"configs/{level}/{p.name}" for p in (REPO / "configs" / level).glob("*.yaml")}
    assert {"configs/%s/engine.yaml" % level, "configs/%s/cdfgnn.yaml" % level} <= fragments
    assert fragments == set(top["include"])


# ------------------------------------------------------ training options
def test_train_keys_and_schema_come_from_trainconfig():
    """One TrainConfig field = one `cdfgnn train` flag (+ a grid `train:` key if marked)."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    assert {o.name for o in train_options()} == names
    assert TRAIN_FLAGS == {n: o.flag for n, o in grid_options().items()}
    assert {"epochs", "hidden", "lr", "fanouts", "timeout_s"} <= set(TRAIN_FLAGS)
    assert TRAIN_FLAGS["timeout_s"] == "--timeout"
    schema = load_schema(SCHEMA)["$defs"]
    assert set(schema["train"]["properties"]) == set(TRAIN_FLAGS)
    assert schema["train"]["additionalProperties"] is False
    assert schema["one_process_trainer"]["enum"] == list(ONE_PROCESS_TRAINERS)
    train = next(a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions
                 if a.dest == "epochs")
    assert train.option_strings == ["--epochs"] and train.type is int


def test_every_grid_train_key_reaches_trainconfig():
    """Grid.train_args -> `cdfgnn train` parser -> TrainConfig carries each value."""
    defaults = TrainConfig()
    values = {}
    for name, opt in grid_options().items():
        default = getattr(defaults, name)
        values[name] = ([3, 2] if opt.shape == "list" else default + 1 if opt.type is int
                        else default + 0.125 if opt.type is float else default)
    values["model"] = "gat"  # the one model that takes every option (--heads included)
    cfg = load("smoke")
    cfg["experiments"]["engine"]["train"] = values
    grid = Grid(cfg)
    argv = ["train", "--graph", "g.npz", *shlex.split(grid.train_args("engine", trainer="full-graph"))]
    train = build_train_config(build_parser().parse_args(argv))
    for name, value in values.items():
        assert getattr(train, name) == value, name
    assert train.trainer == "full-graph"


# ----------------------------------------------------------------- reports
def test_output_groups_are_name_prefixes():
    grid = Grid(load("smoke"))
    groups = grid.groups()
    assert groups["engine"] == ["figures/engine/accuracy_vs_epoch.png",
                                "figures/engine/epoch_time_vs_workers.png"]
    assert groups["cdfgnn"] == ["results/tables/cdfgnn_table3_partitions.csv",
                                "results/tables/cdfgnn_table3_partitions.md",
                                "results/tables/cdfgnn_claims.csv",
                                "results/tables/cdfgnn_claims.md",
                                "figures/cdfgnn/fig5_epoch_time.png",
                                "figures/cdfgnn/fig6_breakdown.png",
                                "figures/cdfgnn/fig7_send_ratio.png",
                                "figures/cdfgnn/fig8_accuracy.png"]
    assert groups["partition"] == ["figures/partition/rf_vs_parts.png"]
    with pytest.raises(CdfgnnError, match="figures.partition/rf_vs_parts.*rule"):
        grid.groups(reserved=["partition", "all"])


def test_report_args_pass_params_and_inputs():
    cfg = load("smoke")
    cfg["figures"]["partition/rf_vs_parts"]["params"] = {"dataset": "synth-reddit"}
    cfg["figures"]["partition/rf_vs_parts"]["topologies"] = ["h2x2"]
    grid = Grid(cfg)
    args = shlex.split(grid.report_args("figure", "partition/rf_vs_parts"))
    assert args[0] == "rf-vs-parts" and "--runs" not in args
    assert args[args.index("--param") + 1] == "dataset=synth-reddit"
    parts = args[args.index("--partitions") + 1: args.index("--param")]
    assert parts == grid.report_inputs("figure", "partition/rf_vs_parts")
    assert parts and all("/h2x2/" in p for p in parts)


class KindPlugins(Plugins):
    """Registries with two fake methods restricted to one partition kind."""
    KINDS = {"vonly": "vertex", "eonly": "edge"}

    def method_kind(self, name):
        return self.KINDS[name] if name in self.KINDS else super().method_kind(name)

    def check_method(self, name, params):
        if name not in self.KINDS:
            super().check_method(name, params)

    def check_run(self, options, parts):
        if options["method"] not in self.KINDS:
            super().check_run(options, parts)


def _compat_config(partitioners, methods):
    cfg = load("smoke")
    cfg["methods"].update({"vonly": {"name": "vonly"}, "eonly": {"name": "eonly"}})
    cfg["experiments"]["engine"].update(partitioners=partitioners, methods=methods)
    return cfg


# ----------------------------------------------------------------- batches
def test_batches_hold_only_what_every_reader_of_a_member_reads():
    """Runs and partitionings are batched only with files that every table and figure
    reading one of them also reads, so asking for one table or figure builds only what it
    reads; every run and partitioning is in exactly one batch of at most `batch`."""
    grid = Grid(load("smoke"))
    assert grid.batch > 1
    for batches, jobs in ((grid.run_batches(), grid.all_runs()),
                          (grid.partition_batches(), grid.all_partitions())):
        members = [m for b in batches for m in b.members]
        assert len(members) == len(set(members)) and set(members) == set(jobs)
        assert all(1 <= len(b.members) <= grid.batch for b in batches)
        assert len(batches) < len(jobs)
    batch_of = {m: b for b in grid.run_batches() + grid.partition_batches() for m in b.members}
    for out in grid.outputs():
        runs = grid.output_runs(out)
        needed = {*runs, *grid.output_partitions(out), *[r.partition for r in runs if r.partition]}
        assert {m for job in needed for m in batch_of[job].members} == needed, out.name
    # one job per file where the config does not batch
    quick = Grid(load("quick"))
    assert quick.batch == 1 and not quick.run_batches() and not quick.partition_batches()


def test_report_batches_share_a_group_and_their_inputs():
    grid = Grid(load("smoke"))
    batches = grid.report_batches()
    assert batches and len(batches) < len(grid.outputs())
    for b in batches:
        assert len(b.members) > 1 and len({o.group for o in b.members}) == 1
        assert len({tuple(grid.report_inputs(o.kind, o.name)) for o in b.members}) == 1
        assert grid.batch_outputs(b) == [p for o in b.members for p in o.paths]
        for o in b.members:   # each caption names its table or figure and its report
            assert f"**{o.name}** ({o.kind}, report ``{o.report}``)" in grid.batch_caption(b)
    # a batched table or figure is made by its batch's rule alone: the per-file rules'
    # wildcards cannot match its name
    batched = {o.name for b in batches for o in b.members}
    constraints = grid.wildcard_constraints()
    for kind, names in (("figure", grid.figures), ("table", grid.tables)):
        for name in names:
            assert bool(re.fullmatch(constraints[kind], name)) == (name not in batched), name


def test_batch_commands_are_each_files_command_chained():
    """A batch job runs, chained with --then, the `cdfgnn` command that makes each of its
    files alone (what the per-file rules run)."""
    assert grid_module.THEN == THEN
    grid = Grid(load("smoke"))
    parser = build_parser()
    for b in grid.run_batches() + grid.partition_batches() + grid.report_batches():
        commands = split_commands(shlex.split(grid.batch_commands(b)))
        assert len(commands) == len(b.members)
        assert set(grid.batch_inputs(b)) >= {a for c in commands for a in c if a.startswith("results/data/")}
        for job, argv in zip(b.members, commands):
            args = parser.parse_args(argv)
            if b.kind == "train":
                assert (args.command, args.out, args.seed, args.dataset) == (
                    "train", job.path, job.seed, job.dataset)
                assert args.partition_file == (job.partition.path if job.partition else None)
                assert args.trainer == job.trainer
                if job.method is not None:
                    assert args.method == grid.methods[job.method]["name"]
            elif b.kind == "partition":
                assert (args.out, args.stats_out, args.label, args.seed) == (
                    job.path, job.stats_path, job.partitioner, job.seed)
                assert args.workers == int(job.topology[job.topology.index("x") + 1:]) * int(
                    job.topology[1:job.topology.index("x")])
            else:
                assert (args.name, args.out, args.md_out) == (
                    job.report, job.paths[0], job.paths[1] if job.kind == "table" else None)
                assert [*(args.runs or []), *(args.partitions or [])] == grid.report_inputs(
                    job.kind, job.name)
    assert {grid.batch_gpus(b) for b in grid.run_batches()} == {0}
    grid.experiments["engine"]["train"].update(device="cuda", backend="process")
    engine = [b for b in grid.run_batches() if b.members[0].experiment == "engine"]
    assert max(grid.batch_gpus(b) for b in engine) == 8   # the P = 8 run's GPUs


def test_experiment_skips_incompatible_method_partitioner_pairs():
    grid = Grid(_compat_config(["metis", "hdrf"], ["exact", "vonly", "eonly"]), KindPlugins())
    pairs = {(r.partitioner, r.method) for r in grid.experiment_runs("engine") if r.method}
    assert pairs == {("metis", "exact"), ("hdrf", "exact"), ("hdrf", "vonly"), ("metis", "eonly")}
    fig = grid.figures["engine/epoch_time_vs_workers"]
    assert {r.method for r in grid.output_runs(fig) if r.method} == {"exact", "vonly", "eonly"}


@pytest.mark.parametrize("partitioners,methods,needle", [
    (["metis"], ["exact", "vonly"], "'vonly' needs a vertex-cut"),
    (["hdrf", "hep"], ["eonly"], "'eonly' needs a edge-cut"),
    ([], ["exact"], "'exact' has no partitioner"),
])
def test_method_without_compatible_partitioner_is_named(partitioners, methods, needle):
    with pytest.raises(CdfgnnError, match=needle):
        Grid(_compat_config(partitioners, methods), KindPlugins())


def test_datasets_from_files_give_prepare_args_and_inputs():
    for form in ([{"mygraph": {"from": "in/e.txt.gz", "format": "snap", "labels": "in/y.csv"}},
                  "synth-arxiv"],
                 {"mygraph": {"from": "in/e.txt.gz", "format": "snap", "labels": "in/y.csv"},
                  "synth-arxiv": None}):
        cfg = load("smoke")
        cfg["datasets"] = form
        check_schema(cfg, str(SCHEMA))
        grid = Grid(cfg)
        assert {"mygraph", "synth-arxiv"} <= set(grid.datasets())
        assert shlex.split(grid.prepare_args("mygraph")) == [
            "--from", "in/e.txt.gz", "--format", "snap", "--labels", "in/y.csv"]
        assert grid.dataset_files("mygraph") == ["in/e.txt.gz", "in/y.csv"]
        assert grid.prepare_args("synth-arxiv") == "--scale tiny --seed 0"
        assert grid.dataset_files("synth-arxiv") == []
    cfg["datasets"] = [{"g": {"from": "a", "format": "snap"}}, {"g": {"from": "b", "format": "snap"}}]
    with pytest.raises(CdfgnnError, match="datasets.g: defined twice"):
        Grid(cfg)


def test_notebook_is_valid():
    nb = nbformat.read(REPO / "workflow" / "notebooks" / "review.ipynb", as_version=4)
    nbformat.validate(nb)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "results" in src and "tables" in src


# ---------------------------------------------------------------- snakemake
@pytest.mark.parametrize("profile,extra", [("workstation", ["--resources", "gpu=2"]),
                                            ("slurm", [])])
def test_cluster_profiles_plan_the_smoke_run(tmp_path, profile, extra):
    """The documented profiles parse and plan every job (a dry run submits nothing)."""
    proc = snakemake("-n", "--snakefile", str(REPO / "Snakefile"), "-d", str(tmp_path),
                     "--workflow-profile", str(REPO / "profiles" / profile),
                     "--configfile", str(REPO / "configs" / "smoke.yaml"), *extra)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    grid = Grid(load("smoke"))
    assert planned_files(proc.stdout + proc.stderr) >= {
        *[r.path for r in grid.all_runs()], *grid.figure_paths()}


def test_training_jobs_declare_gpus():
    grid = Grid(load("smoke"))
    assert grid.gpus("engine") == 0
    grid.experiments["engine"]["train"]["device"] = "cuda"
    assert grid.gpus("engine") == 1
    assert grid.gpus("engine", "h2x2") == 1          # thread ranks share one GPU
    grid.experiments["engine"]["train"]["backend"] = "process"
    assert grid.gpus("engine", "h2x2") == 4          # nccl: one GPU per rank
    text = (REPO / "workflow" / "rules" / "train.smk").read_text()
    assert text.count("gpu=lambda wc: grid.gpus(wc.experiment, wc.topology, wc.method)") == 1
    assert text.count("gpu=lambda wc: grid.gpus(wc.experiment, trainer=wc.trainer)") == 1


def _train_jobs(out: str) -> list[tuple[int, str]]:
    """(gpu resource, shell command) of every `train` job of a `snakemake -n -p` run."""
    jobs = []
    for block in out.split("rule train:")[1:]:
        gpu = re.search(r"resources: .*\bgpu=(\d+)", block)
        cmd = re.search(r"Shell command: (cdfgnn train .*)", block)
        jobs.append((int(gpu.group(1)) if gpu else 0, cmd.group(1)))
    return jobs


def test_full_config_dry_run_trains_on_gpus_and_device_cpu_overrides(tmp_path):
    """configs/full.yaml: distributed jobs on the process backend with --device cuda and
    one GPU per rank; `--config device=cpu` plans the same jobs on the CPU, no GPU."""
    common = ["engine", "-n", "-p", "--cores", "16", "--snakefile", str(REPO / "Snakefile"),
              "--configfile", str(REPO / "configs" / "full.yaml")]
    (tmp_path / "gpu").mkdir()
    (tmp_path / "cpu").mkdir()
    gpu, cpu = snakemake_side_by_side([*common, "-d", str(tmp_path / "gpu")],
                                      [*common, "-d", str(tmp_path / "cpu"),
                                       "--config", "device=cpu"])
    gpu_jobs = _train_jobs(gpu.stdout)
    assert gpu_jobs
    for gpus, cmd in gpu_jobs:
        args = shlex.split(cmd.split(" > ")[0])
        workers = int(args[args.index("--workers") + 1])
        assert args[args.index("--device") + 1] == "cuda", cmd
        assert args[args.index("--backend") + 1] == "process", cmd
        assert gpus == workers, (gpus, cmd)
    cpu_jobs = _train_jobs(cpu.stdout)
    assert len(cpu_jobs) == len(gpu_jobs)
    assert all(gpus == 0 and "--device" not in cmd for gpus, cmd in cpu_jobs), cpu_jobs[:2]


def test_full_grid_keeps_cpu_only_methods_and_trainers_on_the_cpu():
    """device: cuda applies where it can run: every registered method declares cuda (the
    sampled track's too), so every distributed job runs there; a method that did not
    declare it, and the mini-batch trainers, stay on the CPU (and request no GPU); an
    experiment's own train.device wins."""
    cfg = load("full")
    assert cfg["device"] == "cuda"
    grid = Grid(cfg)
    seen = set()
    sampled = {"distdgl-metis", "distdgl-random", "rapidgnn"}
    for run in grid.all_runs():
        if run.trainer == "distributed":
            dev = grid.run_options(run).get("device", "cpu")
            cuda_ok = "cuda" in grid.plugins.method_devices(grid.methods[run.method]["name"])
            assert dev == ("cuda" if cuda_ok else "cpu"), run
            assert (grid.gpus(run.experiment, run.topology, run.method) > 0) == cuda_ok, run
            seen.add((dev, grid.methods[run.method]["name"] in sampled))
        else:
            on_gpu = run.trainer in ("full-graph",)
            assert grid.gpus(run.experiment, trainer=run.trainer) == int(on_gpu), run
    assert seen == {("cuda", False), ("cuda", True)}
    # a method declaring the CPU alone keeps its jobs on the CPU
    declared = grid.plugins.method_devices
    grid.plugins.method_devices = lambda name: ("cpu",) if name == "rapidgnn" else declared(name)
    runs = [r for r in grid.all_runs() if r.trainer == "distributed"
            and grid.methods[r.method]["name"] == "rapidgnn"]
    assert runs and all(grid.run_options(r).get("device", "cpu") == "cpu"
                        and grid.gpus(r.experiment, r.topology, r.method) == 0 for r in runs)
    grid.experiments["engine"]["train"]["device"] = "cpu"
    assert grid.gpus("engine", "h2x2", "exact") == 0
    with pytest.raises(CdfgnnError, match=r"config device: 'tpu'; valid: cpu, cuda"):
        Grid({**load("smoke"), "device": "tpu"})


def test_lint_is_clean():
    proc = snakemake("--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Lints for" not in proc.stdout + proc.stderr


def test_one_figure_builds_only_what_it_needs(tmp_path):
    """A figure asked for by file name pulls in its runs and nothing else (default config)."""
    target = "figures/engine/epoch_time_vs_workers.png"
    proc = snakemake("-n", "--cores", "2", "--snakefile", str(REPO / "Snakefile"),
                     "-d", str(tmp_path), target)
    assert proc.returncode == 0, proc.stderr[-3000:]
    grid = Grid(load("quick"))                 # no --configfile: quick.yaml is the default
    fig = grid.figures["engine/epoch_time_vs_workers"]
    runs = grid.output_runs(fig)
    dist = [r for r in runs if r.trainer == "distributed"]
    assert job_counts(proc.stdout + proc.stderr) == {
        "prepare": len({r.dataset for r in runs}), "partition_graph": len({r.partition for r in dist}),
        "train": len(dist), "train_single": len(runs) - len(dist), "figure": 1}


def test_group_target_builds_only_that_papers_outputs(tmp_path):
    """A paper adds one fragment (+ one include line); `snakemake NAME` then builds its
    tables and figures and what they read, nothing of the other papers."""
    frag = write(tmp_path / "configs" / "demo.yaml", {
        "partition_sets": {"demo_parts": {"datasets": ["synth-arxiv"], "partitioners": ["metis"],
                                            "topologies": ["h1x2", "h2x1"]}},
        "tables": {"demo_claims": {"kind": "table3", "partition_set": "demo_parts",
                                     "params": {"min_gpus_per_host": 1}}},
        "figures": {"demo/rf": {"plot": "rf-vs-parts", "partition_set": "demo_parts",
                                  "topologies": ["h2x1"]}}})
    top = write(tmp_path / "top.yaml", {"include": [str(REPO / "configs" / "smoke.yaml"), str(frag)]})
    common = ["-n", "--cores", "2", "--snakefile", str(REPO / "Snakefile")]
    grid = Grid(load_config([top], root=REPO))
    groups = ("demo", "engine")
    for group in groups:
        (tmp_path / group).mkdir()
    procs = snakemake_side_by_side(*[[*common, "-d", str(tmp_path / group), group,
                                      "--configfile", str(top)] for group in groups])
    for group, proc in zip(groups, procs):
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs = [o for o in grid.outputs() if o.group == group]
        runs = {r for o in outs for r in grid.output_runs(o)}
        parts = {j for o in outs for j in grid.output_partitions(o)} | {
            r.partition for r in runs if r.partition is not None}
        assert planned_files(proc.stdout + proc.stderr) == {
            "results/data/synth-arxiv.npz", "results/data/synth-arxiv.stats.json",
            *[p for j in parts for p in (j.path, j.stats_path)], *[r.path for r in runs],
            *[p for o in outs for p in o.paths]}, group
    assert len(parts) == 4 and len(runs) == 5     # engine: P = 1, 2, 4, 8 and the oracle


def test_dataset_from_files_is_a_prepare_input(tmp_path):
    """`datasets: [{name: {from, format, ...}}]`: prepare gets the import flags, and the
    files are inputs: missing stops the run, newer re-runs prepare."""
    # no method preset: the plan is the dataset's alone, and a config without methods
    # parses without importing them (and torch), which halves each of the four runs
    cfg = {"scale": "tiny", "partitioners": {"metis": {"name": "metis"}}, "methods": {},
           "datasets": [{"mygraph": {"from": "in/edges.txt", "format": "snap",
                                     "features": "in/x.npy"}}]}
    top = write(tmp_path / "top.yaml", cfg)
    target = "results/data/mygraph.npz"
    plan = ["-n", "-p", "--cores", "1", "--snakefile", str(REPO / "Snakefile"), target,
            "--configfile", str(top)]
    common = [*plan, "-d", str(tmp_path)]
    # the same plan where the files are missing (a folder without them) and where they
    # are, side by side
    (tmp_path / "in").mkdir()
    for f in ("edges.txt", "x.npy"):
        (tmp_path / "in" / f).write_text("0 1\n")
    (tmp_path / "bare").mkdir()
    missing, proc = snakemake_side_by_side([*plan, "-d", str(tmp_path / "bare")], common)
    assert missing.returncode != 0 and "in/edges.txt" in missing.stdout + missing.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("cdfgnn prepare --dataset mygraph --from in/edges.txt --format snap "
            "--features in/x.npy --out results/data/mygraph.npz") in proc.stdout
    # outputs newer than the files: nothing to do; then a changed file re-runs prepare
    for out in ("results/data/mygraph.npz", "results/data/mygraph.stats.json"):
        (tmp_path / out).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / out).write_text("")
    old = time.time() - 100
    for f in ("edges.txt", "x.npy"):
        os.utime(tmp_path / "in" / f, (old, old))
    proc = snakemake(*common)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]
    os.utime(tmp_path / "in" / "x.npy")
    proc = snakemake(*common)
    assert job_counts(proc.stdout + proc.stderr) == {"prepare": 1}


def test_config_typo_stops_the_run_naming_the_key(tmp_path):
    cfg = load("smoke")
    cfg["experiments"]["engine"]["train"]["hiden"] = 8
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
                     "-d", str(tmp_path), "--configfile", str(bad))
    assert proc.returncode != 0
    assert "hiden" in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


def test_bad_config_value_is_one_line_naming_the_valid_values(tmp_path):
    """`--config scale=huge`: one line naming the key, the value and the valid values."""
    proc = snakemake("-n", "--snakefile", str(REPO / "Snakefile"), "-d", str(tmp_path),
                     "--config", "scale=huge")
    assert proc.returncode == 2
    errors = [line for line in (proc.stdout + proc.stderr).splitlines()
              if "huge" in line or "Traceback" in line or "Error" in line]
    assert errors == ["cdfgnn: error: config scale: 'huge' is not valid; valid: tiny, small, "
                      "medium, or an integer >= 1"], proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
# the setup waits for the shared smoke build (conftest.py starts it with the session) where
# it is not done yet, and pytest-timeout counts setup and call together
@pytest.mark.timeout(1200)
def test_smoke_pipeline(smoke_tree):
    """The shared smoke build (conftest.py ``smoke_tree``): interrupted like Ctrl-C part way
    through, then resumed; finished files are kept, every output exists and is well formed;
    a second invocation finds nothing to do, and a lost run redoes only what reads it. (The
    report and the review notebook run as the README says: tests/test_readme_commands.py.)"""
    work, common, kept, proc = (smoke_tree.work, smoke_tree.args, smoke_tree.kept,
                                smoke_tree.resumed)
    assert len(kept) >= 4, "the interrupted run finished too few partitions"
    assert proc.returncode == 0, proc.stderr[-6000:]
    grid = Grid(load("smoke"))
    # only the jobs in flight at the interrupt (at most one per core) may be redone; a
    # batch job makes several partitionings, so count the jobs the redone files came from
    job_of = {p: b.rule for b in grid.partition_batches() for p in grid.batch_outputs(b)}
    redone = [p for p, mtime in kept.items() if p.stat().st_mtime != mtime]
    assert len({job_of.get(str(p.relative_to(work)), p) for p in redone}) <= 2, redone

    for target in grid.all_targets():
        assert (work / target).is_file(), target
    # every configured figure and table, whichever paper's fragment added it
    assert grid.figures and grid.tables
    for out in grid.outputs():
        for path in out.paths:
            data = (work / path).read_bytes()
            if path.endswith(".png"):
                assert data[:8] == PNG_MAGIC, path
            elif path.endswith(".csv"):
                assert len(pd.read_csv(work / path).columns) > 0, path
            else:
                assert path.endswith(".md") and data.decode().strip(), path

    datasets = pd.read_csv(work / "results/tables/datasets.csv")
    assert set(datasets["dataset"]) == set(grid.datasets())
    assert {"num_nodes", "num_edges", "num_features"} <= set(datasets.columns)

    parts = pd.read_csv(work / "results/tables/partitions.csv")
    assert len(parts) == len(grid.all_partitions())
    assert {"dataset", "partitioner", "topology", "rf", "edge_imbalance", "inner_max",
            "outer_max"} <= set(parts.columns)
    assert (parts["rf"] >= 1.0).all()

    runs = pd.read_csv(work / "results/tables/runs.csv")
    assert len(runs) == len(grid.all_runs())
    assert {"experiment", "dataset", "trainer", "workers", "method", "seed", "epoch_time_s",
            "modelled_epoch_time_s", "final_test"} <= set(runs.columns)
    assert (runs["epoch_time_s"] > 0).all()
    epochs = pd.read_csv(work / "results/tables/epochs.csv")
    assert len(epochs) == int(runs["epochs"].sum())  # experiments may differ in epochs
    assert {"epoch", "loss", "train", "val", "test"} <= set(epochs.columns)

    for run in grid.all_runs():
        jsonschema.validate(json.loads((work / run.path).read_text()), RUN_SCHEMA)

    t3 = pd.read_csv(work / "results/tables/cdfgnn_table3_partitions.csv")
    assert {"dataset", "partitioner", "hosts", "gpus_per_host", "inner", "outer", "rf",
            "edge_if"} <= set(t3.columns)
    assert len(t3) == len(grid.partition_set_jobs("cdfgnn_table3"))
    assert "31.08" in (work / "results/tables/cdfgnn_table3_partitions.md").read_text()

    # resumption: a second invocation has nothing to do ...
    again = snakemake(*common, "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # ... and after an interruption that left one run and the run tables/figures
    # unwritten, only that run and the files reading it are redone
    lost = next(r for r in grid.all_runs() if r.trainer == "distributed")
    paths = [lost.path, "results/tables/runs.csv", "results/tables/epochs.csv",
             *[f for f in grid.figure_paths() if f.startswith("figures/engine/")]]
    saved = {p: ((work / p).read_bytes(), (work / p).stat()) for p in paths}
    for path in paths:
        (work / path).unlink()
    try:
        again = snakemake(*common, "-n")
        # the lost run's job (with the runs batched with it) and what reads those runs
        batch = next(b.members for b in grid.run_batches() if lost in b.members)
        readers = [o for o in grid.outputs() if set(grid.output_runs(o)) & set(batch)]
        jobs = planned_jobs(again.stdout + again.stderr)
        assert planned_files(again.stdout + again.stderr) == {
            *[r.path for r in batch], "results/tables/runs.csv", "results/tables/epochs.csv",
            *[p for o in readers for p in o.paths], *paths,
            *([grid_module.CLAIMS_PAGE] if any(o.name.endswith("_claims") for o in readers
                                               if o.kind == "table") else [])}, \
            again.stdout[-3000:]
        assert sum(rule.startswith("train") for rule, _ in jobs) == 1, jobs
    finally:   # leave the shared tree complete for the next test module
        for path, (data, st) in saved.items():
            (work / path).write_bytes(data)
            os.utime(work / path, ns=(st.st_atime_ns, st.st_mtime_ns))
