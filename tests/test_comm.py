"""Communicators and launcher: exact all_to_all, deterministic all_reduce, accounting
identical across backends, failures that stop the run instead of hanging.

Rank programs are module-level functions so the process backend can pickle them.
Process-backend runs are cached per P and shared between tests; they use the default
forkserver start method (the first launch pays the torch import once), one test
covers spawn.
"""
from __future__ import annotations

import functools
import os
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.comm import (CollectiveAbortedError, NetworkModel, ThreadCommunicator, ThreadGroup,
                         launch)
from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.partition.base import Topology

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16, torch.uint8,
          torch.float16, torch.int32]


def payload(src: int, dst: int, seed: int):
    """The tensor rank ``src`` sends to ``dst``: varied dtype/shape, sometimes None or empty."""
    if (src + dst) % 5 == 4:
        return None
    g = torch.Generator().manual_seed(seed * 10007 + src * 101 + dst)
    dtype = DTYPES[(src * 7 + dst * 3) % len(DTYPES)]
    rows = (src + 2 * dst) % 4  # 0 rows -> empty tensor, received as None
    shape = [(rows,), (rows, 3), (rows, 2, 5), ()][(src + dst) % 4]
    if shape == ():
        shape = () if rows else (0,)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(0, 200, shape, generator=g).to(dtype)


def expected_received(src: int, dst: int, seed: int):
    t = payload(src, dst, seed)
    return None if t is None or t.numel() == 0 else t


def grad_vector(rank: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 31 + rank)
    return torch.randn(1000, generator=g) * 10 ** (rank % 3)


def program(comm, seed):
    """Exercise every collective; return what the parent needs to check."""
    p, me = comm.world_size, comm.rank
    out = {}
    sent = [payload(me, j, seed) for j in range(p)]
    got = comm.all_to_all(sent, tag="halo/fwd")
    out["self_is_same_object"] = got[me] is sent[me]
    out["a2a"] = [g if j != me else None for j, g in enumerate(got)]
    if hasattr(comm, "a2a_mode"):  # process backend: the other payload mode gives the same
        comm.a2a_mode = "p2p"
        got2 = comm.all_to_all(sent, tag="halo/p2p")
        comm.a2a_mode = "single"
        out["a2a_p2p"] = [g if j != me else None for j, g in enumerate(got2)]
    grad = grad_vector(me, seed)
    view = grad[::2]  # non-contiguous: the reduction must still be written in place
    comm.all_reduce(view, tag="grad")
    out["grad"] = grad.clone()
    ints = torch.arange(6, dtype=torch.int64).reshape(2, 3) * (me + 1)
    out["ints"] = comm.all_reduce(ints, tag="grad").clone()
    b = torch.arange(5, dtype=torch.float32) * 3 if me == p - 1 else torch.zeros(5)
    comm.broadcast(b, p - 1, tag="bcast")
    out["bcast"] = b
    out["objs"] = comm.all_gather_object({"rank": me, "sq": me * me})
    comm.barrier()
    out["stats"] = comm.stats.snapshot()
    out["backend"] = comm.backend
    return out


def topo(p: int) -> Topology:
    return Topology(2, 2) if p == 4 else Topology(1, p)


@functools.lru_cache(maxsize=None)
def run_program(backend: str, p: int, seed: int = 3, start_method: str | None = None):
    return launch(program, p, topology=topo(p), backend=backend, args=(seed,), timeout_s=60,
                  start_method=start_method)


CASES = [(b, p) for b in ("thread", "process") for p in (1, 2, 3, 4)]


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("backend,p", CASES)
def test_all_to_all_returns_exactly_what_was_sent(backend, p):
    res = run_program(backend, p)
    for dst in range(p):
        assert res[dst]["self_is_same_object"]
        for src in range(p):
            if src == dst:
                continue
            want = expected_received(src, dst, 3)
            assert _same(res[dst]["a2a"][src], want), (src, dst)
            if "a2a_p2p" in res[dst]:
                assert _same(res[dst]["a2a_p2p"][src], want), (src, dst)
    if backend == "process" and p > 1:
        assert all("a2a_p2p" in r for r in res)


@pytest.mark.parametrize("backend,p", CASES)
def test_all_reduce_sum_broadcast_gather(backend, p):
    res = run_program(backend, p)
    grads = [grad_vector(r, 3) for r in range(p)]
    ordered = grads[0][::2].clone()
    for g in grads[1:]:
        ordered += g[::2]
    for r in range(p):
        got = res[r]["grad"]
        # Bitwise identical on every rank; untouched odd entries stay the rank's own.
        assert torch.equal(got[::2], res[0]["grad"][::2])
        assert torch.equal(got[1::2], grads[r][1::2])
        if backend == "thread":  # documented rank-order sum, exactly
            assert torch.equal(got[::2], ordered)
        else:
            torch.testing.assert_close(got[::2], ordered, rtol=1e-5, atol=1e-4)
        assert torch.equal(res[r]["ints"], torch.arange(6).reshape(2, 3) * (p * (p + 1) // 2))
        assert torch.equal(res[r]["bcast"], torch.arange(5, dtype=torch.float32) * 3)
        assert res[r]["objs"] == [{"rank": q, "sq": q * q} for q in range(p)]


@pytest.mark.parametrize("p", [2, 3, 4])
def test_backends_account_identically(p):
    thread, proc = run_program("thread", p), run_program("process", p)
    for r in range(p):
        ps = {k: v for k, v in proc[r]["stats"].items() if k != "halo/p2p"}
        assert thread[r]["stats"] == ps
        assert proc[r]["stats"]["halo/p2p"] == proc[r]["stats"]["halo/fwd"]
        torch.testing.assert_close(thread[r]["grad"], proc[r]["grad"], rtol=1e-5, atol=1e-4)
    # The accounted bytes are the payloads' sizes; messages are the non-empty ones.
    for r in range(p):
        halo = thread[r]["stats"]["halo/fwd"]
        for d in range(p):
            t = expected_received(r, d, 3) if d != r else None
            assert halo["bytes"][d] == (0 if t is None else t.numel() * t.element_size())
            assert halo["msgs"][d] == (0 if t is None else 1)
        grad = thread[r]["stats"]["grad"]
        # Ring all-reduce: 2(P-1) messages of nbytes/P to the next rank, for both calls.
        assert grad["msgs"][(r + 1) % p] == 4 * (p - 1)
        assert grad["bytes"][(r + 1) % p] == (2 * (p - 1) * 500 * 4 // p
                                              + 2 * (p - 1) * 6 * 8 // p)
        assert sum(grad["bytes"]) == grad["bytes"][(r + 1) % p]


def test_link_classes_2x2_match_between_backends():
    """Topology 2 hosts x 2: intra/inter bytes and messages per rank, both backends."""
    topology = Topology(2, 2)
    per_backend = {}
    for backend in ("thread", "process"):
        res = run_program(backend, 4)
        rows = []
        for r in range(4):
            halo = res[r]["stats"]["halo/fwd"]
            intra = sum(halo["bytes"][d] for d in range(4) if d != r and topology.same_host(r, d))
            inter = sum(halo["bytes"][d] for d in range(4) if not topology.same_host(r, d))
            msgs_inter = sum(halo["msgs"][d] for d in range(4) if not topology.same_host(r, d))
            rows.append((intra, inter, msgs_inter))
        per_backend[backend] = rows
    assert per_backend["thread"] == per_backend["process"]
    want = []
    for r in range(4):
        sizes = {d: (lambda t: 0 if t is None else t.numel() * t.element_size())(
            expected_received(r, d, 3)) for d in range(4) if d != r}
        want.append((sum(v for d, v in sizes.items() if topology.same_host(r, d)),
                     sum(v for d, v in sizes.items() if not topology.same_host(r, d)),
                     sum(1 for d, v in sizes.items() if v and not topology.same_host(r, d))))
    assert per_backend["thread"] == want
    assert any(w[1] for w in want) and any(w[0] for w in want)  # both classes exercised


def test_thread_backend_is_deterministic():
    a = launch(program, 3, topology=Topology(1, 3), args=(5,))
    b = launch(program, 3, topology=Topology(1, 3), args=(5,))
    for ra, rb in zip(a, b):
        assert torch.equal(ra["grad"], rb["grad"])
        assert ra["stats"] == rb["stats"]


def test_spawn_start_method_gives_the_same_run():
    """The default start method is forkserver; the spawn path must give identical results."""
    spawned, default = run_program("process", 2, start_method="spawn"), run_program("process", 2)
    for a, b in zip(spawned, default):
        assert a["stats"] == b["stats"]
        assert torch.equal(a["grad"], b["grad"])
        assert all(_same(x, y) for x, y in zip(a["a2a"], b["a2a"]))


def test_world_size_one_fast_path_still_accounts():
    res = run_program("process", 1)
    assert res[0]["backend"] == "thread"  # documented: no spawn for one rank
    assert res[0]["stats"] == {}  # nothing leaves a single rank
    assert torch.equal(res[0]["grad"], grad_vector(0, 3))


# ------------------------------------------------------------- thread-only
def many_ranks(comm, rows):
    p, me = comm.world_size, comm.rank
    sent = [torch.full((rows, 2), float(me * 1000 + j)) for j in range(p)]
    got = comm.all_to_all(sent)
    ok = all(torch.equal(got[j], torch.full((rows, 2), float(j * 1000 + me))) for j in range(p))
    x = torch.full((8,), float(me))
    comm.all_reduce(x)
    return ok, x


def test_thread_backend_64_ranks():
    res = launch(many_ranks, 64, topology=Topology(4, 16), args=(3,), timeout_s=60)
    assert all(ok for ok, _ in res)
    assert all(torch.equal(x, torch.full((8,), float(sum(range(64))))) for _, x in res)


def aliasing(comm):
    p, me = comm.world_size, comm.rank
    sent = [torch.full((4,), float(me)) for _ in range(p)]
    got = comm.all_to_all(sent)
    comm.barrier()
    for t in sent:
        t.add_(100.0)  # the sender scribbles on its buffers after the exchange
    comm.barrier()
    return [g.clone() for g in got]


def test_thread_received_tensors_do_not_alias_sender():
    res = launch(aliasing, 3, topology=Topology(1, 3))
    for me in range(3):
        for src in range(3):
            want = float(src) + (100.0 if src == me else 0.0)  # own entry is the same object
            assert torch.equal(res[me][src], torch.full((4,), want))


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_thread_all_to_all_property(p, seed):
    res = launch(program, p, topology=Topology(1, p), args=(seed,), timeout_s=30)
    for dst in range(p):
        for src in range(p):
            if src != dst:
                assert _same(res[dst]["a2a"][src], expected_received(src, dst, seed))


# ----------------------------------------------------------------- failures
def raise_on_rank(comm, bad_rank):
    x = torch.ones(3)
    comm.all_reduce(x)
    if comm.rank == bad_rank:
        raise ValueError(f"boom from {comm.rank}")
    comm.all_to_all([torch.ones(2)] * comm.world_size)
    comm.barrier()
    return comm.rank


def exit_on_rank(comm, bad_rank):
    comm.barrier()
    if comm.rank == bad_rank:
        os._exit(7)
    comm.all_reduce(torch.ones(3))
    return comm.rank


_RELEASE = threading.Event()


def hang_on_rank(comm, bad_rank, sleep_s):
    comm.barrier()
    if comm.rank == bad_rank:
        # Thread backend: wait on an event the test sets, so the abandoned thread ends.
        if comm.backend == "thread":
            _RELEASE.wait(sleep_s)
        else:
            time.sleep(sleep_s)
    comm.all_reduce(torch.ones(3))
    return comm.rank


@pytest.mark.parametrize("backend,p,timeout", [("thread", 4, 10), ("process", 3, 20)])
def test_rank_exception_names_rank(backend, p, timeout):
    t0 = time.monotonic()
    with pytest.raises(WorkerFailedError) as info:
        launch(raise_on_rank, p, topology=Topology(1, p), backend=backend, args=(1,),
               timeout_s=timeout)
    elapsed = time.monotonic() - t0
    err = info.value
    assert str(err).startswith("rank 1 failed: ValueError: boom from 1"), str(err)
    assert err.rank == 1
    assert isinstance(err.__cause__, ValueError) and "boom from 1" in str(err.__cause__)
    assert not isinstance(err, CollectiveAbortedError)
    assert elapsed < timeout  # failed fast, did not wait for the collective timeout


def test_process_rank_death_names_rank():
    with pytest.raises(WorkerFailedError, match=r"^rank 2 failed: process died \(exit code 7\)"):
        launch(exit_on_rank, 3, topology=Topology(1, 3), backend="process", args=(2,),
               timeout_s=20)


def test_thread_hang_times_out_and_names_rank():
    _RELEASE.clear()
    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerFailedError) as info:
            launch(hang_on_rank, 3, topology=Topology(1, 3), args=(1, 120.0), timeout_s=1)
    finally:
        _RELEASE.set()
    elapsed = time.monotonic() - t0
    assert 1 <= elapsed < 10
    msg = str(info.value)
    assert msg.startswith("rank 1 failed: CollectiveTimeoutError: rank(s) [1] did not reach"), msg
    assert "still running" in msg


def test_process_hang_times_out_and_names_rank():
    t0 = time.monotonic()
    with pytest.raises(WorkerFailedError) as info:
        launch(hang_on_rank, 3, topology=Topology(1, 3), backend="process", args=(2, 120.0),
               timeout_s=2)
    assert time.monotonic() - t0 < 40
    assert info.value.rank == 2, str(info.value)
    assert "never reached the collective" in str(info.value)


def return_early(comm):
    if comm.rank == 0:
        return "early"
    comm.barrier()  # rank 0 never comes: a mismatched program
    return "late"


def test_thread_mismatched_program_times_out_naming_returned_rank():
    with pytest.raises(WorkerFailedError, match=r"rank\(s\) \[0\] did not reach.*returned from fn"):
        launch(return_early, 2, topology=Topology(1, 2), timeout_s=1)


def mismatched_allreduce(comm):
    comm.all_reduce(torch.ones(comm.rank + 1))


def test_thread_shape_mismatch_is_reported():
    with pytest.raises(WorkerFailedError, match="all ranks must agree") as info:
        launch(mismatched_allreduce, 2, topology=Topology(1, 2))
    assert isinstance(info.value.__cause__, CdfgnnError)


def mismatched_collectives(comm):
    if comm.rank == 0:
        comm.all_reduce(torch.ones(2))
    else:
        comm.all_to_all([torch.ones(2)] * comm.world_size)


def test_thread_mismatched_collectives_are_reported():
    with pytest.raises(WorkerFailedError, match="mismatched collectives.*rank 0: all_reduce"):
        launch(mismatched_collectives, 3, topology=Topology(1, 3))


def test_group_breaks_without_launcher():
    """A rank failing inside a collective releases its peers even without launch()."""
    group = ThreadGroup(2, Topology(1, 2), timeout_s=30)
    errors = {}

    def body(rank):
        comm = ThreadCommunicator(group, rank)
        try:
            comm.all_to_all([torch.ones(1), "not a tensor" if rank == 1 else None])
        except Exception as exc:  # noqa: BLE001
            errors[rank] = exc

    threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert isinstance(errors[1], CdfgnnError)
    assert isinstance(errors[0], CollectiveAbortedError) and "rank 1 failed" in str(errors[0])


# ------------------------------------------------------------ bad arguments
def test_launch_rejects_bad_input():
    with pytest.raises(CdfgnnError, match="backend"):
        launch(program, 2, topology=Topology(1, 2), backend="mpi")
    with pytest.raises(CdfgnnError, match="world_size"):
        launch(program, 0, topology=Topology(1, 1))
    with pytest.raises(CdfgnnError, match="h1x3"):
        launch(program, 2, topology=Topology(1, 3))
    with pytest.raises(CdfgnnError, match="timeout_s"):
        launch(program, 2, topology=Topology(1, 2), timeout_s=0)
    with pytest.raises(CdfgnnError, match="module-level"):
        launch(lambda comm: 0, 2, topology=Topology(1, 2), backend="process")
    with pytest.raises(CdfgnnError, match="device"):
        launch(program, 2, topology=Topology(1, 2), device="tpu")


def test_network_model_reads_launched_stats():
    """The accounted traffic of a real run feeds the cost model."""
    res = run_program("thread", 4)
    from cdfgnn.comm.base import CommStats
    stats = []
    for r in range(4):
        s = CommStats(4)
        for tag, d in res[r]["stats"].items():
            s.bytes_to[tag] = np.array(d["bytes"])
            s.msgs_to[tag] = np.array(d["msgs"])
            s.rows_to[tag] = np.array(d["rows"])
        stats.append(s)
    model = NetworkModel(Topology(2, 2))
    secs = model.from_stats(stats, prefix="halo/")
    for r in range(4):
        halo = res[r]["stats"]["halo/fwd"]
        want = sum(halo["msgs"][d] * (5e-6 if d // 2 == r // 2 else 10e-6)
                   + halo["bytes"][d] / ((22.70 if d // 2 == r // 2 else 8.27) * 1e9)
                   for d in range(4) if d != r)
        assert secs[r] == pytest.approx(want, rel=1e-12)
