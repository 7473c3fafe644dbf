"""cdfgnn.train.optim.Adam against torch.optim.Adam: bit-identical parameters."""
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from cdfgnn.train.optim import Adam


def _run(opt_cls, steps, weight_decay, lr, set_to_none, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    frozen = torch.nn.Parameter(torch.randn(4))          # never gets a gradient
    opt = opt_cls(list(model.parameters()) + [frozen], lr=lr, weight_decay=weight_decay)
    x, y = torch.randn(32, 7), torch.randint(0, 3, (32,))
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()] + [frozen.detach().clone()]


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(1, 12), weight_decay=st.sampled_from([0.0, 5e-4, 0.1]),
       lr=st.sampled_from([0.003, 0.01, 0.3]), set_to_none=st.booleans(),
       seed=st.integers(0, 1000))
def test_matches_torch_adam_bit_for_bit(steps, weight_decay, lr, set_to_none, seed):
    ours = _run(Adam, steps, weight_decay, lr, set_to_none, seed)
    ref = _run(torch.optim.Adam, steps, weight_decay, lr, set_to_none, seed)
    for a, b in zip(ours, ref):
        assert torch.equal(a, b)


def test_zero_grad_in_place_keeps_the_buffer():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    buffer = p.grad
    Adam([p]).zero_grad(set_to_none=False)
    assert p.grad is buffer and torch.equal(p.grad, torch.zeros(3))
    Adam([p]).zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("kwargs", [{"lr": -1.0}, {"weight_decay": -0.1}, {"betas": (1.0, 0.9)}])
def test_rejects_bad_hyperparameters(kwargs):
    with pytest.raises(ValueError, match="Adam"):
        Adam([torch.nn.Parameter(torch.ones(1))], **kwargs)


def test_a_training_step_does_not_import_dynamo():
    code = ("import sys, torch\n"
            "from cdfgnn.train.optim import Adam\n"
            "p = torch.nn.Parameter(torch.ones(2)); opt = Adam([p], lr=0.1)\n"
            "(p * p).sum().backward(); opt.step(); opt.zero_grad()\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
