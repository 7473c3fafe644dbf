"""One-process sampling baselines of CoFree Table 2: Cluster-GCN and GraphSAINT.

Both train on induced subgraphs of the whole graph, one optimiser step per subgraph,
and evaluate by exact full-graph inference (as the neighbour-sampling trainer in
:mod:`cdfgnn.train.oracle`). Everything is vectorised NumPy; the model and loss are
the engine's.

* ``cluster-gcn`` (Chiang et al., KDD 2019): METIS splits the vertices into ``C``
  clusters; each step takes ``clusters_per_batch`` random clusters (each cluster once
  per epoch) and trains on their induced subgraph, between-cluster edges of the chosen
  clusters included ("stochastic multiple partitions"). Normalisation inside the
  subgraph uses the subgraph's degrees; the loss is the mean over its training
  vertices. ``C`` is chosen so that a batch holds about ``batch_size`` vertices.
* ``graphsaint`` (Zeng et al., ICLR 2020): each step samples a subgraph with the
  ``node`` sampler (``batch_size`` vertices drawn with probability proportional to
  degree, with replacement, then de-duplicated) or the ``rw`` sampler (``batch_size``
  uniform training roots, random walks of ``walk_length`` steps) and trains on the
  induced subgraph with GraphSAINT's normalisation, estimated once by pre-sampling:
  vertex counts ``C_v`` and arc counts ``C_{u,v}`` over ``N`` subgraphs give the
  loss weight ``N / C_v`` and the aggregator weight ``1 / alpha_{u,v}`` with
  ``alpha_{u,v} = C_{u,v} / C_v`` on the global-degree normalised adjacency, so the
  subgraph's loss and aggregation are unbiased estimates of the full graph's.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator

import numpy as np
import torch

from cdfgnn.arrays import ranges
from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.models.propagate import FullGraphPropagator, Propagator, SparseMatrix, norm_values
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.loop import LocalData, LoopResult, TrainPart, loss_sum
from cdfgnn.train.backward import backward
from cdfgnn.train.optim import Adam
from cdfgnn.train.oracle import end_sampled_epoch, full_graph_data, one_thread, result_dict
from cdfgnn.train.worker import model_for

SAINT_SAMPLERS = ("node", "rw")
#: pre-sample until every vertex is expected to be seen this many times (GraphSAINT's
#: rule of thumb), with at most this many subgraphs
SAINT_COVERAGE = 50
SAINT_MAX_PRESAMPLE = 400


# ---------------------------------------------------------------- subgraphs
def induced_subgraph(graph: Graph, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of the subgraph induced by sorted ``nodes`` (local ids), and the global arc
    id of every kept arc (to look up per-arc statistics)."""
    g2l = np.full(graph.num_nodes, -1, dtype=np.int64)
    g2l[nodes] = np.arange(nodes.size, dtype=np.int64)
    lo = graph.indptr[nodes]
    counts = graph.indptr[nodes + 1] - lo
    arcs = ranges(lo, counts)
    cols = g2l[graph.indices[arcs]]
    keep = cols >= 0
    rows = np.repeat(np.arange(nodes.size, dtype=np.int64), counts)[keep]
    indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nodes.size), out=indptr[1:])
    return indptr, cols[keep], arcs[keep]


class SubgraphPropagator(Propagator):
    """An induced subgraph (rows = columns = ``nodes``); ``arc_scale`` multiplies each
    arc of the normalised adjacency (GraphSAINT's 1 / alpha)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray,
                 row_deg: np.ndarray, col_deg: np.ndarray, arc_scale: np.ndarray | None = None):
        super().__init__(indptr, indices, row_deg, col_deg, nodes.size)
        self.arc_scale = arc_scale
        self.input_ids = torch.from_numpy(nodes)

    def matrix(self, norm: str) -> SparseMatrix:
        key = (self.view.key, norm)
        if key not in self._mats:
            v = self.view
            vals = norm_values(norm, v.row_deg, v.col_deg, v.indptr, v.indices)
            if self.arc_scale is not None:
                vals = vals * self.arc_scale
            self._mats[key] = SparseMatrix(v.indptr, v.indices, vals, (v.num_out, v.num_in))
        return self._mats[key]


# ---------------------------------------------------------------- the shared loop
Batch = tuple[np.ndarray, Propagator, torch.Tensor | None]   # nodes, propagator, loss weights


def _train_subgraphs(graph: Graph, cfg: TrainConfig,
                     batches: Callable[[int, np.random.Generator], Iterator[Batch]]) -> dict:
    """One optimiser step per subgraph; loss = weighted sum over the subgraph's training
    vertices / their number (weights None) or / the global training count (weights)."""
    model = model_for(cfg, graph)
    opt = Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    full = FullGraphPropagator(graph.indptr, graph.indices)
    data = full_graph_data(graph)
    x, y, train = data.x, data.y, data.train
    n_train = int(graph.train.sum())
    res = LoopResult()
    for epoch in range(cfg.epochs):
        rng = np.random.default_rng([cfg.seed, epoch, 17])
        model.train()
        t0, c0 = time.perf_counter(), time.thread_time()
        total, steps = torch.zeros((), dtype=torch.float64), 0
        for b, (nodes, prop, weight) in enumerate(batches(epoch, rng)):
            idx = torch.from_numpy(nodes)
            batch = LocalData(x, y[idx], train[idx], data.val, data.test, n_train,
                              graph.multilabel)
            count = int(batch.train.sum()) if weight is None else n_train
            if count == 0:
                continue
            model.epoch = epoch * 1_000_003 + b  # a fresh dropout mask per step
            out = model(x[idx], prop)
            loss = loss_sum(out, batch, weight) / count
            opt.zero_grad()
            backward(loss)
            opt.step()
            total += loss.detach().double()
            steps += 1
        end_sampled_epoch(res, model, TrainPart(full, data), cfg, epoch, (t0, c0),
                          total / max(steps, 1), steps)
    res.final_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return result_dict(res)


# ---------------------------------------------------------------- Cluster-GCN
def cluster_count(num_nodes: int, batch_size: int, clusters_per_batch: int) -> int:
    """Clusters so that ``clusters_per_batch`` of them hold about ``batch_size`` vertices."""
    c = int(round(num_nodes * clusters_per_batch / max(batch_size, 1)))
    return int(min(max(c, clusters_per_batch), num_nodes))


@one_thread
def train_cluster_gcn(graph: Graph, cfg: TrainConfig) -> dict:
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    q = cfg.clusters_per_batch
    c = cluster_count(graph.num_nodes, cfg.batch_size, q)
    clusters = partition_graph(graph, "metis", Topology(1, c), seed=cfg.seed).assignment
    order = np.argsort(clusters, kind="stable")
    bounds = np.searchsorted(clusters[order], np.arange(c + 1))

    def batches(epoch: int, rng: np.random.Generator) -> Iterator[Batch]:
        perm = rng.permutation(c)
        for start in range(0, c, q):
            chosen = perm[start: start + q]
            nodes = np.sort(order[ranges(bounds[chosen], bounds[chosen + 1] - bounds[chosen])])
            indptr, indices, _ = induced_subgraph(graph, nodes)
            deg = np.diff(indptr)
            yield nodes, SubgraphPropagator(indptr, indices, nodes, deg, deg), None

    return _train_subgraphs(graph, cfg, batches)


# ---------------------------------------------------------------- GraphSAINT
def saint_sample(graph: Graph, sampler: str, budget: int, walk_length: int,
                 rng: np.random.Generator, roots_from: np.ndarray) -> np.ndarray:
    """Sorted vertex set of one GraphSAINT subgraph."""
    if sampler == "node":
        deg = graph.degrees().astype(np.float64)
        prob = deg / deg.sum() if deg.sum() > 0 else None
        return np.unique(rng.choice(graph.num_nodes, size=budget, p=prob))
    if sampler == "rw":
        cur = rng.choice(roots_from, size=budget)
        seen = [cur]
        deg = graph.degrees()
        for _ in range(walk_length):
            d = deg[cur]
            step = graph.indptr[cur] + (rng.random(cur.size) * np.maximum(d, 1)).astype(np.int64)
            cur = np.where(d > 0, graph.indices[np.minimum(step, graph.indices.size - 1)], cur)
            seen.append(cur)
        return np.unique(np.concatenate(seen))
    raise CdfgnnError(f"unknown GraphSAINT sampler {sampler!r}; valid: {', '.join(SAINT_SAMPLERS)}")


def saint_norms(graph: Graph, sampler: str, budget: int, walk_length: int, seed: int,
                roots_from: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(C_v per vertex, C_{u,v} per arc, number of pre-sampled subgraphs N)."""
    rng = np.random.default_rng([seed, 991])
    node_c = np.zeros(graph.num_nodes, dtype=np.float64)
    arc_c = np.zeros(graph.indices.size, dtype=np.float64)
    n, seen = 0, 0
    while seen < SAINT_COVERAGE * graph.num_nodes and n < SAINT_MAX_PRESAMPLE:
        nodes = saint_sample(graph, sampler, budget, walk_length, rng, roots_from)
        _, _, arcs = induced_subgraph(graph, nodes)
        node_c[nodes] += 1
        arc_c[arcs] += 1
        n += 1
        seen += nodes.size
    return node_c, arc_c, n


@one_thread
def train_graphsaint(graph: Graph, cfg: TrainConfig) -> dict:
    sampler, budget, walk = cfg.saint_sampler, cfg.batch_size, cfg.walk_length
    if sampler not in SAINT_SAMPLERS:
        raise CdfgnnError(f"unknown GraphSAINT sampler {sampler!r}; "
                          f"valid: {', '.join(SAINT_SAMPLERS)}")
    roots = np.flatnonzero(graph.train)
    if roots.size == 0:
        roots = np.arange(graph.num_nodes)
    node_c, arc_c, n = saint_norms(graph, sampler, budget, walk, cfg.seed, roots)
    deg = graph.degrees()
    row = graph.row_of_arcs()
    per_step = max(float(node_c.sum()) / max(n, 1), 1.0)
    steps = max(int(np.ceil(graph.num_nodes / per_step)), 1)

    def batches(epoch: int, rng: np.random.Generator) -> Iterator[Batch]:
        for _ in range(steps):
            nodes = saint_sample(graph, sampler, budget, walk, rng, roots)
            indptr, indices, arcs = induced_subgraph(graph, nodes)
            # alpha_{u,v} = C_{u,v} / C_v for the arc (v <- u) aggregated into v
            alpha = arc_c[arcs] / np.maximum(node_c[row[arcs]], 1.0)
            scale = 1.0 / np.maximum(alpha, 1.0 / n)
            lam = np.maximum(node_c[nodes], 1.0) / n
            weight = torch.from_numpy((1.0 / lam).astype(np.float32))
            yield nodes, SubgraphPropagator(indptr, indices, nodes, deg[nodes], deg[nodes],
                                            scale), weight

    return _train_subgraphs(graph, cfg, batches)


SAMPLING_TRAINERS = {"cluster-gcn": train_cluster_gcn, "graphsaint": train_graphsaint}
