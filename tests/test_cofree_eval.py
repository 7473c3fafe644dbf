"""CoFree's evaluation option ``eval=per-part``: each part infers on its own local graph
and the replicas' logits are averaged at the masters with the reweighting's weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.comm.launcher import launch
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import build_strategy
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.partition.book import build_books
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.per_part_eval import per_part_counts
from cdfgnn.train.run import run_training
from cdfgnn.train.worker import build_part, model_for, parts_of
from test_cofree import files  # noqa: F401  (the NE 8-part fixture; tests/ is on sys.path)

SPLITS = ("train", "val", "test")


def _cfg(**kw):
    base = dict(dataset=None, epochs=4, warmup=1, hidden=16, workers=4, hosts=1,
                partitioner="ne", method="cofree", timeout_s=60, dropout=0.0, model="sage")
    base.update(kw)
    return TrainConfig(**base)


def _series(rec, key):
    return np.array([e[key] for e in rec["epochs"]])


@pytest.mark.parametrize("params", [{}, {"reweight": "inv-rf", "dropedge_k": 3}])
def test_one_part_per_part_equals_full_graph(files, params):
    g, _, _ = files
    full = run_training(_cfg(graph=g, workers=1, dropout=0.3, method_params=params))
    per = run_training(_cfg(graph=g, workers=1, dropout=0.3,
                            method_params={**params, "eval": "per-part"}))
    for key in ("loss", *SPLITS):
        np.testing.assert_allclose(_series(per, key), _series(full, key), atol=1e-6)


def test_several_parts_differ_from_full_graph_and_send_no_training_rows(files):
    g, p, _ = files
    common = dict(graph=g, partition_file=p, dropout=0.2)
    full = run_training(_cfg(workers=2, **common))
    per = run_training(_cfg(workers=2, method_params={"eval": "per-part"}, **common))
    # training is unchanged; only the evaluation differs
    np.testing.assert_allclose(_series(per, "loss"), _series(full, "loss"), atol=1e-6)
    acc = np.stack([_series(per, k) for k in SPLITS])
    assert np.isfinite(acc).all() and (acc >= 0).all() and (acc <= 1).all()
    ref = np.stack([_series(full, k) for k in SPLITS])
    assert np.abs(acc - ref).max() > 1e-6   # cross edges are missing per part
    assert per["comm"]["per_epoch"]["rows_sent"] == 0
    assert set(per["comm"]["by_tag"]) <= {"grad_allreduce", "eval"}
    for e in per["comm"]["epochs"]:
        assert sum(e["rows"].values()) == 0
    # several parts per worker give the same evaluation as one part per worker
    eight = run_training(_cfg(workers=8, method_params={"eval": "per-part"}, **common))
    for key in ("loss", *SPLITS):
        np.testing.assert_allclose(_series(per, key), _series(eight, key), atol=1e-6)


def _rank_counts(comm, cfg, graph, part):
    books = build_books(graph, part, parts_of(comm.rank, comm.world_size, part.num_parts))
    parts = [build_part(comm, cfg, graph, b, part) for b in books]
    return per_part_counts(model_for(cfg, graph), parts, comm)


@pytest.mark.parametrize("reweight", ["dar", "none", "inv-rf"])
def test_combination_matches_a_reference(files, small_graph, reweight):
    """The engine's combination (2 ranks x 4 parts, one all_to_all) equals a by-id
    weighted average of every part's logits computed here in one process."""
    _, _, part = files
    cfg = _cfg(method_params={"reweight": reweight, "eval": "per-part"})
    got = launch(_rank_counts, 2, topology=Topology(1, 2), args=(cfg, small_graph, part))
    got = (got[0] + got[1]).numpy()
    n, c = small_graph.num_nodes, small_graph.num_classes
    acc_wo, acc_w = np.zeros((n, c)), np.zeros(n)
    model = model_for(cfg, small_graph)
    model.eval()
    rf = np.zeros(n)
    for book in build_books(small_graph, part):
        p = build_part(None, cfg, small_graph, book, part)
        view = p.strategy.local_view(p.prop.base_view.but(training=False), False)
        p.prop.use_view(view)
        with torch.no_grad():
            out = model(p.data.x, p.prop).numpy().astype(np.float64)
        w = p.strategy.weights.numpy().astype(np.float64)
        np.add.at(acc_wo, book.local_nodes, w[:, None] * out[: book.num_local])
        np.add.at(acc_w, book.local_nodes, w)
        np.add.at(rf, book.local_nodes, 1)
    assert rf.max() > 1   # replicas exist: the combination is not vacuous
    if reweight != "none":
        np.testing.assert_allclose(acc_w, 1.0, atol=1e-6)
    pred = (acc_wo / acc_w[:, None]).argmax(1)
    y = small_graph.y
    for i, split in enumerate(SPLITS):
        mask = getattr(small_graph, split)
        assert got[3 * i] == (pred[mask] == y[mask]).sum()
        assert got[3 * i + 1] == mask.sum()


def test_bad_eval_value_is_one_line():
    with pytest.raises(CdfgnnError, match=r"eval='both': valid: full-graph, per-part") as exc:
        build_strategy("cofree", {"eval": "both"})
    assert "\n" not in str(exc.value)
    assert build_strategy("cofree", {"eval": "per-part"}).per_part_eval
    assert build_strategy("cofree").full_graph_eval


def test_multilabel_per_part_eval(tmp_path, multilabel_graph):
    """Micro-F1 from combined logits: one part equals full-graph, four parts valid."""
    g = tmp_path / "ml.npz"
    multilabel_graph.save(g)
    common = dict(graph=str(g), epochs=3)
    full = run_training(_cfg(workers=1, **common))
    one = run_training(_cfg(workers=1, method_params={"eval": "per-part"}, **common))
    for key in ("loss", *SPLITS):
        np.testing.assert_allclose(_series(one, key), _series(full, key), atol=1e-6)
    four = run_training(_cfg(method_params={"eval": "per-part"}, **common))
    f1 = np.stack([_series(four, k) for k in SPLITS])
    assert np.isfinite(f1).all() and (f1 >= 0).all() and (f1 <= 1).all() and f1.max() > 0
