"""``jaca``: CaPGNN's Joint Adaptive Caching Algorithm (Neurocomputing, Sec. 4.1, Alg. 1), edge-cut.

Two tiers of halo-row caches, keyed by global vertex id, one pool per cached layer:

* **local** (one per worker, the paper's GPU cache) and
* **shared** (one per host, the paper's pinned CPU cache read by every worker of the
  host). Thread backend: one object per host that every rank of the host reads.
  Process backend: one OS shared-memory segment per host mapped by the host's ranks
  (``cdfgnn.methods.jaca_shm``: fixed row slots, global-id keys and epoch stamps as
  views over the mapping; no pickling), with the same entries as the thread tier.

What is cached (``cache=all``, the paper's): layer 0 caches the **input features** of
halo vertices (the layer
then aggregates ``A [h W; x_halo W]`` locally, so nothing flows back in backward and
the result is exact: ``cache=input`` equals ``exact``); layers >= 1 cache the halo
**messages** (``h_l W_l`` rows), which go stale. An entry received at epoch e is
fresh while ``epoch - e < staleness`` (``staleness=1``: refresh every epoch, equal to
``exact``; ``staleness=0``: never refresh, the public code's default). Input
features never go stale. Without dropout the halo inputs do not change, so while the
local tier holds all of them the receiver keeps ``A_halo x_halo`` (one row per inner
vertex with a halo neighbour) and multiplies it by ``W_0`` each epoch instead of
computing ``x_halo W_0`` (see :meth:`Jaca.aggregate`). ``cache=messages`` caches layer 0's messages ``x W_0`` like
the later layers' (stale, but the receiver does no halo matmul). Backward halo gradients of layers >= 1 stay exact (every
halo row's gradient goes back to its owner).

Protocol per layer and epoch (receiver side): look up local, then shared (a shared
hit is copied into the local tier), then ask each owner for the missing rows only
with a bitmap of its halo list (accounted under ``cachereq/``: 1 bit per halo row),
so **senders skip rows the receiver holds**; received rows are inserted into the
local tier and staged for the shared tier, which merges what its workers staged at
the start of the next epoch, in rank order (deterministic; the paper's global queue).

Admission/eviction at equal capacity (``policy``): ``priority`` (JACA: keep the
highest overlap ratio R(v) = number of parts holding v as a halo, ties by global
degree, then id; ``priority_order=low`` reverses it for Fig. 14), ``fifo``, ``lru``,
``lfu`` and ``random``.

Capacities (vertices) follow Algorithm 1: ``C = min(floor((budget - reserved) /
bytes_per_vertex), |H|)`` with ``bytes_per_vertex = 4 x sum of the cached widths``,
``|H|`` the worker's halo count (local) or the union over the host's workers
(shared; Alg. 1 leaves |H_CPU| open, we choose), times ``capacity_fraction``; ``local_capacity`` /
``shared_capacity`` >= 0 set a count directly (sweeps).

Cache lookups and inserts are timed as communication overhead (``cache-check``,
``cache-pick``, ``cache-update``; per-epoch columns ``cache_<stage>_s``).
Hit rates per tier, layer and epoch (summed over ranks) are epoch columns:
``hit_l{l}``, ``hit_local_l{l}``, ``hit_shared_l{l}`` and ``hit_rate`` (all layers).
"""
from __future__ import annotations

import math
import threading
import uuid

import numpy as np
import torch

from cdfgnn.comm.codecs import send_rows
from cdfgnn.cost import ledger as oplog
from cdfgnn.cost.reuse import live
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, Prepared, SyncKey, SyncStrategy
from cdfgnn.methods.jaca_pool import Pool, apply_staged, device_index
from cdfgnn.models.dropout import apply_mask, dropout_key

POLICIES = ("priority", "fifo", "lru", "lfu", "random")
VARIANTS = ("paper", "public-code")
MB = 2 ** 20
REQ_TAG = "cachereq"
#: cache work per epoch, timed as communication-side CPU (``comm.overhead("cache-<stage>")``)
#: and reported per epoch as ``cache_<stage>_s`` (mean over ranks; Figs. 17-18): check =
#: the receiver's tier lookups and the owner's reading of the request bitmap, pick =
#: assembling the halo rows from tiers and buffer and inserting the fetched ones,
#: update = merging the staged writes into the shared tier
STAGES = ("check", "pick", "update")


class HostTier:
    """The shared tier of one host (thread backend): pools, staged writes, a lock."""

    def __init__(self, gids: np.ndarray, capacity: int, policy: str, priority: np.ndarray,
                 layers: list[int], seed: int, users: int):
        self.gids = gids
        self.lock = threading.Lock()
        rng = np.random.default_rng(seed)
        self.pools = {l: Pool(gids.size, capacity, policy, priority, rng) for l in layers}
        self.staged: dict[int, list[tuple]] = {}
        self.users = users

    def apply_staged(self, rank: int) -> None:
        """Apply ``rank``'s staged writes, in order (called in ``rank``'s merge turn, as the
        process backend's tier does: each rank does the merge work of its own writes, so
        its operation ledger does not depend on which thread arrives first)."""
        with self.lock:
            entries = self.staged.pop(rank, [])
        apply_staged(self.pools, entries)

    def stage(self, rank: int, layer: int, kind: str, pos, a, b=None) -> None:
        with self.lock:
            self.staged.setdefault(rank, []).append((layer, kind, pos, a, b))


def halo_overlap(graph, part) -> dict:
    """R(v) = parts holding v as a 1-hop halo: histogram and summary (CaPGNN Fig. 6)."""
    owner = np.asarray(part.assignment, dtype=np.int64)
    row, col = graph.row_of_arcs().astype(np.int64), graph.indices.astype(np.int64)
    cross = owner[row] != owner[col]
    pairs = np.unique(owner[row[cross]] * graph.num_nodes + col[cross])
    r = np.bincount(pairs % graph.num_nodes, minlength=graph.num_nodes)
    hist = np.bincount(r)
    return {"halo_total": int(r.sum()), "halo_distinct": int((r > 0).sum()),
            "overlapping": int((r >= 2).sum()), "excess": int(np.maximum(r - 1, 0).sum()),
            "histogram": hist.tolist()}


_HOSTS: dict[tuple, HostTier] = {}
_HOSTS_LOCK = threading.Lock()


def _nonneg(v) -> bool:
    return v >= 0


def _capacity_param(v) -> bool:
    return v >= -1


@METHODS.register("jaca")
class Jaca(SyncStrategy):
    name = "jaca"
    degenerate = Degenerate({"staleness": 1})   # every cached row refreshed every epoch
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "edge"
    PARAMS = {
        "policy": Param("priority", str, choices=POLICIES, doc="admission/eviction policy"),
        "priority_order": Param("high", str, choices=("high", "low"),
                                doc="priority policy: keep high (JACA) or low overlap ratio"),
        "staleness": Param(10, int, check=_nonneg, expect="an integer >= 0",
                           doc="epochs a cached embedding stays fresh (0: never refresh)"),
        "cache": Param("all", str, choices=("all", "input", "messages"),
                       doc="all: input features (layer 0) and every later layer's messages; "
                           "input: input features only; messages: every layer's messages "
                           "(layer 0's too: stale, but no halo matmul on the receiver)"),
        "backward": Param("exact", str, choices=("exact", "fresh"),
                          doc="halo gradients of layers >= 1: of every halo row (exact), or "
                              "only of rows fetched fresh this epoch (cached rows are "
                              "constants)"),
        "local_mb": Param(1024.0, float, check=_nonneg, expect=">= 0",
                          doc="memory budget of each worker's local cache (MB)"),
        "shared_mb": Param(4096.0, float, check=_nonneg, expect=">= 0",
                           doc="memory budget of each host's shared cache (MB)"),
        "reserved_mb": Param(0.0, float, check=_nonneg, expect=">= 0",
                             doc="memory reserved out of each budget (MB)"),
        "local_capacity": Param(-1, int, check=_capacity_param,
                                expect="an integer >= 0 (or -1: from local_mb)",
                                doc="local cache capacity in vertices (-1: Algorithm 1)"),
        "shared_capacity": Param(-1, int, check=_capacity_param,
                                 expect="an integer >= 0 (or -1: from shared_mb)",
                                 doc="shared cache capacity in vertices (-1: Algorithm 1)"),
        "capacity_fraction": Param(1.0, float, check=lambda f: 0 <= f <= 1,
                                   expect="in [0, 1]",
                                   doc="fraction of Algorithm 1's capacity actually used"),
        "variant": Param("paper", str, choices=VARIANTS,
                         doc="paper: layers >= 1 cache the messages h W (our reading of the "
                             "text); public-code: every layer caches its input rows h, "
                             "multiplied by the current W on the receiver, the gradients of "
                             "every halo row go back, and the priority policy only fills free "
                             "slots (never evicts), as songxf1024/CaPGNN does"),
        "eval": Param("exact", str, choices=("exact", "cached"),
                      doc="evaluation's halo rows: exact sync, or through the caches as in "
                          "training (the public code's: its cache lookups do not test "
                          "is_train)"),
    }

    def check_params(self) -> None:
        p = self.params
        self.evaluates_with_method = p["eval"] == "cached"
        if p["variant"] == "public-code" and p["cache"] == "messages":
            raise CdfgnnError("method 'jaca': variant=public-code caches input rows at every "
                              "layer; it cannot be combined with cache=messages")
        if p["variant"] == "public-code" and p["backward"] == "fresh":
            raise CdfgnnError("method 'jaca': variant=public-code sends the gradients of every "
                              "halo row (backward=exact); backward=fresh does not apply")

    # ------------------------------------------------------------ setup
    def prepare(self, graph, part, devices: str | None = None) -> Prepared:
        """Drops nothing; records the overlap ratios of the halo set (Fig. 6)."""
        return Prepared(info={"halo_overlap": halo_overlap(graph, part)})

    def setup(self, ctx) -> None:
        super().setup(ctx)
        book, graph, comm = ctx.book, ctx.graph, ctx.comm
        if not ctx.dims:
            raise CdfgnnError("method 'jaca': the rank context lacks the model's layer widths")
        dims = self.dims = list(ctx.dims)
        self.dropout = float(ctx.dropout)
        L = len(dims) - 1
        mode = self.params["cache"]
        self.layers = [0] + (list(range(1, L)) if mode != "input" else [])
        self.cache_inputs = mode != "messages"
        # public-code: layer l >= 1 caches its input rows h_l (width dims[l]), not h_l W_l
        self.input_layers = set(self.layers if self.params["variant"] == "public-code" else
                                [0] if self.cache_inputs else [])
        widths = {l: dims[l] if l in self.input_layers else dims[l + 1] for l in self.layers}
        bpv = 4 * sum(widths[l] for l in self.layers)
        self.owned = book.num_owned
        self.halo_gids = book.local_nodes[book.num_owned:].astype(np.int64)
        self.halo_ids_t = torch.from_numpy(self.halo_gids).to(ctx.device)
        self.recv = [np.asarray(i, dtype=np.int64) - self.owned for i in book.recv_idx]
        # the halo rows are laid out by owner: peer q's rows are one block of positions
        self.recv_blocks = [(int(r[0]), int(r[-1]) + 1) if r.size else (0, 0)
                            for r in self.recv]
        if any(r.size and not np.array_equal(r, np.arange(a, b))
               for r, (a, b) in zip(self.recv, self.recv_blocks)):
            raise CdfgnnError("method 'jaca': halo rows are not laid out by owner")
        self.send_lists = [np.asarray(i, dtype=np.int64) for i in book.send_idx]
        self.send_gids = [book.local_nodes[i] for i in self.send_lists]
        dph = comm.topology.devices_per_host
        self.host = comm.rank // dph
        everyone = comm.all_gather_object((self.host, self.halo_gids,
                                           uuid.uuid4().hex if comm.rank == 0 else None))
        token = everyone[0][2]
        n = graph.num_nodes
        overlap = np.zeros(n, dtype=np.int64)
        for _, h, _ in everyone:
            overlap[h] += 1
        self.overlap = overlap
        deg = graph.degrees().astype(np.int64)
        sign = 1 if self.params["priority_order"] == "high" else -1

        def priority(gids: np.ndarray) -> np.ndarray:
            order = np.lexsort((-gids, sign * deg[gids], sign * overlap[gids]))
            rank = np.empty(gids.size, dtype=np.float64)
            rank[order] = np.arange(gids.size)
            return rank

        host_gids = np.unique(np.concatenate(
            [h for host, h, _ in everyone if host == self.host] + [np.zeros(0, np.int64)]))
        frac = self.params["capacity_fraction"]

        def capacity(explicit: int, budget_mb: float, universe: int) -> int:
            if explicit >= 0:
                return min(explicit, universe)
            room = max(budget_mb - self.params["reserved_mb"], 0.0) * MB
            return int(math.floor(frac * min(math.floor(room / bpv), universe)))

        self.capacity = {
            "local": capacity(self.params["local_capacity"], self.params["local_mb"],
                              self.halo_gids.size),
            "shared": capacity(self.params["shared_capacity"], self.params["shared_mb"],
                               host_gids.size)}
        rng = np.random.default_rng([ctx.seed, comm.rank])
        prio = priority(self.halo_gids)
        self.local = {l: Pool(self.halo_gids.size, self.capacity["local"], self.params["policy"],
                              prio, rng) for l in self.layers}
        for pool in self.local.values():
            pool.home = ctx.device
        #: bytes copied between the host's shared tier and this worker's device (cuda)
        self.copied = {"h2d": 0, "d2h": 0}
        self.shared = None
        # every rank joins the merge turns' barriers when any host has a shared tier
        hosts = {host for host, _, _ in everyone}
        caps = [capacity(self.params["shared_capacity"], self.params["shared_mb"],
                         np.unique(np.concatenate([h for hh, h, _ in everyone if hh == host]
                                                  + [np.zeros(0, np.int64)])).size)
                for host in sorted(hosts)]
        self._turns = dph if max(caps) > 0 else 0   # merge turns per epoch (0: no tier)
        self._local_index = comm.rank - self.host * dph
        if comm.backend == "process":
            if self._turns:
                from cdfgnn.methods.jaca_shm import ShmTier
                tier = ShmTier(comm, token, self.host, self._local_index == 0, host_gids,
                               self.capacity["shared"], self.params["policy"],
                               priority(host_gids), widths, ctx.seed * 7919 + self.host)
                self.shared = tier if self.capacity["shared"] > 0 else None
                if self.shared is None:
                    tier.close()
        elif self.capacity["shared"] > 0:
            if comm.backend != "thread":
                raise CdfgnnError(
                    f"method 'jaca': the shared (per-host) cache tier is implemented for the "
                    f"thread and process backends only, not {comm.backend!r}; use shared_mb=0 "
                    f"(local caches only)")
            users = sum(1 for host, _, _ in everyone if host == self.host)
            with _HOSTS_LOCK:
                key = (token, self.host)
                if key not in _HOSTS:
                    _HOSTS[key] = HostTier(host_gids, self.capacity["shared"],
                                           self.params["policy"], priority(host_gids),
                                           self.layers, ctx.seed * 7919 + self.host, users)
                self.shared = _HOSTS[key]
                if ctx.device.type == "cuda":
                    for pool in self.shared.pools.values():
                        pool.pinned = True
                self._host_key = key
        if self.shared is not None:
            self.shared_pos = np.searchsorted(host_gids, self.halo_gids)
        if self.params["variant"] == "public-code" and self.params["policy"] == "priority":
            # storageServer.py add_halo_features_to_*_ext_worker: new rows fill the free
            # slots in descending overlap order and nothing is ever evicted
            for pool in [*self.local.values(), *(self.shared.pools.values()
                                                 if self.shared is not None else [])]:
                pool.evict = False
        self.counts = {l: np.zeros(3) for l in self.layers}   # requests, local, shared hits
        self._sent: dict[int, tuple] = {}    # layer -> (rows fetched here, rows sent per peer)
        self._all_local: dict[int, bool] = {}   # layer -> every halo row a local hit this epoch
        self._splits: dict[tuple, tuple] = {}   # (view key, norm) -> split matrices
        self._halo_agg = None                   # ((view key, norm, version), A_halo x_halo)
        self.input_rows = [torch.from_numpy(graph.x[g]).to(ctx.device) for g in self.send_gids]

    # ------------------------------------------------------------ counting
    def count_key(self, epoch: int):
        """What a training pass issues besides its cache work: the tier lookups, the
        requests, the rows each owner sends and the halo rows assembled (:meth:`cached_rows`)
        follow the caches' contents and the peers' requests, so they run in
        ``reuse.live`` sections, counted op by op every pass. The rest follows layer 0's
        path: the kept ``A_halo x_halo`` times ``W`` while the local tier holds every
        halo input and there is no dropout, else ``A_halo (x_halo W)``
        (:meth:`_keeps_halo_agg`, a prediction: :meth:`count_sizes` has it verified).
        None with ``backward=fresh``: the halo exchange's backward then adds the
        gradients of the peers that sent rows fresh this epoch only, which follows the
        caches."""
        if self.params["backward"] == "fresh":
            return None
        return ("halo-agg", self._keeps_halo_agg())

    def count_sizes(self, epoch: int):
        """() : :meth:`count_key` predicts layer 0's path from the local tier, so its
        passes are verified and checked (``reuse.counted_affine``)."""
        return ()

    def _keeps_halo_agg(self) -> bool:
        """Will the next training pass's layer 0 multiply the kept ``A_halo x_halo``
        (:meth:`aggregate`)? Its lookup hits every halo input in the local tier exactly
        when every position is resident (inputs never go stale), and nothing writes
        that tier between the pass's start and layer 0's lookup."""
        pool = self.local.get(0) if 0 in self.input_layers else None
        return (self.dropout == 0 and pool is not None and self.halo_gids.size > 0
                and bool(pool.resident.all()))

    # ------------------------------------------------------------ epochs
    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        if self._turns and epoch > 0:
            from cdfgnn.methods.jaca_shm import merge_turns
            with self.comm.overhead("cache-update"):
                merge_turns(self.comm, self._apply_staged, self._turns, self._local_index)
        for c in self.counts.values():
            c[:] = 0
        self._sent.clear()

    def on_epoch_end(self, epoch: int, metrics: dict) -> dict:
        layers = self.layers
        stages = [self.comm.overhead_cpu.get(f"cache-{s}", 0.0) for s in STAGES]
        flat = torch.tensor(np.concatenate([self.counts[l] for l in layers] + [stages]),
                            dtype=torch.float64)
        if self.comm.world_size > 1:
            self.comm.all_reduce(flat, tag="eval")
        c = flat.numpy()[:-len(STAGES)].reshape(len(layers), 3)
        out = {f"cache_{s}_s": float(v) / self.comm.world_size
               for s, v in zip(STAGES, flat.numpy()[-len(STAGES):])}
        for i, l in enumerate(layers):
            req = max(c[i, 0], 1.0)
            out[f"hit_local_l{l}"] = float(c[i, 1] / req)
            out[f"hit_shared_l{l}"] = float(c[i, 2] / req)
            out[f"hit_l{l}"] = float((c[i, 1] + c[i, 2]) / req)
        out["hit_rate"] = float((c[:, 1] + c[:, 2]).sum() / max(c[:, 0].sum(), 1.0))
        if self.device.type != "cpu":   # a CPU run copies nothing between host and device
            out.update({f"{k}_bytes": v for k, v in self.copied.items()})
            self.copied = {"h2d": 0, "d2h": 0}
        return out

    def _to_device(self, rows: torch.Tensor) -> torch.Tensor:
        """Shared-tier rows (host) onto this worker's device, counted as ``h2d_bytes``."""
        if rows.device != self.device:
            self.copied["h2d"] += rows.numel() * rows.element_size()
            rows = rows.to(self.device, non_blocking=rows.is_pinned())
        return rows

    def _apply_staged(self) -> None:
        """This rank's turn of the shared tier's merge (no tier on this host: nothing)."""
        if self.shared is not None:
            self.shared.apply_staged(self.comm.rank)

    def _to_host(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows staged for the host's shared tier, counted as ``d2h_bytes``."""
        if rows.device.type != "cpu":
            self.copied["d2h"] += rows.numel() * rows.element_size()
            rows = rows.cpu()
        return rows

    def close(self) -> None:
        """Unmap the process backend's shared segment; leave the thread backend's host
        tier (the last of its host's ranks drops it from the registry)."""
        shared, self.shared = getattr(self, "shared", None), None
        if shared is None:
            return
        if not isinstance(shared, HostTier):     # the process backend's ShmTier
            shared.close()
            return
        with _HOSTS_LOCK:
            shared.users -= 1
            if shared.users <= 0:
                _HOSTS.pop(self._host_key, None)

    # ------------------------------------------------------------ sync hooks
    def aggregate(self, prop, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        """Layer 0 with cached input features: ``A_loc t + A_halo (x_halo W)``.

        ``A`` is split once per view into its local columns and its halo columns (rows
        with a halo neighbour only), so no ``[t; x_halo W]`` concatenation is built.
        Without dropout the halo inputs are the same every epoch: while the local tier
        holds every halo row unchanged (its version), ``A_halo x_halo`` is kept and the
        layer multiplies those rows (one per inner vertex with a halo neighbour) by
        ``W`` instead of every halo row (equal up to float rounding: ``(A X) W`` for
        ``A (X W)``). With dropout the mask changes every epoch and ``x_halo W`` is
        computed (the fused counter-based mask, as the owner would apply it).
        """
        training = prop.view.training
        if layer not in self.input_layers or not (training or self.evaluates_with_method) \
                or not prop.view.sync:
            return super().aggregate(prop, t, norm, layer)
        src = prop.message_source
        if src is None or src[0].shape[0] != t.shape[0] or src[1].shape[1] != t.shape[1]:
            raise CdfgnnError("method 'jaca': this model's layer does not expose its input "
                              "rows (Propagator.message_source), so input features cannot "
                              "be cached")
        weight = src[1]
        if layer > 0:
            return self._aggregate_cached_inputs(prop, t, norm, layer, src[0], weight)
        key = SyncKey(0, "fwd", "halo", training, int(self.dims[0]))
        x_halo = live("fwd/L0", self.cached_rows, key,
                      lambda q, rows: self.input_rows[q][rows], False)
        a_loc, a_halo, brows = self._split(prop, norm)
        z = a_loc @ t
        if not brows.numel():
            return z
        if (self.dropout == 0 or not training) and self._all_local.get(0, False):
            stamp = (prop.view.key, norm, self.local[0].version)
            if self._halo_agg is None or self._halo_agg[0] != stamp:
                live("fwd/L0", self._keep_halo_agg, stamp, a_halo, x_halo)
            part = self._halo_agg[1] @ weight
        else:
            if self.dropout > 0 and training:
                x_halo = apply_mask(x_halo, self.halo_ids_t, self.dropout,
                                    dropout_key(self.ctx.seed, self.epoch, 0))
            part = a_halo @ (x_halo @ weight)
        if brows.numel() == z.shape[0]:
            return z + part
        return z.index_add(0, brows, part)

    @torch.no_grad()
    def _keep_halo_agg(self, stamp: tuple, a_halo, x_halo: torch.Tensor) -> None:
        """Keep ``A_halo x_halo`` for the local tier's contents ``stamp`` (made when they
        change: live work, counted whenever it runs)."""
        self._halo_agg = (stamp, a_halo.a @ x_halo)

    def _aggregate_cached_inputs(self, prop, t: torch.Tensor, norm: str, layer: int,
                                 h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``variant=public-code``, layer >= 1: ``A_loc t + A_halo (h_halo W)``.

        The halo input rows ``h_halo`` come through the halo exchange of ``h`` (so
        :meth:`halo_rows` serves them from the tiers, stale, and the gradient of every
        halo row goes back to its owner, as the public code's backward exchange does);
        the receiver multiplies them by the current ``W`` (the public code aggregates,
        then multiplies by W: model/distGCN.py, DistGCNConv.forward).
        """
        a_loc, a_halo, brows = self._split(prop, norm)
        z = a_loc @ t
        if not brows.numel():
            return z
        full = prop.expand(h, layer)
        part = a_halo @ (full[self.owned:] @ weight)
        if brows.numel() == z.shape[0]:
            return z + part
        return z.index_add(0, brows, part)

    def _split(self, prop, norm: str) -> tuple:
        """(local columns of A, halo columns of A over the rows that have any, those
        rows) of the current view, built once per (view, norm)."""
        vkey = (prop.view.key, norm)
        got = self._splits.get(vkey)
        if got is not None:
            return got
        from cdfgnn.models.propagate import SparseMatrix
        mat = prop.matrix(norm)
        # split on the host once per view; the blocks go back to the matrix's device
        crow = mat.a.crow_indices().cpu().numpy()
        col, val = mat.a.col_indices().cpu().numpy(), mat.a.values().cpu().numpy()
        rows_out, n = mat.shape[0], self.owned
        row = np.repeat(np.arange(rows_out), np.diff(crow))
        halo = col >= n

        def csr(r, c, v, nrows, ncols):
            ptr = np.zeros(nrows + 1, dtype=np.int64)
            np.cumsum(np.bincount(r, minlength=nrows), out=ptr[1:])
            return SparseMatrix(ptr, c, v, (nrows, ncols), mat.a.device)

        brows = np.unique(row[halo])
        a_loc = csr(row[~halo], col[~halo], val[~halo], rows_out, n)
        a_halo = csr(np.searchsorted(brows, row[halo]), col[halo] - n, val[halo],
                     brows.size, mat.shape[1] - n)
        got = (a_loc, a_halo, torch.from_numpy(brows).to(mat.a.device))
        self._splits[vkey] = got
        return got

    def halo_rows(self, prop, t: torch.Tensor, key: SyncKey) -> list:
        if not (key.training or self.evaluates_with_method) or key.layer not in self.layers \
                or (key.layer == 0 and self.cache_inputs):
            return super().halo_rows(prop, t, key)
        rows = live(f"fwd/L{key.layer}", self.cached_rows, key,
                    lambda q, idx: t[self.send_lists[q][idx]], True)
        # each owner's halo rows are one contiguous block: views, not copies
        return [rows[a:b] if b > a else None for a, b in self.recv_blocks]

    def halo_grads(self, prop, grad_halo: list, key: SyncKey) -> list:
        """``backward=fresh``: gradients go back for rows fetched fresh this epoch only."""
        if self.params["backward"] == "exact" or key.layer not in self._sent:
            return super().halo_grads(prop, grad_halo, key)
        miss, sels = self._sent[key.layer]
        with self.comm.overhead("cache-check"):       # only the fetched rows' gradients
            out = [g[device_index(miss[r], g)] if g is not None and r.size else None
                   for g, r in zip(grad_halo, self.recv)]
            out = [None if g is None or not g.shape[0] else g for g in out]
        back = self.send(key, out, [int(s.size) for s in sels])
        full = []
        with self.comm.overhead("cache-pick"):        # back onto the owner's send list
            for q, g in enumerate(back):
                if g is None or q == self.comm.rank:
                    full.append(None)
                    continue
                z = g.new_zeros((self.send_lists[q].size, g.shape[1]))
                z[device_index(sels[q], z)] = g
                full.append(z)
        return full

    # ------------------------------------------------------------ the cache
    def _bitmaps(self, req: list) -> list:
        """The request bitmaps as tensors on the run's device (None stays None)."""
        return [None if b is None else torch.from_numpy(b).to(self.device) for b in req]

    def cached_rows(self, key: SyncKey, values, volatile: bool) -> torch.Tensor:
        """All halo rows of ``key.layer``, from the tiers where fresh, the rest fetched.

        ``values(q, idx)``: the rows this rank sends to peer q for positions ``idx`` of
        its send list (owner side).
        """
        layer, epoch, s = key.layer, self.epoch, self.params["staleness"]
        n = self.halo_gids.size
        pos = np.arange(n)
        local = self.local[layer]
        out = None
        with self.comm.overhead("cache-check"):
            hit_l = local.fresh(pos, epoch, s, volatile)
            write = key.training     # evaluation (eval=cached) reads the tiers, never writes
            if write:
                local.touch(pos, hit_l)
            need = np.flatnonzero(~hit_l)
            hit_s = np.zeros(n, dtype=bool)
            if self.shared is not None and need.size:
                spool = self.shared.pools[layer]
                spos = self.shared_pos[need]
                sh = spool.fresh(spos, epoch, s, volatile)
                if spool.tracks_use and write:
                    self.shared.stage(self.comm.rank, layer, "touch", spos, sh)
                if sh.any():
                    got = need[sh]
                    rows_s = self._to_device(spool.get(spos[sh]))
                    hit_s[got] = True
                    if write:
                        local.put(got, rows_s, spool.stamp[spos[sh]].copy())
            miss = ~(hit_l | hit_s)
            # operation ledger: a freshness check (stamp + use bits) per halo row; rows
            # from the shared tier live in host memory: a host-to-device copy on a GPU
            oplog.record("cache", calls=1, bytes=16 * n)
            oplog.record("copy", calls=int(hit_s.any()), bytes=4 * key.width * int(hit_s.sum()))
            # one bit per row of each owner's list: which rows to send
            req = [np.packbits(miss[r]) if r.size else None for r in self.recv]
        if key.training:           # hit rates are training's (eval=cached reads the tiers too)
            self.counts[layer] += (n, int(hit_l.sum()), int(hit_s.sum()))
        self._all_local[layer] = bool(n) and bool(hit_l.all())
        # the request bitmaps travel like the rows (on the run's device: nccl moves no host
        # tensors); their bits are read on the host
        # (on the host, wrapping the bitmaps and reading them back are free ops: hidden
        # from the counting mode, which would pay a Python call each to count nothing; on
        # a GPU they are copies, counted)
        on_host = self.device.type == "cpu"
        bitmaps = oplog.free(self._bitmaps, req) if on_host else self._bitmaps(req)
        asks = send_rows(self.comm, bitmaps, f"{REQ_TAG}/{layer}")
        with self.comm.overhead("cache-check"):
            outgoing, sels = [], [np.zeros(0, np.int64)] * len(asks)
            for q, ask in enumerate(asks):
                size = self.send_lists[q].size
                if ask is None or not size or q == self.comm.rank:
                    outgoing.append(None)
                    continue
                bits = oplog.free(_host_bytes, ask) if on_host else _host_bytes(ask)
                sel = np.flatnonzero(np.unpackbits(bits, count=size))
                sels[q] = sel
                outgoing.append(values(q, sel).detach() if sel.size else None)
            counts = [int(miss[r].sum()) for r in self.recv]
        fresh = self.send(key, outgoing, counts)
        self._sent[layer] = (miss, sels)
        with self.comm.overhead("cache-pick"):
            width = key.width
            if n and hit_l.all():     # steady state: the local pool holds every halo row, in order
                return local.rows
            out = torch.zeros(n, width, device=self.device)
            if hit_l.any():
                out[device_index(hit_l, out)] = local.get(np.flatnonzero(hit_l))
            if hit_s.any():
                # copied into the local tier above unless it is full: read the shared rows
                got = np.flatnonzero(hit_s)
                out[device_index(hit_s, out)] = self._to_device(
                    self.shared.pools[layer].get(self.shared_pos[got]))
            for q, r in enumerate(self.recv):
                m = r[miss[r]]
                if m.size and fresh[q] is not None:
                    out[device_index(m, out)] = fresh[q]
            got = np.flatnonzero(miss)
            if got.size and write:
                rows = out[device_index(got, out)]
                stamps = np.full(got.size, epoch, dtype=np.int64)
                if self.params["variant"] != "public-code":
                    # public code: the local tier fills from shared hits only (op_util.py
                    # pick_cache, add_local=True); fetched rows go to the shared tier
                    local.put(got, rows, stamps)
                if self.shared is not None:
                    self.shared.stage(self.comm.rank, layer, "put", self.shared_pos[got],
                                      self._to_host(rows), stamps)
        return out


def _host_bytes(t: torch.Tensor) -> np.ndarray:
    """A request bitmap's bytes on the host."""
    return t.cpu().numpy()
