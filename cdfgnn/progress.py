"""Progress bars for long steps that show on a terminal and stay quiet in logs.

A bar is drawn only when standard error is a terminal and neither ``CI`` nor
``CDFGNN_NO_PROGRESS`` is set, so CI logs and Snakemake log files never fill
with carriage returns. Everything else (the loop, the counts) is unchanged.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Iterable, TypeVar

T = TypeVar("T")
_BAR_LOCK = threading.RLock()


def progress_enabled() -> bool:
    if os.environ.get("CI") or os.environ.get("CDFGNN_NO_PROGRESS"):
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


def progress(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", unit_scale: bool = False):
    """A ``tqdm`` bar over ``iterable`` (or a manual one, ``.update(n)``), disabled off a TTY."""
    from tqdm.auto import tqdm

    # tqdm's default lock holds a multiprocessing RLock, a named semaphore registered with
    # the resource tracker; a process-backend rank that dies (os._exit after an error, or
    # SIGTERM) cannot unregister it, and the tracker then warns about a leaked semaphore.
    # Bars are only drawn by threads of one process, so a thread lock is all they need.
    tqdm.set_lock(_BAR_LOCK)
    return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale,
                disable=not progress_enabled(), leave=False, file=sys.stderr,
                dynamic_ncols=True)
