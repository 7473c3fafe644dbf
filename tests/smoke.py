"""Running Snakemake from tests, and the smoke build that several test modules share.

:func:`build_smoke_tree` runs ``configs/smoke.yaml`` into a folder once per session (the
``smoke_tree`` fixture of conftest.py), interrupted like Ctrl-C part way through and then
resumed, so tests/test_pipeline.py can check the outputs and the resumption and
tests/test_readme_commands.py can run the README's commands on a built tree. A test that
changes the tree restores it before it ends.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: where the README's commands find `snakemake`, `cdfgnn` and `jupyter`: this interpreter's
#: folder, or CDFGNN_README_BIN (.ci/run points it at a venv with the README's plain install)
BIN = Path(os.environ.get("CDFGNN_README_BIN") or Path(sys.executable).parent)


def tool_env() -> dict[str, str]:
    """The environment with :data:`BIN` first on PATH (the `cdfgnn` script the jobs call)."""
    env = dict(os.environ)
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    return env


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run snakemake from :data:`BIN`'s environment (the `cdfgnn` script on PATH)."""
    return subprocess.run([str(BIN / "python"), "-m", "snakemake", *args], cwd=cwd,
                          env=tool_env(), capture_output=True, text=True, timeout=timeout)


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a snakemake (dry) run: rule -> job count."""
    counts = {}
    block = output.split("Job stats:", 1)[-1] if "Job stats:" in output else ""
    for line in block.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def planned_jobs(output: str) -> list[tuple[str, list[str]]]:
    """(rule, output files) of every job a snakemake dry run (``-n``) lists; target rules
    (``all``, a group) have no output files."""
    jobs: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        m = re.match(r"^(?:local)?rule (\S+):$", line)
        if m:
            jobs.append((m.group(1), []))
        elif jobs and line.startswith("    output: "):
            jobs[-1][1].extend(line[len("    output: "):].split(", "))
    return jobs


def planned_files(output: str) -> set[str]:
    """Every file a snakemake dry run plans to make."""
    return {f for _, files in planned_jobs(output) for f in files}


def interrupt_after(args: list[str], work: Path, pattern: str, count: int,
                    timeout: float = 300) -> dict[Path, float]:
    """Start snakemake, send Ctrl-C (SIGINT to its process group) once ``count`` files
    match ``pattern`` under ``work``; return those finished files with their mtimes."""
    # SIGINT back to its default in the child: a shell that runs this suite in the
    # background (`pytest &`) starts it with SIGINT ignored, which the child would inherit
    # and so never see the Ctrl-C
    proc = subprocess.Popen([str(BIN / "python"), "-m", "snakemake", *args], env=tool_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if len(list(work.glob(pattern))) >= count:
                os.killpg(proc.pid, signal.SIGINT)
                break
            time.sleep(0.2)
        # a graceful stop waits for the jobs in flight; a job inside a first-time numba
        # compile only sees the signal when the compile returns (tens of seconds on a
        # loaded 2-core machine), so allow minutes before calling it a hang
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return {p: p.stat().st_mtime for p in work.glob(pattern)}


@dataclass
class SmokeTree:
    """A finished smoke build: its folder, the snakemake arguments that built it, the
    files finished before the interruption (with their mtimes) and the resumed run."""

    work: Path
    args: list[str]
    kept: dict[Path, float]
    resumed: subprocess.CompletedProcess


def build_smoke_tree(work: Path) -> SmokeTree:
    """configs/smoke.yaml built into ``work``: interrupted once, then resumed."""
    args = ["--snakefile", str(REPO / "Snakefile"), "-d", str(work),
            "--configfile", str(REPO / "configs" / "smoke.yaml"), "--cores", "2"]
    kept = interrupt_after(args, work, "results/partitions/*/*/*/*.stats.json", 4)
    return SmokeTree(work, args, kept, snakemake(*args))
