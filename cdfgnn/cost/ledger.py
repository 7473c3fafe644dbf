"""The operation ledger: what a GPU would execute, counted where it is issued.

The counts themselves (a :class:`Ledger`: kinds and fields) are
:mod:`cdfgnn.cost.counts`, which pricing reads without torch.

How counting works: :func:`counting` installs, on the calling thread only, a
``TorchDispatchMode`` that classifies every aten operation the thread issues,
forward and autograd backward alike (the CPU autograd engine runs backward on the
calling thread). That covers the dense products, the SpMMs and the elementwise
work of models and methods without call-site edits, and a method's own torch ops
(a cache's selections) are counted as what they are. Work a GPU would do as its own
kernels but that this CPU implementation does outside torch (numba codec and cache
kernels) is recorded explicitly with :func:`record` by the code that issues it,
inside :func:`paused` so its torch-side scaffolding is not counted twice. The
communicator's collectives run paused: the network model prices them.

Why a dispatch mode and not call-site counters or ``FlopCounterMode``: call sites
would need an edit at every op of every layer and method (GAT alone issues ~15
kernels per layer), and FlopCounterMode counts FLOPs only. The mode costs one
Python call per aten op (a few microseconds), so work that repeats is counted once
and its counts reused (:mod:`cdfgnn.cost.reuse`), paused work leaves the mode
(:class:`paused`), and hot code that issues a few known kernels classifies them
itself (:func:`op`, :func:`free`, :func:`record_rows`); ``benchmarks/engine_overhead.py
--only ledger`` measures what remains against an epoch. With no active ledger every
hook is one thread-local lookup.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cdfgnn.cost.counts import FP64_KIND, KINDS, Ledger

_KIND_SET = frozenset(KINDS)


# ---------------------------------------------------------------- thread state
class _State(threading.local):
    ledger: Ledger | None = None
    phase: str = "other"
    paused: int = 0
    mode: "_CountingMode | None" = None     # this thread's counting mode, made once


_STATE = _State()


def current() -> Ledger | None:
    """The ledger counting on this thread (None: nothing is counted)."""
    return _STATE.ledger


def active() -> bool:
    """True when this thread counts and is not paused (explicit records go in)."""
    return _STATE.ledger is not None and not _STATE.paused


class phase:
    """``with phase(name):`` attributes what this thread issues inside to phase ``name``
    (a class, not a generator: it is entered several times a step)."""

    __slots__ = ("name", "prev")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        st = _STATE
        self.prev = st.phase
        if st.ledger is not None:
            st.phase = self.name

    def __exit__(self, *exc) -> None:
        st = _STATE
        if st.ledger is not None:
            st.phase = self.prev


def current_phase() -> str:
    """This thread's phase."""
    return _STATE.phase


def set_phase(name: str) -> str:
    """Set this thread's phase; returns the previous one (for hooks that cannot nest)."""
    prev, _STATE.phase = _STATE.phase, name
    return prev


#: a C++ guard that hides torch ops from every dispatch mode (the counting mode's Python
#: call included) on this thread: 0.6 us to enter, where ``_disable_current_modes``
#: (popping every mode in Python) costs 8 us
_HIDE = torch._C._DisableTorchDispatch


class paused:
    """``with paused():`` counts no torch op inside (collectives; kernels that record
    themselves; a region whose counts are reused). While this thread counts, its
    counting mode leaves torch's dispatch-mode stack for the duration (when it is on
    top), so the ops inside cost nothing: a mode on the stack, even one that ignores
    them, makes every op and every backward node carry it (measured: a step's
    forward and backward ran 3% slower with the mode hidden than with it gone).
    Explicit :func:`record` calls inside are dropped."""

    __slots__ = ("mode",)

    def __enter__(self) -> None:
        st = _STATE
        st.paused += 1
        self.mode = None
        if st.ledger is not None and st.mode is not None:
            n = _stack_len()
            if n and _stack_at(n - 1) is st.mode:
                self.mode = _stack_pop(None)

    def __exit__(self, *exc) -> None:
        if self.mode is not None:
            _stack_push(self.mode)
        _STATE.paused -= 1


_stack_len = torch._C._len_torch_dispatch_stack
_stack_at = torch._C._get_dispatch_stack_at
_stack_pop = torch._C._pop_torch_dispatch_stack
_stack_push = torch._C._push_on_torch_dispatch_stack


def pause_depth() -> int:
    """How many :class:`paused` regions this thread is inside."""
    return _STATE.paused


class resumed:
    """``with resumed(ledger, phase):`` inside a :class:`paused` region of a thread that
    counts: count what this thread issues inside into ``ledger`` at ``phase`` again (the
    counting mode back on the dispatch stack, explicit records kept); on exit the thread
    is paused as before, in the phase it was in. For work inside a region whose counts
    are reused that must still be counted every time (``cdfgnn.cost.reuse.live``)."""

    __slots__ = ("ledger", "phase", "prev", "pushed")

    def __init__(self, ledger: Ledger, phase: str):
        self.ledger, self.phase = ledger, phase

    def __enter__(self) -> None:
        st = _STATE
        self.prev = (st.ledger, st.phase, st.paused)
        mode = st.mode
        # paused took the mode off the stack when it was on top; a mode left lower on
        # the stack (another mode above it) still sees every op: do not push it twice
        self.pushed = mode is not None and not any(
            _stack_at(i) is mode for i in range(_stack_len()))
        if self.pushed:
            _stack_push(mode)
        st.ledger, st.phase, st.paused = self.ledger, self.phase, 0

    def __exit__(self, *exc) -> None:
        st = _STATE
        try:
            if self.pushed:
                _stack_pop(None)
        finally:
            st.ledger, st.phase, st.paused = self.prev


def record(kind: str, calls: int = 0, bytes: int = 0, **fields: int) -> None:
    """Add an explicit entry under the current phase (no-op when not counting)."""
    st = _STATE
    if st.ledger is None or st.paused:
        return
    if fields:
        st.ledger.add(st.phase, kind, calls=calls, bytes=bytes, **fields)
        return
    if kind not in _KIND_SET:
        raise ValueError(f"unknown ledger kind {kind!r}; valid: {', '.join(KINDS)}")
    row = st.ledger._row(st.phase, kind)
    row[0] += int(calls)
    row[2] += int(bytes)


class hidden:
    """``with hidden():`` hides the torch ops inside from the counting mode without
    pausing: explicit :func:`record` calls inside count. For code that records the
    counts of its own kernels (``FeatureStore.take``), where every op inside is either
    recorded or free."""

    __slots__ = ("guard",)

    def __enter__(self) -> None:
        self.guard = None
        if _STATE.ledger is not None:
            self.guard = _HIDE()
            self.guard.__enter__()

    def __exit__(self, *exc) -> None:
        if self.guard is not None:
            self.guard.__exit__(None, None, None)


def record_rows(*entries: tuple[str, int, int]) -> None:
    """:func:`record` of several ``(kind, calls, bytes)`` entries at once."""
    st = _STATE
    led = st.ledger
    if led is None or st.paused:
        return
    phase = st.phase
    for kind, calls, nbytes in entries:
        if kind not in _KIND_SET:
            raise ValueError(f"unknown ledger kind {kind!r}; valid: {', '.join(KINDS)}")
        row = led._row(phase, kind)
        row[0] += int(calls)
        row[2] += int(nbytes)


#: ``with hide():`` hides the torch ops inside from the counting mode, as :class:`hidden`
#: does, for code that has checked that this thread counts (:func:`active`): the C++
#: guard itself, without :class:`hidden`'s Python frame (hot code: ``FeatureStore.take``)
hide = _HIDE


def op(func, *args):
    """``func(*args)`` for an aten overload ``func`` (``torch.ops.aten.index.Tensor``),
    counted as the counting mode counts it (the same classification of the same
    arguments) without the mode's Python call: for hot code that issues a few known
    kernels many times a step (the sampled track's feature gathers). Write the aten call
    the Python expression dispatches (``x[i]``: ``index.Tensor(x, [i])``; ``x[i] = v``:
    ``index_put_(x, [i], v)``; tests/test_ledger_reference.py holds the counts)."""
    st = _STATE
    if st.ledger is None or st.paused:
        return func(*args)
    guard = _HIDE()
    guard.__enter__()
    try:
        out = func(*args)
    finally:
        guard.__exit__(None, None, None)
    _classify(st.ledger, st.phase, func, args, out)
    return out


def free(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` hidden from the counting mode: for calls whose torch ops
    are all free ones (:data:`_FREE`: allocation, host wrapping, ``detach``), which the
    mode counts as nothing but still pays a Python call for."""
    if _STATE.ledger is None:
        return fn(*args, **kwargs)
    guard = _HIDE()
    guard.__enter__()
    try:
        return fn(*args, **kwargs)
    finally:
        guard.__exit__(None, None, None)


def overhead_phase(tag: str) -> str:
    """The ledger phase of ``Communicator.overhead(tag)`` work: codec or cache."""
    return "codec" if tag.startswith("codec") else "cache" if tag.startswith("cache") else tag


class counting:
    """``with counting(ledger, start_phase) as ledger:`` counts every aten op this thread
    issues inside into ``ledger`` (a class, not a generator: the sampled track enters it
    at every step; the thread's mode object is made once)."""

    __slots__ = ("ledger", "start", "prev")

    def __init__(self, ledger: Ledger, start_phase: str = "other"):
        self.ledger, self.start = ledger, start_phase

    def __enter__(self) -> Ledger:
        st = _STATE
        self.prev = (st.ledger, st.phase, st.paused)
        st.ledger, st.phase, st.paused = self.ledger, self.start, 0
        mode = st.mode
        if mode is None:
            mode = st.mode = _CountingMode(st)
        # onto torch's dispatch stack directly, as paused does: TorchDispatchMode's own
        # __enter__/__exit__ also keep process-wide flags that only torch.compile reads,
        # several microseconds a step on the sampled track
        _stack_push(mode)
        return self.ledger

    def __exit__(self, *exc) -> None:
        st = _STATE
        try:
            _stack_pop(None)
        finally:
            st.ledger, st.phase, st.paused = self.prev


@contextmanager
def into(ledger: Ledger) -> Iterator[Ledger]:
    """Count what this thread issues inside into ``ledger`` instead of the ledger of the
    enclosing :func:`counting` (phase and pause state carry on); nothing when this thread
    does not count. The caller merges ``ledger`` into the enclosing one afterwards if that
    one must hold it too: a part's own counts inside an epoch's (``run_epochs``). Why not
    a nested :func:`counting`: a second dispatch mode would see every op twice."""
    st = _STATE
    if st.ledger is None:
        yield ledger
        return
    prev, st.ledger = st.ledger, ledger
    try:
        yield ledger
    finally:
        st.ledger = prev


# ---------------------------------------------------------------- classification
def _nbytes(t) -> int:
    if not isinstance(t, torch.Tensor):
        return 0
    if t.layout != torch.strided:
        return t._nnz() * t.element_size() if t.layout == torch.sparse_csr else 0
    return t.numel() * t.element_size()


def _tensor_bytes(seq) -> int:
    total = 0
    for a in seq:
        if isinstance(a, torch.Tensor):
            total += a.nbytes if a.layout is torch.strided else _nbytes(a)
        elif isinstance(a, (list, tuple)):
            total += _tensor_bytes(a)
    return total


_DENSE = {"mm", "addmm", "bmm", "matmul", "baddbmm"}
_GATHER_READ = {"index_select", "index", "gather", "cat", "masked_select", "take"}
_GATHER_WRITE = {"index_add", "index_add_", "index_put", "index_put_", "scatter",
                 "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
                 "scatter_reduce_", "index_copy", "index_copy_", "index_fill_",
                 "masked_scatter_"}
#: no kernel on a GPU: allocation, metadata, host scalars
_FREE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
         "detach", "alias", "lift_fresh", "_local_scalar_dense", "set_", "resize_",
         "_to_copy_meta", "is_nonzero", "sym_size", "sym_stride", "sym_numel", "size",
         "stride", "dim", "clone_meta"}


_INDEX_DTYPES = (torch.int64, torch.int32, torch.bool)
_CALLS, _FLOPS, _BYTES = 0, 1, 2


def _index_bytes(args) -> int:
    return sum(_nbytes(a) for a in args if isinstance(a, torch.Tensor)
               and a.dtype in _INDEX_DTYPES)


def _count_elementwise(ledger: Ledger, phase: str, args, out) -> None:
    row = ledger._row(phase, "elementwise")
    row[_CALLS] += 1
    row[_BYTES] += _tensor_bytes(args) + _tensor_bytes((out,))


def _count_gather_read(ledger: Ledger, phase: str, args, out) -> None:
    row = ledger._row(phase, "gather")
    row[_CALLS] += 1
    row[_BYTES] += _index_bytes(args[1:]) + 2 * _tensor_bytes((out,))


def _count_gather_write(ledger: Ledger, phase: str, args, out) -> None:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    row = ledger._row(phase, "gather")
    row[_CALLS] += 1
    row[_BYTES] += _index_bytes(tensors) + 3 * (_nbytes(tensors[-1]) if tensors else 0)


def _count_dense(ledger: Ledger, phase: str, args, out) -> None:
    _dense(ledger, phase, "mm", args, out)


def _count_addmm(ledger: Ledger, phase: str, args, out) -> None:
    _dense(ledger, phase, "addmm", args, out)


#: per aten overload: its counting function (None: free), decided once
_HANDLERS: dict = {}


def _handler_for(func):
    name = func.overloadpacket.__name__
    if func.is_view or name in _FREE:
        return None
    if name in ("addmm", "baddbmm"):
        return _count_addmm
    if name in _DENSE:
        return _count_dense
    if name in _GATHER_READ:
        return _count_gather_read
    if name in _GATHER_WRITE:
        return _count_gather_write
    return _count_elementwise


_UNSEEN = object()


def _classify(ledger: Ledger, phase: str, func, args, out) -> None:
    handler = _HANDLERS.get(func, _UNSEEN)
    if handler is _UNSEEN:
        handler = _HANDLERS[func] = _handler_for(func)
    if handler is not None:
        handler(ledger, phase, args, out)


def _product_kind(kind: str, operand: torch.Tensor) -> str:
    """``kind``, or its FP64 twin when the product's operands are float64."""
    return FP64_KIND[kind] if operand.dtype == torch.float64 else kind


def _dense(ledger: Ledger, phase: str, name: str, args, out) -> None:
    a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
    if a.layout == torch.sparse_csr:   # CSR @ dense: an SpMM
        rows, cols = int(a.shape[0]), int(a.shape[1])
        nnz, w = int(a._nnz()), int(b.shape[-1])
        ledger.add(phase, _product_kind("spmm", b), calls=1, flops=2 * nnz * w, nnz=nnz,
                   nnz_w=nnz * w, rows_w=rows * w, cols_w=cols * w)
        return
    m, k, n = int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1])
    batch = int(a.shape[0]) if a.dim() == 3 else 1
    row = ledger._row(phase, _product_kind("dense", b))
    row[_CALLS] += 1
    row[_FLOPS] += 2 * batch * m * k * n
    row[_BYTES] += _tensor_bytes(args) + _tensor_bytes((out,))


class _CountingMode(TorchDispatchMode):
    def __init__(self, state: _State):
        super().__init__()
        self.state = state

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo by default:
        # that imports torch._dynamo on the first op (1.3 s per process, which the rank
        # threads wait for on the import lock) and adds a Python frame to every op. This
        # mode never runs under torch.compile, so there is nothing to disable.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        st = self.state
        if not st.paused:
            handler = _HANDLERS.get(func, _UNSEEN)
            if handler is _UNSEEN:
                handler = _HANDLERS[func] = _handler_for(func)
            if handler is not None:
                handler(st.ledger, st.phase, args, out)
        return out


# ---------------------------------------------------------------- layer phases
class _PhaseMark(torch.autograd.Function):
    """Identity whose backward switches this thread's phase: placed on a layer's output
    (backward enters the layer) and on its input (backward leaves it)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, name: str) -> torch.Tensor:
        ctx.name = name
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if _STATE.ledger is not None:
            _STATE.phase = ctx.name
        return grad, None


def _mark(x, name: str):
    if isinstance(x, torch.Tensor) and x.requires_grad:
        return _PhaseMark.apply(x, name)
    return x


def attach_layer_phases(layers) -> list:
    """Attribute each module of ``layers`` (a GNN's layers, in order) to phases
    ``fwd/L{i}`` and ``bwd/L{i}``; work between them is ``fwd/head`` / ``bwd/head``.
    Returns the hook handles. The hooks do nothing unless this thread counts and is not
    paused (a region whose counts are reused, ``cdfgnn.cost.reuse``, runs paused: its
    phases come with its counts, and the marks' autograd nodes would cost a Python call
    each way)."""
    handles = []
    for i, layer in enumerate(layers):
        def pre(module, args, i=i):
            st = _STATE
            if st.ledger is None or st.paused:
                return None
            st.phase = f"fwd/L{i}"
            return (_mark(args[0], "bwd/head"), *args[1:])

        def post(module, args, out, i=i):
            st = _STATE
            if st.ledger is None or st.paused:
                return None
            st.phase = "fwd/head"
            return _mark(out, f"bwd/L{i}")
        handles += [layer.register_forward_pre_hook(pre), layer.register_forward_hook(post)]
    return handles
