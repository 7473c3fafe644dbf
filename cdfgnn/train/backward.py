"""``backward(loss)``: the whole backward pass on the calling thread, on every device.

On a GPU, torch's autograd engine runs the CUDA nodes of a backward pass on one worker
thread per device, shared by every thread that calls backward. Thread-backend ranks that
share a GPU would then (1) run their backward collectives (the halo exchange's
``HaloExchange.backward``) on that one thread, where a rank waiting for its peer blocks the
peer's backward queued behind it, a deadlock; and (2) lose their thread-local state on
that thread (the operation ledger's counts and phase, :mod:`cdfgnn.cost.ledger`). With
autograd's multithreading off (``torch.autograd.set_multithreading_enabled``, a per-thread
setting), each rank's backward runs on its own thread, as it does on the CPU.
"""
from __future__ import annotations

import torch


def backward(loss: torch.Tensor) -> None:
    """``loss.backward()`` on the calling thread (see the module docstring)."""
    with torch.autograd.set_multithreading_enabled(False):
        loss.backward()
