"""Shared pieces of the streaming vertex-cut partitioners (random, DBH, HDRF, greedy, EBV).

* :func:`prepare` validates an :class:`EdgeList` + :class:`Topology` once for every
  partitioner and hands back int64 ``src``/``dst`` views (no copy for int64 input).
* Salts and tie-breaking streams come from ``np.random.SeedSequence([seed, tag])`` so a
  seed fully determines every partitioner's output and two partitioners run with the
  same seed do not share a salt.
* Hashing is the SplitMix64 finaliser (Steele et al., 2014): a bijection on uint64 with
  good avalanche, so ``mix(x ^ salt) % p`` is a salted, near-uniform hash (the modulo
  bias is at most p / 2**64).
* Replica sets are bitsets: ``bits[v, w]`` is a uint64 word whose bit ``b`` says
  that part/host ``64 * w + b`` holds vertex ``v``; one word for p <= 64, more above
  (any p works, memory is n * ceil(p / 64) * 8 bytes).
* Kernels stream ``(s[k], d[k]) = (src[order[k]], dst[order[k]])`` (see
  :func:`stream_endpoints`) and write ``parts[k]`` sequentially; :func:`unstream`
  then scatters to edge-id order. Random reads/writes inside the long per-edge loop
  were cache misses the CPU could not overlap (3x slower at 2M edges).
* The numba kernels never allocate O(n) or O(m) arrays themselves: the caller allocates
  them with numpy, so tracemalloc accounts for all big buffers and memory stays
  under the caller's control.
* numba's on-disk cache (``cache=True``) is keyed on the file of the compiled
  function only: after editing a helper in this file, delete this package's
  ``__pycache__`` so the kernels that inline it are recompiled.
"""
from __future__ import annotations

import operator

import numba
import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import EdgeList, Topology, check_seed

# SplitMix64 constants (golden-ratio increment and the two finaliser multipliers).
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_ONE = np.uint64(1)
_LOW6 = np.uint64(63)

STREAM_ORDERS = ("shuffle", "input")


# --------------------------------------------------------------------------- input checks
def prepare(name: str, edges: EdgeList, topology: Topology) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Validate the input of partitioner ``name``; return ``(src, dst, num_nodes, p)``.

    ``src``/``dst`` are contiguous int64 (the input arrays themselves when they are
    already contiguous int64). Raises :class:`CdfgnnError` naming the bad input.
    """
    if not isinstance(edges, EdgeList):
        raise CdfgnnError(f"partitioner {name!r}: expected an EdgeList, got {type(edges).__name__}")
    if not isinstance(topology, Topology):
        raise CdfgnnError(f"partitioner {name!r}: expected a Topology, got {type(topology).__name__}")
    src, dst = np.asarray(edges.src), np.asarray(edges.dst)
    for label, arr in (("src", src), ("dst", dst)):
        if arr.ndim != 1:
            raise CdfgnnError(f"partitioner {name!r}: edges.{label} must be 1-d, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise CdfgnnError(f"partitioner {name!r}: edges.{label} must hold integers, got {arr.dtype}")
    if src.shape != dst.shape:
        raise CdfgnnError(f"partitioner {name!r}: edges.src has {src.shape[0]} entries but "
                          f"edges.dst has {dst.shape[0]}")
    try:
        n = operator.index(edges.num_nodes)
    except TypeError:
        raise CdfgnnError(f"partitioner {name!r}: edges.num_nodes must be an integer, "
                          f"got {edges.num_nodes!r}") from None
    if n < 0:
        raise CdfgnnError(f"partitioner {name!r}: edges.num_nodes must be >= 0, got {n}")
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    if src.size:
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0 or hi >= n:
            raise CdfgnnError(f"partitioner {name!r}: edge endpoints must lie in [0, {n}) "
                              f"(edges.num_nodes), found [{lo}, {hi}]")
    return src, dst, n, topology.num_parts


def seed_state(name: str, seed, tag: int, count: int) -> np.ndarray:
    """``count`` uint64 words derived from ``(seed, tag)``; bad seeds raise CdfgnnError."""
    seed = check_seed(name, seed)
    return np.random.SeedSequence([seed, tag]).generate_state(count, dtype=np.uint64)


def check_no_extra(name: str, params: dict) -> None:
    if params:
        raise CdfgnnError(f"partitioner {name!r}: unknown parameter(s) {sorted(params)}")


def check_real(name: str, label: str, value, lo: float, hi: float = float("inf")) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CdfgnnError(f"partitioner {name!r}: {label} must be a number, got {value!r}") from None
    if not (lo <= x <= hi) or x != x:
        raise CdfgnnError(f"partitioner {name!r}: {label} must lie in [{lo}, {hi}], got {value!r}")
    return x


def check_choice(name: str, label: str, value, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise CdfgnnError(f"partitioner {name!r}: {label} must be one of {list(choices)}, got {value!r}")
    return value


def stream_order(name: str, order: str, m: int, seed, tag: int) -> np.ndarray:
    """Edge visiting order of a one-pass streaming partitioner.

    ``"shuffle"`` (default everywhere): a seeded uniform permutation, because the
    greedy heuristics are order sensitive and CSR order (sorted by src) is the
    adversarial case for them; ``"input"``: edge id order.
    """
    check_choice(name, "order", order, STREAM_ORDERS)
    ids = np.arange(m, dtype=index_dtype(m))
    if order == "shuffle":
        rng = np.random.Generator(np.random.PCG64(seed_state(name, seed, tag, 4)))
        rng.shuffle(ids)
    return ids


def index_dtype(m: int) -> type:
    """int32 for edge ids / part ids below 2**31 (halves the O(m) buffers), else int64."""
    return np.int32 if m <= np.iinfo(np.int32).max else np.int64


@numba.njit(cache=True)
def _gather_endpoints(src, dst, order, s, d):
    for k in range(order.shape[0]):
        e = order[k]
        s[k] = src[e]
        d[k] = dst[e]


def stream_endpoints(src: np.ndarray, dst: np.ndarray, order: np.ndarray,
                     num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Endpoints laid out in visiting order: ``(src[order], dst[order])``.

    The greedy kernels then read edges sequentially instead of chasing ``order`` into
    two 8-byte-per-edge arrays (measured 3x faster at 2M edges: the random reads were
    cache misses in the middle of a long loop body). int32 when ids fit, halving the
    extra memory.
    """
    dtype = index_dtype(num_nodes)
    s = np.empty(order.shape[0], dtype=dtype)
    d = np.empty(order.shape[0], dtype=dtype)
    _gather_endpoints(src, dst, order, s, d)
    return s, d


def new_bitset(n: int, nbits: int, compact: bool = False) -> np.ndarray:
    """Empty replica bitsets: one row of ceil(nbits/64) uint64 words per vertex.

    ``compact=True``: for nbits <= 32 a single word of the narrowest unsigned type
    that holds nbits bits (uint8 for p <= 8). :func:`has_bit`/:func:`set_bit` work on
    both layouts (bit i lives in word i >> 6 at position i & 63, and i < width here).
    Used by the streaming kernels, whose per-edge lookups land on random vertices:
    at 2M edges / 200k vertices, uint8 rows keep d_rep and h_rep in L2 and halved
    EBV's kernel time.
    """
    if compact and nbits <= 32:
        dtype = np.uint8 if nbits <= 8 else np.uint16 if nbits <= 16 else np.uint32
        return np.zeros((n, 1), dtype=dtype)
    return np.zeros((n, (nbits + 63) // 64), dtype=np.uint64)


def parts_buffer(m: int, p: int) -> np.ndarray:
    """Per-visited-edge part ids, written sequentially by the kernels (int16 when p fits)."""
    return np.empty(m, dtype=np.int16 if p <= np.iinfo(np.int16).max else np.int32)


@numba.njit(cache=True)
def _scatter(order, parts, out):
    for k in range(order.shape[0]):
        out[order[k]] = parts[k]


def unstream(order: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """int64 edge-id-indexed result ``out[order[k]] = parts[k]``."""
    out = np.empty(order.shape[0], dtype=np.int64)
    _scatter(order, parts, out)
    return out


# ------------------------------------------------------------------------------- hashing
def mix64_inplace(x: np.ndarray, tmp: np.ndarray) -> None:
    """SplitMix64 finaliser applied in place to uint64 array ``x`` (``tmp``: scratch, same shape)."""
    np.right_shift(x, _S30, out=tmp)
    x ^= tmp
    x *= _M1
    np.right_shift(x, _S27, out=tmp)
    x ^= tmp
    x *= _M2
    np.right_shift(x, _S31, out=tmp)
    x ^= tmp


def vertex_hash_parts(n: int, p: int, salt: np.uint64) -> np.ndarray:
    """``mix64(v ^ salt) % p`` for every vertex v (int64 [n])."""
    x = np.arange(n, dtype=np.uint64)
    x ^= salt
    mix64_inplace(x, np.empty_like(x))
    np.remainder(x, np.uint64(p), out=x)
    return x.view(np.int64)


@numba.njit(cache=True, inline="always")
def _mix64(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@numba.njit(cache=True, inline="always")
def rand_below(state, k):
    """Uniform int in [0, k) from the SplitMix64 stream held in ``state[0]`` (advanced)."""
    state[0] += _GOLDEN
    return np.int64(_mix64(state[0]) % np.uint64(k))


# ------------------------------------------------------------------------------- bitsets
@numba.njit(cache=True, inline="always")
def has_bit(bits, v, i):
    return (bits[v, i >> 6] >> (np.uint64(i) & _LOW6)) & _ONE != 0


@numba.njit(cache=True, inline="always")
def set_bit(bits, v, i):
    bits[v, i >> 6] |= _ONE << (np.uint64(i) & _LOW6)


@numba.njit(cache=True, inline="always")
def any_bit(bits, v):
    for w in range(bits.shape[1]):
        if bits[v, w] != 0:
            return True
    return False


@numba.njit(cache=True)
def fill_replicas(src, dst, parts, bits):
    """Set ``bits[v]`` to the parts holding v under assignment ``parts`` (for statistics)."""
    for e in range(src.shape[0]):
        set_bit(bits, src[e], parts[e])
        set_bit(bits, dst[e], parts[e])


def replica_bitset(edges: EdgeList, parts: np.ndarray, p: int) -> np.ndarray:
    """Bitset [n, ceil(p/64)] of the parts each vertex is replicated on."""
    bits = new_bitset(edges.num_nodes, p)
    fill_replicas(np.ascontiguousarray(edges.src, dtype=np.int64),
                  np.ascontiguousarray(edges.dst, dtype=np.int64),
                  np.ascontiguousarray(parts, dtype=np.int64), bits)
    return bits


def popcount_rows(bits: np.ndarray) -> np.ndarray:
    """Number of set bits in every row of a uint64 bitset (int64 [n])."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
    as_bytes = bits.view(np.uint8).reshape(bits.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1).sum(axis=1, dtype=np.int64)
