"""Running Snakemake from tests, and the smoke build that several test modules share.

:class:`SmokeBuild` runs ``configs/smoke.yaml`` into a folder once per session
(conftest.py starts it in the background with the session; its ``smoke_tree`` fixture
waits for it), interrupted like Ctrl-C part way through and then resumed, so
tests/test_pipeline.py can check the outputs and the resumption and
tests/test_readme_commands.py can run the README's commands on a built tree. A test that
changes the tree restores it before it ends.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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


def snakemake_side_by_side(*runs: list[str],
                           cwd: Path = REPO) -> list[subprocess.CompletedProcess]:
    """:func:`snakemake` for every argument list of ``runs``, two at a time (each run is
    one single-threaded process: two use both cores of the test machine); they must not
    share a working directory (``-d``), whose locks a run takes even with ``-n``."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda args: snakemake(*args, cwd=cwd), runs))


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


#: runs `python -m snakemake ARGS` in a process group of its own (its jobs too: a Ctrl-C
#: reaches them all) with SIGINT at its default: a shell that runs this suite in the
#: background (`pytest &`) starts it with SIGINT ignored, which snakemake would inherit
#: and so never see the Ctrl-C. (An exec, not a preexec_fn: the build starts from a
#: thread, where a preexec_fn may deadlock.) It stays in this session: on Linux each
#: session is a scheduling group of its own ("autogroup"), so a session of its own
#: would get as much CPU as all the tests together.
_LAUNCH = ("import os, signal, sys; os.setpgid(0, 0); "
           "signal.signal(signal.SIGINT, signal.SIG_DFL); "
           "os.execv(sys.executable, [sys.executable, '-m', 'snakemake', *sys.argv[1:]])")
#: Popen closes the race with os.setpgid above where it can (Python 3.11+)
_OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {}


@dataclass
class SmokeTree:
    """A finished smoke build: its folder, the snakemake arguments that built it, the
    files finished before the interruption (with their mtimes) and the resumed run."""

    work: Path
    args: list[str]
    kept: dict[Path, float]
    resumed: subprocess.CompletedProcess


class SmokeBuild:
    """configs/smoke.yaml built into ``work`` in a thread of its own, started at once:
    interrupted like Ctrl-C once ``count`` partitionings are written, then resumed.

    It runs at the tests' own priority beside the tests that come before the first one
    needing it (the files on the tree start it: tests/conftest.py), so the worker that
    waits for it, the suite's longest, waits less; measured with three workers, 450 s for
    the suite against 488 s with the build at the lowest priority until it was needed. The
    hang limits (``LIMIT_S``) count from :meth:`result`'s call, not before: until then
    the build shares the cores with the tests.
    """

    #: seconds to reach the interruption, to stop after it, and for the resumed run
    LIMIT_S = (300.0, 300.0, 600.0)

    def __init__(self, work: Path, pattern: str = "results/partitions/*/*/*/*.stats.json",
                 count: int = 4):
        self.work, self.pattern, self.count = work, pattern, count
        self.args = ["--snakefile", str(REPO / "Snakefile"), "-d", str(work),
                     "--configfile", str(REPO / "configs" / "smoke.yaml"), "--cores", "2"]
        # the environment now, in this thread: the tests running meanwhile may patch it;
        # temporary folders beside the tree: snakemake interrupted by Ctrl-C leaves its
        # own behind, which should not pile up in /tmp
        tmp = work.parent / f"{work.name}-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        self._env = {**tool_env(), "TMPDIR": str(tmp)}
        self._waited_since: float | None = None    # set by result()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._stopping = False
        self._tree: SmokeTree | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="smoke-build", daemon=True)
        self._thread.start()

    def result(self) -> SmokeTree:
        """Wait for the build and return it."""
        with self._lock:
            if self._waited_since is None:
                self._waited_since = time.monotonic()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._tree is not None
        return self._tree

    def stop(self) -> None:
        """End the build where it is (its whole process group) and wait for the thread."""
        with self._lock:
            self._stopping = True
            if self._proc is not None and self._proc.poll() is None:
                _kill_group(self._proc.pid, signal.SIGKILL)
        self._thread.join()

    # ---------------------------------------------------------------- the thread
    def _run(self) -> None:
        try:
            kept = self._interrupted_run()
            self._tree = SmokeTree(self.work, self.args, kept, self._resumed_run())
        except BaseException as exc:  # noqa: BLE001 - handed to result()
            self._error = exc

    def _expired(self, limit_s: float, since: float | None = None) -> bool:
        """Past ``limit_s`` counted from result()'s call (or ``since``, if later)."""
        start = self._waited_since
        if start is None:
            return False
        return time.monotonic() > max(start, since or start) + limit_s

    def _start(self, out) -> subprocess.Popen:
        with self._lock:
            if self._stopping:
                raise RuntimeError("the smoke build was stopped")
            self._proc = subprocess.Popen(
                [str(BIN / "python"), "-c", _LAUNCH, *self.args], env=self._env, cwd=REPO,
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, text=True, **_OWN_GROUP)
            return self._proc

    def _interrupted_run(self) -> dict[Path, float]:
        """Start snakemake, send Ctrl-C (SIGINT to its process group) once ``count``
        files match ``pattern`` under ``work``; return those files with their mtimes."""
        proc = self._start(subprocess.DEVNULL)
        try:
            while proc.poll() is None and not self._expired(self.LIMIT_S[0]):
                if len(list(self.work.glob(self.pattern))) >= self.count:
                    _kill_group(proc.pid, signal.SIGINT)
                    break
                time.sleep(0.2)
            # a graceful stop waits for the jobs in flight; a job inside a first-time
            # numba compile only sees the signal when the compile returns (tens of
            # seconds on a loaded 2-core machine), so allow minutes before calling it a hang
            signalled = time.monotonic()
            while proc.poll() is None:
                if self._expired(self.LIMIT_S[1], since=signalled):
                    raise TimeoutError("the interrupted smoke build did not stop")
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
        return {p: p.stat().st_mtime for p in self.work.glob(self.pattern)}

    def _resumed_run(self) -> subprocess.CompletedProcess:
        proc = self._start(subprocess.PIPE)
        started = time.monotonic()
        while True:
            try:        # a retried communicate() loses none of the output
                out, err = proc.communicate(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if self._expired(self.LIMIT_S[2], since=started):
                    _kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_group(pid: int, sig: int) -> None:
    """``sig`` to the process group ``pid`` (to ``pid`` alone before it has made it)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
