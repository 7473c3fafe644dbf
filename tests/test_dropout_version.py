"""The dropout mask version travels with every run record, and reports refuse to mix versions."""
from __future__ import annotations

import json

import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.models.dropout import DROPOUT_VERSION
from cdfgnn.report.aggregate import load_runs
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import validate_record
from cdfgnn.train.run import run_training


def test_record_carries_dropout_version(tmp_path, small_graph):
    path = tmp_path / "g.npz"
    small_graph.save(path)
    rec = run_training(TrainConfig(graph=str(path), dataset=None, trainer="full-graph",
                                   epochs=2, dropout=0.5, hidden=8))
    assert rec["model"] == {"dropout": 0.5, "dropout_version": DROPOUT_VERSION,
                            "dtype": "float32"}
    validate_record(rec)
    bad = {**rec, "model": {"dropout": 0.5, "dropout_version": 0}}
    with pytest.raises(Exception, match="0 is less than the minimum"):
        validate_record(bad)


def _write(folder, name, dropout, version):
    rec = {"status": "complete", "config": {"dropout": dropout}, "epochs": [{"epoch": 0}]}
    if version is not None:
        rec["model"] = {"dropout": dropout, "dropout_version": version}
    (folder / name).write_text(json.dumps(rec))


def test_reports_refuse_mixed_dropout_versions(tmp_path):
    _write(tmp_path, "old.json", 0.5, None)          # before the field: version 1
    _write(tmp_path, "new.json", 0.5, 1)
    _write(tmp_path, "nodrop.json", 0.0, 7)          # no dropout: the version is irrelevant
    assert len(load_runs([str(tmp_path)])) == 3
    _write(tmp_path, "next.json", 0.3, 2)
    with pytest.raises(CdfgnnError, match=r"mix dropout mask versions v1 .* v2"):
        load_runs([str(tmp_path)])
