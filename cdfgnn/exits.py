"""Abrupt ends of a process, and what must be undone before them.

A rank of a multi-host run sometimes has to end at once, skipping ``finally`` clauses
and interpreter teardown (which would wait on a broken process group): when its
heartbeat finds a peer lost (:mod:`cdfgnn.comm.liveness`), or when torchrun's agent
sends SIGTERM to a host's ranks after another rank failed. What a ``finally`` clause
would have undone then stays behind: a shared-memory file not yet unlinked, a child
process, a temporary folder. :func:`undo_on_abrupt_exit` registers such an undo for the
duration of a block; :func:`end_abruptly` runs the registered undos (the latest first,
as ``finally`` clauses unwind) and ends the process.

:func:`end_finished` ends a process whose work is done without tearing the interpreter
down: after torch is imported, that teardown (freeing every module's objects one by one)
costs 0.3-0.4 CPU-s, a quarter of a short `cdfgnn` job's CPU time (measured on the 2-core
test box: `python -c "import torch"` 1.45 CPU-s, 1.05 with the teardown skipped).
"""
from __future__ import annotations

import atexit
import itertools
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_UNDO: dict[int, Callable[[], None]] = {}
_keys = itertools.count()


@contextmanager
def undo_on_abrupt_exit(undo: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``undo()`` is called before this process ends abruptly
    (:func:`end_abruptly`): for what a ``finally`` clause of the block undoes, which an
    abrupt end skips."""
    key = next(_keys)
    _UNDO[key] = undo
    try:
        yield
    finally:
        _UNDO.pop(key, None)


def pending() -> int:
    """How many undos are registered now."""
    return len(_UNDO)


def _undo_all() -> None:
    for key in sorted(_UNDO, reverse=True):
        undo = _UNDO.pop(key, None)
        try:
            if undo is not None:
                undo()
        except Exception:  # noqa: BLE001 - the process ends anyway: undo what can be undone
            pass


def end_abruptly(code: int, line: str | None = None) -> None:
    """Run the registered undos, write ``line`` (if any) to stderr and end the process with
    exit code ``code``, skipping interpreter teardown."""
    _undo_all()
    if line is not None:
        sys.stderr.write(line + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def end_on_sigterm() -> None:
    """From now on (main thread only), SIGTERM runs the registered undos and ends the
    process with exit code 143, without a message (torchrun's agent sends it to a host's
    ranks after another rank failed; that rank's line says why)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: end_abruptly(128 + signum))


def end_finished(code: int) -> None:
    """End a process whose work is done with exit code ``code``, as a normal exit would
    (non-daemon threads joined, ``atexit`` handlers run, stdout and stderr flushed) but
    without the interpreter's teardown (see the module doc)."""
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to write
            pass
    os._exit(code)
