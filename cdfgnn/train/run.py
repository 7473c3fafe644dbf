"""run_training: one TrainConfig in, one validated RunRecord out."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Partitioning, Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import (SCHEMA_VERSION, mean_times, peak_rss_mb, provenance,
                                 summarise_epochs, timed_slice, write_record)


def load_graph(cfg: TrainConfig) -> Graph:
    if cfg.graph:
        return Graph.load(cfg.graph)
    from cdfgnn.data.datasets import get_graph
    return get_graph(cfg.dataset, scale=cfg.scale, seed=cfg.data_seed, root=cfg.data_root)


def load_partitioning(cfg: TrainConfig, graph: Graph, topology: Topology) -> Partitioning:
    from cdfgnn.partition.api import partition_graph
    if cfg.partition_file:
        part = Partitioning.load(cfg.partition_file)
        part.check_graph(graph, cfg.partition_file)
        if part.topology != topology:
            raise CdfgnnError(f"{cfg.partition_file} was made for {part.topology.label} "
                              f"({part.num_parts} workers), not {topology.label}")
        return part
    return partition_graph(graph, cfg.partitioner, topology, seed=cfg.seed,
                           **cfg.partition_params)


def run_training(cfg: TrainConfig) -> dict[str, Any]:
    """Train as ``cfg`` says; return the RunRecord (and write it to ``cfg.out`` if set)."""
    cfg.validate()
    import cdfgnn.methods  # noqa: F401  (registers methods)
    from cdfgnn.methods.base import METHODS
    METHODS.get(cfg.method)  # unknown method: fail before any work
    graph = load_graph(cfg)
    from cdfgnn.data.stats import graph_stats
    t0 = time.perf_counter()
    if cfg.trainer == "distributed":
        body = _run_distributed(cfg, graph)
    else:
        body = _run_one_process(cfg, graph)
    config = cfg.to_dict()
    if body["partition"] is not None:  # with a partition file, the file says what made it
        config["partitioner"] = body["partition"]["method"]
        config["partition_params"] = {k: v for k, v in body["partition"]["params"].items()
                                      if k != "seed"}
    record = {
        "schema_version": SCHEMA_VERSION,
        "status": "complete",
        "config": config,
        "provenance": provenance(cfg.backend if cfg.trainer == "distributed" else "none",
                                 cfg.device),
        "graph": graph_stats(graph),
        "total_seconds": time.perf_counter() - t0,
        **body,
    }
    if cfg.out:
        write_record(record, cfg.out)
    return record


def _run_one_process(cfg: TrainConfig, graph: Graph) -> dict[str, Any]:
    from cdfgnn.train.oracle import train_full_graph, train_minibatch
    res = (train_full_graph if cfg.trainer == "full-graph" else train_minibatch)(graph, cfg)
    sl = timed_slice(cfg.epochs, cfg.warmup)
    t = mean_times(res["times"], sl)
    peak = peak_rss_mb()
    return {
        "partition": None,
        "epochs": res["epochs"],
        "ranks": [{"rank": 0, "host": 0, **t, "peak_rss_mb": peak}],
        "comm": {"per_epoch": _zero_traffic(), "by_tag": {}},
        "model_time": {"profile": None, "epoch_s": t["cpu_s"], "comm_s": [0.0],
                       "compute_s": [t["cpu_s"]]},
        "summary": {**summarise_epochs(res["epochs"]), "epoch_time_s": t["wall_s"],
                    "modelled_epoch_time_s": t["cpu_s"], "peak_memory_mb": peak,
                    "timed_epochs": len(res["times"][sl])},
    }


def _run_distributed(cfg: TrainConfig, graph: Graph) -> dict[str, Any]:
    from cdfgnn.comm.network import NetworkModel
    from cdfgnn.methods.base import METHODS
    from cdfgnn.partition.stats import partition_stats

    topology = Topology.for_workers(cfg.workers, cfg.hosts)
    part = load_partitioning(cfg, graph, topology)
    need = METHODS.get(cfg.method).partition_kind
    if need is not None and need != part.kind:
        raise CdfgnnError(f"method {cfg.method!r} needs a {need}-cut partitioning, "
                          f"partitioner {part.method!r} makes a {part.kind}-cut")
    network = NetworkModel(topology, profile=cfg.network)
    results = train_distributed(cfg, graph, part)
    return _assemble(cfg, topology, network, part, graph, results, partition_stats)


def train_distributed(cfg: TrainConfig, graph: Graph, part: Partitioning) -> list[dict]:
    """Launch ``cfg.workers`` ranks on ``cfg.backend``; per-rank results in rank order."""
    from cdfgnn.comm.launcher import launch
    from cdfgnn.train.worker import RankJob, rank_main, thread_job

    with tempfile.TemporaryDirectory(prefix="cdfgnn-run-") as tmp:
        if cfg.backend == "thread":
            job = thread_job(cfg, graph, part)
        else:  # processes load from files, so nothing large is pickled
            gpath = cfg.graph or str(Path(tmp) / "graph.npz")
            if not cfg.graph:
                graph.save(gpath)
            ppath = str(Path(tmp) / "part.npz")
            part.save(ppath)
            job = RankJob(cfg, graph_path=gpath, partition_path=ppath)
        return launch(rank_main, cfg.workers, topology=part.topology, backend=cfg.backend,
                      timeout_s=cfg.timeout_s, args=(job,), device=cfg.device)


def _mean_traffic(snapshots: list[dict], p: int) -> dict[str, dict[str, np.ndarray]]:
    """Per tag, the mean over epochs of bytes/msgs/rows sent to each destination."""
    tot: dict[str, dict[str, np.ndarray]] = {}
    for snap in snapshots:
        for tag, d in snap.items():
            t = tot.setdefault(tag, {f: np.zeros(p) for f in ("bytes", "msgs", "rows")})
            for f in t:
                t[f] += d[f]
    for t in tot.values():
        for f in t:
            t[f] /= max(len(snapshots), 1)
    return tot


def _assemble(cfg, topology, network, part, graph, results, partition_stats) -> dict[str, Any]:
    from cdfgnn.methods.base import METHODS

    p = cfg.workers
    sl = timed_slice(cfg.epochs, cfg.warmup)
    host = np.arange(p) // topology.devices_per_host
    ranks, comm_model, compute_cpu = [], [], []
    per_epoch = _zero_traffic()
    by_tag: dict[str, dict[str, float]] = {}
    rows_sent = 0.0
    for r, res in enumerate(results):
        t = mean_times(res["times"], sl)
        traffic = _mean_traffic(res["traffic"][sl], p)
        masks = {"intra": (host == host[r]) & (np.arange(p) != r), "inter": host != host[r]}
        # the cost model is linear in bytes and messages: model the mean epoch directly
        bytes_to = sum((tr["bytes"] for tr in traffic.values()), np.zeros(p))
        msgs_to = sum((tr["msgs"] for tr in traffic.values()), np.zeros(p))
        comm_model.append(float(network.comm_seconds(r, bytes_to, msgs_to)))
        compute_cpu.append(t["cpu_s"])
        for tag, tr in traffic.items():
            agg = by_tag.setdefault(tag, {"bytes": 0.0, "msgs": 0.0, "rows": 0.0})
            for cls, mask in masks.items():
                for f in ("bytes", "msgs"):
                    per_epoch[cls][f] += float(tr[f][mask].sum())
            for f in agg:
                agg[f] += float(tr[f][masks["intra"] | masks["inter"]].sum())
            if not tag.startswith(("grad", "eval")):
                rows_sent += float(tr["rows"].sum() - tr["rows"][r])
        ranks.append({"rank": r, "host": int(host[r]), **t,
                      "modelled_comm_s": comm_model[-1], "peak_rss_mb": res["peak_rss_mb"],
                      "local_rows": res["local_rows"], "owned_rows": res["owned_rows"]})
    overlap = METHODS.get(cfg.method).overlaps_compute
    modelled = network.epoch_seconds(compute_cpu, comm_model, overlap=overlap)
    epochs = results[0]["epochs"]
    return {
        "partition": {**partition_stats(graph, part), "file": cfg.partition_file},
        "epochs": epochs,
        "ranks": ranks,
        "comm": {"per_epoch": {**per_epoch, "rows_sent": rows_sent}, "by_tag": by_tag},
        "model_time": {"profile": cfg.network, "epoch_s": modelled, "comm_s": comm_model,
                       "compute_s": compute_cpu, "overlap": overlap},
        "summary": {**summarise_epochs(epochs),
                    "epoch_time_s": max(rk["wall_s"] for rk in ranks),
                    "modelled_epoch_time_s": modelled,
                    "peak_memory_mb": max(rk["peak_rss_mb"] for rk in ranks),
                    "timed_epochs": len(results[0]["times"][sl])},
    }


def _zero_traffic() -> dict[str, dict[str, float]]:
    return {"intra": {"bytes": 0.0, "msgs": 0.0}, "inter": {"bytes": 0.0, "msgs": 0.0}}
