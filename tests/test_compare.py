"""`cdfgnn compare`: ranks methods by modelled time to accuracy on one graph."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cdfgnn.cli import main
from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.compare import parse_method, rank, time_to_target


def test_parse_method_with_parameters():
    spec = parse_method("cdfgnn-cache:epsilon=0.01,adaptive=false")
    assert spec.name == "cdfgnn-cache" and spec.params == {"epsilon": 0.01, "adaptive": False}
    assert parse_method("exact").params == {}


def test_time_to_target_sums_until_the_first_epoch_reaching_it():
    epochs = [{"val": 0.1, "modelled_s": 1.0}, {"val": 0.5, "modelled_s": 2.0},
              {"val": 0.9, "modelled_s": 3.0}]
    assert time_to_target(epochs, 0.5, "modelled_s") == 3.0
    assert time_to_target(epochs, 0.95, "modelled_s") is None


def _rec(best_val, epoch_s, vals):
    return {"summary": {"modelled_epoch_time_s": epoch_s, "epoch_time_s": 2 * epoch_s,
                        "peak_memory_mb": 1.0, "final_test": vals[-1], "best_val": best_val},
            "comm": {"per_epoch": {"intra": {"bytes": 1.0}, "inter": {"bytes": 2.0}}},
            "epochs": [{"val": v, "modelled_s": epoch_s, "wall_s": 2 * epoch_s} for v in vals]}


def test_rank_orders_by_time_to_target_then_epoch_time():
    records = {"exact": _rec(0.8, 1.0, [0.5, 0.8]),
               "fast-but-inaccurate": _rec(0.5, 0.1, [0.4, 0.5]),
               "fast": _rec(0.8, 0.3, [0.4, 0.6, 0.8]),
               "broken": "failed: boom"}
    df = rank(records, {k: "metis" for k in records})
    assert list(df["method"]) == ["fast", "exact", "fast-but-inaccurate", "broken"]
    assert df.loc[0, "modelled_tta_s"] == pytest.approx(0.9)
    assert df.loc[2, "modelled_tta_s"] == "not reached"       # truly never reached
    assert df.loc[3, "status"] == "failed: boom"
    assert df.loc[0, "bytes_per_epoch"] == 3            # whole bytes beside a failed run
    assert pd.api.types.is_integer_dtype(df["bytes_per_epoch"])
    # timing only (no labels): methods that change the model's function go below
    same = {"exact": True, "fast": True, "fast-but-inaccurate": False, "broken": False}
    timing = rank(records, {k: "metis" for k in records}, timing_only=True, same=same)
    assert list(timing["method"]) == ["fast", "exact", "fast-but-inaccurate", "broken"]
    assert list(timing["final_test"][:3]) == ["timing only", "timing only",
                                              "accuracy unmeasured"]
    assert list(timing["function"][:3]) == ["= exact", "= exact", "changed"]
    assert (timing["modelled_tta_s"][:3] == "timing only").all()   # not "not reached"
    mixed = rank(records, {k: "metis" for k in records}, timing_only=True, same=same,
                 exact_first=False)
    assert list(mixed["method"][:3]) == ["fast-but-inaccurate", "fast", "exact"]
    # labelled graph with --timing-only: ranked by epoch time, the accuracy measured
    labelled = rank(records, {k: "metis" for k in records}, timing_only=True, mode="labels",
                    same=same)
    assert list(labelled["method"][:3]) == ["fast-but-inaccurate", "fast", "exact"]
    assert labelled.loc[0, "final_test"] == 0.5


def test_methods_that_change_the_function_come_from_their_declarations():
    from cdfgnn.experiments.compare import parse_method

    assert parse_method("exact").same_function_as_exact()
    assert parse_method("sar").same_function_as_exact()               # declared degenerate {}
    assert not parse_method("exact:codec=fp16").same_function_as_exact()   # quantised rows
    assert not parse_method("cofree").same_function_as_exact()         # dropped edges
    assert not parse_method("pipegcn").same_function_as_exact()        # stale rows
    assert not parse_method("rapidgnn").same_function_as_exact()       # sampling
    assert parse_method("sylvie-s:bits=32").same_function_as_exact()   # its degenerate setting


def test_printed_times_show_ties_honestly():
    from cdfgnn.experiments.compare import significant_digits, table_formats

    assert significant_digits([0.00051234, 0.00051249]) == 4
    assert significant_digits([0.0005, 0.0005]) == 3                  # a real tie stays short
    df = pd.DataFrame({"device_epoch_s": [0.000512341, 0.000512349],
                       "bytes_per_epoch": [23739152, 7], "final_test": ["timing only", 0.5]})
    fmt = table_formats(df)
    cells = [fmt["device_epoch_s"](v) for v in df["device_epoch_s"]]
    assert cells[0] != cells[1]
    assert fmt["bytes_per_epoch"](23739152) == "23739152"
    assert fmt["final_test"]("timing only") == "timing only"


def test_compare_end_to_end(tmp_path, small_graph, capsys):
    graph = tmp_path / "g.npz"
    small_graph.save(graph)
    profile = tmp_path / "slow.yaml"
    profile.write_text("intra_gbps: 1.0\ninter_gbps: 0.1\nintra_latency_s: 1.0e-5\n"
                       "inter_latency_s: 1.0e-4\n")
    out = tmp_path / "cmp"
    rc = main(["compare", "--graph", str(graph), "--workers", "4", "--hosts", "2",
               "--network", str(profile), "--epochs", "4", "--hidden", "16",
               "--methods", "exact:codec=stochastic-1", "--out-dir", str(out)])
    assert rc == 0
    df = pd.read_csv(out / "compare.csv")
    assert set(df["method"]) == {"exact", "exact:codec=stochastic-1"}  # exact always runs
    assert (df["status"] == "ok").all()
    q = df.set_index("method").loc["exact:codec=stochastic-1"]
    # 1-bit rows of width 16 and 5 plus fp16 metadata; the gradient all-reduce is unchanged
    assert q["bytes_per_epoch"] < df.set_index("method").loc["exact", "bytes_per_epoch"] / 3
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    rec = json.loads((out / "runs" / "exact.json").read_text())
    assert rec["model_time"]["profile"].endswith("slow.yaml")
    assert "| rank | method |" in capsys.readouterr().out


def test_compare_names_bad_input(tmp_path, small_graph):
    graph = tmp_path / "g.npz"
    small_graph.save(graph)
    with pytest.raises(CdfgnnError, match="unknown method 'nope'"):
        from cdfgnn.experiments.compare import compare
        compare(str(graph), workers=2, hosts=1, network="cdfgnn-table2", methods=["nope"],
                out_dir=str(tmp_path / "o"))
    with pytest.raises(CdfgnnError, match="unknown network profile 'wifi'"):
        compare(str(graph), workers=2, hosts=1, network="wifi", out_dir=str(tmp_path / "o"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("intra_gbps: 1\n")
    with pytest.raises(CdfgnnError, match="missing inter_gbps"):
        compare(str(graph), workers=2, hosts=1, network=str(bad), out_dir=str(tmp_path / "o"))


@pytest.fixture(scope="module")
def unlabelled_graph(tmp_path_factory, small_graph):
    """The small test graph as an imported edge list would be: random labels, timing only."""
    from dataclasses import replace

    g = small_graph
    path = tmp_path_factory.mktemp("unlabelled") / "g.npz"
    rng = np.random.default_rng(0)
    replace(g, x=rng.standard_normal(g.x.shape).astype(np.float32),
            y=rng.integers(0, 4, g.num_nodes), meta={**g.meta, "timing_only": True}).save(path)
    return str(path)


def test_compare_plants_labels_on_a_graph_without_them(tmp_path, unlabelled_graph, capsys):
    out = tmp_path / "cmp"
    rc = main(["compare", "--graph", unlabelled_graph, "--workers", "2", "--epochs", "3",
               "--hidden", "8", "--methods", "cofree", "--classes", "4",
               "--out-dir", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "Labels planted" in printed and "4 classes are its METIS communities" in printed
    df = pd.read_csv(out / "compare.csv")
    assert set(df["method"]) == {"exact", "cofree"}
    assert pd.to_numeric(df["final_test"]).notna().all()   # accuracy shown for every method
    assert "planted" in (out / "compare.md").read_text()
    from cdfgnn.data.graph import Graph
    planted = Graph.load(out / "graph-planted.npz")
    assert planted.meta["planted"]["classes"] == 4 and not planted.meta["timing_only"]
    assert set(np.unique(planted.y)) == {0, 1, 2, 3}


def test_compare_timing_only_marks_and_demotes(tmp_path, unlabelled_graph, capsys):
    out = tmp_path / "cmp"
    rc = main(["compare", "--graph", unlabelled_graph, "--workers", "2", "--epochs", "2",
               "--hidden", "8", "--methods", "cofree", "sar", "--timing-only",
               "--out-dir", str(out)])
    assert rc == 0
    df = pd.read_csv(out / "compare.csv")
    assert list(df["method"])[-1] == "cofree"            # changes the function: last
    row = df.set_index("method").loc["cofree"]
    assert (row["function"], row["final_test"]) == ("changed", "accuracy unmeasured")
    md = (out / "compare.md").read_text()
    assert "Timing only" in md and "not reached" not in md
    with pytest.raises(CdfgnnError, match="--classes applies"):
        from cdfgnn.experiments.compare import compare
        compare(unlabelled_graph, workers=2, hosts=1, network="cdfgnn-table2",
                methods=["exact"], timing_only=True, classes=3, out_dir=str(tmp_path / "x"))
