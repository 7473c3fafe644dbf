"""Two hosts on this machine: torchrun across two network namespaces over a shaped link.

The hosts (:mod:`cdfgnn.comm.netns`, the ``two_hosts`` fixture in conftest.py): two
network namespaces joined by a veth pair whose addresses (198.18.0.1 and 198.18.0.2 on
a /30, RFC 2544) exist only inside them, each end's egress shaped by ``tc tbf`` to
1 Gbit/s. One ``torchrun`` per namespace starts 2 ranks (2 nodes x 2 processes, c10d
rendezvous hosted by node 0, gloo bound to the veth with ``GLOO_SOCKET_IFNAME``).

* ``test_methods_across_hosts_equal_their_one_machine_runs``: benchmarks/multihost.py
  for two methods (``exact``; the sampled track's ``rapidgnn``): losses within 1e-6 of
  the same run on one machine and equal per-tag bytes, valid records with ranks on the
  right hosts, cross-host bytes; ``exact``'s losses equal the one-process oracle within
  1e-5. The benchmark runs every other method, and prints the measured exchange time
  against the NetworkModel's for the same counted bytes on ``veth-1gbit``.
* ``test_a_host_whose_link_goes_down_ends_the_run``: in the third epoch the link goes
  down; the ranks of both sides end with exit code 1 and one line naming the lost host
  within ``DROP_BOUND_S``, and no record is written. The heartbeat
  (``cdfgnn/comm/liveness.py``) needs ``lost_after(60)`` = 10 s after a link goes down.
  A host killed at each phase of a run: tests/test_lost_ranks.py.
* the clean-up of :func:`cdfgnn.comm.netns.two_hosts` on every way out (normal end,
  error, Ctrl-C, SIGTERM, a run past its time), and the benchmark's refusal where
  namespaces cannot be made.

Needs root, ``ip`` and ``tc`` (iproute2; ``.ci/run`` installs it); skips with the
reason where namespaces cannot be made.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from cdfgnn.comm import netns
from cdfgnn.comm.liveness import lost_after
from twohosts import (FAULT_TRAIN, ROOT, TIMEOUT_S, error_lines, params, start, text,
                      train_args, wait_for)

#: seconds from the drop to the surviving ranks' one-line error: the heartbeat needs
#: lost_after(TIMEOUT_S) = 10 s + about 1 s; the rest is slack for a busy 2-core machine
DROP_BOUND_S = 30.0
#: the link-down run: small enough for 4 ranks on 2 cores, big enough that the
#: cross-host exchange is megabytes per epoch
RUN = dict(dataset="synth-arxiv", scale="small", hidden=64, epochs=6, warmup=1)
#: the benchmark's runs in the suite (its default twin, fewer epochs)
BENCH_RUN = dict(dataset="synth-arxiv", scale="tiny", hidden=16, epochs=2, warmup=1)
BENCH = ROOT / "benchmarks" / "multihost.py"


def _needs_namespaces():
    reason = netns.unavailable()
    if reason:
        pytest.skip(reason)


# ------------------------------------------------------------------ the runs
def test_the_hosts_reach_only_each_other(two_hosts):
    for host in (0, 1):  # only the shared /30: no way out of the namespaces
        routes = two_hosts.routes(host)
        assert len(routes) == 1 and routes[0].startswith(
            f"198.18.0.0/30 dev {two_hosts.ifaces[host]} "), routes


def test_methods_across_hosts_equal_their_one_machine_runs(tmp_path):
    """benchmarks/multihost.py for ``exact`` and the sampled track's ``rapidgnn``: equal
    to their one-machine runs; ``exact`` also equals the one-process oracle."""
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.oracle import train_full_graph
    from cdfgnn.train.record import validate_record

    _needs_namespaces()
    before = set(netns.namespaces())
    elastic_before = _torchelastic_folders()
    res = subprocess.run([sys.executable, str(BENCH), "--only", "exact", "rapidgnn", "--no-probe",
                          *[f"--{k}={v}" for k, v in BENCH_RUN.items()], "--keep",
                          str(tmp_path)], capture_output=True, text=True, timeout=600)
    print(res.stdout)
    lines = res.stdout.strip().splitlines()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert lines[-1] == "multi-host: 2 of 2 methods equal to their one-machine runs"
    assert not _left_since(before)  # the benchmark removed its namespaces
    # torchrun's own files went to the run's folder, none to /tmp (where it never
    # removes them)
    assert (tmp_path / "torchelastic").is_dir()
    assert not _torchelastic_folders() - elastic_before
    for name, track in (("exact", "full-batch"), ("rapidgnn", "minibatch")):
        row = next(ln.split() for ln in lines if ln.startswith(name + " "))
        assert row[1:3] == [track, "yes"], row
        rec = json.loads((tmp_path / f"{name}.two.json").read_text())
        validate_record(rec)
        assert (rec["config"]["launcher"], rec["config"]["workers"],
                rec["config"]["hosts"]) == ("torchrun", 4, 2)
        assert [(r["rank"], r["host"]) for r in rec["ranks"]] == [(0, 0), (1, 0), (2, 1),
                                                                  (3, 1)]
        assert rec["comm"]["per_epoch"]["inter"]["bytes"] > 0
        assert rec["model_time"]["profile"] == "veth-1gbit"
    exact = json.loads((tmp_path / "exact.two.json").read_text())
    cfg = TrainConfig(**BENCH_RUN, trainer="full-graph")
    oracle = train_full_graph(get_graph(cfg.dataset, scale=cfg.scale, seed=0), cfg)
    np.testing.assert_allclose([e["loss"] for e in exact["epochs"]],
                               [e["loss"] for e in oracle["epochs"]], rtol=0, atol=1e-5)
    # measured vertex-exchange seconds vs the model's for the same counted bytes
    measured = sum(r["comm_s"] for r in exact["ranks"])
    modelled = sum(r["modelled_vertex_s"] for r in exact["ranks"])
    assert math.isfinite(measured / modelled) and measured > 0


def test_a_host_whose_link_goes_down_ends_the_run(two_hosts, tmp_path):
    out = tmp_path / "records" / "run.json"
    out.parent.mkdir()
    logs = [tmp_path / "host0", tmp_path / "host1"]
    # rank 0 stops at the start of epoch 2 (the third) until the test has cut the link
    script = [str(FAULT_TRAIN), *train_args(out, RUN, epochs=8, method="exact-fault"),
              *params("--method-param", fault="wait", fault_rank=0, fault_epoch=2,
                      fault_dir=tmp_path)]
    procs = [start(two_hosts, h, script, "link-down", logs[h]) for h in (0, 1)]
    wait_for(tmp_path / "reached", procs, logs, 240, "epoch 2")
    two_hosts.link_down()
    dropped = time.monotonic()
    (tmp_path / "go").touch()

    limit = f"{lost_after(TIMEOUT_S):g} s"
    survivors = r"rank [01] \(host 0\) lost host 1 \(ranks 2, 3\): no heartbeat for " + limit
    lines = error_lines(logs[0], survivors, deadline=dropped + DROP_BOUND_S)
    elapsed = time.monotonic() - dropped
    assert procs[0].wait(timeout=60) != 0
    assert lines, text(logs[0], ".err")[-3000:]
    assert "SIGABRT" not in text(logs[0], ".err")  # the ranks exited, none aborted
    # host 1's ranks lose the job's store on host 0 the same way
    lost_store = (r"rank [23] \(host 1\) lost host 0 \(ranks 0, 1\): the job's store at "
                  r"198\.18\.0\.1:\d+ on host 0 did not answer for " + limit)
    assert error_lines(logs[1], lost_store, deadline=dropped + DROP_BOUND_S), \
        text(logs[1], ".err")[-3000:]
    assert not out.exists() and not any(out.parent.iterdir())  # no record, no partial one
    print(f"\nlink down: host 0's ranks ended {elapsed:.1f} s after the drop: {lines[0]}")


# ------------------------------------------------------------------ clean-up
#: a program that makes two hosts, starts a sleeper in each, says so, waits for a line on
#: its stdin or a signal, then ends as told
_HOLDER = """
import importlib.util, subprocess, sys, time
spec = importlib.util.spec_from_file_location("netns", sys.argv[3])
netns = importlib.util.module_from_spec(spec)
spec.loader.exec_module(netns)   # alone: the package would import torch
how = sys.argv[1]
# Ctrl-C raises KeyboardInterrupt, as in a program started from a terminal (a parent
# started in the background by a non-interactive shell passes SIGINT on as ignored)
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
with netns.two_hosts(tag=sys.argv[2]) as hosts:
    for h in (0, 1):
        subprocess.Popen(["ip", "netns", "exec", hosts.netns[h], "sleep", "299.75"],
                         start_new_session=True)
    while not all(hosts.pids(h) for h in (0, 1)):
        time.sleep(0.05)
    print("ready", flush=True)
    sys.stdin.readline()   # the test has looked (a signal ends the wait)
    if how == "error":
        raise RuntimeError("a failure inside the block")
    if how == "timeout":
        subprocess.run(["sleep", "299.75"], timeout=0.5)
    if how == "normal":
        sys.exit(0)
"""


@pytest.mark.parametrize("how, code", [("normal", 0), ("error", 1), ("timeout", 1),
                                        ("SIGINT", 1), ("SIGTERM", 1)])
def test_two_hosts_leave_nothing_behind_on_every_way_out(tmp_path, how, code):
    _needs_namespaces()
    tag = f"{os.getpid()}-{how.lower()}"
    hosts = netns.TwoHosts(tag)
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, how, tag, netns.__file__],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        assert hosts.exists() and all(hosts.pids(h) for h in (0, 1))
        if how.startswith("SIG"):
            proc.send_signal(getattr(signal, how))
        else:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        proc.wait(timeout=60)
        err = proc.stderr.read()
        assert (proc.returncode != 0) == bool(code), err
        assert not hosts.exists(), f"{how}: {hosts.netns} or {hosts.ifaces} left behind"
        assert not [p for p in _all_pids() if _cmdline(p) == "sleep 299.75"], how
        if how == "SIGTERM":
            assert "Terminated: terminated by SIGTERM" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
        hosts.destroy()


def _left_since(before: set[str]) -> set[str]:
    """Namespaces made since ``before`` that are still there, less those of another live
    process: pytest's other worker may hold hosts of its own meanwhile (namespaces are
    named by their owner's pid; the owner of one a finished run left behind is this
    process or gone)."""
    def owned_elsewhere(ns: str) -> bool:
        pid = netns.owner(ns)
        return pid is not None and pid != os.getpid() and netns.alive(pid)

    return {ns for ns in set(netns.namespaces()) - before if not owned_elsewhere(ns)}


def _torchelastic_folders() -> set[str]:
    """The folders torchrun makes in the temporary directory when it has no --log-dir."""
    return {p.name for p in Path(tempfile.gettempdir()).glob("torchelastic_*")}


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_a_two_host_run_past_its_time_leaves_nothing_behind(tmp_path):
    """The benchmark's two-host run stopped at its time limit: nodes, namespaces gone."""
    _needs_namespaces()
    bench = _bench()
    from cdfgnn.train.torchrun import job_env

    before = set(netns.namespaces())
    t0 = time.monotonic()
    record, why = bench.two_host_run("exact", tmp_path, dict(RUN, scale="tiny"), 3.0, "1gbit",
                                     job_env(ROOT, OMP_NUM_THREADS="1"))
    assert record is None and why == "timed out after 3 s"
    assert time.monotonic() - t0 < 30
    assert not _left_since(before)
    assert not [p for p in _all_pids() if "torch.distributed.run" in _cmdline(p)
                and "--rdzv-id exact" in _cmdline(p)]


def test_the_benchmark_says_in_one_line_why_it_cannot_run():
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    res = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True,
                         env={**env, "PATH": "/nonexistent", "PYTHONPATH": str(ROOT)},
                         timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "multihost: cannot make two hosts here: needs iproute2 (`ip` and `tc`)"]
    assert res.stdout == ""


def _bench():
    spec = importlib.util.spec_from_file_location("multihost_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _record(losses, tag_bytes, inter=100.0):
    ranks = [{"comm_s": 0.01, "reduce_s": 0.002, "modelled_comm_s": 0.001} for _ in range(4)]
    return {"epochs": [{"loss": x} for x in losses], "ranks": ranks,
            "comm": {"by_tag": {t: {"bytes": b} for t, b in tag_bytes.items()},
                     "per_epoch": {"inter": {"bytes": inter}},
                     "epochs": [{"epoch": e, "inter_bytes": inter} for e in range(len(losses))]}}


def test_the_comparison_finds_each_kind_of_difference():
    compare = _bench().compare
    one = _record([1.0, 0.5], {"halo/fwd/0": 800, "reduce": 40})
    assert compare(one, _record([1.0, 0.5 + 9e-7], {"halo/fwd/0": 800, "reduce": 40}))["equal"]
    far = compare(one, _record([1.0, 0.5 + 2e-6], {"halo/fwd/0": 800, "reduce": 40}))
    assert not far["equal"] and far["dloss"] > 1e-6
    other = compare(one, _record([1.0, 0.5], {"halo/fwd/0": 808, "reduce": 40}))
    assert not other["equal"] and other["differing"] == ["halo/fwd/0"]
    extra = compare(one, _record([1.0, 0.5], {"halo/fwd/0": 800, "reduce": 40, "eval": 8}))
    assert extra["differing"] == ["eval"]
    shorter = compare(one, _record([1.0], {"halo/fwd/0": 800, "reduce": 40}))
    assert not shorter["equal"] and not shorter["epochs_equal"]
    moved = _record([1.0, 0.5], {"halo/fwd/0": 800, "reduce": 40})
    moved["comm"]["epochs"][0]["inter_bytes"] = 99.0
    assert not compare(one, moved)["epochs_equal"] and not compare(one, moved)["equal"]
