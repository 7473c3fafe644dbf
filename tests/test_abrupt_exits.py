"""What an abrupt end leaves behind: the undo registry (cdfgnn/exits.py) and the
partitioning child (cdfgnn/partition/apart.py), which must not outlive its parent."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "main.py"
    path.write_text(textwrap.dedent(body))
    return path


def _start(path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(path), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie (no parent reaps it here) has ended too
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------ the registry
def test_undos_run_latest_first_and_only_inside_their_block(tmp_path):
    path = _script(tmp_path, """
        import sys
        from cdfgnn.exits import end_abruptly, pending, undo_on_abrupt_exit
        log = open(sys.argv[1], "w")
        with undo_on_abrupt_exit(lambda: log.write("left\\n")):
            pass
        assert pending() == 0
        with undo_on_abrupt_exit(lambda: log.write("outer\\n")):
            with undo_on_abrupt_exit(lambda: 1 / 0):          # a failing undo is skipped
                with undo_on_abrupt_exit(lambda: (log.write("inner\\n"), log.flush())):
                    end_abruptly(7, "one line")
        """)
    proc = _start(path, str(tmp_path / "log"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7 and err == "one line\n", err
    assert (tmp_path / "log").read_text() == "inner\n"  # "outer" was not flushed: os._exit


def test_a_finished_process_ends_as_a_normal_exit_would(tmp_path):
    """end_finished skips only the interpreter's teardown: a non-daemon thread is joined,
    atexit handlers run, buffered output is written, the exit code is kept."""
    path = _script(tmp_path, """
        import atexit, sys, threading, time
        from cdfgnn.exits import end_finished
        atexit.register(lambda: print("atexit", end=""))
        threading.Thread(target=lambda: (time.sleep(0.3), print("thread ", end=""))).start()
        print("main ", end="")
        sys.stderr.write("err")
        end_finished(5)
        """)
    proc = _start(path)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (5, "main thread atexit", "err")


def test_sigterm_undoes_and_ends_with_143(tmp_path):
    path = _script(tmp_path, """
        import pathlib, sys, time
        from cdfgnn.exits import end_on_sigterm, undo_on_abrupt_exit
        end_on_sigterm()
        mark = pathlib.Path(sys.argv[1])
        mark.write_text("made")
        with undo_on_abrupt_exit(mark.unlink):
            print("ready", flush=True)
            time.sleep(60)
        """)
    proc = _start(path, str(tmp_path / "mark"))
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == 143 and proc.stderr.read() == ""
    assert not (tmp_path / "mark").exists()


# ------------------------------------------------------------------ partitioning apart
def test_partitioning_apart_equals_partitioning_here(small_graph):
    from cdfgnn.errors import CdfgnnError
    from cdfgnn.partition.apart import partition_apart
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    here = partition_graph(small_graph, "metis", Topology(2, 2), seed=3)
    apart = partition_apart(small_graph, "metis", Topology(2, 2), seed=3)
    assert np.array_equal(apart.assignment, here.assignment)
    assert np.array_equal(apart.master, here.master)
    assert (apart.method, apart.params, apart.topology) == (here.method, here.params,
                                                            here.topology)
    apart.check_graph(small_graph, "apart")
    with pytest.raises(CdfgnnError, match=r"partitioner 'metis': unknown parameter"):
        partition_apart(small_graph, "metis", Topology(2, 2), bogus=1)


def test_a_partitioning_process_that_dies_is_named(tmp_path):
    from cdfgnn.errors import WorkerFailedError
    from cdfgnn.partition.apart import died

    with pytest.raises(WorkerFailedError, match=r"partitioning with 'metis' failed: its "
                                                r"process died \(signal SIGKILL\) without"):
        raise died("metis", -9)


#: a parent whose partitioner (registered in its __main__, so the spawned child has it
#: too) writes the child's pid and sleeps; then the parent ends as told
_PARENT = """
import os, sys, threading, time
import numpy as np
from cdfgnn.partition.base import partitioner


@partitioner("sleepy", kind="edge")
def sleepy(graph, topology, *, seed, where="."):
    open(os.path.join(where, "child.tmp"), "w").write(str(os.getpid()))
    os.replace(os.path.join(where, "child.tmp"), os.path.join(where, "child"))
    time.sleep(120)
    return np.zeros(graph.num_nodes, dtype=np.int64)


if __name__ == "__main__":
    from cdfgnn.data.graph import Graph
    from cdfgnn.exits import end_abruptly
    from cdfgnn.partition.apart import partition_apart
    from cdfgnn.partition.base import Topology

    where, how = sys.argv[1], sys.argv[2]
    split = np.arange(10) % 3
    g = Graph.from_edges(np.arange(9), np.arange(1, 10), 10, x=np.zeros((10, 2), np.float32),
                         y=np.zeros(10, np.int64), train=split == 0, val=split == 1,
                         test=split == 2, name="chain")
    if how == "abrupt":  # a lost peer ends this process while it waits for the child
        def later():
            while not os.path.exists(os.path.join(where, "child")):
                time.sleep(0.05)
            end_abruptly(1, "lost")
        threading.Thread(target=later, daemon=True).start()
    print("parent", os.getpid(), flush=True)
    partition_apart(g, "sleepy", Topology(1, 2), where=where)
"""


@pytest.mark.parametrize("how", ["SIGKILL", "abrupt"])
def test_the_partitioning_child_ends_with_its_parent(tmp_path, how):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    path = _script(tmp_path, _PARENT)
    proc = subprocess.Popen([sys.executable, str(path), str(tmp_path), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "child").exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the partitioning child never started"
            time.sleep(0.05)
        child = int((tmp_path / "child").read_text())
        if how == "SIGKILL":
            proc.kill()
        proc.wait(timeout=30)
        assert _gone(child, 10), f"the partitioning child {child} outlived its parent"
        if how == "abrupt":  # its folder is undone too (SIGKILL leaves it: nothing runs)
            assert proc.returncode == 1 and proc.stderr.read() == "lost\n"
            assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        if (tmp_path / "child").exists():
            try:
                os.kill(int((tmp_path / "child").read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
