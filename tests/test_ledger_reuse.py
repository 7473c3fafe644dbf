"""The operation ledger's shortcuts (cdfgnn/cost/reuse.py) and its cheap paths
(cdfgnn/cost/ledger.py: paused, op, free): the counts are those of counting every op."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.cost import ledger as oplog
from cdfgnn.cost import reuse
from cdfgnn.cost.counts import Ledger
from cdfgnn.methods import METHODS, build_strategy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


class _Spy:
    """Counts the ops that reach the counting mode (its Python call)."""

    def __init__(self, monkeypatch):
        self.n = 0
        orig = oplog._CountingMode.__torch_dispatch__

        def spy(mode, func, types, args=(), kwargs=None):
            self.n += 1
            return orig(mode, func, types, args, kwargs)
        monkeypatch.setattr(oplog._CountingMode, "__torch_dispatch__", spy)


def _region(x: torch.Tensor, w: torch.Tensor):
    """Kernels in two phases, ending in a third: the shape of a training step."""
    def fn():
        oplog.set_phase("fwd/L0")
        h = torch.relu(x @ w)
        oplog.set_phase("fwd/head")
        out = (h * 2).sum()
        oplog.set_phase("bwd/L0")
        return out
    return fn


# ------------------------------------------------------------------ counted_once
def test_counted_once_keeps_phases_and_the_end_phase_and_skips(monkeypatch):
    x, w = torch.randn(6, 3), torch.randn(3, 4)
    every, memo = Ledger(), {}
    with oplog.counting(every, "optimizer"):
        for _ in range(4):
            oplog.set_phase("optimizer")
            _region(x, w)()
            assert oplog._STATE.phase == "bwd/L0"
    spy = _Spy(monkeypatch)
    shortcut = Ledger()
    with oplog.counting(shortcut, "optimizer"):
        for i in range(4):
            oplog.set_phase("optimizer")
            before = spy.n
            reuse.counted_once(memo, "k", _region(x, w), skip=1)
            assert oplog._STATE.phase == "bwd/L0"
            assert (spy.n > before) == (i < 2), i     # skipped, kept, then reused twice
    assert shortcut == every


def test_counted_once_counts_the_start_phase_as_the_callers():
    x = torch.ones(4)
    led, memo = Ledger(), {}
    with oplog.counting(led, "a"):
        reuse.counted_once(memo, "k", lambda: x.mul(2))
        oplog.set_phase("b")
        reuse.counted_once(memo, "k", lambda: x.mul(2))
    assert led.get("a", "elementwise")["calls"] == 1
    assert led.get("b", "elementwise")["calls"] == 1


def test_exhaustive_turns_every_shortcut_off(monkeypatch):
    x, w = torch.randn(6, 3), torch.randn(3, 4)
    spy, memo = _Spy(monkeypatch), {}
    with oplog.counting(Ledger(), "s"), reuse.exhaustive():
        for _ in range(3):
            reuse.counted_once(memo, "k", _region(x, w))
            reuse.counted_affine(memo, "a", (6,), _region(x, w))
    assert memo == {} and spy.n == 3 * 2 * 4        # mm, relu, mul, sum: every call


# ------------------------------------------------------------------ counted_affine
def _affine_run(sizes, width: int, fn_of, memo=None):
    """Ledger of ``fn_of(n)`` for every n of ``sizes``: counted every op, and through
    counted_affine (with the number of calls whose counts were predicted)."""
    every, short, memo = Ledger(), Ledger(), {} if memo is None else memo
    predicted = 0
    with oplog.counting(every, "s"):
        for n in sizes:
            oplog.set_phase("s")
            fn_of(n)()
    with oplog.counting(short, "s"):
        for n in sizes:
            oplog.set_phase("s")
            hits = {"n": 0}
            orig = reuse._replay

            def count(*a, **k):
                hits["n"] += 1
                return orig(*a, **k)
            reuse._replay = count
            try:
                reuse.counted_affine(memo, ("w", width), (n, 2 * n + 1), fn_of(n))
            finally:
                reuse._replay = orig
            predicted += hits["n"]
    return every, short, predicted


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(2, 60), min_size=12, max_size=30),
       width=st.integers(1, 9))
def test_counted_affine_predicts_the_counts_of_counting_every_op(sizes, width):
    w = torch.randn(width, 5)

    def fn_of(n):
        x = torch.randn(n, width)
        return _region(x, w)
    every, short, predicted = _affine_run(sizes, width, fn_of)
    assert short == every
    distinct = len(set(sizes))
    if distinct >= 6:       # enough different sizes to learn the map and use it
        assert predicted > 0


def test_counted_affine_keeps_a_constant_multiple_of_the_constant_column_integral(
        monkeypatch):
    """A size that is a constant multiple of the constant column (a batch of 50 seeds):
    the constant column is the pivot, the size 50 times it, so the map's coefficients
    stay integers (its counts are computed when the ledger is read), and its
    predictions are those of counting every op. (Fractional coefficients, over a common
    denominator: test_a_map_with_fractional_counts_counts_those_calls_op_by_op.)"""
    w = torch.randn(3, 5)

    def fn_of(n):
        x = torch.randn(n, 3)
        return lambda: (x @ w).relu().sum()
    every, short, memo = Ledger(), Ledger(), {}
    sizes = [7, 9, 12, 20, 31, 8, 15, 44, 3]
    with oplog.counting(every, "s"):
        for n in sizes:
            fn_of(n)()
    spy = _Spy(monkeypatch)
    with oplog.counting(short, "s"):
        for n in sizes:
            reuse.counted_affine(memo, "k", (50, n), fn_of(n))
    assert short == every
    fit = memo["k"]
    assert fit.counts.pivots[0] == 2 and fit.counts.den == 1 and fit.counts.dc is not None
    assert fit.counts.integral
    assert spy.n < 4 * len(sizes)          # some calls were predicted, not counted


def test_counted_affine_is_not_used_where_counts_are_not_affine():
    w = torch.randn(3, 3)

    def fn_of(n):           # n * n elements: not affine in n
        x = torch.randn(n, n)
        return lambda: (x @ torch.randn(n, n)).sum()
    with pytest.warns(RuntimeWarning, match="not an affine function"):
        every, short, predicted = _affine_run([2, 3, 4, 5, 6, 7, 8, 9], 3, fn_of)
    assert short == every and predicted == 0
    del w


def test_a_check_that_misses_raises(monkeypatch):
    """Once the map is in use, a counted check that differs from it raises: calls
    predicted before it may be wrong."""
    monkeypatch.setattr(reuse, "CHECK", 3)
    w, memo = torch.randn(4, 4), {}

    def fn_of(n, extra=False):
        x = torch.randn(n, 4)

        def fn():
            y = x @ w
            if extra:
                y = y + 1       # a kernel the key does not know about
            return y
        return fn
    with oplog.counting(Ledger(), "s"):
        for n in range(2, 14):
            reuse.counted_affine(memo, "k", (n,), fn_of(n))
        assert memo["k"].streak >= reuse.VERIFY
        with pytest.raises(RuntimeError, match="not an affine function"):
            for n in range(2, 14):
                reuse.counted_affine(memo, "k", (n,), fn_of(n, extra=True))


# ------------------------------------------------------------------ cheap paths
def test_paused_ops_never_reach_the_mode(monkeypatch):
    spy = _Spy(monkeypatch)
    led = Ledger()
    with oplog.counting(led, "s"):
        with oplog.paused():
            torch.ones(3).add(1).mul(2)
        torch.ones(3).add(1)
    assert spy.n == 2 and led.get("s", "elementwise")["calls"] == 2


def test_op_and_free_count_what_the_mode_counts(monkeypatch):
    """ledger.op classifies the aten call as the mode does; ledger.free hides free ops."""
    aten = torch.ops.aten
    x, out = torch.randn(10, 4), torch.zeros(6, 4)
    pos = np.array([1, 3, 5])
    by_mode, direct = Ledger(), Ledger()
    with oplog.counting(by_mode, "s"):
        i = torch.from_numpy(pos)
        out[torch.from_numpy(pos)] = x[i]
        torch.empty(3, 4)
    spy = _Spy(monkeypatch)
    with oplog.counting(direct, "s"):
        i = oplog.free(torch.from_numpy, pos)
        oplog.op(aten.index_put_.default, out, [oplog.free(torch.from_numpy, pos)],
                 oplog.op(aten.index.Tensor, x, [i]))
        oplog.free(torch.empty, 3, 4)
    assert direct == by_mode and spy.n == 0


def test_feature_store_take_and_put_count_as_the_expressions(small_graph):
    from cdfgnn.sampling.feature_store import FeatureStore

    class Comm:
        rank, world_size = 0, 2

    graph = small_graph
    store = FeatureStore(Comm(), graph, np.arange(graph.num_nodes) % 2)
    pos, rows = np.array([0, 2, 4]), store.empty_rows(6)
    by_mode, direct = Ledger(), Ledger()
    with oplog.counting(by_mode, "s"):
        oplog.record("copy", calls=1, bytes=pos.nbytes)
        oplog.record("copy", calls=1, bytes=pos.nbytes)
        rows[torch.from_numpy(pos)] = store.x[torch.from_numpy(pos)]
    with oplog.counting(direct, "s"):
        store.put(rows, pos, store.take(store.x, pos))
    assert direct == by_mode


def test_layer_marks_are_skipped_while_paused():
    from cdfgnn.models.gnn import GNN
    from cdfgnn.models.propagate import FullGraphPropagator
    model = GNN("gcn", 4, 8, 3, 2)
    oplog.attach_layer_phases(model.layers)
    indptr, indices = np.array([0, 1, 2, 3]), np.array([1, 2, 0])
    prop = FullGraphPropagator(indptr, indices)
    x = torch.randn(3, 4)
    with oplog.counting(Ledger(), "s"):
        with oplog.paused():
            out = model(x, prop)
        assert "PhaseMark" not in type(out.grad_fn).__name__
        out = model(x, prop)
        assert "PhaseMark" in type(out.grad_fn).__name__


# ------------------------------------------------------------------ every method
def _declares(name: str) -> bool:
    """Declares a count key that needs no setup and fixes the counts (count_sizes None:
    counted once per key, reused from a part's third pass)."""
    cls = METHODS.get(name)
    method = build_strategy(name)
    return cls.track == "full-batch" and all(method.count_sizes(e) is None
                                             for e in range(3)) and any(
        method.count_key(e) is not None for e in range(3))


@pytest.mark.parametrize("name", [m for m in METHODS.names() if _declares(m)])
def test_methods_that_declare_a_count_key_count_as_every_op(name, graph_file):
    """Four epochs, the third and fourth passes of every part reused: the ledgers of
    counting every op, exactly (a method whose kernels follow values must not declare)."""
    cls = METHODS.get(name)
    kind = cls.partition_kind or "edge"
    kw = dict(graph=graph_file, dataset=None, epochs=4, warmup=0, hidden=8, workers=2,
              method=name, dropout=0.3, seed=0, timeout_s=120,
              partitioner=cls.default_partitioner or ("ebv" if kind == "vertex" else "metis"))
    short = run_training(TrainConfig(**kw))["model_time"]["device"]["inputs"]
    with reuse.exhaustive():
        every = run_training(TrainConfig(**kw))["model_time"]["device"]["inputs"]
    assert short == every


# ------------------------------------------------------------------ live work
def test_live_work_is_counted_every_time_and_kept_out_of_the_reused_counts(monkeypatch):
    """A region whose middle follows a value (a cache hit: 1 or 3 kernels) counts it in
    a live section: the ledger of counting every op, with the region reused."""
    x, w = torch.randn(6, 3), torch.randn(3, 4)

    def region(hits: int):
        def fn():
            oplog.set_phase("fwd/L0")
            h = x @ w
            reuse.live("fwd/L0", lambda: [h.add(1) for _ in range(hits)])
            oplog.set_phase("bwd/L0")
            return h.sum()
        return fn
    pattern = [1, 3, 3, 1, 1, 3, 1, 3]
    every, short, memo = Ledger(), Ledger(), {}
    with oplog.counting(every, "s"):
        for k in pattern:
            oplog.set_phase("s")
            region(k)()
    spy = _Spy(monkeypatch)
    with oplog.counting(short, "s"):
        for i, k in enumerate(pattern):
            oplog.set_phase("s")
            before = spy.n
            reuse.counted_affine(memo, "k", (), region(k), skip=1)
            assert oplog._STATE.phase == "bwd/L0"
            # skipped, learnt, verified twice: every op; then only the live ones
            assert spy.n - before == (2 + k if i < 4 else k), i
    assert short == every
    assert short.get("fwd/L0", "elementwise")["calls"] == sum(pattern)


def test_live_work_must_run_in_the_phase_it_declares():
    with oplog.counting(Ledger(), "fwd/L1"):
        with pytest.raises(RuntimeError, match="declared in phase 'fwd/L0'"):
            reuse.live("fwd/L0", lambda: None)


def test_live_work_inside_a_pause_of_a_replay_is_not_counted():
    x, memo, led = torch.ones(3), {}, Ledger()

    def fn():
        with oplog.paused():        # a collective: nothing inside counts, live or not
            reuse.live("s", x.mul, 2)
        reuse.live("s", x.mul, 2)
    with oplog.counting(led, "s"):
        for _ in range(3):
            reuse.counted_once(memo, "k", fn)
    assert led.get("s", "elementwise")["calls"] == 3


@pytest.mark.filterwarnings("error:operation ledger")   # a key that misses: not quietly
@pytest.mark.parametrize("params,dropout", [
    ({"staleness": 2}, 0.0),                              # refreshes every other epoch
    ({"staleness": 2, "local_capacity": 5}, 0.0),         # partial local hits
    ({"staleness": 3, "shared_capacity": 40, "local_capacity": 0}, 0.0),   # shared tier
    # public-code: the local tier fills from the shared one only, here a small FIFO
    # one: layer 0 takes the kept A_halo x_halo from epoch 5 on (the key changes)
    ({"staleness": 0, "variant": "public-code", "policy": "fifo", "shared_capacity": 40},
     0.0),
    ({"staleness": 2, "eval": "cached"}, 0.3),
])
def test_jaca_counts_as_every_op(params, dropout, graph_file, monkeypatch):
    """jaca's passes are reused around their live cache work (count_key: layer 0's path;
    count_sizes (): verified, and checked every 2nd reused pass here): the ledgers of
    counting every op, exactly, over epochs whose cache hits change; every rank reuses."""
    monkeypatch.setattr(reuse, "CHECK", 2)
    calls: dict = {}
    orig = reuse._replay

    def replay(rows, *a, **k):        # a training pass's (it has layer phases)
        if any(ph == "fwd/L0" for ph, _ in rows):
            calls[threading.get_ident()] = calls.get(threading.get_ident(), 0) + 1
        return orig(rows, *a, **k)
    monkeypatch.setattr(reuse, "_replay", replay)
    kw = dict(graph=graph_file, dataset=None, epochs=12, warmup=0, hidden=8, workers=2,
              hosts=1, method="jaca", method_params=params, dropout=dropout, seed=0,
              timeout_s=120, partitioner="metis")
    short = run_training(TrainConfig(**kw))
    assert len(calls) == 2 and min(calls.values()) >= 2      # the 2 ranks' threads
    with reuse.exhaustive():
        every = run_training(TrainConfig(**kw))
    assert short["model_time"]["device"]["inputs"] == every["model_time"]["device"]["inputs"]
    assert [e["loss"] for e in short["epochs"]] == [e["loss"] for e in every["epochs"]]


# ------------------------------------------------------------------ span check, deferred counts
@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.lists(st.integers(-6, 6), min_size=4, max_size=4), min_size=1,
                     max_size=3),
       coef=st.lists(st.integers(-3, 3), min_size=3, max_size=3),
       noise=st.lists(st.integers(-2, 2), min_size=4, max_size=4))
def test_the_span_check_is_membership_in_the_row_space(rows, coef, noise):
    """in_span (the basis's integer null space) says whether t lies in the basis's row
    span, as rank does: for combinations of the rows and for other vectors."""
    from fractions import Fraction
    basis = [r for r in rows]
    if reuse._pivots([[Fraction(v) for v in r] for r in basis]) is None:
        return          # dependent rows: not a basis the map would hold
    fit = reuse._Affine()
    for r in basis:
        fit.add(r, [1] * reuse._NF)
    inside = [sum(c * r[j] for c, r in zip(coef, basis)) for j in range(4)]
    for t in (inside, [a + b for a, b in zip(inside, noise)]):
        spanned = reuse._pivots([[Fraction(v) for v in r] for r in basis + [t]]) is None
        assert fit.in_span(t) == spanned


def test_predicted_counts_are_computed_when_the_ledger_is_read(monkeypatch):
    """A step predicted with an integral map adds its counts when its ledger is read,
    after the step: inside counted_affine only the span check runs."""
    w = torch.randn(3, 5)
    memo, calls = {}, {"n": 0}
    at = reuse._Counts.at

    def spy(self, t):
        calls["n"] += 1
        return at(self, t)
    monkeypatch.setattr(reuse._Counts, "at", spy)
    every, short = Ledger(), Ledger()
    sizes = [4, 7, 9, 12, 20, 31, 8, 15]    # learnt from 2, verified on 2, 4 predicted
    xs = [torch.randn(n, 3) for n in sizes]     # made outside: writing reads the ledger
    with oplog.counting(short, "s"):
        for n, x in zip(sizes, xs):
            reuse.counted_affine(memo, "k", (n,), lambda: (x @ w).relu().sum())
    with oplog.counting(every, "s"):
        for x in xs:
            (x @ w).relu().sum()
    fit = memo["k"]
    assert fit.counts.integral and fit.streak >= reuse.VERIFY
    assert calls["n"] == reuse.VERIFY           # the verified predictions only
    assert short == every                       # reading the ledger computes the rest
    assert calls["n"] == reuse.VERIFY + len(sizes) - 4


def test_a_map_with_fractional_counts_counts_those_calls_op_by_op():
    """Counts that are not integers at a spanned size (ops issued for every second row:
    the learnt map says n/2) are not used: that call is counted op by op."""
    x = torch.ones(4)

    def fn_of(n):
        return lambda: [x.add(1) for _ in range(n // 2)]
    every, short, memo = Ledger(), Ledger(), {}
    sizes = [2, 4, 6, 8, 5, 10, 7, 12]
    with oplog.counting(every, "s"):
        for n in sizes:
            fn_of(n)()
    with oplog.counting(short, "s"):
        for n in sizes:
            reuse.counted_affine(memo, "k", (n,), fn_of(n))
    fit = memo["k"]
    assert not fit.counts.integral and fit.counts.den == 2 and fit.counts.dc is not None
    assert short == every and every.get("s", "elementwise")["calls"] == sum(n // 2 for n in sizes)
