"""Which methods have passed on real GPU hardware: data, updated from docs/results.md.

A method enters :data:`VERIFIED_ON_CUDA` only after ``tests/test_gpu_methods.py`` (its
degenerate setting on cuda against ``exact`` on cuda and against the CPU run) passed
on a machine with a GPU and the run is recorded in docs/results.md ("GPU runs"), with
the card named. Until then ``cdfgnn train --device cuda --method M`` prints
:func:`unverified_warning`: every method declares cuda (its buffers follow the run's
device, checked on the CPU), but declaring is not the same as having run there.
"""
from __future__ import annotations

#: the run that verified them: tests/test_gpu_methods.py and tests/test_gpu_path.py, 39
#: passed (4 skipped: three need 2 GPUs for nccl, one needs no GPU), thread-backend ranks
#: sharing the GPU; the nccl process backend (one GPU per rank) is not verified yet
_H200_RUN = ("docs/results.md, 'GPU runs': NVIDIA H200, 2026-11-27, thread backend "
             "(nccl not run: one GPU)")
#: method name -> the docs/results.md evidence (section and card)
VERIFIED_ON_CUDA: dict[str, str] = {m: _H200_RUN for m in (
    "adaqp",
    "bns-gcn",
    "cagnet",
    "capgnn",
    "cdfgnn",
    "cdfgnn-baseline",
    "cdfgnn-cache",
    "cdfgnn-quant",
    "cofree",
    "cofree-edgecut",
    "distdgl-metis",
    "distdgl-random",
    "exact",
    "jaca",
    "pipegcn",
    "rapa",
    "rapidgnn",
    "sancus",
    "sar",
    "sylvie-a",
    "sylvie-s",
)}


def unverified_warning(method: str, device: str) -> str | None:
    """One line warning that ``method`` is not yet verified on ``device``, or None (the
    CPU, or a method recorded in :data:`VERIFIED_ON_CUDA`)."""
    if str(device).split(":")[0] != "cuda" or method in VERIFIED_ON_CUDA:
        return None
    return (f"cdfgnn: warning: method {method!r} is not yet verified on GPU hardware "
            f"(--device {device}); see docs/results.md, 'GPU runs'")
