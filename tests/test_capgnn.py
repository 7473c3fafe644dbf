"""CaPGNN (Neurocomputing): JACA caches, device profiles, RAPA, AdaQP."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import build_strategy
from cdfgnn.methods.jaca_pool import Pool
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def _run(graph_file, method="exact", params=None, **kw):
    opts = dict(graph=graph_file, dataset=None, epochs=5, warmup=1, hidden=16, layers=3,
                workers=4, hosts=2, partitioner="metis", timeout_s=120, dropout=0.3)
    opts.update(kw)
    cfg = TrainConfig(method=method, method_params=params or {}, **opts)
    rec = run_training(cfg)
    return np.array([e["loss"] for e in rec["epochs"]]), rec


def _halo_bytes(rec) -> float:
    return sum(v["bytes"] for t, v in rec["comm"]["by_tag"].items() if t.startswith("halo/"))


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_jaca_degenerate_settings_equal_exact(graph_file, model):
    """The other exact settings (``staleness=1`` alone, the declared one:
    tests/test_degenerate.py), 3 layers with dropout."""
    ref, exact = _run(graph_file, model=model)
    for params in ({"cache": "input"}, {"staleness": 1, "backward": "fresh"},
                   {"staleness": 1, "cache": "messages"}):
        got, rec = _run(graph_file, "jaca", params, model=model)
        np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=str(params))
    assert rec["epochs"][-1]["hit_l0"] == 0.0          # messages, refreshed every epoch
    _, rec = _run(graph_file, "jaca", {"staleness": 1}, model=model)
    # input features come from the caches after epoch 0: hit rate 1 on layer 0
    assert rec["epochs"][-1]["hit_l0"] == 1.0
    assert rec["epochs"][-1]["hit_l1"] == 0.0          # staleness 1: never a fresh hit
    # caching input features removes layer 0's halo traffic in both directions
    tags = rec["comm"]["by_tag"]
    assert "halo/fwd/0" not in tags and "halo/bwd/0" not in tags
    assert "halo/fwd/0" in exact["comm"]["by_tag"]


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_jaca_cached_halo_aggregate_without_dropout_equals_exact(graph_file, model):
    """Dropout off: layer 0 multiplies the kept ``A_halo x_halo`` by W0 (no x_halo W0)."""
    ref, _ = _run(graph_file, model=model, dropout=0.0)
    for params in ({"cache": "input"}, {"staleness": 1},
                   {"cache": "input", "local_capacity": 7, "shared_capacity": 0}):  # x_halo W0
        got, rec = _run(graph_file, "jaca", params, model=model, dropout=0.0)
        np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=str(params))
    assert rec["epochs"][-1]["hit_l0"] < 1.0


def test_jaca_halo_aggregate_is_kept_while_the_local_rows_are(graph_file):
    from cdfgnn.methods.jaca import Jaca

    calls = []
    real = Jaca._split

    def spy(self, prop, norm):
        calls.append((self.epoch, self._halo_agg is not None and self._halo_agg[0][2]))
        return real(self, prop, norm)

    Jaca._split = spy
    try:
        _run(graph_file, "jaca", {"cache": "input"}, dropout=0.0, workers=2, hosts=1)
    finally:
        Jaca._split = real
    kept = [v for e, v in calls if e >= 2]
    assert kept and len(set(kept)) == 1 and kept[0] is not False    # one version, reused


def test_jaca_stale_cache_saves_bytes_and_records_hit_rates(graph_file):
    ref, exact = _run(graph_file)
    got, rec = _run(graph_file, "jaca", {"staleness": 10})
    assert _halo_bytes(rec) < 0.7 * _halo_bytes(exact)
    assert np.abs(got - ref).max() > 1e-6            # stale embeddings change the loss
    row = rec["epochs"][-1]
    assert row["hit_rate"] == 1.0 and row["hit_l2"] == 1.0
    assert rec["epochs"][0]["hit_rate"] == 0.0       # cold start
    _, fresh = _run(graph_file, "jaca", {"staleness": 10, "backward": "fresh"})
    assert _halo_bytes(fresh) < 0.1 * _halo_bytes(exact)


def test_jaca_policies_at_equal_capacity(graph_file):
    rates = {}
    for policy in ("priority", "fifo", "lru", "lfu", "random"):
        _, rec = _run(graph_file, "jaca", {"policy": policy, "staleness": 0,
                                           "capacity_fraction": 0.3}, epochs=3)
        rates[policy] = rec["epochs"][-1]["hit_rate"]
        assert 0.0 < rates[policy] < 1.0
        row = rec["epochs"][-1]                       # cache work per stage (Fig. 18)
        assert row["cache_check_s"] > 0 and row["cache_pick_s"] > 0
        assert row["cache_update_s"] >= 0
    assert rates["priority"] >= min(rates.values())


def test_pool_policies_keep_what_they_should():
    prio = np.array([5.0, 1.0, 4.0, 0.0, 3.0])
    rows = torch.arange(5, dtype=torch.float32)[:, None]
    pool = Pool(5, 2, "priority", prio, np.random.default_rng(0))
    pool.put(np.array([1, 3]), rows[[1, 3]], np.zeros(2, np.int64))
    pool.put(np.array([0, 2, 4]), rows[[0, 2, 4]], np.zeros(3, np.int64))
    assert set(np.flatnonzero(pool.resident)) == {0, 2}
    assert pool.get(np.array([2]))[0, 0] == 2.0
    fifo = Pool(5, 2, "fifo", prio, np.random.default_rng(0))
    for p in range(5):
        fifo.put(np.array([p]), rows[[p]], np.zeros(1, np.int64))
    assert set(np.flatnonzero(fifo.resident)) == {3, 4}
    # staleness: fresh while epoch - stamp < s
    assert fifo.fresh(np.array([3]), 4, 5, True)[0] and not fifo.fresh(np.array([3]), 5, 5, True)[0]
    assert fifo.fresh(np.array([3]), 99, 0, True)[0]        # 0: never refresh


@pytest.mark.parametrize("params, match", [
    ({"local_capacity": -5}, r"local_capacity=-5: must be an integer >= 0"),
    ({"shared_mb": -1.0}, r"shared_mb=-1.0: must be >= 0"),
    ({"policy": "mru"}, r"policy='mru': valid: priority, fifo, lru, lfu, random"),
])
def test_jaca_bad_parameters_name_the_value(params, match):
    with pytest.raises(CdfgnnError, match=match):
        build_strategy("jaca", params)


# ------------------------------------------------------------------ device profiles
def test_device_profiles_scale_modelled_time(graph_file):
    from cdfgnn.pricing.devices import factors, parse_devices

    slow, xfer = factors(parse_devices("x4", 4), 4)
    assert slow[0] == pytest.approx(1.0) and slow[2] > 1.0 and xfer[3] == pytest.approx(
        (0.1175 + 0.1198 + 0.1184 + 0.1193) / 2 / (sum([.1184, .1196, .1198, .1188, .1224, .1194,
                                                      .1217, .1207, .1207, .1198, .1242, .1208]) / 6))
    slow8, _ = factors(parse_devices("x8", 8), 8)
    assert slow8[-1] > 3.0                                   # GTX 1660Ti vs RTX 3090
    _, plain = _run(graph_file, epochs=3, warmup=0)
    _, het = _run(graph_file, epochs=3, warmup=0, devices="r9,r9,g6,g6")
    assert het["model_time"]["slowdown"][2] > 3.0
    assert [d["name"] for d in het["model_time"]["devices"]] == ["rtx3090"] * 2 + ["gtx1660ti"] * 2
    assert het["model_time"]["transfer"][0] == pytest.approx(1.0)
    assert plain["model_time"]["devices"] is None


def test_bad_devices_are_named():
    from cdfgnn.pricing.devices import parse_devices

    with pytest.raises(CdfgnnError, match=r"unknown device profile 'h999'; valid:"):
        TrainConfig(workers=4, devices="r9,h999,r9,r9").validate()
    with pytest.raises(CdfgnnError, match=r"names 3 device\(s\)"):
        parse_devices("x3", 4)
    assert [d.name for d in parse_devices("table4", 3)] == ["rtx3090", "rtx3090", "a40"]


def test_profile_command_writes_a_loadable_profile(tmp_path):
    from cdfgnn.cli import main
    from cdfgnn.pricing.devices import get_device

    out = tmp_path / "me.yaml"
    assert main(["profile", "--size", "64", "--repeats", "2", "--out", str(out)]) == 0
    prof = get_device(str(out))
    assert prof.mm_s > 0 and prof.spmm_s > 0 and prof.idt_s > 0


# ------------------------------------------------------------------ RAPA and CaPGNN
def test_rapa_pruning_balances(graph_file, small_graph):
    """(``prune=false`` equals the oracle: tests/test_degenerate.py.)"""
    from cdfgnn.pricing.devices import parse_devices
    from cdfgnn.methods.rapa import rapa_prune
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology

    ref, _ = _run(graph_file, devices="r9,r9,g6,g6")
    _, rec = _run(graph_file, "rapa", {"prune": False}, devices="r9,r9,g6,g6")
    assert "dropped_arcs" not in rec["partition"]
    got, rec = _run(graph_file, "rapa", devices="r9,r9,g6,g6")
    info = rec["partition"]["prepare"]["rapa"]
    assert rec["partition"]["dropped_arcs"] == info["dropped_cross_arcs"] > 0
    assert info["trace"][-1]["spread"] < info["trace"][0]["spread"]
    assert np.abs(got - ref).max() > 1e-6                         # lossy
    # the pure function: the slow devices lose halos, inner arcs are never dropped
    part = partition_graph(small_graph, "metis", Topology.for_workers(4, 1), seed=0)
    mask, info = rapa_prune(small_graph, part, parse_devices("r9,r9,g6,g6", 4))
    owner = part.assignment
    row, col = small_graph.row_of_arcs(), small_graph.indices
    assert not (mask & (owner[row] == owner[col])).any()
    lost = np.bincount(owner[row[mask]], minlength=4)
    assert lost[2] + lost[3] > lost[0] + lost[1]
    assert info["trace"][-1]["spread"] < 0.01 or info["iterations"] == 100


def test_capgnn_overlaps_and_prunes(graph_file):
    """(Its degenerate setting equals the oracle: tests/test_degenerate.py.)"""
    _, rec = _run(graph_file, "capgnn", {"prune": False, "staleness": 1})
    assert rec["model_time"]["overlap"]
    _, full = _run(graph_file, "capgnn", devices="x4")
    assert full["partition"]["dropped_arcs"] > 0 and full["epochs"][-1]["hit_rate"] == 1.0


# ------------------------------------------------------------------ AdaQP
def test_adaqp_adaptive_bits_save_bytes(graph_file):
    """(``bits=32`` equals the oracle: tests/test_degenerate.py.)"""
    ref, exact = _run(graph_file, dropout=0.0)
    got, rec = _run(graph_file, "adaqp", dropout=0.0)
    assert _halo_bytes(rec) < 0.25 * _halo_bytes(exact)
    assert 2.0 <= rec["epochs"][-1]["adaqp_mean_bits"] <= 4.0 + 1e-9
    assert rec["model_time"]["overlap"]
    mixed, _ = _run(graph_file, "adaqp", {"bits": "16,32", "budget": 24}, dropout=0.0)
    assert np.abs(mixed - ref).max() < 1e-2


def test_greedy_bit_assignment_spends_the_budget_where_variance_is():
    from cdfgnn.methods.adaqp import assign_bits

    # message 1 has far larger ranges: it gets the bits; empty messages get 0
    got = assign_bits([1.0, 100.0, 0.0], [(10, 4), (10, 4), (0, 0)], [1, 1, 1], [2, 4, 8], 5.0)
    assert got[2] == 0 and got[1] > got[0] and got[1] == 8
    assert assign_bits([1.0, 1.0], [(10, 4), (10, 4)], [1, 1], [2, 4, 8], 2.0) == [2, 2]
    with pytest.raises(CdfgnnError, match=r"bit widths \[3\] are not in"):
        build_strategy("adaqp", {"bits": "2,3"})


def test_jaca_shared_tier_serves_rows_exactly(graph_file):
    ref, _ = _run(graph_file)
    got, rec = _run(graph_file, "jaca", {"cache": "input", "local_capacity": 0})
    np.testing.assert_allclose(got, ref, atol=1e-5)
    row = rec["epochs"][-1]
    assert row["hit_shared_l0"] == 1.0 and row["hit_local_l0"] == 0.0
    # the process backend's shared-memory tier: tests/test_capgnn_shm.py


def test_cross_host_drop_keeps_every_halo_on_its_host(graph_file, small_graph):
    from cdfgnn.methods.rapa import cross_host_arcs
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.partition.book import build_books

    part = partition_graph(small_graph, "metis", Topology.for_workers(4, 2), seed=0)
    for name, params in (("rapa", {"prune": False}), ("capgnn", {})):
        strat = build_strategy(name, {**params, "cross_host": "drop"})
        prepared = strat.prepare(small_graph, part)
        mask = prepared.drop_arcs
        cross = cross_host_arcs(small_graph, part)
        assert cross.any() and not (cross & ~mask).any()            # every cross-host arc
        assert prepared.info["dropped_cross_host_arcs"] == int(cross.sum())
        host = np.asarray(part.assignment) // 2
        for book in build_books(small_graph, part, drop_arcs=mask):
            halo = book.local_nodes[book.num_owned:]
            assert (host[halo] == book.rank // 2).all()
    ref, _ = _run(graph_file, hosts=2)
    got, rec = _run(graph_file, "rapa", {"prune": False, "cross_host": "drop"}, hosts=2)
    assert rec["partition"]["dropped_arcs"] > 0 and np.abs(got - ref).max() > 1e-6
    one, _ = _run(graph_file, hosts=1)                  # one host: nothing crosses, exact
    same, rec = _run(graph_file, "rapa", {"prune": False, "cross_host": "drop"}, hosts=1)
    np.testing.assert_allclose(same, one, atol=1e-5)
    assert "dropped_arcs" not in rec["partition"]


def test_halo_by_hops_on_a_path():
    from test_partition_stats import edge_cut, make_graph  # tests/ is on sys.path

    from cdfgnn.partition.base import Topology
    from cdfgnn.partition.stats import halo_by_hops, partition_stats

    g = make_graph([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], 6)
    part = edge_cut(g, [0, 0, 0, 1, 1, 1], Topology(2, 1))
    one, two = halo_by_hops(g, part, 2)
    assert one == partition_stats(g, part)["part_halo"] == [1, 1]
    assert two == [2, 2]                                  # {3, 4} and {1, 2}
    with pytest.raises(CdfgnnError, match="hops=0"):
        halo_by_hops(g, part, 0)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_jaca_public_code_variant_refreshed_every_epoch_equals_exact(graph_file, model):
    """variant=public-code caches every layer's input rows h (times the current W on the
    receiver) and sends every halo row's gradient back: refreshed each epoch it is exact."""
    ref, exact = _run(graph_file, model=model)
    got, rec = _run(graph_file, "jaca", {"variant": "public-code", "staleness": 1}, model=model)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # layer 2 exchanges its input rows (width hidden = 16), not h W (width = classes)
    classes = int(rec["graph"]["num_classes"])
    sent = rec["comm"]["by_tag"]["halo/fwd/2"]["bytes"]
    assert sent / exact["comm"]["by_tag"]["halo/fwd/2"]["bytes"] == pytest.approx(16 / classes)


def test_jaca_public_code_variant_freezes_inputs_not_messages(graph_file):
    """Never refreshed: the public code keeps h (stale) and multiplies it by the current W,
    our paper reading keeps h W; the two must differ, and both differ from exact."""
    ref, _ = _run(graph_file)
    paper, _ = _run(graph_file, "jaca", {"staleness": 0})
    public, rec = _run(graph_file, "jaca", {"variant": "public-code", "staleness": 0})
    assert np.abs(public - ref).max() > 1e-6
    assert np.abs(public - paper).max() > 1e-6
    assert rec["epochs"][-1]["hit_l1"] == 1.0 and rec["epochs"][-1]["hit_l2"] == 1.0


def test_jaca_public_code_priority_fills_and_never_evicts():
    rng = np.random.default_rng(0)
    prio = np.arange(10, dtype=np.float64)          # position 9 is the most important
    pool = Pool(10, 3, "priority", prio, rng)
    pool.evict = False
    pool.put(np.array([0, 1]), torch.ones(2, 2), np.zeros(2, dtype=np.int64))
    pool.put(np.array([5, 9, 7]), torch.ones(3, 2), np.zeros(3, dtype=np.int64))
    assert sorted(np.flatnonzero(pool.resident)) == [0, 1, 9]     # the free slot: best first
    evicting = Pool(10, 3, "priority", prio, rng)
    evicting.put(np.array([0, 1]), torch.ones(2, 2), np.zeros(2, dtype=np.int64))
    evicting.put(np.array([5, 9, 7]), torch.ones(3, 2), np.zeros(3, dtype=np.int64))
    assert sorted(np.flatnonzero(evicting.resident)) == [5, 7, 9]


def test_jaca_public_code_variant_rejects_contradicting_params():
    for params in ({"variant": "public-code", "cache": "messages"},
                   {"variant": "public-code", "backward": "fresh"}):
        with pytest.raises(CdfgnnError, match="public-code"):
            build_strategy("jaca", params)


def test_jaca_eval_through_caches_changes_evaluation_not_training(graph_file):
    """eval=cached (the public code's evaluation reads its caches; here read-only): training
    is the same, the evaluated accuracy comes from the stale halo rows."""
    params = {"variant": "public-code", "staleness": 0}
    got, rec = _run(graph_file, "jaca", params)
    got_c, rec_c = _run(graph_file, "jaca", {**params, "eval": "cached"})
    np.testing.assert_array_equal(got, got_c)
    assert ([e["hit_rate"] for e in rec["epochs"]] == [e["hit_rate"] for e in rec_c["epochs"]])
    assert [e["val"] for e in rec["epochs"]] != [e["val"] for e in rec_c["epochs"]]
    # refreshed every epoch, training equals exact; eval=cached still reads the rows of this
    # epoch's forward pass (before the update), so only eval=exact matches exact's accuracy
    ref, exact = _run(graph_file)
    _, fresh = _run(graph_file, "jaca", {"variant": "public-code", "staleness": 1})
    assert [e["val"] for e in fresh["epochs"]] == pytest.approx([e["val"] for e in exact["epochs"]])
