"""JACA's shared tier on the process backend (OS shared memory) equals the thread tier."""
from __future__ import annotations

import os

import numpy as np
import pytest

from test_capgnn import _run  # pytest puts tests/ on sys.path

HIT = ("hit_rate", "hit_l0", "hit_local_l0", "hit_shared_l0", "hit_l1", "hit_local_l1",
       "hit_shared_l1", "hit_l2", "hit_local_l2", "hit_shared_l2")


def _leftovers() -> set:
    from cdfgnn.methods.jaca_shm import shm_dir
    return {f for f in os.listdir(shm_dir()) if f.startswith("cdfgnn-jaca-")}


@pytest.mark.parametrize("model, params", [
    ("gcn", {"local_capacity": 0, "staleness": 2}),                 # every hit is shared
    ("sage", {"staleness": 10, "local_capacity": 5, "shared_capacity": 30}),
    ("gcn", {"policy": "random", "staleness": 0, "capacity_fraction": 0.3}),
    ("gcn", {"policy": "lfu", "staleness": 0, "local_capacity": 3, "shared_capacity": 20}),
])
def test_process_shared_tier_equals_thread_tier(graph_file, model, params):  # noqa: F811
    before = _leftovers()
    thr, rt = _run(graph_file, "jaca", params, model=model, epochs=4)
    got, rp = _run(graph_file, "jaca", params, model=model, epochs=4, backend="process")
    np.testing.assert_allclose(got, thr, atol=1e-5)
    for a, b in zip(rt["epochs"], rp["epochs"]):
        assert {k: a[k] for k in HIT if k in a} == {k: b[k] for k in HIT if k in b}
    assert any(e.get("hit_shared_l0", 0) > 0 for e in rp["epochs"])   # the tier is used
    assert _leftovers() == before                                      # unlinked


def test_process_shared_tier_exact_settings_equal_exact(graph_file):  # noqa: F811
    ref, _ = _run(graph_file, epochs=3, backend="process")
    for params in ({"cache": "input", "local_capacity": 0}, {"staleness": 1}):
        got, rec = _run(graph_file, "jaca", params, epochs=3, backend="process")
        np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=str(params))
    assert rec["epochs"][-1]["hit_l0"] == 1.0


def test_shared_tier_merge_counts_do_not_depend_on_thread_timing(graph_file):  # noqa: F811
    """Each rank merges its own staged writes in its turn on both backends, so the
    operation ledger of a thread-backend run is the same on every run (it used to give
    the whole merge to whichever rank thread arrived first) and the device-modelled epoch
    equals the process backend's."""
    params = {"policy": "priority", "staleness": 2, "local_capacity": 3, "shared_capacity": 20}
    runs = [_run(graph_file, "jaca", params, epochs=4)[1] for _ in range(3)]
    inputs = [r["model_time"]["device"]["inputs"] for r in runs]
    assert inputs[1] == inputs[0] and inputs[2] == inputs[0]
    _, proc = _run(graph_file, "jaca", params, epochs=4, backend="process")
    thread_s = runs[0]["model_time"]["device"]["epoch_s"]
    proc_s = proc["model_time"]["device"]["epoch_s"]
    assert abs(thread_s - proc_s) <= 1e-9 * proc_s
