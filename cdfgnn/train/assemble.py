"""The record body of a distributed run: the ranks' timers and traffic assembled into
per-rank rows, traffic by link class and tag, and the CPU-measured model
(:func:`assemble_ranks`), and the device model beside it (:func:`add_device_model`).
Shared by the full-batch track (:mod:`cdfgnn.train.run`) and the sampled track
(:mod:`cdfgnn.train.minibatch`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from cdfgnn.comm.tags import VERTEX_TAGS
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import mean_times, summarise_epochs, timed_slice


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
    per_epoch = zero_traffic()
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
                      **device_peak_entry(res.get("max_memory_allocated_mb")),
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


def device_peak_entry(mb: float | None) -> dict[str, float]:
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


def zero_traffic() -> dict[str, dict[str, float]]:
    return {"intra": {"bytes": 0.0, "msgs": 0.0}, "inter": {"bytes": 0.0, "msgs": 0.0}}
