"""`cdfgnn compare`: ranks methods by modelled time to accuracy on one graph."""
from __future__ import annotations

import json

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
    assert pd.isna(df.loc[2, "modelled_tta_s"])
    assert df.loc[3, "status"] == "failed: boom"
    timing = rank(records, {k: "metis" for k in records}, timing_only=True)
    assert list(timing["method"][:3]) == ["fast-but-inaccurate", "fast", "exact"]
    assert (timing["final_test"][:3] == "timing only").all()


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
