"""RapidGNN's precomputed schedule: the vectorised epoch sampler and the compact schedule
file give the very schedule of the per-batch sampler (the online baselines' path).

The golden hashes were computed with the per-batch implementation before the
vectorised one existed (commit 766a2b8, ``Schedule.epoch``): they pin the schedule
for fixed seeds, so neither path can drift unnoticed.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cdfgnn.errors import CorruptFileError
from cdfgnn.sampling.epoch_schedule import (EpochArrays, read_epoch_file, sample_epoch,
                                            write_epoch_file)
from cdfgnn.sampling.schedule import Batch, Schedule, read_epoch, write_epoch


def digest(batches) -> str:
    h = hashlib.sha256()
    for b in batches:
        for a in [*b.srcs, *(x for s in b.structure for x in s)]:
            a = np.asarray(a, dtype=np.int64)
            h.update(np.int64(a.size).tobytes())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


# (graph kwargs, fan-outs, batches per epoch, s0, worker, epochs) -> hash of the old code
CASES = [
    (dict(n=300, seed=2), [3, 5], 4, 7, 1, 3, "23089529ab237e3f"),
    (dict(n=600, seed=5, isolated=0), [4, 4], 3, 0, 0, 2, "ec0e66d91982db95"),
    (dict(n=240, seed=1, avg_degree=12.0), [2, 3, 50], 5, 11, 2, 2, "513c6a16ce579042"),
    (dict(n=240, seed=0), [6], 1, 3, 0, 2, "ccc2982fda534e4d"),
]


def _schedule(make_graph, gk, fan, nb, s0, w):
    g = make_graph(**gk)
    return Schedule(g, np.flatnonzero(g.train), fan, nb, s0, w)


def _vectorised(sched: Schedule, epoch: int) -> list[Batch]:
    return [Batch(epoch, i, s, st) for i, (s, st) in
            enumerate(sched.epoch_arrays(epoch).batches())]


@pytest.mark.parametrize("gk,fan,nb,s0,w,epochs,gold", CASES)
def test_per_batch_sampler_matches_golden(make_graph, gk, fan, nb, s0, w, epochs, gold):
    sched = _schedule(make_graph, gk, fan, nb, s0, w)
    assert digest([b for e in range(epochs) for b in sched.epoch(e)]) == gold


@pytest.mark.parametrize("gk,fan,nb,s0,w,epochs,gold", CASES)
def test_vectorised_epoch_equals_per_batch(make_graph, gk, fan, nb, s0, w, epochs, gold):
    sched = _schedule(make_graph, gk, fan, nb, s0, w)
    got = [b for e in range(epochs) for b in _vectorised(sched, e)]
    assert digest(got) == gold
    for e in range(epochs):
        for x, y in zip(sched.epoch(e), _vectorised(sched, e), strict=True):
            for a, b in zip(x.srcs + [v for s in x.structure for v in s],
                            y.srcs + [v for s in y.structure for v in s], strict=True):
                assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b)


@pytest.mark.parametrize("gk,fan,nb,s0,w,epochs,gold", CASES)
def test_schedule_file_round_trip_is_the_old_schedule(tmp_path, make_graph, gk, fan, nb, s0, w,
                                                      epochs, gold):
    sched = _schedule(make_graph, gk, fan, nb, s0, w)
    owner = (np.arange(sched.graph.num_nodes) % 3).astype(np.int64)
    back = []
    for e in range(epochs):
        ep = sched.epoch_arrays(e)
        nbytes = write_epoch(tmp_path / f"e{e}", ep, owner, w)
        assert nbytes == (tmp_path / f"e{e}").stat().st_size
        raw = np.load(tmp_path / f"e{e}")
        assert raw.dtype == np.int32                        # compact on disk
        _, remote = read_epoch_file(tmp_path / f"e{e}")
        assert np.array_equal(remote, owner[ep.src[0]] != w)
        back += read_epoch(tmp_path / f"e{e}", e)
    assert digest(back) == gold


def test_empty_batches_and_int64_fallback(tmp_path, make_graph):
    """More batches than seeds (empty batches) and values beyond int32 round-trip."""
    g = make_graph(n=120, seed=3)
    sched = Schedule(g, np.flatnonzero(g.train)[:5], [2, 3], 8, 1, 0)
    old = list(sched.epoch(0))
    new = _vectorised(sched, 0)
    assert digest(old) == digest(new) and any(b.seeds.size == 0 for b in new)
    big = EpochArrays(np.array([[2], [1]]), [np.array([3, 2 ** 33]), np.array([3])],
                      [np.array([0, 1])], [np.array([1])])
    write_epoch_file(tmp_path / "big", big, np.array([True, False]))
    assert np.load(tmp_path / "big").dtype == np.int64
    back, remote = read_epoch_file(tmp_path / "big")
    assert back.src[0].tolist() == [3, 2 ** 33] and remote.tolist() == [True, False]


def test_corrupt_schedule_file_is_one_line(tmp_path):
    np.save(tmp_path / "bad.npy", np.array([9, 1, 1, 0], dtype=np.int32))
    with pytest.raises(CorruptFileError, match="schedule file") as exc:
        read_epoch_file(tmp_path / "bad.npy")
    assert "\n" not in str(exc.value)


def test_direct_sampler_on_raw_csr():
    """sample_epoch on a hand-made CSR: every kept arc is a true, distinct neighbour."""
    indptr = np.array([0, 3, 5, 9, 9, 12])
    indices = np.array([1, 2, 4, 0, 2, 0, 1, 3, 4, 0, 2, 3])
    rngs = [np.random.default_rng(i) for i in range(2)]
    ep = sample_epoch(indptr, indices, [np.array([0, 2]), np.array([3, 4])], [2], rngs)
    for srcs, ((ptr, cols),) in ep.batches():
        for j, v in enumerate(srcs[1]):
            picked = srcs[0][cols[ptr[j]: ptr[j + 1]]]
            assert picked.size == min(2, indptr[v + 1] - indptr[v])
            assert np.unique(picked).size == picked.size
            assert np.isin(picked, indices[indptr[v]: indptr[v + 1]]).all()


@pytest.mark.parametrize("gk,fan,nb,s0,w,epochs,gold", CASES)
def test_several_epochs_in_one_pass_equal_one_at_a_time(make_graph, gk, fan, nb, s0, w,
                                                        epochs, gold):
    sched = _schedule(make_graph, gk, fan, nb, s0, w)
    together = sched.epochs_arrays(list(range(epochs)))
    got = [Batch(e, i, s, st) for e, ep in enumerate(together)
           for i, (s, st) in enumerate(ep.batches())]
    assert digest(got) == gold
    assert [ep.num_batches for ep in together] == [nb] * epochs


def test_precompute_groups_epochs_without_changing_them(make_graph):
    from cdfgnn.methods.rapidgnn import RapidGNN
    sched = _schedule(make_graph, *CASES[0][:5])
    passes: list[list[int]] = []
    whole = sched.epochs_arrays
    sched.epochs_arrays = lambda group: passes.append(group) or whole(group)
    method = RapidGNN()
    seen = {}
    # the bound of an epoch's inputs here: min(156 seeds x 4 x 6, 4 batches x 300) = 1200
    for chunk, groups in ((1, [[0], [1], [2], [3], [4]]), (10 ** 9, [[0, 1, 2, 3, 4]]),
                          (2500, [[0, 1], [2, 3], [4]])):
        method.chunk_inputs = chunk
        passes.clear()
        seen[chunk] = [(e, digest([Batch(e, i, s, st) for i, (s, st) in
                                   enumerate(ep.batches())]))
                       for e, ep in method._sampled_epochs(sched, 5)]
        assert passes == groups
    assert [e for e, _ in seen[1]] == list(range(5))
    assert seen[1] == seen[10 ** 9] == seen[2500]


@pytest.mark.parametrize("dense", [0, 1 << 40])
def test_both_dedup_paths_give_the_golden_schedule(monkeypatch, make_graph, dense):
    """Sort-based (large key spaces) and dense (small ones) deduplication agree."""
    import cdfgnn.sampling.epoch_schedule as es
    monkeypatch.setattr(es, "DENSE_KEYS", dense)
    for gk, fan, nb, s0, w, epochs, gold in CASES:
        sched = _schedule(make_graph, gk, fan, nb, s0, w)
        got = [Batch(e, i, s, st) for e, ep in enumerate(sched.epochs_arrays(list(range(epochs))))
               for i, (s, st) in enumerate(ep.batches())]
        assert digest(got) == gold
