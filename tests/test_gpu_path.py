"""The device-generic engine: --device checks, timers, the memory section, torchrun, GPUs.

CPU tests run everywhere. The tests marked ``needs_cuda`` run only where
``torch.cuda.is_available()`` (they skip in CI and on this project's CPU machines).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from cdfgnn.comm.timers import CUDA_EVENTS, THREAD_CPU, WALL, EventSpan, Tally, clocks_for
from cdfgnn.errors import CdfgnnError
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import validate_record
from cdfgnn.train.torchrun import (ENV_VARS, TorchrunSession, env_topology, resolve_launcher,
                                   torchrun_env)

ROOT = Path(__file__).resolve().parent.parent
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_2_gpus = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                  reason="needs 2 CUDA GPUs (nccl: one GPU per rank)")
TINY = dict(dataset="synth-arxiv", scale="tiny", hidden=16, epochs=3, warmup=1, timeout_s=120)


# ------------------------------------------------------------------ --device checks
def test_methods_declare_devices():
    import cdfgnn.methods  # noqa: F401
    from cdfgnn.methods.base import METHODS, SyncStrategy

    assert SyncStrategy.supported_devices == ("cpu",)
    assert "cuda" in METHODS.get("exact").supported_devices
    for name in METHODS.names():
        devices = METHODS.get(name).supported_devices
        assert "cpu" in devices and set(devices) <= {"cpu", "cuda"}, name


def test_cuda_refused_for_a_cpu_only_method():
    # every registered method declares cuda; a method that keeps a buffer on the host
    # declares ("cpu",) and is refused by name
    from cdfgnn.methods.distdgl import DistDGLMetis

    class HostOnly(DistDGLMetis):
        name = "host-only"
        supported_devices = ("cpu",)

    assert HostOnly._device_problem("cuda", {}) == (
        "method 'host-only' does not run on --device cuda; it supports: cpu")
    assert HostOnly._device_problem("cpu", {}) is None


def test_every_method_declares_cuda():
    from cdfgnn.methods.base import METHODS

    # the package's methods, both tracks (other test modules register throwaway ones)
    names = [n for n in METHODS.names() if METHODS.get(n).__module__.startswith("cdfgnn.")]
    assert {"distdgl-metis", "distdgl-random", "rapidgnn"} <= set(names)
    assert all("cuda" in METHODS.get(n).supported_devices for n in names), [
        n for n in names if "cuda" not in METHODS.get(n).supported_devices]
    for name in ("distdgl-metis", "distdgl-random", "rapidgnn"):   # the sampled track
        TrainConfig(device="cuda", method=name).validate()


def test_codecs_and_trainers_on_cuda():
    # every codec encodes where its rows are (torch kernels off the CPU): none is refused
    for codec in ("fp16", "linear-8", "stochastic-2"):
        TrainConfig(device="cuda", method_params={"codec": codec}).validate()
    TrainConfig(device="cuda", method="sylvie-s").validate()
    TrainConfig(device="cuda", method="cdfgnn", partitioner="ebv").validate()
    with pytest.raises(CdfgnnError, match=r"trainer 'minibatch' does not run on --device cuda"):
        TrainConfig(device="cuda", trainer="minibatch").validate()
    with pytest.raises(CdfgnnError, match=r"unknown --device 'tpu'; valid: cpu, cuda"):
        TrainConfig(device="tpu").validate()


def test_unverified_method_warning_names_the_method():
    from cdfgnn.methods.base import METHODS
    from cdfgnn.methods.hardware import VERIFIED_ON_CUDA, unverified_warning

    assert unverified_warning("sar", "cpu") is None
    assert unverified_warning("sar", "cuda") is None        # verified: docs/results.md
    line = unverified_warning("my-new-method", "cuda")      # a method added since
    assert line == ("cdfgnn: warning: method 'my-new-method' is not yet verified on GPU "
                    "hardware (--device cuda); see docs/results.md, 'GPU runs'")
    for name in ("distdgl-metis", "distdgl-random", "rapidgnn"):   # the sampled track
        if name not in VERIFIED_ON_CUDA:
            assert f"method {name!r} is not yet verified" in unverified_warning(name, "cuda")
    results = (ROOT / "docs" / "results.md").read_text()
    for name, evidence in VERIFIED_ON_CUDA.items():   # each entry: a method, on record
        assert name in METHODS.names() and unverified_warning(name, "cuda") is None
        assert evidence and name in results, name


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_a_gpu_is_one_clear_line():
    from cdfgnn.train.run import run_training

    cfg = TrainConfig(device="cuda")
    cfg.validate()  # a plan may hold GPU runs on a machine without one (a cluster's head node)
    with pytest.raises(CdfgnnError) as err:
        run_training(cfg)
    assert str(err.value) == ("--device cuda requested but CUDA is not available "
                              "(torch.cuda.is_available() is False)")
    out = subprocess.run([sys.executable, "-m", "cdfgnn.cli", "train", "--dataset", "synth-arxiv",
                          "--device", "cuda"], capture_output=True, text=True, cwd=ROOT,
                         env=_env(), timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"cdfgnn: error: {err.value}"]


# ------------------------------------------------------------------ timers
def test_cpu_clocks_are_host_clocks():
    wall, compute = clocks_for("cpu")
    assert (wall, compute) == (WALL, THREAD_CPU)
    assert not compute.includes_waits and wall.includes_waits
    w, c = wall.start(), compute.start()
    time.sleep(0.05)  # wall time passes, this thread's CPU time hardly does
    w.stop(), c.stop()
    assert w.ready and c.ready
    assert w.seconds() >= 0.05 > c.seconds()


def test_tally_sums_spans_per_tag():
    tally = Tally()
    for _ in range(3):
        span = WALL.start()
        time.sleep(0.01)
        tally.add("halo", span.stop())
    totals = tally.totals()
    assert set(totals) == {"halo"} and totals["halo"] >= 0.03
    tally.clear()
    assert tally.totals() == {}


def test_communicator_times_collectives_with_its_device_clock():
    from cdfgnn.comm.thread import ThreadGroup
    from cdfgnn.partition.base import Topology

    comm = ThreadGroup(1, Topology(1, 1)).communicator(0)
    assert comm.clocks == (WALL, THREAD_CPU)
    comm.all_to_all([torch.ones(2)], tag="halo/fwd/0")
    with comm.overhead("codec"):
        sum(range(20000))
    assert comm.seconds["halo/fwd/0"] >= 0 and comm.overhead_cpu["codec"] >= 0
    assert set(comm.seconds) == {"halo/fwd/0", "codec"}
    comm.reset_epoch()
    assert not comm.seconds and not comm.overhead_cpu


# ------------------------------------------------------------------ memory section
def test_cpu_record_has_a_memory_section(tmp_path):
    from cdfgnn.train.run import run_training

    out = tmp_path / "run.json"
    rec = run_training(TrainConfig(**TINY, workers=2, out=str(out)))
    validate_record(json.loads(out.read_text()))
    mem = rec["memory"]
    assert mem["device"] == "cpu" and mem["peak_rss_mb"] == rec["summary"]["peak_memory_mb"] > 0
    assert mem["estimated_mb"] == rec["summary"]["estimated_memory_mb"]
    assert "max_memory_allocated_mb" not in mem
    assert all("max_memory_allocated_mb" not in r for r in rec["ranks"])
    assert rec["config"]["launcher"] == "builtin"


# ------------------------------------------------------------------ torchrun
def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _torchrun_env(world=4, local=2, rank=0) -> dict:
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % local),
            "LOCAL_WORLD_SIZE": str(local), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_torchrun_environment_gives_the_topology():
    env = _torchrun_env(world=4, local=2)
    assert torchrun_env(env) == env
    assert torchrun_env({k: v for k, v in env.items() if k != "MASTER_PORT"}) is None
    topo = env_topology(env)
    assert (topo.hosts, topo.devices_per_host) == (2, 2)
    assert resolve_launcher("auto", env) == "torchrun"
    assert resolve_launcher("auto", {}) == "builtin"
    with pytest.raises(CdfgnnError, match=r"--launcher torchrun: RANK, .* not set; start the run"):
        resolve_launcher("torchrun", {})
    with pytest.raises(CdfgnnError, match=r"WORLD_SIZE 3 is not a multiple of LOCAL_WORLD_SIZE 2"):
        env_topology(_torchrun_env(world=3, local=2))


def test_torchrun_topology_mismatch_is_a_clear_error():
    cfg = TrainConfig(workers=2, hosts=1, backend="process")
    with pytest.raises(CdfgnnError, match=r"^torchrun started 2 host\(s\) x 2 rank\(s\) "
                                          r"\(WORLD_SIZE 4, LOCAL_WORLD_SIZE 2\), but "
                                          r"--workers/--hosts asks for 2 worker\(s\) on 1 host"):
        TorchrunSession(cfg, _torchrun_env(world=4, local=2))
    cfg = TrainConfig(workers=4, hosts=2, backend="thread")
    with pytest.raises(CdfgnnError, match=r"under torchrun every rank is a process"):
        TorchrunSession(cfg, _torchrun_env(world=4, local=2))


def test_torchrun_equals_the_process_backend(tmp_path):
    """Two gloo ranks started by torch.distributed.run == the built-in process backend."""
    _torchrun_vs_process(tmp_path, "cpu")


@needs_2_gpus
def test_torchrun_on_cuda_equals_the_process_backend(tmp_path):
    """Two nccl ranks (cuda:LOCAL_RANK) started by torch.distributed.run."""
    rec = _torchrun_vs_process(tmp_path, "cuda", tol=1e-4)
    assert rec["memory"]["max_memory_allocated_mb"] > 0


def _torchrun_vs_process(tmp_path, device: str, tol: float = 1e-5) -> dict:
    from cdfgnn.train.run import run_training

    ref = run_training(TrainConfig(**TINY, workers=2, backend="process", device=device))
    out = tmp_path / "torchrun.json"
    args = ["--dataset", TINY["dataset"], "--scale", TINY["scale"], "--hidden", "16",
            "--epochs", str(TINY["epochs"]), "--warmup", "1", "--device", device,
            "--out", str(out)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "--log-dir", str(tmp_path / "torchelastic"), "-m", "cdfgnn.cli", "train", *args,
           "--launcher", "torchrun"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=_env(),
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count('"out"') == 1  # rank 0 alone reports
    rec = json.loads(out.read_text())
    validate_record(rec)
    cfg = rec["config"]
    assert (cfg["launcher"], cfg["backend"], cfg["workers"], cfg["hosts"]) == (
        "torchrun", "process", 2, 1)
    assert [r["rank"] for r in rec["ranks"]] == [0, 1]
    assert rec["provenance"]["device"] == device
    np.testing.assert_allclose([e["loss"] for e in rec["epochs"]],
                               [e["loss"] for e in ref["epochs"]], rtol=0, atol=tol)
    # same bits on the CPU; on a GPU a near-tie may flip one argmax
    assert rec["summary"]["final_test"] == pytest.approx(ref["summary"]["final_test"],
                                                         abs=1e-12 if device == "cpu" else 0.02)
    assert rec["comm"]["per_epoch"] == ref["comm"]["per_epoch"]
    return rec


# ------------------------------------------------------------------ GPU (skip without one)
def _oracle_and_parts(device, backend, workers=2):
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.train.oracle import train_full_graph
    from cdfgnn.train.run import train_distributed

    graph = get_graph("synth-arxiv", scale="tiny", seed=0)
    cpu = TrainConfig(**TINY, workers=workers, backend=backend, dropout=0.3)
    ref = train_full_graph(graph, cpu)
    cfg = TrainConfig(**{**cpu.to_dict(), "device": device})
    cfg.validate()
    part = partition_graph(graph, "metis", Topology(1, workers), seed=0)
    return ref, train_distributed(cfg, graph, part), train_full_graph(graph, cfg)


def _assert_close(ref, res, tol=1e-4):
    np.testing.assert_allclose([e["loss"] for e in res["epochs"]],
                               [e["loss"] for e in ref["epochs"]], rtol=0, atol=tol)
    for name, w in ref["final_state"].items():
        assert (res["final_state"][name] - w).abs().max().item() <= tol, name


@needs_cuda
def test_exact_on_cuda_thread_backend_equals_cpu_oracle():
    ref, ranks, oracle_gpu = _oracle_and_parts("cuda", "thread")
    _assert_close(ref, oracle_gpu)      # the one-process oracle on the GPU
    _assert_close(ref, ranks[0])        # distributed exact, thread ranks sharing the GPU


@needs_2_gpus
def test_exact_on_cuda_process_backend_nccl_equals_cpu_oracle():
    ref, ranks, _ = _oracle_and_parts("cuda", "process")
    _assert_close(ref, ranks[0])


@needs_cuda
def test_cuda_record_has_max_memory_allocated_and_event_timers(tmp_path):
    from cdfgnn.comm.thread import ThreadGroup
    from cdfgnn.partition.base import Topology
    from cdfgnn.train.run import run_training

    assert clocks_for("cuda") == (CUDA_EVENTS, CUDA_EVENTS)
    comm = ThreadGroup(1, Topology(1, 1)).communicator(0, "cuda")
    assert comm.clocks == (CUDA_EVENTS, CUDA_EVENTS)
    span = comm.clocks[0].start()
    assert isinstance(span, EventSpan)
    torch.ones(1000, 1000, device="cuda").sum()
    assert span.stop().seconds() > 0
    out = tmp_path / "gpu.json"
    rec = run_training(TrainConfig(**TINY, workers=2, device="cuda", out=str(out)))
    validate_record(json.loads(out.read_text()))
    assert rec["memory"]["device"] == "cuda"
    assert rec["memory"]["max_memory_allocated_mb"] > 0
    assert all(r["max_memory_allocated_mb"] > 0 for r in rec["ranks"])
    assert rec["provenance"]["device"] == "cuda"
