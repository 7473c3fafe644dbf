"""Device profiles: per-worker compute and transfer speeds (CaPGNN, Neurocomputing, Table 1).

A :class:`DeviceProfile` holds the mean seconds of five micro-benchmarks on one
device: dense MM, SpMM (99.6 % sparse), host-to-device (H2D), device-to-host (D2H)
and intra-device copy (IDT). The registered GPUs carry the paper's Table 1 means
(16384 x 16384 float32, 50 repetitions), averaged over the cards of one model;
``cdfgnn profile`` measures the current machine the same way (smaller matrices on a
CPU) and writes a YAML profile that ``--devices`` accepts as a path.

Heterogeneous workers: ``--devices`` gives one profile per rank (comma-separated
names or aliases, a group of Table 4 such as ``x4``, ``table4`` for the group of
the run's worker count, or YAML paths). The modelled
time then scales rank r's

* compute by ``compute_factor = (alpha SpMM_r + (1 - alpha) MM_r) / (same of the
  reference device)`` (alpha = 0.35, the weight of CaPGNN eq. 14), and
* communication by ``transfer_factor = (H2D_r + D2H_r) / (same of the reference)``,

with the reference device ``rtx3090`` (R9, the paper's fastest card), so a run on a
group with R9 cards keeps their measured CPU time, and slower cards take longer.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import read_yaml_mapping
# GROUPS: CaPGNN Table 4's nested groups (x2 = 2 R9, then T4, R6, G6 pairs are added)
from cdfgnn.pricing.hardware import (GROUPS, get_gpu, load_gpu, parse_profiles,  # noqa: F401
                                     profile_key, registered)
from cdfgnn.registry import Registry

ALPHA = 0.35
REFERENCE = "rtx3090"
FIELDS = ("mm_s", "spmm_s", "h2d_s", "d2h_s", "idt_s")


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    mm_s: float
    spmm_s: float
    h2d_s: float
    d2h_s: float
    idt_s: float
    memory_gb: float = 0.0
    label: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        for key in FIELDS:
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise CdfgnnError(f"device profile {self.name!r}: {key} must be a finite "
                                  f"number > 0, got {v!r}")
        if not (math.isfinite(self.memory_gb) and self.memory_gb >= 0):
            raise CdfgnnError(f"device profile {self.name!r}: memory_gb must be >= 0, "
                              f"got {self.memory_gb!r}")

    def compute_cost(self, alpha: float = ALPHA) -> float:
        return alpha * self.spmm_s + (1.0 - alpha) * self.mm_s

    def transfer_cost(self) -> float:
        return self.h2d_s + self.d2h_s


DEVICE_PROFILES: Registry[DeviceProfile] = Registry("device profile")
_T1 = "CaPGNN Table 1 (16384^2 float32, 50 runs), mean over the cards of this model"


def _register(p: DeviceProfile) -> None:
    # its label (R9, ...) resolves through cdfgnn.pricing.hardware.ALIASES
    DEVICE_PROFILES.register(p.name)(p)


def _mean(*v: float) -> float:
    return float(np.mean(v))


# Table 1, ids 1-6 (3090), 7-8 (A40), 9-10 (3060), 11-12 (2060), 13-14 (1660Ti), 15-16 (1650)
_register(DeviceProfile(
    "rtx3090", _mean(.1409, .1351, .1389, .1372, .1393, .1385),
    _mean(.1067, .1054, .1069, .1060, .1072, .1058), _mean(.1184, .1196, .1198, .1188, .1224, .1194),
    _mean(.1217, .1207, .1207, .1198, .1242, .1208), 0.0014, 24, "R9", _T1))
_register(DeviceProfile("a40", _mean(.1416, .1426), _mean(.1195, .1201), _mean(.1175, .1198),
                        _mean(.1184, .1193), 0.0021, 48, "T4", _T1 + " (the paper's label T4)"))
_register(DeviceProfile("rtx3060", _mean(.3393, .3485), _mean(.1948, .1975), _mean(.1223, .1217),
                        _mean(.1240, .1232), 0.0038, 12, "R6", _T1))
_register(DeviceProfile("rtx2060", _mean(.4942, .5002), _mean(.2934, .2975), _mean(.1188, .1195),
                        _mean(.1186, .1204), 0.0033, 8, "R2", _T1))
_register(DeviceProfile("gtx1660ti", _mean(.9791, 1.0084), _mean(.3370, .3447),
                        _mean(.1220, .1255), _mean(.1232, .1256), 0.0057, 6, "G6", _T1))
_register(DeviceProfile("gtx1650", _mean(1.2730, 1.2755), _mean(.6316, .6330),
                        _mean(.1246, .1259), _mean(.1249, .1257), 0.0094, 4, "G5", _T1))



def load_device(path: str | os.PathLike) -> DeviceProfile:
    """A device profile from YAML (as ``cdfgnn profile`` writes it)."""
    path = Path(path)
    spec = read_yaml_mapping(path, f"device profile {path}", ", ".join(FIELDS))
    valid = {*FIELDS, "name", "memory_gb", "label", "source", "matrix_size", "repeats",
             "density"}
    unknown = sorted(set(spec) - valid)
    missing = [k for k in FIELDS if k not in spec]
    if unknown or missing:
        raise CdfgnnError(f"device profile {path}: unknown key(s) {unknown}, missing "
                          f"{missing}; valid: {', '.join(sorted(valid))}")
    return DeviceProfile(str(spec.get("name", path.stem)), *(float(spec[k]) for k in FIELDS),
                         float(spec.get("memory_gb", 0.0)), str(spec.get("label", "")),
                         str(spec.get("source", f"measured, {path}")))


def get_device(spec: str | DeviceProfile) -> DeviceProfile:
    """A registered profile (name or Table 3 label, any case), or a YAML file's: a
    ``cdfgnn profile`` file, or a physical GPU profile (:mod:`cdfgnn.pricing.hardware`),
    whose micro-benchmark times are derived (:func:`derived_from_gpu`)."""
    if isinstance(spec, DeviceProfile):
        return spec
    s = str(spec).strip()
    if s.endswith((".yaml", ".yml")):
        if "mm_s" in read_yaml_mapping(Path(s), f"device profile {s}", ", ".join(FIELDS)):
            return load_device(s)
        return derived_from_gpu(load_gpu(s))
    # a card's own name first (t4: the Tesla T4), then CaPGNN's labels (capgnn:T4: its A40)
    key = profile_key(s, {*DEVICE_PROFILES.names(), *registered()})
    if key not in DEVICE_PROFILES:
        return derived_from_gpu(get_gpu(key))   # unknown everywhere: its one-line error
    return DEVICE_PROFILES.get(key)


def derived_from_gpu(gpu) -> DeviceProfile:
    """Table 1 style times for a GPU that CaPGNN did not measure: the reference card's
    measured times scaled by the ratio of the physical figures (MM by FP32 peak, SpMM
    and IDT by memory bandwidth, H2D/D2H by host-link bandwidth). Modelled, not
    measured: the profile's ``source`` says so."""
    ref, ref_gpu = DEVICE_PROFILES.get(REFERENCE), get_gpu(REFERENCE)
    compute = ref_gpu.fp32_tflops / gpu.fp32_tflops
    memory = ref_gpu.mem_bw_gbps / gpu.mem_bw_gbps
    link = ref_gpu.host_link_gbps / gpu.host_link_gbps
    return DeviceProfile(gpu.name, ref.mm_s * compute, ref.spmm_s * memory, ref.h2d_s * link,
                         ref.d2h_s * link, ref.idt_s * memory, gpu.memory_gb, "",
                         f"derived: {REFERENCE}'s CaPGNN Table 1 times x the ratio of "
                         f"physical figures (cdfgnn/pricing/gpus.yaml), not measured")


def parse_devices(spec: str | list | None, workers: int | None) -> list[DeviceProfile] | None:
    """One profile per rank from a group name (``x4``), a comma list, or None
    (``workers=None``: check the names only, e.g. a pipeline's train block)."""
    return parse_profiles(spec, workers, get_device)


def factors(profiles: list[DeviceProfile] | None, workers: int, alpha: float = ALPHA,
            ) -> tuple[list[float], list[float]]:
    """(compute, transfer) factor of every rank relative to the reference device."""
    if profiles is None:
        return [1.0] * workers, [1.0] * workers
    ref = DEVICE_PROFILES.get(REFERENCE)
    return ([p.compute_cost(alpha) / ref.compute_cost(alpha) for p in profiles],
            [p.transfer_cost() / ref.transfer_cost() for p in profiles])


# --------------------------------------------------------------------- profiling
def _time(fn, repeats: int, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.mean(ts)), float(np.std(ts))


def measure(size: int = 2048, repeats: int = 50, density: float = 0.004,
            name: str = "this-machine", seed: int = 0) -> dict:
    """Measure MM, SpMM, H2D, D2H and IDT as CaPGNN's Table 1 does, on this machine.

    On a CPU, "host-to-device" / "device-to-host" are copies into / out of a
    shared-memory tensor (what the process backend's ranks share) and IDT a copy
    between two private buffers. Returns a mapping loadable by :func:`load_device`.
    """
    import torch

    if size < 2 or repeats < 1 or not 0 < density <= 1:
        raise CdfgnnError(f"profile: size >= 2, repeats >= 1 and density in (0, 1] needed, "
                          f"got {size}, {repeats}, {density}")
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(size, size, generator=g)
    b = torch.rand(size, size, generator=g)
    nnz = max(1, int(density * size * size))
    idx = torch.randint(0, size, (2, nnz), generator=g)
    import warnings

    sp = torch.sparse_coo_tensor(idx, torch.rand(nnz, generator=g), (size, size)).coalesce()
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        sp = sp.to_sparse_csr()
    shared = torch.empty(size, size).share_memory_()
    private = torch.empty(size, size)
    out = {"name": name, "matrix_size": size, "repeats": repeats, "density": density}
    stds = {}
    for key, fn in (("mm_s", lambda: a @ b), ("spmm_s", lambda: sp @ b),
                    ("h2d_s", lambda: shared.copy_(a)), ("d2h_s", lambda: private.copy_(shared)),
                    ("idt_s", lambda: private.copy_(a))):
        out[key], stds[key] = _time(fn, repeats)
    out["source"] = (f"cdfgnn profile: {size}^2 float32, {repeats} runs, SpMM density "
                     f"{density}; std " + ", ".join(f"{k} {v:.2e}" for k, v in stds.items()))
    return out


def measured_only(profiles: list[DeviceProfile] | None) -> bool:
    """True when no profile's times are derived from physical figures (all measured:
    CaPGNN Table 1 or ``cdfgnn profile``)."""
    return profiles is not None and not any(p.source.startswith("derived")
                                            for p in profiles)


def describe(profiles: list[DeviceProfile] | None) -> list[dict] | None:
    return None if profiles is None else [asdict(p) for p in profiles]
