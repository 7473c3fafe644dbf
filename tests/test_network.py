"""NetworkModel: hand-computed costs for tiny cases, profiles, validation."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.comm import GB, NETWORK_PROFILES, CommStats, LinkProfile, NetworkModel
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology


def test_default_profile_is_cdfgnn_table2():
    prof = NetworkModel(Topology(2, 2)).profile
    assert prof.name == "cdfgnn-table2"
    assert (prof.intra_gbps, prof.inter_gbps) == (22.70, 8.27)
    assert (prof.intra_bcast_gbps, prof.inter_bcast_gbps) == (19.47, 11.98)
    assert (prof.intra_latency_s, prof.inter_latency_s) == (5e-6, 10e-6)
    assert GB == 1e9
    assert {"cdfgnn-table2", "ethernet-10g", "nvlink"} <= set(NETWORK_PROFILES.names())


def test_comm_seconds_by_hand_2x2():
    """Rank 0 of h2x2: rank 1 is on its host (PCIe), ranks 2 and 3 are not (InfiniBand)."""
    m = NetworkModel(Topology(2, 2))
    bytes_to = np.array([999_999, 2270, 827, 1654])  # the self entry is free
    msgs_to = np.array([7, 1, 1, 3])
    want = (1 * 5e-6 + 2270 / 22.70e9) + (1 * 10e-6 + 827 / 8.27e9) + (3 * 10e-6 + 1654 / 8.27e9)
    assert want == pytest.approx(5.1e-6 + 10.1e-6 + 30.2e-6, rel=1e-12)
    assert m.comm_seconds(0, bytes_to, msgs_to) == pytest.approx(want, rel=1e-12)
    # Rank 3 sees ranks 0, 1 across hosts and rank 2 on its host.
    assert m.comm_seconds(3, [827, 0, 2270, 5], [1, 0, 1, 9]) == pytest.approx(
        10e-6 + 1e-7 + 5e-6 + 1e-7, rel=1e-12)
    # Broadcast uses the broadcast bandwidths.
    assert m.comm_seconds(0, [0, 1947, 1198, 0], [0, 1, 1, 0], pattern="broadcast") == pytest.approx(
        5e-6 + 1e-7 + 10e-6 + 1e-7, rel=1e-12)


def test_single_host_is_all_intra():
    m = NetworkModel(Topology(1, 3), profile="ethernet-10g")
    assert m.comm_seconds(1, [2270, 0, 2270], [1, 0, 1]) == pytest.approx(2 * (5e-6 + 1e-7))
    m2 = NetworkModel(Topology(3, 1), profile="ethernet-10g")
    assert m2.comm_seconds(1, [125, 0, 0], [1, 0, 0]) == pytest.approx(50e-6 + 125 / 1.25e9)


def test_epoch_seconds_with_slowdown_and_overlap():
    m = NetworkModel(Topology(2, 2), slowdown=[1.0, 2.0, 1.0, 1.5])
    compute, comm = [1.0, 1.0, 1.0, 1.0], [0.5, 0.1, 0.2, 0.3]
    assert m.epoch_seconds(compute, comm) == pytest.approx(2.1)          # rank 1: 1*2 + 0.1
    assert m.epoch_seconds(compute, comm, overlap=True) == pytest.approx(2.0)
    m1 = NetworkModel(Topology(1, 2))
    assert m1.epoch_seconds([1.0, 0.2], [0.1, 3.0], overlap=True) == pytest.approx(3.0)
    assert m1.epoch_seconds([1.0, 0.2], [0.1, 3.0]) == pytest.approx(3.2)


def test_from_stats_filters_by_prefix():
    topo = Topology(2, 1)
    stats = [CommStats(2), CommStats(2)]
    stats[0].add("halo/fwd/0", 1, 827, 1)
    stats[0].add("grad_allreduce", 1, 8270, 2)
    stats[1].add("halo/bwd/0", 0, 1654, 2)
    m = NetworkModel(topo)
    assert m.from_stats(stats, prefix="halo/") == pytest.approx([10e-6 + 1e-7, 20e-6 + 2e-7])
    assert m.from_stats(stats)[0] == pytest.approx(30e-6 + 11e-7)


def test_custom_profile_and_describe():
    prof = LinkProfile("toy", 1.0, 0.5, 1.0, 0.5, 0.0, 1.0)
    m = NetworkModel(Topology(2, 1), profile=prof, slowdown=[1, 3])
    assert m.comm_seconds(0, [0, 1e9], [0, 2]) == pytest.approx(2.0 + 2.0)
    d = m.describe()
    assert d["name"] == "toy" and d["slowdown"] == [1.0, 3.0] and d["topology"] == "h2x1"


@settings(max_examples=50, deadline=None)
@given(hosts=st.integers(1, 3), dph=st.integers(1, 3), data=st.data())
def test_comm_seconds_is_linear_and_monotone(hosts, dph, data):
    topo = Topology(hosts, dph)
    p = topo.num_parts
    m = NetworkModel(topo)
    rank = data.draw(st.integers(0, p - 1))
    b = np.array(data.draw(st.lists(st.integers(0, 10**9), min_size=p, max_size=p)))
    k = np.array(data.draw(st.lists(st.integers(0, 100), min_size=p, max_size=p)))
    one = m.comm_seconds(rank, b, k)
    assert m.comm_seconds(rank, 2 * b, 2 * k) == pytest.approx(2 * one, rel=1e-9, abs=1e-15)
    # The same traffic costs at least as much over inter-host links as intra-host ones.
    slowest = sum(k[d] * 10e-6 + b[d] / 8.27e9 for d in range(p) if d != rank)
    fastest = sum(k[d] * 5e-6 + b[d] / 22.70e9 for d in range(p) if d != rank)
    assert fastest * (1 - 1e-12) <= one <= slowest * (1 + 1e-12)


def test_bad_input_is_named():
    topo = Topology(2, 2)
    with pytest.raises(CdfgnnError, match="unknown network profile 'infiniband'"):
        NetworkModel(topo, profile="infiniband")
    with pytest.raises(CdfgnnError, match="slowdown has 3 factors"):
        NetworkModel(topo, slowdown=[1, 1, 1])
    with pytest.raises(CdfgnnError, match="slowdown factors"):
        NetworkModel(topo, slowdown=[1, 1, 0, 1])
    m = NetworkModel(topo)
    with pytest.raises(CdfgnnError, match="bytes_to"):
        m.comm_seconds(0, [1, 2], [1, 1, 1, 1])
    with pytest.raises(CdfgnnError, match="msgs_to"):
        m.comm_seconds(0, [1, 2, 3, 4], [1, -1, 1, 1])
    with pytest.raises(CdfgnnError, match="rank"):
        m.comm_seconds(4, [0] * 4, [0] * 4)
    with pytest.raises(CdfgnnError, match="pattern"):
        m.comm_seconds(0, [0] * 4, [0] * 4, pattern="gather")
    with pytest.raises(CdfgnnError, match="comm_s"):
        m.epoch_seconds([1] * 4, [1] * 3)
    with pytest.raises(CdfgnnError, match="from_stats needs 4"):
        m.from_stats([CommStats(4)])
    with pytest.raises(CdfgnnError, match="inter_gbps"):
        LinkProfile("bad", 1.0, 0.0, 1.0, 1.0, 0.0, 0.0)
