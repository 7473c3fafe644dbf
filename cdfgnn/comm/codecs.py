"""Message codecs: how rows are encoded on the wire (one module for every method).

A codec turns a float32 block of ``n`` rows x ``d`` features into the bytes that
are really sent, and back. Every method takes one as a parameter
(``--method-param codec=linear-8``), so quantisers are written once and combine
with any technique (a cache, staleness, sampling). Specs:

``none`` (alias ``fp32``)
    the float32 rows themselves, ``4 n d`` bytes.
``fp16``
    a plain cast to half precision, ``2 n d`` bytes (Sylvie's FP16 setting).
``linear-B``, B in {2, 4, 8, 16} (CDFGNN sec. 5, eqs. 22-23)
    deterministic per-row min/max quantisation with round half up,
    ``q = floor((2^B - 1)(m - min)/(max - min) + 0.5)``, decoded as
    ``min + q (max - min)/(2^B - 1)``. The top value is representable, so no
    clamping is needed (CDFGNN, arXiv 2408.00232, eqs. 22-23 print ``2^B``, which maps ``max`` to
    ``2^B``, which does not fit in B bits). Error per element <= (max - min) /
    (2 (2^B - 1)). Metadata: min and max as float32 (the paper's ``2T`` bits).
    ``linear-B-midrise`` is the alternative that meets the printed bound
    (max - min)/2^(B+1) exactly: ``q = min(floor(2^B (m - min)/(max - min)),
    2^B - 1)``, decoded at bin centres ``min + (q + 1/2)(max - min)/2^B``.
``stochastic-b``, b in {1, 2, 4, 8} (Sylvie sec. 2.4-2.5, eqs. 3-5)
    per-row min and scale sent as float16, ``q = floor((h - min)/scale + u)``
    with ``u ~ U[0, 1)`` (stochastic rounding), ``scale = (max - min)/(2^b - 1)``,
    decoded as ``min + q scale``: unbiased, variance per element
    ``scale^2 p (1 - p)`` (Sylvie, arXiv 2303.01277, Theorem 1). The sender quantises against the
    float16-rounded min (rounded down) and scale (rounded up), so the estimate is
    unbiased for exactly what the receiver reconstructs. ``stochastic-16`` is the
    same as ``fp16`` and ``stochastic-32`` the same as ``none`` (Sylvie's bit-width
    sweep).

Values are bit-packed per row (``ceil(B d / 8)`` bytes per row, low bits first);
metadata precedes the values in one ``uint8`` buffer per message, so the bytes the
communicator accounts are the bytes of the packed buffer. A row whose max equals
its min (a constant row, e.g. all-zero ReLU output) is reconstructed exactly from
its metadata (neither Sylvie nor CDFGNN says how to treat max = min; we choose this).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import nullcontext
from typing import Sequence

import functools
import math
import re

import numpy as np
import torch

from cdfgnn.cost import ledger
from cdfgnn.errors import CdfgnnError

LINEAR_BITS = (2, 4, 8, 16)
STOCHASTIC_BITS = (1, 2, 4, 8, 16, 32)
_STOCHASTIC_MODE = 2  # quant_kernels.STOCHASTIC (LINEAR 0, MIDRISE 1); numba loads lazily
_NP_DTYPE = {torch.float32: np.float32, torch.float16: np.float16, torch.uint8: np.uint8}
CODEC_HELP = ("none | fp32 | fp16 | linear-B (B in 2,4,8,16) | linear-B-midrise | "
              "stochastic-b (b in 1,2,4,8,16,32)")


def counted(op: str):
    """Record an encode/decode in the operation ledger as one device kernel family:
    ``passes`` reads of the input plus one write of the output (``cdfgnn.cost.ledger``);
    the host implementation's own torch ops are not counted (paused)."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(self, x, *args, **kwargs):
            if not ledger.active():
                return fn(self, x, *args, **kwargs)
            with ledger.paused():
                out = fn(self, x, *args, **kwargs)
            passes, launches = self.passes[op]
            ledger.record("codec", calls=launches,
                          bytes=passes * x.numel() * x.element_size()
                          + out.numel() * out.element_size())
            return out
        return inner
    return wrap


class Codec:
    """Encode ``[n, d]`` float32 rows into one wire tensor and back."""

    spec: str = "none"
    #: bits per value on the wire (32 for none)
    bits: int = 32
    #: True if encoding is lossless (the codec cannot change results)
    exact: bool = True
    #: (reads of the input, kernel launches) per operation on a GPU (operation ledger):
    #: a cast is one pass; a row quantiser reduces min/max, then quantises and packs
    passes = {"encode": (1, 1), "decode": (1, 1)}

    def encode(self, rows: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return rows

    def decode(self, wire: torch.Tensor, n: int, d: int) -> torch.Tensor:
        return wire

    def wire_bytes(self, n: int, d: int) -> int:
        """Bytes of the wire tensor for ``n`` rows of width ``d``."""
        return 4 * n * d

    def __repr__(self) -> str:
        return f"Codec({self.spec})"


def fresh(shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An uninitialised CPU tensor from numpy's allocator, which advises transparent huge
    pages for large buffers (where the kernel allows them): filling a fresh 32 MiB
    buffer then takes a few page faults instead of one per 4 KiB. An ordinary tensor
    otherwise (it only cannot be resized in place)."""
    return torch.from_numpy(np.empty(tuple(shape), dtype=_NP_DTYPE[dtype]))


class Half(Codec):
    spec, bits, exact = "fp16", 16, False

    @counted("encode")
    def encode(self, rows, generator=None):
        if rows.device.type != "cpu":
            return rows.to(torch.float16)
        return fresh(rows.shape, torch.float16).copy_(rows)  # copy_ casts (and is differentiable)

    @counted("decode")
    def decode(self, wire, n, d):
        if wire.device.type != "cpu":
            return wire.to(torch.float32)
        return fresh(wire.shape).copy_(wire)

    def wire_bytes(self, n, d):
        return 2 * n * d


class _RowQuantizer(Codec, ABC):
    """Shared layout: per-row metadata (two values) + bit-packed unsigned codes."""

    exact = False
    meta_dtype: torch.dtype = torch.float32
    passes = {"encode": (2, 2), "decode": (1, 1)}

    def __init__(self, bits: int):
        self.bits = bits
        self.levels = (1 << bits) - 1

    @property
    def meta_bytes(self) -> int:
        return 2 * torch.empty((), dtype=self.meta_dtype).element_size()

    def row_bytes(self, d: int) -> int:
        return -(-self.bits * d // 8)

    def wire_bytes(self, n, d):
        return n * (self.meta_bytes + self.row_bytes(d))

    # ---- subclasses: rows -> (codes uint8/int32 [n, d], meta [n, 2]) and back
    @abstractmethod
    def _quantize(self, rows, generator): ...

    @abstractmethod
    def _dequantize(self, codes, meta): ...

    #: kernel mode of :mod:`cdfgnn.comm.quant_kernels` (its LINEAR, MIDRISE, STOCHASTIC)
    _mode: int = 0

    @counted("encode")
    def encode(self, rows, generator=None, *, _kernel: str | None = None):
        """On the CPU, one fused numba pass per row
        (:func:`cdfgnn.comm.quant_kernels.encode_rows`): min/max, metadata, quantise,
        pack. On any other device (cuda), the vectorised torch path
        (:meth:`reference_encode`), so the rows never leave the device. Both give the
        same wire bytes (bit for bit for the linear codecs, in distribution for the
        stochastic ones). ``_kernel`` ("numba" | "torch"), for tests only: force a path
        (the torch path is checked on the CPU against numba)."""
        if _kernel_of(rows, _kernel) == "torch":
            return self.reference_encode(rows, generator)
        rows = rows.detach()
        if rows.dtype != torch.float32:
            rows = rows.to(torch.float32)
        if not rows.is_contiguous():
            rows = rows.contiguous()
        n, d = rows.shape
        if d == 0:
            return self.reference_encode(rows, generator)
        from cdfgnn.comm.quant_kernels import encode_rows
        wire = torch.empty((n, self.meta_bytes + self.row_bytes(d)), dtype=torch.uint8)
        # the stochastic codecs draw one 62-bit counter base per call from the generator
        stochastic = self._mode == _STOCHASTIC_MODE
        seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator)) if stochastic else 0
        if n:
            encode_rows(rows.numpy(), wire.numpy(), self.bits, self._mode, seed)
        return wire.reshape(-1)

    @counted("decode")
    def decode(self, wire, n, d, *, _kernel: str | None = None):
        """On the CPU, :func:`cdfgnn.comm.quant_kernels.decode_rows` into one
        :func:`fresh` float32 tensor; elsewhere the torch path on the wire's device."""
        if d == 0 or _kernel_of(wire, _kernel) == "torch":
            return self.reference_decode(wire, n, d)
        from cdfgnn.comm.quant_kernels import decode_rows
        buf = wire.reshape(n, self.meta_bytes + self.row_bytes(d))
        out = fresh((n, d))
        if n:
            decode_rows(buf.numpy(), self.bits, self._mode, out.numpy())
        return out

    # ---- the vectorised torch path of the same wire format: the codec on cuda, and the
    # ---- reference the numba kernels are tested against
    def reference_encode(self, rows, generator=None):
        rows = rows.detach().to(torch.float32).contiguous()
        n, d = rows.shape
        codes, meta = self._quantize(rows, generator)
        packed = pack_bits(codes, self.bits)
        head = meta.to(self.meta_dtype).contiguous().view(torch.uint8).reshape(n, -1)
        return torch.cat([head, packed], dim=1).reshape(-1)

    def reference_decode(self, wire, n, d):
        buf = wire.reshape(n, self.meta_bytes + self.row_bytes(d))
        meta = buf[:, : self.meta_bytes].reshape(-1).view(self.meta_dtype).to(torch.float32)
        codes = unpack_bits(buf[:, self.meta_bytes:], self.bits, d)
        return self._dequantize(codes, meta.reshape(n, 2))


class Linear(_RowQuantizer):
    """CDFGNN's deterministic min/max quantiser (round half up, top value included)."""

    def __init__(self, bits: int, midrise: bool = False):
        super().__init__(bits)
        self.midrise = midrise
        self._mode = 1 if midrise else 0
        self.spec = f"linear-{bits}" + ("-midrise" if midrise else "")

    def _quantize(self, rows, generator):
        lo, hi = rows.amin(1, keepdim=True), rows.amax(1, keepdim=True)
        span = hi - lo
        inv = torch.where(span > 0, 1.0 / span, torch.zeros_like(span))
        if self.midrise:
            x = (rows - lo).mul_(inv * (self.levels + 1)).floor_().clamp_(max=self.levels)
        else:
            x = (rows - lo).mul_(inv * self.levels).add_(0.5).floor_().clamp_(max=self.levels)
        return x.to(torch.int32), torch.cat([lo, hi], dim=1)

    def _dequantize(self, codes, meta):
        lo, hi = meta[:, :1], meta[:, 1:]
        if self.midrise:
            step = (hi - lo) / (self.levels + 1)
            out = (codes.to(torch.float32) + 0.5).mul_(step).add_(lo)
            return torch.where(hi > lo, out, lo.expand_as(out))
        return codes.to(torch.float32).mul_((hi - lo) / self.levels).add_(lo)


class Stochastic(_RowQuantizer):
    """Sylvie's unbiased stochastic quantiser with float16 min and scale."""

    meta_dtype = torch.float16
    _mode = _STOCHASTIC_MODE

    def __init__(self, bits: int):
        super().__init__(bits)
        self.spec = f"stochastic-{bits}"

    def _meta(self, rows):
        """Per-row float16 min (rounded down) and scale (rounded up), and 1/scale (0 if 0)."""
        lo32, hi32 = torch.aminmax(rows, dim=1, keepdim=True)
        lo = _half_down(lo32)
        scale = _half_up((hi32 - lo.to(torch.float32)) / self.levels)
        scale32 = scale.to(torch.float32)
        inv = torch.where(scale32 > 0, 1.0 / scale32, torch.zeros_like(scale32))
        return lo, scale, inv

    # the vectorised torch reference of the same codec (tests compare the kernels with it)
    def _quantize(self, rows, generator):
        lo, scale, inv = self._meta(rows)
        x = (rows - lo.to(torch.float32)).mul_(inv)
        noise = torch.rand(rows.shape, generator=_on_device(generator, rows.device),
                           dtype=torch.float32, device=rows.device)
        x.add_(noise).floor_().clamp_(0, self.levels)
        return x.to(torch.int32), torch.cat([lo, scale], dim=1)

    def _dequantize(self, codes, meta):
        lo, scale = meta[:, :1], meta[:, 1:]
        return codes.to(torch.float32).mul_(scale).add_(lo)


def _kernel_of(t: torch.Tensor, forced: str | None) -> str:
    """Which path encodes/decodes ``t``: numba on the CPU, torch on any other device
    (chosen by the tensor's device; ``forced`` only in tests)."""
    if forced is not None:
        if forced not in ("numba", "torch"):
            raise ValueError(f"unknown codec kernel {forced!r}; valid: numba, torch")
        if forced == "numba" and t.device.type != "cpu":
            raise ValueError(f"the numba codec kernels run on the CPU, not {t.device}")
        return forced
    return "numba" if t.device.type == "cpu" else "torch"


def _on_device(generator: torch.Generator | None,
               device: torch.device) -> torch.Generator | None:
    """A generator that draws on ``device``: ``generator`` itself where it already does
    (always on the CPU), else one seeded by one draw of it (the methods seed CPU
    generators per sync point, so a cuda run stays reproducible)."""
    if generator is None or generator.device.type == device.type:
        return generator
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


def _half_down(x: torch.Tensor) -> torch.Tensor:
    """float16 values <= x (the nearest from below), as float16."""
    h = x.to(torch.float16)
    over = h.to(torch.float32) > x
    if over.any():
        h = torch.where(over, torch.nextafter(h, torch.full_like(h, -math.inf)), h)
    return h


def _half_up(x: torch.Tensor) -> torch.Tensor:
    h = x.to(torch.float16)
    under = h.to(torch.float32) < x
    if under.any():
        h = torch.where(under, torch.nextafter(h, torch.full_like(h, math.inf)), h)
    return h


# ------------------------------------------------------------------ bit packing
def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """``[n, d]`` codes < 2^bits -> ``[n, ceil(bits d / 8)]`` uint8, low bits first."""
    n, d = codes.shape
    if bits == 16:
        return codes.to(torch.int16).contiguous().view(torch.uint8).reshape(n, 2 * d)
    if bits == 8:
        return codes.to(torch.uint8)
    per_byte = 8 // bits
    width = -(-d // per_byte) * per_byte
    c = codes.to(torch.uint8)
    if width != d:
        c = torch.cat([c, c.new_zeros((n, width - d))], dim=1)
    c = c.reshape(n, width // per_byte, per_byte)
    out = c[:, :, 0].clone()
    for k in range(1, per_byte):
        out |= c[:, :, k] << (k * bits)
    return out


def unpack_bits(packed: torch.Tensor, bits: int, d: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: int32 codes ``[n, d]``."""
    n = packed.shape[0]
    if bits == 16:
        return packed.contiguous().view(torch.int16).to(torch.int32).reshape(n, d) & 0xFFFF
    if bits == 8:
        return packed.to(torch.int32)
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=packed.device)
    codes = (packed.unsqueeze(2) >> shifts) & mask
    return codes.reshape(n, -1)[:, :d].to(torch.int32)


# ------------------------------------------------------------------ registry
_SPEC = re.compile(r"^(none|fp32|fp16|linear-(\d+)(-midrise)?|stochastic-(\d+))$")


_CACHE: dict[str, Codec] = {}


def get_codec(spec: str | Codec | None) -> Codec:
    """Codec for a spec string (see the module docstring); unknown specs name the valid ones."""
    if isinstance(spec, Codec):
        return spec
    spec = "none" if spec is None else str(spec).strip().lower()
    if spec in _CACHE:
        return _CACHE[spec]
    m = _SPEC.match(spec)
    if not m:
        raise CdfgnnError(f"unknown codec {spec!r}; valid: {CODEC_HELP}")
    if spec in ("none", "fp32"):
        codec: Codec = Codec()
    elif spec == "fp16":
        codec = Half()
    elif m.group(2) is not None:
        bits = int(m.group(2))
        if bits not in LINEAR_BITS:
            raise CdfgnnError(f"codec {spec!r}: linear bit width must be one of "
                              f"{', '.join(map(str, LINEAR_BITS))}, got {bits}")
        codec = Linear(bits, midrise=m.group(3) is not None)
    else:
        bits = int(m.group(4))
        if bits not in STOCHASTIC_BITS:
            raise CdfgnnError(f"codec {spec!r}: stochastic bit width must be one of "
                              f"{', '.join(map(str, STOCHASTIC_BITS))}, got {bits}")
        codec = Codec() if bits == 32 else Half() if bits == 16 else Stochastic(bits)
    _CACHE[spec] = codec
    return codec


def is_identity(codec: Codec) -> bool:
    """Does ``codec`` send the float32 rows themselves (nothing to encode or decode)?"""
    return codec.exact and codec.bits == 32


IDENTITY = Codec()


def send_rows(comm, outgoing: list[torch.Tensor | None], tag: str,
              codec: Codec | Sequence[Codec] = IDENTITY, *,
              incoming_rows: Sequence[int] | None = None, width: int = 0,
              generator: torch.Generator | None = None, rows: Sequence[int] | None = None,
              timer: str | None = "codec", accounted: bool = True) -> list[torch.Tensor | None]:
    """The one primitive that moves vertex rows between ranks: encode, all_to_all, decode.

    ``outgoing[q]`` goes to rank q (None: nothing); returns what each rank sent here,
    decoded (this rank's own entry as it is: it never goes through the codec).

    * ``codec``: one for every message, or one per peer (message q is encoded with
      ``codec[q]`` and what peer q sent is decoded with ``codec[q]``, so a per-peer
      codec must read its parameters from the wire: AdaQP's width travels in a header
      byte). The identity codec (``none``) is the fast path: the rows travel as they are.
    * ``incoming_rows[q]`` (lossy codecs): how many rows peer q sends here (receivers
      know their halo or replica lists, so no shape header travels); ``width`` is the
      row width, the same on every rank at a sync point.
    * ``rows[q]``: the vertex rows message q carries, for messages a method encoded
      itself (the CDFGNN cache's fused kernels: rows + bitmap in one byte buffer);
      they travel as they are, accounted with these row counts.
    * ``accounted=False``: a diagnostic exchange (the cache's exact shadow sync),
      neither counted nor timed.

    The accounted bytes are the encoded buffers' bytes and the accounted rows the rows
    they carry. Encoding and decoding (not the collective itself, which the network
    model prices) are timed as ``comm.overhead(timer)``: communication work done on
    this rank's thread.
    """
    codecs = ([codec] * len(outgoing) if isinstance(codec, Codec) else list(codec))
    if not accounted:
        return comm.all_to_all_unaccounted(outgoing)
    if rows is not None or all(is_identity(c) for c in codecs):
        return comm.all_to_all(outgoing, tag=tag, rows=None if rows is None else list(rows))
    if incoming_rows is None:
        raise ValueError(f"send_rows {tag}: a lossy codec needs incoming_rows to decode")

    def clock():
        return comm.overhead(timer) if timer else nullcontext()

    me = comm.rank
    wire, counts = [], []
    with clock():
        for q, t in enumerate(outgoing):
            if t is None or t.numel() == 0 or q == me:
                wire.append(t if q == me else None)
                counts.append(0)
            else:
                wire.append(codecs[q].encode(t, generator))
                counts.append(int(t.shape[0]))
    received = comm.all_to_all(wire, tag=tag, rows=counts)
    with clock():
        return decode_received(received, outgoing, me,
                               lambda q, w: codecs[q].decode(w, incoming_rows[q], width))


def decode_received(received: list, outgoing: list, me: int, decode) -> list:
    """Per peer q of an encoded all_to_all: this rank's own rows as they are (they never
    went through the codec), None where nothing came, ``decode(q, wire)`` otherwise."""
    return [outgoing[q] if q == me else None if w is None else decode(q, w)
            for q, w in enumerate(received)]
