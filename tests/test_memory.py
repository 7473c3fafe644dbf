"""The memory guard (cdfgnn/train/memory.py): estimates, budgets, fast failure."""
from __future__ import annotations

import time

import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.train import memory
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


@pytest.mark.parametrize("text,expected", [("16GiB", 16 * 1024 ** 3), ("512M", 512e6),
                                           ("2.5G", 2.5e9), (1000, 1000), ("64 KiB", 65536)])
def test_parse_bytes(text, expected):
    assert memory.parse_bytes(text) == int(expected)


@pytest.mark.parametrize("text", ["lots", "-1G", "0", "3 parsecs"])
def test_parse_bytes_rejects_nonsense(text):
    with pytest.raises(CdfgnnError, match="memory size"):
        memory.parse_bytes(text)


def test_estimate_grows_with_workers_and_width(small_graph):
    base = TrainConfig(dataset=None, workers=2, hidden=16)
    wide = TrainConfig(dataset=None, workers=2, hidden=256)
    many = TrainConfig(dataset=None, workers=8, hidden=16, backend="process")
    e = memory.estimate(base, small_graph)
    assert memory.estimate(wide, small_graph).total > e.total
    assert memory.estimate(many, small_graph).parts["graph"] == 8 * e.parts["graph"]


def test_estimate_is_near_the_measured_peak(tmp_path, small_graph):
    """The recorded estimate and the measured peak are of the same order (a guard, not
    a profiler: the process's own interpreter and torch dominate on a tiny graph)."""
    path = tmp_path / "g.npz"
    small_graph.save(path)
    rec = run_training(TrainConfig(graph=str(path), dataset=None, workers=2, epochs=2,
                                   hidden=16, partitioner="metis"))
    assert 0 < rec["summary"]["estimated_memory_mb"] < rec["summary"]["peak_memory_mb"]


def test_impossible_budget_fails_fast_with_both_numbers(tmp_path, small_graph, capsys):
    """The check runs before partitioning and training: the run stops within seconds
    (timed in-process, so interpreter start-up on a busy machine does not count)."""
    from cdfgnn.cli import main

    path = tmp_path / "g.npz"
    small_graph.save(path)
    out = tmp_path / "run.json"
    t0 = time.perf_counter()
    code = main(["train", "--graph", str(path), "--workers", "4", "--hosts", "2",
                 "--memory-budget", "1KiB", "--out", str(out)])
    assert time.perf_counter() - t0 < 5.0
    assert code == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "--memory-budget (1.0 KiB)" in err
    assert not out.exists()
