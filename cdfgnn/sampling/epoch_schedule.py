"""A whole epoch of the mini-batch schedule at once: vectorised sampling and its file.

RapidGNN precomputes every batch of every epoch before training (arXiv 2509.05207,
Sec. 4, Fig. 2). Sampling the batches one at a time
(:func:`cdfgnn.sampling.blocks.sample_block_arrays`) costs a dozen small numpy calls
per batch and layer; here all ``B`` batches of an epoch go through each layer
together, batch ``b``'s vertices keyed by ``b * N + vertex`` so one sort deduplicates
every batch at once.

The result is **the same schedule** as the per-batch sampler (the online baselines'
path, :meth:`cdfgnn.sampling.schedule.Schedule.sample`), array for array:

* batch ``b`` draws from its own generator ``rngs[b]`` exactly the numbers the
  per-batch sampler draws: per layer (seed side first) ``fanout`` rounds of one
  uniform per row with more than ``fanout`` arcs. ``Generator.random(n)`` consumes
  the stream sequentially, so one call of ``fanout x rows`` numbers, read round by
  round, equals ``fanout`` calls of ``rows`` (tests/test_rapidgnn_schedule.py);
* Floyd's rounds then run on the rows of all batches together, with the same
  arithmetic per row;
* per batch the new input vertices are the sampled vertices not yet in the layer's
  output set, in increasing id order, appended after it.

:class:`EpochArrays` holds the epoch as concatenated arrays with per-batch sizes (the
layout of the schedule file); :meth:`EpochArrays.batches` slices it into per-batch
``(srcs, structure)`` views.

Schedule file (one per worker and epoch, one ``np.save``): a flat integer array,
int32 when every value fits (the graph has fewer than 2**31 vertices), else int64::

    [VERSION, K, B, mask_words] + sizes (K + 1, B) + for l in 0..K: src_l
      + for l in 0..K-1: indptr_l + for l in 0..K-1: cols_l + remote bitmask words

``sizes[l, b]`` = vertices of batch ``b`` in layer ``l`` (``l = K``: its seeds);
``indptr_l`` of batch ``b`` has ``sizes[l + 1, b] + 1`` entries and its last entry is
the batch's arc count in ``cols_l``. The remote bitmask is ``np.packbits`` of "input
vertex owned by another worker" over ``src_0``, zero-padded to whole words.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cdfgnn.arrays import keep_small_rows
from cdfgnn.errors import CorruptFileError

VERSION = 1
_HEAD = 4


def _offsets(sizes: np.ndarray) -> np.ndarray:
    out = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


@dataclass
class EpochArrays:
    """The ``B`` batches of one epoch, concatenated per layer (int64)."""

    sizes: np.ndarray            # (K + 1, B): vertices per layer (input side first) and batch
    src: list[np.ndarray]        # K + 1 arrays: batch after batch
    indptr: list[np.ndarray]     # K arrays: batch b's CSR row pointer (sizes[l + 1, b] + 1)
    cols: list[np.ndarray]       # K arrays: local column ids into src[l] of the batch

    @property
    def num_batches(self) -> int:
        return int(self.sizes.shape[1])

    @property
    def layers(self) -> int:
        return len(self.cols)

    def batches(self) -> list[tuple[list[np.ndarray], list[tuple]]]:
        """Per batch ``(srcs, structure)`` as :func:`sample_block_arrays` returns them."""
        k, nb = self.layers, self.num_batches
        so = [_offsets(self.sizes[l]) for l in range(k + 1)]
        io = [_offsets(self.sizes[l + 1] + 1) for l in range(k)]
        co = [_offsets(self.indptr[l][io[l][1:] - 1]) if nb else np.zeros(1, np.int64)
              for l in range(k)]
        return [([self.src[l][so[l][b]: so[l][b + 1]] for l in range(k + 1)],
                 [(self.indptr[l][io[l][b]: io[l][b + 1]], self.cols[l][co[l][b]: co[l][b + 1]])
                  for l in range(k)]) for b in range(nb)]

    def split(self, parts: list[int]) -> list["EpochArrays"]:
        """Consecutive runs of ``parts[j]`` batches each (e.g. one run per epoch)."""
        k = self.layers
        cuts = _offsets(np.asarray(parts, dtype=np.int64))
        so = [_offsets(self.sizes[l])[cuts] for l in range(k + 1)]
        io = [_offsets(self.sizes[l + 1] + 1) for l in range(k)]
        co = [np.concatenate([[0], np.cumsum(self.indptr[l][io[l][1:] - 1])])[cuts]
              for l in range(k)]
        io = [io[l][cuts] for l in range(k)]
        return [EpochArrays(self.sizes[:, a: b].copy(),
                            [self.src[l][so[l][j]: so[l][j + 1]] for l in range(k + 1)],
                            [self.indptr[l][io[l][j]: io[l][j + 1]] for l in range(k)],
                            [self.cols[l][co[l][j]: co[l][j + 1]] for l in range(k)])
                for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]

    @classmethod
    def from_batches(cls, batches: list[tuple[list[np.ndarray], list[tuple]]]) -> "EpochArrays":
        """The concatenation of per-batch ``(srcs, structure)``."""
        k = len(batches[0][1]) if batches else 0
        cat = (lambda parts: np.concatenate(parts).astype(np.int64, copy=False) if parts
               else np.zeros(0, dtype=np.int64))
        sizes = np.array([[s[l].size for s, _ in batches] for l in range(k + 1)],
                         dtype=np.int64).reshape(k + 1, len(batches))
        return cls(sizes, [cat([s[l] for s, _ in batches]) for l in range(k + 1)],
                   [cat([st[l][0] for _, st in batches]) for l in range(k)],
                   [cat([st[l][1] for _, st in batches]) for l in range(k)])


# ------------------------------------------------------------------------ sampling
def _floyd(lo: np.ndarray, deg: np.ndarray, fanout: int, draws: np.ndarray) -> np.ndarray:
    """Floyd's algorithm on rows with ``deg > fanout``; ``draws[s]`` = round s's uniforms
    (the arithmetic of :func:`cdfgnn.sampling.blocks.sample_arcs`; the picks are kept one
    contiguous array per round, so the duplicate check is ``s`` flat comparisons).
    Returns arc ids (rows, fanout)."""
    chosen = np.empty((fanout, deg.size), dtype=np.int64)
    dup = np.empty(deg.size, dtype=bool)
    eq = np.empty(deg.size, dtype=bool)
    for s in range(fanout):
        j = deg - fanout + s
        t = np.minimum((draws[s] * (j + 1)).astype(np.int64), j)
        if s:
            np.equal(chosen[0], t, out=dup)
            for k in range(1, s):
                np.equal(chosen[k], t, out=eq)
                dup |= eq
            t[dup] = j[dup]
        chosen[s] = t
    return lo[:, None] + chosen.T


def _sample_layer(indptr: np.ndarray, dst: np.ndarray, row_batch: np.ndarray, nb: int,
                  fanout: int, rngs: list) -> tuple[np.ndarray, np.ndarray]:
    """Arcs kept per row and the kept arc ids (grouped by row) for rows of every batch."""
    lo, deg, counts, start, arcs, big = keep_small_rows(indptr, dst, fanout)
    if big.size:
        per = np.bincount(row_batch[big], minlength=nb)
        draws = np.empty((fanout, big.size))
        at = 0
        for b in np.flatnonzero(per):           # one generator call per batch and layer
            n = int(per[b])
            draws[:, at: at + n] = rngs[b].random(fanout * n).reshape(fanout, n)
            at += n
        pos = start[big][:, None] + np.arange(fanout)
        arcs[pos.ravel()] = _floyd(lo[big], deg[big], fanout, draws).ravel()
    return counts, arcs


#: (batch, vertex) key spaces up to this size are deduplicated with dense arrays (a few
#: passes over the key space, 5 bytes per key) instead of a sort of the arcs' keys
DENSE_KEYS = 1 << 23


def _distinct(key: np.ndarray, dkey: np.ndarray, space: int):
    """Sorted distinct ``key`` values ``u``, each key's index into ``u``, whether each
    ``u`` is among the (distinct) ``dkey`` and, for those, its position in ``dkey``."""
    if space <= DENSE_KEYS and space <= 16 * max(key.size, 1):
        mark = np.zeros(space, dtype=bool)
        mark[key] = True
        u = np.flatnonzero(mark)
        slot = np.empty(space, dtype=np.int32 if max(u.size, dkey.size) < 2 ** 31
                        else np.int64)
        slot[u] = np.arange(u.size)
        inv = slot[key].astype(np.int64)
        slot[u] = -1
        slot[dkey] = np.arange(dkey.size)
        where = slot[u]
        in_dst = where >= 0
        return u, inv, in_dst, where[in_dst].astype(np.int64)
    order = np.argsort(key)                      # (ties need no order: inv is the same)
    sk = key[order]
    first = np.ones(sk.size, dtype=bool)
    np.not_equal(sk[1:], sk[:-1], out=first[1:])
    u = sk[first]
    inv = np.empty(key.size, dtype=np.int64)
    inv[order] = np.cumsum(first) - 1
    dsort = np.argsort(dkey)                     # (keys are distinct)
    sorted_d = dkey[dsort]
    pos = np.minimum(np.searchsorted(sorted_d, u), max(dkey.size - 1, 0))
    in_dst = sorted_d[pos] == u if dkey.size else np.zeros(u.size, dtype=bool)
    return u, inv, in_dst, dsort[pos[in_dst]]


def sample_epoch(indptr: np.ndarray, indices: np.ndarray, seeds: list[np.ndarray],
                 fanouts: list[int], rngs: list) -> EpochArrays:
    """Every batch of an epoch (batch ``b``: seed vertices ``seeds[b]``, generator
    ``rngs[b]``) sampled with per-layer ``fanouts`` (input side first), vectorised over
    batches and vertices. Equal to ``sample_block_arrays`` batch by batch."""
    nb = len(seeds)
    n = int(indptr.size - 1)
    dsz = np.array([s.size for s in seeds], dtype=np.int64)
    dst = (np.concatenate(seeds).astype(np.int64, copy=False) if nb
           else np.zeros(0, dtype=np.int64))
    sizes, srcs, ptrs, cols = [dsz], [dst], [], []
    for fanout in reversed(fanouts):
        doff = _offsets(dsz)
        row_batch = np.repeat(np.arange(nb, dtype=np.int64), dsz)
        counts, arcs = _sample_layer(indptr, dst, row_batch, nb, fanout, rngs)
        # distinct (batch, vertex) keys of the sampled arcs, each arc's key index, and
        # which keys are already in their batch's output set (at dst[at])
        key = np.repeat(row_batch, counts) * n + indices[arcs]
        ukey, inv, in_dst, at = _distinct(key, row_batch * n + dst, nb * n)
        ub = ukey // n
        newb = ub[~in_dst]
        nnew = np.bincount(newb, minlength=nb).astype(np.int64)
        rank = np.arange(newb.size, dtype=np.int64) - _offsets(nnew)[newb]
        local_u = np.empty(ukey.size, dtype=np.int64)
        local_u[in_dst] = at - doff[ub[in_dst]]
        local_u[~in_dst] = dsz[newb] + rank
        # the layer's input set per batch: its output set, then the new vertices
        ssz = dsz + nnew
        soff = _offsets(ssz)
        src = np.empty(int(ssz.sum()), dtype=np.int64)
        src[soff[row_batch] + np.arange(dst.size) - doff[row_batch]] = dst
        src[soff[newb] + dsz[newb] + rank] = ukey[~in_dst] % n
        # CSR row pointers, one (rows + 1) run per batch, starting at 0
        cum = _offsets(counts)                   # arcs before each row; batch b: cum[doff[b]]
        ptr = np.zeros(dst.size + nb, dtype=np.int64)
        ptr[np.arange(dst.size) + row_batch + 1] = cum[1:] - cum[doff[row_batch]]
        ptrs.append(ptr)
        cols.append(local_u[inv])
        sizes.append(ssz)
        srcs.append(src)
        dst, dsz = src, ssz
    return EpochArrays(np.array(sizes[::-1], dtype=np.int64).reshape(len(sizes), nb),
                       srcs[::-1], ptrs[::-1], cols[::-1])


# ------------------------------------------------------------------------ the file
def write_epoch_file(path: Path, ep: EpochArrays, remote: np.ndarray) -> int:
    """One epoch's schedule and remote bitmask (``remote``: bool per ``src[0]`` entry) in
    one ``np.save``; int32 when every value fits. Returns the file's bytes."""
    k, nb = ep.layers, ep.num_batches
    parts = [*ep.src, *ep.indptr, *ep.cols]
    big = max((int(p.max()) for p in parts if p.size), default=0)
    dtype = np.int32 if big < 2 ** 31 - 1 and ep.sizes.size < 2 ** 31 else np.int64
    width = np.dtype(dtype).itemsize
    mask = np.packbits(remote)
    mask = np.concatenate([mask, np.zeros(-mask.size % width, np.uint8)]).view(dtype)
    total = _HEAD + ep.sizes.size + sum(p.size for p in parts) + mask.size
    buf = np.empty(total, dtype=dtype)
    buf[:_HEAD] = (VERSION, k, nb, mask.size)
    at = _HEAD
    for p in (ep.sizes.ravel(), *parts, mask):
        buf[at: at + p.size] = p
        at += p.size
    path = Path(path)
    with open(path, "wb") as f:          # np.save would append ".npy" to a bare name
        np.save(f, buf, allow_pickle=False)
    return int(path.stat().st_size)


def read_epoch_file(path: Path) -> tuple[EpochArrays, np.ndarray]:
    """The :class:`EpochArrays` (int64) and remote flags of :func:`write_epoch_file`."""
    buf = np.load(path, allow_pickle=False)
    if buf.ndim != 1 or buf.size < _HEAD or int(buf[0]) != VERSION:
        raise CorruptFileError(f"{path}: not a version-{VERSION} schedule file")
    k, nb, mwords = (int(v) for v in buf[1:_HEAD])
    at = _HEAD
    sizes = buf[at: at + (k + 1) * nb].astype(np.int64).reshape(k + 1, nb)
    at += sizes.size
    lens = ([int(sizes[l].sum()) for l in range(k + 1)]
            + [int(sizes[l + 1].sum()) + nb for l in range(k)])
    data = buf[at: buf.size - mwords].astype(np.int64)
    out, pos = [], 0
    for m in lens:
        out.append(data[pos: pos + m])
        pos += m
    ptr = out[k + 1:]
    for l in range(k):
        last = ptr[l][_offsets(sizes[l + 1] + 1)[1:] - 1] if nb else np.zeros(0, np.int64)
        out.append(data[pos: pos + int(last.sum())])
        pos += out[-1].size
    if pos != data.size:
        raise CorruptFileError(f"{path}: schedule file sizes do not add up")
    words = buf[buf.size - mwords:] if mwords else buf[:0]
    remote = np.unpackbits(np.ascontiguousarray(words).view(np.uint8),
                           count=int(sizes[0].sum())).astype(bool)
    return EpochArrays(sizes, out[: k + 1], ptr, out[2 * k + 1:]), remote
