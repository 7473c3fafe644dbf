"""Every registered method on a GPU: its degenerate setting on cuda equals ``exact`` on
cuda and its own run on the CPU.

The settings are the methods' own declarations (``SyncStrategy.degenerate``, read by
tests/test_degenerate.py too, and its partitioner choice). A method without a
degenerate setting (communication-free CoFree) is still run on both devices with its
defaults and must give the CPU run's losses. Thread-backend ranks share the one GPU
(as tests/test_gpu_path.py's exact test does). Every case skips, with its reason, on a
machine without a CUDA GPU; on a GPU machine none may skip (record the result in
docs/results.md, 'GPU runs', and add the method to
``cdfgnn.methods.hardware.VERIFIED_ON_CUDA``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import cdfgnn.methods  # noqa: F401  (registers the methods)
from cdfgnn.methods.base import METHODS
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training
from test_degenerate import _partitioner

#: float32 on two devices: cuSPARSE and the CPU kernels sum in different orders
TOL = 1e-4
EPOCHS = 4
WORKERS = 2
# the package's methods (other test modules register throwaway ones)
NAMES = [n for n in METHODS.names() if METHODS.get(n).__module__.startswith("cdfgnn.")]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (torch.cuda.is_available() is False)")


def _run(graph_file, device: str, name: str, params: dict, partitioner: str) -> np.ndarray:
    cfg = TrainConfig(graph=graph_file, dataset=None, model="gcn", layers=2, hidden=16,
                      epochs=EPOCHS, warmup=1, dropout=0.3, timeout_s=300, device=device,
                      method=name, method_params=params, workers=WORKERS,
                      partitioner=partitioner)
    return np.array([e["loss"] for e in run_training(cfg)["epochs"]])


@needs_cuda
@pytest.mark.parametrize("name", NAMES)
def test_method_on_cuda_equals_exact_on_cuda_and_its_cpu_run(graph_file, name):
    cls = METHODS.get(name)
    assert "cuda" in cls.supported_devices, f"{name} does not declare cuda"
    setting = cls.degenerate
    params = dict(setting.params) if setting.params is not None else {}
    part = _partitioner(cls)
    gpu = _run(graph_file, "cuda", name, params, part)
    cpu = _run(graph_file, "cpu", name, params, part)
    assert np.abs(gpu - cpu).max() <= TOL, f"{name}: cuda {gpu} != cpu {cpu}"
    if setting.params is not None:
        exact = _run(graph_file, "cuda", "exact", {}, part)
        assert np.abs(gpu - exact).max() <= TOL, f"{name}: cuda {gpu} != exact on cuda {exact}"
