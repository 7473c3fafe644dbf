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

What a layer does is three choices of :class:`ModelShape`:

* ``order`` (:data:`ORDERS`): ``transform-first`` (this engine, PyG's GCNConv: ``t = h
  W``, then ``A t``), ``aggregate-first`` (BNS-GCN's, PipeGCN's and Sylvie's GraphSAGE
  layer, AdaQP, PyG's SAGEConv: ``A h``, then the weight) or ``narrower-first`` (DGL's
  GraphConv and SAGEConv: transform first when that narrows the rows, ``fout < fin``);
* ``exchange``: which rows cross the partition. ``projected`` (this engine): a
  transform-first layer exchanges its ``fout``-wide ``t`` rows, the weight multiplies the
  owned rows only; ``input`` (the peers' code, which exchanges a layer's input before
  calling it): the ``fin``-wide input rows, and a transform-first layer multiplies owned
  + halo rows. An aggregate-first layer always exchanges its input. A layer's backward
  sends gradients back for the rows it received when its input needs a gradient (not
  layer 0's features) or it exchanged projected rows (the weight's gradient needs them);
* ``static_first`` (the peers' ``--use-pp``): layer 0's halo input rows are fetched once
  before training, so layer 0 exchanges nothing; a GraphSAGE layer 0 is then one Linear
  on the precomputed ``[x, mean(x)]`` (``2 fin`` wide), GCN and GAT layers run as usual
  on the static rows. ``linear`` trailing layers are plain Linear layers (no graph);
  ``layernorm=True`` adds a LayerNorm after every hidden layer.

**GAT** (``model="gat"``, ``heads`` H) always projects first. ``hidden`` is the width of
one head; ``concat_heads=True`` (DGL's and PyG's examples) concatenates the H heads of a
hidden layer (``H x hidden`` wide outputs) and gives the output layer one head, ``False``
(Sylvie, this engine) averages them (``hidden`` wide, every layer H heads). Its attention
and aggregation are counted one of two ways (``gat_kernels``, :data:`GAT_KERNELS`); per
layer, with ``nnz`` arcs (self loops included) and ``F`` the projected width:

* ``fused`` (DGL's GATConv, :func:`_gat_layer`): forward, the two score reductions over
  the projected rows (``elementwise``), the per-arc scores and the softmax over ``nnz x H``
  values (gathers and elementwise passes), the weighted aggregation (one ``spmm`` of width
  ``F``); backward, the aggregation's transpose (``spmm``), the SDDMM of the scores'
  gradient (an ``spmm`` entry gathering ``2 nnz F`` inputs into ``nnz H`` outputs), the
  softmax and score gradients;
* ``gather-scatter`` (this engine's GATLayer, PyG's GATConv, PGL's gat:
  :func:`_gat_layer_gather_scatter`): a message row per arc, ``nnz x F`` wide, gathered,
  scaled and index-added forward, and each of those backwards; no ``spmm``. Its products
  and indexed reads and writes equal what the engine counts on one rank, its elementwise
  bytes are within 20% per layer (tested).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from cdfgnn.comm.codecs import Codec, get_codec, is_identity
from cdfgnn.cost.counts import Ledger
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


MODELS = ("gcn", "sage", "gat")
ORDERS = ("transform-first", "aggregate-first", "narrower-first")
#: how a GAT layer aggregates: one weighted SpMM (DGL) or a message row per arc
GAT_KERNELS = ("fused", "gather-scatter")
EXCHANGES = ("projected", "input")


@dataclass(frozen=True)
class Wire:
    """How a halo row crosses the partition: the engine's codec that packs it
    (:mod:`cdfgnn.comm.codecs`: ``none`` sends float32 rows, ``fp16`` casts,
    ``stochastic-b`` packs b bits per value plus a float16 scale and minimum per row as
    Sylvie's ``quantize_and_pack`` does, ``linear-B`` the same with float32 metadata) and
    the ``messages`` per peer and direction it takes (Sylvie's code sends the codes, the
    scales and the minima as three all-to-alls, zxmeng98/Sylvie@d8912d2
    helper/feature_buffer.py ``__feat_transfer``)."""

    codec: str = "none"
    messages: int = 1

    def __post_init__(self) -> None:
        self.kind                             # an unknown spec names the valid ones
        if self.messages < 1:
            raise CdfgnnError(f"wire: messages must be >= 1, got {self.messages!r}")

    @cached_property
    def kind(self) -> Codec:
        """The engine's codec of ``codec``, parsed once."""
        return get_codec(self.codec)

    @property
    def lossy(self) -> bool:
        return not is_identity(self.kind)

    def row_bytes(self, w: int) -> int:
        """Bytes of one ``w``-wide row on the wire (the codec's own count)."""
        return self.kind.wire_bytes(1, w)


#: float32 rows, one message per peer and direction
EXACT_WIRE = Wire()


@dataclass(frozen=True)
class ModelShape:
    model: str                      # "gcn" | "sage" | "gat"
    in_dim: int
    hidden: int
    out_dim: int
    layers: int
    dropout: float = 0.0
    order: str = "transform-first"  # | "aggregate-first" | "narrower-first"
    layernorm: bool = False
    heads: int = 1                  # GAT heads
    concat_heads: bool = False      # GAT: hidden layers concatenate their heads
    gat_kernels: str = "fused"      # GAT: "fused" (DGL) | "gather-scatter" (this engine, PyG)
    exchange: str = "projected"     # | "input" (module docstring)
    static_first: bool = False      # --use-pp: layer 0's halo inputs fetched once
    linear: int = 0                 # trailing plain Linear layers

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise CdfgnnError(f"estimate: model {self.model!r} not supported "
                              f"({', '.join(MODELS)})")
        if self.order not in ORDERS:
            raise CdfgnnError(f"estimate: order {self.order!r}; valid: {', '.join(ORDERS)}")
        if self.exchange not in EXCHANGES:
            raise CdfgnnError(f"estimate: exchange {self.exchange!r}; valid: "
                              f"{', '.join(EXCHANGES)}")
        if self.gat_kernels not in GAT_KERNELS:
            raise CdfgnnError(f"estimate: gat_kernels {self.gat_kernels!r}; valid: "
                              f"{', '.join(GAT_KERNELS)}")
        if min(self.in_dim, self.hidden, self.out_dim, self.layers, self.heads) < 1:
            raise CdfgnnError("estimate: dimensions, layers and heads must be >= 1")
        if not 0 <= self.linear <= self.layers:
            raise CdfgnnError(f"estimate: linear layers must be in [0, layers], got "
                              f"{self.linear}")

    @property
    def dims(self) -> list[tuple[int, int]]:
        """(input, output) width of every layer (GAT with ``concat_heads``: hidden layers
        ``heads x hidden``)."""
        concat = self.model == "gat" and self.concat_heads
        width = self.hidden * (self.heads if concat else 1)
        d = [self.in_dim] + [width] * (self.layers - 1) + [self.out_dim]
        return list(zip(d[:-1], d[1:]))

    def graph_layer(self, layer: int) -> bool:
        """Does ``layer`` aggregate over the graph (not a trailing Linear)?"""
        return layer < self.layers - self.linear

    def precomputed(self, layer: int) -> bool:
        """Layer 0 of a GraphSAGE with ``static_first``: a Linear on [x, mean(x)]."""
        return layer == 0 and self.static_first and self.model == "sage"

    def layer_heads(self, layer: int) -> int:
        if self.model != "gat":
            return 1
        return 1 if self.concat_heads and layer == self.layers - 1 else self.heads

    def projected_width(self, layer: int) -> int:
        """Width of a GAT layer's projected rows (all heads)."""
        fin, fout = self.dims[layer]
        heads = self.layer_heads(layer)
        return fout if self.concat_heads and heads > 1 else fout * heads

    def transforms_first(self, layer: int) -> bool:
        """Does ``layer`` multiply by its weight before aggregating?"""
        if self.model == "gat" or self.order == "transform-first":
            return True
        if self.order == "aggregate-first":
            return False
        fin, fout = self.dims[layer]
        return fout < fin

    def exchanges_projected(self, layer: int) -> bool:
        return self.exchange == "projected" and self.transforms_first(layer)

    def syncs(self, layer: int) -> bool:
        """Does ``layer`` exchange halo rows every epoch?"""
        return self.graph_layer(layer) and not (layer == 0 and self.static_first)

    def sync_backward(self, layer: int) -> bool:
        """Does ``layer``'s backward send gradients of the rows it received?"""
        return self.syncs(layer) and (layer > 0 or self.exchanges_projected(layer))

    def message_width(self, layer: int) -> int:
        """Width of the rows ``layer`` exchanges (0: it exchanges none)."""
        if not self.syncs(layer):
            return 0
        fin, fout = self.dims[layer]
        if not self.exchanges_projected(layer):
            return fin
        return self.projected_width(layer) if self.model == "gat" else fout

    def param_count(self) -> int:
        """Parameters the gradient all-reduce sums: weights, biases, GAT attention
        vectors, LayerNorm scales and shifts."""
        total = 0
        for i, (fin, fout) in enumerate(self.dims):
            total += self._layer_params(i, fin, fout)
            if self.layernorm and i < self.layers - 1:
                total += 2 * fout
        return total

    def _layer_params(self, i: int, fin: int, fout: int) -> int:
        if not self.graph_layer(i):
            return fin * fout + fout
        if self.model == "sage":               # two weights (or one on [x, mean x])
            return 2 * fin * fout + (fout if self.precomputed(i) else 2 * fout)
        if self.model == "gat":
            width = self.projected_width(i)
            return fin * width + 2 * width + fout
        return fin * fout + fout


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


def estimate_ledger(model: ModelShape, rank: RankShape, wire: Wire = EXACT_WIRE,
                    edge_cut: bool = True) -> Ledger:
    """The counts of one training epoch of one rank (float32: :data:`DTYPE`; a lossy
    ``wire`` adds its codec's kernels, :func:`_sync`)."""
    led = Ledger()
    n_out = rank.out_rows
    for i, (fin, fout) in enumerate(model.dims):
        fwd, bwd = f"fwd/L{i}", f"bwd/L{i}"
        if not model.graph_layer(i) or model.precomputed(i):
            k = 2 * fin if model.precomputed(i) else fin
            _weight(led, fwd, bwd, n_out, k, fout, i > 0)
        else:
            _graph_layer(led, model, rank, i, fin, fout, edge_cut)
        if model.syncs(i):
            _sync(led, fwd, bwd, rank, model.message_width(i), wire,
                  backward=model.sync_backward(i))
        for phase, passes in ((fwd, ELEMENTWISE_PASSES["fwd"]),
                              (bwd, ELEMENTWISE_PASSES["bwd"])):
            layers_norm = model.layernorm and i < model.layers - 1
            led.add(phase, "elementwise", calls=passes + 2 * layers_norm,
                    bytes=3 * F32 * n_out * fout * (passes + 2 * layers_norm))
    _loss_and_optimizer(led, model, rank)
    return led


def _graph_layer(led: Ledger, model: ModelShape, rank: RankShape, i: int, fin: int,
                 fout: int, edge_cut: bool) -> None:
    """Layer i's products: weight, aggregation (and GAT's attention), forward and
    backward."""
    fwd, bwd = f"fwd/L{i}", f"bwd/L{i}"
    n_out, n_in, k = rank.out_rows, rank.in_rows, rank.self_rows
    grad_in = i > 0                              # the input features need no gradient
    # rows the weight multiplies: owned (projected exchange, or every local row of a
    # vertex cut) or owned + halo (the input was exchanged)
    if model.exchanges_projected(i):
        src_rows = n_out if edge_cut else n_in
    else:
        src_rows = n_in
    if model.model == "gat":
        width = model.projected_width(i)
        _weight(led, fwd, bwd, src_rows, fin, width, grad_in)
        if model.gat_kernels == "gather-scatter":
            _gat_layer_gather_scatter(led, fwd, bwd, rank, width, model.layer_heads(i), fout)
        else:
            _gat_layer(led, fwd, bwd, rank, width, model.layer_heads(i))
        if width != fout and model.gat_kernels == "fused":   # heads averaged into fout
            led.add(fwd, "elementwise", calls=1, bytes=F32 * n_out * (width + fout))
            led.add(bwd, "elementwise", calls=1, bytes=F32 * n_out * (width + fout))
    elif model.transforms_first(i):
        _weight(led, fwd, bwd, src_rows, fin, fout, grad_in)
        _spmm(led, fwd, n_out, n_in, rank.nnz, fout)
        _spmm(led, bwd, n_in, n_out, rank.nnz, fout)
    else:
        _spmm(led, fwd, n_out, n_in, rank.nnz, fin)
        if grad_in:
            _spmm(led, bwd, n_in, n_out, rank.nnz, fin)
        _weight(led, fwd, bwd, n_out, fin, fout, True)
    if model.model == "sage":                    # W_self on the self rows
        _weight(led, fwd, bwd, k, fin, fout, grad_in)


def _gat_layer(led: Ledger, fwd: str, bwd: str, rank: RankShape, width: int,
               heads: int) -> None:
    """One GAT layer's attention and aggregation over projected rows ``width`` wide (the
    module docstring): forward and backward."""
    n_out, n_in, nnz = rank.out_rows, rank.in_rows, rank.nnz
    edge = F32 * nnz * heads                 # one value per arc and head
    # scores: (t x a).sum(-1) over the source rows (all) and the destination rows (owned)
    led.add(fwd, "elementwise", calls=4,
            bytes=2 * F32 * (n_in + n_out) * width + 2 * F32 * (n_in + n_out) * heads)
    # per-arc score, leaky ReLU, softmax: two gathers of the scores, a scatter max, the
    # gather of the maxima, an index_add of the denominators, the gather of them
    led.add(fwd, "gather", calls=6, bytes=6 * IDX * nnz + 17 * edge)
    led.add(fwd, "elementwise", calls=4, bytes=4 * 3 * edge)      # add, leaky, exp, divide
    _spmm(led, fwd, n_out, n_in, nnz, width)                      # sum_u alpha_vu t_u
    led.add(fwd, "gather", calls=1, bytes=edge)                   # alpha per head
    _spmm(led, bwd, n_in, n_out, nnz, width)                      # d t through alpha
    # SDDMM: d alpha_vu = <d z_v, t_u> per head
    led.add(bwd, "spmm", calls=1, flops=2 * nnz * width, nnz=nnz, nnz_w=2 * nnz * width,
            rows_w=nnz * heads, cols_w=(n_in + n_out) * width)
    # softmax and leaky ReLU backward, scatter of the score gradients to both ends
    led.add(bwd, "elementwise", calls=4, bytes=4 * 3 * edge)
    led.add(bwd, "gather", calls=4, bytes=4 * IDX * nnz + 12 * edge)
    # score gradients back into the projected rows: d t += d s x a
    led.add(bwd, "elementwise", calls=2,
            bytes=2 * 3 * F32 * (n_in + n_out) * width)


def _gat_layer_gather_scatter(led: Ledger, fwd: str, bwd: str, rank: RankShape, width: int,
                              heads: int, fout: int) -> None:
    """One GAT layer's attention and aggregation as this engine runs it
    (:class:`cdfgnn.models.layers.GATLayer`; PyG's and PGL's GAT likewise send one message
    row per arc): the projected source row of every arc is gathered (``nnz x width``), scaled
    by its attention and index-added into its destination, and the head mean taken. The
    bytes follow the kernels autograd runs for it, counted as :mod:`cdfgnn.cost.ledger`
    counts them (elementwise: every operand and the output; an indexed read: twice its
    output plus an ``index_select``'s index; an indexed write: three times its source plus
    its index); the bias is in the layer's generic passes."""
    n_out, n_in, nnz = rank.out_rows, rank.in_rows, rank.nnz
    e, w = F32 * nnz * heads, F32 * nnz * width          # per arc: scores, message rows
    t_in, t_out = F32 * n_in * width, F32 * n_out * width
    s_in, s_out = F32 * n_in * heads, F32 * n_out * heads
    att, z, idx = F32 * width, F32 * n_out * fout, IDX * nnz
    # scores of both ends, per-arc scores, softmax, messages, index_add, head mean
    led.add(fwd, "elementwise", calls=14,
            bytes=5 * t_in + 5 * t_out + s_in + 3 * s_out + 14 * e + 2 * w + 2 * att + z)
    led.add(fwd, "gather", calls=8, bytes=16 * e + 5 * w + 2 * idx)
    # the same backwards: message gradients (to the rows and to the attention), softmax
    # and leaky ReLU, score gradients into the projected rows and the attention vectors
    led.add(bwd, "elementwise", calls=25,
            bytes=7 * w + 28 * e + 9 * t_out + 14 * t_in + 2 * s_out + s_in + 4 * att)
    led.add(bwd, "gather", calls=6, bytes=5 * w + 11 * e + 2 * idx)


def _sync(led: Ledger, fwd: str, bwd: str, rank: RankShape, w: int, wire: Wire,
          backward: bool) -> None:
    """Gathers of the rows sent and the concatenation or index_add of those received,
    and a lossy wire's codec in phase ``codec``, counted as the engine counts it
    (:func:`cdfgnn.comm.codecs.counted`: per operation its ``passes`` reads of the input,
    one write of the output, its launches): encode the float32 rows sent, decode the
    packed rows received."""
    passes = wire.kind.passes
    (enc_reads, enc_calls), (dec_reads, dec_calls) = passes["encode"], passes["decode"]
    packed = wire.row_bytes(w)
    for phase, send, recv in ((fwd, rank.send_rows, rank.recv_rows),
                              (bwd, rank.recv_rows, rank.send_rows))[: 2 if backward else 1]:
        led.add(phase, "gather", calls=2, bytes=IDX * send + 2 * F32 * send * w
                + IDX * recv + 3 * F32 * recv * w)
        if wire.lossy:
            led.add("codec", "codec", calls=enc_calls + dec_calls,
                    bytes=enc_reads * F32 * send * w + send * packed
                    + dec_reads * recv * packed + F32 * recv * w)


def _loss_and_optimizer(led: Ledger, model: ModelShape, rank: RankShape) -> None:
    c = model.out_dim
    led.add("fwd/head", "elementwise", calls=4, bytes=4 * F32 * rank.label_rows * c)
    led.add("bwd/head", "elementwise", calls=3, bytes=3 * F32 * rank.label_rows * c)
    # one Adam step: per parameter tensor ADAM_KERNELS kernels over 3 tensors of its size
    # (weights and the rest: every layer has a weight-sized and a vector-sized part)
    n = model.param_count()
    tensors = sum(2 + (model.model == "sage" and model.graph_layer(i)
                       and not model.precomputed(i))
                  + 2 * (model.model == "gat" and model.graph_layer(i))   # attention vectors
                  for i in range(model.layers))
    led.add("optimizer", "elementwise", calls=ADAM_KERNELS * tensors,
            bytes=ADAM_KERNELS * 3 * F32 * n)


def halo_traffic(model: ModelShape, halo_rows, r: int, wire: Wire = EXACT_WIRE,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and messages rank r sends to each rank in one epoch, from ``halo_rows[q][s]``
    (distinct rows rank q needs from rank s): at every layer that syncs, the rows its
    peers need from it (``halo_rows[:, r]``) at the layer's message width, and, where the
    layer's backward sends gradients, those of the rows r received (``halo_rows[r, :]``);
    each row at ``wire.row_bytes`` (float32 at exact sync), ``wire.messages`` messages per
    peer and direction that has rows."""
    halo = np.asarray(halo_rows, dtype=np.float64)
    p = halo.shape[0]
    to_bytes, to_msgs = np.zeros(p), np.zeros(p)
    for i in range(model.layers):
        w = model.message_width(i)
        if not w:
            continue
        rows = halo[:, r].copy()
        msgs = (halo[:, r] > 0).astype(np.float64)
        if model.sync_backward(i):
            rows += halo[r, :]
            msgs += halo[r, :] > 0
        to_bytes += rows * wire.row_bytes(w)
        to_msgs += msgs * wire.messages
    to_bytes[r] = to_msgs[r] = 0.0
    return to_bytes, to_msgs
