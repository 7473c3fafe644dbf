"""Validate the device time model part by part, and price rows it never saw.

The model is the package's (:mod:`cdfgnn.pricing`): this script holds no pricing rule. For
every published row it builds counts without training (:mod:`cdfgnn.pricing.estimate`,
with the layer order and flags of the system that produced the row and, for distributed
rows, the partition statistics of :func:`halo_source`) and the row's cluster (its card's
profile, :func:`cdfgnn.pricing.hardware.card_profile`; its interconnect text read by
:mod:`cdfgnn.pricing.interconnect`), and prices them with the package's functions
(:func:`cdfgnn.pricing.record.price_counts`, :func:`cdfgnn.pricing.roofline.op_seconds`).

Parts, each a line per half (``<half> <part>: N rows, median ratio R, within 2x: S%``,
R the median of predicted / published seconds):

* ``kernel``: one SpMM (``kernel_spmm.csv``: the ledger's SpMM entry for the graph's
  vertices, arcs and the width) and the host copies of ``published_epochs.csv``;
* ``single-GPU epoch``: full-graph epochs on one GPU (``single_gpu_epochs.csv``, and
  one-GPU rows of ``published_epochs.csv`` not in it);
* ``compute``: the source's own time outside communication (``compute_s``), compared
  as the source defines it (the first word of ``compute_def``, :data:`COMPUTE_DEFS`):
  ``epoch-minus-comm-reduce`` with the mean over ranks of the priced compute (for the
  PipeGCN lineage, whose all-reduce timer holds the GPU tail of layer 0's backward, less
  that tail, which joins the all-reduce: :data:`_PEER`),
  ``epoch-minus-comm`` with that and the all-reduce, ``forward-backward`` with the layers'
  priced forward and backward, ``aggregation-only`` with the priced SpMMs;
* ``communication``: the published halo-exchange seconds (``comm_s``), compared with the
  epoch less the mean compute and all-reduce of a rank (a source's rank times its
  exchange together with the wait for the slowest rank); for a pipelined system whose
  compute is ``epoch-minus-comm-reduce``, the exchange wait plus the all-reduce (epoch
  minus compute) on both sides, because its all-reduce timer holds the exchange still in
  flight (``_pipelined``); ``0`` is a value: times below 1% of the row's epoch count as
  1% of it on both sides;
* ``epoch``: every distributed epoch (``published_epochs.csv`` and
  ``published_epochs_extra.csv``).

Rows are split once per file family (kernels, single-GPU epochs, distributed rows) into
a calibration and a validation half, stratified by source: the rows of each source group
(the ``source`` text before its first space), in CRC order of their ``source`` text, go
alternately to the two halves; the split never reads a number. Every constant of
:mod:`cdfgnn.pricing.efficiency` that some calibration row depends on is fitted on the
calibration halves of all parts together (each part weighs the same: the mean over parts
of the mean absolute log ratio, robust to a few rows far off), within ``FIT_BOUNDS``.
``--write-efficiency`` stores them in the package; nothing else keeps a constant. The
run prints the per-row table, then the validation half's lines per part and repository
(the pooled lines weigh rows, and one repository can hold most of a part's rows), and
ends with the ten lines ``<half> <part>: N rows, median ratio R, within 2x: S%``.

``--frozen`` prices the ``--published`` file with the stored constants (no fit), prints
per row its predicted and published parts, then per repository the summary of its rows'
main part (``held-out <part> by repository <repo>: ...``), and ends with ``held-out: N
rows, median ratio R, within 2x: S%``. Its schema is read from its
header (a distributed, single-GPU or kernel file). A row that cannot be priced is
skipped with one line naming the field and value; a malformed file stops with one line.

**Partition statistics** (:func:`halo_source`): the METIS partition of the dataset's
synthetic twin at ``--scale`` vertices (``cdfgnn.twins.halo.twin_halo``: the twins are
fitted to partition like the real graphs, docs/twins.md; the train-induced subgraph in the
inductive regime), every count scaled by ``real vertices / scale`` (cached under
``--cache``); where ``real_partition_stats.csv`` gives METIS halo copies per vertex for
the graph, P and the transductive regime, the halo rows take that published total, and
where ``real_partition_parts.csv`` gives the per-part counts behind it, each part sends
the published count (the twin's parts matched to the real ones by rank: the largest
twin sender sends the largest real count). The twin gives the pattern, who receives a
part's rows; a graph without a twin gets balanced parts, each sender's rows spread evenly
over the others. No other factor touches a halo.

Usage:
    python benchmarks/time_model.py [--data-dir DIR] [--published FILE ...] [--frozen]
                                    [--scale N] [--cache DIR] [--build-counts]
                                    [--write-efficiency]
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import math
import os
import re
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "benchmarks" / "data"
DEFAULT_CACHE = ROOT / "results" / "time_model"
EPOCH_FILES = ("published_epochs.csv", "published_epochs_extra.csv")
SINGLE_FILE = "single_gpu_epochs.csv"
KERNEL_FILE = "kernel_spmm.csv"
STATS_FILE = "real_partition_stats.csv"
PARTS_FILE = "real_partition_parts.csv"
SEED = 0

COLUMNS = ("source", "system", "dataset", "model", "layers", "hidden", "gpus", "hosts",
           "gpu_type", "interconnect", "backend", "epoch_s", "comm_s", "notes")
SINGLE_COLUMNS = ("source", "system", "card", "dataset", "vertices", "arcs", "features",
                  "classes", "model", "layers", "hidden", "heads", "epoch_s", "includes")
KERNEL_COLUMNS = ("source", "card", "graph", "vertices", "arcs", "width", "kernel", "dtype",
                  "value", "unit")
PARTS = ("kernel", "single-GPU epoch", "compute", "communication", "epoch")
HALVES = ("calibration", "validation")
#: times below this share of a row's published epoch count as that share (a published 0)
FLOOR = 0.01


# ----------------------------------------------------------------------------- input
class InputError(Exception):
    """A malformed file: one line naming it."""


class Skip(Exception):
    """A row that cannot be priced: the field, its value and why."""

    def __init__(self, field_: str, value, why: str):
        super().__init__(f"{field_} {value!r}: {why}")


def read_table(path: str | os.PathLike, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line, record) of every row; a missing file or column, unreadable text or no rows
    raises InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(f"{path}: missing column {missing[0]!r}")
            rows = [(i, rec) for i, rec in enumerate(reader, start=2)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable ({exc})") from None
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def schema_of(path: str | os.PathLike) -> str:
    """``epoch``, ``single`` or ``kernel``: which file family a CSV's header is."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as f:
            header = set(next(csv.reader(f), []))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable ({exc})") from None
    if {"width", "kernel"} <= header:
        return "kernel"
    if {"card", "includes"} <= header:
        return "single"
    return "epoch"


def _text(rec: dict, col: str) -> str:
    return (rec.get(col) or "").strip()


def _num(rec: dict, col: str, kind=float, optional: bool = False, positive: bool = False):
    text = _text(rec, col)
    if not text:
        if optional:
            return None
        raise Skip(col, text, "missing")
    try:
        value = kind(text)
    except ValueError:
        raise Skip(col, text, "not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise Skip(col, text, "must be finite and > 0" if positive else "must be >= 0")
    return value


def source_group(source: str) -> str:
    return source.split(" ", 1)[0]


# ----------------------------------------------------------------------------- systems
@dataclass(frozen=True)
class System:
    """How the code behind a distributed row trains (read from its public code)."""

    order: str = "aggregate-first"       # order inside a GCN/GAT layer (estimate.ORDERS)
    exchange: str = "input"              # rows that cross the partition (estimate)
    layernorm: bool = False
    static_first: bool = False           # --use-pp: layer 0's halo inputs fetched once
    pipeline: bool = False               # halo exchange overlaps compute (stale)
    boundary_rate: float = 1.0           # BNS-GCN: share of boundary vertices sampled
    concat_heads: bool = False           # GAT: hidden layers concatenate heads
    #: the regime the system's scripts use per dataset where a row does not say
    inductive: frozenset = frozenset()
    sage_order: str = ""                 # inside a GraphSAGE layer ("": as ``order``)
    gat_kernels: str = "fused"           # GAT aggregation (estimate.GAT_KERNELS)
    #: its all-reduce timer holds the GPU tail of layer 0's backward (:data:`_PEER`)
    first_backward_in_reduce: bool = False
    #: how halo rows travel (``cdfgnn.pricing.estimate.Wire``): the engine's codec spec
    #: (``none``: exact float32 sync) and the messages per peer and direction
    wire_codec: str = "none"
    wire_messages: int = 1

    def layer_order(self, kind: str) -> str:
        """The order inside a layer of model ``kind`` (``gcn``, ``sage``, ``gat``)."""
        return self.sage_order if kind == "sage" and self.sage_order else self.order


# Sylvie's module/model.py (the BNS-GCN / PipeGCN lineage): each layer's input rows are
# exchanged before the layer; GraphSAGE aggregates first (module/layer.py), GCN is DGL's
# GraphConv (transforms first when that narrows), GAT is DGL's GATConv with heads
# averaged; LayerNorm between layers; --use-pp (layer 0 on halo rows fetched once);
# scripts/*_full.sh: --inductive for reddit, yelp and amazon. GraphSAGELayer
# (module/layer.py) always aggregates at its input width, then applies its Linear, so
# its order is aggregate-first whatever the widths (zxmeng98/Sylvie@72572f6,
# GATECH-EIC/BNS-GCN and GATECH-EIC/PipeGCN share the layer).
# Its timers (Sylvie's and PipeGCN's helper/feature_buffer.py, train.py and
# helper/reducer.py; Bajaj et al.'s PipeGCN_GAT_GCN copy): the halo exchange of layer
# i >= 1 and its gradient hook call torch.cuda.current_stream().synchronize() before
# their comm timer starts, so the GPU work queued before them is compute; layer 0's
# input needs no gradient and has no hook, so nothing waits for layer 0's backward
# until the all-reduce threads copy its weight gradients to the host, inside
# reducer.synchronize(), which the reduce timer measures. The compute such a source
# publishes (epoch - comm - reduce) therefore leaves out the GPU time of layer 0's
# backward beyond the host's time to launch it (:meth:`Prepared.first_backward_tail`).
_PEER = System("narrower-first", "input", sage_order="aggregate-first", layernorm=True,
               static_first=True, inductive=frozenset({"reddit", "yelp", "amazon-products"}),
               first_backward_in_reduce=True)
SYSTEMS: dict[str, System] = {
    "exact (Sylvie code fp32)": _PEER,
    "pipegcn": dataclasses.replace(_PEER, pipeline=True),
    "bns-gcn p=0.1": dataclasses.replace(_PEER, boundary_rate=0.1),
    # the same code base without pipelining, as others ran it: GraNNDis's Opt_FB baseline
    # (no --use-pp, LayerNorm by default, nccl) and Bajaj et al.'s GAT extension (use_pp,
    # norm none, heads averaged), as the rows' notes read from their scripts
    "exact (GraNNDis Opt_FB)": dataclasses.replace(_PEER, static_first=False),
    "exact (PipeGCN code)": dataclasses.replace(_PEER, layernorm=False, inductive=frozenset()),
    # GNNPipe's graph-parallel baseline (applications/async_multi_gpus/gcn.cc): layer 0
    # transforms then aggregates, later layers aggregate then transform (DGL's rule at
    # its widths), mirror rows exchanged at every layer, no LayerNorm, no precompute
    # (its GraphSAGE aggregates first in every layer after the first, so its last,
    # narrowing layer is priced transform-first here: 1 layer of the rows' 16 or 32)
    "exact (GNNPipe graph-parallel)": System("narrower-first", "input"),
    # AdaQP model/distGCN.py: DistAggConv (aggregate) then W at every layer, no
    # precompute, LayerNorm (config use_norm: true), full graph
    "exact (AdaQP Vanilla)": System("aggregate-first", "input", layernorm=True),
}
# Sylvie-S and Sylvie-A as Sylvie's code runs them (zxmeng98/Sylvie@d8912d2
# helper/feature_buffer.py, the commit of its result files): the exact system above with
# every exchanged row (features forward, gradients backward) quantised per row to b bits
# (default 1) with a float16 scale and minimum (``quantize_and_pack``: 4 bytes per row),
# the codes, scales and minima sent as three all-to-alls (``__feat_transfer``,
# ``__grad_transfer``); the quantisation runs inside the comm timer, so it is priced on the
# communication side (the ledger's ``codec`` phase). Sylvie-A pipelines the exchange as
# PipeGCN does (``--enable-pipeline``; arXiv:2303.01277 sec. 4.3).
SYLVIE_BITS = (1, 2, 4, 8)
SYSTEMS.update({f"{name} int{bits}": dataclasses.replace(
    _PEER, pipeline=pipe, wire_codec=f"stochastic-{bits}", wire_messages=3)
    for name, pipe in (("sylvie-s", False), ("sylvie-a", True)) for bits in SYLVIE_BITS})
#: one-GPU systems, by the first word of a row's ``system``: layer orders, whether GAT's
#: hidden layers concatenate their heads, and GAT's kernels (DGL's GATConv aggregates with one weighted SpMM ("fused"); this engine's GATLayer,
#: PyG's GATConv (``message`` returns ``x_j * alpha``, summed by a scatter) and PGL's
#: ``gat`` (``send_attention`` sends the source row per arc, ``reduce_attention`` pools
#: it) materialise a message row per arc ("gather-scatter"))
_GATHER = "gather-scatter"
SINGLE_SYSTEMS: dict[str, System] = {
    "cdfgnn": System("transform-first", concat_heads=False, gat_kernels=_GATHER),  # this engine
    "dgl": System("narrower-first", concat_heads=True),                # GraphConv, SAGEConv
    "pyg": System("transform-first", sage_order="aggregate-first", concat_heads=True,
                  gat_kernels=_GATHER),                                # GCNConv, SAGEConv
    "pgl": System("narrower-first", sage_order="aggregate-first", concat_heads=True,
                  gat_kernels=_GATHER),                                # pgl.layers gcn
}
_SYSTEMS_ANY_CASE = {name.lower(): system for name, system in SYSTEMS.items()}
SYSTEM_HELP = ("a known system, or 'order=aggregate-first' / 'order=transform-first' "
               "(optionally with exchange=input|projected, layernorm, use-pp, pipeline, "
               "codec=SPEC)")


def system_of(text: str) -> System:
    """A known system (any case; ``bns-gcn p=<rate>`` at any boundary rate), or one named
    by its layer order (``order=...`` tokens)."""
    key = text.strip().lower()
    if key in _SYSTEMS_ANY_CASE:
        return _SYSTEMS_ANY_CASE[key]
    bns = re.fullmatch(r"bns-gcn\s+p\s*=\s*([0-9.]+)", key)
    if bns and 0.0 < float(bns.group(1)) <= 1.0:
        return dataclasses.replace(SYSTEMS["bns-gcn p=0.1"], boundary_rate=float(bns.group(1)))
    if re.fullmatch(r"sylvie-[sa]", key):                      # the paper's default, 1 bit
        return SYSTEMS[f"{key} int1"]
    tokens = dict(t.partition("=")[::2] for t in text.replace(",", " ").split())
    order = tokens.get("order")
    if order not in ("aggregate-first", "transform-first", "narrower-first"):
        if key.startswith("bns-gcn"):     # its boundary rate changes what is priced
            raise Skip("system", text, "BNS-GCN needs its boundary rate: 'BNS-GCN p=<rate>' "
                                       "(0 < rate <= 1), as the row's run set it")
        raise Skip("system", text, f"unknown; {SYSTEM_HELP}")
    exchange = tokens.get("exchange") or ("projected" if order == "transform-first" else "input")
    if exchange not in ("input", "projected"):
        raise Skip("system", text, "exchange must be input or projected")
    codec = tokens.get("codec") or "none"
    from cdfgnn.comm.codecs import get_codec
    from cdfgnn.errors import CdfgnnError
    try:
        get_codec(codec)
    except CdfgnnError as exc:
        raise Skip("system", text, str(exc)) from None
    return System(order, exchange, layernorm="layernorm" in tokens,
                  static_first="use-pp" in tokens, pipeline="pipeline" in tokens,
                  wire_codec=codec)


def single_system(text: str) -> System:
    key = text.split()[0].lower() if text.split() else ""
    for name, value in SINGLE_SYSTEMS.items():
        if key == name or key.startswith(name + "."):
            return value
    return system_of(text)                  # order=... tokens


# ----------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class Dataset:
    """Full-size figures of the peers' copy of a dataset and the twin that stands in."""

    twin: str
    nodes: int
    arcs: int                 # directed arcs (each undirected edge twice)
    features: int
    classes: int
    source: str
    graph: str = ""           # its name in real_partition_stats.csv (default: the key)


_CAPGNN_TABLE = "songxf1024/CaPGNN README dataset table (|V|, |E|, f_dim, classes)"
_DGL_CITATION = "dmlc/dgl python/dgl/data/citation_graph.py docstring statistics"
_CDFGNN_TABLE = "CDFGNN (arXiv 2408.00232) Table 1 (|V|, |E|, features, classes)"
DATASETS: dict[str, Dataset] = {
    # DGL's RedditDataset (the peers' loader), 114.6M arcs: ~492 per vertex (its twin is
    # synth-reddit-dgl; synth-reddit mirrors GraphSAINT's copy, 99.65 per vertex)
    "reddit": Dataset("synth-reddit-dgl", 232_965, 114_615_892, 602, 41, _CAPGNN_TABLE,
                      graph="reddit-dgl"),
    # OGB: 61,859,140 undirected edges, stored in both directions by DGL/OGB loaders
    "ogbn-products": Dataset("synth-products", 2_449_029, 2 * 61_859_140, 100, 47,
                             _CAPGNN_TABLE),
    "yelp": Dataset("synth-yelp", 716_847, 13_954_819, 300, 100, _CAPGNN_TABLE),
    "amazon-products": Dataset("synth-amazon", 1_569_960, 264_339_468, 200, 107,
                               _CAPGNN_TABLE),
    # OGB ogbn-arxiv symmetrised (1,166,243 citations both ways), as the peers load it
    "ogbn-arxiv": Dataset("synth-arxiv", 169_343, 2_315_598, 128, 40,
                          "OGB ogbn-arxiv statistics (169,343 nodes, 1,166,243 edges)"),
    # OGB ogbn-papers100M symmetrised (1,615,685,872 citations both ways; OGB's 128-wide
    # features, where CDFGNN's Table 1 prints 200) and Friendster (random 64-wide
    # features and 32 classes, as CDFGNN generates them): average degrees 29.10 and
    # 55.06, their twins' own
    "ogbn-papers100m": Dataset("synth-papers100m", 111_059_956, 2 * 1_615_685_872, 128, 172,
                               "OGB ogbn-papers100M statistics (111,059,956 nodes, "
                               "1,615,685,872 edges, 128 features, 172 classes)"),
    "friendster": Dataset("synth-friendster", 65_608_366, 2 * 1_806_067_135, 64, 32,
                          _CDFGNN_TABLE),
    # no twin: partitioned only where published halo statistics exist (pubmed)
    "cora": Dataset("", 2_708, 10_556, 1_433, 7, _DGL_CITATION),
    "citeseer": Dataset("", 3_327, 9_228, 3_703, 6, _DGL_CITATION),
    "pubmed": Dataset("", 19_717, 88_651, 500, 3, _DGL_CITATION),
}


#: other names papers and logs give these datasets (read lower-case, ``_`` as ``-``)
DATASET_ALIASES = {"products": "ogbn-products", "arxiv": "ogbn-arxiv",
                   "papers100m": "ogbn-papers100m", "amazon": "amazon-products",
                   "amazonproducts": "amazon-products", "friend": "friendster",
                   "com-friendster": "friendster"}


def dataset_key(text: str) -> str:
    """The :data:`DATASETS` key a written dataset name stands for (``Reddit``,
    ``ogbn-papers100M``, ``AmazonProducts``); any other text unchanged, so that a row
    naming a dataset without statistics is skipped naming what it wrote."""
    name = text.strip().lower().replace("_", "-")
    name = DATASET_ALIASES.get(name, name)
    return name if name in DATASETS else text


# ----------------------------------------------------------------------------- rows
MODELS = {"gcn": "gcn", "graphsage": "sage", "sage": "sage", "gat": "gat", "sgc": "gcn"}
COPY_MODELS = ("copy-h2d", "copy-d2h", "copy-d2d")
#: CaPGNN utils/eval_bw.py copies one 11585 x 11585 float32 tensor
COPY_BYTES = 11585 * 11585 * 4


@dataclass(frozen=True)
class Row:
    """One row of any file: where it is, its source and its published seconds."""

    file: str
    line: int
    source: str
    card: str
    published: dict             # part -> seconds
    fields: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}"


def _from_notes(rec: dict, col: str, pattern: str, default: int) -> int:
    """An optional integer column, else the first ``pattern`` match in the notes (the
    peers' flag as the source prints it), else ``default``."""
    if _text(rec, col):
        return int(_num(rec, col, int))
    m = re.search(pattern, rec.get("notes") or "")
    return int(m.group(1)) if m else default


def _linear_layers(rec: dict) -> int:
    """Trailing Linear layers: a ``linear`` column, else ``n-linear K`` in the notes."""
    return _from_notes(rec, "linear", r"n[-_]linear\s+(\d+)", 0)


def _heads(rec: dict) -> int:
    """GAT heads: a ``heads`` column, else ``num_heads K`` / ``heads K`` in the notes, else 1."""
    return max(_from_notes(rec, "heads", r"\b(?:num_heads|heads)\s+(\d+)", 1), 1)


def epoch_row(file: str, line: int, rec: dict) -> Row:
    """A distributed (or one-GPU, or copy) row of published_epochs*.csv; Skip if it
    cannot be priced."""
    model = _text(rec, "model").lower()
    if model not in MODELS and model not in COPY_MODELS:
        raise Skip("model", _text(rec, "model"),
                   f"known: {', '.join([*MODELS, *COPY_MODELS])}")
    backend = _text(rec, "backend").lower()
    if backend not in ("gloo", "nccl"):
        raise Skip("backend", backend, "known: gloo, nccl")
    ints = {c: int(_num(rec, c, int)) for c in ("layers", "hidden", "gpus", "hosts")}
    if ints["gpus"] < 1 or ints["hosts"] < 1 or ints["gpus"] % ints["hosts"]:
        raise Skip("gpus", rec["gpus"], f"must be a positive multiple of hosts ({rec['hosts']})")
    epoch = _num(rec, "epoch_s", positive=True)
    comm = _num(rec, "comm_s", optional=True)
    compute = _num(rec, "compute_s", optional=True)
    regime = _text(rec, "regime")
    if regime not in ("", "inductive", "transductive"):
        raise Skip("regime", regime, "known: transductive, inductive")
    heads = _heads(rec) if model == "gat" else 1
    if model in COPY_MODELS:              # a copy micro-benchmark: one kernel
        published = {"kernel": epoch}
    elif ints["gpus"] == 1:
        published = {"single-GPU epoch": epoch}
    else:
        published = {"epoch": epoch}
        if comm is not None:
            published["communication"] = comm
        if compute is not None:
            kind = compute_kind(_text(rec, "compute_def"))
            if kind is None:
                raise Skip("compute_def", _text(rec, "compute_def")[:40],
                           f"first word must be one of {', '.join(COMPUTE_DEFS)}")
            published["compute"] = compute
    # a pipelined row's communication holds its all-reduce (_pipelined), on both sides
    with_reduce = "communication" in published and "compute" in published and \
        compute_kind(_text(rec, "compute_def")) == "compute" and _pipelined(_text(rec, "system"))
    if with_reduce:
        published["communication"] = epoch - compute   # exchange wait + all-reduce
    return Row(file, line, _text(rec, "source"), _text(rec, "gpu_type"), published,
               {**ints, "system": _text(rec, "system"),
                "dataset": dataset_key(_text(rec, "dataset")), "comm_with_reduce": with_reduce,
                "model": model, "heads": int(heads), "linear": _linear_layers(rec),
                "interconnect": _text(rec, "interconnect"), "backend": backend,
                "regime": regime, "compute_def": _text(rec, "compute_def"),
                "notes": rec.get("notes") or ""})


def _pipelined(system: str) -> bool:
    """The row's system pipelines its halo exchange. Its exchange timer then holds only
    the blocking wait: the exchange still in flight delays the gradient all-reduce, which
    runs on the same gloo process group, and lands in the all-reduce timer (Sylvie's
    result files: with only ``pipeline`` switched on, ``reduce`` grows from 0.013 to 0.064
    s on Reddit GraphSAGE, 0.020 to 0.079 s on GCN, 0.027 to 0.107 s on AmazonProducts
    GraphSAGE, while ``compute`` stays). The communication such a row publishes is
    therefore compared as the exchange wait plus the all-reduce, epoch minus compute, on
    both sides."""
    try:
        return system_of(system).pipeline
    except Skip:
        return False


def single_row(file: str, line: int, rec: dict) -> Row:
    model = _text(rec, "model").lower()
    if model not in MODELS:
        raise Skip("model", _text(rec, "model"), f"known: {', '.join(MODELS)}")
    ints = {c: int(_num(rec, c, int)) for c in ("vertices", "arcs", "features", "classes",
                                                   "layers", "hidden")}
    ints["heads"] = int(_num(rec, "heads", int, optional=True) or 1)
    if min(ints["vertices"], ints["features"], ints["classes"], ints["layers"]) < 1:
        raise Skip("vertices", rec["vertices"], "vertices, features, classes and layers "
                   "must be >= 1")
    return Row(file, line, _text(rec, "source"), _text(rec, "card"),
               {"single-GPU epoch": _num(rec, "epoch_s", positive=True)},
               {**ints, "system": _text(rec, "system"),
                "dataset": dataset_key(_text(rec, "dataset")), "model": model})


def kernel_row(file: str, line: int, rec: dict) -> Row:
    dtype = _text(rec, "dtype")
    if dtype not in ("fp32", "fp64"):
        raise Skip("dtype", dtype, "known: fp32, fp64")
    unit = _text(rec, "unit")
    ints = {c: int(_num(rec, c, int, positive=True)) for c in ("vertices", "arcs", "width")}
    value = _num(rec, "value", positive=True)
    if unit == "ms":
        seconds = value / 1e3
    elif unit == "gflops":              # 2 nnz w FLOP per SpMM
        seconds = 2.0 * ints["arcs"] * ints["width"] / (value * 1e9)
    else:
        raise Skip("unit", unit, "known: ms, gflops")
    return Row(file, line, _text(rec, "source"), _text(rec, "card"), {"kernel": seconds},
               {**ints, "dtype": dtype, "graph": _text(rec, "graph"),
                "kernel": _text(rec, "kernel")})


#: what a published compute time covers (the first word of ``compute_def``) -> what of
#: the priced rank it is compared with: ``compute`` (every phase outside communication),
#: ``+reduce`` (and the all-reduce), ``fwd/bwd`` (the layers' forward and backward
#: phases), ``spmm`` (the aggregation kernels)
COMPUTE_DEFS = {"epoch-minus-comm-reduce": "compute", "epoch-minus-comm": "+reduce",
                "forward-backward": "fwd/bwd", "aggregation-only": "spmm"}


def compute_kind(definition: str) -> str | None:
    word = re.split(r"[:\s]", definition.strip(), maxsplit=1)[0] if definition.strip() else ""
    return COMPUTE_DEFS.get(word)


READERS = {"epoch": (COLUMNS, epoch_row), "single": (SINGLE_COLUMNS, single_row),
           "kernel": (KERNEL_COLUMNS, kernel_row)}


def read_rows(path: Path, schema: str, log: Callable[[str], None]) -> list[Row]:
    """The file's rows; each one that cannot be priced is skipped with one line."""
    required, parse = READERS[schema]
    out = []
    for line, rec in read_table(path, required):
        try:
            out.append(parse(path.name, line, rec))
        except Skip as exc:
            log(f"skipped {path.name} line {line}: {exc}")
    return out


# ----------------------------------------------------------------- partition statistics
#: twins generated in this process, reused for every P of a dataset and regime
_TWIN_GRAPHS: dict = {}


def twin_counts(dataset: str, inductive: bool, parts: int, scale: int, cache: Path,
                log: Callable[[str], None] = print):
    """METIS counts of the dataset's twin at ``scale`` vertices and P = ``parts``
    (``cdfgnn.twins.halo.twin_halo``, cached under ``cache``; the training subgraph when
    ``inductive``). The twin is the one whose average degree is the peers' copy's (DGL's
    Reddit: ``synth-reddit-dgl``), as fitted: its degree is not changed here, since the
    locality parameters were fitted at that degree."""
    from cdfgnn.twins.halo import twin_halo
    regime = "inductive" if inductive else "transductive"
    t0 = time.perf_counter()
    th = twin_halo(DATASETS[dataset].twin, parts, regime, nodes=scale, seed=SEED,
                   cache_dir=cache, graphs=_TWIN_GRAPHS)
    took = time.perf_counter() - t0
    if took > 1.0:   # wall time: METIS runs in a child process, outside this one's CPU time
        log(f"built {th.dataset} {regime} P={parts}: {th.part_nodes} vertices, {th.arcs} "
            f"arcs, {took:.0f} s")
    return th


def published_halo_copies(dataset: str, parts: int, data_dir: Path) -> float | None:
    """METIS halo copies per vertex that ``real_partition_stats.csv`` gives for this
    graph (its name there, arcs within 2%) and P, or None."""
    path = data_dir / STATS_FILE
    if not path.is_file():
        return None
    ds = DATASETS[dataset]
    for _, rec in read_table(path, ("graph", "arcs", "partitioner", "metric", "parts",
                                    "value")):
        try:
            same = (_text(rec, "graph") == (ds.graph or dataset) and int(rec["parts"]) == parts
                    and _text(rec, "partitioner").lower() == "metis"
                    and _text(rec, "metric") == "halo_copies_per_vertex"
                    and abs(float(rec["arcs"]) / ds.arcs - 1.0) <= 0.02)
        except ValueError:
            continue
        if same:
            return float(rec["value"])
    return None


def published_part_sends(dataset: str, parts: int, data_dir: Path) -> np.ndarray | None:
    """Per-part METIS send counts (rows each part sends per layer) that
    ``real_partition_parts.csv`` gives for this graph (its name there) and P, in part
    order, or None."""
    path = data_dir / PARTS_FILE
    if not path.is_file():
        return None
    sends = _part_sends_file(path).get((DATASETS[dataset].graph or dataset, parts))
    return None if sends is None else np.asarray(sends, dtype=np.float64)


@functools.lru_cache(maxsize=None)
def _part_sends_file(path: Path) -> dict:
    """The file read once per run (every priced row asks it):
    :func:`cdfgnn.twins.targets.read_part_sends`."""
    from cdfgnn.twins.targets import read_part_sends
    return read_part_sends(path)


def with_sends(halo: np.ndarray, sends: np.ndarray) -> np.ndarray:
    """``halo`` (``halo[r][q]``: rows r needs from q) with every sender's column total
    set to a published count: the k-th largest sender of ``halo`` sends the k-th largest
    count, its receivers in ``halo``'s proportions (evenly where it sends nothing)."""
    halo = np.array(halo, dtype=np.float64)
    p, col = halo.shape[0], halo.sum(axis=0)
    target = np.empty(p)
    target[np.argsort(col, kind="stable")] = np.sort(sends)
    halo *= np.divide(target, col, out=np.zeros(p), where=col > 0)
    silent = np.flatnonzero(col <= 0)
    halo[:, silent] = target[silent] / max(p - 1, 1)
    halo[silent, silent] = 0.0
    return halo


def halo_source(dataset: str, regime: str, parts: int, scale: int, cache: Path,
                data_dir: Path, log: Callable[[str], None] = print) -> dict:
    """Partition statistics at full size for a dataset, regime and P: owned, labelled,
    inner and halo arcs per part and ``halo_rows[r][q]`` (distinct rows r needs from q).
    The one place halos come from (module docstring): a twin's METIS partition (the twins
    partition like the real graphs, docs/twins.md), its halo total replaced by a
    published one where ``real_partition_stats.csv`` has it for the graph and P; without
    a twin, the published total spread evenly over balanced parts."""
    inductive = regime == "inductive"
    ds = DATASETS[dataset]
    copies = None if inductive else published_halo_copies(dataset, parts, data_dir)
    sends = None if inductive else published_part_sends(dataset, parts, data_dir)
    if not ds.twin:
        if copies is None and sends is None:
            raise Skip("dataset", dataset, f"no twin, and no published {regime} halo "
                       f"statistics at P = {parts}")
        out, pattern = even_counts(ds, parts), "even parts"
    else:
        th = twin_counts(dataset, inductive, parts, scale, cache, log)
        k = ds.nodes / th.nodes           # twin vertices -> the peers' copy's vertices
        out = {key: np.asarray(getattr(th, key), dtype=np.float64) * k
               for key in ("owned", "labelled", "inner_arcs", "halo_arcs", "halo_rows")}
        out["arc_share"] = th.arc_share          # per part: its matrix's column locality
        out["source"], pattern = f"twin {ds.twin} at {th.nodes} vertices", "twin pattern"
    if sends is not None:
        out["halo_rows"] = with_sends(out["halo_rows"], sends)
        out["source"] = f"published sends per part, {pattern}"
    elif copies is not None and out["halo_rows"].sum() > 0:
        out["halo_rows"] *= copies * ds.nodes / out["halo_rows"].sum()
        out["source"] = f"published halo copies {copies}, {pattern}"
    return out


def even_counts(ds: Dataset, parts: int) -> dict:
    """Balanced parts (N/P rows and arcs/P arcs each, every row labelled), every part
    needing one row from every other (the pattern :func:`halo_source` scales to the
    published halo)."""
    n = ds.nodes / parts
    halo = np.ones((parts, parts))
    np.fill_diagonal(halo, 0.0)
    return {"owned": np.full(parts, n), "labelled": np.full(parts, n),
            "inner_arcs": np.full(parts, ds.arcs / parts), "halo_arcs": np.zeros(parts),
            "halo_rows": halo, "source": "even parts", "arc_share": [None] * parts}


# ----------------------------------------------------------------------------- counts
def _estimate():
    from cdfgnn.pricing import estimate
    return estimate


def model_shape(f: dict, system: System, features: int, classes: int):
    """The estimate's ModelShape of a distributed row."""
    est = _estimate()
    layers, linear = f["layers"], f["linear"]
    if f["model"] == "sgc":                  # one Linear on the cached propagation
        layers, linear = max(layers, 1), max(layers, 1)
    if linear > layers:
        raise Skip("linear", linear, f"more Linear layers than layers ({layers})")
    kind = MODELS[f["model"]]
    return est.ModelShape(kind, features, max(f["hidden"], 1), classes, layers,
                          order=system.layer_order(kind), layernorm=system.layernorm,
                          heads=f["heads"], concat_heads=system.concat_heads,
                          gat_kernels=system.gat_kernels, exchange=system.exchange,
                          static_first=system.static_first and f["model"] != "sgc",
                          linear=linear)


def rank_shapes(stats: dict, rate: float):
    """RankShapes at full size from partition statistics (BNS-GCN keeps ``rate`` of the
    boundary: of the halo rows and their arcs); every vertex gets a self loop."""
    est = _estimate()
    halo = stats["halo_rows"] * rate
    ranks = []
    for r, owned in enumerate(stats["owned"]):
        out_rows = int(round(owned))
        recv, send = halo[r].sum(), halo[:, r].sum()
        nnz = stats["inner_arcs"][r] + rate * stats["halo_arcs"][r] + out_rows
        ranks.append(est.RankShape(
            out_rows=out_rows, in_rows=out_rows + int(round(recv)), nnz=int(round(nnz)),
            self_rows=out_rows, label_rows=int(round(stats["labelled"][r])),
            send_rows=int(round(send)), recv_rows=int(round(recv))))
    return ranks, halo


def rank_inputs(ledger, bytes_to, msgs_to, p: int, n_params: int, r: int,
                overlap: bool, share=None) -> dict:
    """One rank's epoch counts in the record's form (cdfgnn.pricing.epoch); ``share``:
    the column locality of its aggregation matrix (None: not known, priced uniform)."""
    from cdfgnn.pricing.cluster import allreduce_traffic
    red_b, red_m = allreduce_traffic(p, n_params)
    out = {"ledger": ledger.to_dict(), "vertex_bytes": [float(b) for b in bytes_to],
           "vertex_msgs": [float(m) for m in msgs_to], "other_bytes": red_b[r],
           "other_msgs": red_m[r], "overlap": bool(overlap)}
    if share is not None:
        out["arc_share"] = list(share)
    return out


# ----------------------------------------------------------------------------- prepared
@dataclass
class Prepared:
    """A row with its counts and cluster, ready to be priced for any constants."""

    row: Row
    half: str = ""
    inputs: dict | None = None        # the record form, for price_counts
    gpus: tuple = ()
    link: object = None
    topology: object = None
    kernel: tuple | None = None       # (kind, fields, gpu, column locality) of a kernel row
    note: str = ""
    first_backward_in_reduce: bool = False   # its System's flag

    def cluster(self, eff):
        from cdfgnn.pricing.cluster import Cluster
        return Cluster(self.gpus, self.link, self.topology, eff)

    def predict(self, eff) -> dict[str, float]:
        """Predicted seconds per part this row publishes."""
        from cdfgnn.pricing.record import price_counts
        from cdfgnn.pricing.roofline import op_seconds
        want = self.row.published
        if self.kernel is not None:
            kind, fields, gpu, share = self.kernel
            return {"kernel": op_seconds(kind, fields, gpu, eff, share)}
        m = price_counts(self.inputs, self.cluster(eff))
        if "single-GPU epoch" in want:
            return {"single-GPU epoch": m["epoch_s"]}
        compute = float(np.mean(m["compute_s"]))
        reduce = float(np.mean(m["reduce_s"]))
        if self.first_backward_in_reduce:     # as the source's timers split them
            tail = self.first_backward_tail(eff)
            compute, reduce = compute - tail, reduce + tail
        out = {"epoch": m["epoch_s"]}
        if "compute" in want:
            kind = compute_kind(self.row.fields["compute_def"])
            out["compute"] = (compute if kind == "compute" else compute + reduce
                              if kind == "+reduce" else self._priced(eff, kind))
        if "communication" in want:
            paid = compute if self.row.fields["comm_with_reduce"] else compute + reduce
            out["communication"] = max(m["epoch_s"] - paid, 0.0)
        return out

    def first_backward_tail(self, eff) -> float:
        """Mean over ranks of the GPU time of layer 0's backward (``bwd/L0``) beyond the
        time to launch it: what a source whose all-reduce timer waits for it counts
        there (:data:`_PEER`). Where the kernels run faster than they are launched the
        GPU keeps up with the host and leaves no tail."""
        from cdfgnn.pricing.roofline import launch_seconds, op_seconds
        tails = []
        for gpu, rk in zip(self.gpus, self.inputs["ranks"]):
            kinds = rk["patterns"][0]["ledger"].get("bwd/L0", {})
            share = rk["patterns"][0].get("arc_share")
            launch = sum(launch_seconds(f, gpu, eff) for f in kinds.values())
            device = sum(op_seconds(k, f, gpu, eff, share) for k, f in kinds.items()) - launch
            tails.append(max(device - launch, 0.0))
        return float(np.mean(tails))

    def _priced(self, eff, kind: str) -> float:
        """Mean over ranks of the priced layer phases (``fwd/bwd``) or SpMM entries."""
        from cdfgnn.pricing.roofline import op_seconds, price
        secs = []
        for gpu, rk in zip(self.gpus, self.inputs["ranks"]):
            led, share = rk["patterns"][0]["ledger"], rk["patterns"][0].get("arc_share")
            if kind == "spmm":
                secs.append(sum(op_seconds("spmm", kinds["spmm"], gpu, eff, share)
                                for _, kinds in sorted(led.items()) if "spmm" in kinds))
            else:
                secs.append(sum(v for ph, v in price(led, gpu, eff, share).items()
                                if ph.startswith(("fwd/", "bwd/"))))
        return float(np.mean(secs))


def prepare_epoch_row(row: Row, ctx: "Context") -> Prepared:
    from cdfgnn.partition.base import Topology
    from cdfgnn.pricing.hardware import card_profile
    from cdfgnn.pricing.interconnect import link_profile, parse_interconnect, with_host_link
    f = row.fields
    gpu = _card(row.card, card_profile, "gpu_type")
    try:
        ic = parse_interconnect(f["interconnect"])
    except Exception as exc:
        raise Skip("interconnect", f["interconnect"], _why(exc)) from None
    gpu = with_host_link(gpu, ic)
    if f["model"] in COPY_MODELS:
        if f["model"] == "copy-d2d":      # read + write in device memory
            return Prepared(row, kernel=("elementwise", {"calls": 1, "bytes": 2 * COPY_BYTES},
                                         gpu, None))
        return Prepared(row, kernel=("copy", {"calls": 1, "bytes": COPY_BYTES}, gpu, None))
    ds = DATASETS.get(f["dataset"])
    if ds is None:
        raise Skip("dataset", f["dataset"], f"no statistics; known: {', '.join(DATASETS)}")
    if f["gpus"] == 1:                    # one rank holding the whole graph
        return one_gpu(row, gpu, f["system"], ds.nodes, ds.arcs + ds.nodes, ds.features,
                       ds.classes, ctx.whole_graph_share(f["dataset"]))
    system = system_of(f["system"])
    shape = model_shape(f, system, ds.features, ds.classes)
    topology = Topology.for_workers(f["gpus"], f["hosts"])
    try:
        link = link_profile(ic, f["backend"], gpu, topology)
    except Exception as exc:
        raise Skip("interconnect", f["interconnect"], _why(exc)) from None
    regime = f["regime"] or ("inductive" if f["dataset"] in system.inductive
                             else "transductive")
    stats = ctx.halos(f["dataset"], regime, f["gpus"])
    shapes, halo = rank_shapes(stats, system.boundary_rate)
    n_params = shape.param_count()
    est = _estimate()
    wire = est.Wire(system.wire_codec, system.wire_messages)
    items = []
    for r, rank in enumerate(shapes):
        to_b, to_m = est.halo_traffic(shape, halo, r, wire)
        items.append(rank_inputs(est.estimate_ledger(shape, rank, wire), to_b, to_m, f["gpus"],
                                 n_params, r, system.pipeline,
                                 (stats.get("arc_share") or [None] * f["gpus"])[r]))
    from cdfgnn.pricing.epoch import compact
    return Prepared(row, inputs=compact([items], [0]), gpus=(gpu,) * f["gpus"], link=link,
                    topology=topology, note=f"{regime}, halos: {stats['source']}",
                    first_backward_in_reduce=system.first_backward_in_reduce)


def prepare_single_row(row: Row, ctx: "Context") -> Prepared:
    from cdfgnn.pricing.hardware import card_profile
    f = row.fields
    gpu = _card(row.card, card_profile, "card")
    # arcs as the code aggregates them (the file: self loops included where added)
    return one_gpu(row, gpu, f["system"], f["vertices"], f["arcs"], f["features"],
                   f["classes"], ctx.whole_graph_share(f["dataset"]))


def one_gpu(row: Row, gpu, system: str, n: int, arcs: int, features: int,
            classes: int, share=None) -> Prepared:
    """A one-GPU epoch: one rank holding the whole graph, the system's layer order."""
    from cdfgnn.partition.base import Topology
    from cdfgnn.pricing.epoch import compact
    from cdfgnn.pricing.interconnect import link_profile, parse_interconnect
    f = row.fields
    try:
        sys_ = single_system(system)
    except Skip:
        raise Skip("system", system, f"unknown; known: {', '.join(SINGLE_SYSTEMS)} "
                   f"(first word), or {SYSTEM_HELP}") from None
    model = MODELS[f["model"]]
    layers = max(f["layers"], 1)
    est = _estimate()
    shape = est.ModelShape(model, features, max(f["hidden"], 1), classes, layers,
                           order=sys_.layer_order(model),
                           heads=f["heads"], concat_heads=sys_.concat_heads,
                           gat_kernels=sys_.gat_kernels,
                           linear=layers if f["model"] == "sgc" else 0)
    rank = est.RankShape(out_rows=n, in_rows=n, nnz=arcs, self_rows=n, label_rows=n,
                         send_rows=0, recv_rows=0)
    item = rank_inputs(est.estimate_ledger(shape, rank), [0.0], [0.0], 1, 0, 0, False, share)
    topology = Topology(1, 1)
    link = link_profile(parse_interconnect("none"), "nccl", gpu, topology)
    return Prepared(row, inputs=compact([[item]], [0]), gpus=(gpu,), link=link,
                    topology=topology)


def prepare_kernel_row(row: Row, ctx: "Context") -> Prepared:
    from cdfgnn.pricing.hardware import card_profile
    f = row.fields
    gpu = _card(row.card, card_profile, "card")
    n, nnz, w = f["vertices"], f["arcs"], f["width"]
    fields = {"calls": 1, "flops": 2 * nnz * w, "nnz": nnz, "nnz_w": nnz * w,
              "rows_w": n * w, "cols_w": n * w}
    return Prepared(row, kernel=("spmm" if f["dtype"] == "fp32" else "spmm_fp64", fields, gpu,
                                 ctx.whole_graph_share(f["graph"])))


def _card(text: str, card_profile, col: str):
    try:
        return card_profile(text)
    except Exception as exc:
        raise Skip(col, text, _why(exc)) from None


def _why(exc: Exception) -> str:
    """The package's one-line message without its leading ``<what> '<value>'``."""
    return re.sub(r"^[\w -]+ '[^']*':? ", "", str(exc)) or type(exc).__name__


@dataclass
class Context:
    """Where partition statistics come from and go to."""

    scale: int
    cache: Path
    data_dir: Path
    log: Callable[[str], None] = print

    def halos(self, dataset: str, regime: str, parts: int) -> dict:
        return halo_source(dataset, regime, parts, self.scale, self.cache, self.data_dir,
                           self.log)

    def whole_graph_share(self, name: str):
        """The column locality of a whole graph's aggregation matrix: its twin's at
        ``scale`` vertices (a dataset of :data:`DATASETS` or a twin's own name), None for
        a graph without one (priced uniform)."""
        from cdfgnn.data.synthetic import TWINS
        twin = DATASETS[name].twin if name in DATASETS else name if name in TWINS else ""
        if not twin:
            return None
        from cdfgnn.twins.halo import twin_halo
        th = twin_halo(twin, 1, "transductive", nodes=self.scale, seed=SEED,
                       cache_dir=self.cache, graphs=_TWIN_GRAPHS)
        return th.arc_share[0]


PREPARERS = {"epoch": prepare_epoch_row, "single": prepare_single_row,
             "kernel": prepare_kernel_row}


def prepare_all(rows: list[Row], schema: str, ctx: Context) -> list[Prepared]:
    out = []
    for row in rows:
        try:
            out.append(PREPARERS[schema](row, ctx))
        except Skip as exc:
            ctx.log(f"skipped {row.file} line {row.line}: {exc}")
    return out


# ------------------------------------------------------------------- split, fit, report
def split_halves(items: list, source=lambda it: it.row.source, line=lambda it: it.row.key,
                 ) -> tuple[list, list]:
    """Stratified by source: the items of each source group in CRC order of their source
    text, alternately to calibration and validation (groups in CRC order, the alternation
    carried across groups, so an odd group's extra row goes to either half). Never looks
    at a number."""
    groups: dict[str, list] = {}
    for it in items:
        groups.setdefault(source_group(source(it)), []).append(it)
    calib, valid, turn = [], [], 0
    for g in sorted(groups, key=lambda g: (zlib.crc32(g.encode()), g)):
        for it in sorted(groups[g], key=lambda it: (zlib.crc32(source(it).encode()),
                                                     source(it), line(it))):
            (calib if turn == 0 else valid).append(it)
            turn ^= 1
    return calib, valid


def ratio(pred: float, pub: float, part: str, row: Row) -> float:
    """predicted / published; compute and communication below FLOOR x the row's epoch
    count as FLOOR x epoch (a published 0 is a value)."""
    if part in ("compute", "communication"):
        floor = FLOOR * row.published["epoch"]
        return max(pred, floor) / max(pub, floor)
    return max(pred, 1e-12) / pub


def part_ratios(preps: list[Prepared], eff) -> dict[str, list[tuple[Prepared, float, float]]]:
    """Per part: (row, predicted, ratio) of every row that publishes it."""
    out: dict[str, list] = {p: [] for p in PARTS}
    for prep in preps:
        pred = prep.predict(eff)
        for part, pub in prep.row.published.items():
            if part in pred:
                out[part].append((prep, pred[part], ratio(pred[part], pub, part, prep.row)))
    return out


def loss(preps: list[Prepared], eff) -> float:
    """Mean over parts (that have rows) of the mean absolute log ratio: the targets are a
    median and a share within 2x, so a few rows off by 10x must not pull every constant
    (a squared loss would)."""
    per = [np.mean([abs(math.log(r)) for _, _, r in rows])
           for rows in part_ratios(preps, eff).values() if rows]
    return float(np.mean(per)) if per else 0.0


def fit(preps: list[Prepared], eff):
    """The constants of ``eff`` that the rows depend on, fitted within FIT_BOUNDS
    (Powell on their logarithms from ``START_MARGIN`` inside the bounds, restarted from its
    optimum while that still gains; ``eff`` clipped into the bounds where Powell ends worse
    than it); returns (constants, loss, fitted names)."""
    from scipy.optimize import minimize

    from cdfgnn.pricing.efficiency import FIT_BOUNDS
    # a stored constant outside its (possibly tightened) bounds starts on the bound, so
    # that "never worse than the start" compares with constants the fit may return
    eff = eff.within_bounds()
    base = loss(preps, eff)
    names = []
    for key in FIT_BOUNDS:                   # only what some row depends on
        low, high = FIT_BOUNDS[key]
        start = min(max(getattr(eff, key), max(low, 1e-3)), high)
        probe = min(max(start * 1.5 if start * 1.5 <= high else start / 1.5, low), high)
        if abs(loss(preps, eff.but(**{key: probe})) - loss(preps, eff.but(**{key: start})
                                                            )) > 1e-12:
            names.append(key)
    if not names:
        return eff, base, names
    lo = np.log([max(FIT_BOUNDS[k][0], 1e-3) for k in names])
    hi = np.log([FIT_BOUNDS[k][1] for k in names])
    # start inside the box (Powell's line searches do not leave a bound they start on), but
    # near the given constants: a wide margin moves the start into another basin
    x = np.clip(np.log([max(getattr(eff, k), 1e-3) for k in names]),
                lo + START_MARGIN * (hi - lo), hi - START_MARGIN * (hi - lo))

    def trial(x):
        return eff.but(**{k: float(np.exp(v)) for k, v in zip(names, x)})

    best = math.inf
    for _ in range(RESTARTS):              # a fresh direction set each time, until stuck
        res = minimize(lambda x: loss(preps, trial(x)), x, method="Powell",
                       bounds=list(zip(lo, hi)), options={"xtol": 1e-3, "ftol": 1e-6,
                                                          "maxfev": 4000})
        x, gain = res.x, best - res.fun
        best = res.fun
        if gain < 1e-4:
            break
    fitted = trial(x)
    got = loss(preps, fitted)
    if got > base:                         # never worse than the constants it started from
        return eff, base, names
    return fitted, got, names


#: Powell runs from the last optimum, while one still gains
RESTARTS = 4
#: how far inside its bounds (a share of the log range) a constant starts the fit
START_MARGIN = 0.005


def summary(rows: list[tuple]) -> tuple[int, float, float]:
    """(N, median ratio, share within 2x)."""
    if not rows:
        return 0, math.nan, math.nan
    r = np.asarray([x[2] for x in rows])
    within = float(np.mean(np.abs(np.log(r)) <= math.log(2.0) + 1e-12))
    return len(r), float(np.median(r)), within


def summary_line(label: str, rows: list[tuple]) -> str:
    n, med, within = summary(rows)
    if not n:
        return f"{label}: 0 rows, median ratio -, within 2x: -"
    return f"{label}: {n} rows, median ratio {med:.3f}, within 2x: {100 * within:.0f}%"


def row_label(prep: Prepared) -> str:
    f, row = prep.row.fields, prep.row
    if "graph" in f:
        return f"{f['graph'][:22]} w{f['width']} {f['kernel'][:18]}"
    if "vertices" in f:
        return f"{f['system'][:14]} {f['dataset'][:13]} {f['model']}x{f['layers']}"
    return (f"{f['system'][:16]} {f['dataset'][:13]} {f['model']} P{f['gpus']}/{f['hosts']}"
            f" {f['backend']}")


def table(parts: dict[str, list], halves: dict[str, str]) -> list[str]:
    lines = []
    for part, rows in parts.items():
        if not rows:
            continue
        lines.append(f"-- {part}")
        lines.append(f"{'row':32} {'half':5} {'what':48} {'card':8} {'published':>10} "
                     f"{'predicted':>10} {'ratio':>6}")
        for prep, pred, r in rows:
            pub = prep.row.published[part]
            lines.append(f"{prep.row.key[:32]:32} {halves.get(prep.row.key, '')[:5]:5} "
                         f"{row_label(prep)[:48]:48} {prep.row.card[:8]:8} {pub:10.5f} "
                         f"{pred:10.5f} {r:6.2f}")
    return lines


def repository(source: str) -> str:
    """The repository a row's source names (``zxmeng98/Sylvie@72572f6:results/...`` ->
    ``zxmeng98/Sylvie``); a source that names none (a paper, ``arXiv:2104.00521 Table
    4``) is its text before the first space."""
    head = re.split(r"[@: ]", source, maxsplit=1)[0]
    return head if "/" in head else source_group(source)


def by_repository(parts: dict[str, list], label: str,
                  halves: dict[str, str] | None = None) -> list[str]:
    """One summary line per part and repository (``<label> <part> by repository <repo>:
    ...``), of the rows in half ``label`` where ``halves`` is given, else of every row:
    the pooled lines weigh rows, so a repository with many rows can carry a part
    (docs/results.md)."""
    lines = []
    for part, rows in parts.items():
        groups: dict[str, list] = {}
        for x in rows:
            if halves is None or halves.get(x[0].row.key) == label:
                groups.setdefault(repository(x[0].row.source), []).append(x)
        for repo in sorted(groups, key=lambda g: (-len(groups[g]), g)):
            lines.append(summary_line(f"{label} {part} by repository {repo}", groups[repo]))
    return lines


# ----------------------------------------------------------------------------- modes
def load_rows(paths: list[Path], log: Callable[[str], None]) -> list[tuple[str, Row]]:
    """(schema, row) of every priceable row of ``paths``. A one-GPU row of an epoch file
    whose epoch the single-GPU file also holds is counted once (dropped here)."""
    out = []
    for path in paths:
        schema = schema_of(path)
        out += [(schema, row) for row in read_rows(path, schema, log)]
    singles = {_single_key(row) for schema, row in out if schema == "single"}
    kept = []
    for schema, row in out:
        if schema == "epoch" and "single-GPU epoch" in row.published and \
                _single_key(row) in singles:
            log(f"skipped {row.file} line {row.line}: gpus 1: the same epoch is in "
                f"{SINGLE_FILE}")
            continue
        kept.append((schema, row))
    return kept


def _single_key(row: Row) -> tuple:
    f = row.fields
    return (row.card, f.get("dataset"), f.get("model"),
            round(row.published.get("single-GPU epoch", 0.0), 6))


def load_parts(paths: list[Path], ctx: Context) -> list[Prepared]:
    """Every row of ``paths`` prepared (skipped with one line where it cannot be)."""
    return [p for schema, row in load_rows(paths, ctx.log)
            for p in prepare_all([row], schema, ctx)]


def default_files(data_dir: Path) -> list[Path]:
    return [data_dir / n for n in (KERNEL_FILE, SINGLE_FILE, *EPOCH_FILES)
            if (data_dir / n).is_file()]


def family(prep: Prepared) -> str:
    """kernel, single or epoch: which rows a split is stratified within."""
    return ("kernel" if "kernel" in prep.row.published else
            "single" if "single-GPU epoch" in prep.row.published else "epoch")


def calibrate(args, ctx: Context) -> int:
    from cdfgnn.pricing import efficiency
    files = [Path(p) for p in args.published] if args.published else \
        default_files(Path(args.data_dir))
    preps = load_parts(files, ctx)
    if args.build_counts:
        return 0
    families: dict[str, list] = {}
    for prep in preps:
        families.setdefault(family(prep), []).append(prep)
    halves: dict[str, str] = {}
    for fam in families.values():
        calib, valid = split_halves(fam)
        halves.update({p.row.key: "calibration" for p in calib})
        halves.update({p.row.key: "validation" for p in valid})
    calib = [p for p in preps if halves[p.row.key] == "calibration"]
    start = efficiency.load_efficiency()
    t0 = time.process_time()
    fitted, best, names = fit(calib, start)
    print(f"rows: {len(preps)} priced ({len(calib)} calibration); fitted "
          f"{', '.join(names) or 'nothing'} in {time.process_time() - t0:.0f} s CPU, "
          f"calibration loss {best:.4f} (start {loss(calib, start):.4f})")
    print("constants: " + ", ".join(f"{k}={getattr(fitted, k):.4g}" for k in names))
    if args.write_efficiency:
        n = {h: sum(halves[p.row.key] == h for p in preps) for h in HALVES}
        header = ["Efficiency constants of the device model (cdfgnn/pricing/), in one place.",
                  f"Fitted by `python benchmarks/time_model.py --write-efficiency` on "
                  f"{time.strftime('%Y-%m-%d', time.gmtime())} (UTC): {', '.join(names)},",
                  f"on the calibration halves of every part ({n['calibration']} rows; "
                  f"{n['validation']} validation rows not used); the others keep their values."]
        fitted = fitted.but(source=f"fitted by benchmarks/time_model.py on "
                                   f"{n['calibration']} calibration rows")
        efficiency.write_efficiency(fitted, header=header)
        print(f"wrote {efficiency.EFFICIENCY_FILE}")
    parts = part_ratios(preps, fitted)
    for line in table(parts, halves) + [""] + by_repository(parts, "validation", halves):
        print(line)
    print("")
    for half in HALVES:
        for part in PARTS:
            mine = [x for x in parts[part] if halves[x[0].row.key] == half]
            print(summary_line(f"{half} {part}", mine))
    return 0


def frozen(args, ctx: Context) -> int:
    """Price ``--published`` with the stored constants; last line ``held-out: ...``."""
    from cdfgnn.pricing.efficiency import load_efficiency
    eff = load_efficiency()
    main_rows, by_part = [], {}
    for prep in load_parts([Path(p) for p in args.published], ctx):
        pred = prep.predict(eff)
        cells = [f"{part} {pred[part]:.5f}/{prep.row.published[part]:.5f}"
                 for part in PARTS if part in prep.row.published and part in pred]
        print(f"{prep.row.key}: {row_label(prep)}: predicted/published "
              + ", ".join(cells))
        head = MAIN_PART[family(prep)]
        item = (prep, pred[head], ratio(pred[head], prep.row.published[head], head, prep.row))
        main_rows.append(item)
        by_part.setdefault(head, []).append(item)
    for line in by_repository(by_part, "held-out"):
        print(line)
    print(summary_line("held-out", main_rows))
    return 0


#: the part a held-out row's ratio is taken of
MAIN_PART = {"kernel": "kernel", "single": "single-GPU epoch", "epoch": "epoch"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(DATA_DIR),
                    help="folder of kernel_spmm.csv, single_gpu_epochs.csv, "
                         "published_epochs*.csv, real_partition_stats.csv")
    ap.add_argument("--published", nargs="+", default=None,
                    help="CSV file(s) to price instead of the data folder's")
    ap.add_argument("--frozen", action="store_true",
                    help="price --published with the stored constants, no fit")
    ap.add_argument("--scale", type=int, default=100_000,
                    help="vertices of the scaled twins behind the partition statistics")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="partition statistics cache")
    ap.add_argument("--build-counts", action="store_true",
                    help="only build the missing partition statistics, then exit")
    ap.add_argument("--write-efficiency", action="store_true",
                    help="store the fitted constants in cdfgnn/pricing/efficiency.yaml")
    args = ap.parse_args(argv)
    ctx = Context(args.scale, Path(args.cache), Path(args.data_dir))
    from cdfgnn.errors import CdfgnnError
    try:
        if args.frozen:
            if not args.published:
                raise InputError("--frozen needs --published FILE")
            return frozen(args, ctx)
        return calibrate(args, ctx)
    except (InputError, CdfgnnError) as exc:
        print(f"time_model: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
