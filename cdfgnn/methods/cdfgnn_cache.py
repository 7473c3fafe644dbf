"""CDFGNN's communication techniques on the vertex-cut gather/scatter (digest sec. 2.4-2.6).

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
  ``agg[u]`` (z^_{.,u}): the cached aggregate. Both start at zero (digest sec. 2.4).
* mirrors whose relative L-inf change ``||z - pushed||_inf > eps ||z||_inf`` send
  the difference to the master (``pushed <- pushed + deq(q(diff))``: error feedback,
  digest Q6; ``error_feedback=false`` gives the literal ``pushed <- z``);
* masters add the differences received and their own changed contribution, mark
  those vertices active, and scatter the cached aggregate of active vertices only;
* the synchronised rows of replicated vertices are the cached aggregates; interior
  vertices (no mirrors) use their exact value (digest Q5; ``cache_interior=true``
  runs them through the threshold too).

Wire format of a gather or scatter message to a peer: a bitmap over the peer's
index list (``ceil(L/8)`` bytes, both sides know L) followed by the codec's encoding
of the active rows; the bitmap's bytes are accounted. All checks are vectorised over
rows; the only Python loops run over peers. Cache checks, bitmaps and codec work are
timed with ``comm.overhead("cache")`` and count as communication (paper sec. 8).

Threshold adaptation after every epoch with a training accuracy (eq. 6-7, digest
Q1-Q3): one global epsilon for every layer and direction; ``meanacc`` starts at the
first epoch's accuracy; ``rule=digest`` (default) relaxes epsilon (``min(l1 e, e +
xi)``, only if ``e < nu1``) when ``acc > meanacc + mu2`` and tightens it
(``max(l2 e, e - xi)``, only if ``e > nu2``) when ``acc < meanacc - mu1``;
``rule=literal`` swaps the two accuracy conditions, as eq. (6) is printed. Epsilon is
clamped to ``[nu2, nu1]`` after every adaptation. The accuracy is the global training
accuracy of the epoch's evaluation (after the step, exact sync), so every rank
adapts identically.

Epoch columns (``on_epoch_end``): ``epsilon`` (the value used in the epoch),
``send_ratio`` (all cached syncs), ``send_ratio/<dir>/<layer>`` (gather + scatter
rows sent over the rows an exact sync sends, digest Q18) and
``send_ratio/<phase>/<dir>/<layer>``; with ``shadow=true`` (small graphs: an
unaccounted exact sync runs beside the cache, so timings are not meaningful)
``shadow_err/<dir>/<layer>``: max over replicated rows of ``|cached - exact|``
over the max ``|exact|`` of the layer (the Lemma 2 sanity check).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from cdfgnn.comm.codecs import CODEC_HELP, pack_bits, unpack_bits
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Param, SyncKey, _valid_codec
from cdfgnn.methods.exact import Exact


def _nonneg(x) -> bool:
    return x >= 0


@METHODS.register("cdfgnn-baseline")
class CdfgnnBaseline(Exact):
    """CDFGNN's Baseline: exact gather/scatter of every replica's rows."""

    name = "cdfgnn-baseline"
    partition_kind = "vertex"
    default_partitioner = "ebv"


@METHODS.register("cdfgnn-quant")
class CdfgnnQuant(CdfgnnBaseline):
    """CDFGNN's Quantify: exact gather/scatter, every vertex message linear-B quantised."""

    name = "cdfgnn-quant"
    PARAMS = {"codec": Param("linear-8", str, check=_valid_codec, expect=CODEC_HELP,
                             doc="message encoding of every vertex row sent")}


class _CacheState:
    """Per (layer, direction): the last pushed contribution and the cached aggregate."""

    __slots__ = ("pushed", "agg")

    def __init__(self, rows: int, width: int):
        self.pushed = torch.zeros(rows, width)
        self.agg = torch.zeros(rows, width)


@METHODS.register("cdfgnn-cache")
class CdfgnnCache(CdfgnnBaseline):
    """CDFGNN's adaptive vertex cache (Algorithm 2, eqs. 6-7)."""

    name = "cdfgnn-cache"
    PARAMS = {
        "epsilon": Param(0.001, float, check=_nonneg, expect=">= 0",
                         doc="initial relative L-inf threshold (digest Q2: nu2)"),
        "adaptive": Param(True, bool, doc="adapt epsilon after every epoch (eqs. 6-7)"),
        "rule": Param("digest", str, choices=("digest", "literal"),
                      doc="digest: relax on an accuracy rise; literal: eq. (6) as printed"),
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
                                                 "cache too (literal Alg. 2, digest Q5)"),
        "error_feedback": Param(True, bool, doc="sender adds deq(q(diff)) to its pushed "
                                                "copy (digest Q6); false: pushed <- z"),
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
        self._state: dict[tuple[int, str], _CacheState] = {}
        self._sent: dict[str, list[int]] = defaultdict(lambda: [0, 0])   # tag -> [sent, exact]
        self._shadow_err: dict[str, float] = {}

    # ----------------------------------------------------------------- setup
    def setup(self, ctx) -> None:
        super().setup(ctx)
        book = ctx.book
        self._send = [torch.from_numpy(i).to(torch.int64) for i in book.send_idx]
        self._recv = [torch.from_numpy(i).to(torch.int64) for i in book.recv_idx]
        mirrors = (torch.cat(self._send) if self._send else torch.zeros(0, dtype=torch.int64))
        if self.params["cache_interior"]:
            masters = torch.arange(book.num_owned, dtype=torch.int64)
        else:
            nonempty = [r for r in self._recv if r.numel()]
            masters = (torch.unique(torch.cat(nonempty)) if nonempty
                       else torch.zeros(0, dtype=torch.int64))
        self._masters = masters
        self._cached = torch.cat([masters, mirrors])   # rows whose value comes from the cache
        self._wire_dtype = self.codec.encode(torch.zeros(1, 1)).dtype

    # ------------------------------------------------------------- the cache
    def replica_sync(self, prop, z: torch.Tensor, layer: int, direction: str,
                     training: bool) -> torch.Tensor:
        if not training:
            return super().replica_sync(prop, z, layer, direction, training)
        width = int(z.shape[1])
        st = self._state.get((layer, direction))
        if st is None:
            st = self._state[(layer, direction)] = _CacheState(z.shape[0], width)
        gkey = SyncKey(layer, direction, "gather", True, width)
        skey = SyncKey(layer, direction, "scatter", True, width)
        z = z.detach()
        comm = self.comm
        # phase 1: mirrors send the differences that passed the threshold
        with comm.overhead("cache"):
            changed = torch.zeros(z.shape[0], dtype=torch.bool)
            mirrors = self._cached[self._masters.numel():]
            changed[mirrors] = self._over_threshold(z[mirrors], st.pushed[mirrors])
            wires, counts = self._pack(self._send, changed,
                                       lambda rows, mask: self._push(st, z, rows, mask, gkey))
        self._count(gkey, counts, self._send)
        incoming = comm.all_to_all(wires, tag=gkey.tag, rows=counts)
        # phase 2: masters add the differences and their own changed contribution
        with comm.overhead("cache"):
            active = torch.zeros(z.shape[0], dtype=torch.bool)
            for q, idx in enumerate(self._recv):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._decode(incoming[q], idx.numel(), width)
                rows = idx[mask]
                st.agg.index_add_(0, rows, rows_val)
                active[rows] = True
            m = self._masters
            own = m[self._over_threshold(z[m], st.pushed[m])]
            st.agg[own] += z[own] - st.pushed[own]
            st.pushed[own] = z[own]
            active[own] = True
            # phase 3: scatter the cached aggregate of active vertices
            wires, counts = self._pack(
                self._recv, active,
                lambda rows, mask: self._encode(st.agg[rows], mask, skey, feedback=False)[0])
        self._count(skey, counts, self._recv)
        incoming = comm.all_to_all(wires, tag=skey.tag, rows=counts)
        with comm.overhead("cache"):
            for q, idx in enumerate(self._send):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._decode(incoming[q], idx.numel(), width)
                st.agg[idx[mask]] = rows_val
            out = z.clone()
            out[self._cached] = st.agg[self._cached]
        if self.params["shadow"]:
            self._shadow(z, out, layer, direction)
        return out

    @staticmethod
    def _pack(lists: list[torch.Tensor], flags: torch.Tensor, encode) -> tuple[list, list]:
        """Per peer: ``encode(rows, mask)`` of the flagged rows of its index list (None
        when none is flagged), and the row counts."""
        wires, counts = [], []
        for idx in lists:
            mask = flags[idx]
            rows = idx[mask]
            wires.append(encode(rows, mask) if rows.numel() else None)
            counts.append(int(rows.numel()))
        return wires, counts

    def _push(self, st: _CacheState, z: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor,
              key: SyncKey) -> torch.Tensor:
        """A mirror's message: the differences since the last push; updates ``pushed``."""
        wire, sent = self._encode(z[rows] - st.pushed[rows], mask, key)
        if self.params["error_feedback"]:
            st.pushed[rows] += sent
        else:
            st.pushed[rows] = z[rows]
        return wire

    def _over_threshold(self, z: torch.Tensor, pushed: torch.Tensor) -> torch.Tensor:
        """Rows whose relative L-inf change since the last push exceeds epsilon (Q4:
        a zero row is sent when its difference is non-zero)."""
        if not z.numel():
            return torch.zeros(z.shape[0], dtype=torch.bool)
        return (z - pushed).abs().amax(1) > self.eps * z.abs().amax(1)

    def _encode(self, rows: torch.Tensor, mask: torch.Tensor, key: SyncKey,
                feedback: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One uint8 buffer: bitmap over the index list + encoded rows; and (if asked)
        the rows as the receiver decodes them (for error feedback)."""
        bitmap = pack_bits(mask.to(torch.int32).reshape(1, -1), 1).reshape(-1)
        enc = self.codec.encode(rows, self.generator(key))
        payload = enc.contiguous().view(torch.uint8).reshape(-1)
        sent = None
        if feedback:
            n, d = rows.shape
            sent = rows if self.codec.exact else self.codec.decode(enc, n, d).reshape(n, d)
        return torch.cat([bitmap, payload]), sent

    def _decode(self, wire: torch.Tensor, length: int, width: int):
        nb = -(-length // 8)
        mask = unpack_bits(wire[:nb].reshape(1, -1), 1, length).reshape(-1).to(torch.bool)
        n = int(mask.sum())
        payload = wire[nb:]
        if self._wire_dtype != torch.uint8:
            payload = payload.clone().view(self._wire_dtype)
        return mask, self.codec.decode(payload, n, width).reshape(n, width)

    def _count(self, key: SyncKey, counts: list[int], lists: list[torch.Tensor]) -> None:
        c = self._sent[key.tag]
        c[0] += sum(counts)
        c[1] += sum(int(i.numel()) for q, i in enumerate(lists) if q != self.comm.rank)

    def _shadow(self, z, out, layer, direction) -> None:
        """Exact sync outside the accounting (the backend's own all-to-all)."""
        a2a = self.comm._all_to_all_impl
        inc = a2a([z[i] if i.numel() else None for i in self._send])
        exact = z.clone()
        for q, idx in enumerate(self._recv):
            if idx.numel() and inc[q] is not None:
                exact.index_add_(0, idx, inc[q])
        inc = a2a([exact[i] if i.numel() else None for i in self._recv])
        for q, idx in enumerate(self._send):
            if idx.numel() and inc[q] is not None:
                exact[idx] = inc[q]
        rows = self._cached
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
    PARAMS = {"codec": Param("linear-8", str, check=_valid_codec, expect=CODEC_HELP,
                             doc="message encoding of every vertex row sent")}
