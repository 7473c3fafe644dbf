"""Efficiency constants of the device pricing: one file, ``efficiency.yaml``.

``benchmarks/time_model.py`` fits them on published epoch times and writes the file
again with :func:`write_efficiency`; everything else reads them with
:func:`load_efficiency`.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import read_yaml_mapping

EFFICIENCY_FILE = Path(__file__).with_name("efficiency.yaml")
FRACTIONS = ("dense_flop", "stream_bw", "spmm_bw", "host_copy_bw")


@dataclass(frozen=True)
class Efficiency:
    dense_flop: float      # fraction of peak FLOP/s a dense product sustains
    use_tf32: bool         # dense products at the TF32 peak (else FP32)
    stream_bw: float       # fraction of memory bandwidth: elementwise, gather, codec, cache
    spmm_bw: float         # fraction of memory bandwidth an SpMM sustains
    spmm_reuse: float      # largest fraction of repeated SpMM input reads served by L2
    launch: float          # multiplier on the profile's launch latency
    host_copy_bw: float    # fraction of the host link's bandwidth for D2H / H2D copies
    source: str = ""

    def __post_init__(self) -> None:
        for key in FRACTIONS:
            v = getattr(self, key)
            if not (_number(v) and 0 < v <= 1.5):
                raise CdfgnnError(f"efficiency {key} must be a number in (0, 1.5], got {v!r}")
        if not (_number(self.spmm_reuse) and 0 <= self.spmm_reuse <= 1):
            raise CdfgnnError(f"efficiency spmm_reuse must be in [0, 1], got {self.spmm_reuse!r}")
        if not (_number(self.launch) and self.launch >= 0):
            raise CdfgnnError(f"efficiency launch must be a number >= 0, got {self.launch!r}")
        if not isinstance(self.use_tf32, bool):
            raise CdfgnnError(f"efficiency use_tf32 must be true or false, got {self.use_tf32!r}")

    def but(self, **changes) -> "Efficiency":
        return replace(self, **changes)

    def describe(self) -> dict:
        return asdict(self)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_efficiency(path: str | os.PathLike | None = None) -> Efficiency:
    path = Path(path) if path is not None else EFFICIENCY_FILE
    keys = [f for f in Efficiency.__dataclass_fields__]
    spec = read_yaml_mapping(path, f"efficiency file {path}", ", ".join(keys))
    missing = [k for k in keys if k != "source" and k not in spec]
    unknown = sorted(set(spec) - set(keys))
    if missing or unknown:
        raise CdfgnnError(f"efficiency file {path}: missing {missing}, unknown {unknown}")
    return Efficiency(**{k: spec[k] for k in keys if k in spec})


def write_efficiency(eff: Efficiency, path: str | os.PathLike | None = None) -> None:
    """Write ``eff`` (atomically) where :func:`load_efficiency` reads it."""
    import yaml

    from cdfgnn.fileio import atomic_write_text
    atomic_write_text(Path(path) if path is not None else EFFICIENCY_FILE,
                      yaml.safe_dump(eff.describe(), sort_keys=False))
