"""CDFGNN's communication techniques on the vertex-cut gather/scatter (arXiv 2408.00232, Secs. 4-5).

Registered methods (each needs a vertex-cut partitioning):

``cdfgnn-baseline``
    exact gather/scatter (an alias of ``exact`` restricted to vertex-cut: the
    paper's "Baseline").
``cdfgnn-quant``
    exact gather/scatter with every vertex message quantised (``codec``, default
    ``linear-8``; the paper's "Quantify": raw partial sums and aggregates).
``cdfgnn-cache``
    the adaptive vertex cache (Algorithm 2) with threshold adaptation (eqs. 6-7).
``cdfgnn``
    cache + quantisation (``codec`` default ``linear-8``): the full system.

The cache, per layer and direction (forward Z, backward delta), on every rank:

* ``pushed[u]`` (the paper's z^_{i,u}): the contribution this replica last pushed;
  ``agg[u]`` (z^_{.,u}): the cached aggregate. Both start at zero (Sec. 4.1, Alg. 2).
* mirrors whose relative L-inf change ``||z - pushed||_inf > eps ||z||_inf`` send
  the difference to the master (``pushed <- pushed + deq(q(diff))``: error feedback,
  the paper does not say how quantisation meets the cache; we choose error feedback;
  ``error_feedback=false`` gives Alg. 2's literal ``pushed <- z``);
* masters add the differences received and their own changed contribution, mark
  those vertices active, and scatter the cached aggregate of active vertices only;
* the synchronised rows of replicated vertices are the cached aggregates; interior
  vertices (no mirrors) use their exact value (Alg. 2 literally caches them too; we
  choose not to, as it saves no traffic; ``cache_interior=true``
  runs them through the threshold too).

Wire format of a gather or scatter message to a peer: the codec's encoding of the
active rows followed by a bitmap over the peer's index list (``ceil(L/8)`` bytes, both
sides know L); the bitmap's bytes are accounted. The per-row work runs in fused numba
kernels (:mod:`cdfgnn.methods.cdfgnn_kernels`: threshold check, difference, pushed
update and compaction in one pass over a peer's list; persistent work buffers); the
only Python loops run over peers. Cache checks, bitmaps, the cache updates and codec
work are timed with ``comm.overhead("cache")`` and count as communication (paper sec.
8); building the synchronised output tensor from ``z`` and the cached aggregates is
compute, as the baseline's own output tensor is.

Threshold adaptation after every epoch with a training accuracy (eq. 6-7; the paper
does not give the initial epsilon, meanacc or scope; we choose):
one global epsilon for every layer and direction; ``meanacc`` starts at the
first epoch's accuracy; ``rule=digest`` (default; the rule Sec. 4.1's text argues
for) relaxes epsilon (``min(l1 e, e +
xi)``, only if ``e < nu1``) when ``acc > meanacc + mu2`` and tightens it
(``max(l2 e, e - xi)``, only if ``e > nu2``) when ``acc < meanacc - mu1``;
``rule=literal`` swaps the two accuracy conditions, as eq. (6) is printed. Epsilon is
clamped to ``[nu2, nu1]`` after every adaptation. The accuracy is the global training
accuracy of the epoch's evaluation (after the step, exact sync), so every rank
adapts identically.

Epoch columns (``on_epoch_end``): ``epsilon`` (the value used in the epoch),
``send_ratio`` (all cached syncs), ``send_ratio/<dir>/<layer>`` (gather + scatter
rows sent over the rows an exact sync sends; Fig. 7 gives no formula, we choose this) and
``send_ratio/<phase>/<dir>/<layer>``; with ``shadow=true`` (small graphs: an
unaccounted exact sync runs beside the cache, so timings are not meaningful)
``shadow_err/<dir>/<layer>``: max over replicated rows of ``|cached - exact|``
over the max ``|exact|`` of the layer (the Lemma 2 sanity check).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch

from cdfgnn.comm.codecs import CODEC_HELP, send_rows
from cdfgnn.cost import ledger
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods import cdfgnn_kernels as K
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, valid_codec
from cdfgnn.methods.cache_state import CacheState
from cdfgnn.methods.cdfgnn_cache_torch import TorchCachePath
from cdfgnn.methods.exact import Exact


def _nonneg(x) -> bool:
    return x >= 0


@METHODS.register("cdfgnn-baseline")
class CdfgnnBaseline(Exact):
    """CDFGNN's Baseline: exact gather/scatter of every replica's rows."""

    name = "cdfgnn-baseline"
    degenerate = Degenerate({}, "vertex")
    partition_kind = "vertex"
    default_partitioner = "ebv"


@METHODS.register("cdfgnn-quant")
class CdfgnnQuant(CdfgnnBaseline):
    """CDFGNN's Quantify: exact gather/scatter, every vertex message linear-B quantised."""

    name = "cdfgnn-quant"
    degenerate = Degenerate({"codec": "none"}, "vertex")
    PARAMS = {"codec": Param("linear-8", str, check=valid_codec, expect=CODEC_HELP,
                             doc="message encoding of every vertex row sent")}


def _count_kernel(checked: int, moved: int, width: int, kind: str = "cache") -> None:
    """Operation ledger: a numba cache kernel as the one GPU kernel it would be; it
    reads two rows (current, cached) per checked row and writes / reads one per moved
    row (cdfgnn.cost.ledger)."""
    ledger.record(kind, calls=1, bytes=4 * width * (2 * checked + 2 * moved) + 8 * checked)


class _Lists:
    """Per-peer index lists concatenated for the kernels, with bitmap offsets."""

    def __init__(self, lists: list[np.ndarray]):
        self.lists = [np.ascontiguousarray(i, dtype=np.int64) for i in lists]
        self.idx = (np.concatenate(self.lists) if self.lists else np.zeros(0, np.int64))
        sizes = np.array([len(i) for i in self.lists], dtype=np.int64)
        self.off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.boff = np.concatenate([[0], np.cumsum(-(-sizes // 8))]).astype(np.int64)
        self.bitmap = np.zeros(int(self.boff[-1]), dtype=np.uint8)
        self.counts = np.zeros(len(self.lists), dtype=np.int64)
        self.sel = np.zeros(len(self.idx), dtype=np.int64)
        self.sizes = sizes
        self._rows: dict[int, np.ndarray] = {}
        self._wire_off: dict[int, np.ndarray] = {}

    def block(self, width: int, lossless: bool) -> tuple[np.ndarray, np.ndarray]:
        """(float32 rows block, row offset of every peer's segment) for a kernel's output.

        Lossy codec: a persistent ``[len(idx), width]`` block, segments at ``off`` (the
        codec encodes them). Lossless: a fresh wire buffer holding every peer's message
        (rows, then the bitmap; room for the bitmap after the largest row count), so
        the messages are views of it and no copy is made."""
        if not lossless:
            buf = self._rows.get(width)
            if buf is None:
                buf = self._rows[width] = np.zeros((len(self.idx), width), dtype=np.float32)
            return buf, self.off
        ooff = self._wire_off.get(width)
        if ooff is None:
            extra = -(-(self.boff[1:] - self.boff[:-1]) // (4 * width))
            ooff = self._wire_off[width] = np.concatenate(
                [[0], np.cumsum(self.sizes + extra)]).astype(np.int64)
        return np.empty((int(ooff[-1]), width), dtype=np.float32), ooff


@METHODS.register("cdfgnn-cache")
class CdfgnnCache(TorchCachePath, CdfgnnBaseline):
    """CDFGNN's adaptive vertex cache (Algorithm 2, eqs. 6-7): the numba kernels on the
    CPU, the torch path (``cdfgnn_cache_torch.py``) on any other device."""

    name = "cdfgnn-cache"
    degenerate = Degenerate({"epsilon": 0.0, "adaptive": False}, "vertex")
    supported_devices = ("cpu", "cuda")
    supported_dtypes = ("float32",)  # the numba kernels (cdfgnn_kernels) are float32
    #: "numba" | "torch" | None (by the rows' device); tests force "torch" on the CPU
    _kernel: str | None = None

    def count_key(self, epoch: int):
        """None: which rows a pass sends and caches follows their values."""
        return None
    PARAMS = {
        "epsilon": Param(0.001, float, check=_nonneg, expect=">= 0",
                         doc="initial relative L-inf threshold (paper silent; we choose nu2)"),
        "adaptive": Param(True, bool, doc="adapt epsilon after every epoch (eqs. 6-7)"),
        "rule": Param("digest", str, choices=("digest", "literal"),
                      doc="digest: relax on a rise (Sec. 4.1); literal: eq. (6) as printed"),
        "mu1": Param(0.001, float, check=_nonneg, expect=">= 0"),
        "mu2": Param(0.02, float, check=_nonneg, expect=">= 0"),
        "nu1": Param(0.3, float, check=_nonneg, expect=">= 0", doc="upper bound of epsilon"),
        "nu2": Param(0.001, float, check=_nonneg, expect=">= 0", doc="lower bound of epsilon"),
        "xi": Param(0.01, float, check=_nonneg, expect=">= 0", doc="largest step"),
        "lambda1": Param(1.05, float, check=lambda x: x >= 1, expect=">= 1"),
        "lambda2": Param(0.9, float, check=lambda x: 0 < x <= 1, expect="in (0, 1]"),
        "ema": Param(0.8, float, check=lambda x: 0 <= x < 1, expect="in [0, 1)",
                     doc="weight of the old meanacc in eq. (7)"),
        "cache_interior": Param(False, bool, doc="run vertices without mirrors through the "
                                                 "cache too (literal Alg. 2)"),
        "error_feedback": Param(True, bool, doc="sender adds deq(q(diff)) to its pushed "
                                                "copy (our choice); false: pushed <- z"),
        "shadow": Param(False, bool, doc="exact shadow sync: true relative error per layer"),
    }

    def check_params(self) -> None:
        p = self.params
        if p["nu2"] > p["nu1"]:
            raise CdfgnnError(f"method {self.name!r}: nu2={p['nu2']} must be <= nu1={p['nu1']}")

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.eps = float(self.params["epsilon"])
        self.meanacc: float | None = None
        self._state: dict[tuple[int, str], CacheState] = {}
        self._sent: dict[str, list[int]] = defaultdict(lambda: [0, 0])   # tag -> [sent, exact]
        self._shadow_err: dict[str, float] = {}

    # ----------------------------------------------------------------- setup
    def setup(self, ctx) -> None:
        super().setup(ctx)
        book = ctx.book
        self._send = [torch.from_numpy(i).to(torch.int64) for i in book.send_idx]
        self._recv = [torch.from_numpy(i).to(torch.int64) for i in book.recv_idx]
        mirrors = (torch.cat(self._send) if self._send else torch.zeros(0, dtype=torch.int64))
        if mirrors.numel() != torch.unique(mirrors).numel():
            raise CdfgnnError(f"method {self.name!r}: a mirror row is sent to two masters; "
                              "the vertex cache needs one master per replicated vertex")
        if self.params["cache_interior"]:
            masters = torch.arange(book.num_owned, dtype=torch.int64)
        else:
            nonempty = [r for r in self._recv if r.numel()]
            masters = (torch.unique(torch.cat(nonempty)) if nonempty
                       else torch.zeros(0, dtype=torch.int64))
        self._masters = masters
        self._cached = torch.cat([masters, mirrors])   # rows whose value comes from the cache
        self._wire_dtype = self.codec.encode(torch.zeros(1, 1)).dtype
        # the kernels' view of the same lists (cdfgnn_kernels.py)
        self._gather = _Lists([i.numpy() for i in self._send])
        self._scatter = _Lists([i.numpy() for i in self._recv])
        self._masters_np = masters.numpy()
        self._lossless = self.codec.exact and self.codec.bits == 32
        if not self.params["error_feedback"]:
            self._feedback = K.FEEDBACK_LITERAL
        else:
            self._feedback = K.FEEDBACK_EXACT if self._lossless else K.FEEDBACK_LATER
        self._active: np.ndarray | None = None
        self._is_cached: np.ndarray | None = None

    def _row_flags(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(active flags, zeroed; cached flags) over the ``rows`` local rows."""
        if self._active is None or len(self._active) != rows:
            self._active = np.zeros(rows, dtype=np.uint8)
            self._is_cached = np.zeros(rows, dtype=np.uint8)
            self._is_cached[self._cached.numpy()] = 1
        else:
            self._active.fill(0)
        return self._active, self._is_cached

    # ------------------------------------------------------------- the cache
    def replica_sync(self, prop, z: torch.Tensor, layer: int, direction: str,
                     training: bool) -> torch.Tensor:
        if not training:
            return super().replica_sync(prop, z, layer, direction, training)
        z = z.detach().to(torch.float32).contiguous()
        if (self._kernel or ("numba" if z.device.type == "cpu" else "torch")) == "torch":
            return self._torch_replica_sync(z, layer, direction)
        rows, width = int(z.shape[0]), int(z.shape[1])
        st = self._state.get((layer, direction))
        if st is None:
            st = self._state[(layer, direction)] = CacheState(rows, width)
        gkey = SyncKey(layer, direction, "gather", True, width)
        skey = SyncKey(layer, direction, "scatter", True, width)
        comm, g, s = self.comm, self._gather, self._scatter
        zn = z.numpy()
        eps = np.float32(self.eps)
        # phase 1: mirrors send the differences that passed the threshold
        with comm.overhead("cache"):
            diff, ooff = g.block(width, self._lossless)
            K.push_changed(zn, st.pushed_np, g.idx, g.off, eps, self._feedback, g.bitmap,
                           g.boff, diff, ooff, g.sel, g.counts)
            _count_kernel(len(g.idx), int(g.counts.sum()), width)   # the check
            wires = self._wires(g, diff, ooff, gkey, st.pushed_np)
        self._count(gkey, g.counts, self._send)
        incoming = self.send_encoded(gkey, wires, g.counts.tolist())
        # phase 2: masters add the differences and their own changed contribution
        with comm.overhead("cache"):
            active, cached = self._row_flags(rows)
            for q, idx in enumerate(s.lists):
                if incoming[q] is not None and len(idx):
                    bitmap, vals = self._decode(incoming[q], len(idx), width)
                    K.add_flagged(st.agg_np, active, idx, bitmap, vals)
            K.master_own(zn, st.pushed_np, st.agg_np, active, self._masters_np, eps)
            _count_kernel(len(s.idx), len(s.idx), width)             # add the differences
            _count_kernel(len(self._masters_np), len(self._masters_np), width)
            # phase 3: scatter the cached aggregate of active vertices
            sel_rows, ooff = s.block(width, self._lossless)
            K.select_active(st.agg_np, active, s.idx, s.off, s.bitmap, s.boff, sel_rows, ooff,
                            s.counts)
            _count_kernel(len(s.idx), int(s.counts.sum()), width)    # the selection
            wires = self._wires(s, sel_rows, ooff, skey, None)
        self._count(skey, s.counts, self._recv)
        incoming = self.send_encoded(skey, wires, s.counts.tolist())
        with comm.overhead("cache"):
            for q, idx in enumerate(g.lists):
                if incoming[q] is not None and len(idx):
                    bitmap, vals = self._decode(incoming[q], len(idx), width)
                    K.set_flagged(st.agg_np, idx, bitmap, vals)
            _count_kernel(len(g.idx), len(g.idx), width)
        # the synchronised tensor (the baseline builds its own, as compute, too)
        out = torch.empty_like(z)
        K.assemble(zn, st.agg_np, cached, out.numpy())
        _count_kernel(rows, rows, width, "elementwise")
        if self.params["shadow"]:
            self._shadow(z, out, layer, direction)
        return out

    def _wires(self, lists: _Lists, block: np.ndarray, ooff: np.ndarray, key: SyncKey,
               pushed: np.ndarray | None) -> list[torch.Tensor | None]:
        """Per peer: one uint8 buffer, the codec's encoding of its selected rows (the
        segment of ``block`` from row ``ooff[q]``) followed by its bitmap (None when no
        row is selected). Lossless codec: the bitmap is written after the rows in the
        wire buffer ``block`` and the message is a view of it. With ``pushed`` and a
        lossy codec under error feedback, the rows as the receiver decodes them are
        added to ``pushed``."""
        wires: list[torch.Tensor | None] = []
        width = block.shape[1]
        raw = block.reshape(-1).view(np.uint8) if self._lossless else None
        gen = seed = None
        for q, n in enumerate(lists.counts.tolist()):
            if not n:
                wires.append(None)
                continue
            lo = int(ooff[q])
            bitmap = lists.bitmap[lists.boff[q]:lists.boff[q + 1]]
            if raw is not None:
                start, end = 4 * width * lo, 4 * width * (lo + n)
                raw[end:end + len(bitmap)] = bitmap
                wires.append(torch.from_numpy(raw[start:end + len(bitmap)]))
                continue
            rows = block[lo:lo + n]
            if gen is None:
                gen = self.generator(key)
                seed = gen.initial_seed()
            else:   # every peer's encoding starts from the same seeded state
                gen.manual_seed(seed)
            enc = self.codec.encode(torch.from_numpy(rows), gen)
            if pushed is not None and self._feedback == K.FEEDBACK_LATER:
                sent = self.codec.decode(enc, n, width).reshape(n, width)
                first = int(lists.off[q])
                K.add_rows(pushed, lists.sel[first:first + n],
                           np.ascontiguousarray(sent.numpy(), dtype=np.float32))
            wires.append(torch.cat([enc.contiguous().view(torch.uint8).reshape(-1),
                                    torch.from_numpy(bitmap)]))
        return wires

    def _decode(self, wire: torch.Tensor, length: int, width: int):
        """(bitmap as numpy uint8, decoded rows as C-contiguous float32 numpy)."""
        nb = -(-length // 8)
        raw = wire.numpy()
        bitmap, payload = raw[raw.shape[0] - nb:], raw[:raw.shape[0] - nb]
        per_row = self.codec.wire_bytes(1, width)
        n = payload.shape[0] // per_row
        if n * per_row != payload.shape[0]:
            raise CdfgnnError(f"method {self.name!r}: a cache message of {payload.shape[0]} "
                              f"payload bytes is not a whole number of {per_row}-byte rows")
        if self._lossless:
            return bitmap, payload.view(np.float32).reshape(n, width)
        enc = torch.from_numpy(payload)
        if self._wire_dtype != torch.uint8:
            enc = enc.view(self._wire_dtype)
        vals = self.codec.decode(enc, n, width).reshape(n, width)
        return bitmap, np.ascontiguousarray(vals.numpy(), dtype=np.float32)

    def _count(self, key: SyncKey, counts, lists: list[torch.Tensor]) -> None:
        c = self._sent[key.tag]
        c[0] += int(np.sum(counts))
        c[1] += sum(int(i.numel()) for q, i in enumerate(lists) if q != self.comm.rank)

    def _shadow(self, z, out, layer, direction) -> None:
        """Exact sync outside the accounting (a diagnostic exchange: not counted)."""
        def a2a(rows):
            return send_rows(self.comm, rows, "shadow", accounted=False)

        send, recv, _, rows = self._device_lists(z.device)
        inc = a2a([z[i] if i.numel() else None for i in send])
        exact = z.clone()
        for q, idx in enumerate(recv):
            if idx.numel() and inc[q] is not None:
                exact.index_add_(0, idx, inc[q])
        inc = a2a([exact[i] if i.numel() else None for i in recv])
        for q, idx in enumerate(send):
            if idx.numel() and inc[q] is not None:
                exact[idx] = inc[q]
        tag = f"{direction}/{layer}"
        if rows.numel():
            err = float((out[rows] - exact[rows]).abs().max())
            ref = float(exact[rows].abs().max())
            self._shadow_err[tag] = (max(self._shadow_err.get(tag, (0.0, 0.0))[0], err),
                                     max(self._shadow_err.get(tag, (0.0, 0.0))[1], ref))
        else:
            self._shadow_err.setdefault(tag, (0.0, 0.0))

    # -------------------------------------------------------- epoch columns
    def on_epoch_end(self, epoch: int, metrics: dict[str, float]) -> dict[str, Any]:
        local = {"sent": dict(self._sent), "shadow": dict(self._shadow_err)}
        gathered = self.comm.all_gather_object(local)
        self._sent.clear()
        self._shadow_err.clear()
        row: dict[str, Any] = {"epsilon": self.eps}
        sent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for g in gathered:
            for tag, (s, e) in g["sent"].items():
                sent[tag][0] += s
                sent[tag][1] += e
        tot = [0, 0]
        per_sync: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for tag, (s, e) in sorted(sent.items()):
            row[f"send_ratio/{tag}"] = s / e if e else 0.0
            sync = tag.split("/", 1)[1]
            per_sync[sync][0] += s
            per_sync[sync][1] += e
            tot[0] += s
            tot[1] += e
        for sync, (s, e) in sorted(per_sync.items()):
            row[f"send_ratio/{sync}"] = s / e if e else 0.0
        row["send_ratio"] = tot[0] / tot[1] if tot[1] else 0.0
        row["rows_sent"] = tot[0]
        shadow: dict[str, tuple[float, float]] = {}
        for g in gathered:
            for tag, (err, ref) in g["shadow"].items():
                old = shadow.get(tag, (0.0, 0.0))
                shadow[tag] = (max(old[0], err), max(old[1], ref))
        for tag, (err, ref) in sorted(shadow.items()):
            row[f"shadow_err/{tag}"] = err / ref if ref > 0 else 0.0
        self._adapt(metrics.get("train"))
        return row

    def _adapt(self, acc: float | None) -> None:
        """Eqs. (6)-(7), compared with the previous meanacc, then the EMA update."""
        p = self.params
        if not p["adaptive"] or acc is None:
            return
        if self.meanacc is None:
            self.meanacc = float(acc)
            return
        eps, mean = self.eps, self.meanacc
        rise, fall = acc > mean + p["mu2"], acc < mean - p["mu1"]
        relax, tighten = (rise, fall) if p["rule"] == "digest" else (fall, rise)
        if relax and eps < p["nu1"]:
            eps = min(p["lambda1"] * eps, eps + p["xi"])
        elif tighten and eps > p["nu2"]:
            eps = max(p["lambda2"] * eps, eps - p["xi"])
        self.eps = min(max(eps, p["nu2"]), p["nu1"])
        self.meanacc = p["ema"] * mean + (1 - p["ema"]) * float(acc)


@METHODS.register("cdfgnn")
class Cdfgnn(CdfgnnCache):
    """CDFGNN: the adaptive cache with linear-B quantised messages (default linear-8)."""

    name = "cdfgnn"
    degenerate = Degenerate({"codec": "none", "epsilon": 0.0, "adaptive": False},
                            "vertex")
    PARAMS = {"codec": Param("linear-8", str, check=valid_codec, expect=CODEC_HELP,
                             doc="message encoding of every vertex row sent")}
