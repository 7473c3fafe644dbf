"""GPU device profiles: the physical figures the operation ledger is priced with.

Profiles live in ``cdfgnn/pricing/gpus.yaml`` (one mapping per GPU, every figure with
its source); a user profile is a YAML file with the same fields (``--devices
my-gpu.yaml``). ``--devices`` names one profile for every rank or one per rank
(comma list), a CaPGNN Table 4 group (``x2`` .. ``x8``, ``table4``: the group of
the run's worker count) or CaPGNN Table 1 labels (R9, R6, G6, ...). A label never
shadows a card's own name: ``t4`` is the Tesla T4, while CaPGNN's label T4 (its A40
cards) is ``capgnn:T4`` (every label has that form). The CaPGNN Table 1
micro-benchmarks (:mod:`cdfgnn.pricing.devices`) stay available as a cross-check and
for RAPA.
"""
from __future__ import annotations

import math
import re
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import read_yaml_mapping

DATA_FILE = Path(__file__).with_name("gpus.yaml")
#: positive figures every profile must give
FIGURES = ("fp32_tflops", "tf32_tflops", "fp64_tflops", "fp64_tensor_tflops", "mem_bw_gbps",
           "memory_gb", "l2_mb", "host_link_gbps", "launch_us")
#: every field of a profile file (peer_link_gbps may be 0: no NVLink)
REQUIRED = (*FIGURES, "host_link", "peer_link", "peer_link_gbps", "sources")
SOURCE_KEYS = ("compute", "memory", "l2", "host_link", "peer_link", "launch")
#: the profile a run is priced on when ``--devices`` is not given: the reference card of
#: the CPU-measured model (cdfgnn.pricing.devices.REFERENCE)
DEFAULT_GPU = "rtx3090"
#: CaPGNN Table 1 labels -> profile names (lower case), and Table 4's nested groups
ALIASES = {"r9": "rtx3090", "t4": "a40", "r6": "rtx3060", "r2": "rtx2060",
           "g6": "gtx1660ti", "g5": "gtx1650"}
#: the qualified form of a label, which always means the paper's card
LABEL_PREFIX = "capgnn:"
_ORDER = ["rtx3090", "rtx3090", "a40", "a40", "rtx3060", "rtx3060", "gtx1660ti", "gtx1660ti"]
GROUPS = {f"x{k}": _ORDER[:k] for k in range(2, 9)}


@dataclass(frozen=True)
class GpuProfile:
    """One GPU's physical figures (units: TFLOP/s, GB/s = 1e9 B/s, GB, MB, us).

    ``fp64_tflops`` is the FP64 vector (CUDA-core) peak, ``fp64_tensor_tflops`` the rate of
    a float64 dense product (cuBLAS DGEMM: the FP64 tensor cores where the card has them,
    else = ``fp64_tflops``); see the header of ``gpus.yaml``."""

    name: str
    label: str
    fp32_tflops: float
    tf32_tflops: float
    fp64_tflops: float
    fp64_tensor_tflops: float
    mem_bw_gbps: float
    memory_gb: float
    l2_mb: float
    host_link: str
    host_link_gbps: float
    peer_link: str
    peer_link_gbps: float
    launch_us: float
    sources: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        for key in FIGURES:
            _check_figure(self.name, key, getattr(self, key), positive=True)
        _check_figure(self.name, "peer_link_gbps", self.peer_link_gbps, positive=False)

    def describe(self) -> dict:
        return asdict(self)


def _check_figure(name: str, key: str, v, positive: bool) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if positive else v < 0):
        need = "> 0" if positive else ">= 0"
        raise CdfgnnError(f"device profile {name!r}: {key} must be a finite number {need}, "
                          f"got {v!r}")


def profile_from_mapping(name: str, spec: dict, where: str) -> GpuProfile:
    """A profile from one mapping of a profile file; names ``where`` in errors."""
    if not isinstance(spec, dict):
        raise CdfgnnError(f"{where}: profile {name!r} is not a mapping")
    missing = [k for k in REQUIRED if k not in spec]
    unknown = sorted(set(spec) - {*REQUIRED, "label", "name"})
    if missing or unknown:
        raise CdfgnnError(f"{where}: profile {name!r} missing {missing}, unknown {unknown}; "
                          f"fields: {', '.join(REQUIRED)}, label")
    sources = spec["sources"]
    if not isinstance(sources, dict) or any(not sources.get(k) for k in SOURCE_KEYS):
        raise CdfgnnError(f"{where}: profile {name!r} needs sources for "
                          f"{', '.join(SOURCE_KEYS)}")
    return GpuProfile(name=str(name), label=str(spec.get("label", name)),
                      **{k: spec[k] for k in REQUIRED if k != "sources"},
                      sources={k: str(v) for k, v in sources.items()})


@lru_cache(maxsize=1)
def registered() -> dict[str, GpuProfile]:
    """Every profile of ``gpus.yaml`` by name."""
    spec = read_yaml_mapping(DATA_FILE, f"device profiles {DATA_FILE}", "profiles")
    return {name: profile_from_mapping(name, body, str(DATA_FILE))
            for name, body in spec["profiles"].items()}


def load_gpu(path: str | os.PathLike) -> GpuProfile:
    """A user profile: one mapping with the fields of ``gpus.yaml`` (name: the file's)."""
    path = Path(path)
    spec = read_yaml_mapping(path, f"device profile {path}", ", ".join(REQUIRED))
    return profile_from_mapping(str(spec.get("name", path.stem)), spec, f"device profile {path}")


def get_gpu(spec: str | GpuProfile) -> GpuProfile:
    """A registered profile (name or CaPGNN label, any case) or a YAML file's."""
    if isinstance(spec, GpuProfile):
        return spec
    s = str(spec).strip()
    if s.endswith((".yaml", ".yml")):
        return load_gpu(s)
    profiles = registered()
    key = profile_key(s, profiles)
    if key not in profiles:
        raise CdfgnnError(f"unknown device profile {spec!r}; valid: {', '.join(profiles)} "
                          f"(CaPGNN labels {', '.join(a.upper() for a in ALIASES)}, or "
                          f"{LABEL_PREFIX}LABEL; or a .yaml file)")
    return profiles[key]


def profile_key(name: str, names) -> str:
    """The profile a ``--devices`` item names: a name of ``names`` (any case) first, then a
    CaPGNN label, then ``capgnn:LABEL``; anything else lower-cased as it is. A label never
    shadows a name: ``t4`` is the Tesla T4 profile, ``capgnn:T4`` CaPGNN's A40."""
    key = name.strip().lower()
    if key.startswith(LABEL_PREFIX):
        label = key[len(LABEL_PREFIX):]
        if label not in ALIASES:
            raise CdfgnnError(f"unknown CaPGNN label {name!r}; valid: "
                              f"{', '.join(LABEL_PREFIX + a.upper() for a in ALIASES)}")
        return ALIASES[label]
    if key in names:
        return key
    return ALIASES.get(key, key)


def split_devices(spec: str | list | None, workers: int | None) -> list[str] | None:
    """``--devices`` as one item per rank: a group (``x4``, ``table4``), a comma list, or
    one name for every rank (``workers=None``: the names only)."""
    if spec is None or spec == "" or spec == []:
        return None
    items = spec if isinstance(spec, list) else [s.strip() for s in str(spec).split(",")
                                                  if s.strip()]
    one = str(items[0]).strip().lower() if len(items) == 1 else None
    if one == "table4":
        if workers is None:
            return None
        if f"x{workers}" not in GROUPS:
            raise CdfgnnError(f"--devices table4: Table 4 has groups for 2..8 workers, "
                              f"not {workers}")
        return list(GROUPS[f"x{workers}"])
    if one in GROUPS:
        items = list(GROUPS[one])
    elif one is not None and workers is not None:
        items = items * workers        # one profile for every rank
    if workers is not None and len(items) != workers:
        raise CdfgnnError(f"--devices names {len(items)} device(s) ({spec!r}), the run has "
                          f"{workers} workers; give one, one per worker, or a group: "
                          f"{', '.join(GROUPS)}")
    return [str(s) for s in items]


def parse_profiles(spec: str | list | None, workers: int | None, get):
    """One profile per rank, ``get(name)`` for each item of :func:`split_devices` (None:
    ``spec`` empty, or, with ``workers=None``, the names only checked, groups skipped)."""
    items = split_devices(spec, workers)
    if items is None:
        if workers is None and spec:
            for s in (spec if isinstance(spec, list) else str(spec).split(",")):
                if s.strip().lower() not in (*GROUPS, "table4"):
                    get(s)
        return None
    return [get(s) for s in items]


def parse_gpus(spec: str | list | None, workers: int | None) -> list[GpuProfile] | None:
    """One :class:`GpuProfile` per rank (None: ``spec`` empty, or names only checked)."""
    return parse_profiles(spec, workers, get_gpu)


def run_gpus(spec: str | list | None, workers: int) -> tuple[list[GpuProfile], bool]:
    """The profiles a run is priced on and whether they are the default."""
    gpus = parse_gpus(spec, workers)
    if gpus is None:
        return [get_gpu(DEFAULT_GPU)] * workers, True
    return gpus, False


_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro|sxm\d?|pcie|gpu)\b")


def _card_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def card_profile(text: str) -> GpuProfile:
    """The profile of a card as papers write it (``RTX 3090``, ``Tesla V100-SXM2-32GB``,
    ``GTX 1660 Ti``, ``A100 80GB``): vendor words and punctuation dropped, then matched to
    a profile name with the memory size (``a100-80``) or without it (``v100``). An
    unknown or ambiguous card raises :class:`CdfgnnError` naming it."""
    low = _VENDOR_WORDS.sub(" ", text.lower())
    mem = re.search(r"(\d+)\s*g(?:b|ib)\b", low)
    base = _card_key(re.sub(r"(\d+)\s*g(?:b|ib)\b", " ", low))
    by_key = {_card_key(name): name for name in registered()}
    # papers often drop the product line: "A6000" (RTX A6000), "3090", "1080 Ti"
    for line in ("", "rtx", "gtx"):
        for key in ([line + base + mem.group(1)] if mem else []) + [line + base]:
            if key in by_key:
                return registered()[by_key[key]]
    # ambiguous: profiles that differ only by a memory size ("a100" -> a100-40, a100-80;
    # "a10" is another card, not an A100)
    close = sorted(name for name in registered()
                   if base and _card_key(re.sub(r"-\d+$", "", name)) == base)
    if close:
        raise CdfgnnError(f"card {text!r} is ambiguous: {', '.join(close)} (write the "
                          f"memory size)")
    raise CdfgnnError(f"card {text!r} has no profile in {DATA_FILE.name}; known: "
                      f"{', '.join(registered())}")
