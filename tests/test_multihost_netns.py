"""Two hosts on this machine: torchrun across two network namespaces over a shaped link.

Each test builds two network namespaces (``cdfgnn-<pid>-<n>-a`` / ``-b``) joined by a
veth pair whose addresses, 198.18.0.1 and 198.18.0.2 on a /30, come from the range
reserved for network benchmark tests (RFC 2544) and exist only inside the two
namespaces; each end's egress is shaped by ``tc tbf`` to 1 Gbit/s (``netem`` is not
available here, so no latency is added). A fresh namespace has no route but that /30
and its own loopback, so nothing started in it can reach any other address. One
``torchrun`` per namespace starts 2 ranks (2 nodes x 2 processes, c10d rendezvous
hosted by node 0, gloo bound to the veth with ``GLOO_SOCKET_IFNAME``).

* ``test_two_hosts_train_exactly_over_a_shaped_link``: the losses equal the
  one-process oracle within 1e-5, and the measured time of the vertex exchange is set
  against the NetworkModel's time for the same counted bytes on the ``veth-1gbit``
  profile (the ratio is printed and kept as a test property; it must be finite).
* ``test_a_host_that_drops_out_ends_the_run``: in the third epoch the link goes down
  (or host 1's processes are killed); the ranks of the surviving side end with exit
  code 1 and one line naming the lost host within ``DROP_BOUND_S``, and no record is
  written. The heartbeat (``cdfgnn/comm/liveness.py``) needs ``lost_after(60)`` = 10 s
  after a link goes down, 3 s after killed processes break a collective.

Needs root, ``ip`` and ``tc`` (iproute2; ``.ci/run`` installs it); skips with the
reason where namespaces cannot be made. The fixture always kills every process left in
its namespaces and deletes them, even when the test fails.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from cdfgnn.comm import netns
from cdfgnn.comm.liveness import lost_after
from cdfgnn.train.torchrun import job_env

ROOT = Path(__file__).resolve().parent.parent
FAULT_TRAIN = ROOT / "tests" / "_fault_train.py"
TIMEOUT_S = 60
#: seconds from the drop to the surviving ranks' one-line error: the heartbeat needs
#: lost_after(TIMEOUT_S) = 10 s + about 1 s; the rest is slack for a busy 2-core machine
DROP_BOUND_S = 30.0
#: the same run everywhere: small enough for 4 ranks on 2 cores, big enough that the
#: cross-host exchange is megabytes per epoch
RUN = dict(dataset="synth-arxiv", scale="small", hidden=64, epochs=6, warmup=1)


# ------------------------------------------------------------------ the two hosts
@pytest.fixture
def two_hosts():
    reason = netns.unavailable()
    if reason:
        pytest.skip(reason)
    hosts = netns.TwoHosts()
    try:
        try:
            hosts.build()
        except OSError as exc:
            pytest.skip(f"cannot make network namespaces here: {exc}")
        yield hosts
    finally:
        hosts.destroy()
        assert not hosts.exists()


def _start(hosts, host: int, script: list[str], run_id: str, log: Path):
    return hosts.torchrun(host, script, run_id, log, job_env(ROOT, OMP_NUM_THREADS="1"))


def _train_args(out: Path, **extra) -> list[str]:
    args = ["train", "--launcher", "torchrun", "--timeout", str(TIMEOUT_S),
            "--network", "veth-1gbit", "--out", str(out)]
    for key, value in {**RUN, **extra}.items():
        args += [f"--{key}", str(value)]
    return args


def _wait(procs: list[subprocess.Popen], limit_s: float) -> list[int]:
    deadline = time.monotonic() + limit_s
    for p in procs:
        p.wait(timeout=max(deadline - time.monotonic(), 1))
    return [p.returncode for p in procs]


def _text(log: Path, suffix: str) -> str:
    return log.with_suffix(suffix).read_text(errors="replace")


# ------------------------------------------------------------------ the tests
def test_two_hosts_train_exactly_over_a_shaped_link(two_hosts, tmp_path, record_property):
    from cdfgnn.comm.network import NetworkModel
    from cdfgnn.data.datasets import get_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.oracle import train_full_graph
    from cdfgnn.train.record import validate_record

    for host in (0, 1):  # only the shared /30: no way out of the namespaces
        routes = two_hosts.routes(host)
        assert len(routes) == 1 and routes[0].startswith(
            f"198.18.0.0/30 dev {two_hosts.ifaces[host]} "), routes
    out = tmp_path / "run.json"
    logs = [tmp_path / "host0", tmp_path / "host1"]
    script = ["-m", "cdfgnn.cli", *_train_args(out)]
    procs = [_start(two_hosts, h, script, "train", logs[h]) for h in (0, 1)]
    codes = _wait(procs, 300)
    assert codes == [0, 0], _text(logs[0], ".err")[-3000:] + _text(logs[1], ".err")[-3000:]

    rec = json.loads(out.read_text())
    validate_record(rec)
    assert (rec["config"]["launcher"], rec["config"]["workers"], rec["config"]["hosts"]) == (
        "torchrun", 4, 2)
    assert [(r["rank"], r["host"]) for r in rec["ranks"]] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert rec["comm"]["per_epoch"]["inter"]["bytes"] > 0
    cfg = TrainConfig(**RUN, trainer="full-graph")
    oracle = train_full_graph(get_graph(RUN["dataset"], scale=RUN["scale"], seed=0), cfg)
    np.testing.assert_allclose([e["loss"] for e in rec["epochs"]],
                               [e["loss"] for e in oracle["epochs"]], rtol=0, atol=1e-5)

    # measured vertex-exchange seconds vs the model's for the same counted bytes
    assert rec["model_time"]["profile"] == "veth-1gbit"
    assert NetworkModel(Topology(2, 2), "veth-1gbit").profile.inter_gbps == 0.125
    measured = sum(r["comm_s"] for r in rec["ranks"])
    modelled = sum(r["modelled_vertex_s"] for r in rec["ranks"])
    ratio = measured / modelled
    assert math.isfinite(ratio) and ratio > 0
    record_property("measured_over_modelled", ratio)
    per_rank = [round(r["comm_s"] / r["modelled_vertex_s"], 2) for r in rec["ranks"]]
    inter_mb = rec["comm"]["per_epoch"]["inter"]["bytes"] / 1e6
    print(f"\nveth 1 Gbit/s, h2x2: inter-host {inter_mb:.2f} MB/epoch; vertex exchange "
          f"measured {measured / 4 * 1e3:.1f} ms vs modelled {modelled / 4 * 1e3:.1f} ms per "
          f"rank and epoch (veth-1gbit): ratio {ratio:.2f} (per rank {per_rank})")


@pytest.mark.parametrize("drop", ["link-down", "host-killed"])
def test_a_host_that_drops_out_ends_the_run(two_hosts, tmp_path, drop):
    out = tmp_path / "records" / "run.json"
    out.parent.mkdir()
    logs = [tmp_path / "host0", tmp_path / "host1"]
    # rank 0 stops at the start of epoch 2 (the third) until the test has dropped host 1
    script = [str(FAULT_TRAIN), *_train_args(out, epochs=8, method="exact-fault"),
              "--method-param", "fault=wait", "--method-param", "fault_rank=0",
              "--method-param", "fault_epoch=2", "--method-param", f"fault_dir={tmp_path}"]
    procs = [_start(two_hosts, h, script, drop, logs[h]) for h in (0, 1)]
    deadline = time.monotonic() + 240
    while not (tmp_path / "reached").exists():
        assert time.monotonic() < deadline, "the run never reached epoch 2"
        assert procs[0].poll() is None, _text(logs[0], ".err")[-3000:]
        time.sleep(0.1)
    if drop == "link-down":
        two_hosts.link_down()
    else:
        two_hosts.kill(1)
    dropped = time.monotonic()
    (tmp_path / "go").touch()

    limit = f"{lost_after(TIMEOUT_S):g} s"
    # killed processes break the collective at once: then 3 missed beats suffice
    heard = limit if drop == "link-down" else f"({limit}|3 s)"
    survivors = r"rank [01] \(host 0\) lost host 1 \(ranks 2, 3\): no heartbeat for " + heard
    lines = _error_lines(logs[0], survivors, deadline=dropped + DROP_BOUND_S)
    elapsed = time.monotonic() - dropped
    assert procs[0].wait(timeout=60) != 0
    assert lines, _text(logs[0], ".err")[-3000:]
    assert "SIGABRT" not in _text(logs[0], ".err")  # the ranks exited, none aborted
    if drop == "link-down":  # host 1's ranks lose the job's store on host 0 the same way
        lost_store = (r"rank [23] \(host 1\) lost host 0 \(ranks 0, 1\): the job's store at "
                      r"198\.18\.0\.1:\d+ on host 0 did not answer for " + limit)
        assert _error_lines(logs[1], lost_store, deadline=dropped + DROP_BOUND_S), \
            _text(logs[1], ".err")[-3000:]
    assert not out.exists() and not any(out.parent.iterdir())  # no record, no partial one
    print(f"\n{drop}: host 0's ranks ended {elapsed:.1f} s after the drop: {lines[0]}")


def _error_lines(log: Path, pattern: str, deadline: float) -> list[str]:
    """The `cdfgnn: error: run failed:` lines matching ``pattern``, once one appears
    (polling the log until ``deadline``)."""
    import re

    want = re.compile(r"^cdfgnn: error: run failed: " + pattern)
    while True:
        lines = [ln for ln in _text(log, ".err").splitlines() if want.match(ln)]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)
