"""Message codecs (cdfgnn/comm/codecs.py): error bounds, packed sizes, unbiasedness."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cdfgnn.comm.codecs import get_codec, pack_bits, unpack_bits
from cdfgnn.errors import CdfgnnError


def rows_strategy():
    return st.tuples(st.integers(1, 9), st.integers(1, 37), st.integers(0, 2**31 - 1),
                     st.floats(1e-3, 1e3))


def _rows(n, d, seed, scale):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g) * scale
    x[0] = 0.25 * scale  # a constant row: must come back exactly (up to its metadata)
    return x


@settings(max_examples=60, deadline=None)
@given(rows_strategy(), st.sampled_from([2, 4, 8, 16]))
def test_linear_error_bound_and_packed_size(args, bits):
    """|m~ - m| <= (max - min) / (2 (2^B - 1)) per element; size = ceil(B d / 8) + 8 per row."""
    n, d, seed, scale = args
    x = _rows(n, d, seed, scale)
    codec = get_codec(f"linear-{bits}")
    wire = codec.encode(x)
    assert wire.dtype == torch.uint8
    assert wire.numel() == n * (math.ceil(bits * d / 8) + 8) == codec.wire_bytes(n, d)
    y = codec.decode(wire, n, d)
    span = (x.amax(1) - x.amin(1))[:, None]
    bound = span / (2 * ((1 << bits) - 1))
    assert bool(((y - x).abs() <= bound * (1 + 1e-5) + 1e-6 * scale).all())
    assert torch.equal(y[0], x[0])


@settings(max_examples=40, deadline=None)
@given(rows_strategy(), st.sampled_from([2, 4, 8]))
def test_linear_midrise_meets_the_printed_bound(args, bits):
    """The midrise variant: error <= (max - min) / 2^(B+1), the bound printed in CDFGNN."""
    n, d, seed, scale = args
    x = _rows(n, d, seed, scale)
    codec = get_codec(f"linear-{bits}-midrise")
    y = codec.decode(codec.encode(x), n, d)
    span = (x.amax(1) - x.amin(1))[:, None]
    assert bool(((y - x).abs() <= span / 2 ** (bits + 1) * (1 + 1e-5) + 1e-6 * scale).all())


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_stochastic_is_unbiased_with_the_theorem_1_variance(bits):
    """E[deq(q(h))] = h (Sylvie eq. 6); per-element variance scale^2 p(1-p) (<= scale^2/4),
    whose mean over uniform fractional parts is (max-min)^2/(6 B^2) (eq. 7 per element)."""
    torch.manual_seed(0)
    x = torch.randn(64, 48)
    codec = get_codec(f"stochastic-{bits}")
    g = torch.Generator().manual_seed(1)
    draws = torch.stack([codec.decode(codec.encode(x, g), 64, 48) for _ in range(600)])
    levels = (1 << bits) - 1
    span = (x.amax(1) - x.amin(1))[:, None]
    scale = span / levels
    mean, var = draws.mean(0), draws.var(0)
    # the mean of 600 draws is within 5 standard errors of the input
    assert bool(((mean - x).abs() <= 5 * scale / 2 / math.sqrt(600) + 1e-3).all())
    assert bool((var <= scale ** 2 / 4 * 1.3 + 1e-6).all())
    ratio = var.sum(1) / (48 * span[:, 0] ** 2 / (6 * levels ** 2))
    assert 0.6 < float(ratio.mean()) < 1.4
    assert codec.encode(x, g).numel() == 64 * (math.ceil(bits * 48 / 8) + 4)


def test_stochastic_reconstructs_constant_rows_exactly():
    x = torch.full((3, 10), 0.5)
    codec = get_codec("stochastic-1")
    assert torch.equal(codec.decode(codec.encode(x), 3, 10), x)


@pytest.mark.parametrize("spec", ["none", "fp32", "stochastic-32"])
def test_32_bits_is_a_passthrough(spec):
    x = torch.randn(5, 7)
    codec = get_codec(spec)
    assert codec.exact and codec.bits == 32
    assert torch.equal(codec.decode(codec.encode(x), 5, 7), x)


def test_fp16_and_stochastic_16_are_a_cast():
    x = torch.randn(5, 7)
    for spec in ("fp16", "stochastic-16"):
        codec = get_codec(spec)
        assert codec.wire_bytes(5, 7) == 70
        assert torch.equal(codec.decode(codec.encode(x), 5, 7), x.half().float())


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 6), st.integers(1, 29),
       st.integers(0, 1000))
def test_pack_unpack_roundtrip(bits, n, d, seed):
    rng = np.random.default_rng(seed)
    codes = torch.from_numpy(rng.integers(0, 1 << bits, (n, d))).to(torch.int32)
    packed = pack_bits(codes, bits)
    assert packed.shape == (n, math.ceil(bits * d / 8))
    assert torch.equal(unpack_bits(packed, bits, d), codes)


@pytest.mark.parametrize("spec,msg", [
    ("linear-3", "linear bit width must be one of 2, 4, 8, 16"),
    ("stochastic-3", "stochastic bit width must be one of 1, 2, 4, 8, 16, 32"),
    ("zip", "unknown codec 'zip'; valid: none"),
])
def test_bad_codecs_are_named(spec, msg):
    with pytest.raises(CdfgnnError, match=msg):
        get_codec(spec)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("n,d", [(7, 13), (33, 64), (1, 1)])
def test_stochastic_kernels_match_the_torch_reference(bits, n, d):
    """The fused numba path writes the reference layout: same metadata bytes, decodes
    identically with the torch reference, codes are floor or ceil of the scaled value,
    and the noise depends only on the generator's state."""
    codec = get_codec(f"stochastic-{bits}")
    x = _rows(n, d, 5, 3.0)
    wire = codec.encode(x, torch.Generator().manual_seed(7))
    ref = codec.reference_encode(x, torch.Generator().manual_seed(7))
    assert wire.shape == ref.shape and wire.dtype == ref.dtype
    meta = codec.meta_bytes
    assert torch.equal(wire.reshape(n, -1)[:, :meta], ref.reshape(n, -1)[:, :meta])
    y = codec.decode(wire, n, d)
    assert torch.equal(y, codec.reference_decode(wire, n, d))
    assert torch.equal(codec.decode(ref, n, d), codec.reference_decode(ref, n, d))
    scale = wire.reshape(n, -1)[:, :meta].reshape(-1).view(torch.float16).reshape(n, 2)[:, 1:]
    scale = scale.float()
    assert bool(((y - x).abs() <= scale * (1 + 1e-5) + 1e-6).all())
    assert torch.equal(wire, codec.encode(x, torch.Generator().manual_seed(7)))
    if n * d > 32:
        assert not torch.equal(wire, codec.encode(x, torch.Generator().manual_seed(8)))


_LINEAR_SPECS = [f"linear-{b}" for b in (2, 4, 8, 16)] + [f"linear-{b}-midrise" for b in (2, 4, 8, 16)]


@settings(max_examples=40, deadline=None)
@given(rows_strategy(), st.sampled_from(_LINEAR_SPECS))
def test_linear_kernels_equal_the_torch_reference_bit_for_bit(args, spec):
    """The fused numba kernels write exactly the reference's wire bytes and decode to
    exactly the reference's floats (same float32 operations in the same order)."""
    n, d, seed, scale = args
    x = _rows(n, d, seed, scale)
    codec = get_codec(spec)
    wire = codec.encode(x)
    assert torch.equal(wire, codec.reference_encode(x))
    y = codec.decode(wire, n, d)
    assert y.dtype == torch.float32 and y.shape == (n, d)
    assert torch.equal(y, codec.reference_decode(wire, n, d))


@pytest.mark.parametrize("spec", ["linear-8", "stochastic-1", "stochastic-4"])
def test_kernels_take_any_layout_and_dtype(spec):
    """Non-contiguous, float64 and grad-carrying inputs encode like their float32 copy;
    a wire that is a view decodes like its copy; zero rows give an empty wire."""
    codec = get_codec(spec)
    x = torch.randn(20, 30, dtype=torch.float64, requires_grad=True)
    xt = x.detach().float().t().contiguous().t()  # non-contiguous float32
    for inp in (x, xt, x.detach().t().t()):
        g = torch.Generator().manual_seed(3)
        assert torch.equal(codec.encode(inp, g),
                           codec.encode(x.detach().float().contiguous(),
                                        torch.Generator().manual_seed(3)))
    wire = codec.encode(xt, torch.Generator().manual_seed(3))
    padded = torch.cat([torch.zeros(5, dtype=torch.uint8), wire])[5:]
    assert torch.equal(codec.decode(padded, 20, 30), codec.decode(wire.clone(), 20, 30))
    assert codec.encode(torch.zeros(0, 30)).numel() == 0
    assert codec.decode(codec.encode(torch.zeros(0, 30)), 0, 30).shape == (0, 30)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_stochastic_kernel_codes_follow_the_reference_distribution(bits):
    """Same input, many seeds: the numba codes and the torch reference's codes take the
    same two values per element with the same probabilities (within sampling error)."""
    codec = get_codec(f"stochastic-{bits}")
    x = _rows(16, 40, 11, 2.0)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    fast = torch.stack([codec.decode(codec.encode(x, g1), 16, 40) for _ in range(400)])
    ref = torch.stack([codec.reference_decode(codec.reference_encode(x, g2), 16, 40)
                       for _ in range(400)])
    lo = torch.minimum(fast.amin(0), ref.amin(0))
    hi = torch.maximum(fast.amax(0), ref.amax(0))
    assert bool(((fast == lo) | (fast == hi)).all()) and bool(((ref == lo) | (ref == hi)).all())
    p_fast, p_ref = (fast == hi).float().mean(0), (ref == hi).float().mean(0)
    # two binomial proportions of 400 draws: 5 standard errors of the difference
    assert bool(((p_fast - p_ref).abs() <= 5 * math.sqrt(2 * 0.25 / 400)).all())


def test_float16_metadata_rounding_matches_torch_everywhere():
    """The kernels' float32 -> float16 directed rounding (min down, scale up) equals the
    torch reference's over normals, subnormals, zeros, overflow and ties."""
    from cdfgnn.comm.codecs import _half_down, _half_up
    from cdfgnn.comm.quant_kernels import f16_down, f16_up
    rng = np.random.default_rng(0)
    vals = np.concatenate([
        rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 6, 3000),
        np.array([0.0, -0.0, 65504.0, 65519.0, 65520.0, 7e4, -7e4, 2.0 ** -24, 2.0 ** -25,
                  3 * 2.0 ** -26, -2.0 ** -25, 1e-30, -1e-30, 1.0 + 2.0 ** -11,
                  1.0 + 3 * 2.0 ** -11, np.inf, -np.inf]),
        # float16 values and the float32 values right next to them
        np.frombuffer(np.arange(0, 0x7C00, 7, dtype=np.uint16).tobytes(), np.float16)
        .astype(np.float32)]).astype(np.float32)
    vals = np.concatenate([vals, -vals, np.nextafter(vals, np.float32(np.inf)),
                           np.nextafter(vals, np.float32(-np.inf))]).astype(np.float32)
    t = torch.from_numpy(vals)
    down = _half_down(t).view(torch.int16).numpy().astype(np.uint16)
    up = _half_up(t).view(torch.int16).numpy().astype(np.uint16)
    got_down = np.array([f16_down(np.float32(v)) for v in vals], dtype=np.uint16)
    got_up = np.array([f16_up(np.float32(v)) for v in vals], dtype=np.uint16)
    assert np.array_equal(got_down, down)
    assert np.array_equal(got_up, up)


def test_stochastic_kernel_noise_is_uniform_and_uncorrelated():
    """1-bit codes of 0.3 on [0, 1] rows: Bernoulli(0.3) everywhere, with no correlation
    between neighbouring elements, the two elements sharing a 64-bit draw (t and
    t + ceil(d/2)), neighbouring rows or two calls."""
    n, d = 4096, 66
    x = torch.full((n, d), 0.3)
    x[:, 0], x[:, 1] = 0.0, 1.0                   # min 0, max 1: scale 1
    codec = get_codec("stochastic-1")
    g = torch.Generator().manual_seed(5)
    q = [codec.decode(codec.encode(x, g), n, d)[:, 2:] for _ in range(2)]
    assert bool(((q[0] == 0) | (q[0] == 1)).all())
    a = q[0]
    assert abs(float(a.mean()) - 0.3) < 0.005          # 270k draws: sd 0.0009
    assert float((a.mean(0) - 0.3).abs().max()) < 0.04  # per column: 4096 draws, sd 0.007

    def corr(u, v):
        u, v = u.reshape(-1) - u.mean(), v.reshape(-1) - v.mean()
        return float((u * v).mean() / (u.std() * v.std()))
    off = (d + 1) // 2                                 # elements t and t + ceil(d/2)
    for u, v in [(a[:, :-1], a[:, 1:]), (a[:, :a.shape[1] - off], a[:, off:]),
                 (a[:-1], a[1:]), (q[0], q[1])]:
        assert abs(corr(u, v)) < 0.02                  # sd of a null correlation ~0.002


def test_codec_kernel_modes_match_the_kernels():
    from cdfgnn.comm import quant_kernels as K
    assert get_codec("linear-4")._mode == K.LINEAR
    assert get_codec("linear-4-midrise")._mode == K.MIDRISE
    assert get_codec("stochastic-2")._mode == K.STOCHASTIC


@pytest.mark.parametrize("spec", ["linear-4", "linear-8-midrise", "linear-16", "stochastic-2"])
def test_the_torch_path_is_chosen_by_device_and_forced_on_the_cpu(spec):
    """Off the CPU the codecs take the torch path (the numba kernels run on the host);
    forced on the CPU it gives the kernels' wire bytes (linear: bit for bit) and decodes
    to their floats, so what a GPU runs is checked here (the stochastic codecs: the
    distribution, test_stochastic_kernel_codes_follow_the_reference_distribution)."""
    from cdfgnn.comm.codecs import _kernel_of, _on_device

    codec = get_codec(spec)
    x = _rows(9, 21, 4, 2.0)
    assert _kernel_of(x, None) == "numba"
    assert _kernel_of(torch.empty(2, 2, device="meta"), None) == "torch"
    with pytest.raises(ValueError, match="numba codec kernels run on the CPU"):
        _kernel_of(torch.empty(2, 2, device="meta"), "numba")
    g = torch.Generator().manual_seed(5)
    assert _on_device(g, x.device) is g and _on_device(None, x.device) is None
    forced = codec.encode(x, torch.Generator().manual_seed(5), _kernel="torch")
    assert torch.equal(forced, codec.reference_encode(x, torch.Generator().manual_seed(5)))
    wire = codec.encode(x, torch.Generator().manual_seed(5))
    assert forced.shape == wire.shape and forced.dtype == wire.dtype
    if not spec.startswith("stochastic"):
        assert torch.equal(forced, wire)
    assert torch.equal(codec.decode(wire, 9, 21, _kernel="torch"), codec.decode(wire, 9, 21))
