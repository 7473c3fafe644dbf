"""The operation ledger (cdfgnn/cost): counts, GPU profiles, pricing, the device-modelled
epoch in the run record, `--devices`, and `cdfgnn compare --devices --network`."""
from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from cdfgnn.cli import main
from cdfgnn.cost.counts import FP64_KIND, Ledger
from cdfgnn.pricing.efficiency import Efficiency, load_efficiency
from cdfgnn.pricing.estimate import ModelShape, RankShape, estimate_ledger, rank_shapes
from cdfgnn.pricing.hardware import get_gpu, load_gpu, parse_gpus, registered
from cdfgnn.pricing.roofline import flop_rate, host_copy_seconds, op_seconds, price, spmm_bytes
from cdfgnn.errors import CdfgnnError
from cdfgnn.train.config import TrainConfig
from cdfgnn.pricing.record import reprice
from cdfgnn.train.record import validate_record
from cdfgnn.train.run import run_training

EFF = Efficiency(dense_flop=0.5, use_tf32=False, stream_bw=0.5, spmm_bw=0.5, spmm_reuse=0.0,
                 l2_bw=2.0, launch=1.0, host_copy_bw=0.5)


def _cfg(graph_file, **kw):
    base = dict(graph=graph_file, dataset=None, epochs=3, warmup=1, hidden=8, workers=2,
                hosts=1, partitioner="metis", timeout_s=120, seed=0)
    base.update(kw)
    return TrainConfig(**base)


def _rank_ledger(rec, rank: int = 0, i: int = 0) -> Ledger:
    rk = rec["model_time"]["device"]["inputs"]["ranks"][rank]
    return Ledger.from_dict(rk["patterns"][rk["epoch_pattern"][i]]["ledger"])


# ------------------------------------------------------------------ counts
def test_full_graph_counts_equal_hand_computed(graph_file, small_graph):
    """2-layer GCN on the whole graph: SpMM nnz x width and dense shapes, by hand."""
    rec = run_training(_cfg(graph_file, trainer="full-graph", workers=1))
    led = _rank_ledger(rec)
    n, nnz = small_graph.num_nodes, int(small_graph.indptr[-1])
    f, h, c = small_graph.num_features, 8, small_graph.num_classes
    assert led.get("fwd/L0", "spmm") == {"calls": 1, "flops": 2 * nnz * h, "bytes": 0,
                                         "nnz_w": nnz * h, "rows_w": n * h, "cols_w": n * h,
                                         "nnz": nnz}
    assert led.get("fwd/L1", "spmm")["nnz_w"] == nnz * c
    assert led.get("bwd/L1", "spmm")["nnz_w"] == nnz * c
    assert led.get("bwd/L0", "spmm")["nnz_w"] == nnz * h
    assert led.get("fwd/L0", "dense")["flops"] == 2 * n * f * h       # X W0
    assert led.get("fwd/L1", "dense")["flops"] == 2 * n * h * c       # H W1
    assert led.get("bwd/L1", "dense") == {**led.get("bwd/L1", "dense"), "calls": 2,
                                          "flops": 2 * (2 * n * h * c)}  # dW1 and dH
    assert led.get("bwd/L0", "dense")["calls"] == 1                   # dW0 only: X has no grad
    assert led.get("bwd/L0", "dense")["flops"] == 2 * f * n * h
    assert led.get("optimizer", "elementwise")["calls"] > 0
    assert led.totals()["spmm"]["calls"] == 4


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_estimate_equals_counted_spmm_and_dense(graph_file, small_graph, model):
    """Counts without training (cdfgnn.pricing.estimate) = counted, for exact sync."""
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.partition.book import build_books

    part = partition_graph(small_graph, "metis", Topology.for_workers(2, 1), seed=0)
    rec = run_training(_cfg(graph_file, model=model, epochs=2, warmup=0))
    shapes = rank_shapes(build_books(small_graph, part), small_graph.train)
    shape = ModelShape(model, small_graph.num_features, 8, small_graph.num_classes, 2)
    for r in range(2):
        counted, est = _rank_ledger(rec, r), estimate_ledger(shape, shapes[r])
        for phase in est.phases:
            for kind in ("spmm", "dense"):
                assert counted.get(phase, kind) == est.get(phase, kind), (r, phase, kind)


@pytest.mark.parametrize("workers,heads", [(1, 1), (2, 2)])
def test_gather_scatter_gat_estimate_follows_the_engine(graph_file, small_graph, workers,
                                                        heads):
    """The engine's GAT sends a message row per arc: the ``gather-scatter`` estimate
    counts its products exactly, its indexed reads and writes exactly on one rank, and
    every layer's elementwise and gather bytes within 20% (the generic passes and the
    halo exchange's gathers are approximations); the ``fused`` estimate (DGL's kernels)
    counts SpMMs the engine never runs."""
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.partition.book import build_books

    kw = dict(trainer="full-graph") if workers == 1 else {}
    rec = run_training(_cfg(graph_file, model="gat", heads=heads, workers=workers, epochs=2,
                            warmup=0, **kw))
    if workers == 1:
        n, nnz = small_graph.num_nodes, int(small_graph.indptr[-1]) + small_graph.num_nodes
        shapes = [RankShape(n, n, nnz, n, int(small_graph.train.sum()), 0, 0)]
    else:
        part = partition_graph(small_graph, "metis", Topology.for_workers(2, 1), seed=0)
        # the engine's GAT adds a self loop per output row
        shapes = [dataclasses.replace(s, nnz=s.nnz + s.out_rows)
                  for s in rank_shapes(build_books(small_graph, part), small_graph.train)]
    dims = (small_graph.num_features, 8, small_graph.num_classes, 2)
    for r in range(workers):
        counted = _rank_ledger(rec, r)
        est = estimate_ledger(ModelShape("gat", *dims, heads=heads, gat_kernels="gather-scatter"),
                              shapes[r])
        fused = estimate_ledger(ModelShape("gat", *dims, heads=heads), shapes[r])
        assert "spmm" not in counted.totals() and fused.totals()["spmm"]["calls"] > 0
        for phase in ("fwd/L0", "fwd/L1", "bwd/L0", "bwd/L1"):
            assert counted.get(phase, "dense") == est.get(phase, "dense"), (r, phase)
            for kind in ("elementwise", "gather"):
                a, b = counted.get(phase, kind)["bytes"], est.get(phase, kind)["bytes"]
                assert abs(b - a) <= 0.2 * a, (r, phase, kind, a, b)
            if workers == 1 and phase.endswith("L1"):
                assert counted.get(phase, "gather")["bytes"] == est.get(phase, "gather")["bytes"]


def test_thread_and_process_backends_give_identical_ledgers(graph_file):
    """Counting is deterministic: the same configuration, the same counts and the same
    device-modelled epoch on both backends (a lossy codec exercises the codec counts)."""
    kw = dict(method="exact", method_params={"codec": "linear-8"}, workers=2, hosts=2)
    thread = run_training(_cfg(graph_file, backend="thread", **kw))
    proc = run_training(_cfg(graph_file, backend="process", **kw))
    a, b = thread["model_time"]["device"], proc["model_time"]["device"]
    assert a["inputs"] == b["inputs"]
    assert abs(a["epoch_s"] - b["epoch_s"]) <= 1e-9 * a["epoch_s"]
    assert a["ledger_totals"]["codec"]["calls"] > 0
    assert _rank_ledger(thread).get("codec", "codec")["bytes"] > 0


def test_a_counted_training_run_does_not_import_dynamo(graph_file):
    """The counting mode must not pull in torch._dynamo (1.3 s per process, and every
    rank thread waits for it on the import lock): torch wraps a dispatch mode in
    torch._disable_dynamo unless the mode opts out."""
    code = ("import sys, json\n"
            "from cdfgnn.train.config import TrainConfig\n"
            "from cdfgnn.train.run import run_training\n"
            f"cfg = TrainConfig(graph={str(graph_file)!r}, dataset=None, epochs=2, warmup=0,"
            " hidden=8, workers=2, partitioner='metis', timeout_s=120, seed=0)\n"
            "rec = run_training(cfg)\n"
            "assert rec['model_time']['device']['ledger_totals']['spmm']['calls'] > 0\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


# ------------------------------------------------------------------ pricing
def test_roofline_costs():
    gpu = get_gpu("a100-80")
    f = {"calls": 2, "flops": 10 ** 12, "bytes": 10 ** 6}           # compute bound
    assert op_seconds("dense", f, gpu, EFF) == pytest.approx(
        1e12 / (19.5e12 * 0.5) + 2 * 5e-6)
    f = {"calls": 1, "bytes": 10 ** 9}                               # memory bound
    assert op_seconds("elementwise", f, gpu, EFF) == pytest.approx(1e9 / (2039e9 * 0.5) + 5e-6)
    assert op_seconds("dense", f, gpu, EFF.but(use_tf32=True)) == pytest.approx(
        1e9 / (2039e9 * 0.5) + 5e-6)
    assert host_copy_seconds(1e9, gpu, EFF) == pytest.approx(1e9 / (31.5e9 * 0.5))
    assert op_seconds("copy", {"calls": 0, "bytes": 10 ** 9}, gpu, EFF) == pytest.approx(
        1e9 / (31.5e9 * 0.5))


def test_spmm_traffic_uses_the_graphs_reuse():
    """No reuse: every arc re-reads its row; reuse grows as the input fits in L2."""
    f = {"calls": 1, "nnz": 1000, "nnz_w": 64000, "rows_w": 6400, "cols_w": 6400,
         "flops": 128000}
    gpu = get_gpu("rtx3090")
    none = spmm_bytes(f, gpu, EFF)
    assert none == 4 * 6400 + 4 * 6400 + 4 * (64000 - 6400) + 12 * 1000
    full = spmm_bytes(f, gpu, EFF.but(spmm_reuse=1.0))      # 25.6 KB input fits in 6 MB
    # every repeated read from L2, at l2_bw (2) times the DRAM bandwidth
    assert full == 4 * 6400 + 4 * 6400 + 4 * (64000 - 6400) / 2.0 + 12 * 1000
    assert spmm_bytes(f, gpu, EFF.but(spmm_reuse=1.0, l2_bw=1.0)) == none
    big = {**f, "cols_w": 10 ** 8, "nnz_w": 10 ** 9}         # 400 MB input: L2 holds 1.5%
    part = spmm_bytes(big, gpu, EFF.but(spmm_reuse=1.0))
    assert 4 * (10 ** 9 - 10 ** 8) * 0.98 < part - 4 * 6400 - 4 * 10 ** 8 - 12000 < 4 * 9e8


def test_spmm_traffic_follows_the_matrixs_column_locality():
    """A skewed matrix (a few columns take most reads) gets more from the same L2 than a
    uniform one; the uniform curve prices as no curve; 1 - hit + hit / l2_bw per read."""
    from cdfgnn.partition.locality import arc_share, share_at
    gpu = get_gpu("rtx3090")
    cols, w = 100_000, 256                      # 102 MB of input rows: L2 holds 6/102
    f = {"calls": 1, "nnz": 10 ** 7, "nnz_w": 256 * 10 ** 7, "rows_w": cols * w,
         "cols_w": cols * w, "flops": 0}
    uniform = arc_share(np.arange(10 ** 6) % cols, cols)
    rng = np.random.default_rng(0)
    skewed = arc_share(np.minimum(rng.zipf(1.6, 10 ** 6) - 1, cols - 1), cols)
    eff = EFF.but(spmm_reuse=1.0)
    q = gpu.l2_mb * 1e6 / (4 * cols * w)
    assert share_at(uniform, q) == pytest.approx(q, rel=0.02)
    assert share_at(skewed, q) > 0.5
    flat = 4 * cols * w * 2 + 12 * 10 ** 7
    for curve in (None, uniform, skewed):
        hit = share_at(curve, q)
        assert spmm_bytes(f, gpu, eff, share=curve) == pytest.approx(
            flat + 4 * (256 * 10 ** 7 - cols * w) * (1 - hit + hit / 2.0))
    assert spmm_bytes(f, gpu, eff, share=uniform) == pytest.approx(spmm_bytes(f, gpu, eff),
                                                                   rel=0.01)
    assert spmm_bytes(f, gpu, eff, share=skewed) < 0.8 * spmm_bytes(f, gpu, eff)


def test_float64_products_use_the_fp64_peaks():
    """dense_fp64 at the FP64 tensor rate (cuBLAS DGEMM's), spmm_fp64 at the FP64 vector
    rate with 8-byte elements and 16-byte arcs; TF32 never applies to them."""
    f = {"calls": 1, "flops": 10 ** 12, "bytes": 10 ** 6}           # compute bound
    rtx, a100 = get_gpu("rtx3090"), get_gpu("a100-80")
    assert op_seconds("dense_fp64", f, rtx, EFF) == pytest.approx(1e12 / (0.556e12 * 0.5) + 5e-6)
    assert op_seconds("dense_fp64", f, a100, EFF) == pytest.approx(1e12 / (19.5e12 * 0.5) + 5e-6)
    assert op_seconds("dense_fp64", f, a100, EFF.but(use_tf32=True)) == op_seconds(
        "dense_fp64", f, a100, EFF)
    assert op_seconds("dense", f, a100, EFF.but(use_tf32=True)) < op_seconds("dense", f, a100, EFF)
    s = {"calls": 1, "nnz": 1000, "nnz_w": 64000, "rows_w": 6400, "cols_w": 6400,
         "flops": 10 ** 12}
    assert op_seconds("spmm_fp64", s, a100, EFF) == pytest.approx(1e12 / (9.7e12 * 0.5) + 5e-6)
    assert spmm_bytes(s, rtx, EFF, "spmm_fp64") == (8 * 6400 + 8 * 6400 + 8 * (64000 - 6400)
                                                    + 16 * 1000)


def test_price_sums_phases_and_accepts_totals():
    led = Ledger()
    led.add("fwd/L0", "dense", calls=1, flops=10 ** 9, bytes=10)
    led.add("codec", "codec", calls=3, bytes=10 ** 6)
    gpu = get_gpu("t4")
    by_phase = price(led, gpu, EFF)
    assert set(by_phase) == {"fwd/L0", "codec", "total"}
    assert by_phase["total"] == pytest.approx(by_phase["fwd/L0"] + by_phase["codec"])
    assert price(led.to_dict(), gpu, EFF) == by_phase
    assert price(led.totals(), gpu, EFF)["total"] == pytest.approx(by_phase["total"])
    # a slower card takes longer for the same counts
    assert price(led, get_gpu("gtx1660ti"), EFF)["total"] > price(led, get_gpu("h100"),
                                                                 EFF)["total"]


def test_host_staged_network_adds_copies(graph_file):
    from cdfgnn.partition.base import Topology
    from cdfgnn.pricing.cluster import resolve_cluster
    from cdfgnn.pricing.epoch import device_model

    rec = run_training(_cfg(graph_file, workers=2, hosts=1, network="cdfgnn-table2"))
    inputs = rec["model_time"]["device"]["inputs"]
    topo = Topology.for_workers(2, 1)
    gpu = [get_gpu("rtx3090")] * 2
    staged = device_model(inputs, resolve_cluster(gpu, "pcie4-host-staged", topo, EFF))
    item = inputs["ranks"][0]["patterns"][0]
    sent = sum(item["vertex_bytes"])
    recv = sum(inputs["ranks"][1]["patterns"][0]["vertex_bytes"])
    copies = host_copy_seconds(sent, gpu[0], EFF) + host_copy_seconds(recv, gpu[0], EFF)
    assert sent > 0 and copies > 0
    # intra-host only: the staged link is the copies (+ latency), not the halved PCIe
    net = device_model(inputs, resolve_cluster(gpu, "cdfgnn-table2", topo, EFF))
    assert staged["comm_s"][0] != net["comm_s"][0]
    assert staged["compute_s"] == net["compute_s"]
    again = reprice(rec, devices="h100", network="pcie4-host-staged", eff=EFF)
    assert again["epoch_s"] > 0 and again["compute_s"][0] < staged["compute_s"][0]


# ------------------------------------------------------------------ profiles
def test_profiles_cover_the_issue_list_with_sources():
    need = {"v100", "a100-40", "a100-80", "a800", "h100", "h800", "rtx3090", "rtx-a6000",
            "a40", "rtx3060", "gtx1660ti", "t4"}
    profiles = registered()
    assert need <= set(profiles)
    for p in profiles.values():
        assert all(p.sources[k] for k in ("compute", "memory", "l2", "host_link", "launch"))
        # FP64: a sourced figure, vector <= tensor (DGEMM) <= the FP32 peak
        assert "FP64" in p.sources["compute"], p.name
        assert p.fp64_tflops <= p.fp64_tensor_tflops <= p.fp32_tflops, p.name
    assert [g.name for g in parse_gpus("a100-80", 3)] == ["a100-80"] * 3
    assert [g.name for g in parse_gpus("r9,G6", 2)] == ["rtx3090", "gtx1660ti"]
    assert [g.name for g in parse_gpus("x4", 4)] == ["rtx3090", "rtx3090", "a40", "a40"]


def test_bad_profile_input_is_one_line(tmp_path):
    with pytest.raises(CdfgnnError, match=r"unknown device profile 'h999'; valid: v100"):
        get_gpu("h999")
    good = {k: v for k, v in get_gpu("t4").describe().items() if k != "name"}
    bad = dict(good)
    del bad["mem_bw_gbps"]
    p = tmp_path / "nobw.yaml"
    import yaml
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(CdfgnnError, match=r"nobw\.yaml: profile 'nobw' missing \['mem_bw_gbps'\]"):
        load_gpu(p)
    p.write_text(yaml.safe_dump({**good, "fp32_tflops": 0}))
    with pytest.raises(CdfgnnError, match=r"'nobw': fp32_tflops must be a finite number > 0"):
        load_gpu(p)
    p.write_text(yaml.safe_dump({**good, "fp32_tflops": 9.0}))
    assert load_gpu(p).fp32_tflops == 9.0
    no_fp64 = {k: v for k, v in good.items() if k != "fp64_tflops"}
    p.write_text(yaml.safe_dump(no_fp64))
    with pytest.raises(CdfgnnError, match=r"nobw\.yaml: profile 'nobw' missing \['fp64_tflops'\]"):
        load_gpu(p)
    p.write_text(yaml.safe_dump({**good, "fp64_tensor_tflops": -1}))
    with pytest.raises(CdfgnnError, match=r"'nobw': fp64_tensor_tflops must be a finite"):
        load_gpu(p)
    with pytest.raises(CdfgnnError, match=r"names 3 device\(s\)"):
        parse_gpus("t4,t4,t4", 2)
    with pytest.raises(CdfgnnError, match=r"efficiency spmm_bw"):
        EFF.but(spmm_bw=0.0)


@pytest.mark.parametrize("workers", [1, 2])
def test_optimizer_and_reduce_counted_once_equal_counting_every_epoch(graph_file, workers):
    """run_epochs counts the optimizer step and the gradient all-reduce once per parameter
    shapes (reuse.counted_once); the ledgers equal those of counting every epoch's ops."""
    from cdfgnn.cost import reuse
    kw = dict(workers=workers, trainer="distributed" if workers > 1 else "full-graph",
              weight_decay=1e-4)
    memo = run_training(_cfg(graph_file, **kw))
    with reuse.exhaustive():
        every = run_training(_cfg(graph_file, **kw))
    a, b = memo["model_time"]["device"]["inputs"], every["model_time"]["device"]["inputs"]
    assert a == b
    assert _rank_ledger(memo).get("optimizer", "elementwise")["calls"] > 0
    if workers > 1:
        assert _rank_ledger(memo).get("reduce", "gather")["calls"] > 0


@pytest.mark.parametrize("trainer", ["distributed", "full-graph"])
def test_count_ops_false_trains_the_same_without_a_device_model(graph_file, trainer):
    """--count-ops false: the same training (losses bit for bit), no ledger, no device
    model, and nothing that pretends to be one."""
    kw = dict(trainer=trainer, workers=2 if trainer == "distributed" else 1)
    counted = run_training(_cfg(graph_file, **kw))
    plain = run_training(_cfg(graph_file, count_ops=False, **kw))
    validate_record(plain)
    assert [e["loss"] for e in plain["epochs"]] == [e["loss"] for e in counted["epochs"]]
    assert "device" in counted["model_time"] and "device" not in plain["model_time"]
    assert "device_epoch_time_s" not in plain["summary"]
    assert all("device_s" not in e for e in plain["epochs"])
    assert plain["summary"]["modelled_epoch_time_s"] > 0


def test_count_ops_false_refuses_profiles_only_the_ledger_prices(graph_file, tmp_path,
                                                                 capsys):
    out = tmp_path / "r.json"
    assert main(["train", "--graph", graph_file, "--workers", "2", "--devices", "a100-80",
                 "--count-ops", "false", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--devices a100-80" in err[0] and "--count-ops false" in err[0]
    assert not out.exists()
    # CaPGNN Table 1 devices still scale the CPU-measured model without the ledger
    TrainConfig(graph=graph_file, dataset=None, workers=2, devices="x2",
                count_ops=False).validate()


def test_the_shipped_efficiency_file_loads():
    eff = load_efficiency()
    assert 0 < eff.dense_flop <= 1 and eff.source


# ------------------------------------------------------------------ CLI
def test_train_devices_records_the_device_model(graph_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["train", "--graph", graph_file, "--epochs", "3", "--warmup", "1",
                 "--hidden", "8", "--workers", "2", "--devices", "a100-80",
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rec = json.loads(out.read_text())
    validate_record(rec)
    dev = rec["model_time"]["device"]
    assert dev["profiles"] == ["a100-80", "a100-80"] and dev["default"] is False
    assert rec["summary"]["device_epoch_time_s"] == dev["epoch_s"] > 0
    assert printed["device_profile"] == "a100-80"
    # the CPU-measured model is still there, beside it, as measured (CaPGNN did not
    # measure an A100: no derived slowdown)
    assert rec["summary"]["modelled_epoch_time_s"] > 0 and rec["model_time"]["profile"]
    assert rec["model_time"]["slowdown"] == [1.0, 1.0]
    assert all(row["device_s"] > 0 for row in rec["epochs"])
    # each rank's counts carry its aggregation matrix's column locality, the curve the
    # SpMM pricing reads (cdfgnn.partition.locality)
    for rk in dev["inputs"]["ranks"]:
        for pat in rk["patterns"]:
            curve = pat["arc_share"]
            assert curve[0] == 1.0 and curve == sorted(curve, reverse=True)
    # a plain run names its default profile
    assert main(["train", "--graph", graph_file, "--epochs", "2", "--warmup", "1",
                 "--hidden", "8", "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])[
        "device_profile"] == "rtx3090 (default)"


def test_train_bad_devices_one_line_nothing_written(graph_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["train", "--graph", graph_file, "--epochs", "2", "--workers", "2",
                 "--devices", "h999", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "h999" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_compare_ranks_for_the_named_cluster(tmp_path, capsys):
    """An imported graph (timing only), priced on a100-80 and cdfgnn-table2."""
    rng = np.random.default_rng(0)
    edges = {(int(a), int(b)) for a, b in rng.integers(0, 120, (500, 2)) if a != b}
    (tmp_path / "e.txt").write_text("".join(f"{a} {b}\n" for a, b in sorted(edges)))
    g = tmp_path / "g.npz"
    assert main(["prepare", "--from", str(tmp_path / "e.txt"), "--format", "snap",
                 "--out", str(g)]) == 0
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", "--graph", str(g), "--workers", "2", "--hosts", "2",
                 "--devices", "a100-80", "--network", "cdfgnn-table2", "--epochs", "2",
                 "--hidden", "8", "--methods", "pipegcn", "--out-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Ranked on the device model: devices a100-80, network cdfgnn-table2." in text
    assert "| rank | method |" in text and "device_epoch_s" in text
    assert "winner by inter-host Gbit/s:" in text and "winner by device:" in text
    import pandas as pd
    sweep = pd.read_csv(out / "sweep.csv")
    assert set(sweep["sweep"]) == {"inter-host Gbit/s", "device"}
    assert set(sweep["winner"]) <= {"exact", "pipegcn"}
    with pytest.raises(CdfgnnError, match="unknown device profile 'h999'"):
        from cdfgnn.experiments.compare import compare
        compare(str(g), workers=2, hosts=1, network="cdfgnn-table2", devices="h999",
                out_dir=str(tmp_path / "o"))


# ------------------------------------------------------------------ float64 runs
def _profile_file(tmp_path, base: str, **figures) -> str:
    """A user profile file: ``base``'s figures with ``figures`` changed."""
    import yaml
    spec = {k: v for k, v in get_gpu(base).describe().items() if k != "name"}
    path = tmp_path / f"{base}-test.yaml"
    path.write_text(yaml.safe_dump({**spec, **figures}))
    return str(path)


@pytest.fixture(scope="module")
def dtype_runs(tmp_path_factory, make_graph):
    """The same exact run in float32 and float64, priced on an RTX 3090 (FP64 = 1/64 of
    FP32); wide enough (512 features, hidden 512) that float64's products dominate the
    epoch there."""
    path = tmp_path_factory.mktemp("wide-graph") / "graph.npz"
    make_graph(n=2000, features=512).save(path)
    kw = dict(hidden=512, epochs=2, warmup=1, devices="rtx3090", method="exact")
    return {dt: run_training(_cfg(str(path), dtype=dt, **kw)) for dt in ("float32", "float64")}


def _products(rec, rank: int = 0) -> dict[str, dict[str, int]]:
    """A rank's product kinds (both dtypes) in its first timed epoch."""
    totals = _rank_ledger(rec, rank).totals()
    return {k: v for k, v in totals.items() if k in (*FP64_KIND, *FP64_KIND.values())}


def test_float64_products_are_counted_apart(dtype_runs):
    """Same shapes, same FLOPs; float64 products as their FP64 kinds, float32 runs without
    them (a float32 ledger is what it was before FP64 kinds existed)."""
    p32, p64 = _products(dtype_runs["float32"]), _products(dtype_runs["float64"])
    assert set(p32) == {"dense", "spmm"} and set(p64) == {"dense_fp64", "spmm_fp64"}
    for kind, twin in FP64_KIND.items():
        assert p64[twin]["flops"] == p32[kind]["flops"] > 0
        assert p64[twin]["calls"] == p32[kind]["calls"]


def test_float64_run_priced_at_the_fp64_rate(dtype_runs, tmp_path):
    """On an RTX 3090 a float64 epoch costs its float32 epoch plus about the FP64 FLOP time
    of its products; on a card whose FP64 peaks equal its FP32 ones, only its wider bytes
    (at most 2x: the inputs of these SpMMs fit the L2 in both dtypes)."""
    r32, r64 = dtype_runs["float32"], dtype_runs["float64"]
    same = _profile_file(tmp_path, "rtx3090", fp64_tflops=35.6, fp64_tensor_tflops=35.6)
    s32, s64 = reprice(r32, devices=same)["epoch_s"], reprice(r64, devices=same)["epoch_s"]
    assert s32 < s64 <= 2 * s32
    e32, e64 = r32["model_time"]["device"]["epoch_s"], r64["model_time"]["device"]["epoch_s"]
    gpu, eff = get_gpu("rtx3090"), load_efficiency()
    flop_s = max(sum(f["flops"] / flop_rate(k, gpu, eff)
                     for k, f in _products(r64, rank).items())
                 for rank in range(2))
    assert flop_s <= e64 <= s64 + flop_s           # the compute-bound share, priced at FP64
    assert e64 > 0.9 * (s64 + flop_s)
    # the FP64 rate adds most of the products' FP64 FLOP time to what the bytes cost (on
    # the same-peak card, s64), which pricing them at the FP32 rate would not
    assert flop_s > 0.1 * s64 and e64 - s64 > 0.8 * flop_s
    # an A100 runs DGEMM on its FP64 tensor cores at the FP32 rate: bytes only, again
    a32, a64 = (reprice(r, devices="a100-80")["epoch_s"] for r in (r32, r64))
    assert a32 < a64 <= 2 * a32


def test_float32_pricing_never_reads_the_fp64_figures(dtype_runs, tmp_path):
    """A float32 record's device epoch is bit-identical whatever the card's FP64 figures."""
    r32 = dtype_runs["float32"]
    odd = _profile_file(tmp_path, "rtx3090", fp64_tflops=1e-3, fp64_tensor_tflops=1e-3)
    dev, again = r32["model_time"]["device"], reprice(r32, devices=odd)
    assert again["epochs_s"] == dev["epochs_s"] and again["compute_s"] == dev["compute_s"]


def test_reprice_of_a_float64_record_uses_fp64(dtype_runs):
    """reprice prices float64 counts at FP64, also those of a record made before products
    carried their dtype (dense / spmm kinds, config dtype float64)."""
    r64 = copy.deepcopy(dtype_runs["float64"])
    recorded = r64["model_time"]["device"]["epoch_s"]
    assert reprice(r64)["epoch_s"] == recorded
    assert reprice(r64, devices="a100-80")["epoch_s"] < recorded
    back = {v: k for k, v in FP64_KIND.items()}
    for rk in r64["model_time"]["device"]["inputs"]["ranks"]:
        for pat in rk["patterns"]:
            pat["ledger"] = {ph: {back.get(k, k): f for k, f in kinds.items()}
                             for ph, kinds in pat["ledger"].items()}
    assert reprice(r64)["epoch_s"] == recorded


def test_train_profile_file_without_fp64_is_one_line(graph_file, tmp_path, capsys):
    import yaml
    spec = {k: v for k, v in get_gpu("t4").describe().items()
            if k not in ("name", "fp64_tflops")}
    bad = tmp_path / "old-gpu.yaml"
    bad.write_text(yaml.safe_dump(spec))
    out = tmp_path / "r.json"
    code = main(["train", "--graph", graph_file, "--epochs", "2", "--workers", "2",
                 "--devices", str(bad), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and not out.exists()
    assert "old-gpu.yaml" in err and "fp64_tflops" in err
