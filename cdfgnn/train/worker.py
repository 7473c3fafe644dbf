"""One distributed rank: build its book, model and strategy, run the shared epoch loop."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from cdfgnn.data.graph import Graph
from cdfgnn.methods import build_strategy
from cdfgnn.models import GNN
from cdfgnn.partition.base import Partitioning
from cdfgnn.partition.book import PartitionBook, build_books
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.loop import LocalData, run_epochs
from cdfgnn.train.propagators import make_propagator
from cdfgnn.train.record import peak_rss_mb


@dataclass
class RankJob:
    """Inputs of every rank. The thread backend passes objects (shared, read-only);
    the process backend passes file paths so nothing large is pickled."""

    cfg: TrainConfig
    graph: Graph | None = None
    graph_path: str | None = None
    partitioning: Partitioning | None = None
    partition_path: str | None = None
    books: list[PartitionBook] | None = None


def local_data(graph: Graph, book: PartitionBook, rows: np.ndarray) -> LocalData:
    owned = book.owned_nodes
    return LocalData(
        x=torch.from_numpy(graph.x[rows]),
        y=torch.from_numpy(graph.y[owned]),
        train=torch.from_numpy(graph.train[owned]),
        val=torch.from_numpy(graph.val[owned]),
        test=torch.from_numpy(graph.test[owned]),
        num_train_global=int(graph.train.sum()),
        multilabel=graph.multilabel,
    )


def model_for(cfg: TrainConfig, graph: Graph):
    return GNN(cfg.model, graph.num_features, cfg.hidden, graph.num_classes, cfg.layers,
               cfg.dropout, cfg.seed)


def rank_main(comm, job: RankJob) -> dict:
    cfg = job.cfg
    graph = job.graph if job.graph is not None else Graph.load(job.graph_path)
    if job.books is not None:
        book = job.books[comm.rank]
    else:
        part = job.partitioning or Partitioning.load(job.partition_path)
        book = build_books(graph, part, [comm.rank])[0]
    strategy = build_strategy(cfg.method, cfg.method_params)
    strategy.setup(comm, book)
    prop = make_propagator(book, strategy)
    rows = book.owned_nodes if book.kind == "edge" else book.local_nodes
    data = local_data(graph, book, rows)
    model = model_for(cfg, graph)
    res = run_epochs(model, prop, data, epochs=cfg.epochs, lr=cfg.lr,
                     weight_decay=cfg.weight_decay, comm=comm, strategy=strategy,
                     eval_every=cfg.eval_every)
    return {
        "rank": comm.rank,
        "epochs": res.epochs,
        "times": [t.as_dict() for t in res.times],
        "traffic": res.traffic,
        "final_state": res.final_state if comm.rank == 0 else None,
        "peak_rss_mb": peak_rss_mb(),
        "local_rows": book.num_local,
        "owned_rows": book.num_owned,
    }


def thread_job(cfg: TrainConfig, graph: Graph, part: Partitioning) -> RankJob:
    return RankJob(cfg, graph=graph, partitioning=part, books=build_books(graph, part))
