"""One distributed rank: build its parts (book, strategy, data), run the shared epoch loop.

A rank normally trains one part of the partitioning. With a communication-free
method it may hold several (``P / W`` consecutive parts on each of ``W`` ranks);
their gradients accumulate before the all-reduce, which is mathematically the same
as one part per rank (CoFree-GNN, arXiv 2308.03209, simulates 256 parts by gradient accumulation).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cdfgnn.comm.launcher import preload_in_ranks
from cdfgnn.data.graph import Graph
from cdfgnn.methods import build_strategy
from cdfgnn.methods.base import RankContext
from cdfgnn.models import GNN
from cdfgnn.models.propagate import FullGraphPropagator
from cdfgnn.partition.base import Partitioning
from cdfgnn.partition.book import PartitionBook, build_books
from cdfgnn.partition.locality import arc_share, combine
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.loop import run_epochs
from cdfgnn.train.parts import LocalData, TrainPart, full_graph_data, metric_counts
from cdfgnn.train.propagators import make_propagator
from cdfgnn.train.record import device_peak_mb, peak_rss_mb, reset_device_peak

# the process backend's ranks run this module: their forkserver loads it once for them
preload_in_ranks("cdfgnn.train.rank_preload")


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
    drop_arcs: np.ndarray | None = None         # the method's prepare() mask, if any
    drop_arcs_path: str | None = None


def stage_files(cfg: TrainConfig, graph: Graph, part: Partitioning,
                folder: str | Path) -> tuple[str, str]:
    """Process ranks load the run's inputs from files (nothing large is pickled): the
    graph (unless ``cfg.graph`` names its file already) and the partitioning, written
    to ``folder``; returns (graph path, partition path)."""
    gpath = cfg.graph or str(Path(folder) / "graph.npz")
    if not cfg.graph:
        graph.save(gpath)
    ppath = str(Path(folder) / "part.npz")
    part.save(ppath)
    return gpath, ppath


def load_inputs(job) -> tuple[Graph, Partitioning]:
    """A rank's graph and partitioning: the objects a job carries (ranks of this
    process), else loaded from its files (:func:`stage_files`)."""
    graph = job.graph if job.graph is not None else Graph.load(job.graph_path)
    return graph, job.partitioning or Partitioning.load(job.partition_path)


def parts_of(rank: int, world_size: int, num_parts: int) -> list[int]:
    """The parts rank ``rank`` trains: a contiguous block of ``num_parts / world_size``."""
    k = num_parts // world_size
    return list(range(rank * k, (rank + 1) * k))


def local_data(graph: Graph, book: PartitionBook, device: torch.device | None = None,
               dtype: torch.dtype | None = None) -> LocalData:
    """Inputs and labels of a part's rows (edge-cut: owned rows; vertex-cut: every replica),
    on ``device`` (default CPU), features in ``dtype`` (default: the graph's float32)."""
    rows = book.local_nodes[: book.adj_rows]
    return LocalData(
        x=torch.from_numpy(graph.x[rows]),
        y=torch.from_numpy(graph.y[rows]),
        train=torch.from_numpy(graph.train[rows]),
        val=torch.from_numpy(graph.val[rows]),
        test=torch.from_numpy(graph.test[rows]),
        num_train_global=int(graph.train.sum()),
        multilabel=graph.multilabel,
        owned=book.num_owned,
    ).to(device, dtype)


def model_for(cfg: TrainConfig, graph: Graph, device: torch.device | None = None):
    """The model, initialised in float32 on the CPU (bit-identical weights everywhere, in
    every dtype: a float64 run starts from the float32 initial weights), then moved to
    ``device`` and cast to the run's ``dtype``."""
    model = GNN(cfg.model, graph.num_features, cfg.hidden, graph.num_classes, cfg.layers,
                cfg.dropout, cfg.seed, precompute_first_layer=cfg.precompute_first_layer,
                heads=cfg.heads)
    return model.to(device=device, dtype=cfg.torch_dtype)


def rank_device(comm) -> torch.device:
    """The device of a rank: its communicator's (cuda:r for the process backend on
    cuda, cuda:LOCAL_RANK under torchrun, the current GPU for thread ranks)."""
    return torch.device(getattr(comm, "device", None) or "cpu")


def build_part(comm, cfg: TrainConfig, graph: Graph, book: PartitionBook,
               partitioning: Partitioning | None = None) -> TrainPart:
    """Strategy, propagator and data of one part on this rank (``partitioning``, when
    given, is read-only in ``ctx.partitioning``: global replica statistics). A setup
    that fails is closed before the error leaves."""
    strategy = build_strategy(cfg.method, cfg.method_params)
    device, dtype = rank_device(comm), cfg.torch_dtype
    dims = (graph.num_features, *[cfg.hidden] * (cfg.layers - 1), graph.num_classes)
    try:
        strategy.setup(RankContext(comm, book, graph, cfg.seed, cfg.epochs, part=book.rank,
                                   device=device, model=cfg.model, dims=dims,
                                   dropout=float(cfg.dropout), partitioning=partitioning,
                                   dtype=dtype))
        return TrainPart(make_propagator(book, strategy, device, dtype),
                         local_data(graph, book, device, dtype), strategy)
    except BaseException:
        strategy.close()
        raise


def full_graph_counter(graph: Graph, device: torch.device | None = None,
                       dtype: torch.dtype | None = None):
    """Metric counts of one-process full-graph inference (evaluation of many-part runs)."""

    prop = FullGraphPropagator(graph.indptr, graph.indices, device=device, dtype=dtype)
    data = full_graph_data(graph, device, dtype)
    pre = {}

    def counts(model: GNN) -> torch.Tensor:
        prop.use_view(prop.base_view.but(training=False))
        if model.precompute_first_layer and "pre" not in pre:
            pre["pre"] = model.precompute(data.x, prop)
        return metric_counts(model(data.x, prop, pre=pre.get("pre")), data)

    return counts


def rank_main(comm, job: RankJob) -> dict:
    cfg = job.cfg
    graph, part = load_inputs(job)
    mine = parts_of(comm.rank, comm.world_size, part.num_parts)
    if job.books is not None:
        books = [job.books[p] for p in mine]
    else:
        drop = job.drop_arcs
        if drop is None and job.drop_arcs_path:
            drop = np.load(job.drop_arcs_path)
        books = build_books(graph, part, mine, drop_arcs=drop)
    device = rank_device(comm)
    reset_device_peak(device)
    parts: list[TrainPart] = []
    try:
        for b in books:
            parts.append(build_part(comm, cfg, graph, b, part))
        res = _train_parts(comm, cfg, graph, parts, device)
    finally:  # every exit path: the strategies release what setup acquired
        for p in parts:
            p.strategy.close()
    return {
        "rank": comm.rank,
        "epochs": res.epochs,
        "times": [t.as_dict() for t in res.times],
        "traffic": res.traffic,
        "ledgers": res.ledgers,
        "part_ledgers": res.part_ledgers,
        "precompute_traffic": res.precompute_traffic,
        "final_state": res.final_state if comm.rank == 0 else None,
        "peak_rss_mb": peak_rss_mb(),
        "max_memory_allocated_mb": device_peak_mb(device),
        "local_rows": sum(b.num_local for b in books),
        "owned_rows": sum(b.num_owned for b in books),
        "parts": mine,
        "sync_rows": _sync_rows(books),
        "arc_share": combine([arc_share(b.adj_indices, b.num_local, b.adj_rows)
                              for b in books], [len(b.adj_indices) + b.adj_rows for b in books]),
    }


def _train_parts(comm, cfg: TrainConfig, graph: Graph, parts: list[TrainPart], device):
    """The shared epoch loop over this rank's parts (one-process full-graph evaluation on
    rank 0 when it holds several parts or the method asks for it)."""
    lead = parts[0].strategy
    full_eval = not lead.per_part_eval and (len(parts) > 1 or bool(lead.full_graph_eval))
    return run_epochs(model_for(cfg, graph, device), parts, epochs=cfg.epochs, lr=cfg.lr,
                      weight_decay=cfg.weight_decay, comm=comm, eval_every=cfg.eval_every,
                      full_graph_eval=full_eval,
                      full_graph_counts=full_graph_counter(graph, device, cfg.torch_dtype)
                      if full_eval and comm.rank == 0 else None, count_ops=cfg.count_ops)


def _sync_rows(books: list[PartitionBook]) -> dict[str, int]:
    """Rows an exact sync sends per phase from this rank's parts (send-ratio baselines)."""
    out = {"halo": 0, "gather": 0, "scatter": 0}
    for b in books:
        sent = int(sum(i.size for i in b.send_idx))
        if b.kind == "edge":
            out["halo"] += sent
        else:
            out["gather"] += sent
            out["scatter"] += int(sum(i.size for i in b.recv_idx))
    return out


def thread_job(cfg: TrainConfig, graph: Graph, part: Partitioning,
               drop_arcs: np.ndarray | None = None) -> RankJob:
    return RankJob(cfg, graph=graph, partitioning=part, drop_arcs=drop_arcs,
                   books=build_books(graph, part, drop_arcs=drop_arcs))
