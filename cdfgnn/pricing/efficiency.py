"""Efficiency constants of the device model: one file, ``efficiency.yaml``.

Every constant the calibration fits lives here and nowhere else, and everything that
prices (``cdfgnn train --devices``, :func:`cdfgnn.pricing.record.reprice`, the claims'
device columns, ``cdfgnn compare``, ``benchmarks/time_model.py``) reads it with
:func:`load_efficiency`. ``benchmarks/time_model.py --write-efficiency`` fits them and
writes the file with :func:`write_efficiency`.

Kernel constants (:mod:`cdfgnn.pricing.roofline`): ``dense_flop``, ``use_tf32``,
``stream_bw``, ``spmm_bw``, ``spmm_reuse``, ``l2_bw``, ``launch``, ``host_copy_bw``. Network
constants (:mod:`cdfgnn.pricing.cluster`): ``link_gloo`` and ``link_nccl``, the
fraction of a link's nominal bandwidth an exchange over that backend sustains (gloo:
every hop of its host-staged path; nccl: the device-to-device or network link), and
``msg_gloo_us`` and ``msg_nccl_us``, the fixed cost of one message of a halo exchange
over that backend (microseconds, up to 10 ms: the published exchanges of few bytes
take that long, see :mod:`cdfgnn.pricing.cluster`).

:data:`FIT_BOUNDS` are the physical ranges a fit may move them in: a dense product at
most 80% of the peak, a bandwidth at most its nominal figure. ``spmm_bw`` is a fraction
of DRAM bandwidth for the traffic the L2 does not serve, so it is bounded by 1 too;
``l2_bw``, the L2's bandwidth over DRAM's for the reads it serves, between 1 and 4 (about
2.9 on a V100: arXiv:1804.06826, ch. 3).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import read_yaml_mapping

EFFICIENCY_FILE = Path(__file__).with_name("efficiency.yaml")
FRACTIONS = ("dense_flop", "stream_bw", "spmm_bw", "host_copy_bw", "link_gloo", "link_nccl")
#: the range a fit may give each constant (low, high); a gloo exchange message at most
#: 1 ms: the peers' exchange pattern costs 0.1-1.0 ms per message on loopback on a 2-core
#: machine (`python benchmarks/gloo_message.py`, no GPU copy), and Sylvie's 1-bit runs
#: spend at most 0.58 ms per message, bytes included (docs/results.md, "A tenth change")
FIT_BOUNDS = {"dense_flop": (0.05, 0.8), "stream_bw": (0.1, 1.0), "spmm_bw": (0.05, 1.0),
              "spmm_reuse": (0.0, 1.0), "l2_bw": (1.0, 4.0), "host_copy_bw": (0.05, 1.0), "launch": (0.5, 10.0),
              "link_gloo": (0.01, 1.0), "link_nccl": (0.01, 1.0),
              "msg_gloo_us": (0.0, 1000.0), "msg_nccl_us": (0.0, 10000.0)}
#: the backends a link efficiency is kept for; a host-staged link profile is gloo's
BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class Efficiency:
    dense_flop: float      # fraction of peak FLOP/s a dense product sustains
    use_tf32: bool         # dense products at the TF32 peak (else FP32)
    stream_bw: float       # fraction of memory bandwidth: elementwise, gather, codec, cache
    spmm_bw: float         # fraction of memory bandwidth an SpMM sustains
    spmm_reuse: float      # largest fraction of repeated SpMM input reads served by L2
    l2_bw: float           # L2 bandwidth / DRAM bandwidth for the reads the L2 serves
    launch: float          # multiplier on the profile's launch latency
    host_copy_bw: float    # fraction of the host link's bandwidth for D2H / H2D copies
    link_gloo: float = 1.0  # fraction of nominal bandwidth a gloo exchange sustains
    link_nccl: float = 1.0  # fraction of nominal bandwidth an nccl exchange sustains
    msg_gloo_us: float = 0.0  # fixed cost of every message of a gloo exchange, us
    msg_nccl_us: float = 0.0  # fixed cost of every message of an nccl exchange, us
    source: str = ""

    def __post_init__(self) -> None:
        for key in ("msg_gloo_us", "msg_nccl_us"):
            v = getattr(self, key)
            if not (_number(v) and v >= 0):
                raise CdfgnnError(f"efficiency {key} must be a number >= 0 (microseconds), "
                                  f"got {v!r}")
        for key in FRACTIONS:
            v = getattr(self, key)
            if not (_number(v) and 0 < v <= 1.5):
                raise CdfgnnError(f"efficiency {key} must be a number in (0, 1.5], got {v!r}")
        if not (_number(self.spmm_reuse) and 0 <= self.spmm_reuse <= 1):
            raise CdfgnnError(f"efficiency spmm_reuse must be in [0, 1], got {self.spmm_reuse!r}")
        if not (_number(self.l2_bw) and self.l2_bw >= 1):
            raise CdfgnnError(f"efficiency l2_bw must be a number >= 1, got {self.l2_bw!r}")
        if not (_number(self.launch) and self.launch >= 0):
            raise CdfgnnError(f"efficiency launch must be a number >= 0, got {self.launch!r}")
        if not isinstance(self.use_tf32, bool):
            raise CdfgnnError(f"efficiency use_tf32 must be true or false, got {self.use_tf32!r}")

    def but(self, **changes) -> "Efficiency":
        return replace(self, **changes)

    def within_bounds(self) -> "Efficiency":
        """These constants, each clipped into its :data:`FIT_BOUNDS` range."""
        return replace(self, **{k: min(max(getattr(self, k), low), high)
                                for k, (low, high) in FIT_BOUNDS.items()})

    def link(self, backend: str) -> float:
        """The link efficiency of ``backend`` (``gloo`` or ``nccl``)."""
        if backend not in BACKENDS:
            raise CdfgnnError(f"backend must be one of {BACKENDS}, got {backend!r}")
        return getattr(self, f"link_{backend}")

    def message_seconds(self, backend: str) -> float:
        """The fixed cost of one message of an exchange over ``backend``, in seconds."""
        if backend not in BACKENDS:
            raise CdfgnnError(f"backend must be one of {BACKENDS}, got {backend!r}")
        return getattr(self, f"msg_{backend}_us") * 1e-6

    def describe(self) -> dict:
        return asdict(self)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


KEYS = tuple(Efficiency.__dataclass_fields__)


def load_efficiency(path: str | os.PathLike | None = None) -> Efficiency:
    path = Path(path) if path is not None else EFFICIENCY_FILE
    spec = read_yaml_mapping(path, f"efficiency file {path}", ", ".join(KEYS))
    missing = [k for k in KEYS if k != "source" and k not in spec]
    unknown = sorted(set(spec) - set(KEYS))
    if missing or unknown:
        raise CdfgnnError(f"efficiency file {path}: missing {missing}, unknown {unknown}")
    return Efficiency(**{k: spec[k] for k in KEYS if k in spec})


def efficiency_text(eff: Efficiency, header: list[str] = ()) -> str:
    """The file's text: ``header`` as comments, then every field in the dataclass order."""
    lines = [f"# {h}" for h in header]
    for key, value in eff.describe().items():
        if isinstance(value, bool):
            lines.append(f"{key}: {'true' if value else 'false'}")
        elif isinstance(value, float):
            lines.append(f"{key}: {value:.4g}")
        else:
            lines.append(f"{key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def write_efficiency(eff: Efficiency, path: str | os.PathLike | None = None,
                     header: list[str] = ()) -> None:
    """Write ``eff`` (atomically) where :func:`load_efficiency` reads it."""
    from cdfgnn.fileio import atomic_write_text
    atomic_write_text(Path(path) if path is not None else EFFICIENCY_FILE,
                      efficiency_text(eff, header))
