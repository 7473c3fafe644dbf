"""The `cdfgnn` command line: each subcommand end to end on small inputs, and bad input.

Bad input must give ``cdfgnn: error: <message naming the input>`` on stderr, exit
code 2, no traceback and no output file (docs/architecture.md, Conventions: "Failures are loud and early").
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from cdfgnn.cli import main, parse_params
from cdfgnn.errors import CdfgnnError

REPO = Path(__file__).resolve().parent.parent
RUN_SCHEMA = json.loads((REPO / "workflow" / "schemas" / "run.schema.json").read_text())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def bad(capsys, *argv: str) -> str:
    """Run a command that must fail as bad input; return its error message."""
    code, _, err = cli(capsys, *argv)
    assert code == 2, err
    assert err.startswith("cdfgnn: error: "), err
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def files(tmp_path_factory, make_graph):
    """A saved graph, an edge-cut and a vertex-cut partitioning, and two short runs."""
    d = tmp_path_factory.mktemp("cli")
    g = make_graph(n=200, seed=1)
    g.save(d / "g.npz")
    other = make_graph(n=150, seed=2)
    other.save(d / "other.npz")
    return d


# ---------------------------------------------------------------- helpers
def test_parse_params_types():
    assert parse_params(["gamma=0.1", "k=3", "flag=true", "obj=vol", "xs=[1,2]"], "--param") == {
        "gamma": 0.1, "k": 3, "flag": True, "obj": "vol", "xs": [1, 2]}
    with pytest.raises(CdfgnnError, match="KEY=VALUE"):
        parse_params(["gamma"], "--param")
    with pytest.raises(CdfgnnError, match="given twice"):
        parse_params(["a=1", "a=2"], "--param")


# ---------------------------------------------------------------- prepare
def test_prepare_writes_graph_and_stats(tmp_path, capsys):
    from cdfgnn.data.graph import Graph

    out, stats = tmp_path / "d" / "arxiv.npz", tmp_path / "d" / "arxiv.stats.json"
    code, _, err = cli(capsys, "prepare", "--dataset", "synth-arxiv", "--scale", "200",
                       "--out", out, "--stats-out", stats)
    assert code == 0, err
    g = Graph.load(out)
    row = json.loads(stats.read_text())
    assert row["dataset"] == "synth-arxiv"
    assert row["num_nodes"] == g.num_nodes == 200
    assert row["num_edges"] == g.num_edges
    assert row["num_features"] == 128


def test_prepare_unknown_dataset_lists_valid(tmp_path, capsys):
    err = bad(capsys, "prepare", "--dataset", "synth-nope", "--out", tmp_path / "x.npz")
    assert "synth-nope" in err and "synth-arxiv" in err
    assert not (tmp_path / "x.npz").exists()


# -------------------------------------------------------------- partition
@pytest.mark.parametrize("name,params", [("metis", []), ("random", []),
                                         ("ebv", ["--param", "gamma=0.1"])])
def test_partition_writes_file_and_stats(files, tmp_path, capsys, name, params):
    from cdfgnn.partition.base import Partitioning

    out, stats = tmp_path / "p.npz", tmp_path / "p.stats.json"
    code, _, err = cli(capsys, "partition", "--graph", files / "g.npz", "--partitioner", name,
                       "--workers", 4, "--hosts", 2, "--seed", 3, *params, "--label", f"{name}-x",
                       "--out", out, "--stats-out", stats)
    assert code == 0, err
    part = Partitioning.load(out)
    assert part.method == name and part.topology.label == "h2x2"
    row = json.loads(stats.read_text())
    assert row["partitioner"] == f"{name}-x" and row["algorithm"] == name
    assert row["seed"] == 3 and row["workers"] == 4 and row["num_parts"] == 4
    assert row["rf"] >= 1.0
    if params:
        assert row["params"]["gamma"] == 0.1


def test_partition_bad_input(files, tmp_path, capsys):
    out = tmp_path / "p.npz"
    err = bad(capsys, "partition", "--graph", files / "g.npz", "--partitioner", "nope",
              "--workers", 2, "--out", out)
    assert "'nope'" in err and "metis" in err and "hdrf" in err
    err = bad(capsys, "partition", "--graph", files / "g.npz", "--partitioner", "random",
              "--workers", 500, "--out", out)
    assert "500" in err and "200 vertices" in err
    err = bad(capsys, "partition", "--graph", files / "g.npz", "--partitioner", "random",
              "--workers", 3, "--hosts", 2, "--out", out)
    assert "not divisible" in err
    err = bad(capsys, "partition", "--graph", files / "missing.npz", "--partitioner", "random",
              "--workers", 2, "--out", out)
    assert "missing.npz" in err
    assert not out.exists()
    # an output path that cannot be created (its parent is a file) is named, no traceback
    (tmp_path / "afile").write_text("")
    err = bad(capsys, "partition", "--graph", files / "g.npz", "--partitioner", "random",
              "--workers", 2, "--out", tmp_path / "afile" / "p.npz")
    assert "afile" in err


def test_corrupt_graph_file_named(tmp_path, capsys, files):
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes((files / "g.npz").read_bytes()[:500])
    err = bad(capsys, "partition", "--graph", trunc, "--partitioner", "random", "--workers", 2,
              "--out", tmp_path / "p.npz")
    assert "trunc.npz" in err


# ------------------------------------------------------------------ train
@pytest.fixture(scope="module")
def runs(files, tmp_path_factory):
    """Two distributed runs (edge-cut from a file, on-the-fly vertex-cut) and the oracle."""
    d = tmp_path_factory.mktemp("runs")
    g = files / "g.npz"
    common = ["--graph", g, "--dataset", "toy", "--epochs", 4, "--warmup", 1, "--hidden", 8,
              "--layers", 2, "--seed", 0]
    assert main(["partition", "--graph", str(g), "--partitioner", "metis", "--workers", "2",
                 "--hosts", "2", "--out", str(d / "metis.npz")]) == 0
    argvs = {
        "metis": ["train", *common, "--partition", d / "metis.npz", "--method", "exact",
                  "--out", d / "runs" / "exp" / "metis.json"],
        "ebv": ["train", *common, "--partitioner", "ebv", "--partition-param", "gamma=0.1",
                "--workers", 4, "--hosts", 2, "--method", "exact",
                "--out", d / "runs" / "exp" / "ebv.json"],
        "oracle": ["train", *common, "--trainer", "full-graph",
                   "--out", d / "runs" / "exp" / "oracle.json"],
    }
    for argv in argvs.values():
        assert main([str(a) for a in argv]) == 0
    return d


def test_train_records_validate(runs):
    for name in ("metis", "ebv", "oracle"):
        rec = json.loads((runs / "runs" / "exp" / f"{name}.json").read_text())
        jsonschema.validate(rec, RUN_SCHEMA)
        assert rec["status"] == "complete" and len(rec["epochs"]) == 4
        assert rec["config"]["dataset"] == "toy"
    metis = json.loads((runs / "runs" / "exp" / "metis.json").read_text())
    # the partition file is the truth for partitioner, params and topology
    assert metis["config"]["partitioner"] == "metis"
    assert metis["config"]["workers"] == 2 and metis["config"]["hosts"] == 2
    assert metis["config"]["partition_file"].endswith("metis.npz")
    ebv = json.loads((runs / "runs" / "exp" / "ebv.json").read_text())
    assert ebv["config"]["partition_params"] == {"gamma": 0.1}
    assert ebv["partition"]["num_parts"] == 4


def test_train_bad_input(files, runs, tmp_path, capsys):
    out = tmp_path / "r.json"
    g = files / "g.npz"
    err = bad(capsys, "train", "--graph", g, "--epochs", 0, "--out", out)
    assert "--epochs" in err
    err = bad(capsys, "train", "--graph", g, "--method", "bogus", "--epochs", 1, "--out", out)
    assert "'bogus'" in err and "exact" in err
    err = bad(capsys, "train", "--graph", g, "--partitioner", "bogus", "--epochs", 1, "--out", out)
    assert "'bogus'" in err and "metis" in err
    err = bad(capsys, "train", "--dataset", "synth-bogus", "--epochs", 1, "--out", out)
    assert "synth-bogus" in err and "synth-arxiv" in err
    err = bad(capsys, "train", "--graph", g, "--workers", 999, "--epochs", 1, "--out", out)
    assert "999" in err
    # a partition file made for another graph
    err = bad(capsys, "train", "--graph", files / "other.npz", "--partition", runs / "metis.npz",
              "--epochs", 1, "--out", out)
    assert "metis.npz" in err and "graph" in err
    err = bad(capsys, "train", "--graph", g, "--partition", runs / "metis.npz", "--workers", 4,
              "--epochs", 1, "--out", out)
    assert "contradicts" in err
    err = bad(capsys, "train", "--epochs", 1, "--out", out)
    assert "--dataset" in err and "--graph" in err
    assert not out.exists()


# ------------------------------------------------------------ chained commands
def _learning(path: Path) -> tuple:
    """What a run computes (losses, metrics, traffic), not what it measured (times)."""
    rec = json.loads(path.read_text())
    return ([(e["loss"], e["train"], e["val"], e["test"]) for e in rec["epochs"]],
            rec["comm"]["by_tag"], rec["comm"]["exact_rows"])


def test_chained_runs_equal_runs_made_alone(files, runs, tmp_path, capsys):
    """`train ... --then train ...` (the pipeline's batched jobs) runs each command as if
    alone: what a run learns and sends does not depend on what ran before it in the
    process (dropout and BNS-GCN's sampling draw random numbers)."""
    common = ["train", "--graph", files / "g.npz", "--partition", runs / "metis.npz",
              "--epochs", 3, "--warmup", 1, "--hidden", 8, "--dropout", 0.3, "--seed", 1]
    chained = [*common, "--method", "exact", "--out", tmp_path / "a.json", "--then",
               *common, "--method", "bns-gcn", "--out", tmp_path / "b.json"]
    code, out, err = cli(capsys, *chained)
    assert code == 0, err
    assert len(out.strip().splitlines()) == 2          # one summary line per run
    code, _, err = cli(capsys, *common, "--method", "bns-gcn", "--out", tmp_path / "alone.json")
    assert code == 0, err
    assert _learning(tmp_path / "b.json") == _learning(tmp_path / "alone.json")
    assert json.loads((tmp_path / "a.json").read_text())["config"]["method"] == "exact"


def test_chained_commands_are_all_checked_before_the_first_runs(files, tmp_path, capsys):
    """A bad flag in a later command writes nothing (argparse ends the process with 2);
    bad input found while a command runs ends the chain there, with its one line."""
    part = ["partition", "--graph", files / "g.npz", "--partitioner", "random", "--workers", 2]
    with pytest.raises(SystemExit) as stop:
        cli(capsys, *part, "--out", tmp_path / "a.npz", "--then", *part,
            "--out", tmp_path / "b.npz", "--bogus-flag")
    assert stop.value.code == 2 and not (tmp_path / "a.npz").exists()
    assert "unrecognized arguments: --bogus-flag" in capsys.readouterr().err
    err = bad(capsys, *part, "--out", tmp_path / "a.npz", "--then", "partition", "--graph",
              tmp_path / "missing.npz", "--partitioner", "random", "--workers", 2, "--out",
              tmp_path / "b.npz", "--then", *part, "--out", tmp_path / "c.npz")
    assert "missing.npz" in err
    assert (tmp_path / "a.npz").is_file()               # made before the failing command
    assert not (tmp_path / "b.npz").exists() and not (tmp_path / "c.npz").exists()
    with pytest.raises(SystemExit):                     # an empty command is no command
        cli(capsys, *part, "--out", tmp_path / "d.npz", "--then")
    assert not (tmp_path / "d.npz").exists()


def test_no_traceback_from_console_script(tmp_path):
    """The installed entry point (as the pipeline calls it) reports bad input in one line."""
    proc = subprocess.run([sys.executable, "-m", "cdfgnn.cli", "train", "--dataset", "synth-arxiv",
                           "--epochs", "0"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["cdfgnn: error: --epochs must be >= 1, got 0"]


# -------------------------------------------------------------- aggregate
def test_aggregate_runs_tables(runs, tmp_path, capsys):
    out, ep = tmp_path / "t" / "runs.csv", tmp_path / "t" / "epochs.csv"
    code, _, err = cli(capsys, "aggregate", "--runs", runs / "runs", "--out", out, "--epochs-out", ep)
    assert code == 0, err
    df = pd.read_csv(out)
    assert len(df) == 3
    for col in ("experiment", "dataset", "trainer", "partitioner", "topology", "workers", "method",
                "seed", "epoch_time_s", "modelled_epoch_time_s", "final_test", "source"):
        assert col in df.columns, col
    assert set(df["experiment"]) == {"exp"}
    assert set(df["partitioner"].fillna("")) == {"metis", "ebv(gamma=0.1)", ""}
    assert sorted(df["workers"]) == [1, 2, 4]
    eps = pd.read_csv(ep)
    assert len(eps) == 12
    assert {"epoch", "loss", "train", "val", "test"} <= set(eps.columns)


@pytest.fixture(scope="module")
def stats_dir(files, tmp_path_factory):
    """Partition statistics of EBV (two gammas) and HDRF on 2 hosts x {1, 2} devices."""
    d = tmp_path_factory.mktemp("parts")
    for name, params in (("ebv", ["--param", "gamma=0.0"]), ("ebv", ["--param", "gamma=0.1"]),
                         ("hdrf", [])):
        for dph in (1, 2):
            label = name + "".join(params[1:])
            assert main(["partition", "--graph", str(files / "g.npz"), "--partitioner", name,
                         *params, "--workers", str(2 * dph), "--hosts", "2",
                         "--out", str(d / f"{label}-{dph}.npz"),
                         "--stats-out", str(d / f"{label}-{dph}.stats.json")]) == 0
    return d


def test_aggregate_partitions_and_table3(stats_dir, tmp_path, capsys):
    capsys.readouterr()
    code, _, err = cli(capsys, "aggregate", "--partitions", stats_dir, "--out", tmp_path / "p.csv")
    assert code == 0, err
    df = pd.read_csv(tmp_path / "p.csv")
    assert len(df) == 6 and {"rf", "edge_imbalance", "inner_max", "outer_max"} <= set(df.columns)
    code, _, err = cli(capsys, "aggregate", "--partitions", stats_dir, "--format", "table3",
                       "--out", tmp_path / "t3.csv", "--md-out", tmp_path / "t3.md")
    assert code == 0, err
    t3 = pd.read_csv(tmp_path / "t3.csv")
    assert {"EBV γ=0.0", "EBV γ=0.1", "HDRF"} == set(t3["partitioner"])
    assert "31.08" in (tmp_path / "t3.md").read_text()
    err = bad(capsys, "aggregate", "--partitions", stats_dir, "--format", "table3",
              "--out", tmp_path / "t3b.csv")
    assert "--md-out" in err


def test_aggregate_bad_input(tmp_path, capsys):
    err = bad(capsys, "aggregate", "--runs", tmp_path / "nowhere", "--out", tmp_path / "r.csv")
    assert "nowhere" in err
    (tmp_path / "junk.json").write_text("{not json")
    err = bad(capsys, "aggregate", "--runs", tmp_path / "junk.json", "--out", tmp_path / "r.csv")
    assert "junk.json" in err
    (tmp_path / "partial.json").write_text(json.dumps({"status": "running", "config": {},
                                                       "epochs": []}))
    err = bad(capsys, "aggregate", "--runs", tmp_path / "partial.json", "--out", tmp_path / "r.csv")
    assert "partial.json" in err and "complete" in err
    assert not (tmp_path / "r.csv").exists()


# ------------------------------------------------------------------- plot
@pytest.mark.parametrize("figure", ["accuracy-vs-epoch", "epoch-time-vs-workers"])
def test_plot_engine_figures(runs, tmp_path, capsys, figure):
    out = tmp_path / f"{figure}.png"
    code, _, err = cli(capsys, "plot", figure, "--runs", runs / "runs", "--out", out)
    assert code == 0, err
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_plot_needs_its_inputs(runs, tmp_path, capsys):
    err = bad(capsys, "plot", "rf-vs-parts", "--runs", runs / "runs", "--out", tmp_path / "x.png")
    assert "--partitions" in err


# ----------------------------------------------------------------- report
def test_report_runs_tables_and_figures(runs, stats_dir, tmp_path, capsys):
    code, out, err = cli(capsys, "report", "table3", "--partitions", stats_dir,
                         "--out", tmp_path / "t.csv", "--md-out", tmp_path / "t.md",
                         "--param", "min_gpus_per_host=1")
    assert code == 0, err
    assert {"EBV γ=0.0", "EBV γ=0.1", "HDRF"} == set(pd.read_csv(tmp_path / "t.csv")["partitioner"])
    md = (tmp_path / "t.md").read_text()
    assert "31.08" in md and "fewer than 1 GPUs per host" in md    # the parameter arrived
    code, _, err = cli(capsys, "report", "rf-vs-parts", "--partitions", stats_dir,
                       "--out", tmp_path / "rf.png")
    assert code == 0, err
    assert (tmp_path / "rf.png").read_bytes()[:8] == PNG_MAGIC
    code, _, err = cli(capsys, "report", "accuracy-vs-epoch", "--runs", runs / "runs",
                       "--out", tmp_path / "acc.png")
    assert code == 0, err
    assert (tmp_path / "acc.png").read_bytes()[:8] == PNG_MAGIC
    code, out, _ = cli(capsys, "report", "--list")
    assert code == 0
    for name in ("accuracy-vs-epoch", "epoch-time-vs-workers", "rf-vs-parts", "table3"):
        assert name in out
    assert "min_gpus_per_host=2" in out


@pytest.mark.parametrize("argv,needles", [
    (["report", "nope"], ["'nope'", "valid:", "table3", "rf-vs-parts"]),
    (["report", "accuracy-vs-epoch"], ["--runs", "missing"]),
    (["report", "rf-vs-parts", "--RUNS"], ["does not read --runs"]),
    (["report", "table3", "--PARTS"], ["--md-out"]),
    (["report", "rf-vs-parts", "--PARTS", "--md-out", "x.md"], ["--md-out"]),
    (["report", "table3", "--PARTS", "--md-out", "x.md", "--param", "colour=red"],
     ["colour", "min_gpus_per_host"]),
    (["plot", "table3", "--PARTS"], ["table report", "figures: accuracy-vs-epoch"]),
    (["aggregate", "--PARTS", "--format", "rf-vs-parts", "--md-out", "x.md"], ["figure report"]),
])
def test_report_bad_input(runs, stats_dir, tmp_path, capsys, argv, needles):
    argv = [a for arg in argv for a in {"--RUNS": ["--runs", runs / "runs"],
                                        "--PARTS": ["--partitions", stats_dir]}.get(arg, [arg])]
    if "--out" not in argv:
        argv += ["--out", tmp_path / "out.png"]
    err = bad(capsys, *argv)
    for needle in needles:
        assert needle in err, err
    assert not (tmp_path / "out.png").exists() and not (tmp_path / "x.md").exists()


def test_registered_report_is_run_checked_and_lazy(monkeypatch, tmp_path, capsys):
    """A plug-in report: parameters resolved, inputs loaded only when used, outputs checked."""
    from cdfgnn.report import registry as reg

    seen = {}

    def echo(inputs, params, out, md_out):
        seen.update(params=params, paths=inputs.partition_paths)
        render.write_table(pd.DataFrame({"k": [params["k"]]}), out, md_out, title="echo")

    def lazy(inputs, params, out, md_out):
        (tmp_path / "lazy.csv").write_text("a\n1\n")
        (tmp_path / "lazy.md").write_text("# lazy\n")

    from cdfgnn.report import render

    for name, reads, fn in (("test-echo", ("partitions",), echo), ("test-lazy", ("runs",), lazy),
                            ("test-silent", ("partitions",), lambda *a: None)):
        monkeypatch.setitem(reg.REPORTS._items, name, reg.ReportSpec(name, "table", reads, fn, {"k": 1}))
    (tmp_path / "junk.json").write_text("{not json")
    code, _, err = cli(capsys, "report", "test-echo", "--partitions", tmp_path / "junk.json",
                       "--param", "k=5", "--out", tmp_path / "e.csv", "--md-out", tmp_path / "e.md")
    assert code == 0, err
    assert seen["params"] == {"k": 5} and pd.read_csv(tmp_path / "e.csv")["k"].tolist() == [5]
    assert (tmp_path / "e.md").read_text().startswith("# echo")
    # the runs are never read, so the corrupt file does not matter
    code, _, err = cli(capsys, "report", "test-lazy", "--runs", tmp_path / "junk.json",
                       "--out", tmp_path / "lazy.csv", "--md-out", tmp_path / "lazy.md")
    assert code == 0, err
    with pytest.raises(RuntimeError, match="without writing"):
        reg.run_report("test-silent", str(tmp_path / "s.csv"), partitions=[str(tmp_path)],
                       md_out=str(tmp_path / "s.md"))


def test_report_discovery_is_complete_and_light():
    """Every module of cdfgnn/report/ is imported (so a paper's module registers itself)
    without importing matplotlib or torch (the Snakefile discovers reports while parsing)."""
    code = ("import json, sys, pkgutil, cdfgnn.report as pkg\n"
            "from cdfgnn.report.registry import discover\n"
            "names = discover().names()\n"
            "mods = [m.name for m in pkgutil.iter_modules(pkg.__path__)]\n"
            "print(json.dumps([names, [m for m in mods if f'cdfgnn.report.{m}' not in sys.modules],\n"
            "                  [m for m in ('matplotlib', 'torch') if m in sys.modules]]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names, not_imported, heavy = json.loads(proc.stdout)
    assert {"accuracy-vs-epoch", "epoch-time-vs-workers", "rf-vs-parts", "table3"} <= set(names)
    assert not_imported == []
    assert heavy == [], f"a report module imports {heavy} at its top level: import it inside the function"


def test_train_flags_are_the_trainconfig_fields():
    """`cdfgnn train` has one flag per TrainConfig field, typed from its annotation."""
    import dataclasses

    from cdfgnn.cli import build_parser
    from cdfgnn.train.config import TrainConfig, train_options

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    actions = {a.dest: a for a in train._actions if a.dest != "help"}
    assert set(actions) == {f.name for f in dataclasses.fields(TrainConfig)}
    for opt in train_options():
        a = actions[opt.name]
        assert a.option_strings == [opt.flag]
        assert a.default is None
    assert actions["fanouts"].nargs == "+" and actions["fanouts"].type is int
    assert actions["timeout_s"].option_strings == ["--timeout"] and actions["timeout_s"].type is float
    assert actions["partition_file"].option_strings == ["--partition"]
    assert actions["method_params"].option_strings == ["--method-param"]


# ------------------------------------------------------------------ bench
def test_bench_unknown_lists_scripts(capsys):
    err = bad(capsys, "bench", "no_such_benchmark")
    assert "no_such_benchmark" in err and "valid:" in err


# ------------------------------------------------------------------ help
def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    import re
    # unwrapped: argparse breaks lines at spaces and after hyphens ("synth-\narxiv")
    return re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(capsys.readouterr().out.split()))


def test_train_help_shows_defaults_and_valid_values(capsys):
    text = _help(capsys, "train")
    for default in ("(default: exact)", "(default: metis)", "(default: synth-arxiv)",
                    "(default: gcn)", "(default: cdfgnn-table2)", "(default: 50)",
                    "(default: thread)", "(default: cpu)", "(default: 10 10)",
                    "(default: true)"):
        assert default in text, default
    import cdfgnn.methods  # noqa: F401
    from cdfgnn.methods.base import METHODS
    for name in ("methods", "partitioners", "datasets", "models", "networks", "devices"):
        assert f"`cdfgnn list {name}`" in text, name
    assert all(m in text for m in METHODS.names())
    for value in ("ebv", "synth-reddit", "sage", "rapidgnn-chameleon", "a100-80", "x4"):
        assert value in text, value
    # where a run executes and what it is priced on are told apart
    execution, pricing = text.index("execution (where"), text.index("pricing (what")
    assert execution < text.index("--device DEVICE", execution) < pricing \
        < text.index("--devices DEVICES", pricing)


def test_every_option_of_every_command_has_help():
    from cdfgnn.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    missing = [f"{name} {'/'.join(action.option_strings) or action.dest}"
               for name, p in sub.choices.items() for action in p._actions
               if not action.help]
    assert missing == []


def test_compare_help_names_its_defaults(capsys):
    text = _help(capsys, "compare")
    for needle in ("--epochs EPOCHS epochs per method (default: 20)", "--hidden HIDDEN hidden "
                   "width (default: 64)", "--timing-only", "accuracy unmeasured",
                   "--lr LR Adam learning rate (default: 0.01)"):
        assert needle in text, needle


def test_list_prints_the_valid_names(capsys):
    code, out, _ = cli(capsys, "list", "partitioners")
    assert code == 0 and "metis" in out.split() and "ebv" in out.split()
    code, out, _ = cli(capsys, "list")
    assert code == 0 and "methods:" in out and "  exact" in out
    code, _, err = cli(capsys, "list", "gpus")
    assert code == 2 and err.count("\n") == 1 and "valid: methods" in err
