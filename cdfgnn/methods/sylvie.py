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

``quantize_all`` is Table 4's "Quant All" variant (its tensors are our choice): besides the
messages, every local row entering neighbour aggregation is quantised and
dequantised with the same codec in the forward pass, and its gradient in the
backward pass (so every row the aggregation or GAT's attention reads, local or halo,
is low-bit). Self terms (GCN's ``d~^-1`` term, GraphSAGE's ``W_s h_v``) read the rows
unquantised.
"""
from __future__ import annotations

import torch

from cdfgnn.comm.codecs import STOCHASTIC_BITS, get_codec
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy


class _LowBit(SyncStrategy):
    """Sylvie's Low-bit Module on every boundary message (codec from ``bits``)."""

    PARAMS = {
        "bits": Param(1, int, choices=STOCHASTIC_BITS,
                      doc="bits per communicated value (stochastic-b codec; 16: fp16, 32: fp32)"),
        "quantize_all": Param(False, bool,
                              doc="also quantise every local row entering aggregation "
                                  "and its gradient (Table 4 'Quant All')"),
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.codec = get_codec(f"stochastic-{self.params['bits']}")

    def check_params(self) -> None:
        if self.params["codec"] != "none":
            raise CdfgnnError(f"method {self.name!r}: parameter codec={self.params['codec']!r}: "
                              f"Sylvie's codec is set by bits= (valid: "
                              f"{', '.join(map(str, STOCHASTIC_BITS))})")

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
