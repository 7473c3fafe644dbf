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

The sampled track (``distdgl-*``, ``rapidgnn``) has no degenerate setting (no
one-process trainer draws its per-worker schedule), so its cuda runs are compared with
its CPU runs more strictly: the losses within ``TOL`` and the per-epoch counts (remote
inputs, rows fetched, cache hits; sampling and cache decisions are host-side) exactly;
``rapidgnn`` without cache and prefetch equals ``distdgl-metis`` on cuda.
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


# ------------------------------------------------------------------ the sampled track
SAMPLED = ("distdgl-metis", "distdgl-random", "rapidgnn")
#: per-epoch counts that do not depend on the device (host-side schedule and cache)
COUNTS = ("remote_inputs", "rows_fetched", "fetch_bytes", "cache_hits")
needs_2_gpus = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="needs 2 CUDA GPUs (process backend on cuda: nccl, one GPU per rank)")


@pytest.fixture(scope="module")
def sampled_graph(tmp_path_factory, make_graph) -> str:
    path = tmp_path_factory.mktemp("sampled-gpu") / "g.npz"
    make_graph(n=600, seed=5, isolated=0).save(path)
    return str(path)


def _sampled(graph_file, device: str, name: str, params: dict | None = None,
             backend: str = "thread") -> dict:
    """tests/test_rapidgnn.py's small setting on ``device``."""
    return run_training(TrainConfig(
        graph=graph_file, dataset=None, method=name, model="sage", workers=WORKERS, hosts=2,
        epochs=EPOCHS, warmup=1, fanouts=[4, 4], batch_size=32, hidden=16, dropout=0.3,
        network="rapidgnn-chameleon", method_params=params or {}, device=device,
        backend=backend, timeout_s=300))


def _assert_close_losses(a: dict, b: dict, what: str) -> None:
    losses = [np.array([e["loss"] for e in r["epochs"]]) for r in (a, b)]
    assert np.abs(losses[0] - losses[1]).max() <= TOL, f"{what}: {losses[0]} != {losses[1]}"


def _assert_same_run(gpu: dict, cpu: dict, what: str) -> None:
    _assert_close_losses(gpu, cpu, what)
    for g, c in zip(gpu["epochs"], cpu["epochs"]):
        assert {k: g.get(k) for k in COUNTS} == {k: c.get(k) for k in COUNTS}, what


@needs_cuda
@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_method_on_cuda_equals_its_cpu_run(sampled_graph, name):
    gpu = _sampled(sampled_graph, "cuda", name)
    cpu = _sampled(sampled_graph, "cpu", name)
    _assert_same_run(gpu, cpu, name)
    assert gpu["memory"]["max_memory_allocated_mb"] > 0
    # the feature store's host <-> device copies (index tensors) are counted on cuda only
    assert all(e["h2d_bytes"] > 0 for e in gpu["epochs"])
    assert all("h2d_bytes" not in e for e in cpu["epochs"])
    if name == "rapidgnn":
        assert sum(e["cache_hits"] for e in gpu["epochs"]) > 0


@needs_cuda
def test_rapidgnn_without_cache_equals_distdgl_metis_on_cuda(sampled_graph):
    rapid = _sampled(sampled_graph, "cuda", "rapidgnn", {"cache_fraction": 0.0, "prefetch": 0})
    base = _sampled(sampled_graph, "cuda", "distdgl-metis")
    # bit for bit on the CPU (tests/test_rapidgnn.py); cuda kernels may sum in any order
    _assert_close_losses(rapid, base, "rapidgnn without cache vs distdgl-metis")
    assert [e["rows_fetched"] for e in rapid["epochs"]] == [
        e["rows_fetched"] for e in base["epochs"]]


@needs_2_gpus
def test_rapidgnn_on_nccl_equals_its_cpu_run(sampled_graph):
    """Process ranks on cuda: pulls travel over nccl and arrive on the device."""
    gpu = _sampled(sampled_graph, "cuda", "rapidgnn", backend="process")
    cpu = _sampled(sampled_graph, "cpu", "rapidgnn", backend="process")
    _assert_same_run(gpu, cpu, "rapidgnn (process backend)")
    assert all(e["d2h_bytes"] > 0 for e in gpu["epochs"])   # asked ids arrive on the device
