"""One timer abstraction for the engine's compute and communication timers.

A :class:`Clock` measures spans: ``span = clock.start()`` ... ``span.stop()``, then
``span.seconds()``. Which clock depends only on the run's device
(:func:`clocks_for`):

* CPU: the wall clock is ``time.perf_counter`` and the compute clock the calling
  thread's CPU time (``time.thread_time``), read at once (nothing pending);
* CUDA: both are CUDA events (``torch.cuda.Event(enable_timing=True)``) recorded on
  the current stream; kernels run asynchronously, so a span's length is only known
  once its end event has completed: ``seconds()`` synchronises on that event (at
  read time, never while the span runs). A device clock measures elapsed stream
  time, which includes waits inside collectives (``includes_waits``); the engine
  subtracts the collectives' time to get compute.

:class:`Tally` sums spans per tag (the communicators' seconds per tag) and resolves
pending CUDA spans only when read.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Callable

import torch


class Span:
    """One measured interval; ``seconds()`` is its length (synchronising if needed)."""

    __slots__ = ("_read", "_t0", "_value")

    def __init__(self, read: Callable[[], float]):
        self._read, self._t0, self._value = read, read(), None

    def stop(self) -> "Span":
        self._value = self._read() - self._t0
        return self

    @property
    def ready(self) -> bool:
        return self._value is not None

    def seconds(self) -> float:
        if self._value is None:
            raise RuntimeError("span read before stop()")
        return self._value


class EventSpan(Span):
    """A span between two CUDA events on the current stream."""

    __slots__ = ("_start", "_end")

    def __init__(self) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._value = None
        self._start.record()

    def stop(self) -> "EventSpan":
        self._end.record()
        return self

    def seconds(self) -> float:
        if self._value is None:
            self._end.synchronize()   # read time: wait for the span's last kernel
            self._value = self._start.elapsed_time(self._end) / 1e3
        return self._value


class Clock:
    """Starts spans of one kind. ``kind``: "wall", "thread-cpu" or "cuda-events"."""

    def __init__(self, kind: str, includes_waits: bool):
        self.kind = kind
        #: the clock runs while this thread waits in a collective (so compute time is
        #: its reading minus the collectives' time); False for the thread CPU clock
        self.includes_waits = includes_waits

    def start(self) -> Span:
        if self.kind == "cuda-events":
            return EventSpan()
        return Span(time.perf_counter if self.kind == "wall" else time.thread_time)


WALL = Clock("wall", includes_waits=True)
THREAD_CPU = Clock("thread-cpu", includes_waits=False)
CUDA_EVENTS = Clock("cuda-events", includes_waits=True)


def clocks_for(device: str | torch.device | None) -> tuple[Clock, Clock]:
    """(wall clock, compute clock) of a run on ``device``."""
    dev = torch.device(device if device is not None else "cpu")
    if dev.type == "cuda":
        return CUDA_EVENTS, CUDA_EVENTS
    return WALL, THREAD_CPU


class Tally:
    """Seconds per tag summed from spans; pending (CUDA) spans resolve when read.

    ``totals()`` returns the resolved ``defaultdict(float)``: read it, or add plain
    seconds to it (``tally.totals()[tag] += s``).
    """

    def __init__(self) -> None:
        self._totals: defaultdict[str, float] = defaultdict(float)
        self._pending: list[tuple[str, Span]] = []

    def add(self, tag: str, span: Span) -> None:
        if span.ready:
            self._totals[tag] += span.seconds()
        else:
            self._pending.append((tag, span))

    def totals(self) -> defaultdict[str, float]:
        if self._pending:
            for tag, span in self._pending:
                self._totals[tag] += span.seconds()
            self._pending.clear()
        return self._totals

    def clear(self) -> None:
        self._totals.clear()
        self._pending.clear()
