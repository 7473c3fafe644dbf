"""The one device model (cdfgnn/pricing): card names, interconnect texts, the network
rules of a cluster (link efficiency per backend, NIC sharing, staging), GAT counts, and
that a run is priced once on one resolved cluster."""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.comm.network import get_profile
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology
from cdfgnn.pricing.cluster import Cluster, effective_link, resolve_cluster
from cdfgnn.pricing.efficiency import FIT_BOUNDS, Efficiency, load_efficiency
from cdfgnn.pricing.hardware import card_profile, get_gpu, parse_gpus
from cdfgnn.pricing.interconnect import link_profile, parse_interconnect, with_host_link
from cdfgnn.pricing.roofline import host_copy_rate

EFF = Efficiency(dense_flop=0.5, use_tf32=False, stream_bw=0.5, spmm_bw=0.5, spmm_reuse=0.0,
                 l2_bw=2.0, launch=1.0, host_copy_bw=0.5, link_gloo=0.25, link_nccl=0.8)


# ------------------------------------------------------------------ card names
def test_t4_is_the_tesla_t4_and_capgnn_labels_still_work():
    """``--devices t4`` used to price CaPGNN's T4 label, an A40."""
    assert get_gpu("t4").label == "Tesla T4" and get_gpu("T4").name == "t4"
    assert [g.name for g in parse_gpus("t4", 2)] == ["t4", "t4"]
    assert get_gpu("capgnn:T4").name == "a40"
    assert [g.name for g in parse_gpus("r9,R6,capgnn:t4", 3)] == ["rtx3090", "rtx3060", "a40"]
    assert [g.name for g in parse_gpus("x4", 4)] == ["rtx3090", "rtx3090", "a40", "a40"]
    with pytest.raises(CdfgnnError, match="unknown CaPGNN label"):
        get_gpu("capgnn:Z9")


def test_capgnn_device_profiles_follow_the_same_names():
    from cdfgnn.pricing.devices import get_device
    assert get_device("capgnn:T4").name == "a40" and get_device("r9").name == "rtx3090"
    t4 = get_device("t4")                    # not measured by CaPGNN: derived from the card
    assert t4.name == "t4" and t4.source.startswith("derived")


@pytest.mark.parametrize("text, name", [("RTX 3090", "rtx3090"), ("V100-32GB", "v100"),
                                        ("Tesla V100-SXM2-16GB", "v100"), ("H200", "h200"),
                                        ("GTX 1660 Ti", "gtx1660ti"), ("A100 80GB", "a100-80"),
                                        ("RTX 2060 SUPER", "rtx2060-super"),
                                        ("RTX 2080 Ti", "rtx2080ti"), ("Tesla T4", "t4"),
                                        # the product line dropped, as papers often write
                                        ("A6000", "rtx-a6000"), ("2080Ti", "rtx2080ti"),
                                        ("1080 Ti", "gtx1080ti"), ("NVIDIA A10", "a10"),
                                        ("TITAN Xp", "titan-xp"), ("Tesla P40", "p40")])
def test_cards_as_papers_write_them(text, name):
    assert card_profile(text).name == name


def test_unknown_or_ambiguous_card_is_one_line():
    with pytest.raises(CdfgnnError, match="ambiguous: a100-40, a100-80"):
        card_profile("A100")
    with pytest.raises(CdfgnnError, match="no profile"):
        card_profile("Voodoo 5")
    # a card whose name starts another's is not ambiguous with it (the A10 is not an
    # A100: it used to be refused as "ambiguous: a100-40, a100-80"); L40 is not the L40S
    with pytest.raises(CdfgnnError, match="no profile"):
        card_profile("L40")


def test_every_profile_is_self_consistent():
    """FP64 at most FP32, TF32 at least FP32, and a source for every group of figures."""
    from cdfgnn.pricing.hardware import registered
    for name, gpu in registered().items():
        assert 0 < gpu.fp64_tflops <= gpu.fp64_tensor_tflops <= gpu.tf32_tflops, name
        assert gpu.fp32_tflops <= gpu.tf32_tflops, name
        assert gpu.mem_bw_gbps > 0 and gpu.l2_mb > 0 and gpu.host_link_gbps > 0, name
        assert {"compute", "memory", "l2", "host_link", "peer_link"} <= set(gpu.sources), name


# ------------------------------------------------------------------ interconnects
@pytest.mark.parametrize("text, intra, gen, lanes, inter, gbit", [
    ("PCIe 3.0", "pcie", 3, 16, None, None),
    ("PCIe 4.0 + 10 Gbps Ethernet (assumed)", "pcie", 4, 16, "ethernet", 10.0),
    ("PCIe 3.0 x8, 10GbE", "pcie", 3, 8, "ethernet", 10.0),
    ("NVLink", "nvlink", None, 16, None, None),
    ("25 Gbps Ethernet", None, None, 16, "ethernet", 25.0),
    ("100 Gb/s InfiniBand EDR", None, None, 16, "infiniband", 100.0),
    ("PCIe 4.0 + NVLink + InfiniBand HDR", "nvlink", 4, 16, "infiniband", 200.0),
    ("NVLink 3 / 200 Gbit/s InfiniBand", "nvlink", None, 16, "infiniband", 200.0),
    ("none", None, None, 16, None, None),
])
def test_interconnect_texts(text, intra, gen, lanes, inter, gbit):
    ic = parse_interconnect(text)
    assert (ic.intra, ic.pcie_gen, ic.pcie_lanes, ic.inter, ic.inter_gbit) == (
        intra, gen, lanes, inter, gbit)


@pytest.mark.parametrize("text, why", [("Ethernet", "without a speed"),
                                       ("InfiniBand", "without a speed"),
                                       ("PCIe 9.0", "generation"),
                                       ("carrier pigeon", "cannot read"),
                                       ("10 GbE + 100 Gb/s InfiniBand", "two networks")])
def test_unreadable_interconnects_are_refused(text, why):
    with pytest.raises(CdfgnnError, match=why):
        parse_interconnect(text)


def test_link_profile_of_a_written_interconnect():
    rtx, t4 = get_gpu("rtx3090"), get_gpu("t4")
    topo = Topology(2, 4)
    ic = parse_interconnect("PCIe 3.0 + 25 Gbps Ethernet")
    gloo = link_profile(ic, "gloo", rtx, topo)
    assert gloo.host_staged and gloo.inter_gbps == 3.125 and gloo.intra_gbps == 15.75
    assert not link_profile(ic, "nccl", rtx, topo).host_staged
    assert with_host_link(rtx, ic).host_link_gbps == 15.75
    nv = link_profile(parse_interconnect("NVLink"), "nccl", rtx, Topology(1, 2))
    assert nv.intra_gbps == rtx.peer_link_gbps
    with pytest.raises(CdfgnnError, match="no NVLink"):
        link_profile(parse_interconnect("NVLink"), "nccl", t4, Topology(1, 2))
    with pytest.raises(CdfgnnError, match="no network between the 2 servers"):
        link_profile(parse_interconnect("PCIe 4.0"), "nccl", rtx, topo)
    # one GPU per host: every pair crosses the network
    solo = link_profile(parse_interconnect("100 Gb/s InfiniBand EDR"), "nccl", rtx,
                        Topology(4, 1))
    assert solo.inter_gbps == 12.5


# ------------------------------------------------------------------ cluster rules
def test_link_efficiency_per_backend_and_nic_sharing():
    nominal = get_profile("ethernet-10g")            # nccl: device to device
    eff = effective_link(nominal, EFF, devices_per_host=4)
    assert eff.intra_gbps == pytest.approx(nominal.intra_gbps * 0.8)
    assert eff.inter_gbps == pytest.approx(nominal.inter_gbps * 0.8 / 4)
    staged = effective_link(get_profile("pcie4-host-staged"), EFF, 1)
    assert staged.inter_gbps == pytest.approx(1.25 * 0.25)
    measured = effective_link(get_profile("cdfgnn-table2"), EFF, 2)   # sustained rates
    assert measured.intra_gbps == 22.70 and measured.inter_gbps == pytest.approx(8.27 / 2)


def test_staging_copies_on_gloo_only():
    gpus = (get_gpu("rtx3090"),) * 4
    topo = Topology(2, 2)
    sent = np.array([0.0, 1e9, 2e9, 0.0])            # rank 0: 1 GB to its host, 2 GB away
    staged = Cluster(gpus, get_profile("pcie4-host-staged"), topo, EFF)
    # per byte: the host link's copy rate, shared by the host's 2 ranks
    copy = 2.0 / (host_copy_rate(gpus[0], EFF) * EFF.link_gloo)
    link = staged.effective_link
    expect = (3e9 * copy + 0.5e9 * copy                        # D2H of 3 GB, H2D of 0.5 GB
              + 2e9 / (link.inter_gbps * 1e9) + link.inter_latency_s)  # only off-host bytes
    assert staged.send_seconds(0, sent, [0, 1, 1, 0], 0.5e9) == pytest.approx(expect)
    direct = Cluster(gpus, get_profile("ethernet-10g"), topo, EFF)
    net = direct.effective_link
    assert direct.send_seconds(0, sent, [0, 1, 1, 0], 0.5e9) == pytest.approx(
        1e9 / (net.intra_gbps * 1e9) + 2e9 / (net.inter_gbps * 1e9)
        + net.intra_latency_s + net.inter_latency_s)


def test_staging_copies_share_the_host_link_between_its_ranks():
    """A gloo rank's D2H/H2D copies run at the host link's rate / its host's ranks: the
    same bytes cost 4x on one host of 4 ranks what they cost with one rank per host."""
    gpus = (get_gpu("rtx3090"),) * 4
    link = get_profile("pcie4-host-staged")
    one_host = Cluster(gpus, link, Topology(1, 4), EFF)
    four_hosts = Cluster(gpus, link, Topology(4, 1), EFF)
    assert one_host.copy_seconds(0, 1e9) == pytest.approx(4 * four_hosts.copy_seconds(0, 1e9))
    assert four_hosts.copy_seconds(0, 1e9) == pytest.approx(
        1e9 / (host_copy_rate(gpus[0], EFF) * EFF.link_gloo))


def test_an_exchange_pays_a_fixed_cost_per_message_sent_per_backend():
    """exchange_seconds = send_seconds + (messages to the other ranks) x msg_<backend>_us;
    the rank's own entry is no message; zero constants give send_seconds."""
    gpus = (get_gpu("rtx3090"),) * 4
    topo = Topology(2, 2)
    sent, msgs = np.array([0.0, 1e6, 2e6, 0.0]), [5, 1, 3, 0]
    eff = EFF.but(msg_gloo_us=1000.0, msg_nccl_us=10.0)
    for name, per in (("pcie4-host-staged", 1e-3), ("ethernet-10g", 1e-5)):
        c = Cluster(gpus, get_profile(name), topo, eff)
        base = c.send_seconds(0, sent, msgs, 1e6)
        assert c.exchange_seconds(0, sent, msgs, 1e6) == pytest.approx(base + 4 * per)
        plain = Cluster(gpus, get_profile(name), topo, EFF)
        assert plain.exchange_seconds(0, sent, msgs, 1e6) == pytest.approx(base)
    with pytest.raises(CdfgnnError, match="backend"):
        eff.message_seconds("mpi")


def test_the_message_cost_is_charged_to_halo_exchanges_only():
    """The device epoch charges the fixed message cost to the vertex exchange, not to the
    gradient all-reduce (one collective call)."""
    from cdfgnn.pricing.epoch import compact, device_model
    topo = Topology(1, 2)
    gpus = (get_gpu("rtx3090"),) * 2
    item = lambda r: {"ledger": {}, "vertex_bytes": [0, 1e6] if r == 0 else [1e6, 0],  # noqa: E731
                      "vertex_msgs": [0, 4] if r == 0 else [4, 0],
                      "other_bytes": [0, 1e6] if r == 0 else [1e6, 0],
                      "other_msgs": [0, 2] if r == 0 else [2, 0], "overlap": False}
    inputs = compact([[item(0), item(1)]], [0])
    link = get_profile("pcie4-host-staged")
    base = device_model(inputs, Cluster(gpus, link, topo, EFF))
    more = device_model(inputs, Cluster(gpus, link, topo, EFF.but(msg_gloo_us=500.0)))
    assert more["vertex_s"][0] == pytest.approx(base["vertex_s"][0] + 4 * 500e-6)
    assert more["reduce_s"] == pytest.approx(base["reduce_s"])
    assert more["epoch_s"] == pytest.approx(base["epoch_s"] + 4 * 500e-6)


def test_shipped_constants_carry_the_network_efficiency_and_bounds_are_physical():
    eff = load_efficiency()
    assert 0 < eff.link_gloo <= 1 and 0 < eff.link_nccl <= 1
    assert FIT_BOUNDS["dense_flop"][1] <= 0.8
    assert all(FIT_BOUNDS[k][1] <= 1.0 for k in ("stream_bw", "spmm_bw", "host_copy_bw",
                                                  "link_gloo", "link_nccl"))
    # a gloo message at most what the exchange path costs (benchmarks/gloo_message.py)
    assert FIT_BOUNDS["msg_gloo_us"][1] <= 1000.0
    assert eff == eff.within_bounds()        # the shipped constants are a fit's, in bounds


def test_a_run_is_priced_once_on_one_cluster(tmp_path, make_graph, monkeypatch):
    """cdfgnn train resolves the cluster once and prices every epoch in one call; the
    record's device epoch is what reprice gives for the kept counts."""
    from cdfgnn.pricing import record
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training
    path = tmp_path / "g.npz"
    make_graph(n=300, seed=1).save(path)
    calls = []
    resolve = record.resolve_cluster

    def counted(*a, **k):
        calls.append(a)
        return resolve(*a, **k)
    monkeypatch.setattr(record, "resolve_cluster", counted)
    rec = run_training(TrainConfig(graph=str(path), dataset=None, epochs=3, warmup=1,
                                   hidden=8, workers=2, hosts=2, backend="thread",
                                   devices="t4", network="pcie4-host-staged"))
    assert len(calls) == 1
    dev = rec["model_time"]["device"]
    assert dev["profiles"] == ["t4", "t4"] and len(dev["epochs_s"]) == 2
    assert [e["device_s"] for e in rec["epochs"]][1:] == dev["epochs_s"]
    again = record.reprice(rec)
    assert again["epoch_s"] == pytest.approx(dev["epoch_s"], rel=1e-12)


# ------------------------------------------------------------------ GAT counts
def test_gat_counts_scale_with_heads_and_exchange_projected_rows():
    from cdfgnn.pricing.estimate import ModelShape, RankShape, estimate_ledger, halo_traffic
    rank = RankShape(out_rows=1000, in_rows=1200, nnz=20000, self_rows=1000, label_rows=500,
                     send_rows=150, recv_rows=200)
    one = ModelShape("gat", 100, 16, 7, 2, heads=1)
    four = ModelShape("gat", 100, 16, 7, 2, heads=4)
    s1, s4 = (estimate_ledger(m, rank).totals()["spmm"] for m in (one, four))
    assert s4["flops"] > 3 * s1["flops"]
    assert [four.message_width(i) for i in (0, 1)] == [64, 28]        # heads x width
    assert four.param_count() > one.param_count()
    concat = ModelShape("gat", 100, 8, 7, 2, heads=8, concat_heads=True)
    assert concat.dims == [(100, 64), (64, 7)] and concat.layer_heads(1) == 1
    halo = np.array([[0, 10], [20, 0]])
    b, m = halo_traffic(four, halo, 0)
    # layer 0 (projected): 20 rows peer 1 needs + gradients of the 10 received, 64 wide;
    # layer 1 the same at 4 x 7 = 28
    assert b[1] == (20 + 10) * 64 * 4 + (20 + 10) * 28 * 4 and m[1] == 4


def test_a_quantised_wire_packs_rows_adds_metadata_messages_and_codec_kernels():
    from cdfgnn.errors import CdfgnnError
    from cdfgnn.pricing.epoch import COMM_SIDE
    from cdfgnn.pricing.estimate import (EXACT_WIRE, ModelShape, RankShape, Wire,
                                         estimate_ledger, halo_traffic)
    model = ModelShape("sage", 64, 20, 7, 2, order="aggregate-first", exchange="input")
    rank = RankShape(out_rows=1000, in_rows=1200, nnz=20000, self_rows=1000, label_rows=500,
                     send_rows=150, recv_rows=200)
    halo = np.array([[0, 10], [20, 0]])
    b32, m32 = halo_traffic(model, halo, 0)
    assert all(np.array_equal(x, y) for x, y in zip((b32, m32),
                                                    halo_traffic(model, halo, 0, EXACT_WIRE)))
    # layer 0: the 20 rows peer 1 needs, 64 wide; layer 1: 20 rows + 10 gradients, 20 wide
    assert b32[1] == 20 * 64 * 4 + 30 * 20 * 4 and m32[1] == 3
    sylvie = Wire("stochastic-1", messages=3)   # Sylvie: codes, scales, minima
    b1, m1 = halo_traffic(model, halo, 0, sylvie)
    assert b1[1] == 20 * (8 + 4) + 30 * (3 + 4) and m1[1] == 3 * m32[1]
    assert Wire("fp16").row_bytes(20) == 40 and Wire("linear-8").row_bytes(20) == 28
    exact, lossy = estimate_ledger(model, rank), estimate_ledger(model, rank, sylvie)
    assert "codec" not in exact.phases and "codec" in COMM_SIDE
    codec = lossy.get("codec", "codec")
    # layer 0 forward only (its input needs no gradient), layer 1 forward and backward;
    # per direction: 2 float32 reads of the rows sent, the packed write, the packed read
    # of the rows received and their float32 write
    def direction(send, recv, w, packed):
        return 2 * 4 * send * w + send * packed + recv * packed + 4 * recv * w
    assert codec["bytes"] == (direction(150, 200, 64, 12) + direction(150, 200, 20, 7)
                              + direction(200, 150, 20, 7))
    for bad in (dict(codec="stochastic-3"), dict(codec="stochastic-1", messages=0)):
        with pytest.raises(CdfgnnError, match="wire|codec"):
            Wire(**bad)


def test_use_pp_and_linear_layers_exchange_nothing():
    from cdfgnn.pricing.estimate import ModelShape
    sylvie = ModelShape("sage", 602, 256, 41, 4, order="aggregate-first", exchange="input",
                        static_first=True, linear=2)
    assert [sylvie.message_width(i) for i in range(4)] == [0, 256, 0, 0]
    assert sylvie.sync_backward(1) and not sylvie.syncs(0)
    dgl = ModelShape("gcn", 16, 256, 41, 2, order="narrower-first", exchange="input")
    assert not dgl.transforms_first(0) and dgl.transforms_first(1)     # W first if narrower
    assert [dgl.message_width(i) for i in (0, 1)] == [16, 256]         # inputs cross
    assert not dgl.sync_backward(0) and dgl.sync_backward(1)
