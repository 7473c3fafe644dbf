"""Roofline pricing of an operation ledger on a device profile.

Every ledger entry (kind, counts) costs

    max(flops / (peak x eff_flop), bytes / (bandwidth x eff_bw)) + calls x launch

with the constants of :mod:`cdfgnn.pricing.efficiency`. Per kind:

* ``dense``: FP32 peak (TF32 when ``use_tf32``) x ``dense_flop``; operand and result
  bytes at ``stream_bw``;
* ``spmm``: its traffic (:func:`spmm_bytes`) at ``spmm_bw``, its 2 nnz w FLOPs at
  the FP32 peak x ``dense_flop``;
* ``dense_fp64``, ``spmm_fp64`` (float64 operands): the same, with FLOPs at the FP64
  peaks (:func:`flop_rate`: a dense product at ``fp64_tensor_tflops``, cuBLAS DGEMM's
  rate; an SpMM at ``fp64_tflops``; ``use_tf32`` never applies) and SpMM traffic in
  8-byte elements;
* ``elementwise``, ``gather``, ``codec``, ``cache``: bytes at ``stream_bw``;
* ``copy``: host-device bytes over the host link (PCIe) at ``host_copy_bw``.

SpMM traffic is modelled from the graph's own statistics, not calibrated per graph
class: a CSR SpMM over ``rows`` output rows, ``cols`` input rows and ``nnz`` arcs at
width ``w`` reads the index and values (12 B per arc: int64 column, float32 value),
writes ``rows x w`` floats, and reads the input rows: each distinct row once
(``cols x w``), and every repeated read (``nnz x w - cols x w``) again unless the L2
holds it. The L2 holds ``q = min(1, L2 / (4 cols w))`` of the input rows, and a cache
keeps the rows read most: the share of repeated reads it serves is ``spmm_reuse x
share(q)``, where ``share`` is the matrix's column locality
(:mod:`cdfgnn.partition.locality`: the share of arcs that read the most-read fraction ``q`` of
the columns, counted from the matrix; ``share(q) = q``, every column read equally often,
where the counts carry no curve). A read the L2 serves is not free: it moves at ``l2_bw``
times the DRAM bandwidth (a V100's L2 sustains about 2.2 TB/s against 0.75 TB/s from
DRAM: Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
arXiv:1804.06826, ch. 3). Hence the DRAM-equivalent bytes

    4 rows w + 4 cols w + 12 nnz + 4 repeated x (miss + hit / l2_bw),
    hit = spmm_reuse x share(q), miss = 1 - hit.

A float64 SpMM (``spmm_fp64``) moves 8-byte elements and 16 B per arc (int64 column,
float64 value). On DGL's Reddit at width 64 an RTX 3090 (6 MB L2) holds 10% of the input
rows, which a skewed graph reads far more often than 10% of the time; an H800 (50 MB L2)
holds most of them (higher sustained bandwidth, as HP-SpMM reports, about 1.1x nominal).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from cdfgnn.partition.locality import share_at
from cdfgnn.pricing.efficiency import Efficiency, load_efficiency
from cdfgnn.pricing.hardware import GpuProfile
from cdfgnn.cost.counts import FIELDS, Ledger

TERA, GIGA, MEGA = 1e12, 1e9, 1e6
#: bytes per arc of torch's CSR: int64 column index + float32 value
ARC_BYTES = 12
#: per SpMM kind: bytes per element of the dense operands, bytes per arc
SPMM_WIDTHS = {"spmm": (4.0, ARC_BYTES), "spmm_fp64": (8.0, 16)}


def spmm_bytes(f: Mapping[str, int], gpu: GpuProfile, eff: Efficiency,
               kind: str = "spmm", share: Sequence[float] | None = None) -> float:
    """Modelled DRAM-equivalent traffic of the SpMMs of ``kind`` summed in ``f``, with
    ``share`` the column locality of their matrix (None: uniform; module docstring). The
    width and the input rows of one call are the averages over the calls ``f`` sums."""
    elem, arc = SPMM_WIDTHS[kind]
    calls = max(int(f.get("calls", 0)), 1)
    cols_w, nnz_w = float(f.get("cols_w", 0)), float(f.get("nnz_w", 0))
    working_set = elem * cols_w / calls          # bytes of one SpMM's input rows
    fits = min(1.0, gpu.l2_mb * MEGA / working_set) if working_set > 0 else 1.0
    hit = eff.spmm_reuse * share_at(share, fits)
    repeated = max(nnz_w - cols_w, 0.0)
    return (elem * float(f.get("rows_w", 0)) + elem * cols_w
            + elem * repeated * ((1.0 - hit) + hit / eff.l2_bw)
            + arc * float(f.get("nnz", 0)))


def flop_rate(kind: str, gpu: GpuProfile, eff: Efficiency) -> float:
    """FLOP/s of the products of ``kind`` on ``gpu``: float64 ones at the FP64 peaks (a
    dense product at the FP64 tensor-core rate, which cuBLAS DGEMM uses unasked where the
    card has one; TF32 is a float32 mode, never applied to them), a float32 dense product
    at TF32 when ``use_tf32``, everything else at FP32; times ``dense_flop``."""
    if kind == "dense_fp64":
        tflops = gpu.fp64_tensor_tflops
    elif kind == "spmm_fp64":
        tflops = gpu.fp64_tflops
    elif kind == "dense" and eff.use_tf32:
        tflops = gpu.tf32_tflops
    else:
        tflops = gpu.fp32_tflops
    return tflops * TERA * eff.dense_flop


def launch_seconds(f: Mapping[str, int], gpu: GpuProfile, eff: Efficiency) -> float:
    """The fixed cost of the ``calls`` of a ledger entry: the host's time to launch them."""
    return float(f.get("calls", 0)) * gpu.launch_us * 1e-6 * eff.launch


def op_seconds(kind: str, f: Mapping[str, int], gpu: GpuProfile,
               eff: Efficiency | None = None, share: Sequence[float] | None = None) -> float:
    """Seconds of the ledger entries of one kind (fields summed over its calls);
    ``share``: the column locality of the SpMMs' matrix (:func:`spmm_bytes`)."""
    eff = eff or load_efficiency()
    launch = launch_seconds(f, gpu, eff)
    mem = gpu.mem_bw_gbps * GIGA
    flops = float(f.get("flops", 0))
    if kind in SPMM_WIDTHS:
        return max(flops / flop_rate(kind, gpu, eff),
                   spmm_bytes(f, gpu, eff, kind, share) / (mem * eff.spmm_bw)) + launch
    if kind == "copy":
        return float(f.get("bytes", 0)) / host_copy_rate(gpu, eff) + launch
    return max(flops / flop_rate(kind, gpu, eff),
               float(f.get("bytes", 0)) / (mem * eff.stream_bw)) + launch


def host_copy_rate(gpu: GpuProfile, eff: Efficiency | None = None) -> float:
    """Bytes per second of a D2H or H2D copy over the host link."""
    eff = eff or load_efficiency()
    return gpu.host_link_gbps * GIGA * eff.host_copy_bw


def host_copy_seconds(nbytes: float, gpu: GpuProfile, eff: Efficiency | None = None) -> float:
    return float(nbytes) / host_copy_rate(gpu, eff)


def _phases(ledger_or_totals) -> dict[str, dict[str, Mapping[str, int]]]:
    """``{phase: {kind: fields}}`` from a Ledger, its ``to_dict()`` or kind totals."""
    if isinstance(ledger_or_totals, Ledger):
        return ledger_or_totals.to_dict()
    data = dict(ledger_or_totals)
    if data and all(isinstance(v, Mapping) and set(v) <= set(FIELDS) for v in data.values()):
        return {"all": data}        # {kind: {field: n}}: one phase
    return data


def price(ledger_or_totals, profile: GpuProfile, eff: Efficiency | None = None,
          share: Sequence[float] | None = None) -> dict[str, float]:
    """Seconds per phase on ``profile`` (and ``"total"``, their sum); ``share``: the
    column locality of the rank's aggregation matrix (:mod:`cdfgnn.partition.locality`;
    None: uniform)."""
    eff = eff or load_efficiency()
    out: dict[str, float] = {}
    # sorted, as Ledger.to_dict orders them: the same sums for a Ledger and its dict
    for phase, kinds in sorted(_phases(ledger_or_totals).items()):
        out[phase] = sum(op_seconds(kind, f, profile, eff, share)
                         for kind, f in sorted(kinds.items()))
    out["total"] = sum(v for k, v in out.items() if k != "total")
    return out
