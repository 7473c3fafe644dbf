"""The mini-batch track: distdgl-* (on-demand pulls) and rapidgnn (schedule, cache, prefetch)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS
from cdfgnn.sampling.blocks import sample_block_arrays
from cdfgnn.sampling.schedule import (Schedule, read_epoch, schedule_seed, split_train,
                                      step_totals, write_epoch)
from cdfgnn.train import energy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import validate_record
from cdfgnn.train.run import run_training


@pytest.fixture(scope="module")
def gfile(tmp_path_factory, make_graph):
    g = make_graph(n=600, seed=5, isolated=0)
    path = tmp_path_factory.mktemp("mb") / "g.npz"
    g.save(path)
    return str(path)


def run(gfile, method, epochs=3, **kw):
    params = kw.pop("method_params", {})
    base = dict(graph=gfile, dataset=None, method=method, model="sage", workers=2, hosts=2,
                epochs=epochs, warmup=1, fanouts=[4, 4], batch_size=32, hidden=16,
                network="rapidgnn-chameleon", method_params=params)
    base.update(kw)
    return run_training(TrainConfig(**base))


@pytest.fixture(scope="module")
def pair(gfile):
    return run(gfile, "distdgl-metis"), run(gfile, "rapidgnn")


def test_track_selects_minibatch_by_attribute():
    for name in ("distdgl-metis", "distdgl-random", "rapidgnn"):
        assert METHODS.get(name).track == "minibatch"
    assert METHODS.get("exact").track == "full-batch"


def test_same_schedule_identical_losses_fewer_rows(pair):
    base, rapid = pair
    validate_record(base)
    validate_record(rapid)
    assert [e["loss"] for e in base["epochs"]] == [e["loss"] for e in rapid["epochs"]]
    assert [e.get("test") for e in base["epochs"]] == [e.get("test") for e in rapid["epochs"]]
    # the baseline pulls every remote input; rapidgnn only misses + cache fills
    for b, r in zip(base["epochs"], rapid["epochs"]):
        assert b["rows_fetched"] == b["remote_inputs"] > 0
        assert r["remote_inputs"] == b["remote_inputs"]
        assert r["cache_hits"] > 0
    assert (rapid["minibatch"]["rows_fetched_per_epoch_with_setup"]
            < base["minibatch"]["rows_fetched_per_epoch"])


def test_rapidgnn_record_fields(pair):
    _, rapid = pair
    mb = rapid["minibatch"]
    assert mb["precompute_s"] > 0 and mb["train_s"] > 0
    for w in mb["workers"]:
        assert w["within_bound"] and w["memory_used_bytes"] <= w["memory_bound_bytes"]
        q, d, n_hot, m_max = w["prefetch_q"], w["dim"], w["n_hot"], w["m_max"]
        assert w["memory_bound_bytes"] == (2 * n_hot * d + q * m_max * d) * 4
        assert w["schedule_bytes"] > 0
        assert sum(w["freq_hist_epoch0"]) > 0
    row = rapid["epochs"][0]
    for key in ("rows_fetched", "fetch_bytes", "step_time_s", "modelled_step_s",
                "modelled_network_s"):
        assert row[key] >= 0
    assert rapid["energy"]["modelled_cpu"]["status"] == "modelled"
    assert rapid["energy"]["cpu"]["status"] in ("measured", "not measured")


def test_precompute_timed_apart_in_wall_and_cpu_seconds(pair):
    """precompute_cpu_fraction = worst worker's precompute CPU / its training CPU, with
    the sample / write / count breakdown inside the precompute."""
    base, rapid = pair
    mb = rapid["minibatch"]
    assert mb["precompute_cpu_s"] > 0 and mb["train_cpu_s"] > 0
    for w in mb["workers"]:
        parts = [w[f"precompute_{k}_cpu_s"] for k in ("sample", "write", "count")]
        assert all(p >= 0 for p in parts) and sum(parts) <= w["precompute_cpu_s"] + 1e-3
        assert w["precompute_cpu_s"] <= mb["precompute_cpu_s"]
    ratios = [w["precompute_cpu_s"] / w["train_cpu_s"] for w in mb["workers"]]
    assert mb["precompute_cpu_fraction"] == pytest.approx(max(ratios))
    assert mb["train_cpu_s"] == pytest.approx(max(w["train_cpu_s"] for w in mb["workers"]))
    assert base["minibatch"]["precompute_cpu_fraction"] is None   # nothing precomputed


def test_no_cache_no_prefetch_fetches_like_baseline(gfile, pair):
    """Degenerate setting: an empty cache pulls exactly what the baseline pulls."""
    base, _ = pair
    rec = run(gfile, "rapidgnn", method_params={"cache_fraction": 0.0, "prefetch": 0})
    assert [e["rows_fetched"] for e in rec["epochs"]] == [e["rows_fetched"] for e in base["epochs"]]
    assert [e["fetch_bytes"] for e in rec["epochs"]] == [e["fetch_bytes"] for e in base["epochs"]]
    assert [e["loss"] for e in rec["epochs"]] == [e["loss"] for e in base["epochs"]]


def test_full_cache_fetches_nothing_in_steps(gfile):
    rec = run(gfile, "rapidgnn", epochs=2,
              method_params={"cache_fraction": 1.0, "cache_scope": "global"})
    assert [e["rows_fetched"] for e in rec["epochs"]] == [0, 0]
    assert rec["minibatch"]["setup_rows_fetched"] > 0


def test_cache_larger_than_remote_set_is_clamped(gfile):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = run(gfile, "rapidgnn", epochs=1, method_params={"n_hot": 10 ** 7})
    assert any("clamped" in str(w.message) for w in caught)
    assert all(w["cache_clamped"] for w in rec["minibatch"]["workers"])


@pytest.mark.parametrize("kw,msg", [
    (dict(fanouts=[0, 4]), "--fanouts must be positive integers"),
    (dict(fanouts=[-2, 4]), "--fanouts must be"),
    (dict(fanouts=[4]), "one value per layer"),
    (dict(batch_size=0), "--batch-size"),
    (dict(method_params={"prefetch": -1}), "prefetch=-1"),
    (dict(method_params={"cache_scope": "forever"}), "valid: epoch, global"),
])
def test_bad_input_one_line(gfile, kw, msg):
    with pytest.raises(CdfgnnError, match=msg) as exc:
        run(gfile, "rapidgnn", epochs=1, **kw)
    assert "\n" not in str(exc.value)


def test_schedule_is_deterministic_and_round_trips(tmp_path, make_graph):
    g = make_graph(n=300, seed=2)
    owner = (np.arange(g.num_nodes) % 3).astype(np.int64)
    ids = np.flatnonzero(g.train)
    a, b = Schedule(g, ids, [3, 5], 4, 7, 1), Schedule(g, ids, [3, 5], 4, 7, 1)
    ea, eb = list(a.epoch(2)), list(b.epoch(2))
    other = list(Schedule(g, ids, [3, 5], 4, 8, 1).epoch(2))
    assert any(not np.array_equal(x.inputs, y.inputs) for x, y in zip(ea, other))
    write_epoch(tmp_path / "e.npz", ea, owner, 1)
    back = read_epoch(tmp_path / "e.npz", 2)
    for x, y, z in zip(ea, eb, back):
        for s1, s2, s3 in zip(x.srcs, y.srcs, z.srcs):
            assert np.array_equal(s1, s2) and np.array_equal(s1, s3)
        for (i1, c1), (i3, c3) in zip(x.structure, z.structure):
            assert np.array_equal(i1, i3) and np.array_equal(c1, c3)
    assert schedule_seed(0, 1, 2, 3) != schedule_seed(0, 1, 2, 4)


def test_split_train_balanced_owned_first(make_graph):
    g = make_graph(n=400, seed=1)
    owner = np.zeros(g.num_nodes, dtype=np.int64)
    owner[g.num_nodes // 4:] = 1            # part 1 owns 3/4 of the vertices
    splits = split_train(g.train, owner, 2)
    sizes = [s.size for s in splits]
    assert sum(sizes) == g.train.sum() and abs(sizes[0] - sizes[1]) <= 1
    assert np.array_equal(np.sort(np.concatenate(splits)), np.flatnonzero(g.train))
    assert np.all(owner[splits[1]] == 1)     # part 1 keeps only its own
    assert np.all(owner[splits[0][owner[splits[0]] == 1]] == 1)
    assert np.all(g.train[splits[0]])
    own0 = np.flatnonzero(g.train & (owner == 0))
    assert np.isin(own0, splits[0]).all()    # part 0 keeps every vertex it owns
    assert step_totals(splits, 3).sum() == g.train.sum()


def test_vectorised_sampler_picks_distinct_true_neighbours(make_graph):
    g = make_graph(n=300, seed=4)
    seeds = np.flatnonzero(g.train)[:50]
    srcs, structure = sample_block_arrays(g, seeds, [3], np.random.default_rng(0))
    indptr, cols = structure[0]
    deg = np.diff(g.indptr)[seeds]
    assert np.array_equal(np.diff(indptr), np.minimum(deg, 3))
    for j, v in enumerate(seeds):
        picked = srcs[0][cols[indptr[j]: indptr[j + 1]]]
        assert np.unique(picked).size == picked.size
        assert np.isin(picked, g.indices[g.indptr[v]: g.indptr[v + 1]]).all()


def test_energy_meter_reads_rapl_with_wraparound(tmp_path):
    d = tmp_path / "intel-rapl:0"
    d.mkdir()
    (d / "name").write_text("package-0\n")
    (d / "max_energy_range_uj").write_text("1000000\n")
    (d / "energy_uj").write_text("900000\n")
    m = energy.EnergyMeter("cpu", root=str(tmp_path))
    m.epoch_start()
    (d / "energy_uj").write_text("100000\n")      # wrapped: 0.2 J
    m.epoch_end()
    res = m.result()
    assert res["cpu"]["status"] == "measured"
    assert res["cpu"]["total_j"] == pytest.approx(0.2)
    assert res["gpu"]["status"] == "not measured"
    empty = energy.EnergyMeter("cpu", root=str(tmp_path / "none")).result()
    assert empty["cpu"]["status"] == "not measured" and "total_j" not in empty["cpu"]


def test_floyd_sampler_is_uniform_without_replacement():
    from cdfgnn.sampling.blocks import sample_arcs
    indptr = np.array([0, 5, 7, 17])
    rng = np.random.default_rng(3)
    dst = np.repeat(np.array([0, 1, 2]), 4000)
    counts, arcs = sample_arcs(indptr, dst, 2, rng)
    assert np.array_equal(counts, np.repeat([2, 2, 2], 4000))
    pairs = arcs.reshape(-1, 2)
    assert np.all(pairs[:, 0] != pairs[:, 1])
    freq0 = np.bincount(arcs[: 8000], minlength=5)[:5] / 4000   # row 0: 5 arcs, 2 kept
    assert np.allclose(freq0, 0.4, atol=0.04)
    freq2 = np.bincount(arcs[16000:] - 7, minlength=10) / 4000  # row 2: 10 arcs
    assert np.allclose(freq2, 0.2, atol=0.03)


def test_prefetch_window_changes_timing_not_rows_or_losses(gfile, pair):
    """Q only moves pulls off the critical path: same rows over the run, same losses."""
    _, rapid = pair                                   # default Q = 4
    rec = run(gfile, "rapidgnn", method_params={"prefetch": 0})
    total = (lambda r: sum(e["rows_fetched"] for e in r["epochs"])
             + r["minibatch"]["setup_rows_fetched"])
    assert total(rec) == total(rapid)
    assert [e["loss"] for e in rec["epochs"]] == [e["loss"] for e in rapid["epochs"]]
    assert rapid["minibatch"]["exposed_network_s"] < rec["minibatch"]["exposed_network_s"]


def test_reports_draw_from_records(tmp_path, gfile, pair):
    """Every RapidGNN table and figure from a small set of run records."""
    import json

    from cdfgnn.report.registry import run_report
    from cdfgnn.train.record import write_record

    base, rapid = pair
    public = run(gfile, "rapidgnn", method_params={"cache_scope": "window", "window": 5,
                                                  "n_hot": 20})
    others = [run(gfile, "distdgl-random", partitioner="random-nodes"),
              run(gfile, "exact", model="gcn"), public]
    paths = []
    for i, rec in enumerate([base, rapid, *others]):
        p = tmp_path / "runs" / f"r{i}.json"
        p.parent.mkdir(exist_ok=True)
        write_record(json.loads(json.dumps(rec)), p)
        paths.append(str(p))
    for name in ("rapidgnn-table2", "rapidgnn-table3-energy", "rapidgnn-claims"):
        run_report(name, str(tmp_path / f"{name}.csv"), runs=paths,
                   md_out=str(tmp_path / f"{name}.md"))
    t2 = (tmp_path / "rapidgnn-table2.md").read_text()
    assert "Average" in t2 and "| dataset | graph |" in t2
    claims = (tmp_path / "rapidgnn-claims.md").read_text()
    assert "same convergence" in claims and "| 0 |" in claims
    # the public re-implementation's setting: its own rows, against the same baseline
    from cdfgnn.report.aggregate import RunRow, load_runs
    from cdfgnn.report.rapidgnn import _frame, public_setting_rows
    rows = public_setting_rows(_frame([RunRow.from_record(r) for r in load_runs(paths)]))
    assert len(rows) == 1 and "public re-implementation's setting" in claims
    ratio = (base["minibatch"]["rows_fetched_per_epoch_with_setup"]
             / public["minibatch"]["rows_fetched_per_epoch_with_setup"])
    assert rows[0]["rows"] == pytest.approx(ratio) and rows[0]["misses"] > rows[0]["rows"]
    energy_md = (tmp_path / "rapidgnn-table3-energy.md").read_text()
    assert "modelled" in energy_md
    for k in range(3, 10):
        out = tmp_path / f"fig{k}.png"
        run_report(f"rapidgnn-fig{k}", str(out), runs=paths)
        assert out.read_bytes()[:4] == b"\x89PNG"


def test_energy_meter_reads_nvml_on_cuda_runs(monkeypatch, tmp_path):
    """The NVML path, with a stand-in module: mJ counters per GPU, summed."""
    import sys
    import types

    state = {"mj": [1000, 5000]}
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetTotalEnergyConsumption=lambda h: state["mj"][h])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    m = energy.EnergyMeter("cuda", root=str(tmp_path))
    m.epoch_start()
    state["mj"] = [3000, 6000]                      # +2 J and +1 J
    m.epoch_end()
    res = m.result()
    assert res["gpu"]["status"] == "measured" and res["gpu"]["total_j"] == pytest.approx(3.0)
    assert res["cpu"]["status"] == "not measured"
    assert energy.EnergyMeter("cpu", root=str(tmp_path)).result()["gpu"]["status"] == \
        "not measured"


def _remote_inputs_per_worker(gfile, epochs: int):
    """Each worker's remote input rows per batch of ``epochs`` epochs, from the
    deterministic schedule (2 workers on 2 hosts, metis, fan-outs 4 4, batch 32)."""
    from cdfgnn.data.graph import Graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.sampling.schedule import num_batches

    g = Graph.load(gfile)
    owner = np.asarray(partition_graph(g, "metis", Topology.for_workers(2, 2),
                                       seed=0).assignment, dtype=np.int64)
    splits = split_train(g.train, owner, 2)
    nb = num_batches(splits, 32)
    for w in range(2):
        sched = Schedule(g, splits[w], [4, 4], nb, 0, w)
        yield [b.inputs[owner[b.inputs] != w] for e in range(epochs) for b in sched.epoch(e)]


def test_rows_counted_equal_misses_computed_offline(gfile):
    """Alg. 1's misses (arXiv 2509.05207): counted rows = sum of |N_i^e remote minus cache| from the
    schedule and the cache contents (global cache, no prefetch)."""
    from cdfgnn.methods.rapidgnn import top_hot

    params = {"cache_scope": "global", "prefetch": 0, "cache_fraction": 0.3}
    rec = run(gfile, "rapidgnn", epochs=2, method_params=params)
    expected = 0
    for remote in _remote_inputs_per_worker(gfile, epochs=2):
        ids, cnt = np.unique(np.concatenate(remote), return_counts=True)
        cache = top_hot(ids, cnt, int(round(0.3 * ids.size)))
        expected += sum(int((~np.isin(r, cache)).sum()) for r in remote)
    assert sum(e["rows_fetched"] for e in rec["epochs"]) == expected


@pytest.mark.parametrize("prefetch", [0, 3])
def test_window_scope_rows_equal_fills_and_misses_computed_offline(gfile, pair, prefetch):
    """cache_scope=window (the public re-implementation's): one hot set per window of W
    consecutive batches of the run, across epoch boundaries; rows fetched = the first
    fill + each later window's rows not in the previous hot set + the steps' misses."""
    from cdfgnn.methods.rapidgnn import top_hot

    params = {"cache_scope": "window", "window": 5, "prefetch": prefetch,
              "cache_fraction": 0.3}
    rec = run(gfile, "rapidgnn", epochs=3, method_params=params)
    assert [e["loss"] for e in rec["epochs"]] == [e["loss"] for e in pair[0]["epochs"]]
    expected = 0
    for remote in _remote_inputs_per_worker(gfile, epochs=3):
        wins = [np.unique(np.concatenate(remote[k:k + 5]), return_counts=True)
                for k in range(0, len(remote), 5)]
        n_hot = int(round(0.3 * max(ids.size for ids, _ in wins)))
        hot = [top_hot(ids, cnt, n_hot) for ids, cnt in wins]
        expected += hot[0].size + sum(int((~np.isin(h, p)).sum()) for p, h in zip(hot, hot[1:]))
        expected += sum(int((~np.isin(r, hot[i // 5])).sum()) for i, r in enumerate(remote))
    got = sum(e["rows_fetched"] for e in rec["epochs"]) + rec["minibatch"]["setup_rows_fetched"]
    assert got == expected


def test_window_scope_prefetch_beyond_window_rejected(gfile):
    with pytest.raises(CdfgnnError, match="prefetch=6 exceeds window=5"):
        run(gfile, "rapidgnn", epochs=1,
            method_params={"cache_scope": "window", "window": 5, "prefetch": 6})


def test_table2_names_the_papers100m_like_twin():
    from cdfgnn.data.synthetic import TWINS
    from cdfgnn.report.rapidgnn import graph_label
    assert graph_label("synth-papers100m") == "papers100M-like twin"
    assert TWINS["synth-papers100m"].twin_of == "ogbn-papers100M"
    assert graph_label("synth-products") == "products twin"
    assert graph_label("synth-arxiv") == "synth-arxiv"
