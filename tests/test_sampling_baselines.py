"""Cluster-GCN and GraphSAINT one-process trainers: they learn, their normalisation is
GraphSAINT's, the sampled subgraphs are induced subgraphs, bad input is one line."""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training
from cdfgnn.train.sampling_baselines import (cluster_count, induced_subgraph, saint_norms,
                                             saint_sample)


def _cfg(**kw):
    base = dict(dataset=None, epochs=12, warmup=1, hidden=32, workers=1, hosts=1,
                model="sage", batch_size=80, lr=0.02)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("trainer,extra", [("cluster-gcn", {}),
                                           ("graphsaint", {"saint_sampler": "rw"}),
                                           ("graphsaint", {"saint_sampler": "node"})])
def test_sampling_baselines_learn(graph_file, trainer, extra, tmp_path):
    rec = run_training(_cfg(graph=graph_file, trainer=trainer, out=str(tmp_path / "r.json"),
                            **extra))  # the record validates against the schema
    ep = rec["epochs"]
    assert ep[0]["batches"] > 1  # several steps per epoch
    assert ep[-1]["loss"] < 0.8 * ep[0]["loss"]
    # five classes, homophilous features: far above chance (0.2), like full-graph training
    ref = run_training(_cfg(graph=graph_file, trainer="full-graph"))
    assert ep[-1]["test"] > 0.5
    assert ep[-1]["test"] > ref["epochs"][-1]["test"] - 0.15


def test_induced_subgraph(small_graph):
    nodes = np.sort(np.random.default_rng(0).choice(small_graph.num_nodes, 60, replace=False))
    indptr, indices, arcs = induced_subgraph(small_graph, nodes)
    row = small_graph.row_of_arcs()
    inside = np.isin(row, nodes) & np.isin(small_graph.indices, nodes)
    assert np.array_equal(np.sort(arcs), np.flatnonzero(inside))
    local_rows = np.repeat(np.arange(nodes.size), np.diff(indptr))
    assert np.array_equal(nodes[local_rows], row[arcs])
    assert np.array_equal(nodes[indices], small_graph.indices[arcs])


def test_saint_normalisation_counts(small_graph):
    roots = np.flatnonzero(small_graph.train)
    node_c, arc_c, n = saint_norms(small_graph, "rw", 20, 2, 0, roots)
    assert n > 10 and node_c.max() <= n
    # an arc is sampled only with both endpoints: C_{u,v} <= min(C_u, C_v)
    row = small_graph.row_of_arcs()
    assert (arc_c <= np.minimum(node_c[row], node_c[small_graph.indices])).all()
    # arc counts are symmetric (induced subgraphs hold both arcs)
    rev = {(int(a), int(b)): c for a, b, c in zip(row, small_graph.indices, arc_c)}
    assert all(rev[(b, a)] == c for (a, b), c in rev.items())
    walk = saint_sample(small_graph, "rw", 20, 2, np.random.default_rng(1), roots)
    assert np.all(np.diff(walk) > 0) and walk.size <= 60


def test_cluster_count_and_bad_input(graph_file):
    assert cluster_count(1000, 100, 5) == 50
    assert cluster_count(10, 1000, 5) == 5
    with pytest.raises(CdfgnnError, match=r"unknown --saint-sampler 'edge'; valid: node, rw"):
        run_training(_cfg(graph=graph_file, trainer="graphsaint", saint_sampler="edge"))
    with pytest.raises(CdfgnnError, match=r"--clusters-per-batch must be >= 1, got 0"):
        run_training(_cfg(graph=graph_file, trainer="cluster-gcn", clusters_per_batch=0))
