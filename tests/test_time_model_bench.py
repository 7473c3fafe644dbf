"""benchmarks/time_model.py stays runnable: CSV validation, the split, a 2-row pipeline.

No full-size graph is built: the pipeline test partitions a 2,000-vertex twin.
"""
from __future__ import annotations

import csv
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("time_model_bench",
                                                  ROOT / "benchmarks" / "time_model.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


tm = _load()

TINY = [
    {"source": "test/a.csv row 1", "system": "exact (Sylvie code fp32)", "dataset": "reddit",
     "model": "gcn", "layers": "3", "hidden": "64", "gpus": "2", "hosts": "1",
     "gpu_type": "RTX 3090", "interconnect": "PCIe 4.0", "backend": "gloo",
     "epoch_s": "0.30", "comm_s": "0.20", "notes": ""},
    {"source": "test/a.csv row 2", "system": "exact (Sylvie code fp32)", "dataset": "reddit",
     "model": "graphsage", "layers": "3", "hidden": "64", "gpus": "2", "hosts": "1",
     "gpu_type": "RTX 3090", "interconnect": "PCIe 4.0", "backend": "gloo",
     "epoch_s": "0.35", "comm_s": "", "notes": ""},
]


def _write(path: Path, rows: list[dict], drop: str | None = None) -> Path:
    cols = [c for c in tm.COLUMNS if c != drop]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def test_published_csv_is_complete_and_known():
    rows = tm.read_published(tm.DEFAULT_CSV)
    assert len(rows) >= 25
    assert len({r.system for r in rows}) >= 4
    for row in rows:                       # every row resolves without the cost package
        tm.system_of(row)
        tm.dataset_of(row)
        assert row.gpu_type in tm.GPU_TYPES
        assert row.model in tm.MODELS + tm.COPY_MODELS
    assert len({r.source for r in rows}) == len(rows)


@pytest.mark.parametrize("column", ["epoch_s", "backend", "system"])
def test_missing_column_is_one_line_and_writes_nothing(tmp_path, capsys, column):
    bad = _write(tmp_path / "bad.csv", TINY, drop=column)
    cache = tmp_path / "cache"
    assert tm.main(["--published", str(bad), "--cache", str(cache), "--scale", "2000"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"missing column {column!r}" in err
    assert not cache.exists()


def test_bad_values_name_line_and_column(tmp_path):
    rows = [dict(TINY[0], epoch_s="fast"), TINY[1]]
    with pytest.raises(tm.InputError, match=r"line 2: column 'epoch_s'"):
        tm.read_published(_write(tmp_path / "x.csv", rows))
    with pytest.raises(tm.InputError, match="backend"):
        tm.read_published(_write(tmp_path / "y.csv", [dict(TINY[0], backend="mpi")]))
    with pytest.raises(tm.InputError, match="unknown system"):
        tm.system_of(tm.read_published(_write(tmp_path / "z.csv",
                                              [dict(TINY[0], system="nope")]))[0])


def test_split_ignores_the_numbers_and_covers_every_system():
    rows = tm.read_published(tm.DEFAULT_CSV)
    calib, valid = tm.split_halves(rows)
    assert abs(len(calib) - len(valid)) <= len({r.system for r in rows})
    assert {r.line for r in calib}.isdisjoint({r.line for r in valid})
    assert len(calib) + len(valid) == len(rows)
    changed = [r.__class__(**{**r.__dict__, "epoch_s": r.epoch_s * 7}) for r in rows]
    assert [r.line for r in tm.split_halves(changed)[0]] == [r.line for r in calib]
    assert {r.system for r in calib} == {r.system for r in rows}


def test_partition_counts_on_a_path():
    import numpy as np
    # path 0-1-2-3, parts [0, 0, 1, 1]: each part needs one halo row from the other
    indptr = np.array([0, 1, 3, 5, 6])
    indices = np.array([1, 0, 2, 1, 3, 2])
    stats = tm.partition_counts(indptr, indices, np.ones(4, bool), np.array([0, 0, 1, 1]), 2)
    assert stats["halo_rows"] == [[0, 1], [1, 0]]
    assert stats["inner_arcs"] == [2, 2] and stats["halo_arcs"] == [1, 1]


def test_two_row_pipeline_runs(tmp_path, capsys):
    pytest.importorskip("cdfgnn.cost.estimate", reason="needs the ledger branch's cdfgnn.cost")
    tiny = _write(tmp_path / "tiny.csv", TINY)
    cache = tmp_path / "cache"
    assert tm.main(["--published", str(tiny), "--cache", str(cache), "--scale", "2000"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"calibration: 1 rows, median ratio \d+\.\d{3}, within 2x: \d+%", out[-2])
    assert re.fullmatch(r"validation: 1 rows, median ratio \d+\.\d{3}, within 2x: \d+%", out[-1])
    # reddit's P=2 statistics, and P=8 where its published halo volume was measured
    assert sorted(p.name.split("-n")[0] for p in cache.glob("*.json")) == ["reddit-ind-p2",
                                                                           "reddit-ind-p8"]
    assert any(line.startswith("fitted constants") for line in out)
