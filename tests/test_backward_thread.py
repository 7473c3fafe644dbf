"""Backward runs on the calling thread with autograd's multithreading off (the reason:
cdfgnn/train/backward.py). On a CPU the engine uses the calling thread anyway, so the
test reads the setting itself inside a backward node."""
from __future__ import annotations

import threading

import torch

from cdfgnn.train.backward import backward


class _Probe(torch.autograd.Function):
    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        _Probe.seen.append((torch.autograd.is_multithreading_enabled(),
                            threading.get_ident()))
        return g


def test_backward_keeps_the_pass_on_the_calling_thread():
    _Probe.seen.clear()
    x = torch.ones(3, requires_grad=True)
    backward(_Probe.apply(x).sum())
    assert _Probe.seen == [(False, threading.get_ident())]
    assert torch.autograd.is_multithreading_enabled()   # restored afterwards
    assert torch.equal(x.grad, torch.ones(3))
