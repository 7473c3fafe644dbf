"""Helpers of the two-host tests (tests/test_multihost_netns.py, tests/test_lost_ranks.py):
torchrun jobs across the namespaced hosts of :mod:`cdfgnn.comm.netns` (the fixture
``two_hosts`` is in conftest.py), their logs, and what a run leaves behind."""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from cdfgnn.train.torchrun import job_env

ROOT = Path(__file__).resolve().parent.parent
FAULT_TRAIN = ROOT / "tests" / "_fault_train.py"
#: the run's --timeout: the heartbeat calls a peer lost after lost_after(60) = 10 s
TIMEOUT_S = 60


def start(hosts, host: int, script: list[str], run_id: str, log: Path) -> subprocess.Popen:
    """Node ``host`` of a 2 x 2 torchrun job running ``script``, logs ``log.out/.err``;
    its temporary folders in ``log``'s folder: a host these tests kill cannot remove its
    ranks' working folders, and they should not pile up in /tmp."""
    return hosts.torchrun(host, script, run_id, log,
                          job_env(ROOT, OMP_NUM_THREADS="1", TMPDIR=str(log.parent)))


def train_args(out: Path, run: dict, **extra) -> list[str]:
    args = ["train", "--launcher", "torchrun", "--timeout", str(TIMEOUT_S),
            "--network", "veth-1gbit", "--out", str(out)]
    for key, value in {**run, **extra}.items():
        args += [f"--{key}", str(value)]
    return args


def params(flag: str, **values) -> list[str]:
    """``--method-param k=v`` (or ``--partition-param``) for every item."""
    return [a for k, v in values.items() for a in (flag, f"{k}={v}")]


def text(log: Path, suffix: str) -> str:
    return log.with_suffix(suffix).read_text(errors="replace")


def error_lines(log: Path, pattern: str, deadline: float) -> list[str]:
    """The `cdfgnn: error: run failed:` lines matching ``pattern``, once one appears
    (polling the log until ``deadline``)."""
    want = re.compile(r"^cdfgnn: error: run failed: " + pattern)
    while True:
        lines = [ln for ln in text(log, ".err").splitlines() if want.match(ln)]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def wait_for(path: Path, procs: list[subprocess.Popen], logs: list[Path], limit_s: float,
             what: str) -> None:
    """Poll until ``path`` exists; fail naming ``what`` if a node ends or time runs out."""
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert time.monotonic() < deadline, f"the run never reached {what}"
        for p, log in zip(procs, logs):
            assert p.poll() is None, f"a node ended before {what}: " + text(log, ".err")[-3000:]
        time.sleep(0.1)


def shm_files() -> set[str]:
    """What this package and torch may leave in /dev/shm."""
    if not os.path.isdir("/dev/shm"):
        return set()
    return {f for f in os.listdir("/dev/shm") if f.startswith(("cdfgnn", "torch"))}
