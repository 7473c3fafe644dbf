"""benchmarks/time_model.py: reading, skipping, the split, the row's own regime and
interconnect, and that its numbers are the package's pricing.

No full-size graph is built: partition statistics are either faked (a fixed halo
pattern) or come from a 2,000-vertex twin.
"""
from __future__ import annotations

import csv
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("time_model_bench",
                                                  ROOT / "benchmarks" / "time_model.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


tm = _load()

ROW = {"source": "test/a.csv row 1", "system": "exact (Sylvie code fp32)", "dataset": "reddit",
       "model": "gcn", "layers": "3", "hidden": "64", "gpus": "2", "hosts": "1",
       "gpu_type": "RTX 3090", "interconnect": "PCIe 4.0", "backend": "gloo",
       "epoch_s": "0.30", "comm_s": "0.20", "notes": "", "compute_s": "0.08",
       "compute_def": "epoch-minus-comm-reduce: test", "regime": "inductive"}
TINY = [ROW, dict(ROW, source="test/a.csv row 2", model="graphsage", comm_s="",
                  compute_s="", epoch_s="0.35")]


def _write(path: Path, rows: list[dict], drop: str | None = None) -> Path:
    cols = [c for c in ROW if c != drop]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def fake_halos(dataset: str, regime: str, parts: int, *args, **kw) -> dict:
    """Partition statistics without a twin: every part owns n/P rows and needs 10% of
    them from every other part."""
    n = tm.DATASETS[dataset].nodes / parts
    arcs = tm.DATASETS[dataset].arcs / parts
    halo = np.full((parts, parts), 0.1 * n)
    np.fill_diagonal(halo, 0.0)
    return {"owned": np.full(parts, n), "labelled": np.full(parts, n / 2),
            "inner_arcs": np.full(parts, 0.9 * arcs), "halo_arcs": np.full(parts, 0.1 * arcs),
            "halo_rows": halo, "source": "fake"}


class FakeContext(tm.Context):
    """A context whose halos are :func:`fake_halos`; records what it was asked for."""

    def __init__(self):
        super().__init__(2000, Path("/nonexistent"), Path("/nonexistent"),
                         log=lambda line: None)
        self.asked = []

    def halos(self, dataset: str, regime: str, parts: int) -> dict:
        self.asked.append((dataset, regime, parts))
        return fake_halos(dataset, regime, parts)


def _row(**changes) -> "tm.Row":
    return tm.epoch_row("t.csv", 2, dict(ROW, **changes))


def _prep(ctx=None, **changes):
    return tm.prepare_epoch_row(_row(**changes), ctx or FakeContext())


def test_every_shipped_row_reads_and_every_card_has_a_profile():
    for name in ("published_epochs.csv", *tm.EPOCH_FILES[1:], tm.SINGLE_FILE, tm.KERNEL_FILE,
                 "held_out_sylvie_1bit.csv"):
        path = tm.DATA_DIR / name
        if not path.is_file():
            continue
        skipped: list[str] = []
        rows = tm.read_rows(path, tm.schema_of(path), skipped.append)
        assert rows and not skipped, skipped[:3]
        from cdfgnn.pricing.hardware import card_profile
        for row in rows:
            card_profile(row.card)


@pytest.mark.parametrize("column", ["epoch_s", "backend", "system"])
def test_missing_column_is_one_line_and_writes_nothing(tmp_path, capsys, column):
    bad = _write(tmp_path / "bad.csv", TINY, drop=column)
    cache = tmp_path / "cache"
    assert tm.main(["--published", str(bad), "--frozen", "--cache", str(cache)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"missing column {column!r}" in err
    assert not cache.exists()


def test_unreadable_text_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bin.csv"
    bad.write_bytes(b"\xff\xfe\x00source,system\n")
    assert tm.main(["--published", str(bad), "--frozen"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unreadable" in err


def test_unpriceable_rows_are_skipped_with_field_and_value(tmp_path, capsys, monkeypatch):
    """One row it cannot price does not stop the others (it used to stop the run)."""
    monkeypatch.setattr(tm, "halo_source", fake_halos)
    rows = [ROW, dict(ROW, source="test/b row", epoch_s="fast"),
            dict(ROW, source="test/c row", gpu_type="RTX 9999"),
            dict(ROW, source="test/d row", interconnect="PCIe 4.0 + carrier pigeon"),
            dict(ROW, source="test/e row", system="somebody's code"),
            dict(ROW, source="test/f row", dataset="it-2004")]
    path = _write(tmp_path / "held.csv", rows)
    assert tm.main(["--published", str(path), "--frozen"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    skipped = [line for line in out if line.startswith("skipped")]
    for field, value in (("epoch_s", "'fast'"), ("gpu_type", "'RTX 9999'"),
                         ("interconnect", "carrier pigeon"), ("system", "somebody's code"),
                         ("dataset", "'it-2004'")):
        assert sum(field in line and value in line for line in skipped) == 1, (field, skipped)
    assert len(skipped) == 5
    assert re.fullmatch(r"held-out epoch by repository test/a\.csv: 1 rows, median ratio "
                        r"\d+\.\d{3}, within 2x: \d+%", out[-2])
    assert re.fullmatch(r"held-out: 1 rows, median ratio \d+\.\d{3}, within 2x: \d+%", out[-1])


def test_names_are_read_as_papers_write_them():
    """A dataset, model or backend written as a paper or log writes it prices as the
    canonical name; a dataset without statistics is still skipped naming what it wrote."""
    canonical = _prep(dataset="ogbn-papers100m", model="graphsage", backend="nccl",
                      regime="transductive")
    written = _prep(dataset="ogbn-papers100M", model="GraphSAGE", backend="NCCL",
                    regime="transductive")
    assert written.row.fields["dataset"] == "ogbn-papers100m"
    eff = tm_eff()
    assert written.predict(eff) == canonical.predict(eff)
    for text, key in (("Reddit", "reddit"), ("Products", "ogbn-products"),
                      ("AmazonProducts", "amazon-products"), ("amazon_products",
                                                              "amazon-products"),
                      ("papers100M", "ogbn-papers100m"), ("Friendster", "friendster"),
                      ("PubMed", "pubmed"), ("synth-reddit", "synth-reddit")):
        assert tm.dataset_key(text) == key, text
    with pytest.raises(tm.Skip, match="'IT-2004'"):
        _prep(dataset="IT-2004")
    with pytest.raises(tm.Skip, match="'GIN'"):
        _row(model="GIN")
    # systems: any case, and BNS-GCN at the boundary rate its name gives
    assert tm.system_of("PipeGCN") == tm.SYSTEMS["pipegcn"]
    assert tm.system_of("BNS-GCN p=0.01").boundary_rate == 0.01
    assert tm.system_of("bns-gcn p=0.1") == tm.SYSTEMS["bns-gcn p=0.1"]
    with pytest.raises(tm.Skip, match="bns-gcn p=2"):
        tm.system_of("bns-gcn p=2")
    with pytest.raises(tm.Skip, match=r"'BNS-GCN': BNS-GCN needs its boundary rate"):
        tm.system_of("BNS-GCN")


def tm_eff():
    from cdfgnn.pricing.efficiency import load_efficiency
    return load_efficiency()


def test_comm_zero_is_a_value():
    row = _row(comm_s="0", compute_s="")
    assert row.published["communication"] == 0.0 and "compute" not in row.published
    assert "communication" not in _row(comm_s="").published
    # a published 0 against a small prediction: both at 1% of the epoch
    assert tm.ratio(0.001, 0.0, "communication", row) == pytest.approx(1.0)
    assert tm.ratio(0.03, 0.0, "communication", row) == pytest.approx(10.0)


def test_the_halo_regime_follows_the_row():
    """A transductive row on Reddit gets the full graph's halos, though the system's
    scripts train Reddit inductively (the row used to get the inductive correction)."""
    ctx = FakeContext()
    _prep(ctx, regime="transductive")
    _prep(ctx, regime="inductive")
    _prep(ctx, regime="")                    # not written: the system's scripts
    assert [a[1] for a in ctx.asked] == ["transductive", "inductive", "inductive"]
    assert ctx.asked[0] == ("reddit", "transductive", 2)


def test_interconnect_is_read_from_the_row():
    """Every written link reaches the network model (it used to read a 'PCIe 3.0' prefix
    only, and 10 GbE between any two servers)."""
    ib = _prep(gpus="4", hosts="2", interconnect="PCIe 3.0 + 100 Gb/s InfiniBand EDR")
    assert ib.link.inter_gbps == pytest.approx(12.5) and ib.link.host_staged
    assert ib.gpus[0].host_link_gbps == pytest.approx(15.75)
    eth = _prep(gpus="2", hosts="2", interconnect="25 Gbps Ethernet")
    assert eth.link.inter_gbps == pytest.approx(3.125) and eth.topology.devices_per_host == 1
    nv = _prep(interconnect="NVLink", backend="nccl")
    assert not nv.link.host_staged and nv.link.intra_gbps == nv.gpus[0].peer_link_gbps
    with pytest.raises(tm.Skip, match="no network between the 2 servers"):
        _prep(gpus="4", hosts="2", interconnect="PCIe 4.0")
    with pytest.raises(tm.Skip, match="Ethernet without a speed"):
        _prep(gpus="4", hosts="2", interconnect="PCIe 4.0 + Ethernet (unnamed)")


def test_the_benchmark_prices_with_the_package():
    """The predicted epoch of a row is the package's price of the row's counts on the
    row's cluster, with the stored constants; the script keeps no rule of its own."""
    from cdfgnn.pricing.cluster import resolve_cluster
    from cdfgnn.pricing.efficiency import load_efficiency
    from cdfgnn.pricing.record import price_counts
    eff = load_efficiency()
    for changes in ({}, {"system": "pipegcn"}, {"model": "gat", "gpus": "4", "hosts": "2",
                                                "interconnect": "PCIe 4.0 + 10 Gbps Ethernet"}):
        prep = _prep(**changes)
        cluster = resolve_cluster(list(prep.gpus), prep.link, prep.topology, eff)
        package = price_counts(prep.inputs, cluster)
        assert prep.predict(eff)["epoch"] == package["epoch_s"]
    src = (ROOT / "benchmarks" / "time_model.py").read_text()
    for rule in ("link_bw", "halo_correction", "VOLUME_FIGURES", "NetworkModel",
                 "host_copy_seconds", "comm_seconds"):
        assert rule not in src


def test_gat_rows_are_priced_with_their_heads():
    one, four = _prep(model="gat"), _prep(model="gat", heads="4")
    eff = __import__("cdfgnn.pricing.efficiency", fromlist=["x"]).load_efficiency()
    assert 0 < one.predict(eff)["epoch"] < four.predict(eff)["epoch"]


def test_a_system_may_name_its_layer_order():
    prep = _prep(system="mycode order=aggregate-first")
    assert prep.inputs["ranks"][0]["patterns"][0]["vertex_bytes"][1] > 0
    with pytest.raises(tm.Skip, match="order=aggregate-first"):
        _prep(system="mycode")


def test_sylvie_rows_send_packed_rows_in_three_messages_and_pay_the_codec_on_the_comm_side():
    """Sylvie-S / Sylvie-A (1 bit by default, any case) and ``codec=SPEC`` on a named order:
    the rows' bytes shrink to the packed codes plus 4 bytes of float16 scale and minimum,
    the messages triple, and the quantisation is priced as communication, not compute."""
    exact, s1 = _prep(system="exact (Sylvie code fp32)"), _prep(system="Sylvie-S")
    assert tm.system_of("sylvie-s") == tm.SYSTEMS["sylvie-s int1"]
    assert tm.system_of("Sylvie-A int4").pipeline and tm.system_of("sylvie-a").wire_codec == "stochastic-1"

    def sent(prep):
        it = prep.inputs["ranks"][0]["patterns"][0]
        return it["vertex_bytes"][1], it["vertex_msgs"][1], it["ledger"]
    (b32, m32, led32), (b1, m1, led1) = sent(exact), sent(s1)
    assert m1 == 3 * m32 and 0 < b1 < b32 / 6
    assert "codec" not in led32 and led1["codec"]["codec"]["bytes"] > 0
    eff = __import__("cdfgnn.pricing.efficiency", fromlist=["x"]).load_efficiency()
    p32, p1 = exact.predict(eff), s1.predict(eff)
    assert p1["compute"] == pytest.approx(p32["compute"], rel=1e-12)   # codec is comm-side
    four = _prep(system="mycode order=aggregate-first use-pp layernorm codec=linear-4")
    assert 0 < sent(four)[0] < b32 / 3
    with pytest.raises(tm.Skip, match="bit width must be one of"):
        _prep(system="mycode order=aggregate-first codec=linear-3")


def test_peer_graphsage_aggregates_at_its_input_width():
    """Sylvie's, BNS-GCN's and PipeGCN's GraphSAGELayer aggregates, then applies its Linear,
    whatever the widths; their GCN is DGL's GraphConv (narrower first)."""
    peer = tm.SYSTEMS["exact (Sylvie code fp32)"]
    f = {"model": "graphsage", "layers": 2, "linear": 0, "hidden": 256, "heads": 1}
    assert tm.model_shape(f, peer, 602, 41).order == "aggregate-first"
    assert tm.model_shape(dict(f, model="gcn"), peer, 602, 41).order == "narrower-first"
    eff = __import__("cdfgnn.pricing.efficiency", fromlist=["x"]).load_efficiency()
    # the last layer narrows 256 -> 41: aggregating first reads 256-wide rows, not 41
    sage = _prep(model="graphsage", hidden="256").predict(eff)["compute"]
    narrow = _prep(model="graphsage", hidden="256",
                   system="x order=narrower-first layernorm use-pp").predict(eff)["compute"]
    assert sage > narrow


def test_a_pipelined_row_compares_its_exchange_wait_with_the_all_reduce():
    """Pipelined (PipeGCN-style) rows: the exchange in flight lands in the all-reduce
    timer, so communication is epoch minus compute on both sides; other rows keep the
    published exchange time and the model's epoch minus compute and all-reduce."""
    eff = __import__("cdfgnn.pricing.efficiency", fromlist=["x"]).load_efficiency()
    piped = _row(system="pipegcn", epoch_s="0.30", comm_s="0.05", compute_s="0.08")
    assert piped.published["communication"] == pytest.approx(0.30 - 0.08)
    assert _row(epoch_s="0.30", comm_s="0.05", compute_s="0.08").published[
        "communication"] == pytest.approx(0.05)
    pred = tm.prepare_epoch_row(piped, FakeContext()).predict(eff)
    assert pred["communication"] == pytest.approx(pred["epoch"] - pred["compute"])
    plain = _prep().predict(eff)
    assert plain["communication"] < plain["epoch"] - plain["compute"]


def test_the_peers_reduce_timer_holds_layer_0s_backward_tail():
    """In the PipeGCN lineage's timers nothing waits for layer 0's backward before the
    all-reduce threads copy its weight gradients: its GPU time beyond the time to launch
    it moves from compute to the all-reduce, and the exchange is unchanged. A system
    without those timers keeps every phase in compute."""
    import dataclasses
    from cdfgnn.pricing.efficiency import load_efficiency
    eff = load_efficiency()
    gat = dict(model="gat", hidden="256", notes="GAT heads 1")
    peer = _prep(**gat)
    assert peer.first_backward_in_reduce
    tail = peer.first_backward_tail(eff)
    assert tail > 0
    plain = dataclasses.replace(peer, first_backward_in_reduce=False)
    got, ref = peer.predict(eff), plain.predict(eff)
    assert got["compute"] == pytest.approx(ref["compute"] - tail)
    assert got["communication"] == pytest.approx(ref["communication"])
    assert got["epoch"] == ref["epoch"]
    other = _prep(system="order=aggregate-first exchange=input layernorm use-pp", **gat)
    assert not other.first_backward_in_reduce
    # kernels launched slower than they run leave no tail
    slow_host = eff.but(launch=1e6)
    assert peer.first_backward_tail(slow_host) == 0.0


def test_split_is_stratified_by_source_and_ignores_the_numbers():
    rows = [_row(source=f"group{g}/file row {i}") for g in range(3) for i in range(5)]
    preps = [tm.Prepared(dataclass_replace(r, line=i)) for i, r in enumerate(rows)]
    calib, valid = tm.split_halves(preps)
    assert len(calib) + len(valid) == 15 and abs(len(calib) - len(valid)) <= 1
    for g in range(3):
        assert any(p.row.source.startswith(f"group{g}/") for p in calib)
        assert any(p.row.source.startswith(f"group{g}/") for p in valid)
    changed = [tm.Prepared(dataclass_replace(p.row, published={"epoch": 7.0})) for p in preps]
    assert [p.row.key for p in tm.split_halves(changed)[0]] == [p.row.key for p in calib]


def dataclass_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_fit_moves_only_what_rows_depend_on_within_bounds():
    from cdfgnn.pricing.efficiency import FIT_BOUNDS, load_efficiency
    preps = [_prep(), _prep(model="graphsage", source="test/x row 9")]
    start = load_efficiency()
    fitted, best, names = tm.fit(preps, start)
    assert best <= tm.loss(preps, start) + 1e-12
    assert "link_nccl" not in names          # no nccl row
    for key, (low, high) in FIT_BOUNDS.items():
        if key in names:
            assert low - 1e-9 <= getattr(fitted, key) <= high + 1e-9, key


def test_fit_never_returns_constants_worse_than_its_start(monkeypatch):
    """Powell may settle in a worse basin than the constants it started from (it did, with
    a start moved 5% inside the bounds): the start is kept then."""
    import types

    import scipy.optimize

    from cdfgnn.pricing.efficiency import FIT_BOUNDS, load_efficiency
    preps = [_prep(), _prep(model="graphsage", source="test/x row 9")]
    start = load_efficiency().within_bounds()

    def worse(fun, x, bounds, **kw):        # a 'minimum' at the box's lower corner
        far = np.array([low for low, _ in bounds])
        return types.SimpleNamespace(x=far, fun=fun(far))

    monkeypatch.setattr(scipy.optimize, "minimize", worse)
    fitted, best, names = tm.fit(preps, start)
    assert names and fitted == start and best == tm.loss(preps, start)
    # a start outside a bound (a bound tightened since the constants were stored) is
    # clipped first: what comes back is never outside the bounds
    outside = start.but(msg_gloo_us=FIT_BOUNDS["msg_gloo_us"][1] * 10)
    fitted, best, names = tm.fit(preps, outside)
    assert fitted.msg_gloo_us == FIT_BOUNDS["msg_gloo_us"][1]
    assert best == tm.loss(preps, fitted)


def test_pipeline_prints_every_part_for_both_halves(tmp_path, capsys):
    """The whole run on two rows and a 2,000-vertex twin: ten summary lines at the end."""
    tiny = _write(tmp_path / "tiny.csv", TINY)
    cache = tmp_path / "cache"
    assert tm.main(["--published", str(tiny), "--cache", str(cache), "--scale", "2000"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    tail = out[-10:]
    expect = [f"{h} {p}" for h in tm.HALVES for p in tm.PARTS]
    for line, label in zip(tail, expect):
        assert re.fullmatch(rf"{label}: (\d+ rows, median ratio \d+\.\d{{3}}, within 2x: "
                            rf"\d+%|0 rows, median ratio -, within 2x: -)", line), line
    built = [p.name.rsplit("-", 1)[0] for p in cache.glob("*.json")]
    assert built == ["synth-reddit-dgl-inductive-p2"]


def test_compute_is_priced_as_the_source_defines_it():
    from cdfgnn.pricing.efficiency import load_efficiency
    eff = load_efficiency()
    # a system without the PipeGCN lineage's timers (test below), so that every
    # definition covers the next one's phases
    got = {d: _prep(compute_def=f"{d}: as printed",
                    system="exact (AdaQP Vanilla)").predict(eff)["compute"]
           for d in tm.COMPUTE_DEFS}
    assert got["epoch-minus-comm"] > got["epoch-minus-comm-reduce"] > got["forward-backward"]
    assert got["forward-backward"] > got["aggregation-only"] > 0
    with pytest.raises(tm.Skip, match="compute_def"):
        _row(compute_def="wall clock of something")
    assert "compute" not in _row(compute_s="", compute_def="").published


def test_published_part_sends_set_each_senders_rows(tmp_path):
    """real_partition_parts.csv's per-part METIS send counts replace every sender's
    total: the k-th largest sender of the twin's pattern sends the k-th largest published
    count, its receivers in the pattern's proportions; without a twin, evenly."""
    halo = np.array([[0, 3, 1], [1, 0, 1], [1, 1, 0]], dtype=float)   # sends 2, 4, 2
    got = tm.with_sends(halo, np.array([10.0, 30.0, 20.0]))
    assert got.sum(axis=0).tolist() == [10.0, 30.0, 20.0]       # ties keep part order
    assert got[0, 1] / got[2, 1] == pytest.approx(3.0) and np.all(np.diag(got) == 0)
    (tmp_path / tm.PARTS_FILE).write_text(
        "graph,vertices,arcs,partitioner,parts,part,send_rows,source\n"
        + "".join(f"pubmed,19717,88651,metis,4,{q},{v},test\n"
                  for q, v in enumerate([100, 400, 200, 300])))
    assert tm.published_part_sends("pubmed", 4, tmp_path).tolist() == [100, 400, 200, 300]
    assert tm.published_part_sends("reddit", 2, tmp_path) is None      # not in the file
    even = tm.halo_source("pubmed", "transductive", 4, 2000, tmp_path / "c", tmp_path)
    assert sorted(even["halo_rows"].sum(axis=0)) == pytest.approx([100, 200, 300, 400])
    assert even["halo_rows"][1, 0] == even["halo_rows"][3, 0] and even["halo_rows"][0, 0] == 0
    with pytest.raises(tm.Skip, match="no twin"):
        tm.halo_source("pubmed", "inductive", 4, 2000, tmp_path / "c", tmp_path)


def test_published_halo_copies_set_the_halo_total(tmp_path):
    """real_partition_stats.csv's METIS halo copies for the graph and P replace the twin's
    total (transductive only); a graph without a twin is spread evenly over the pairs."""
    (tmp_path / tm.STATS_FILE).write_text(
        "graph,vertices,arcs,partitioner,metric,parts,value,source,note\n"
        "pubmed,19717,88651,metis,halo_copies_per_vertex,4,0.2,test,\n"
        "reddit-dgl,232965,114615892,metis,halo_copies_per_vertex,2,0.5,test,\n")
    assert tm.published_halo_copies("reddit", 2, tmp_path) == 0.5
    assert tm.published_halo_copies("reddit", 4, tmp_path) is None
    even = tm.halo_source("pubmed", "transductive", 4, 2000, tmp_path / "c", tmp_path)
    assert even["halo_rows"].sum() == pytest.approx(0.2 * 19717)
    assert even["halo_rows"][0, 1] == even["halo_rows"][2, 3] and even["halo_rows"][1, 1] == 0
    with pytest.raises(tm.Skip, match="no twin"):
        tm.halo_source("pubmed", "transductive", 8, 2000, tmp_path / "c", tmp_path)
    twin = tm.halo_source("reddit", "transductive", 2, 2000, tmp_path / "c", tmp_path,
                          log=lambda line: None)
    assert twin["halo_rows"].sum() == pytest.approx(0.5 * 232965)


def test_by_repository_lines_split_each_part_by_repository():
    """Every row of the half counted once per part, grouped by the repository it names."""
    from cdfgnn.pricing.efficiency import load_efficiency
    preps = [_prep(source="zxmeng98/Sylvie@72572f6:results/a.csv row 1"),
             _prep(source="zxmeng98/Sylvie@72572f6:results/b.csv row 2", model="graphsage"),
             _prep(source="arXiv:2104.00521 Table 4 row 3")]
    assert [tm.repository(p.row.source) for p in preps] == \
        ["zxmeng98/Sylvie", "zxmeng98/Sylvie", "arXiv:2104.00521"]
    halves = {p.row.key: "validation" for p in preps}
    parts = tm.part_ratios(preps, load_efficiency())
    lines = tm.by_repository(parts, "validation", halves)
    for part, rows in parts.items():
        mine = [line for line in lines if line.startswith(f"validation {part} by repository ")]
        counts = [int(re.search(r": (\d+) rows", line).group(1)) for line in mine]
        assert sum(counts) == len(rows)
        if rows:
            assert mine[0].startswith(f"validation {part} by repository zxmeng98/Sylvie: 2 rows")
    assert tm.by_repository(parts, "calibration", halves) == []


def test_gloo_message_benchmark_measures_the_peers_exchange_pattern():
    """benchmarks/gloo_message.py (the basis of msg_gloo_us's bound) runs the pattern
    between two gloo processes and prints one positive time per line; bad arguments stop
    it with a usage error before any process starts."""
    import subprocess
    script = str(ROOT / "benchmarks" / "gloo_message.py")
    out = subprocess.run([sys.executable, script, "--ranks", "2", "--bytes", "64",
                          "--exchanges", "20"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ranks, nbytes, us = out.stdout.strip().splitlines()[-1].split()
    assert (ranks, nbytes) == ("2", "64") and float(us) > 0
    bad = subprocess.run([sys.executable, script, "--ranks", "1"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--ranks >= 2" in bad.stderr
