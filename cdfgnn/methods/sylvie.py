"""Sylvie (Zhang et al.): low-bit boundary communication, synchronous or pipelined.

``sylvie-s``
    Sylvie-S (arXiv 2303.01277, Algs. 1-2): every halo activation (forward) and every halo
    gradient (backward) is sent with the stochastic ``bits``-bit codec
    (``cdfgnn.comm.codecs``: per-row float16 min and scale, stochastic rounding,
    bit-packed values; ``bits=16`` is a float16 cast, ``bits=32`` plain float32,
    which makes ``sylvie-s`` equal to ``exact``).
``sylvie-a``
    Sylvie-A (the paper's pipelined variant): the same messages, overlapped with computation: every
    training sync point consumes the rows received at the previous epoch (the
    engine's shared stale exchange; the first epoch consumes zeros, as the public code does,
    unless ``warm_start``). ``staleness_bound=k`` is the Bounded Staleness Adaptor
    (the paper does not fix the schedule): epoch ``e`` (0-based) runs fully synchronously when
    ``(e + 1) mod k == 0`` (as in the public code); ``k=1`` makes every epoch synchronous,
    i.e. ``sylvie-s``. The default (0) never synchronises.

``bit_groups`` picks how a message's rows get their widths: ``uniform`` (default, the
paper: every boundary value at ``bits``) or ``degree``, the authors' public code
(zxmeng98/Sylvie, ``helper/utils.py:318`` ``boundary_imp_group``,
``helper/feature_buffer_degree.py:471`` ``__quant_data_ada``, ``train.py:353``
``start_bits = [1, 2, 4, 8]``): the boundary rows between two parts are split by the
empirical CDF of their in-degree over that boundary list into G equal-probability
groups, with widths ``bits, 2 bits, ..., 8`` (G = 4 at ``bits=1``: the lowest-degree
quarter 1 bit, the highest 8 bits), forward rows and backward gradients alike. Both
sides compute the groups from their own aligned index lists, so no label travels.

``quantize_all`` is Table 4's "Quant All" variant (its tensors are our choice): besides the
messages, every local row entering neighbour aggregation is quantised and
dequantised with the same codec in the forward pass, and its gradient in the
backward pass (so every row the aggregation or GAT's attention reads, local or halo,
is low-bit). Self terms (GCN's ``d~^-1`` term, GraphSAGE's ``W_s h_v``) read the rows
unquantised.
"""
from __future__ import annotations

import numpy as np
import torch

from cdfgnn.comm.codecs import STOCHASTIC_BITS, Codec, get_codec
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy

BIT_GROUPS = ("uniform", "degree")
#: the public code's start_bits (train.py:353): group widths from the lowest-degree group
GROUP_BITS = (1, 2, 4, 8)


class _LowBit(SyncStrategy):
    """Sylvie's Low-bit Module on every boundary message (codec from ``bits``)."""

    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    PARAMS = {
        "bits": Param(1, int, choices=STOCHASTIC_BITS,
                      doc="bits per communicated value (stochastic-b codec; 16: fp16, 32: fp32)"),
        "quantize_all": Param(False, bool,
                              doc="also quantise every local row entering aggregation "
                                  "and its gradient (Table 4 'Quant All')"),
        "bit_groups": Param("uniform", str, choices=BIT_GROUPS,
                            doc="uniform: every message value at bits; degree: the public "
                                "code's in-degree groups at bits, 2 bits, ..., 8"),
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.codec = get_codec(f"stochastic-{self.params['bits']}")

    def check_params(self) -> None:
        if self.params["codec"] != "none":
            raise CdfgnnError(f"method {self.name!r}: parameter codec={self.params['codec']!r}: "
                              f"Sylvie's codec is set by bits= (valid: "
                              f"{', '.join(map(str, STOCHASTIC_BITS))})")
        if self.params["bit_groups"] == "degree" and self.params["bits"] not in GROUP_BITS:
            raise CdfgnnError(f"method {self.name!r}: bit_groups='degree' needs bits in "
                              f"{', '.join(map(str, GROUP_BITS))} (the lowest group's width), "
                              f"got bits={self.params['bits']}")

    def setup(self, ctx) -> None:
        super().setup(ctx)
        self._group_codecs: dict[tuple[str, str], list] = {}

    def codec_for(self, key: SyncKey, outgoing: list):
        if self.params["bit_groups"] == "uniform" or key.phase != "halo":
            return self.codec
        cached = self._group_codecs.get((key.phase, key.direction))
        if cached is None:
            out_lists, in_lists = self.index_lists(key)
            widths = GROUP_BITS[GROUP_BITS.index(self.params["bits"]):]
            deg = np.asarray(self.book.global_degree)
            cached = [_DegreeGroups(widths, degree_groups(deg[np.asarray(o)], len(widths)),
                                    degree_groups(deg[np.asarray(i)], len(widths)))
                      for o, i in zip(out_lists, in_lists)]
            self._group_codecs[(key.phase, key.direction)] = cached
        return cached

    def aggregate(self, prop, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        if not self.params["quantize_all"] or self.codec.exact:
            return super().aggregate(prop, t, norm, layer)
        return prop.matrix(norm) @ self._quantized_input(prop, t, layer)

    def attend(self, prop, t: torch.Tensor, fn, layer: int) -> torch.Tensor:
        if not self.params["quantize_all"] or self.codec.exact:
            return super().attend(prop, t, fn, layer)
        return fn(self._quantized_input(prop, t, layer), prop)

    def _quantized_input(self, prop, t: torch.Tensor, layer: int) -> torch.Tensor:
        """``[t_local; t_halo]`` with the local rows (and their gradient) quantised too."""
        x = prop.expand(t, layer)
        n = t.shape[0]
        return torch.cat([_QuantizeBoth.apply(x[:n], self, layer), x[n:]], dim=0)

    def roundtrip(self, x: torch.Tensor, key: SyncKey) -> torch.Tensor:
        """Quantise and dequantise ``x`` as a message would be (no communication)."""
        if x.numel() == 0:
            return x
        n, d = x.shape
        return self.codec.decode(self.codec.encode(x, self.generator(key)), n, d)


def degree_groups(degree: np.ndarray, groups: int) -> np.ndarray:
    """Group of every row of a boundary list: the empirical CDF of its degree over the
    list (inclusive: the fraction of rows with a degree <= its own), cut at k / groups,
    the last group closed at 1 (zxmeng98/Sylvie ``helper/utils.py:318-360``)."""
    degree = np.asarray(degree, dtype=np.int64)
    if degree.size == 0:
        return np.zeros(0, dtype=np.int64)
    cdf = np.cumsum(np.bincount(degree)) / degree.size
    return np.minimum((cdf[degree] * groups).astype(np.int64), groups - 1)


class _DegreeGroups(Codec):
    """One message in degree groups: the rows of group g encoded with ``stochastic-w_g``,
    one body per group in group order. ``send_groups``/``recv_groups``: the group of
    every row of the message this rank sends to / receives from the peer."""

    exact = False

    def __init__(self, widths, send_groups: np.ndarray, recv_groups: np.ndarray):
        self.widths = list(widths)
        self.spec = "sylvie-degree-" + "-".join(map(str, self.widths))
        self.bits = self.widths[0]
        self.codecs = [get_codec(f"stochastic-{w}") for w in self.widths]
        self.send_rows = [torch.from_numpy(np.flatnonzero(send_groups == g))
                          for g in range(len(self.widths))]
        self.recv_rows = [torch.from_numpy(np.flatnonzero(recv_groups == g))
                          for g in range(len(self.widths))]

    def encode(self, rows: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        bodies = [c.encode(rows[idx.to(rows.device)].contiguous(), generator).contiguous()
                  .view(torch.uint8).reshape(-1)
                  for c, idx in zip(self.codecs, self.send_rows) if idx.numel()]
        return torch.cat(bodies)

    def decode(self, wire: torch.Tensor, n: int, d: int) -> torch.Tensor:
        out = torch.empty(n, d, device=wire.device)
        at = 0
        for c, idx in zip(self.codecs, self.recv_rows):
            if not idx.numel():
                continue
            size = c.wire_bytes(int(idx.numel()), d)
            out[idx.to(wire.device)] = c.decode(wire[at:at + size], int(idx.numel()),
                                                d).reshape(-1, d)
            at += size
        if at != wire.numel() or sum(int(i.numel()) for i in self.recv_rows) != n:
            raise CdfgnnError(f"sylvie bit_groups=degree: a message of {wire.numel()} bytes "
                              f"does not hold the {n} rows of its groups")
        return out

    def wire_bytes(self, n: int, d: int) -> int:
        return sum(c.wire_bytes(int(i.numel()), d) for c, i in zip(self.codecs, self.send_rows)
                   if i.numel())


class _QuantizeBoth(torch.autograd.Function):
    """Identity whose forward value and backward gradient pass through the codec."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, strategy: _LowBit, layer: int) -> torch.Tensor:
        ctx.strategy, ctx.layer = strategy, layer
        return strategy.roundtrip(x, SyncKey(layer, "fwd", "local", True, int(x.shape[1])))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        key = SyncKey(ctx.layer, "bwd", "local", True, int(grad.shape[1]))
        return ctx.strategy.roundtrip(grad.contiguous(), key), None, None


@METHODS.register("sylvie-s")
class SylvieS(_LowBit):
    """Sylvie-S: synchronous low-bit halo exchange."""

    name = "sylvie-s"
    degenerate = Degenerate({"bits": 32})   # plain float32 messages

    def count_key(self, epoch: int):
        """Every pass quantises every boundary message (noise, not shapes, changes):
        one key."""
        return ()


@METHODS.register("sylvie-a")
class SylvieA(_LowBit):
    """Sylvie-A: low-bit halo exchange overlapped with computation, one epoch stale."""

    name = "sylvie-a"
    degenerate = Degenerate({"bits": 32, "staleness_bound": 1})   # every epoch synchronous
    PARAMS = {
        "staleness_bound": Param(0, int, check=lambda k: k >= 1, expect="an integer >= 1",
                                 doc="one fully synchronous epoch every k epochs "
                                     "(Bounded Staleness Adaptor); default 0: never"),
        "warm_start": Param(False, bool,
                            doc="run epoch 0 synchronously instead of consuming zeros"),
    }

    def synchronous(self, epoch: int) -> bool:
        k = self.params["staleness_bound"]
        if epoch == 0 and self.params["warm_start"]:
            return True
        return k >= 1 and (epoch + 1) % k == 0

    def stale(self, key: SyncKey) -> bool:
        return not self.synchronous(self.epoch)

    def overlaps(self, epoch: int) -> bool:
        return not self.synchronous(epoch)
