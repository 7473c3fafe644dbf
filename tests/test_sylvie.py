"""Sylvie-S / Sylvie-A and the re-implemented peers PipeGCN and BNS-GCN: degenerate
settings equal ``exact``, the stale buffer of bounded staleness, the byte accounting
of 1-bit messages, and one-line errors for bad parameters (thread backend, small graph)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import RankContext, SyncKey, build_strategy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def _cfg(**kw):
    base = dict(dataset=None, epochs=5, warmup=1, hidden=16, workers=4, hosts=2,
                partitioner="metis", timeout_s=60, dropout=0.0)
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def exact(graph_file):
    return run_training(_cfg(graph=graph_file))


def _losses(rec):
    return np.array([e["loss"] for e in rec["epochs"]])


def _run(graph_file, method, **params):
    return run_training(_cfg(graph=graph_file, method=method, method_params=params))


# ------------------------------------------------------------ degenerate settings
# The declared settings (Degenerate on each class) equal the oracle: tests/test_degenerate.py.
@pytest.mark.parametrize("method,params", [
    ("sylvie-s", {"bits": 32}),
    ("sylvie-a", {"bits": 32, "staleness_bound": 1}),
    ("bns-gcn", {"rate": 1.0}),
])
def test_degenerate_settings_send_what_exact_sends(graph_file, exact, method, params):
    rec = _run(graph_file, method, **params)
    assert rec["comm"]["per_epoch"]["rows_sent"] == exact["comm"]["per_epoch"]["rows_sent"]


def test_full_precision_quantize_all_equals_exact(graph_file, exact):
    rec = _run(graph_file, "sylvie-s", bits=32, quantize_all=True)
    np.testing.assert_allclose(_losses(rec), _losses(exact), atol=1e-5)
    assert rec["epochs"][-1]["test"] == pytest.approx(exact["epochs"][-1]["test"], abs=1e-6)
    assert rec["comm"]["per_epoch"]["rows_sent"] == exact["comm"]["per_epoch"]["rows_sent"]


def test_bound_one_is_sylvie_s_at_one_bit(graph_file):
    """k = 1 makes every epoch synchronous: the same messages (same noise) as Sylvie-S."""
    s = _run(graph_file, "sylvie-s", bits=1)
    a = _run(graph_file, "sylvie-a", bits=1, staleness_bound=1)
    np.testing.assert_allclose(_losses(a), _losses(s), atol=1e-6)
    assert not a["model_time"]["overlap"]


def test_one_bit_is_close_to_exact_but_not_equal(graph_file, exact):
    rec = _run(graph_file, "sylvie-s")
    diff = np.abs(_losses(rec) - _losses(exact))
    assert diff.max() > 1e-5          # the codec is really applied
    assert diff.max() < 0.05          # and unbiased enough to train alike
    quant_all = _run(graph_file, "sylvie-s", quantize_all=True)
    assert np.abs(_losses(quant_all) - _losses(rec)).max() > 1e-5


# ------------------------------------------------------------ staleness
class _Loopback:
    """A one-rank communicator that delivers what it is given (no accounting)."""

    rank, world_size = 0, 1

    def all_to_all(self, tensors, tag="", rows=None):
        return list(tensors)


def test_bounded_staleness_consumes_the_latest_rows():
    """k = 2: epochs 1, 3, ... are synchronous; a stale epoch after a synchronous one
    consumes the rows sent in the synchronous epoch, not older ones."""
    strat = build_strategy("sylvie-a", {"bits": 32, "staleness_bound": 2})
    strat.setup(RankContext(_Loopback(), book=None, graph=None))
    key = SyncKey(1, "fwd", "halo", True, 2)
    got = []
    for epoch in range(5):
        strat.on_epoch_start(epoch)
        got.append(strat.send(key, [torch.full((3, 2), float(epoch + 1))])[0][0, 0].item())
    # epoch 0 stale: zeros; 1 sync: fresh; 2 stale: epoch 1's; 3 sync; 4 stale: epoch 3's
    assert got == [0.0, 2.0, 2.0, 4.0, 4.0]
    assert [strat.overlaps(e) for e in range(5)] == [True, False, True, False, True]
    warm = build_strategy("sylvie-a", {"warm_start": True})
    assert not warm.overlaps(0) and warm.overlaps(1) and warm.overlaps(7)


def test_sylvie_a_and_pipegcn_are_stale_and_overlapped(graph_file, exact):
    for method, params in (("sylvie-a", {"bits": 32}), ("pipegcn", {})):
        rec = _run(graph_file, method, **params)
        assert np.abs(_losses(rec) - _losses(exact)).max() > 1e-4
        assert rec["model_time"]["overlap"]
        assert rec["comm"]["per_epoch"]["rows_sent"] == exact["comm"]["per_epoch"]["rows_sent"]
    # fp32 Sylvie-A is PipeGCN without smoothing: the same stale rows
    np.testing.assert_allclose(_losses(_run(graph_file, "sylvie-a", bits=32)),
                               _losses(_run(graph_file, "pipegcn")), atol=1e-6)


def test_pipegcn_smoothing(graph_file):
    plain = _run(graph_file, "pipegcn")
    zero = _run(graph_file, "pipegcn", smoothing="both", gamma=0.0)
    np.testing.assert_allclose(_losses(zero), _losses(plain), atol=1e-6)
    smooth = _run(graph_file, "pipegcn", smoothing="features", gamma=0.9)
    assert np.abs(_losses(smooth) - _losses(plain)).max() > 1e-5


def test_pipegcn_smoothing_averages_the_buffer():
    strat = build_strategy("pipegcn", {"smoothing": "gradients", "gamma": 0.5})
    strat.setup(RankContext(_Loopback(), book=None, graph=None))
    fwd, bwd = SyncKey(0, "fwd", "halo", True, 1), SyncKey(0, "bwd", "halo", True, 1)
    seen = {"fwd": [], "bwd": []}
    for epoch, v in enumerate([2.0, 4.0, 8.0]):
        strat.on_epoch_start(epoch)
        for key in (fwd, bwd):
            seen[key.direction].append(strat.send(key, [torch.tensor([[v]])])[0].item())
    assert seen["fwd"] == [0.0, 2.0, 4.0]              # features: unsmoothed
    assert seen["bwd"] == [0.0, 2.0, 0.5 * 2.0 + 0.5 * 4.0]


# ------------------------------------------------------------ BNS-GCN
def test_bns_gcn_sends_a_sample_of_boundary_rows(graph_file, exact):
    rec = _run(graph_file, "bns-gcn", rate=0.3)
    full = exact["comm"]["per_epoch"]["rows_sent"]
    sent = rec["comm"]["per_epoch"]["rows_sent"]
    assert 0.15 * full < sent < 0.45 * full
    assert np.abs(_losses(rec) - _losses(exact)).max() > 1e-4
    # owner and receiver agree on the sample: the forward rows sent equal those received,
    # so every epoch's rows are the same forward and backward
    for e in rec["comm"]["epochs"]:
        fwd = sum(v for k, v in e["rows"].items() if k.startswith("halo/fwd"))
        bwd = sum(v for k, v in e["rows"].items() if k.startswith("halo/bwd"))
        assert fwd == bwd
    unscaled = _run(graph_file, "bns-gcn", rate=0.3, scaling="none")
    assert unscaled["comm"]["per_epoch"]["rows_sent"] == sent
    assert np.abs(_losses(unscaled) - _losses(rec)).max() > 1e-5


def test_bns_gcn_with_a_codec(graph_file):
    """Sampling and a codec combine: the codec decodes by the sampled row counts."""
    rec = _run(graph_file, "bns-gcn", rate=0.5, codec="stochastic-2")
    assert np.isfinite(_losses(rec)).all()


# ------------------------------------------------------------ byte accounting
@pytest.fixture(scope="module")
def hidden128(graph_file, tmp_path_factory):
    """exact and 1-bit Sylvie-S at hidden width 128 (3 layers, 2 epochs), saved as records."""
    folder = tmp_path_factory.mktemp("runs")
    recs = {}
    for method in ("exact", "sylvie-s"):
        recs[method] = run_training(_cfg(graph=graph_file, hidden=128, layers=3, epochs=2,
                                         warmup=0, method=method,
                                         out=str(folder / f"{method}.json")))
    return folder, recs


def test_one_bit_volume_is_at_most_a_25th_of_fp32(hidden128):
    """Hidden width 128: 16 bytes of bits + 4 bytes of fp16 min/scale per row vs 512."""
    _, recs = hidden128
    ref, one = recs["exact"], recs["sylvie-s"]
    tags = [t for t in ref["comm"]["by_tag"] if t.startswith("halo/") and not t.endswith("/2")]
    assert len(tags) == 4  # layers 0 and 1, forward and backward: width 128
    b32 = sum(ref["comm"]["by_tag"][t]["bytes"] for t in tags)
    b1 = sum(one["comm"]["by_tag"][t]["bytes"] for t in tags)
    rows = sum(one["comm"]["by_tag"][t]["rows"] for t in tags)
    assert b1 == pytest.approx(rows * (128 // 8 + 4))
    assert b32 == pytest.approx(rows * 4 * 128)
    assert b1 <= b32 / 25


def test_sylvie_tables_read_the_byte_accounting(hidden128, tmp_path):
    """Table 3 splits main data and metadata as the codec lays them out; the claims
    table gives a verdict for every claim it can measure from these two runs."""
    import pandas as pd

    from cdfgnn.report.registry import run_report

    folder, recs = hidden128
    run_report("sylvie-table3", str(tmp_path / "t3.csv"), runs=[str(folder)],
               md_out=str(tmp_path / "t3.md"))
    t3 = pd.read_csv(tmp_path / "t3.csv").set_index("system")
    rows = sum(d["rows"] for t, d in recs["sylvie-s"]["comm"]["by_tag"].items()
               if t.startswith("halo/"))
    assert t3.loc["Sylvie-S", "meta_mib"] == pytest.approx(rows * 4 / 2 ** 20)
    assert t3.loc["exact", "meta_mib"] == 0
    total = sum(d["bytes"] for t, d in recs["exact"]["comm"]["by_tag"].items()
                if t.startswith("halo/"))
    assert t3.loc["exact", "total_mib"] == pytest.approx(total / 2 ** 20)
    assert t3.loc["Sylvie-S", "exact_over_system_volume"] > 10
    run_report("sylvie-table2", str(tmp_path / "t2.csv"), runs=[str(folder)],
               md_out=str(tmp_path / "t2.md"))
    t2 = pd.read_csv(tmp_path / "t2.csv").set_index("system")
    assert t2.loc["exact", "throughput_vs_exact"] == pytest.approx(1.0)
    run_report("sylvie-claims", str(tmp_path / "c.csv"), runs=[str(folder)],
               md_out=str(tmp_path / "c.md"))
    claims = pd.read_csv(tmp_path / "c.csv", keep_default_na=False)
    by = dict(zip(claims["claim"], claims["verdict"]))
    assert by["FP32 / 1-bit main data volume per epoch (Table 3)"] in ("reproduced",
                                                                       "not reproduced")
    assert by["Sylvie-A throughput over exact (two servers)"] == "not measured"


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("method,params,msg", [
    ("sylvie-s", {"bits": 3}, r"parameter bits=3: valid: 1, 2, 4, 8, 16, 32"),
    ("sylvie-a", {"bits": 0}, r"parameter bits=0: valid: 1, 2, 4, 8, 16, 32"),
    ("sylvie-a", {"staleness_bound": 0}, r"parameter staleness_bound=0: must be an integer >= 1"),
    ("sylvie-s", {"codec": "linear-8"}, r"codec='linear-8': Sylvie's codec is set by bits="),
    ("bns-gcn", {"rate": 0.0}, r"parameter rate=0.0: must be in \(0, 1\]"),
    ("bns-gcn", {"rate": 1.5}, r"parameter rate=1.5: must be in \(0, 1\]"),
    ("pipegcn", {"gamma": 1.0}, r"parameter gamma=1.0: must be in \[0, 1\)"),
    ("pipegcn", {"smoothing": "x"}, r"parameter smoothing='x': valid: none, features"),
])
def test_bad_parameters_are_named_in_one_line(method, params, msg):
    with pytest.raises(CdfgnnError, match=msg) as info:
        build_strategy(method, params)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------ GAT and first-layer precompute
def test_gat_and_precompute(graph_file):
    """GAT: fp32 Sylvie-S (quant-all too) equals exact; 1-bit quant-all quantises more
    than 1-bit alone; BNS-GCN refuses GAT in one line. Precompute: layer 0 sends nothing."""
    def run(method="exact", **kw):
        params = kw.pop("params", {})
        return run_training(_cfg(graph=graph_file, method=method, method_params=params,
                                 epochs=3, **kw))

    ref = run(model="gat")
    for params in ({"bits": 32}, {"bits": 32, "quantize_all": True}):
        np.testing.assert_allclose(_losses(run("sylvie-s", model="gat", params=params)),
                                   _losses(ref), atol=1e-5)
    one = run("sylvie-s", model="gat")
    qall = run("sylvie-s", model="gat", params={"quantize_all": True})
    assert np.abs(_losses(qall) - _losses(one)).max() > 1e-6
    with pytest.raises(CdfgnnError, match="method 'bns-gcn' supports models gcn, sage, "
                                          "not 'gat'"):
        run("bns-gcn", model="gat")
    pre = run("sylvie-s", precompute_first_layer=True)
    assert not any(t.endswith("/0") for t in pre["comm"]["by_tag"] if t.startswith("halo/"))
    exact_pre = run(precompute_first_layer=True)
    np.testing.assert_allclose(_losses(run("sylvie-a", precompute_first_layer=True,
                                           params={"bits": 32, "staleness_bound": 1})),
                               _losses(exact_pre), atol=1e-5)


# ------------------------------------------------ the public code's degree groups
def test_degree_groups_follow_the_public_code_cdf():
    """Inclusive CDF of the degree over the list, cut at quarters; a degree shared by
    more than a quarter of the rows skips a group, as in boundary_imp_group."""
    from cdfgnn.methods.sylvie import degree_groups
    deg = np.array([1, 1, 2, 3, 5, 8, 13, 1, 2, 40])
    # CDF: deg 1 -> 0.3, 2 -> 0.5, 3 -> 0.6, 5 -> 0.7, 8 -> 0.8, 13 -> 0.9, 40 -> 1.0
    np.testing.assert_array_equal(degree_groups(deg, 4), [1, 1, 2, 2, 2, 3, 3, 1, 2, 3])
    np.testing.assert_array_equal(degree_groups(deg, 1), np.zeros(10, dtype=np.int64))
    assert degree_groups(np.zeros(0, dtype=np.int64), 4).size == 0


def test_degree_group_codec_gives_each_group_its_width():
    """Rows of the 8-bit group come back far closer than rows of the 1-bit group, and
    the wire holds exactly the groups' stochastic encodings."""
    import torch

    from cdfgnn.comm.codecs import get_codec
    from cdfgnn.methods.sylvie import _DegreeGroups
    groups = np.repeat([0, 1, 2, 3], 50)
    codec = _DegreeGroups([1, 2, 4, 8], groups, groups)
    x = torch.randn(200, 32)
    wire = codec.encode(x, torch.Generator().manual_seed(0))
    assert wire.numel() == sum(get_codec(f"stochastic-{b}").wire_bytes(50, 32)
                               for b in (1, 2, 4, 8))
    err = (codec.decode(wire, 200, 32) - x).abs().reshape(4, 50, 32).amax(dim=(1, 2))
    assert err[3] < err[2] < err[1] < err[0]


def test_degree_groups_run_between_one_and_eight_bits(graph_file):
    one = _run(graph_file, "sylvie-s", bits=1)
    deg = _run(graph_file, "sylvie-s", bits=1, bit_groups="degree")
    eight = _run(graph_file, "sylvie-s", bits=8)
    rows = [r["comm"]["per_epoch"]["rows_sent"] for r in (one, deg, eight)]
    assert rows[0] == rows[1] == rows[2]
    nbytes = [sum(r["comm"]["per_epoch"][k]["bytes"] for k in ("intra", "inter"))
              for r in (one, deg, eight)]
    assert nbytes[0] < nbytes[1] < nbytes[2]
    with pytest.raises(CdfgnnError, match="bit_groups='degree' needs bits in"):
        _run(graph_file, "sylvie-s", bits=16, bit_groups="degree")
