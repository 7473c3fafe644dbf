"""Partition in a child process, so the caller's threads keep running meanwhile.

pymetis and the numba partitioners (greedy, dne) hold the GIL for a whole partition
(42 s measured for pymetis on 300,000 vertices; 0.8-1.0 s at 100,000 for metis, ne and
dne on the 2-core test machine): a heartbeat thread of the same process would stop
beating for that long (:mod:`cdfgnn.comm.liveness`), and its peers would take the
process for lost. :func:`partition_apart` runs :func:`~cdfgnn.partition.api.partition_graph`
in a child started with ``spawn`` (a fresh interpreter: nothing of the caller's threads
or locks is inherited; it imports the caller's ``__main__`` as spawn does, so
partitioners registered there exist in the child too) and returns the same
Partitioning. The graph goes to the child and the partitioning comes back as files in a
temporary folder (the Graph and Partitioning formats; a pipe would block the caller
for good if the child died before reading it); the caller waits on the child in a loop
that releases the GIL.

Nothing stays behind: on Linux the child asks the kernel for SIGKILL when its parent
dies (``PR_SET_PDEATHSIG``), so a caller ended abruptly (a lost host, SIGKILL) leaves no
partitioning process; the child is killed when the caller's wait ends in an exception
(Ctrl-C); the folder is removed on every way out, an abrupt end included
(:func:`cdfgnn.exits.undo_on_abrupt_exit`). An error in the child (a bad parameter) is
raised in the caller as it was raised there; a child that dies without a word raises
:class:`~cdfgnn.errors.WorkerFailedError` naming its signal or exit code.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from cdfgnn.data.graph import Graph
from cdfgnn.errors import WorkerFailedError
from cdfgnn.exits import undo_on_abrupt_exit
from cdfgnn.partition.base import Partitioning, Topology

_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux); end now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _child(parent: int, folder: str, graph_path: str, method: str, topology: Topology,
           seed: int, params: dict) -> None:
    _die_with_parent(parent)
    from cdfgnn.partition.api import partition_graph

    out = Path(folder)
    try:
        part = partition_graph(Graph.load(graph_path), method, topology, seed=seed, **params)
        part.save(out / "part.tmp.npz")
        os.replace(out / "part.tmp.npz", out / "part.npz")
    except Exception as exc:  # noqa: BLE001 - raised again in the caller
        try:
            blob = pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an exception that does not pickle travels as text
            blob = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
        (out / "error.tmp").write_bytes(blob)
        os.replace(out / "error.tmp", out / "error.pkl")


def partition_apart(graph: Graph, method: str, topology: Topology, *, seed: int = 0,
                    graph_path: str | None = None, **params) -> Partitioning:
    """:func:`~cdfgnn.partition.api.partition_graph` in a child process (see the module
    docstring); ``graph_path``: ``graph``'s file, when it has one (else it is written)."""
    folder = tempfile.mkdtemp(prefix="cdfgnn-partition-")
    with undo_on_abrupt_exit(lambda: shutil.rmtree(folder, ignore_errors=True)):
        try:
            if graph_path is None:
                graph_path = os.path.join(folder, "graph.npz")
                graph.save(graph_path)
            ctx = multiprocessing.get_context("spawn")
            proc = ctx.Process(target=_child, name="cdfgnn-partition", daemon=True,
                               args=(os.getpid(), folder, graph_path, method, topology, seed,
                                     params))
            proc.start()
            try:
                while proc.is_alive():
                    proc.join(_POLL_S)
            finally:
                if proc.is_alive():  # the wait ended in an exception (Ctrl-C)
                    proc.kill()
                    proc.join()
            return _answer(Path(folder), method, proc.exitcode)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _answer(folder: Path, method: str, code: int | None) -> Partitioning:
    if (folder / "part.npz").exists():
        return Partitioning.load(folder / "part.npz")
    if (folder / "error.pkl").exists():
        raise pickle.loads((folder / "error.pkl").read_bytes())
    raise died(method, code)


def died(method: str, code: int | None) -> WorkerFailedError:
    """The error of a partitioning process that ended with ``code`` and no answer."""
    how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0
           else f"exit code {code}")
    return WorkerFailedError(f"partitioning with {method!r} failed: its process died ({how}) "
                             "without an error")
