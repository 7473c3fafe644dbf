"""``adaqp``: re-implementation of AdaQP (Wan et al., MLSys 2023) as CaPGNN's peer.

Adaptive message quantization: every message (one peer, one sync point, forward
activations and backward gradients) is stochastically quantized (unbiased; codec
``stochastic-b``) with its **own bit width** b from ``bits``. AdaQP picks the widths
by solving an optimisation with Gurobi; here a **documented greedy rule** replaces
the solver (no solver dependency):

* the variance that stochastic rounding adds to message q at b bits is
  ``V_q(b) = d sum_rows range_row^2 / (4 (2^b - 1)^2)`` (range = max - min of the row);
  its wire cost is ``bytes_q(b) x s_q``, with ``s_q`` the modelled seconds per byte of
  the link to q (inter-host links cost more) relative to the cheapest link;
* start every message at the smallest width; a budget of ``budget`` bits per element
  on average (weighted by link cost) is spent by repeatedly taking the upgrade
  (b -> next width of one message) with the largest variance reduction per unit of
  added cost, while it fits the budget.

The sender writes b in a one-byte header, so the receiver decodes without an extra
round; the header is accounted with the message. Pipelining (AdaQP's central /
marginal overlap): the modelled epoch time takes ``max(compute, vertex comm)``
(``overlap=false`` turns it off). ``bits=32`` sends full precision: equal to ``exact``.
"""
from __future__ import annotations

import numpy as np
import torch

from cdfgnn.comm.codecs import STOCHASTIC_BITS, Codec, get_codec
from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy


def _bit_list(spec: str) -> list[int]:
    try:
        bits = sorted({int(b) for b in str(spec).split(",") if b.strip()})
    except ValueError:
        raise CdfgnnError(f"bits must be comma-separated integers from "
                          f"{', '.join(map(str, STOCHASTIC_BITS))}") from None
    bad = [b for b in bits if b not in STOCHASTIC_BITS]
    if not bits or bad:
        raise CdfgnnError(f"bit widths {bad or '(none)'} are not in "
                          f"{', '.join(map(str, STOCHASTIC_BITS))}")
    return bits


def assign_bits(ranges_sq: list[float], sizes: list[tuple[int, int]], cost: list[float],
                bits: list[int], budget: float) -> list[int]:
    """The greedy bit assignment (module docstring). ``ranges_sq[q]``: sum over the
    rows of message q of range^2; ``sizes[q]`` = (rows, width); ``cost[q]``: relative
    seconds per byte of q's link. Messages with no rows get 0."""
    m = len(sizes)
    level = [0] * m
    elems = np.array([n * d for n, d in sizes], dtype=float)
    weight = np.asarray(cost, dtype=float) * elems
    spend = float(sum(weight[q] * bits[0] for q in range(m) if elems[q]))
    limit = float(budget * weight.sum())

    def var(q, b):
        return sizes[q][1] * ranges_sq[q] / (4.0 * (2 ** b - 1) ** 2)

    while True:
        best, gain = -1, 0.0
        for q in range(m):
            if not elems[q] or level[q] + 1 >= len(bits):
                continue
            b0, b1 = bits[level[q]], bits[level[q] + 1]
            extra = weight[q] * (b1 - b0)
            if spend + extra > limit + 1e-9:
                continue
            g = (var(q, b0) - var(q, b1)) / extra
            if g > gain or best < 0:
                best, gain = q, g
        if best < 0:
            break
        spend += weight[best] * (bits[level[best] + 1] - bits[level[best]])
        level[best] += 1
    return [bits[level[q]] if elems[q] else 0 for q in range(m)]


@METHODS.register("adaqp")
class AdaQP(SyncStrategy):
    name = "adaqp"
    degenerate = Degenerate({"bits": "32"})   # full precision every message
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    PARAMS = {
        "bits": Param("2,4,8", str, check=lambda s: bool(_bit_list(s)),
                      expect="comma-separated widths", doc="the bit widths to choose from"),
        "budget": Param(4.0, float, check=lambda b: b > 0, expect="> 0",
                        doc="average bits per element (link-cost weighted)"),
        "overlap": Param(True, bool, doc="pipeline: overlap communication with computation"),
    }

    def check_params(self) -> None:
        self.bits = _bit_list(self.params["bits"])
        self.bit_counts: dict[int, int] = {}

    def setup(self, ctx) -> None:
        super().setup(ctx)
        comm = ctx.comm
        host = np.arange(comm.world_size) // comm.topology.devices_per_host
        # relative link cost: inter-host bytes cost more (ratio of nominal bandwidths of
        # the default profile: intra 22.70 GB/s, inter 8.27 GB/s)
        self.link_cost = np.where(host == host[comm.rank], 1.0, 22.70 / 8.27).tolist()

    def overlaps(self, epoch: int) -> bool:
        return bool(self.params["overlap"])

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        self.bit_counts = {}

    def on_epoch_end(self, epoch: int, metrics: dict) -> dict:
        total = sum(self.bit_counts.values())
        return {"adaqp_mean_bits": (sum(b * c for b, c in self.bit_counts.items()) / total)
                if total else 0.0}

    def codec_for(self, key: SyncKey, outgoing: list) -> Codec | list[Codec]:
        """One stochastic codec per message, its width from the greedy assignment."""
        if self.bits == [32]:
            return self.codec
        me = self.comm.rank
        with self.comm.overhead("codec"):
            sizes, rsq = [], []
            for q, t in enumerate(outgoing):
                if t is None or not t.numel() or q == me:
                    sizes.append((0, 0))
                    rsq.append(0.0)
                else:
                    r = (t.amax(1) - t.amin(1)).double()
                    sizes.append((int(t.shape[0]), int(t.shape[1])))
                    rsq.append(float((r * r).sum()))
            widths = assign_bits(rsq, sizes, self.link_cost, self.bits, self.params["budget"])
            for q, b in enumerate(widths):
                if b:
                    self.bit_counts[b] = self.bit_counts.get(b, 0) + outgoing[q].numel()
        return [_WidthInHeader(b or self.bits[0]) for b in widths]


class _WidthInHeader(Codec):
    """``stochastic-b`` with b in a one-byte header (accounted with the message), so the
    receiver decodes without an extra round."""

    exact = False

    def __init__(self, bits: int):
        self.bits = bits
        self.spec = f"adaqp-{bits}"
        self.body = get_codec(f"stochastic-{bits}")

    def encode(self, rows: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        body = self.body.encode(rows, generator)
        if body.dtype != torch.uint8:
            body = body.contiguous().view(torch.uint8).reshape(-1)
        head = torch.tensor([self.bits], dtype=torch.uint8, device=body.device)
        return torch.cat([head, body])

    def decode(self, wire: torch.Tensor, n: int, d: int) -> torch.Tensor:
        body = wire[1:]
        codec = get_codec(f"stochastic-{int(wire[0])}")   # the sender's width leads
        if codec.bits == 32:
            return body.clone().view(torch.float32).reshape(n, d)
        if codec.bits == 16:
            return codec.decode(body.clone().view(torch.float16).reshape(n, d), n, d)
        return codec.decode(body, n, d)

    def wire_bytes(self, n: int, d: int) -> int:
        return 1 + self.body.wire_bytes(n, d)
