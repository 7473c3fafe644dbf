"""Energy of a training run: measured where the host exposes counters, else "not measured".

* CPU: Intel RAPL package (and DRAM) counters under ``/sys/class/powercap``
  (``energy_uj``; a counter that went down wrapped once: ``+ max_energy_range_uj``).
  They cover the whole package, i.e. every process on the host, not only this run.
* GPU: NVML ``nvmlDeviceGetTotalEnergyConsumption`` (mJ) deltas, summed over the
  GPUs, only for runs on a CUDA device (``pynvml`` must be importable).
* Where neither is readable the record says ``"status": "not measured"`` and gives no
  number. A *modelled* CPU energy (:func:`modelled_cpu_energy`) is always added, labelled
  ``"modelled"``: per worker ``P_idle x T_epoch + (P_busy - P_idle) x compute``, with the
  modelled epoch time and compute time of the run and the assumed constants below.

Epoch energies are read by rank 0 at the start and the end of every training epoch
(evaluation excluded): :class:`EnergyMeter` ``epoch_start()`` / ``epoch_end()``.
"""
from __future__ import annotations

import glob
import os
from typing import Any

#: assumed per-worker CPU power (W) of the modelled energy: idle share and busy share of
#: one socket (RapidGNN's Xeon E5-2670 v3 is a 120 W TDP part); documented, not measured
MODEL_P_IDLE_W = 20.0
MODEL_P_BUSY_W = 60.0
POWERCAP = "/sys/class/powercap"


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def rapl_domains(root: str = POWERCAP) -> list[dict[str, Any]]:
    """Readable RAPL package/DRAM domains: name, counter path, wrap range (uJ)."""
    out = []
    for d in sorted(glob.glob(os.path.join(root, "intel-rapl:*"))):
        e = os.path.join(d, "energy_uj")
        if _read_int(e) is None:
            continue
        name = open(os.path.join(d, "name")).read().strip() if os.path.exists(
            os.path.join(d, "name")) else os.path.basename(d)
        if not (name.startswith("package") or name == "dram"):
            continue
        rng = _read_int(os.path.join(d, "max_energy_range_uj")) or 2 ** 32
        out.append({"name": f"{os.path.basename(d)}:{name}", "path": e, "range": rng})
    return out


def _nvml_handles(device: str):
    if not str(device).startswith("cuda"):
        return None, []
    try:
        import pynvml
        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    except Exception:  # noqa: BLE001  (no NVML: "not measured")
        return None, []


class EnergyMeter:
    """Per-epoch joules from RAPL (CPU) and NVML (GPU), where readable."""

    def __init__(self, device: str = "cpu", root: str = POWERCAP):
        self.rapl = rapl_domains(root)
        self.nvml, self.gpus = _nvml_handles(device)
        self.cpu_epochs: list[float] = []
        self.gpu_epochs: list[float] = []
        self._cpu0: list[int] = []
        self._gpu0: list[int] = []

    def _cpu_now(self) -> list[int]:
        return [_read_int(d["path"]) or 0 for d in self.rapl]

    def _gpu_now(self) -> list[int]:
        return [self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.gpus]

    def epoch_start(self) -> None:
        if self.rapl:
            self._cpu0 = self._cpu_now()
        if self.gpus:
            self._gpu0 = self._gpu_now()

    def epoch_end(self) -> None:
        if self.rapl:
            now = self._cpu_now()
            uj = sum((b - a) if b >= a else b + d["range"] - a
                     for a, b, d in zip(self._cpu0, now, self.rapl))
            self.cpu_epochs.append(uj / 1e6)
        if self.gpus:
            self.gpu_epochs.append(sum(b - a for a, b in zip(self._gpu0, self._gpu_now()))
                                   / 1e3)

    def result(self) -> dict[str, Any]:
        return {
            "cpu": _measured(self.cpu_epochs, "RAPL " + ", ".join(d["name"] for d in self.rapl)
                             + " (whole package: includes other load on the host)")
            if self.rapl else {"status": "not measured",
                               "reason": f"no readable RAPL counter under {POWERCAP}"},
            "gpu": _measured(self.gpu_epochs, f"NVML total energy, {len(self.gpus)} GPU(s)")
            if self.gpus else {"status": "not measured",
                               "reason": "no CUDA device in this run or NVML not readable"},
        }


def _measured(epochs: list[float], source: str) -> dict[str, Any]:
    return {"status": "measured", "source": source, "total_j": float(sum(epochs)),
            "per_epoch_j": [float(x) for x in epochs],
            "mean_epoch_j": float(sum(epochs) / len(epochs)) if epochs else None,
            "min_epoch_j": float(min(epochs)) if epochs else None,
            "max_epoch_j": float(max(epochs)) if epochs else None}


def modelled_cpu_energy(epoch_s: list[float], compute_s: list[list[float]]) -> dict[str, Any]:
    """Labelled model: sum over workers of ``P_idle T + (P_busy - P_idle) compute``.

    ``epoch_s[e]``: modelled epoch seconds; ``compute_s[e][r]``: modelled compute
    seconds of rank r in epoch e.
    """
    per = [sum(MODEL_P_IDLE_W * t + (MODEL_P_BUSY_W - MODEL_P_IDLE_W) * min(c, t) for c in cs)
           for t, cs in zip(epoch_s, compute_s)]
    total_t = sum(epoch_s)
    return {"status": "modelled", "p_idle_w": MODEL_P_IDLE_W, "p_busy_w": MODEL_P_BUSY_W,
            "total_j": float(sum(per)), "per_epoch_j": [float(x) for x in per],
            "mean_epoch_j": float(sum(per) / len(per)) if per else None,
            "min_epoch_j": float(min(per)) if per else None,
            "max_epoch_j": float(max(per)) if per else None,
            "mean_power_w": float(sum(per) / total_t) if total_t > 0 else None,
            "duration_s": float(total_t)}
