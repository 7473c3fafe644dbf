"""Calibrate and validate the GPU time model on published epoch times (issue 21 item 5).

Reads a CSV of published GPU measurements (default ``benchmarks/data/published_epochs.csv``;
columns and sources in ``benchmarks/data/README.md``). For every row it

1. counts one epoch per rank with the layer order of the system that produced the row
   (``cdfgnn.cost.estimate``: BNS-GCN, PipeGCN, Sylvie and AdaQP aggregate first, so
   their halo rows are as wide as the layer's input; DGL's GraphConv transforms first),
   from partition statistics of the dataset's synthetic twin (below);
2. prices the counts on the row's GPU (``cdfgnn.cost.hardware`` profile, ``cdfgnn.cost
   .pricing`` roofline with the ``Efficiency`` constants; every published row trained in
   float32, so the counts are float32 ones, ``estimate.DTYPE``: FP32 peaks, 4-byte
   elements) and its halo traffic with
   ``cdfgnn.comm.network.NetworkModel`` (plus host copies on host-staged gloo links);
3. prints predicted / published epoch and communication seconds.

Rows are split deterministically (by a CRC of their ``source`` text, never by their
numbers) into a calibration half, on which the efficiency constants are fitted, and a
validation half that the fit never sees. The last two lines are

    calibration: N rows, median ratio R, within 2x: S%
    validation: N rows, median ratio R, within 2x: S%

with R the median of predicted / published epoch seconds.

**Partition statistics at full size.** Generating every dataset's twin at its real size
does not fit this 2-core machine (ogbn-products: 124M arcs, AmazonProducts: 264M). The
statistics are measured on a *scaled* twin (``--scale`` vertices, default 100,000) whose
average degree is set to the peers' copy of the dataset (DGL's Reddit has 114.6M arcs,
about 5x the GraphSAINT copy the synth-reddit twin mirrors), partitioned by METIS into the
row's P parts, and every count (owned rows, arcs, halo rows per peer) is multiplied by
``real vertices / scaled vertices``: the halo *fraction* is taken as size-invariant at a
fixed degree (the check at two scales is in docs/results.md). ``--build-counts`` computes
and caches them (``--cache``, default ``results/time_model``) and prints the time and
memory each took; a plain run builds what is missing.

Usage:
    python benchmarks/time_model.py [--published FILE] [--scale N] [--cache DIR]
                                    [--build-counts] [--write-efficiency]
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import resource
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "benchmarks" / "data" / "published_epochs.csv"
DEFAULT_CACHE = ROOT / "results" / "time_model"
GPU_DIR = ROOT / "benchmarks" / "data"

COLUMNS = ("source", "system", "dataset", "model", "layers", "hidden", "gpus", "hosts",
           "gpu_type", "interconnect", "backend", "epoch_s", "comm_s", "notes")
BACKENDS = ("gloo", "nccl")
SEED = 0
#: the published rows trained in float32 (cdfgnn.cost.estimate.DTYPE)
FLOAT_BYTES = 4


# ----------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Row:
    """One published measurement (a CSV row, validated)."""

    line: int
    source: str
    system: str
    dataset: str
    model: str
    layers: int
    hidden: int
    gpus: int
    hosts: int
    gpu_type: str
    interconnect: str
    backend: str
    epoch_s: float
    comm_s: float | None


class InputError(Exception):
    """Bad published CSV: one line naming the file, row and column."""


def _number(path, line: int, col: str, text: str, kind):
    try:
        value = kind(text)
    except ValueError:
        raise InputError(f"{path}: line {line}: column {col!r} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{path}: line {line}: column {col!r} must be finite and >= 0, got {text!r}")
    return value


def read_published(path: str | os.PathLike) -> list[Row]:
    """The CSV's rows; a missing column, a bad number or an unknown backend raises InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"published CSV {path}: no such file")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for col in COLUMNS:
            if col not in header:
                raise InputError(f"published CSV {path}: missing column {col!r}")
        rows = [_row(path, i, rec) for i, rec in enumerate(reader, start=2)]
    if not rows:
        raise InputError(f"published CSV {path}: no rows")
    return rows


def _row(path, line: int, rec: dict) -> Row:
    if rec["backend"] not in BACKENDS:
        raise InputError(f"{path}: line {line}: column 'backend' must be one of {BACKENDS}, "
                         f"got {rec['backend']!r}")
    ints = {c: _number(path, line, c, rec[c], int) for c in ("layers", "hidden", "gpus", "hosts")}
    epoch = _number(path, line, "epoch_s", rec["epoch_s"], float)
    if epoch <= 0:
        raise InputError(f"{path}: line {line}: column 'epoch_s' must be > 0, got {rec['epoch_s']!r}")
    comm = _number(path, line, "comm_s", rec["comm_s"], float) if rec["comm_s"].strip() else None
    if ints["gpus"] < 1 or ints["hosts"] < 1 or ints["gpus"] % ints["hosts"]:
        raise InputError(f"{path}: line {line}: gpus ({ints['gpus']}) must be a positive "
                         f"multiple of hosts ({ints['hosts']})")
    return Row(line, rec["source"], rec["system"], rec["dataset"], rec["model"], epoch_s=epoch,
               comm_s=comm, gpu_type=rec["gpu_type"], interconnect=rec["interconnect"],
               backend=rec["backend"], **ints)


@dataclass(frozen=True)
class Dataset:
    """Full-size figures of the peers' copy of a dataset, and the twin that stands in."""

    twin: str | None          # synthetic twin for partition statistics (None: single GPU only)
    nodes: int
    arcs: int                 # directed arcs (each undirected edge twice)
    features: int
    classes: int
    source: str


_CAPGNN_TABLE = "songxf1024/CaPGNN README dataset table (|V|, |E|, f_dim, classes)"
_DGL_CITATION = "dmlc/dgl python/dgl/data/citation_graph.py docstring statistics"
DATASETS: dict[str, Dataset] = {
    # DGL's RedditDataset (the peers' loader), 114.6M arcs: ~492 per vertex, not the
    # GraphSAINT copy's 99.65 that synth-reddit mirrors
    "reddit": Dataset("synth-reddit", 232_965, 114_615_892, 602, 41, _CAPGNN_TABLE),
    # OGB: 61,859,140 undirected edges, stored in both directions by DGL/OGB loaders
    "ogbn-products": Dataset("synth-products", 2_449_029, 2 * 61_859_140, 100, 47, _CAPGNN_TABLE),
    "yelp": Dataset("synth-yelp", 716_847, 13_954_819, 300, 100, _CAPGNN_TABLE),
    "amazon-products": Dataset("synth-amazon", 1_569_960, 264_339_468, 200, 107, _CAPGNN_TABLE),
    "cora": Dataset(None, 2_708, 10_556, 1_433, 7, _DGL_CITATION),
    "citeseer": Dataset(None, 3_327, 9_228, 3_703, 6, _DGL_CITATION),
    "pubmed": Dataset(None, 19_717, 88_651, 500, 3, _DGL_CITATION),
}


@dataclass(frozen=True)
class System:
    """How the code behind a row trains (read from its public scripts and modules)."""

    kind: str                  # "edge-cut" | "single" | "copy"
    order: str = "aggregate-first"
    layernorm: bool = False
    precompute_first: bool = False     # --use-pp: layer 0 is a Linear on [x, agg(x)], no sync
    pipeline: bool = False             # PipeGCN: halo exchange overlaps compute
    boundary_rate: float = 1.0         # BNS-GCN: share of boundary vertices sampled
    inductive: frozenset = frozenset()  # datasets trained on their train-induced subgraph


# Sylvie, BNS-GCN and PipeGCN scripts: --inductive for reddit/yelp/amazon, --use-pp
# everywhere, LayerNorm between layers (module/model.py, norm='layer')
_PEER_INDUCTIVE = frozenset({"reddit", "yelp", "amazon-products"})
_PEER = System("edge-cut", "aggregate-first", layernorm=True, precompute_first=True,
               inductive=_PEER_INDUCTIVE)
SYSTEMS: dict[str, System] = {
    "exact (Sylvie code fp32)": _PEER,
    "pipegcn": dataclasses.replace(_PEER, pipeline=True),
    "bns-gcn p=0.1": dataclasses.replace(_PEER, boundary_rate=0.1),
    # AdaQP model/distGCN.py: DistAggConv (aggregate) then matmul W at every layer, no
    # precompute, LayerNorm (config use_norm: true), full graph
    "exact (AdaQP Vanilla)": System("edge-cut", "aggregate-first", layernorm=True),
    # DGL GraphConv multiplies by W first when that narrows the rows
    "dgl": System("single", "transform-first"),
    "capgnn-microbench": System("copy"),
}
COPY_MODELS = ("copy-h2d", "copy-d2h", "copy-d2d")

@dataclass(frozen=True)
class VolumeFigure:
    """A published halo volume: total bytes all ranks send per epoch in one setting."""

    megabytes: float
    parts: int
    layers: int
    hidden: int
    source: str


#: Sylvie paper ("Boosting Distributed Full-Graph GNN Training with Asynchronous One-Bit
#: Communication", Zhang et al.), Table 3, row DGL, column "Main data (MB)": GraphSAGE
#: with exact fp32 halo exchange on two servers, 8 GPUs, --use-pp. The model tuples are
#: those of the matching result files (results/speed_pcie4_v2/*_n8_2node.csv, whose
#: epoch and communication seconds equal Table 3's); read as the total over all ranks
#: of forward rows and backward gradients (per rank it would exceed Reddit's whole
#: inductive graph: 2791.7 MB / (3 syncs x 2 x 1 KB) = 465k rows > 153k vertices).
VOLUME_FIGURES: dict[str, VolumeFigure] = {
    "reddit": VolumeFigure(2791.7, 8, 4, 256, "Sylvie paper Table 3, Reddit DGL"),
    "yelp": VolumeFigure(2348.1, 8, 4, 512, "Sylvie paper Table 3, Yelp DGL"),
    "ogbn-products": VolumeFigure(3420.6, 8, 3, 128, "Sylvie paper Table 3, Ogbn-products DGL"),
    # the Amazon row's file line (13.3282 s, 11.4668 s) carries ['graphsage', 4, 256]
    "amazon-products": VolumeFigure(5632.6, 8, 4, 256, "Sylvie paper Table 3, Amazon DGL"),
}
#: CaPGNN utils/eval_bw.py copies one 11585 x 11585 float32 tensor
COPY_BYTES = 11585 * 11585 * FLOAT_BYTES


def system_of(row: Row) -> System:
    try:
        return SYSTEMS[row.system]
    except KeyError:
        raise InputError(f"line {row.line}: unknown system {row.system!r}; "
                         f"known: {', '.join(sorted(SYSTEMS))}") from None


MODELS = ("gcn", "graphsage", "sgc")


def check_row(row: Row) -> None:
    """Every name of the row resolves (system, dataset, model, GPU), before any work."""
    system = system_of(row)
    dataset_of(row)
    allowed = COPY_MODELS if system.kind == "copy" else MODELS
    if row.model not in allowed:
        raise InputError(f"line {row.line}: model {row.model!r} for system {row.system!r}; "
                         f"known: {', '.join(allowed)}")
    gpu_of(row)


def dataset_of(row: Row) -> Dataset | None:
    if system_of(row).kind == "copy":
        return None
    try:
        return DATASETS[row.dataset]
    except KeyError:
        raise InputError(f"line {row.line}: unknown dataset {row.dataset!r}; "
                         f"known: {', '.join(sorted(DATASETS))}") from None


# ----------------------------------------------------------------- partition statistics
def count_key(dataset: str, inductive: bool, parts: int, scale: int) -> str:
    return f"{dataset}-{'ind' if inductive else 'full'}-p{parts}-n{scale}-s{SEED}"


def scaled_twin(name: str, scale: int, inductive: bool):
    """The dataset's twin at ``scale`` vertices with the peers' average degree
    (train-induced subgraph when ``inductive``)."""
    from cdfgnn.data.synthetic import TWINS, generate_from_spec
    ds = DATASETS[name]
    spec = dataclasses.replace(TWINS[ds.twin], avg_degree=ds.arcs / ds.nodes)
    g = generate_from_spec(spec, scale, SEED)
    if not inductive:
        return g.indptr, g.indices, g.train.copy()
    return induced(g.indptr, g.indices, g.train)


def induced(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray):
    """CSR of the subgraph induced by the vertices where ``keep`` (all of them labelled)."""
    new_id = np.full(keep.shape[0], -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    rows = np.repeat(np.arange(keep.shape[0]), np.diff(indptr))
    ok = keep[rows] & keep[indices]
    src, dst = new_id[rows[ok]], new_id[indices[ok]]
    n = int(keep.sum())
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=new_ptr[1:])
    return new_ptr, dst, np.ones(n, dtype=bool)


def partition_counts(indptr: np.ndarray, indices: np.ndarray, labelled: np.ndarray,
                     parts: np.ndarray, p: int) -> dict:
    """Per part: owned and labelled rows, arcs from owned / remote sources, and the
    distinct halo rows it needs from each other part (``halo_rows[r][q]``)."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n), np.diff(indptr))
    own, src_part = parts[dst], parts[indices]
    remote = own != src_part
    pair = np.unique(indices[remote] * p + own[remote])   # (halo vertex, needing part)
    halo = np.zeros((p, p), dtype=np.int64)
    np.add.at(halo, (pair % p, parts[pair // p]), 1)
    return {"owned": np.bincount(parts, minlength=p).tolist(),
            "labelled": np.bincount(parts[labelled], minlength=p).tolist(),
            "inner_arcs": np.bincount(own[~remote], minlength=p).tolist(),
            "halo_arcs": np.bincount(own[remote], minlength=p).tolist(),
            "halo_rows": halo.tolist()}


def build_counts(dataset: str, inductive: bool, parts_list: list[int], scale: int) -> dict:
    """Partition statistics of one scaled twin for every P in ``parts_list`` (timed)."""
    from cdfgnn.partition.edgecut import metis_node_parts
    t0 = time.perf_counter()
    indptr, indices, labelled = scaled_twin(dataset, scale, inductive)
    gen_s = time.perf_counter() - t0
    out = {}
    for p in parts_list:
        t1 = time.perf_counter()
        parts = metis_node_parts(indptr, indices, p, seed=SEED)
        stats = partition_counts(indptr, indices, labelled, parts, p)
        stats.update(dataset=dataset, inductive=inductive, parts=p, scale=scale,
                     sub_nodes=int(indptr.shape[0] - 1), sub_arcs=int(indices.shape[0]),
                     generate_s=round(gen_s, 2), partition_s=round(time.perf_counter() - t1, 2),
                     maxrss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2))
        out[count_key(dataset, inductive, p, scale)] = stats
    return out


def needed_counts(rows: list[Row]) -> dict[tuple[str, bool], list[int]]:
    """(dataset, inductive) -> the part counts the edge-cut rows need."""
    need: dict[tuple[str, bool], set[int]] = {}
    for row in rows:
        system = system_of(row)
        if system.kind != "edge-cut" or dataset_of(row) is None:
            continue
        if DATASETS[row.dataset].twin is None:
            raise InputError(f"line {row.line}: dataset {row.dataset!r} has no synthetic twin "
                             f"for multi-GPU rows")
        need.setdefault((row.dataset, row.dataset in system.inductive), set()).add(row.gpus)
        if row.dataset in VOLUME_FIGURES:      # the setting its halo correction comes from
            need.setdefault((row.dataset, row.dataset in _PEER_INDUCTIVE), set()).add(
                VOLUME_FIGURES[row.dataset].parts)
    return {k: sorted(v) for k, v in sorted(need.items())}


def load_counts(rows: list[Row], scale: int, cache: Path, verbose: bool) -> dict:
    """Cached partition statistics for ``rows``; missing ones are built and cached."""
    cache.mkdir(parents=True, exist_ok=True)
    counts = {}
    for (dataset, inductive), parts_list in needed_counts(rows).items():
        missing = [p for p in parts_list
                   if not (cache / f"{count_key(dataset, inductive, p, scale)}.json").is_file()]
        if missing:
            built = build_counts(dataset, inductive, missing, scale)
            for key, stats in built.items():
                _write_json(cache / f"{key}.json", stats)
                if verbose:
                    print(f"built {key}: {stats['sub_nodes']} vertices, {stats['sub_arcs']} arcs, "
                          f"generate {stats['generate_s']} s, METIS {stats['partition_s']} s, "
                          f"max RSS {stats['maxrss_gb']} GB", flush=True)
        for p in parts_list:
            key = count_key(dataset, inductive, p, scale)
            counts[key] = json.loads((cache / f"{key}.json").read_text())
    return counts


def _write_json(path: Path, obj) -> None:
    from cdfgnn.fileio import atomic_write_bytes
    atomic_write_bytes(path, (json.dumps(obj, sort_keys=True) + "\n").encode())


# ----------------------------------------------------------------------------- counting
def _cost_api():
    """The ledger engineer's cost package (cdfgnn.cost); a clear error where it is absent."""
    try:
        from cdfgnn.cost import estimate, hardware, ledger, pricing  # noqa: F401
        from cdfgnn.cost import efficiency
    except ImportError as exc:
        raise InputError(f"time_model needs cdfgnn.cost (issue 21 items 1-4): {exc}") from None
    return estimate, hardware, ledger, pricing, efficiency


def layer_widths(row: Row, ds: Dataset) -> list[int]:
    """Input width of every layer and the output width: [F, h, ..., h, C]."""
    if row.model == "sgc":
        return [ds.features, ds.classes]
    return [ds.features] + [row.hidden] * (row.layers - 1) + [ds.classes]


def sync_widths(row: Row, system: System, ds: Dataset) -> list[int]:
    """Row width of each layer's halo exchange (0: the layer does not sync)."""
    w = layer_widths(row, ds)
    out = []
    for i in range(len(w) - 1):
        if i == 0 and system.precompute_first:
            out.append(0)
        elif system.order == "aggregate-first" or row.model != "gcn":
            out.append(w[i])
        else:
            out.append(min(w[i], w[i + 1]))
    return out


def model_shape(row: Row, system: System, ds: Dataset):
    estimate = _cost_api()[0]
    w = layer_widths(row, ds)
    model = {"gcn": "gcn", "graphsage": "sage", "sgc": "gcn"}[row.model]   # check_row'd
    return estimate.ModelShape(model=model, in_dim=w[0], hidden=w[1] if len(w) > 2 else w[-1],
                               out_dim=w[-1], layers=len(w) - 1, order=system.order,
                               layernorm=system.layernorm)


@dataclass
class RankWork:
    """One rank's epoch: its ledger (device kernels) and its traffic per destination."""

    ledger: object
    halo_bytes_to: np.ndarray
    halo_msgs_to: np.ndarray
    param_bytes: int


def rank_works(row: Row, counts: dict | None, scale_factor: float,
               correction: float = 1.0) -> list[RankWork]:
    system, ds = system_of(row), dataset_of(row)
    shape = model_shape(row, system, ds)
    widths = sync_widths(row, system, ds)
    if system.kind == "single":
        ranks = [_single_rank(ds)]
        halo = np.zeros((1, 1))
    else:
        ranks, halo = _edge_cut_ranks(counts, system.boundary_rate, scale_factor, correction)
    out = []
    for r, rank in enumerate(ranks):
        ledger = _cost_api()[0].estimate_ledger(shape, rank)
        if system.precompute_first or row.model == "sgc":
            ledger = _precomputed_first_layer(ledger, row, ds, rank.out_rows)
        to_bytes, to_msgs = _halo_traffic(halo, r, widths)
        out.append(RankWork(ledger, to_bytes, to_msgs, _param_bytes(row, system, ds)))
    return out


def _single_rank(ds: Dataset):
    estimate = _cost_api()[0]
    n = ds.nodes
    # every vertex owned, one self-loop each (GraphConv's normalised A + I)
    return estimate.RankShape(out_rows=n, in_rows=n, nnz=ds.arcs + n, self_rows=n,
                              label_rows=n, send_rows=0, recv_rows=0)


def halo_correction(dataset: str, counts: dict, scale: int) -> float:
    """Published / twin halo volume in the setting of the dataset's VOLUME_FIGURES entry
    (1.0 where none is published): the twins' METIS halos are scaled by it at every P."""
    fig = VOLUME_FIGURES.get(dataset)
    if fig is None:
        return 1.0
    stats = counts[count_key(dataset, dataset in _PEER_INDUCTIVE, fig.parts, scale)]
    halo = np.asarray(stats["halo_rows"], dtype=np.float64) * DATASETS[dataset].nodes / scale
    rows = 2.0 * halo.sum()          # every halo row: sent forward, its gradient backward
    syncs = fig.layers - 1           # --use-pp: layer 0 does not sync
    return fig.megabytes * 1e6 / (rows * syncs * fig.hidden * FLOAT_BYTES)


def _edge_cut_ranks(counts: dict, rate: float, k: float, correction: float = 1.0):
    """RankShapes at full size (statistics x k, halo rows x ``correction``); BNS-GCN keeps
    ``rate`` of the boundary."""
    estimate = _cost_api()[0]
    halo = np.asarray(counts["halo_rows"], dtype=np.float64) * k * rate * correction
    ranks = []
    for r, owned in enumerate(counts["owned"]):
        out_rows = int(round(owned * k))
        recv, send = halo[r].sum(), halo[:, r].sum()
        nnz = (counts["inner_arcs"][r] + rate * counts["halo_arcs"][r]) * k + out_rows
        ranks.append(estimate.RankShape(
            out_rows=out_rows, in_rows=out_rows + int(round(recv)), nnz=int(round(nnz)),
            self_rows=out_rows, label_rows=int(round(counts["labelled"][r] * k)),
            send_rows=int(round(send)), recv_rows=int(round(recv))))
    return ranks, halo


def _halo_traffic(halo: np.ndarray, r: int, widths: list[int]):
    """Bytes and messages rank r sends to each rank per epoch: forward rows its peers
    need (``halo[q, r]``) and backward gradients of the rows it received (``halo[r, q]``),
    at every syncing layer's width; layer 0 sends no gradients (inputs need none)."""
    p = halo.shape[0]
    to_bytes, to_msgs = np.zeros(p), np.zeros(p)
    for i, w in enumerate(widths):
        if w == 0:
            continue
        rows = halo[:, r] + (halo[r, :] if i > 0 else 0.0)
        to_bytes += rows * w * FLOAT_BYTES
        to_msgs += (halo[:, r] > 0) + ((halo[r, :] > 0) if i > 0 else 0)
    to_bytes[r] = to_msgs[r] = 0.0
    return to_bytes, to_msgs


def _precomputed_first_layer(ledger, row: Row, ds: Dataset, rows: int):
    """Replace layer 0's counts by --use-pp's: one Linear on the precomputed input
    (GraphSAGE: [x, mean(x)], 2F wide; GCN/SGC: A x, F wide), no SpMM and no sync;
    backward computes the weight gradient only (the input needs none)."""
    Ledger = _cost_api()[2].Ledger
    k = 2 * ds.features if row.model == "graphsage" else ds.features
    n = layer_widths(row, ds)[1]
    kept = {ph: kinds for ph, kinds in ledger.to_dict().items() if ph not in ("fwd/L0", "bwd/L0")}
    out = Ledger.from_dict(kept)
    gemm_bytes = FLOAT_BYTES * (rows * k + k * n + rows * n)
    out.add("fwd/L0", "dense", calls=1, flops=2 * rows * k * n, bytes=gemm_bytes)
    out.add("fwd/L0", "elementwise", calls=1, bytes=2 * FLOAT_BYTES * rows * n)   # bias
    out.add("bwd/L0", "dense", calls=1, flops=2 * rows * k * n, bytes=gemm_bytes)
    out.add("bwd/L0", "elementwise", calls=1, bytes=FLOAT_BYTES * rows * n)      # bias grad
    return out


def _param_bytes(row: Row, system: System, ds: Dataset) -> int:
    """Bytes of the weights the gradient all-reduce sums (Linear weights, biases, LayerNorm)."""
    w = layer_widths(row, ds)
    total = 0
    for i in range(len(w) - 1):
        fan_in = w[i] * (2 if row.model == "graphsage" else 1)
        total += fan_in * w[i + 1] + w[i + 1] * (2 if row.model == "graphsage" and
                                                 not (i == 0 and system.precompute_first) else 1)
        if system.layernorm and i < len(w) - 2:
            total += 2 * w[i + 1]
    return FLOAT_BYTES * total


# ----------------------------------------------------------------------------- pricing
GPU_TYPES = {"RTX 3090": "rtx3090", "V100": "v100", "V100-32GB": "v100",
             "RTX 2080 Ti": str(GPU_DIR / "rtx2080ti.yaml")}
HOST_LINKS = {"PCIe 3.0": ("pcie3x16", 15.75), "PCIe 4.0": ("pcie4x16", 31.5)}


def gpu_of(row: Row):
    """The row's GPU profile, its host link set to the row's PCIe generation."""
    hardware = _cost_api()[1]
    if row.gpu_type not in GPU_TYPES:
        raise InputError(f"line {row.line}: gpu_type {row.gpu_type!r} has no profile; "
                         f"known: {', '.join(GPU_TYPES)}")
    gpu = hardware.get_gpu(GPU_TYPES[row.gpu_type])
    for prefix, (link, gbps) in HOST_LINKS.items():
        if row.interconnect.startswith(prefix):
            gpu = dataclasses.replace(gpu, host_link=link, host_link_gbps=gbps)
    return gpu


def network_of(row: Row):
    """NetworkModel of the row's servers: host-staged PCIe inside a server, Ethernet
    between servers (``pcie4-host-staged``; a PCIe 3.0 twin of it for PCIe 3.0 rows)."""
    from cdfgnn.comm.network import NETWORK_PROFILES, LinkProfile, NetworkModel
    from cdfgnn.partition.base import Topology
    if row.interconnect.startswith("PCIe 3.0"):
        profile = LinkProfile("pcie3-host-staged", 7.875, 1.25, 7.875, 1.25, 10e-6, 50e-6,
                              source="PCIe 3.0 x16 nominal 15.75 GB/s halved for host staging "
                                     "(as pcie4-host-staged); 10 GbE between servers assumed")
    else:
        profile = NETWORK_PROFILES.get("pcie4-host-staged")
    # the GPUs of one server share its one NIC and all send at once (every rank has
    # halo rows on the other server): each gets 1/devices of the line rate
    per_host = row.gpus // row.hosts
    profile = dataclasses.replace(profile, inter_gbps=profile.inter_gbps / per_host,
                                  inter_bcast_gbps=profile.inter_bcast_gbps / per_host)
    return NetworkModel(Topology.for_workers(row.gpus, row.hosts), profile)


@dataclass
class Prepared:
    """A row with its counts, ready to be priced for any efficiency constants."""

    row: Row
    system: System
    gpu: object
    works: list[RankWork]
    network: object


def prepare(row: Row, counts: dict, scale: int) -> Prepared:
    system = system_of(row)
    gpu = gpu_of(row)
    if system.kind == "copy":
        return Prepared(row, system, gpu, [], None)
    ds = dataset_of(row)
    stats, k, correction = None, 1.0, 1.0
    if system.kind == "edge-cut":
        stats = counts[count_key(row.dataset, row.dataset in system.inductive, row.gpus, scale)]
        k = ds.nodes / stats["scale"]
        correction = halo_correction(row.dataset, counts, scale)
    works = rank_works(row, stats, k, correction)
    return Prepared(row, system, gpu, works, network_of(row) if row.gpus > 1 else None)


def predict(prep: Prepared, eff, link_bw: float = 1.0) -> tuple[float, float | None]:
    """(epoch seconds, communication seconds) the model gives for the row; ``link_bw``
    is the fraction of the link profile's bandwidth the row's backend sustains."""
    pricing = _cost_api()[3]
    if prep.system.kind == "copy":
        return _copy_seconds(prep, eff), None
    compute = [pricing.price(w.ledger, prep.gpu, eff)["total"] for w in prep.works]
    if prep.network is None:
        return max(compute), None
    vertex, reduce = _comm_seconds(prep, eff, link_bw)
    if prep.system.pipeline:
        per_rank = [max(c, v) + r for c, v, r in zip(compute, vertex, reduce)]
        exposed = [max(0.0, v - c) for c, v in zip(compute, vertex)]
        return max(per_rank), max(exposed)
    return max(c + v + r for c, v, r in zip(compute, vertex, reduce)), max(vertex)


def _copy_seconds(prep: Prepared, eff) -> float:
    pricing = _cost_api()[3]
    if prep.row.model == "copy-d2d":      # read + write in device memory
        return pricing.op_seconds("elementwise", {"calls": 1, "bytes": 2 * COPY_BYTES},
                                  prep.gpu, eff)
    return pricing.op_seconds("copy", {"calls": 1, "bytes": COPY_BYTES}, prep.gpu, eff)


def _link_seconds(net, r: int, bytes_to, msgs_to, link_bw: float) -> float:
    """NetworkModel seconds with the bandwidth term divided by ``link_bw``."""
    zeros = np.zeros_like(bytes_to)
    return (net.comm_seconds(r, zeros, msgs_to)
            + net.comm_seconds(r, bytes_to, np.zeros_like(msgs_to)) / link_bw)


def _comm_seconds(prep: Prepared, eff, link_bw: float) -> tuple[list[float], list[float]]:
    """Per rank: halo exchange and gradient all-reduce seconds. Gloo stages every byte
    through host memory (device-to-host before sending, host-to-device after receiving)."""
    pricing = _cost_api()[3]
    net, p = prep.network, prep.row.gpus
    sent = np.stack([w.halo_bytes_to for w in prep.works])
    staged = prep.row.backend == "gloo"
    vertex, reduce = [], []
    for r, w in enumerate(prep.works):
        v = _link_seconds(net, r, w.halo_bytes_to, w.halo_msgs_to, link_bw)
        if staged:
            v += pricing.host_copy_seconds(sent[r].sum() + sent[:, r].sum(), prep.gpu, eff)
        vertex.append(v)
        ring_bytes, ring_msgs = np.zeros(p), np.zeros(p)
        ring_bytes[(r + 1) % p] = 2.0 * (p - 1) / p * w.param_bytes
        ring_msgs[(r + 1) % p] = 2 * (p - 1)
        red = _link_seconds(net, r, ring_bytes, ring_msgs, link_bw)
        if staged:
            red += pricing.host_copy_seconds(2 * w.param_bytes, prep.gpu, eff)
        reduce.append(red)
    return vertex, reduce


# ------------------------------------------------------------------- split, fit, report
FITTED = ("dense_flop", "stream_bw", "spmm_bw", "host_copy_bw", "launch", "link_bw")
#: multipliers tried per constant and round: 0.25x .. 4x, log-spaced
STEPS = tuple(float(x) for x in np.exp(np.linspace(math.log(0.25), math.log(4.0), 17)))
MAX_ROUNDS = 30


@dataclass(frozen=True)
class Constants:
    """What the fit adjusts: the pricing's Efficiency and ``link_bw``, the fraction of the
    link profiles' bandwidth the peers' gloo exchanges sustain (this benchmark's own:
    ``Efficiency`` has no network field)."""

    eff: object
    link_bw: float = 1.0

    def get(self, key: str) -> float:
        return self.link_bw if key == "link_bw" else getattr(self.eff, key)

    def but(self, key: str, value: float) -> "Constants":
        if key == "link_bw":
            return dataclasses.replace(self, link_bw=value)
        return dataclasses.replace(self, eff=self.eff.but(**{key: value}))


def split_halves(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """Deterministic split, stratified by system: each system's rows in CRC order of
    their ``source`` text, alternately to calibration and validation (calibration
    first), so every kind of measurement is in both halves. Never looks at a row's
    numbers."""
    calib, valid = [], []
    for system in sorted({r.system for r in rows}):
        mine = sorted((r for r in rows if r.system == system),
                      key=lambda r: (zlib.crc32(r.source.encode()), r.source))
        calib.extend(mine[0::2])
        valid.extend(mine[1::2])
    return calib, valid


def log_errors(preps: list[Prepared], c: Constants) -> list[float]:
    """Log ratios predicted / published: epoch of every row, communication where given."""
    out = []
    for prep in preps:
        epoch, comm = predict(prep, c.eff, c.link_bw)
        out.append(math.log(epoch / prep.row.epoch_s))
        if comm is not None and prep.row.comm_s:
            out.append(math.log(max(comm, 1e-9) / prep.row.comm_s))
    return out


def fit(preps: list[Prepared], c: Constants) -> tuple[Constants, float]:
    """Coordinate search over FITTED minimising the mean squared log ratio on ``preps``
    (the calibration half only)."""
    def loss(trial: Constants) -> float:
        errs = log_errors(preps, trial)
        return sum(x * x for x in errs) / len(errs)

    best = loss(c)
    for _ in range(MAX_ROUNDS):
        improved = False
        for key in FITTED:        # the best multiplier of this constant, others fixed
            for value in [c.get(key) * step for step in STEPS]:
                if not _in_bounds(key, value):
                    continue
                trial = c.but(key, value)
                trial_loss = loss(trial)
                if trial_loss < best - 1e-9:
                    c, best, improved = trial, trial_loss, True
        if not improved:
            break
    return c, best


#: the range each constant may take: physically plausible fractions of a peak (a
#: bandwidth-bound kernel below 30% of DRAM bandwidth, or gloo below 5% of the line rate,
#: would mean the model misses a cost, not that the device is that slow)
BOUNDS = {"dense_flop": (0.2, 1.0), "stream_bw": (0.3, 1.0), "spmm_bw": (0.1, 1.5),
          "host_copy_bw": (0.1, 1.0), "launch": (0.5, 20.0), "link_bw": (0.05, 1.0)}


def _in_bounds(key: str, value: float) -> bool:
    low, high = BOUNDS[key]
    return low <= value <= high


def ratio_summary(ratios: list[float]) -> tuple[float, float, float, float]:
    """(median ratio, median |log ratio|, 80th percentile |log ratio|, share within 2x)."""
    logs = np.abs(np.log(np.asarray(ratios)))
    within = float(np.mean(logs <= math.log(2.0) + 1e-12))
    return (float(np.median(ratios)), float(np.median(logs)), float(np.percentile(logs, 80)),
            within)


def report(preps: list[Prepared], calib_ids: set[int], c: Constants) -> list[str]:
    lines = [f"{'line':>4} {'half':5} {'system':26} {'dataset':15} {'model':9} {'P':>2}x{'H':<1} "
             f"{'gpu':11} {'epoch pub':>9} {'pred':>9} {'ratio':>6} {'comm pub':>9} "
             f"{'pred':>9} {'ratio':>6}"]
    halves: dict[str, dict[str, list[float]]] = {"calibration": {"epoch": [], "comm": []},
                                                 "validation": {"epoch": [], "comm": []}}
    for prep in preps:
        row = prep.row
        half = "calibration" if row.line in calib_ids else "validation"
        epoch, comm = predict(prep, c.eff, c.link_bw)
        halves[half]["epoch"].append(epoch / row.epoch_s)
        comm_txt = f"{'-':>9} {'-':>9} {'-':>6}"
        if comm is not None and row.comm_s:
            halves[half]["comm"].append(max(comm, 1e-9) / row.comm_s)
            comm_txt = f"{row.comm_s:9.4f} {comm:9.4f} {max(comm, 1e-9) / row.comm_s:6.2f}"
        lines.append(f"{row.line:4d} {half[:5]:5} {row.system[:26]:26} {row.dataset[:15]:15} "
                     f"{row.model[:9]:9} {row.gpus:2d}x{row.hosts:<1d} {row.gpu_type[:11]:11} "
                     f"{row.epoch_s:9.4f} {epoch:9.4f} {epoch / row.epoch_s:6.2f} {comm_txt}")
    lines.append("")
    for half, data in halves.items():
        for what, ratios in data.items():
            if ratios:
                med, mlog, p80, within = ratio_summary(ratios)
                lines.append(f"{half} {what}: {len(ratios)} rows, median ratio {med:.3f}, "
                             f"median |log ratio| {mlog:.3f}, 80th percentile |log ratio| "
                             f"{p80:.3f}, within 2x {100 * within:.0f}%")
    for half, data in halves.items():
        med, _, _, within = ratio_summary(data["epoch"]) if data["epoch"] else (math.nan, 0, 0, 0)
        lines.append(f"{half}: {len(data['epoch'])} rows, median ratio {med:.3f}, "
                     f"within 2x: {100 * within:.0f}%")
    return lines


def efficiency_text(eff, link_bw: float, command: str) -> str:
    """The fitted constants as efficiency.yaml (same keys and order as the dataclass)."""
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    head = ["# Efficiency constants of the roofline pricing (cdfgnn/cost/pricing.py), in one place.",
            f"# Fitted by `{command}` on {stamp} (UTC) on the calibration half",
            "# of benchmarks/data/published_epochs.csv; the validation half was not used.",
            "# dense_flop, stream_bw, spmm_bw, host_copy_bw, launch are fitted; use_tf32 and",
            "# spmm_reuse keep their starting values. Figures: docs/results.md, 'Time model validation'.",
            f"# The same fit gives link_bw = {link_bw:.4g} (fraction of the link profiles' bandwidth the",
            "# peers' gloo exchanges sustain); Efficiency has no network field, so it is not stored here."]
    body = []
    for key, value in eff.describe().items():
        if isinstance(value, bool):
            body.append(f"{key}: {'true' if value else 'false'}")
        elif isinstance(value, float):
            body.append(f"{key}: {value:.4g}")
        else:
            body.append(f"{key}: {json.dumps(value)}")
    return "\n".join(head + body) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", default=str(DEFAULT_CSV), help="CSV of published measurements")
    ap.add_argument("--scale", type=int, default=100_000,
                    help="vertices of the scaled twins behind the partition statistics")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="partition statistics cache")
    ap.add_argument("--build-counts", action="store_true",
                    help="only build (and time) the missing partition statistics, then exit")
    ap.add_argument("--write-efficiency", action="store_true",
                    help="write the fitted constants to cdfgnn/cost/efficiency.yaml")
    args = ap.parse_args(argv)
    try:
        rows = read_published(args.published)
        for row in rows:
            check_row(row)
        counts = load_counts(rows, args.scale, Path(args.cache), verbose=True)
        if args.build_counts:
            return 0
        preps = [prepare(row, counts, args.scale) for row in rows]
    except InputError as exc:
        print(f"time_model: {exc}", file=sys.stderr)
        return 2
    from cdfgnn.errors import CdfgnnError
    try:
        for name in sorted({r.dataset for r in rows if r.dataset in VOLUME_FIGURES}):
            print(f"halo rows of {name}: twin x {halo_correction(name, counts, args.scale):.3f} "
                  f"to match {VOLUME_FIGURES[name].source}")
        return _calibrate_and_report(args, rows, preps)
    except CdfgnnError as exc:
        print(f"time_model: {exc}", file=sys.stderr)
        return 2


def _calibrate_and_report(args, rows: list[Row], preps: list[Prepared]) -> int:
    efficiency = _cost_api()[4]
    calib, _ = split_halves(rows)
    calib_ids = {row.line for row in calib}
    start = Constants(efficiency.load_efficiency())
    fitted, loss = fit([p for p in preps if p.row.line in calib_ids], start)
    eff = fitted.eff.but(source=f"fitted by benchmarks/time_model.py on {len(calib)} calibration "
                                f"rows of {Path(args.published).name}")
    print(f"published rows: {len(rows)} from {len({r.system for r in rows})} systems; "
          f"partition statistics from twins at {args.scale} vertices, scaled to full size")
    print("fitted constants (calibration half, mean squared log ratio "
          f"{loss:.4f}): " + ", ".join(f"{k}={fitted.get(k):.4g}" for k in FITTED))
    if args.write_efficiency:
        from cdfgnn.fileio import atomic_write_bytes
        command = "python benchmarks/time_model.py --write-efficiency"
        atomic_write_bytes(efficiency.EFFICIENCY_FILE,
                           efficiency_text(eff, fitted.link_bw, command).encode())
        print(f"wrote {efficiency.EFFICIENCY_FILE}")
    for line in report(preps, calib_ids, fitted):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
