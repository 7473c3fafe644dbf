"""The Snakemake pipeline: config expansion (fast) and a real smoke run (slow).

The smoke run executes configs/smoke.yaml into a temporary folder with the
repository's Snakefile and checks every target exists and is well formed: CSV
columns, PNG magic bytes, every RunRecord valid against
workflow/schemas/run.schema.json. A second invocation must find nothing to do
(resumption), and removing one run must re-run only that run and what reads it.
"""
from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import nbformat
import pandas as pd
import pytest
import yaml

from cdfgnn.cli import parse_params
from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.grid import Grid, check_schema, format_param

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.json"
RUN_SCHEMA = json.loads((REPO / "workflow" / "schemas" / "run.schema.json").read_text())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CONFIGS = ["smoke", "quick", "full"]


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run snakemake with this interpreter's environment (the `cdfgnn` script on PATH)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a snakemake (dry) run: rule -> job count."""
    counts = {}
    block = output.split("Job stats:", 1)[-1] if "Job stats:" in output else ""
    for line in block.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


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
    t3 = cfg["partition_sets"]["table3"]
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
    over = load("cdfgnn")
    merged = _merge(copy.deepcopy(cfg), over)
    check_schema(merged, str(SCHEMA))
    grid = Grid(merged)
    assert set(grid.all_targets()) > set(Grid(cfg).all_targets())


def _merge(base: dict, over: dict) -> dict:
    """Snakemake's update_config: nested dicts merge, everything else is replaced."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


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
    (lambda c: c["partition_sets"]["table3"].update(topologies=["2x4"]), "topologies"),
    (lambda c: c["experiments"]["engine"]["train"].update(epochs=0), "epochs"),
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
    (lambda c: c["tables"].update(runs={"kind": "table3", "partition_set": "table3"}), "reserved"),
])
def test_cross_reference_errors_name_the_key(mutate, needle):
    cfg = load("smoke")
    mutate(cfg)
    check_schema(cfg, str(SCHEMA))
    with pytest.raises(CdfgnnError, match=needle):
        Grid(cfg)


def test_notebook_is_valid():
    nb = nbformat.read(REPO / "workflow" / "notebooks" / "review.ipynb", as_version=4)
    nbformat.validate(nb)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "results" in src and "tables" in src


# ---------------------------------------------------------------- snakemake
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
    runs = grid.experiment_runs(fig["experiment"], fig)
    dist = [r for r in runs if r.trainer == "distributed"]
    assert job_counts(proc.stdout + proc.stderr) == {
        "prepare": len({r.dataset for r in runs}), "partition": len({r.partition for r in dist}),
        "train": len(dist), "train_single": len(runs) - len(dist), "figure": 1}


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


def interrupt_after(args: list[str], work: Path, pattern: str, count: int,
                    timeout: float = 300) -> dict[Path, float]:
    """Start snakemake, send Ctrl-C (SIGINT to its process group) once ``count`` files
    match ``pattern`` under ``work``; return those finished files with their mtimes."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if len(list(work.glob(pattern))) >= count:
                os.killpg(proc.pid, signal.SIGINT)
                break
            time.sleep(0.2)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return {p: p.stat().st_mtime for p in work.glob(pattern)}


@pytest.mark.slow
def test_smoke_pipeline(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    common = ["--snakefile", str(REPO / "Snakefile"), "-d", str(work),
              "--configfile", str(REPO / "configs" / "smoke.yaml"), "--cores", "2"]
    # interrupted like Ctrl-C part way through, then resumed: finished files are kept
    kept = interrupt_after(common, work, "results/partitions/*/*/*/*.stats.json", 4)
    assert len(kept) >= 4, "the interrupted run finished too few partitions"
    proc = snakemake(*common)
    assert proc.returncode == 0, proc.stderr[-6000:]
    # only the jobs in flight at the interrupt (at most one per core) may be redone
    redone = [p for p, mtime in kept.items() if p.stat().st_mtime != mtime]
    assert len(redone) <= 2, redone
    grid = Grid(load("smoke"))

    for target in grid.all_targets():
        assert (work / target).is_file(), target
    for png in grid.figure_paths():
        assert (work / png).read_bytes()[:8] == PNG_MAGIC, png

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
    n_epochs = load("smoke")["experiments"]["engine"]["train"]["epochs"]
    assert len(epochs) == len(runs) * n_epochs
    assert {"epoch", "loss", "train", "val", "test"} <= set(epochs.columns)

    for run in grid.all_runs():
        jsonschema.validate(json.loads((work / run.path).read_text()), RUN_SCHEMA)

    t3 = pd.read_csv(work / "results/tables/cdfgnn_table3_partitions.csv")
    assert {"dataset", "partitioner", "hosts", "gpus_per_host", "inner", "outer", "rf",
            "edge_if"} <= set(t3.columns)
    assert len(t3) == len(grid.partition_set_jobs("table3"))
    assert "31.08" in (work / "results/tables/cdfgnn_table3_partitions.md").read_text()

    # the review notebook runs on these results without recomputing anything
    nb = nbformat.read(REPO / "workflow" / "notebooks" / "review.ipynb", as_version=4)
    cwd = os.getcwd()
    try:
        os.chdir(work)
        import matplotlib
        matplotlib.use("Agg")
        ns: dict = {}
        for cell in nb.cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, "review.ipynb", "exec"), ns)
    finally:
        os.chdir(cwd)

    # resumption: a second invocation has nothing to do ...
    again = snakemake(*common, "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # ... and after an interruption that left one run and the run tables/figures
    # unwritten, only that run and the files reading it are redone
    lost = next(r for r in grid.all_runs() if r.trainer == "distributed")
    for path in [lost.path, "results/tables/runs.csv", "results/tables/epochs.csv",
                 *[f for f in grid.figure_paths() if f.startswith("figures/engine/")]]:
        (work / path).unlink()
    again = snakemake(*common, "-n")
    counts = job_counts(again.stdout + again.stderr)
    assert counts.get("train") == 1 and counts.get("runs_tables") == 1, (counts, again.stdout[-3000:])
    assert not {"prepare", "partition", "train_single", "partition_set_table"} & set(counts), counts
