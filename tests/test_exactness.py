"""The exactness oracle: distributed ``exact`` training == one-process full-graph training.

Per-epoch loss and final weights within 1e-5 (float32), for GCN and GraphSAGE,
2 and 3 layers, on edge-cut (P in {1, 2, 4}, the full product) and on every vertex-cut
partitioner (P in {2, 4, 8}, a pairwise cover of model and layers), on both
communicator backends. Dropout is on in part of the grid:
masks are keyed by global vertex id, so they agree across ranks and with the oracle.
"""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.partition.api import ensure_registered, partition_graph
from cdfgnn.partition.base import PARTITIONERS, Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.oracle import train_full_graph
from cdfgnn.train.run import train_distributed

TOL = 1e-5
EPOCHS = 8

ensure_registered()
VERTEX_CUT = [n for n in PARTITIONERS.names() if PARTITIONERS.get(n).kind == "vertex"]
EDGE_CUT = [n for n in PARTITIONERS.names() if PARTITIONERS.get(n).kind == "edge"]


def topology_for(p: int) -> Topology:
    return Topology(2, p // 2) if p % 2 == 0 else Topology(1, p)


def assert_matches_oracle(graph, cfg: TrainConfig, partitioner: str, params=None) -> None:
    ref = train_full_graph(graph, cfg)
    part = partition_graph(graph, partitioner, topology_for(cfg.workers), seed=cfg.seed,
                           **(params or {}))
    res = train_distributed(cfg, graph, part)
    ref_loss = np.array([e["loss"] for e in ref["epochs"]])
    for r in res:  # every rank reports the same global loss
        loss = np.array([e["loss"] for e in r["epochs"]])
        np.testing.assert_allclose(loss, ref_loss, rtol=0, atol=TOL)
    for name, w in ref["final_state"].items():
        diff = (res[0]["final_state"][name] - w).abs().max().item()
        assert diff <= TOL, f"{name}: max |w_dist - w_oracle| = {diff:.3g}"
    assert [e["test"] for e in res[0]["epochs"]] == pytest.approx(
        [e["test"] for e in ref["epochs"]], abs=1e-12)


def cfg_for(model, layers, p, backend, dropout=0.0):
    return TrainConfig(model=model, layers=layers, hidden=16, epochs=EPOCHS, workers=p,
                       hosts=2 if p % 2 == 0 else 1, backend=backend, dropout=dropout,
                       timeout_s=60, lr=0.01)


@pytest.mark.parametrize("model", ["gcn", "sage"])
@pytest.mark.parametrize("layers", [2, 3])
@pytest.mark.parametrize("p", [1, 2, 4])
@pytest.mark.parametrize("partitioner", EDGE_CUT)
def test_edge_cut_thread(small_graph, model, layers, p, partitioner):
    assert_matches_oracle(small_graph, cfg_for(model, layers, p, "thread", dropout=0.3),
                          partitioner)


# Every vertex-cut partitioner at every P, each with two of the four (model, layers)
# pairs, alternating between partitioners so that every pair runs on half of them: a
# pairwise cover of the grid (every partitioner x P x model and partitioner x P x layers
# cell), at half the cost of the full product (P = 8 on 8 threads costs ~2 s a case).
def _vertex_cut_cases():
    for i, partitioner in enumerate(VERTEX_CUT):
        pairs = [("gcn", 2), ("sage", 3)] if i % 2 == 0 else [("gcn", 3), ("sage", 2)]
        for p in (2, 4, 8):
            for model, layers in pairs:
                yield pytest.param(model, layers, p, partitioner,
                                   id=f"{partitioner}-{p}-{layers}-{model}")


@pytest.mark.parametrize("model,layers,p,partitioner", list(_vertex_cut_cases()))
def test_vertex_cut_thread(small_graph, model, layers, p, partitioner):
    assert_matches_oracle(small_graph, cfg_for(model, layers, p, "thread",
                                               dropout=0.2 if layers == 3 else 0.0), partitioner)


# The process backend spawns real processes (~seconds each): cover each axis once.
PROCESS_CASES = (
    [("gcn", 2, p, "metis") for p in (1, 2, 4)]
    + [("sage", 3, 4, "metis"), ("gcn", 3, 2, "random-nodes" if "random-nodes" in EDGE_CUT
                                 else EDGE_CUT[0])]
    + [("gcn", 2, 4, name) for name in VERTEX_CUT]
    + [("sage", 2, 2, "ebv"), ("sage", 3, 8, "ebv")]
)


@pytest.mark.parametrize("model,layers,p,partitioner", PROCESS_CASES)
def test_process_backend(small_graph, model, layers, p, partitioner):
    assert_matches_oracle(small_graph, cfg_for(model, layers, p, "process", dropout=0.2),
                          partitioner)


def test_multilabel_exact(multilabel_graph):
    assert_matches_oracle(multilabel_graph, cfg_for("gcn", 2, 4, "thread"), "hdrf")


def test_ebv_host_term_is_still_exact(small_graph):
    assert_matches_oracle(small_graph, cfg_for("gcn", 2, 8, "thread"), "ebv", {"gamma": 0.1})


def test_backends_agree(small_graph):
    """thread and process give the same numbers within float tolerance."""
    part = partition_graph(small_graph, "metis", Topology(2, 2), seed=0)
    out = {b: train_distributed(cfg_for("sage", 2, 4, b), small_graph, part)
           for b in ("thread", "process")}
    a = [e["loss"] for e in out["thread"][0]["epochs"]]
    b = [e["loss"] for e in out["process"][0]["epochs"]]
    np.testing.assert_allclose(a, b, atol=TOL, rtol=0)
    # traffic accounting is identical
    assert out["thread"][2]["traffic"] == out["process"][2]["traffic"]


def _rank_gradients(comm, job):
    """One forward/backward on a rank; weight gradients summed over ranks."""
    from cdfgnn.train.loop import loss_sum
    from cdfgnn.train.worker import build_part, model_for

    part = build_part(comm, job.cfg, job.graph, job.books[comm.rank])
    model = model_for(job.cfg, job.graph)
    loss = loss_sum(model(part.data.x, part.prop), part.data) / part.data.num_train_global
    loss.backward()
    return {n: comm.all_reduce(p.grad.clone()) for n, p in model.named_parameters()}


@pytest.mark.parametrize("partitioner", ["metis", "hdrf"])
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_gradients_match_oracle(small_graph, partitioner, model):
    """Weight gradients of the first step, summed over ranks, equal the full-graph ones."""
    from cdfgnn.comm.launcher import launch
    from cdfgnn.models.propagate import FullGraphPropagator
    from cdfgnn.train.loop import loss_sum
    from cdfgnn.train.oracle import full_graph_data
    from cdfgnn.train.worker import model_for, thread_job

    cfg = cfg_for(model, 3, 4, "thread", dropout=0.3)
    ref_model = model_for(cfg, small_graph)
    data = full_graph_data(small_graph)
    prop = FullGraphPropagator(small_graph.indptr, small_graph.indices)
    (loss_sum(ref_model(data.x, prop), data) / data.num_train_global).backward()
    part = partition_graph(small_graph, partitioner, Topology(2, 2), seed=0)
    grads = launch(_rank_gradients, 4, topology=part.topology, backend="thread", timeout_s=60,
                   args=(thread_job(cfg, small_graph, part),))
    for name, p in ref_model.named_parameters():
        for g in grads:
            assert (g[name] - p.grad).abs().max().item() <= 1e-6, name
