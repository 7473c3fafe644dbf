"""The CDFGNN cache's torch path (cdfgnn/methods/cdfgnn_cache_torch.py: the formulation
before the fused numba kernels, and the cache's path on a GPU), forced on the CPU so
the kernels can be checked against it bit for bit (tests/test_cdfgnn_kernels.py).
``patch(monkeypatch)`` makes CdfgnnCache (and so Cdfgnn) take it for one test."""
from __future__ import annotations

import torch

from cdfgnn.methods.cdfgnn_cache import CdfgnnCache


def over_threshold(z: torch.Tensor, pushed: torch.Tensor, eps: float) -> torch.Tensor:
    """The torch threshold test, as a function."""
    return CdfgnnCache._t_over_threshold(type("E", (), {"eps": eps})(), z, pushed)


def patch(monkeypatch) -> None:
    monkeypatch.setattr(CdfgnnCache, "_kernel", "torch")
