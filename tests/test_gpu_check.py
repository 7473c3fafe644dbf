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
