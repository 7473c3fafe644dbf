"""Operation counts of one epoch WITHOUT training: from partition statistics and the
model's shape, for graphs too large to train here (``benchmarks/time_model.py``).

For full-batch GCN and GraphSAGE with exact sync, the ``spmm`` and ``dense`` entries
of :func:`estimate_ledger` equal what :mod:`cdfgnn.cost.ledger` counts in a real run
(tested); ``elementwise``, ``gather`` and ``optimizer`` entries are approximations
(kernel counts per layer and bytes per row, see :data:`ELEMENTWISE_PASSES`), since
their exact count depends on autograd's choice of kernels.

The counts are of a **float32** run (:data:`DTYPE`): 4-byte elements, and products as
the ``spmm`` / ``dense`` kinds priced at the FP32 (or TF32) peak, never the FP64 kinds a
``--dtype float64`` run counts. Every published run these estimates are compared with
trained in float32.

Layer orders:

* ``transform-first`` (this engine, DGL's GraphConv where it narrows the rows):
  ``t = h W``, then ``A t``: messages are ``fout`` wide;
* ``aggregate-first`` (BNS-GCN, PipeGCN, Sylvie's public code): ``A h``, then the
  weight: messages are ``fin`` wide at every layer (``hidden`` after the first), and
  the first layer needs no backward SpMM nor gradient exchange (its input has no
  gradient); ``layernorm=True`` adds their LayerNorm after every hidden layer.
"""
from __future__ import annotations

from dataclasses import dataclass

from cdfgnn.cost.ledger import Ledger
from cdfgnn.errors import CdfgnnError

#: the dtype these counts are of, and its element size
DTYPE = "float32"
F32 = 4
IDX = 8
#: elementwise kernels per layer and direction (bias, self term, activation, dropout
#: mask): each reads two and writes one output-sized tensor
ELEMENTWISE_PASSES = {"fwd": 3, "bwd": 4}
#: elementwise kernels of one Adam step per parameter tensor (zero_grad, weight decay,
#: the two moments, bias corrections, the update), each touching 3 tensors of its size
ADAM_KERNELS = 8


@dataclass(frozen=True)
class ModelShape:
    model: str                      # "gcn" | "sage"
    in_dim: int
    hidden: int
    out_dim: int
    layers: int
    dropout: float = 0.0
    order: str = "transform-first"  # | "aggregate-first"
    layernorm: bool = False

    def __post_init__(self) -> None:
        if self.model not in ("gcn", "sage"):
            raise CdfgnnError(f"estimate: model {self.model!r} not supported (gcn, sage)")
        if self.order not in ("transform-first", "aggregate-first"):
            raise CdfgnnError(f"estimate: order {self.order!r}; valid: transform-first, "
                              "aggregate-first")
        if min(self.in_dim, self.hidden, self.out_dim, self.layers) < 1:
            raise CdfgnnError("estimate: dimensions and layers must be >= 1")

    @property
    def dims(self) -> list[tuple[int, int]]:
        d = [self.in_dim] + [self.hidden] * (self.layers - 1) + [self.out_dim]
        return list(zip(d[:-1], d[1:]))

    def message_width(self, layer: int) -> int:
        fin, fout = self.dims[layer]
        return fout if self.order == "transform-first" else fin


@dataclass(frozen=True)
class RankShape:
    """One rank's local graph: ``out_rows`` aggregated rows (edge cut: owned; vertex
    cut: every local replica), ``in_rows`` rows the SpMM reads (owned + halo; vertex
    cut: = out_rows), ``nnz`` local arcs, ``self_rows`` rows with a self term (owned /
    masters), ``label_rows`` training rows of the loss, ``send_rows`` / ``recv_rows``
    rows sent to / received from other ranks per sync point."""

    out_rows: int
    in_rows: int
    nnz: int
    self_rows: int
    label_rows: int
    send_rows: int
    recv_rows: int


def rank_shapes(books, train_mask=None) -> list[RankShape]:
    """The shapes of every rank from its :class:`~cdfgnn.partition.book.PartitionBook`
    (``train_mask``: the graph's training mask, for the loss rows)."""
    out = []
    for r, b in enumerate(books):
        rows = b.adj_rows
        sent = sum(len(i) for q, i in enumerate(b.send_idx) if q != r)
        recv = sum(len(i) for q, i in enumerate(b.recv_idx) if q != r)
        owned = b.local_nodes[: b.num_owned]
        labels = int(train_mask[owned].sum()) if train_mask is not None else b.num_owned
        out.append(RankShape(rows, b.num_local, int(len(b.adj_indices)), b.num_owned,
                             labels, sent, recv))
    return out


def _dense(led: Ledger, phase: str, m: int, k: int, n: int) -> None:
    led.add(phase, "dense", calls=1, flops=2 * m * k * n, bytes=F32 * (m * k + k * n + m * n))


def _spmm(led: Ledger, phase: str, rows: int, cols: int, nnz: int, w: int) -> None:
    led.add(phase, "spmm", calls=1, flops=2 * nnz * w, nnz=nnz, nnz_w=nnz * w,
            rows_w=rows * w, cols_w=cols * w)


def _weight(led: Ledger, fwd: str, bwd: str, rows: int, fin: int, fout: int,
            input_grad: bool) -> None:
    """``h @ W`` forward, and its weight (and input) gradient products."""
    _dense(led, fwd, rows, fin, fout)
    _dense(led, bwd, fin, rows, fout)
    if input_grad:
        _dense(led, bwd, rows, fout, fin)


def estimate_ledger(model: ModelShape, rank: RankShape, codec_bits: int = 32,
                    edge_cut: bool = True) -> Ledger:
    """The counts of one training epoch of one rank (exact sync, float32: :data:`DTYPE`)."""
    led = Ledger()
    n_out, n_in, k = rank.out_rows, rank.in_rows, rank.self_rows
    src_rows = n_out if edge_cut else n_in      # rows of the layer's input h
    for i, (fin, fout) in enumerate(model.dims):
        fwd, bwd = f"fwd/L{i}", f"bwd/L{i}"
        grad_in = i > 0                          # the input features need no gradient
        w = model.message_width(i)
        if model.order == "transform-first":
            _weight(led, fwd, bwd, src_rows, fin, fout, grad_in)
            _spmm(led, fwd, n_out, n_in, rank.nnz, fout)
            _spmm(led, bwd, n_in, n_out, rank.nnz, fout)
        else:
            _spmm(led, fwd, n_out, n_in, rank.nnz, fin)
            if grad_in:
                _spmm(led, bwd, n_in, n_out, rank.nnz, fin)
            _weight(led, fwd, bwd, n_out, fin, fout, True)
        if model.model == "sage":                # W_self on the self rows
            _weight(led, fwd, bwd, k, fin, fout, grad_in)
        _sync(led, fwd, bwd, rank, w, codec_bits, backward=grad_in or
              model.order == "transform-first")
        for phase, passes in ((fwd, ELEMENTWISE_PASSES["fwd"]),
                              (bwd, ELEMENTWISE_PASSES["bwd"])):
            layers_norm = model.layernorm and i < model.layers - 1
            led.add(phase, "elementwise", calls=passes + 2 * layers_norm,
                    bytes=3 * F32 * n_out * fout * (passes + 2 * layers_norm))
    _loss_and_optimizer(led, model, rank)
    return led


def _sync(led: Ledger, fwd: str, bwd: str, rank: RankShape, w: int, codec_bits: int,
          backward: bool) -> None:
    """Gathers of the rows sent and the concatenation or index_add of those received,
    and the codec's encode/decode (a lossy codec: two passes to encode, one to decode)."""
    for phase, send, recv in ((fwd, rank.send_rows, rank.recv_rows),
                              (bwd, rank.recv_rows, rank.send_rows))[: 2 if backward else 1]:
        led.add(phase, "gather", calls=2, bytes=IDX * send + 2 * F32 * send * w
                + IDX * recv + 3 * F32 * recv * w)
        if codec_bits < 32:
            wire_in, wire_out = F32 * send * w, send * (w * codec_bits // 8 + 8)
            led.add("codec", "codec", calls=3, bytes=2 * wire_in + wire_out
                    + (send * (w * codec_bits // 8 + 8)) + F32 * recv * w)


def _loss_and_optimizer(led: Ledger, model: ModelShape, rank: RankShape) -> None:
    c = model.out_dim
    led.add("fwd/head", "elementwise", calls=4, bytes=4 * F32 * rank.label_rows * c)
    led.add("bwd/head", "elementwise", calls=3, bytes=3 * F32 * rank.label_rows * c)
    mult = 2 if model.model == "sage" else 1
    for fin, fout in model.dims:
        for numel in [fin * fout] * mult + [fout]:
            led.add("optimizer", "elementwise", calls=ADAM_KERNELS,
                    bytes=ADAM_KERNELS * 3 * F32 * numel)


def halo_bytes(model: ModelShape, rank: RankShape, codec_bits: int = 32) -> dict[int, int]:
    """Bytes rank sends per layer and epoch at exact sync (forward rows + backward
    gradients), by layer; a lossy codec adds 8 bytes of metadata per row."""
    out = {}
    for i in range(model.layers):
        w = model.message_width(i)
        per_row = F32 * w if codec_bits >= 32 else -(-codec_bits * w // 8) + 8
        backward = i > 0 or model.order == "transform-first"
        out[i] = per_row * (rank.send_rows + (rank.recv_rows if backward else 0))
    return out
