"""Counting repeated work once: the operation ledger's shortcuts.

Counting an aten op costs a Python call (:mod:`cdfgnn.cost.ledger`), a few microseconds,
so a region of many small kernels (a sampled step of batch 50, a part of a few hundred
vertices) costs more to count than to run. Work that repeats is therefore counted once
and its counts reused, and the ledger is still the one counting every op gives, to the
integer:

* :func:`counted_once` ``(memo, key, fn)``: ``fn``'s kernels, and their shapes, are a
  function of ``key`` (an optimizer step: the parameters' shapes; a part's training pass
  under a method that declares a count key). The first call (after ``skip`` calls)
  counts them op by op and keeps them by phase; later calls run ``fn`` hidden from the
  counting mode and add the kept counts.
* :func:`counted_affine` ``(memo, key, theta, fn)``: ``fn``'s kernels are a function of
  ``key`` and every count is an affine function of the integer vector ``theta`` (a
  sampled step: the kernels follow the model and the flags in ``key``; their shapes are
  the step's rows and nonzeros, and each count is a sum of such sizes times widths and
  element sizes that ``key`` fixes). Calls are counted op by op until counted calls at
  affinely independent ``theta`` determine the map (exact rational arithmetic, no
  rounding) and it has predicted :data:`VERIFY` further counted calls exactly. Then
  calls whose ``theta`` lies in the span of those run hidden and add the predicted
  counts, and every :data:`CHECK`-th of them is counted op by op again and compared.
  Inside the call only the span check runs (``theta`` against the basis's integer null
  space: a few integer products); where the map's coefficients are integers its counts
  are computed when the ledger is next read (:meth:`~cdfgnn.cost.counts.Ledger.defer`),
  after the timed step, else at the call (counts that are not integers there: the call
  is counted op by op). A
  prediction that misses while learning marks the key as not affine (counted op by op
  from then on, with a warning); one that misses at a check raises, since calls
  predicted before it may be wrong: the caller's key misses something the kernels
  depend on.

Phases: a region's counts keep the phases they fell in (layer hooks switch phases inside
it); counts in the phase the region started in are replayed under the caller's phase,
and after a replay this thread's phase is the one the region ended in. A region must
not switch ledgers (:func:`cdfgnn.cost.ledger.into`) inside.

:func:`live` ``(phase, fn, *args)``: work inside a region whose counts follow values that
no key can know before the region runs (a cache's lookups, the rows its peers ask for) is
counted op by op every time, kept out of the region's reused counts: while the region is
counted it goes straight into the caller's ledger, and while it is replayed the counting
mode comes back for it (:class:`cdfgnn.cost.ledger.resumed`) at ``phase``, the phase it
declares (checked whenever it is counted: a replay cannot follow the layer hooks' phases).
The rest of the region must still be a function of the key: what the live work returns
may not decide which kernels the region issues outside it.

:func:`exhaustive` (or ``CDFGNN_LEDGER_EXHAUSTIVE=1`` in the environment of a process)
turns both shortcuts off, so tests can compare them with counting every op.
"""
from __future__ import annotations

import math
import os
import threading
import warnings
from contextlib import contextmanager
from fractions import Fraction
from typing import Callable, Hashable, Iterator, Sequence, TypeVar

import numpy as np

from cdfgnn.cost.counts import FIELDS, Ledger
from cdfgnn.cost.ledger import (active, current, current_phase, into, pause_depth, paused,
                                resumed, set_phase)

T = TypeVar("T")

#: counted calls an affine fit must predict exactly before it is used
VERIFY = 2
#: one predicted call in CHECK is counted op by op and compared
CHECK = 256
_NF = len(FIELDS)
_SHORTCUTS = {"on": os.environ.get("CDFGNN_LEDGER_EXHAUSTIVE", "") != "1"}


@contextmanager
def exhaustive() -> Iterator[None]:
    """Count every op inside (no shortcut reuses counts), on every thread of the process."""
    prev, _SHORTCUTS["on"] = _SHORTCUTS["on"], False
    try:
        yield
    finally:
        _SHORTCUTS["on"] = prev


def _shortcut() -> bool:
    """Counting, not paused, shortcuts on: the conditions of every shortcut."""
    return _SHORTCUTS["on"] and active()


# --------------------------------------------------------------------------- regions
class _Kept:
    """A region's counts: ``rows``, the (phase, kind) rows it touched (phase None: the
    phase it started in), ``adds``, its nonzero counts as (row, field, value), and
    ``end``, the phase it ended in (None: where it started)."""

    __slots__ = ("rows", "adds", "end", "values")

    def __init__(self, counted: Ledger, start: str, end: str):
        self.rows, self.values = [], []
        for ph, kind, vals in counted.rows():
            self.rows.append((None if ph == start else ph, kind))
            self.values += vals
        self.adds = [(i // _NF, i % _NF, v) for i, v in enumerate(self.values) if v]
        self.end = None if end == start else end

    def signature(self) -> tuple:
        """Which rows it holds and where it ends (equal for every call of one key)."""
        return tuple(self.rows), self.end


class _Regions(threading.local):
    """This thread's reused regions, innermost last: (replaying, the ledger their
    :func:`live` work counts into, the pause depth a replay runs at)."""

    def __init__(self) -> None:
        self.stack: list[tuple[bool, Ledger, int]] = []


_REGIONS = _Regions()


def _count(fn: Callable[[], T]) -> tuple[T, _Kept]:
    """Run ``fn`` counting op by op into this thread's ledger; also return its counts
    (without its :func:`live` work, which goes into the ledger directly)."""
    start, outer = current_phase(), current()
    stack = _REGIONS.stack
    stack.append((False, stack[-1][1] if stack else outer, 0))
    try:
        with into(Ledger()) as counted:
            out = fn()
    finally:
        stack.pop()
    outer.merge(counted)
    return out, _Kept(counted, start, current_phase())


def _replay(rows: Sequence, adds, end: str | None, fn: Callable[[], T]) -> T:
    """Run ``fn`` hidden from the counting mode; add its counts (``Ledger.defer``): every
    (phase, kind) row of ``rows`` is made, ``adds`` (row, field, value) go into them."""
    start, led = current_phase(), current()
    stack = _REGIONS.stack
    with paused():
        stack.append((True, stack[-1][1] if stack else led, pause_depth()))
        try:
            out = fn()
        finally:
            stack.pop()
    led.defer(start, rows, adds)
    set_phase(start if end is None else end)
    return out


def live(phase: str, fn: Callable[..., T], *args) -> T:
    """``fn(*args)``, counted op by op at ``phase`` even inside a region whose counts are
    reused, and never part of them (module docstring). Outside such regions: ``fn(*args)``,
    counted as everything else; ``phase`` must be this thread's phase whenever it counts."""
    stack = _REGIONS.stack
    if stack and stack[-1][0]:
        _, led, depth = stack[-1]
        if pause_depth() != depth:     # paused again inside the replay: nothing counts there
            return fn(*args)
        with resumed(led, phase):
            return fn(*args)
    if active() and current_phase() != phase:
        raise RuntimeError(f"operation ledger: live work declared in phase {phase!r} runs "
                           f"in phase {current_phase()!r}")
    if not stack:
        return fn(*args)
    with into(stack[-1][1]):
        return fn(*args)


def counted_once(memo: dict, key: Hashable, fn: Callable[[], T], skip: int = 0) -> T:
    """Run ``fn()``, counting its kernels once per ``key`` (module docstring); returns
    what ``fn`` returns. ``skip``: calls of a key counted op by op before the next one's
    counts are kept (work that builds caches on its first call: a part's first training
    pass makes its propagator's coefficients)."""
    if not _shortcut():
        return fn()
    kept = memo.get(key)
    if isinstance(kept, _Kept):
        return _replay(kept.rows, kept.adds, kept.end, fn)
    seen = kept or 0
    if seen < skip:
        memo[key] = seen + 1
        return fn()
    out, memo[key] = _count(fn)
    return out


# --------------------------------------------------------------------------- affine
def _inverse(a: list[list[Fraction]]) -> list[list[Fraction]]:
    """Inverse of a square invertible matrix (Gauss-Jordan over the rationals)."""
    n = len(a)
    m = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for c in range(n):
        p = next(r for r in range(c, n) if m[r][c] != 0)
        m[c], m[p] = m[p], m[c]
        inv = 1 / m[c][c]
        m[c] = [v * inv for v in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c]
                m[r] = [v - f * w for v, w in zip(m[r], m[c])]
    return [row[n:] for row in m]


def _matmul(a: list[list[Fraction]], b: list[list]) -> list[list[Fraction]]:
    return [[sum((x * row[j] for x, row in zip(ar, b)), Fraction(0)) for j in range(len(b[0]))]
            for ar in a]


def _rref(rows: list[list[Fraction]]) -> tuple[list[list[Fraction]], list[int]]:
    """Reduced row echelon form of ``rows`` and its pivot columns, in the order tried. The
    last column (the constant 1 of ``[*theta, 1]``) is tried first: a size that is a
    constant multiple of it (a batch of 50 seeds) is then 50 times it, not it 1/50 of
    that size, which keeps the map's coefficients integers where the counts are integer
    sums of sizes (:attr:`_Counts.integral`)."""
    m = [r[:] for r in rows]
    n, pivots, r0 = len(m[0]), [], 0
    for c in [n - 1, *range(n - 1)]:
        p = next((r for r in range(r0, len(m)) if m[r][c] != 0), None)
        if p is None:
            continue
        m[r0], m[p] = m[p], m[r0]
        inv = 1 / m[r0][c]
        m[r0] = [v * inv for v in m[r0]]
        for r in range(len(m)):
            if r != r0 and m[r][c] != 0:
                f = m[r][c]
                m[r] = [v - f * w for v, w in zip(m[r], m[r0])]
        pivots.append(c)
        r0 += 1
    return m, pivots


def _pivots(rows: list[list[Fraction]]) -> list[int] | None:
    """Columns of a basis of the row space (:func:`_rref`), or None if the rows are
    linearly dependent."""
    pivots = _rref(rows)[1]
    return pivots if len(pivots) == len(rows) else None


def _null_space(m: list[list[Fraction]], pivots: list[int]) -> list[tuple[tuple[int, int], ...]]:
    """Integer vectors spanning the null space of a matrix given by its :func:`_rref`
    (``B v = 0``), each as its nonzero (column, value) pairs: ``t`` lies in the row space
    of ``B`` iff ``t . v = 0`` for every one."""
    out = []
    for free in (c for c in range(len(m[0])) if c not in pivots):
        vec = {free: Fraction(1)}
        for row, c in zip(m, pivots):
            if row[free] != 0:
                vec[c] = -row[free]
        den = math.lcm(*(v.denominator for v in vec.values()))
        out.append(tuple((c, int(v * den)) for c, v in sorted(vec.items())))
    return out


class _Counts:
    """A learnt map's counts at ``t`` in its span: ``t[pivots] C`` (as of one
    :meth:`_Affine.add`; a later add makes a new one, so a deferred prediction keeps the
    map it was made with). ``C`` is rational: kept as the int64 matrix ``den C`` over its
    common denominator where the sums fit (``|t| < 2^31``), else as Fractions."""

    __slots__ = ("pivots", "c", "dc", "den", "targets", "integral")

    def __init__(self, pivots: list[int], c: list[list[Fraction]], targets: list):
        # targets: the (row, field) of C's nonzero columns, the counts' places in a ledger
        self.pivots, self.c, self.targets = pivots, c, targets
        #: C holds integers only: the counts at every integer t are integers
        self.integral = all(v.denominator == 1 for row in c for v in row)
        # a common denominator (a size that is a constant multiple of the constant column
        # can put 1/50 in C): integer numerators, where int64 keeps the sums exact
        self.den = math.lcm(*(v.denominator for row in c for v in row))
        big = max((abs(v.numerator) * (self.den // v.denominator) for row in c for v in row),
                  default=0)
        self.dc = None
        if big * len(pivots) < 2 ** 31:
            self.dc = np.array([[int(v * self.den) for v in row] for row in c], dtype=np.int64)

    def at(self, t: list[int]) -> list[int] | None:
        """The counts at ``t`` (nonzero columns: ``targets``); None where they are not
        integers (the map is then not the region's)."""
        tc = [t[i] for i in self.pivots]
        if self.dc is not None and max(map(abs, t)) < 2 ** 31:
            out, d = (np.array(tc, dtype=np.int64) @ self.dc).tolist(), self.den
            if d == 1:
                return out
            if any(v % d for v in out):
                return None
            return [v // d for v in out]
        out = [sum(x * row[j] for x, row in zip(tc, self.c)) for j in range(len(self.targets))]
        if any(Fraction(v).denominator != 1 for v in out):
            return None
        return [int(v) for v in out]

    def adds(self, pred: list[int]):
        """The (row, field, value) adds of counts ``pred`` (:meth:`at`)."""
        return ((r, f, v) for (r, f), v in zip(self.targets, pred))


class _Predicted:
    """The (row, field, value) adds of one predicted call of a map whose counts are
    integers everywhere (:attr:`_Counts.integral`), computed when :meth:`Ledger.defer`
    iterates them: when the ledger is next read, after the timed step."""

    __slots__ = ("counts", "t")

    def __init__(self, counts: _Counts, t: list[int]):
        self.counts, self.t = counts, t

    def __iter__(self):
        pred = self.counts.at(self.t)
        if pred is None:        # an integral map gives integers: nothing else can be here
            raise AssertionError(f"operation ledger: fractional counts at {self.t}")
        return self.counts.adds(pred)


class _Affine:
    """One key's learnt map from ``[*theta, 1]`` to its region's counts.

    With ``B`` the basis samples' ``[theta, 1]`` rows, ``Y`` their counts and ``A`` the
    columns of ``B`` at ``pivots`` (invertible): ``t`` lies in the span of ``B`` iff
    ``t . v == 0`` for every integer basis vector ``v`` of the null space of ``B``
    (:meth:`in_span`), and then its counts are ``t[pivots] C`` with ``C = A^-1 Y``
    (exact, rational: :class:`_Counts`)."""

    def __init__(self):
        self.signature: tuple | None = None      # rows and end phase of every call
        self.rows: list = []                     # (phase, kind) of the counts' rows
        self.basis_t: list[list[int]] = []
        self.basis_y: list[list[int]] = []
        self.streak = 0                          # exact predictions of counted calls
        self.since_check = 0
        self.skipped = 0                         # calls not learnt from (skip)
        self.broken = False
        self.null: list = []                     # integer null-space vectors of the basis
        self.counts: _Counts | None = None       # the map's counts, as of the last add

    # ---- learning
    def add(self, t: list[int], y: list[int]) -> None:
        rows = [[Fraction(v) for v in r] for r in self.basis_t + [t]]
        m, pivots = _rref(rows)
        if len(pivots) < len(rows):     # in the span already (and predicted right)
            return
        self.basis_t.append(t)
        self.basis_y.append(y)
        a_inv = _inverse([[Fraction(r[c]) for c in pivots] for r in self.basis_t])
        c = _matmul(a_inv, self.basis_y)
        cols = [j for j in range(len(c[0])) if any(row[j] != 0 for row in c)]
        self.null = _null_space(m, pivots)
        self.counts = _Counts(pivots, [[row[j] for j in cols] for row in c],
                              [(j // _NF, j % _NF) for j in cols])

    def in_span(self, t: list[int]) -> bool:
        """Does ``t`` lie in the span learnt so far? (``t`` is orthogonal to every vector
        of the basis's null space: a few integer products, no counts computed.)"""
        if self.counts is None:
            return False
        for vec in self.null:
            acc = 0
            for i, v in vec:        # a plain loop: a generator costs a frame per entry
                acc += t[i] * v
            if acc:
                return False
        return True

    # ---- predicting
    def predict(self, t: list[int]) -> list[int] | None:
        """The counts at ``t`` (of the nonzero columns: ``targets``), or None when ``t``
        is outside the span learnt so far (or they are not integers there)."""
        return self.counts.at(t) if self.in_span(t) else None

    def compare(self, pred: list[int], values: list[int]) -> bool:
        """Does ``pred`` (nonzero columns) give ``values`` (every column)?"""
        full = [0] * len(values)
        for (r, f), v in zip(self.counts.targets, pred):
            full[r * _NF + f] = v
        return full == values


def counted_affine(memo: dict, key: Hashable, theta: Sequence[int], fn: Callable[[], T],
                   skip: int = 0) -> T:
    """Run ``fn()``, its counts learnt as an affine function of ``theta`` per ``key``
    (module docstring); returns what ``fn`` returns. ``skip``: calls of a key counted op
    by op and not learnt from, first (as :func:`counted_once`'s). An empty ``theta``:
    the counts are a function of ``key`` alone, as :func:`counted_once` takes them, but
    verified and checked (for a key that predicts what ``fn`` will do)."""
    if not _shortcut():
        return fn()
    fit = memo.get(key)
    if fit is None:
        fit = memo[key] = _Affine()
    if fit.broken:
        return fn()
    if fit.skipped < skip:
        fit.skipped += 1
        return fn()
    t = [int(v) for v in theta] + [1]
    ready = fit.streak >= VERIFY
    if ready and fit.since_check < CHECK and fit.in_span(t):
        counts = fit.counts
        if counts.integral:
            # integer counts at every integer t in the span: computed when the ledger is
            # read (after the timed step); only the span check runs here
            fit.since_check += 1
            return _replay(fit.rows, _Predicted(counts, t), fit.signature[1], fn)
        pred = counts.at(t)         # may not be an integer: then counted below
        if pred is not None:
            fit.since_check += 1
            return _replay(fit.rows, counts.adds(pred), fit.signature[1], fn)
    pred = fit.predict(t)
    out, kept = _count(fn)
    fit.since_check = 0
    sig = kept.signature()
    if fit.signature is None:
        fit.signature, fit.rows = sig, kept.rows
    if sig != fit.signature or (pred is not None and not fit.compare(pred, kept.values)):
        _mismatch(fit, key, ready)
        return out
    if pred is None:
        fit.add(t, kept.values)
        fit.streak = 0
    else:
        fit.streak += 1
    return out


def _mismatch(fit: _Affine, key: Hashable, predicting: bool) -> None:
    fit.broken = True
    if predicting:
        raise RuntimeError(f"operation ledger: the counts of a region keyed {key!r} are not "
                           "an affine function of its sizes (a counted call differs from "
                           "the learnt map): counts predicted before it may be wrong")
    warnings.warn(f"operation ledger: the counts of a region keyed {key!r} are not an affine "
                  "function of its sizes; it is counted op by op", RuntimeWarning, stacklevel=3)
