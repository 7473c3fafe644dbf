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


def load_partitioning(cfg: TrainConfig, graph: Graph, topology: Topology,
                      apart: bool = False) -> Partitioning:
    """The run's partitioning: its file, or made now (``apart``: in a child process, so a
    partitioner holding the GIL does not stop this process's heartbeat)."""
    from cdfgnn.partition.api import partition_graph
    if cfg.partition_file:
        part = Partitioning.load(cfg.partition_file)
        part.check_graph(graph, cfg.partition_file)
        if part.num_parts == topology.num_parts and part.topology != topology:
            raise CdfgnnError(f"{cfg.partition_file} was made for {part.topology.label} "
                              f"({part.num_parts} workers), not {topology.label}")
        return part
    if apart:
        from cdfgnn.partition.apart import partition_apart
        return partition_apart(graph, cfg.partitioner, topology, seed=cfg.seed,
                               graph_path=cfg.graph, **cfg.partition_params)
    return partition_graph(graph, cfg.partitioner, topology, seed=cfg.seed,
                           **cfg.partition_params)


def _check_memory(cfg: TrainConfig, graph: Graph, stats: dict | None = None) -> float:
    """Stop before any work when the run's estimated peak memory exceeds the budget;
    returns the estimate in MB (recorded beside the measured peak)."""
    from cdfgnn.train import memory
    budget = memory.parse_bytes(cfg.memory_budget) if cfg.memory_budget is not None else None
    est = memory.estimate(cfg, graph, stats)
    memory.check(est, budget)
    return est.total / 2 ** 20


def run_training(cfg: TrainConfig) -> dict[str, Any]:
    """Train as ``cfg`` says; return the RunRecord (and write it to ``cfg.out`` if set).
    ``cfg.validate()`` runs the method's ``check_compatible`` before anything is loaded."""
    cfg.validate()
    cfg.check_runtime()
    from cdfgnn.train.torchrun import TorchrunSession, resolve_launcher
    launcher = resolve_launcher(cfg.launcher)
    if launcher == "torchrun" and cfg.trainer != "distributed":
        raise CdfgnnError(f"--launcher torchrun starts distributed ranks; trainer "
                          f"{cfg.trainer!r} runs in one process (start it without torchrun)")
    session = TorchrunSession(cfg) if launcher == "torchrun" else None
    # on failure no clean-up under torchrun: a barrier would wait for failed peers, and
    # the launcher stops every rank of a job whose rank exits with an error
    record = _run_training(cfg, session)
    record["config"]["launcher"] = launcher
    if session is not None:
        session.close()
    if cfg.out and (session is None or session.lead):
        write_record(record, cfg.out)
    return record


def _run_training(cfg: TrainConfig, session) -> dict[str, Any]:
    graph = load_graph(cfg)
    estimate_mb = _check_memory(cfg, graph)  # a lower bound: fails at once if the graph cannot fit
    from cdfgnn.data.stats import graph_stats
    from cdfgnn.models.dropout import DROPOUT_VERSION
    t0 = time.perf_counter()
    if cfg.trainer == "distributed":
        body = _run_distributed(cfg, graph, session)
    else:
        body = _run_one_process(cfg, graph)
        body["summary"]["estimated_memory_mb"] = estimate_mb
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
        "model": {"dropout": cfg.dropout, "dropout_version": DROPOUT_VERSION,
                  "dtype": cfg.dtype},
        "total_seconds": time.perf_counter() - t0,
        **body,
        "memory": memory_section(cfg, body),
    }
    return record


def memory_section(cfg: TrainConfig, body: dict[str, Any]) -> dict[str, Any]:
    """The record's ``memory``: peak RSS (every device), the estimate checked against the
    budget, and on cuda ``torch.cuda.max_memory_allocated`` (reset at run start; the max
    over ranks)."""
    out = {"device": cfg.device, "peak_rss_mb": body["summary"]["peak_memory_mb"],
           "estimated_mb": body["summary"].get("estimated_memory_mb")}
    gpu = [r["max_memory_allocated_mb"] for r in body["ranks"]
           if r.get("max_memory_allocated_mb") is not None]
    if gpu:
        out["max_memory_allocated_mb"] = max(gpu)
    return out


def _run_one_process(cfg: TrainConfig, graph: Graph) -> dict[str, Any]:
    from cdfgnn.train.oracle import train_full_graph, train_minibatch
    from cdfgnn.train.sampling_baselines import SAMPLING_TRAINERS
    trainers = {"full-graph": train_full_graph, "minibatch": train_minibatch,
                **SAMPLING_TRAINERS}
    res = trainers[cfg.trainer](graph, cfg)
    sl = timed_slice(cfg.epochs, cfg.warmup)
    t = mean_times(res["times"], sl)
    peak = peak_rss_mb()
    for row, tm in zip(res["epochs"], res["times"]):  # one process: modelled = its CPU time
        row["modelled_s"], row["wall_s"] = float(tm["cpu_s"]), float(tm["wall_s"])
    body = {
        "partition": None,
        "epochs": res["epochs"],
        "ranks": [{"rank": 0, "host": 0, **t, "peak_rss_mb": peak,
                   **_device_peak(res.get("max_memory_allocated_mb"))}],
        "comm": {"per_epoch": _zero_traffic(), "by_tag": {}},
        "model_time": {"profile": None, "epoch_s": t["cpu_s"], "comm_s": [0.0],
                       "compute_s": [t["cpu_s"]]},
        "summary": {**summarise_epochs(res["epochs"]), "epoch_time_s": t["wall_s"],
                    "modelled_epoch_time_s": t["cpu_s"], "peak_memory_mb": peak,
                    "timed_epochs": len(res["times"][sl])},
    }
    if len(res.get("ledgers") or []) == len(res["times"]):   # trainers that count
        add_device_model(body, cfg, Topology.for_workers(1, 1), [res])
    return body


def _run_distributed(cfg: TrainConfig, graph: Graph, session=None) -> dict[str, Any]:
    from cdfgnn.comm.network import NetworkModel
    from cdfgnn.methods.base import METHODS, Prepared, build_strategy
    from cdfgnn.partition.stats import partition_stats

    topology = Topology.for_workers(cfg.workers, cfg.hosts)
    if session is None or cfg.partition_file:  # torchrun: every rank reads the file
        part = load_partitioning(cfg, graph, topology)
    else:  # torchrun: rank 0 partitions (in a child process), the others receive it
        part = session.from_lead(lambda: load_partitioning(cfg, graph, topology, apart=True))
    method_cls = METHODS.get(cfg.method)
    stats = partition_stats(graph, part)
    estimate_mb = _check_memory(cfg, graph, stats)
    method = build_strategy(cfg.method, cfg.method_params)  # bad parameters: fail here
    from cdfgnn.pricing.devices import describe, factors, measured_only, parse_devices
    devices = parse_devices(cfg.devices, cfg.workers)
    # the CPU-measured model scales by CaPGNN Table 1 measurements only: a group with a
    # card CaPGNN did not measure keeps every rank's CPU time as measured (its
    # device-modelled epoch prices the ledger on the physical figures instead)
    slow, xfer = factors(devices if measured_only(devices) else None, cfg.workers)
    network = NetworkModel(topology, profile=cfg.network, slowdown=slow, transfer=xfer)
    prepared = Prepared()  # the sampled track prepares nothing
    if method_cls.track == "minibatch":  # the sampled track (cdfgnn/train/minibatch.py)
        from cdfgnn.train.minibatch import run_minibatch
        body = run_minibatch(cfg, graph, part, topology, network, session)
    else:
        prepared = method.prepare(graph, part, cfg.devices)
        results = train_distributed(cfg, graph, part, prepared.drop_arcs, session)
        body = assemble_ranks(cfg, topology, network, results)
        if cfg.count_ops:
            add_device_model(body, cfg, topology, results)
    body["model_time"]["devices"] = describe(devices)
    body["model_time"]["transfer"] = list(network.transfer)
    body["partition"] = {**stats, "file": cfg.partition_file}
    body["summary"]["estimated_memory_mb"] = estimate_mb
    if prepared.drop_arcs is not None:
        body["partition"]["dropped_arcs"] = int(np.count_nonzero(prepared.drop_arcs))
    if prepared.info is not None:
        body["partition"]["prepare"] = prepared.info
    return body


def train_distributed(cfg: TrainConfig, graph: Graph, part: Partitioning,
                      drop_arcs: np.ndarray | None = None, session=None) -> list[dict]:
    """Launch ``cfg.workers`` ranks on ``cfg.backend``; per-rank results in rank order.
    Under torchrun (``session``) this process is one rank and receives the others'."""
    from cdfgnn.comm.launcher import launch
    from cdfgnn.train.worker import RankJob, rank_main, stage_files, thread_job

    if session is not None:
        return session.run(rank_main, RankJob(cfg, graph=graph, partitioning=part,
                                              drop_arcs=drop_arcs))
    topology = Topology.for_workers(cfg.workers, cfg.hosts)
    with tempfile.TemporaryDirectory(prefix="cdfgnn-run-") as tmp:
        if cfg.backend == "thread":
            job = thread_job(cfg, graph, part, drop_arcs)
        else:  # processes load from files, so nothing large is pickled
            gpath, ppath = stage_files(cfg, graph, part, tmp)
            dpath = None
            if drop_arcs is not None:
                dpath = str(Path(tmp) / "drop_arcs.npy")
                np.save(dpath, drop_arcs)
            job = RankJob(cfg, graph_path=gpath, partition_path=ppath, drop_arcs_path=dpath)
        return launch(rank_main, cfg.workers, topology=topology, backend=cfg.backend,
                      timeout_s=cfg.timeout_s, args=(job,), device=cfg.device)


from cdfgnn.comm.tags import VERTEX_TAGS  # noqa: E402


def add_device_model(body: dict[str, Any], cfg: TrainConfig, topology: Topology,
                     results: list[dict], collect=None) -> None:
    """Beside the CPU-measured model: the ledgers priced once on ``--devices`` (default
    profile without it) and the network (:func:`cdfgnn.pricing.record.device_section`).
    ``collect(epochs)``: the counts of those epochs (default: the full-batch track's,
    ``collect_inputs``; the sampled track passes its own)."""
    from cdfgnn.pricing.epoch import collect_inputs
    from cdfgnn.pricing.record import device_section
    collect = collect or (lambda epochs: collect_inputs(results, epochs))
    n = len(results[0]["times"])
    timed = list(range(n)[timed_slice(cfg.epochs, cfg.warmup)])
    network = cfg.network if cfg.trainer == "distributed" else "cdfgnn-table2"
    dev = device_section(collect(range(n)), cfg.devices, network, topology, timed)
    for row, s in zip(body["epochs"], dev["epochs_s"]):
        row["device_s"] = s
    dev["epochs_s"] = [dev["epochs_s"][i] for i in timed]
    body["model_time"]["device"] = dev
    record_device_summary(body, dev)


def record_device_summary(body: dict[str, Any], dev: dict[str, Any]) -> None:
    """The summary's ``device_epoch_time_s`` and ``device_profile`` of a device section."""
    body["summary"]["device_epoch_time_s"] = dev["epoch_s"]
    names = sorted(set(dev["profiles"]), key=dev["profiles"].index)
    body["summary"]["device_profile"] = ",".join(names) + (" (default)" if dev["default"]
                                                           else "")


def _is_vertex_tag(tag: str) -> bool:
    return tag.startswith(VERTEX_TAGS)


def assemble_ranks(cfg, topology, network, results) -> dict[str, Any]:
    """Per-rank timers, traffic by link class and tag, modelled time: the record body.

    Modelled epoch time (docs/architecture.md, Metrics), per timed epoch e and rank r, with
    ``compute = (cpu - overhead) x slowdown`` and ``vertex``/``reduce`` the modelled
    seconds of the vertex rows and of the gradient all-reduce (+ codec/cache CPU time,
    counted as communication):
    ``compute + vertex + reduce`` or, in an epoch whose communication overlapped
    computation, ``max(compute, vertex) + reduce``; the epoch's time is the max over
    ranks, and the record gives the mean over timed epochs.
    """
    p = cfg.workers
    sl = timed_slice(cfg.epochs, cfg.warmup)
    host = np.arange(p) // topology.devices_per_host
    n_epochs = len(results[0]["times"])
    timed = range(n_epochs)[sl]
    slow = np.asarray(network.slowdown)
    epoch_rank = np.zeros((n_epochs, p))      # modelled seconds of every epoch and rank
    ranks, comm_model, compute_cpu = [], [], []
    per_epoch = _zero_traffic()
    by_tag: dict[str, dict[str, float]] = {}
    rows_sent = 0.0
    for r, res in enumerate(results):
        t = mean_times(res["times"], sl)
        masks = {"intra": (host == host[r]) & (np.arange(p) != r), "inter": host != host[r]}
        vertex_s, reduce_s = np.zeros(n_epochs), np.zeros(n_epochs)
        for e in range(n_epochs):
            v, g = _modelled_comm(network, r, res["traffic"][e], p)
            tm = res["times"][e]
            over = tm.get("overhead_cpu_s", 0.0)
            compute = max(tm["cpu_s"] - over, 0.0) * slow[r]
            vertex_s[e], reduce_s[e] = v + over, g
            epoch_rank[e, r] = (max(compute, vertex_s[e]) if tm.get("overlap") else
                                compute + vertex_s[e]) + g
        vertex_s, reduce_s = vertex_s[sl], reduce_s[sl]
        comm_model.append(float(vertex_s.mean() + reduce_s.mean()) if len(timed) else 0.0)
        compute_cpu.append(max(t["cpu_s"] - t.get("overhead_cpu_s", 0.0), 0.0))
        traffic = _mean_traffic(res["traffic"][sl], p)
        for tag, tr in traffic.items():
            agg = by_tag.setdefault(tag, {"bytes": 0.0, "msgs": 0.0, "rows": 0.0})
            for cls, mask in masks.items():
                for f in ("bytes", "msgs"):
                    per_epoch[cls][f] += float(tr[f][mask].sum())
            for f in agg:
                agg[f] += float(tr[f][masks["intra"] | masks["inter"]].sum())
            if _is_vertex_tag(tag):
                rows_sent += float(tr["rows"].sum() - tr["rows"][r])
        ranks.append({"rank": r, "host": int(host[r]), **t,
                      "modelled_comm_s": comm_model[-1],
                      # its two parts: vertex rows (+ codec/cache CPU time) and the rest
                      "modelled_vertex_s": float(vertex_s.mean()) if len(timed) else 0.0,
                      "modelled_reduce_s": float(reduce_s.mean()) if len(timed) else 0.0,
                      "peak_rss_mb": res["peak_rss_mb"],
                      **_device_peak(res.get("max_memory_allocated_mb")),
                      "local_rows": res["local_rows"], "owned_rows": res["owned_rows"],
                      "parts": res.get("parts", [r])})
    modelled = float(epoch_rank[sl].max(axis=1).mean()) if len(timed) else 0.0
    overlap = bool(any(tm.get("overlap") for res in results for tm in res["times"][sl]))
    epochs = results[0]["epochs"]
    for e, row in enumerate(epochs):  # per-epoch times: time-to-accuracy curves
        row["modelled_s"] = float(epoch_rank[e].max())
        row["wall_s"] = float(max(res["times"][e]["wall_s"] for res in results))
    return {
        "epochs": epochs,
        "ranks": ranks,
        "comm": {"per_epoch": {**per_epoch, "rows_sent": rows_sent}, "by_tag": by_tag,
                 "exact_rows": _sum_dicts([res.get("sync_rows", {}) for res in results]),
                 "epochs": _epoch_series(results, host),
                 "precompute": _precompute_traffic(results)},
        "model_time": {"profile": cfg.network, "epoch_s": modelled, "comm_s": comm_model,
                       "compute_s": compute_cpu, "overlap": overlap,
                       "slowdown": [float(x) for x in slow]},
        "summary": {**summarise_epochs(epochs),
                    "epoch_time_s": max(rk["wall_s"] for rk in ranks),
                    "modelled_epoch_time_s": modelled,
                    "peak_memory_mb": max(rk["peak_rss_mb"] for rk in ranks),
                    "timed_epochs": len(results[0]["times"][sl])},
    }


def _device_peak(mb: float | None) -> dict[str, float]:
    """A rank's ``max_memory_allocated_mb`` entry (cuda only; absent on the CPU)."""
    return {} if mb is None else {"max_memory_allocated_mb": float(mb)}


def _modelled_comm(network, rank: int, snapshot: dict, p: int) -> tuple[float, float]:
    """Modelled seconds of one epoch's (vertex rows, everything else) sent by ``rank``."""
    vb, vm, gb, gm = (np.zeros(p) for _ in range(4))
    for tag, d in snapshot.items():
        if _is_vertex_tag(tag):
            vb += d["bytes"]
            vm += d["msgs"]
        elif not tag.startswith("eval"):
            gb += d["bytes"]
            gm += d["msgs"]
    return (float(network.comm_seconds(rank, vb, vm)), float(network.comm_seconds(rank, gb, gm)))


def _epoch_series(results: list[dict], host: np.ndarray) -> list[dict[str, Any]]:
    """Per epoch, summed over ranks: vertex rows sent per tag, bytes per link class."""
    out = []
    for e in range(len(results[0]["traffic"])):
        rows: dict[str, float] = {}
        link = {"intra_bytes": 0.0, "inter_bytes": 0.0}
        for r, res in enumerate(results):
            for tag, d in res["traffic"][e].items():
                b = np.asarray(d["bytes"], dtype=float)
                same = host == host[r]
                same[r] = False
                link["intra_bytes"] += float(b[same].sum())
                link["inter_bytes"] += float(b[host != host[r]].sum())
                if _is_vertex_tag(tag):
                    rw = np.asarray(d["rows"], dtype=float)
                    rows[tag] = rows.get(tag, 0.0) + float(rw.sum() - rw[r])
        out.append({"epoch": e, "rows": rows, **link})
    return out


def _precompute_traffic(results: list[dict]) -> dict[str, float]:
    """Bytes and rows sent once, before epoch 0, by the first-layer precompute (all ranks)."""
    out = {"bytes": 0.0, "rows": 0.0}
    for r, res in enumerate(results):
        for d in (res.get("precompute_traffic") or {}).values():
            for f in out:
                v = np.asarray(d[f], dtype=float)
                out[f] += float(v.sum() - v[r])
    return out


def _sum_dicts(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + int(v)
    return out


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


def _zero_traffic() -> dict[str, dict[str, float]]:
    return {"intra": {"bytes": 0.0, "msgs": 0.0}, "inter": {"bytes": 0.0, "msgs": 0.0}}
