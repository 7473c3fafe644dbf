"""docs/adding-a-method.md: the worked example runs exactly as documented."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, build_strategy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training

DOC = Path(__file__).resolve().parent.parent / "docs" / "adding-a-method.md"


@pytest.fixture(scope="module")
def alternate():
    """Execute the doc's module code block (registers `alternate` in this process)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "the worked example lost its python block"
    if "alternate" not in METHODS:
        exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "alternate_example"})
    return METHODS.get("alternate")


def _losses(graph_file, partitioner, **kw):
    cfg = TrainConfig(graph=graph_file, dataset=None, epochs=6, warmup=2, hidden=16, workers=4,
                      hosts=2, partitioner=partitioner, timeout_s=60, **kw)
    rec = run_training(cfg)
    return np.array([e["loss"] for e in rec["epochs"]]), rec


@pytest.mark.parametrize("partitioner", ["metis", "hdrf"])
def test_worked_example_degenerates_to_exact(alternate, graph_file, partitioner):
    ref, _ = _losses(graph_file, partitioner)
    same, _ = _losses(graph_file, partitioner, method="alternate",
                      method_params={"period": 1})
    np.testing.assert_allclose(same, ref, atol=1e-5)
    stale, rec = _losses(graph_file, partitioner, method="alternate",
                         method_params={"period": 3, "codec": "stochastic-1"})
    assert np.abs(stale - ref).max() > 1e-4
    assert rec["model_time"]["overlap"]


def test_worked_example_names_a_bad_parameter(alternate):
    with pytest.raises(CdfgnnError, match=r"parameter period=0: must be an integer >= 1"):
        build_strategy("alternate", {"period": 0})
