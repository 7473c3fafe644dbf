"""``rapa``: CaPGNN's Resource-Aware Partitioning Algorithm (Neurocomputing, Algs. 2-3), edge-cut.

After the pre-partitioning (METIS by default), RAPA removes **halo vertices** (never
inner ones) from the subgraphs whose modelled cost is above the mean, until the
costs of the workers' devices are balanced. It is a ``prepare`` hook: the arcs from a
part's inner vertices to its removed halos are dropped from that part's local graph
(global degrees; the paper does not say, we choose), so RAPA is **lossy**: the run
record's ``partition.dropped_arcs`` counts the dropped cross arcs and
``partition.prepare.rapa`` the trace of every iteration (Fig. 20).

Cost model with part i on rank i's device (``--devices``; the paper assigns parts to
devices at random, here the order of ``--devices`` is the assignment):

* eq. 13: ``T_comm = |E_outer| ((H2D_i/H2D_max + D2H_i/D2H_max)(1 - 1/P) + IDT_i/IDT_max / P)``
* eq. 14: ``T_comp = alpha |E_all| SpMM_i/SpMM_max + (1 - alpha) |V_inner| MM_i/MM_max``
  (times in seconds divided by the largest among the devices in use; alpha = 0.35)
* ``lambda_i = T_comp + T_comm``; memory (eq. 15): ``|V_i| 4 + |E_i| 8 + |V_i| F 4 +
  beta <= device memory`` (beta = 100 MB), checked when the device has a memory size.

Algorithm 2/3: per outer iteration, from the weakest device (highest
``alpha t_SpMM + (1 - alpha) t_MM`` ratio) on, a part above the mean cost drops its
halos in ascending order of the influence score (eq. 16 with global degrees, as the
public code does: ``S_u = 2 sum_{v inner neighbour} 1/sqrt(d_v d_u) x R(u)``, R the
number of parts holding u as a halo, recounted every iteration) until its estimated
cost reaches halfway to the mean; it stops when the population std of the costs is
under ``eps`` x mean, when no part changes, or after ``max_iter`` iterations.
Without ``--devices`` every device is the same and RAPA balances the structural cost.
``prune=false`` drops nothing (equals ``exact``).

``cross_host=drop`` (CaPGNN Table 9, the public code's multi-machine mode, Sec. 5.11):
every arc between parts on different hosts is dropped before RAPA runs (part i is on
host ``i // devices_per_host``), so no halo row crosses hosts and the hosts share only
gradients; RAPA then balances the rest. Lossy, like the pruning; the record counts
the dropped cross-host arcs (``partition.prepare.dropped_cross_host_arcs``).
``cross_host=keep`` (default) exchanges the halo rows across hosts exactly.
"""
from __future__ import annotations

import numpy as np

from cdfgnn.methods.base import METHODS, Degenerate, Param, Prepared, SyncStrategy

BETA_MB = 100.0


def _pos(v) -> bool:
    return v > 0


def device_ratios(profiles, p: int, alpha: float) -> dict[str, np.ndarray]:
    """Every device's time over the largest among the devices in use.

    CaPGNN does not say whether F and t are times or throughputs; we choose times.
    """
    if profiles is None:
        one = np.ones(p)
        return {k: one for k in ("mm", "spmm", "h2d", "d2h", "idt")} | {"mem": np.zeros(p)}
    arr = {k: np.array([getattr(d, f"{k}_s") for d in profiles]) for k in
           ("mm", "spmm", "h2d", "d2h", "idt")}
    out = {k: v / v.max() for k, v in arr.items()}
    out["mem"] = np.array([d.memory_gb for d in profiles]) * 2 ** 30
    return out


def cross_host_arcs(graph, part) -> np.ndarray:
    """Bool mask over the graph's arcs whose two ends are owned by parts of different
    hosts (part i sits on host ``i // devices_per_host``)."""
    owner = np.asarray(part.assignment, dtype=np.int64)
    host = owner // part.topology.devices_per_host
    return host[graph.row_of_arcs()] != host[graph.indices]


def rapa_prune(graph, part, profiles=None, alpha: float = 0.35, eps: float = 0.01,
               max_iter: int = 100, recount: bool = True,
               dropped: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """(bool mask over the graph's arcs to drop, trace) by Algorithms 2 and 3.

    ``dropped``: arcs already gone (cross-host arcs): RAPA balances what is left, and
    the mask it returns includes them."""
    p, n = part.num_parts, graph.num_nodes
    owner = np.asarray(part.assignment, dtype=np.int64)
    row, col = graph.row_of_arcs().astype(np.int64), graph.indices.astype(np.int64)
    deg = np.maximum(graph.degrees().astype(np.float64), 1.0)
    gone_before = np.zeros(row.size, dtype=bool) if dropped is None else dropped
    cross = (owner[row] != owner[col]) & ~gone_before
    ratio = device_ratios(profiles, p, alpha)
    comm_w = (ratio["h2d"] + ratio["d2h"]) * (1 - 1 / p) + ratio["idt"] / p
    comp_e, comp_v = alpha * ratio["spmm"], (1 - alpha) * ratio["mm"]
    e_all = np.bincount(owner[row[~gone_before]], minlength=p).astype(np.float64)
    v_inner = np.bincount(owner, minlength=p).astype(np.float64)
    # (part, halo) pairs: arcs from the part's inner vertices to the halo, and weights
    pair = owner[row[cross]] * n + col[cross]
    keys, inv = np.unique(pair, return_inverse=True)
    arcs = np.bincount(inv).astype(np.float64)
    wsum = np.bincount(inv, weights=1.0 / np.sqrt(deg[row[cross]] * deg[col[cross]]))
    kpart, khalo = keys // n, keys % n
    alive = np.ones(keys.size, dtype=bool)
    feat = graph.num_features

    def stats():
        e_out = np.bincount(kpart[alive], weights=arcs[alive], minlength=p)
        e_tot = e_all - np.bincount(kpart[~alive], weights=arcs[~alive], minlength=p)
        v_tot = v_inner + np.bincount(kpart[alive], minlength=p)
        lam = comp_e * e_tot + comp_v * v_inner + comm_w * e_out
        return lam, e_out, e_tot, v_tot

    def memory_ok(i, v, e) -> bool:
        cap = ratio["mem"][i]
        return cap <= 0 or v * 4 + e * 8 + v * feat * 4 + BETA_MB * 2 ** 20 <= cap

    weakness = alpha * ratio["spmm"] + (1 - alpha) * ratio["mm"]
    order = np.argsort(-weakness, kind="stable")
    overlap = np.bincount(khalo, minlength=n)
    trace = []
    lam, e_out, e_tot, v_tot = stats()
    trace.append(_trace_row(0, lam, v_tot, e_tot, np.zeros(p)))
    for it in range(1, max_iter + 1):
        if recount:
            overlap = np.bincount(khalo[alive], minlength=n)
        done = np.zeros(p, dtype=bool)
        removed = np.zeros(p)
        for i in order:
            lam, e_out, e_tot, v_tot = stats()
            mean = lam.mean()
            if lam[i] <= mean and memory_ok(i, v_tot[i], e_tot[i]):
                done[i] = True
                continue
            cand = np.flatnonzero(alive & (kpart == i))
            if cand.size == 0:
                done[i] = True
                continue
            score = 2.0 * wsum[cand] * overlap[khalo[cand]]
            cand = cand[np.lexsort((khalo[cand], score))]          # ascending score
            drop = np.cumsum(arcs[cand] * (comp_e[i] + comm_w[i]))
            est = lam[i] - drop
            target = 0.5 * (lam[i] + mean)
            k = int(np.searchsorted(-est, -target, side="left")) + 1  # first est <= target
            k = min(k, cand.size)
            while k < cand.size and not memory_ok(i, v_tot[i] - k, e_tot[i] - drop[k - 1] /
                                                  max(comp_e[i] + comm_w[i], 1e-300)):
                k += 1
            alive[cand[:k]] = False
            removed[i] = k
        lam, e_out, e_tot, v_tot = stats()
        trace.append(_trace_row(it, lam, v_tot, e_tot, removed))
        if np.std(lam) < eps * lam.mean() or done.all():
            break
    gone = ~alive
    drop_pairs = set((kpart[gone] * n + khalo[gone]).tolist())
    mask = np.zeros(graph.indices.shape[0], dtype=bool)
    if drop_pairs:
        arc_pair = owner[row] * n + col
        mask = cross & np.isin(arc_pair, np.fromiter(drop_pairs, dtype=np.int64))
    mask |= gone_before
    info = {"iterations": len(trace) - 1, "trace": trace,
            "removed_halos": int(gone.sum()), "halos": int(keys.size),
            "dropped_cross_arcs": int(mask.sum()),
            "cross_arcs": int(cross.sum() + gone_before.sum()),
            "dropped_cross_host_arcs": int(gone_before.sum()),
            "devices": None if profiles is None else [d.name for d in profiles],
            "alpha": alpha, "eps": eps}
    return mask, info


def _trace_row(it, lam, v, e, removed) -> dict:
    mean = float(lam.mean())
    return {"iteration": it, "lambda": lam.tolist(), "nodes": v.tolist(), "edges": e.tolist(),
            "removed": removed.tolist(), "std": float(np.std(lam)), "mean": mean,
            "spread": float(np.std(lam) / mean) if mean else 0.0}


class RapaMixin:
    """The ``prepare`` of RAPA, shared by ``rapa`` and ``capgnn``."""

    PARAMS = {
        "prune": Param(True, bool, doc="run RAPA's halo pruning (false: equals exact)"),
        "alpha": Param(0.35, float, check=lambda a: 0 <= a <= 1, expect="in [0, 1]",
                       doc="weight of SpMM against MM in eq. 14"),
        "eps": Param(0.01, float, check=lambda e: e > 0, expect="> 0",
                     doc="stop when std(lambda) < eps x mean(lambda)"),
        "max_iter": Param(100, int, check=_pos, expect="an integer > 0",
                          doc="outer iterations of Algorithm 2 at most"),
        "recount": Param(True, bool, doc="recount R(u) after every outer iteration "
                                         "(false: once, as the public code)"),
        "cross_host": Param("keep", str, choices=("keep", "drop"),
                            doc="arcs between parts on different hosts: keep (exact halo "
                                "exchange across hosts) or drop (the public code's "
                                "multi-machine mode: no halo crosses hosts, only gradients)"),
    }

    def prepare(self, graph, part, devices: str | None = None) -> Prepared:
        from cdfgnn.methods.jaca import halo_overlap
        overlap = halo_overlap(graph, part)
        hosts = cross_host_arcs(graph, part) if self.params["cross_host"] == "drop" else None
        host_info = {"cross_host": self.params["cross_host"],
                     "dropped_cross_host_arcs": int(hosts.sum()) if hosts is not None else 0}
        if not self.params["prune"]:
            return Prepared(hosts if hosts is not None and hosts.any() else None,
                            {"rapa": None, "halo_overlap": overlap, **host_info})
        from cdfgnn.pricing.devices import parse_devices
        profiles = parse_devices(devices, part.num_parts)
        mask, info = rapa_prune(graph, part, profiles, self.params["alpha"], self.params["eps"],
                                self.params["max_iter"], self.params["recount"], hosts)
        return Prepared(mask, {"rapa": info, "halo_overlap": overlap, **host_info})


@METHODS.register("rapa")
class Rapa(RapaMixin, SyncStrategy):
    name = "rapa"
    degenerate = Degenerate({"prune": False})   # no halo arc dropped

    def count_key(self, epoch: int):
        """The halo is pruned once, before training; every pass is exact over it: one
        key."""
        return ()
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "edge"
