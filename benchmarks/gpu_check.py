"""The one-call GPU check's measurements: kernels and one training run, measured on the
GPU and predicted by the package's time model on the detected card's profile.

Run through ``bash benchmarks/gpu_check.sh`` (which runs the GPU tests first); alone:

    python benchmarks/gpu_check.py --out DIR [--stage kernels|train|all]

Every stage appends its rows to ``DIR/gpu_check.md`` (a markdown table) and
``DIR/gpu_check.jsonl`` (one JSON object per row) as soon as they are measured, so a
run cut off by its time limit still reports what it finished.

What is measured, and how:

* **kernels**: on the reddit twin (``synth-reddit``, medium scale: 100,000 vertices,
  about 10M arcs), the engine's own CSR SpMM (:class:`cdfgnn.models.propagate.SparseMatrix`,
  GCN-normalised values) and the dense product ``X @ W`` of a GCN layer's transform
  (``X`` the twin's 100,000 x 602 features), each at widths 16, 64 and 256; plus a
  streaming elementwise add (``a + b`` on 256 MB tensors). The SpMMs run again on the same
  graph stored in community order (every vertex renumbered by its place in the twin's
  hierarchy, so that a block's vertices, which hold most of each other's edges, sit
  together in memory, as in a graph stored by communities or partitions): the model prices
  both alike (its column locality counts how often columns are read, not in what order), so
  the two rows' ratios measure what the storage order alone is worth to the L2. Times are
  CUDA-event medians of 20 calls after 3 warm-ups. Two rows measure the fixed cost per call, which the time
  model's ``launch`` constant prices: a chain of 1,000 tiny adds (1,024 floats) and of
  1,000 SpMMs on a 2,708-vertex slice of the twin at width 16, each timed by the wall
  clock over the whole chain (synchronised once at the end) and divided by 1,000; CUDA
  events inside one call would miss the host's dispatch. The prediction counts the same
  call with the operation ledger
  (:func:`cdfgnn.cost.ledger.counting`) and prices the counts on the card's profile with the
  package's pricing (:func:`cdfgnn.pricing.roofline.price`): the same path every device-modelled
  epoch takes.
* **train**: ``cdfgnn train`` of ``exact`` on the same twin, one worker on the GPU, 20
  epochs (5 warm-up), GCN (``--models`` adds SAGE, GAT), 2 layers, hidden 256. Measured:
  the record's epoch time with ``--count-ops false`` (counting adds host work per op).
  Predicted: the ``device_epoch_time_s`` of the same run with counting on, priced on the
  card's profile.

A card with no profile in ``cdfgnn/pricing/gpus.yaml`` is measured and its predictions are
left empty, saying so.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

#: (substring of torch.cuda.get_device_name, profile in cdfgnn/pricing/gpus.yaml)
CARD_PROFILES = (("H200", "h200"), ("H100", "h100"), ("H800", "h800"), ("A100-SXM4-80", "a100-80"),
                 ("A100 80GB", "a100-80"), ("A100", "a100-40"), ("A800", "a800"),
                 ("V100", "v100"), ("A40", "a40"), ("RTX A6000", "rtx-a6000"),
                 ("RTX 3090", "rtx3090"), ("RTX 3060", "rtx3060"), ("T4", "t4"))
#: the kernel stage's widths; ``GPU_CHECK_WIDTHS=16,32,64`` sweeps others
WIDTHS = tuple(int(w) for w in os.environ.get("GPU_CHECK_WIDTHS", "16,64,256").split(","))
DATASET = os.environ.get("GPU_CHECK_DATASET", "synth-reddit")
SCALE = os.environ.get("GPU_CHECK_SCALE", "medium")
EPOCHS, WARMUP = 20, 5


def card_profile(name: str) -> str | None:
    for key, profile in CARD_PROFILES:
        if key.lower() in name.lower():
            return profile
    return None


class Report:
    """Appends each row to the markdown table and the JSON lines as it comes."""

    HEADER = ("| stage | what | measured (ms) | predicted (ms) | measured / predicted |\n"
              "|---|---|---:|---:|---:|\n")

    def __init__(self, out: Path, profile: str | None):
        self.md, self.jsonl, self.profile = out / "gpu_check.md", out / "gpu_check.jsonl", profile
        if "| stage |" not in (self.md.read_text() if self.md.exists() else ""):
            with self.md.open("a") as f:
                f.write(self.HEADER)

    def row(self, stage: str, what: str, measured_s: float, predicted_s: float | None,
            **extra) -> None:
        ratio = measured_s / predicted_s if predicted_s else None
        pred = f"{predicted_s * 1e3:.3f}" if predicted_s else "no profile"
        rat = f"{ratio:.2f}" if ratio else "-"
        with self.md.open("a") as f:
            f.write(f"| {stage} | {what} | {measured_s * 1e3:.3f} | {pred} | {rat} |\n")
        with self.jsonl.open("a") as f:
            f.write(json.dumps(dict(stage=stage, what=what, measured_s=measured_s,
                                    predicted_s=predicted_s, ratio=ratio,
                                    profile=self.profile, **extra)) + "\n")
        print(f"gpu_check: {stage} {what}: measured {measured_s * 1e3:.3f} ms, "
              f"predicted {pred} ms, ratio {rat}", flush=True)


#: where the check runs: cuda (its purpose); ``GPU_CHECK_DEVICE=cpu`` tries the script's
#: logic on a machine without a GPU (the numbers then mean nothing)
DEVICE = os.environ.get("GPU_CHECK_DEVICE", "cuda")


def cuda_median(fn, reps: int = 20, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    if DEVICE == "cpu":
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def chain_per_call(fn, calls: int = 1000, warm: int = 50) -> float:
    """Wall seconds per call of ``calls`` calls issued back to back and synchronised once:
    the fixed cost eager torch pays per call (dispatch and launch), queue included."""
    for _ in range(warm):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls


def predicted(fn, profile: str | None, share=None) -> tuple[float | None, dict]:
    """The package's price of what ``fn`` issues, counted by the ledger; ``share``: the
    column locality of its sparse matrix (cdfgnn.partition.locality)."""
    from cdfgnn.pricing.hardware import get_gpu
    from cdfgnn.cost.ledger import Ledger, counting
    from cdfgnn.pricing.roofline import price

    led = Ledger()
    with counting(led):
        fn()
    totals = led.totals()
    if profile is None:
        return None, totals
    return price(led, get_gpu(profile), share=share)["total"], totals


def gcn_matrix(indptr: np.ndarray, indices: np.ndarray, dev):
    """The engine's GCN-normalised CSR operator of the graph (``indptr``, ``indices``)."""
    from cdfgnn.models.propagate import SparseMatrix, norm_values

    n = len(indptr) - 1
    deg = np.maximum(np.diff(indptr), 1)       # an isolated vertex has no arc to weigh
    return SparseMatrix(indptr, indices, norm_values("gcn", deg, deg, indptr, indices),
                        (n, n), device=dev)


def spmm_rows(report: Report, indptr: np.ndarray, indices: np.ndarray, dev, gen,
              label: str = "") -> None:
    """One row per width of :data:`WIDTHS`: the SpMM of :func:`gcn_matrix`, measured and
    priced with the matrix's column locality."""
    from cdfgnn.partition.locality import arc_share

    n, nnz = len(indptr) - 1, int(len(indices))
    sm, share = gcn_matrix(indptr, indices, dev), arc_share(indices, n)
    for w in WIDTHS:
        h = torch.randn(n, w, device=dev, generator=gen)
        fn = lambda: sm @ h  # noqa: E731
        pred, _ = predicted(fn, report.profile, share)
        report.row("kernels", f"SpMM {n}x{n} ({nnz} arcs) x width {w}{label}", cuda_median(fn),
                   pred, width=w, nnz=nnz)


def stage_kernels(report: Report) -> None:
    from cdfgnn.data.datasets import get_graph

    t0 = time.perf_counter()
    g = get_graph(DATASET, scale=SCALE, seed=0)
    dev = torch.device(DEVICE)
    x = torch.from_numpy(np.asarray(g.x, dtype=np.float32)).to(dev)
    print(f"gpu_check: {DATASET} {SCALE}: {g.num_nodes} vertices, {len(g.indices)} arcs, "
          f"{x.shape[1]} features (built in {time.perf_counter() - t0:.1f} s)", flush=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    spmm_rows(report, g.indptr, g.indices, dev, gen)
    stage_community_order(report, g, dev, gen)
    for w in WIDTHS:
        wt = torch.randn(x.shape[1], w, device=dev, generator=gen)
        fn = lambda: x @ wt  # noqa: E731
        pred, _ = predicted(fn, report.profile)
        report.row("kernels", f"dense {x.shape[0]}x{x.shape[1]} @ {x.shape[1]}x{w}",
                   cuda_median(fn), pred, width=w)
    a = torch.randn(64 * 2**20, device=dev, generator=gen)
    b = torch.randn(64 * 2**20, device=dev, generator=gen)
    fn = lambda: a + b  # noqa: E731
    pred, _ = predicted(fn, report.profile)
    report.row("kernels", "elementwise add, 2 x 256 MB in, 256 MB out", cuda_median(fn), pred)
    stage_fixed_costs(report, g, dev, gen)


def community_ids(name: str, num_nodes: int) -> np.ndarray | None:
    """Every vertex's place in the hierarchy of twin ``name`` at ``num_nodes`` vertices,
    seed 0 (a block's vertices contiguous); None for a graph that is not a twin."""
    from cdfgnn.data.synthetic import TWINS, twin_skeleton

    if name not in TWINS:
        return None
    _, hierarchy, _ = twin_skeleton(TWINS[name], num_nodes, 0)
    return hierarchy.pos


def renumbered(g, new_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric CSR of graph ``g`` with vertex v numbered ``new_id[v]``."""
    from cdfgnn.data.graph import csr_from_edges

    return csr_from_edges(new_id[g.row_of_arcs()], new_id[np.asarray(g.indices)], g.num_nodes)


def stage_community_order(report: Report, g, dev, gen) -> None:
    """The kernel stage's SpMMs on ``g`` stored in community order (:func:`community_ids`)."""
    new_id = community_ids(DATASET, g.num_nodes)
    if new_id is None:
        print(f"gpu_check: {DATASET} is not a twin: no community order, its SpMM rows skipped")
        return
    indptr, indices = renumbered(g, new_id)
    spmm_rows(report, indptr, indices, dev, gen, label=", community order")


def stage_fixed_costs(report: Report, g, dev, gen) -> None:
    """Per-call cost of calls too small to be bound by memory or arithmetic."""
    from cdfgnn.twins.measure import induced

    a = torch.randn(1024, device=dev, generator=gen)
    b = torch.randn(1024, device=dev, generator=gen)
    fn = lambda: a + b  # noqa: E731
    pred, _ = predicted(fn, report.profile)
    report.row("kernels", "tiny add (1,024 floats), wall per call in a chain of 1,000",
               chain_per_call(fn), pred)
    n = min(2708, g.num_nodes)               # Cora's vertex count: the first rows of the twin
    indptr, indices = induced(np.asarray(g.indptr), np.asarray(g.indices),
                              np.arange(g.num_nodes) < n)
    sm = gcn_matrix(indptr, indices, dev)
    h = torch.randn(n, 16, device=dev, generator=gen)
    fn = lambda: sm @ h  # noqa: E731
    pred, _ = predicted(fn, report.profile)
    report.row("kernels", f"small SpMM {n}x{n} ({len(indices)} arcs) x width 16, wall per "
               "call in a chain of 1,000", chain_per_call(fn), pred, nnz=int(len(indices)))


def _train(out: Path, graph: Path, model: str, count_ops: bool, profile: str | None) -> dict:
    rec = out / f"train_{model}_count_{str(count_ops).lower()}.json"
    cmd = [sys.executable, "-m", "cdfgnn.cli", "train", "--graph", str(graph), "--dataset", DATASET,
           "--workers", "1", "--method", "exact", "--device", DEVICE, "--epochs", str(EPOCHS),
           "--warmup", str(WARMUP), "--model", model, "--hidden", "256", "--layers", "2",
           "--count-ops", str(count_ops).lower(), "--out", str(rec)]
    if profile and count_ops:
        cmd += ["--devices", profile]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"gpu_check: train {model} (count-ops {count_ops}) took "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return json.loads(rec.read_text())["summary"]


def stage_train(report: Report, out: Path, models: tuple[str, ...]) -> None:
    graph = out / "twin.npz"
    subprocess.run([sys.executable, "-m", "cdfgnn.cli", "prepare", "--dataset", DATASET,
                    "--scale", SCALE, "--out", str(graph)], check=True, stdout=subprocess.DEVNULL)
    try:
        for model in models:
            free = _train(out, graph, model, False, report.profile)
            counted = _train(out, graph, model, True, report.profile)
            pred = counted.get("device_epoch_time_s") if report.profile else None
            report.row("train", f"exact, {DATASET} {SCALE}, 1 GPU, {model.upper()} 2x256, "
                       f"{EPOCHS} epochs (epoch time)", free["epoch_time_s"], pred, model=model,
                       measured_counting_on_s=counted["epoch_time_s"],
                       final_loss=free["final_loss"])
    finally:
        graph.unlink(missing_ok=True)     # 0.3 GB: never shipped back with the results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_check.md and gpu_check.jsonl")
    ap.add_argument("--stage", choices=("kernels", "train", "all"), default="all")
    ap.add_argument("--models", default="gcn", help="models of the train stage, comma-separated "
                    "(gcn, sage, gat)")
    args = ap.parse_args(argv)
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU (torch.cuda.is_available() is False); nothing measured")
        return 3
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if DEVICE == "cpu":
        name, info = "cpu (GPU_CHECK_DEVICE=cpu: a trial of the script)", {}
        profile = "h100"
    else:
        name = torch.cuda.get_device_name(0)
        props = torch.cuda.get_device_properties(0)
        profile = card_profile(name)
        info = dict(sms=props.multi_processor_count,
                    l2_mb=getattr(props, "L2_cache_size", 0) / 1e6,
                    memory_gb=props.total_memory / 1e9, cuda=torch.version.cuda)
    info = dict(card=name, profile=profile, torch=torch.__version__, **info)
    (out / "gpu_check_device.json").write_text(json.dumps(info, indent=1))
    print("gpu_check: device " + json.dumps(info), flush=True)
    if profile is None:
        print(f"gpu_check: no profile for {name!r} in cdfgnn/pricing/gpus.yaml: measured only")
    report = Report(out, profile)
    if args.stage in ("kernels", "all"):
        stage_kernels(report)
    if args.stage in ("train", "all"):
        stage_train(report, out, tuple(args.models.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
