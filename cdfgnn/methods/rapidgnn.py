"""``rapidgnn``: deterministic schedule, hot-feature cache, double buffering, prefetch
(RapidGNN, Niam, Kosar & Nine, 2025; arXiv 2509.05207, Sec. 4, Alg. 1).

Mini-batch track, METIS partitions by default. On every worker:

1. **Schedule, precomputed** (``plan``): the batches of every epoch, seeded by
   ``H(s0, w, e, i)`` and equal to what the online baselines sample, are sampled in
   vectorised passes over all batches of several epochs
   (``cdfgnn/sampling/epoch_schedule.py``), written to disk as one compact file per epoch
   (blocks, input ids, locality bitmask; the paper gives no format) and
   read back one epoch at a time
   (never held whole in memory). Training steps read these samples; they do not
   sample. Precompute time (wall and CPU, with a sample/write/count breakdown) is
   recorded apart from the training it serves.
2. **Access counts**: ``freq_e(v)`` = number of the worker's batches of epoch e whose
   input set holds remote vertex v (the paper does not define freq(v); we choose).
3. **Cache**: the ``n_hot`` most used remote rows (ties by vertex id), filled by one
   bulk pull. ``cache_scope=epoch`` (default, Sec. 4's double buffer;
   Eq. 2 / Alg. 1 read as one cache): epoch e's cache is the top
   ``n_hot`` of epoch e's counts; the next epoch's cache is built into the second
   buffer (rows already cached are copied, the rest pulled in one bulk request) and
   swapped at the epoch boundary. ``cache_scope=global``: one cache from the counts of
   the whole run, never swapped (Algorithm 1 read literally).
4. **Prefetcher**: ``prefetch`` (Q) batches ahead; each staged batch takes local rows
   from the shard, remote rows from the cache and pulls only the misses. The queue
   is filled in issue order on the worker's own thread (the collectives of the
   communicator are not thread-safe), so the overlap of a prefetch with the step's
   compute is *modelled* (cdfgnn/train/minibatch.py), not run concurrently. The window
   runs across epoch boundaries: the first batch of epoch e+1 staged in epoch e
   triggers the bulk fill of the second buffer, which is swapped in at the boundary.
   Only the first Q batches of the run are staged on the critical path (pipeline
   fill). ``prefetch=0``: no prefetch, misses are pulled on the critical path and the
   second buffer is filled at the epoch's end.

Input features are static, so the cache is exact: with the same schedule the losses
equal ``distdgl-metis``'s bit for bit (tests/test_rapidgnn.py).

Memory bound (elements): ``2 n_hot d + Q m_max d`` with ``m_max`` the largest input set
of the schedule; the cache buffers and the queue are measured and checked against it.

Device: both cache buffers and every staged batch of the prefetch queue are allocated on
the run's device (the feature store's, ``--device cuda``: GPU memory); the schedule, the
hot-set ids and the hit tests stay numpy on the host, and the index tensors that address
device rows are copied host -> device and counted by the store (epoch-row columns
``h2d_bytes``/``d2h_bytes`` off the CPU).
"""
from __future__ import annotations

import warnings
from collections import deque
from typing import Any

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Param
from cdfgnn.methods.sampled import SampledContext, SampledMethod
from cdfgnn.sampling.epoch_schedule import write_epoch_file
from cdfgnn.sampling.schedule import read_epoch


def top_hot(ids: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` most frequent ids (ties: smaller id first), sorted by id."""
    order = np.lexsort((ids, -counts))
    return np.sort(ids[order[:n]])


@METHODS.register("rapidgnn")
class RapidGNN(SampledMethod):
    name = "rapidgnn"
    default_partitioner = "metis"
    #: the cache buffers and the prefetch queue live on the run's device (``ctx.store``'s)
    supported_devices = ("cpu", "cuda")
    PARAMS = {
        "cache_fraction": Param(0.2, float, check=lambda v: 0.0 <= v <= 1.0,
                                expect="in [0, 1]",
                                doc="n_hot as a fraction of the worker's largest per-epoch "
                                    "set of distinct remote inputs (paper: not given)"),
        "n_hot": Param(-1, int, check=lambda v: v >= -1, expect=">= -1",
                       doc="cache rows per worker (-1: from cache_fraction); larger than "
                           "the remote set is clamped with a warning"),
        "prefetch": Param(4, int, check=lambda v: v >= 0, expect=">= 0",
                          doc="prefetch window Q in batches (0: no prefetch)"),
        "cache_scope": Param("epoch", str, choices=("epoch", "global", "window"),
                             doc="per-epoch hot set, double-buffered (epoch), one cache "
                                 "for the whole run (global), or one hot set per window of "
                                 "`window` consecutive batches of the run, double-buffered "
                                 "(window: the public re-implementation's, "
                                 "arefinniam/greendy-gnn code/prefetcher.py)"),
        "window": Param(16, int, check=lambda v: v >= 1, expect=">= 1",
                        doc="cache_scope=window: batches a hot set serves (the public "
                            "re-implementation's --window_size, default 16)"),
        "reuse_cached": Param(True, bool, doc="a fill copies rows already in the serving "
                                              "cache instead of pulling them again"),
    }

    def check_params(self) -> None:
        p = self.params
        if p["cache_scope"] == "window" and p["prefetch"] > p["window"]:
            raise CdfgnnError(f"method 'rapidgnn': prefetch={p['prefetch']} exceeds "
                              f"window={p['window']}; the two cache buffers serve at most the "
                              f"current and the next window")

    def _key(self, epoch: int, index: int) -> int:
        """Which hot set serves batch ``index`` of ``epoch``."""
        scope = self.params["cache_scope"]
        if scope == "window":
            return (epoch * self.ctx.num_batches + index) // self.params["window"]
        return 0 if scope == "global" else epoch

    # ------------------------------------------------------------------ plan
    def plan(self, ctx: SampledContext) -> dict[str, Any]:
        super().plan(ctx)
        store, sched, rank = ctx.store, ctx.schedule, ctx.store.rank
        cpu_clock = ctx.compute_clock
        wall_span, cpu_span = ctx.wall_clock.start(), cpu_clock.start()
        freq, sizes, nbytes = [], [], 0
        cpu = {"sample": 0.0, "write": 0.0, "count": 0.0}   # where the precompute goes
        self.files = []
        epochs = self._sampled_epochs(sched, ctx.epochs)
        windows = _WindowCounts(self.params["window"]) if self.params["cache_scope"] == "window" \
            else None
        while True:
            c = cpu_clock.start()
            e, ep = next(epochs, (None, None))
            cpu["sample"] += c.stop().seconds()
            if ep is None:
                break
            c = cpu_clock.start()
            inputs = ep.src[0]                       # batches' input sets, concatenated
            is_remote = store.remote_mask(inputs)
            path = ctx.workdir / f"schedule_e{e}.npy"
            nbytes += write_epoch_file(path, ep, is_remote)
            self.files.append(path)
            cpu["write"] += c.stop().seconds()
            c = cpu_clock.start()
            # freq_e(v): a batch's inputs are distinct, so occurrences = batches holding v
            ids, cnt = np.unique(inputs[is_remote], return_counts=True)
            freq.append((ids, cnt))
            if windows is not None:
                windows.add(inputs, is_remote, ep.sizes[0])
            sizes.append(int(ep.sizes[0].max(initial=0)))
            cpu["count"] += c.stop().seconds()
        del ep
        self.m_max = int(max(sizes, default=0))
        # ---- cache size and hot sets
        c = cpu_clock.start()
        distinct = max((f[0].size for f in freq), default=0)
        if windows is not None:
            freq_w = windows.finish()
            distinct = max((f[0].size for f in freq_w), default=0)
        if self.params["cache_scope"] == "global":
            ids_g = np.unique(np.concatenate([f[0] for f in freq]))
            cnt_g = np.zeros(ids_g.size, dtype=np.int64)
            for fid, fc in freq:
                cnt_g[np.searchsorted(ids_g, fid)] += fc
            distinct = int(ids_g.size)
        requested = self.params["n_hot"]
        if requested < 0:
            requested = int(round(self.params["cache_fraction"] * distinct))
        self.n_hot = min(requested, distinct)
        self.clamped = requested > distinct
        if self.clamped:
            warnings.warn(f"rapidgnn: n_hot={requested} exceeds the {distinct} distinct remote "
                          f"inputs of worker {rank}; clamped to {distinct}", stacklevel=2)
        if self.params["cache_scope"] == "global":
            self.hot = [top_hot(ids_g, cnt_g, self.n_hot)]
        elif windows is not None:
            self.hot = [top_hot(ids, cnt, self.n_hot) for ids, cnt in freq_w]
        else:
            self.hot = [top_hot(ids, cnt, self.n_hot) for ids, cnt in freq]
        self.freq_hist = np.bincount(freq[0][1]).tolist() if freq and freq[0][1].size else [0]
        del freq
        cpu["count"] += c.stop().seconds()
        precompute_s = wall_span.stop().seconds()
        precompute_cpu_s = cpu_span.stop().seconds()
        # ---- initial cache: one bulk pull
        fill_span = ctx.wall_clock.start()
        self.cache = (self.hot[0], store.pull(self.hot[0], "fill"))
        self.next: tuple | None = None      # the second buffer, for epoch self.next_epoch
        self.next_epoch = -1                # (its hot-set key, a window with cache_scope=window)
        self.cache_key = 0                  # cache_scope=window: the window served now
        self.cache_peak = self._nbytes(self.cache)
        self.queue_peak = 0
        self.hits_total = self.remote_total = 0
        self.loaded: dict[int, list] = {}
        self.queue: deque = deque()
        # the window spans at most one epoch (two cache buffers: this epoch, the next)
        self.q = min(self.params["prefetch"], ctx.num_batches)
        return {"precompute_s": precompute_s, "precompute_cpu_s": precompute_cpu_s,
                **{f"precompute_{k}_cpu_s": v for k, v in cpu.items()},
                "schedule_bytes": nbytes,
                "cache_build_s": fill_span.stop().seconds()}

    #: input vertices sampled in one vectorised pass of the precompute, at most (several
    #: small epochs share a pass; a large epoch is a pass of its own)
    chunk_inputs = 1 << 20

    def _sampled_epochs(self, sched, epochs: int):
        """``(epoch, EpochArrays)`` in order, as many epochs per vectorised pass as fit
        ``chunk_inputs`` by an upper bound of an epoch's input vertices (per batch: its
        seeds x prod(1 + fan-out), and at most the graph's vertices). The schedule does
        not depend on the grouping: every batch has its own generator."""
        n = sched.graph.num_nodes
        bound = min(sched.train_ids.size * int(np.prod([1 + f for f in sched.fanouts])),
                    sched.num_batches * n)
        per = max(1, self.chunk_inputs // max(1, bound))
        for e in range(0, epochs, per):
            group = list(range(e, min(e + per, epochs)))
            yield from zip(group, sched.epochs_arrays(group))

    @staticmethod
    def _nbytes(cache) -> int:
        return cache[1].numel() * cache[1].element_size()

    # --------------------------------------------------------------- epochs
    def _batches(self, epoch: int) -> list:
        """Epoch ``epoch``'s schedule, streamed in from its file (at most two epochs held)."""
        if epoch not in self.loaded:
            self.loaded[epoch] = read_epoch(self.files[epoch], epoch)
        return self.loaded[epoch]

    def _cache_for(self, epoch: int) -> tuple:
        """The cache serving ``epoch`` (a window's key with ``cache_scope=window``): the
        current buffer, or the second buffer, built (one bulk pull) the first time a batch
        of the next epoch (window) is staged."""
        scope = self.params["cache_scope"]
        if scope == "global" or epoch == (self.cache_key if scope == "window" else self.epoch):
            return self.cache
        if self.next_epoch != epoch:
            self.next = self._build(self.hot[epoch])
            self.next_epoch = epoch
            self.cache_peak = max(self.cache_peak,
                                  self._nbytes(self.cache) + self._nbytes(self.next))
        return self.next

    def _build(self, new_ids: np.ndarray) -> tuple:
        """The second buffer: rows already cached are copied, the rest pulled in bulk."""
        ids, cur = self.cache
        store = self.store
        rows = store.empty_rows(new_ids.size)        # on the run's device, like the cache
        have = np.zeros(new_ids.size, dtype=bool)
        if self.params["reuse_cached"] and ids.size:
            pos = np.minimum(np.searchsorted(ids, new_ids), ids.size - 1)
            have = ids[pos] == new_ids
            store.put(rows, np.flatnonzero(have), store.take(cur, pos[have]))
        store.put(rows, np.flatnonzero(~have), store.pull(new_ids[~have], "fill"))
        return new_ids, rows

    def _stage(self, epoch: int, i: int, mode: str) -> None:
        batch = self._batches(epoch)[i]
        key = self._key(epoch, i)
        ids, cached = self._cache_for(key)
        mask = self.store.remote_mask(batch.inputs)
        rid = batch.inputs[mask]
        pos = np.searchsorted(ids, rid)
        hit = pos < ids.size
        hit[hit] = ids[pos[hit]] == rid[hit]
        store = self.store
        rows = store.empty_rows(rid.size)            # the staged batch: a device buffer
        store.put(rows, np.flatnonzero(hit), store.take(cached, pos[hit]))
        miss = ~hit
        store.put(rows, np.flatnonzero(miss), store.pull(rid[miss], mode))
        self.queue.append((key, int(rid.size), int(hit.sum()),
                           batch, self.store.gather(batch, rows, mask)))

    def inputs(self, epoch: int, index: int):
        q, nb = self.q, self.ctx.num_batches
        g = epoch * nb + index                      # position in the run's step sequence
        if q == 0:
            self._stage(epoch, index, "sync")
        elif g == 0:                                # pipeline fill, once per run
            for k in range(min(q, self.ctx.epochs * nb)):
                self._stage(k // nb, k % nb, "sync")
        key, n_remote, n_hit, batch, x = self.queue.popleft()
        if self.params["cache_scope"] == "window" and key != self.cache_key:
            self.cache = self._cache_for(key)       # built when its first batch was staged
            self.cache_key, self.next, self.next_epoch = key, None, -1
        self.counts["remote_inputs"] += n_remote
        self.counts["cache_hits"] += n_hit
        ahead = g + q
        if q and ahead < self.ctx.epochs * nb:      # the same branch on every worker
            self._stage(ahead // nb, ahead % nb, "background")
        staged = sum(item[-1].numel() * item[-1].element_size() for item in self.queue)
        self.queue_peak = max(self.queue_peak, staged)
        return batch, x

    def on_epoch_end(self, epoch: int) -> dict[str, Any]:
        self.loaded.pop(epoch, None)
        nxt = epoch + 1
        if self.params["cache_scope"] == "epoch" and nxt < self.ctx.epochs:
            self.epoch = -1                          # (no buffer serves between epochs)
            self.cache = self._cache_for(nxt)        # built already unless Q == 0: swap
            self.next, self.next_epoch = None, -1
        self.hits_total += self.counts["cache_hits"]
        self.remote_total += self.counts["remote_inputs"]
        return super().on_epoch_end(epoch)

    def summary(self) -> dict[str, Any]:
        d, q, esz = self.store.dim, self.q, self.store.x.element_size()
        bound = (2 * self.n_hot * d + q * self.m_max * d) * esz
        used = self.cache_peak + self.queue_peak
        if used > bound:
            raise CdfgnnError(f"rapidgnn: cache + prefetch queue used {used} bytes, above the "
                              f"bound 2 n_hot d + Q m_max d = {bound} bytes")
        return {"n_hot": self.n_hot, "cache_clamped": bool(self.clamped), "prefetch_q": q,
                "m_max": self.m_max, "dim": d, "memory_bound_bytes": bound,
                "cache_peak_bytes": self.cache_peak, "queue_peak_bytes": self.queue_peak,
                "memory_used_bytes": used, "within_bound": used <= bound,
                "hit_rate": self.hits_total / self.remote_total if self.remote_total else None,
                "freq_hist_epoch0": self.freq_hist}


class _WindowCounts:
    """Access counts per window of ``size`` consecutive batches of the run (windows run
    across epoch boundaries), streamed epoch by epoch: ``add`` each epoch's concatenated
    inputs, ``finish`` gives ``(ids, counts)`` per window."""

    def __init__(self, size: int):
        self.size = size
        self.pending: list[np.ndarray] = []     # remote inputs of the open window's batches
        self.done: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, inputs: np.ndarray, is_remote: np.ndarray, sizes: np.ndarray) -> None:
        ends = np.cumsum(sizes)
        for b, end in enumerate(ends):
            start = end - sizes[b]
            self.pending.append(inputs[start:end][is_remote[start:end]])
            if len(self.pending) == self.size:
                self._close()

    def _close(self) -> None:
        got = np.concatenate(self.pending) if self.pending else np.zeros(0, np.int64)
        self.done.append(np.unique(got, return_counts=True))
        self.pending = []

    def finish(self) -> list[tuple[np.ndarray, np.ndarray]]:
        if self.pending:
            self._close()
        return self.done
