"""benchmarks/gpu_check.sh: on a machine without a GPU it stops within 60 s, saying so,
with exit status 3 and nothing written; its card -> profile table names real profiles."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the check would run")
def test_gpu_check_stops_without_a_gpu(tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(out)],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no CUDA GPU here" in proc.stdout
    assert not out.exists()


def test_gpu_check_maps_cards_to_registered_profiles():
    from cdfgnn.pricing.hardware import registered

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    profiles = registered()
    assert all(p in profiles for _, p in mod.CARD_PROFILES)
    assert mod.card_profile("NVIDIA H200") == "h200"
    assert mod.card_profile("NVIDIA H100 80GB HBM3") == "h100"
    assert mod.card_profile("Tesla T4") == "t4"
    assert mod.card_profile("Some Future GPU") is None


def _gpu_check(monkeypatch):
    monkeypatch.setenv("GPU_CHECK_DEVICE", "cpu")
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_community_order_renumbers_the_same_graph_with_its_blocks_together(monkeypatch):
    """The kernel stage's community order: the same graph (degrees and edges carried by
    the renumbering), its arcs far shorter in memory than in the twin's own numbering."""
    import numpy as np

    from cdfgnn.data.datasets import get_graph

    mod = _gpu_check(monkeypatch)
    g = get_graph("synth-reddit", scale="small", seed=0)
    new_id = mod.community_ids("synth-reddit", g.num_nodes)
    assert np.array_equal(np.sort(new_id), np.arange(g.num_nodes))
    indptr, indices = mod.renumbered(g, new_id)
    src = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    old_pairs = np.sort(new_id[src] * g.num_nodes + new_id[g.indices])
    new_src = np.repeat(np.arange(g.num_nodes), np.diff(indptr))
    assert np.array_equal(np.sort(new_src * g.num_nodes + indices), old_pairs)
    span_before = np.abs(src - g.indices).mean()
    span_after = np.abs(new_src - indices).mean()
    assert span_after < 0.5 * span_before, (span_before, span_after)
    assert mod.community_ids("cora", g.num_nodes) is None


def test_kernel_stage_reports_the_community_order_rows(monkeypatch, tmp_path):
    """A CPU trial of the stage (GPU_CHECK_DEVICE=cpu): one row per width, priced like the
    twin's own order (the model sees no storage order)."""
    import json

    mod = _gpu_check(monkeypatch)
    monkeypatch.setattr(mod, "SCALE", "tiny")
    monkeypatch.setattr(mod, "WIDTHS", (8,))
    from cdfgnn.data.datasets import get_graph

    g = get_graph(mod.DATASET, scale="tiny", seed=0)
    report = mod.Report(tmp_path, "h100")
    gen = torch.Generator()
    gen.manual_seed(0)
    mod.stage_community_order(report, g, torch.device("cpu"), gen)
    rows = [json.loads(line) for line in (tmp_path / "gpu_check.jsonl").read_text().splitlines()]
    assert [r["what"].endswith(", community order") for r in rows] == [True]
    assert rows[0]["measured_s"] > 0 and rows[0]["predicted_s"] > 0
    assert rows[0]["nnz"] == len(g.indices)
