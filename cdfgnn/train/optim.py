"""Adam, computed as ``torch.optim.Adam`` computes it, without importing torch._dynamo.

Constructing any ``torch.optim`` optimizer imports ``torch._dynamo`` (its methods are
wrapped by ``torch._disable_dynamo``, which imports the compiler on first call): 1.3 s
of import, about 2 s of a training job on a 2-core CPU since every rank thread waits
on the import lock. A
pipeline of a few hundred short training jobs pays that again and again, so the trainers
use this class instead.

For each parameter ``p`` with gradient ``g`` at step ``t`` (L2 weight decay ``wd``):

    g   <- g + wd * p
    m   <- m + (1 - beta1) * (g - m)                  (lerp)
    v   <- beta2 * v + (1 - beta2) * g * g
    p   <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The operations are ``torch.optim.Adam``'s single-tensor path (``amsgrad=False``,
``maximize=False``, the path it takes for CPU tensors) in the same order on the same
dtypes, so parameters stay bit-identical to ``torch.optim.Adam`` on the CPU
(tests/test_optim.py). On CUDA ``torch.optim.Adam`` would pick its multi-tensor path; this
class keeps the single-tensor one everywhere, so distributed runs and the oracle always
share one update rule.
"""
from __future__ import annotations

from typing import Iterable

import torch


class Adam:
    """Adam over a fixed list of parameters: ``zero_grad()`` then ``step()``."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"Adam: lr, eps and weight_decay must be >= 0 "
                             f"(got lr={lr}, eps={eps}, weight_decay={weight_decay})")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam: betas must lie in [0, 1), got {betas}")
        self.params = list(params)
        self.lr, self.eps, self.weight_decay = float(lr), float(eps), float(weight_decay)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self._exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format)
                         for p in self.params]
        self._exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format)
                            for p in self.params]
        self._param_steps = [0] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients (``set_to_none``) or zero them in place, as torch.optim does."""
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
                continue
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        beta1, beta2, lr, eps, wd = self.beta1, self.beta2, self.lr, self.eps, self.weight_decay
        for i, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            self._param_steps[i] += 1
            step = float(self._param_steps[i])
            if wd != 0:
                grad = grad.add(param, alpha=wd)
            exp_avg, exp_avg_sq = self._exp_avg[i], self._exp_avg_sq[i]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2 ** 0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)
