"""The fused numba kernels of the CDFGNN cache equal the torch formulation they replaced:
kernel by kernel on random rows (with zero, unchanged, borderline and NaN rows), and
whole training runs bit for bit against the previous torch implementation
(tests/_cdfgnn_torch_cache.py) for lossless, lossy and literal-push settings."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import _cdfgnn_torch_cache as ref
from cdfgnn.comm.codecs import pack_bits
from cdfgnn.methods import cdfgnn_kernels as K
from cdfgnn.methods.cdfgnn_cache import _Lists
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training


def _rows(seed: int, n: int = 300, d: int = 13):
    """z and pushed with special rows: zero, unchanged, borderline, NaN."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g)
    pushed = z + 0.05 * torch.randn(n, d, generator=g) * (torch.rand(n, 1, generator=g) < 0.5)
    z[0] = 0.0                     # zero row, zero pushed: never sent
    pushed[0] = 0.0
    z[1] = 0.0                     # zero row, non-zero pushed: sent (our choice)
    pushed[2] = z[2]               # unchanged
    z[3] = 0.0                     # borderline: |diff| max == float32(0.1) * max|z|
    z[3, 0] = 1.0
    pushed[3] = z[3]
    pushed[3, 1] = -float(np.float32(0.1))
    z[4, 5] = float("nan")         # NaN rows never pass (torch.amax gives NaN)
    pushed[5, 2] = float("nan")
    return z.contiguous(), pushed.contiguous()


def _peer_lists(seed: int, n: int, sizes=(0, 37, 120, 81)):
    """Disjoint, unsorted per-peer lists of rows (as the mirrors' send lists); the
    special rows 0-5 are in the first non-empty list."""
    perm = np.random.default_rng(seed).permutation(np.arange(6, n))
    rows = np.concatenate([np.arange(6), perm]).astype(np.int64)
    cuts = np.cumsum((0,) + tuple(sizes))
    return [rows[cuts[i]:cuts[i + 1]] for i in range(len(sizes))]


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.03])
@pytest.mark.parametrize("mode", [K.FEEDBACK_EXACT, K.FEEDBACK_LITERAL, K.FEEDBACK_LATER])
def test_push_changed_equals_torch(eps, mode):
    z, pushed = _rows(1)
    lists = _Lists(_peer_lists(2, z.shape[0]))
    p_ref = pushed.clone()
    p_new = pushed.clone()
    out, ooff = lists.block(z.shape[1], lossless=True)   # message layout: row offsets
    K.push_changed(z.numpy(), p_new.numpy(), lists.idx, lists.off, np.float32(eps), mode,
                   lists.bitmap, lists.boff, out, ooff, lists.sel, lists.counts)
    for q, idx in enumerate(lists.lists):
        idx = torch.from_numpy(idx)
        mask = ref.over_threshold(z[idx], pushed[idx], eps)
        rows = idx[mask]
        lo, n = int(ooff[q]), int(lists.counts[q])
        assert n == int(mask.sum())
        diff = z[rows] - pushed[rows]
        assert torch.equal(torch.from_numpy(out[lo:lo + n]), diff)
        first = int(lists.off[q])
        assert torch.equal(torch.from_numpy(lists.sel[first:first + n]), rows)
        bitmap = lists.bitmap[lists.boff[q]:lists.boff[q + 1]]
        assert np.array_equal(bitmap, pack_bits(mask.to(torch.int32).reshape(1, -1), 1)
                              .reshape(-1).numpy())
        if mode == K.FEEDBACK_EXACT:
            p_ref[rows] += diff
        elif mode == K.FEEDBACK_LITERAL:
            p_ref[rows] = z[rows]
    assert torch.equal(torch.nan_to_num(p_new, 7.0), torch.nan_to_num(p_ref, 7.0))
    if eps == 0.1:   # the borderline row: eps is rounded to float32 first, as torch does
        assert not ref.over_threshold(z[3:4], pushed[3:4], eps)[0]
    assert not ref.over_threshold(z[4:6], pushed[4:6], eps).any()


def test_master_steps_equal_torch():
    z, pushed = _rows(3)
    n, d = z.shape
    agg = torch.randn(n, d, generator=torch.Generator().manual_seed(4))
    recv = _peer_lists(5, n, sizes=(40, 0, 90, 60))
    recv[2][:10] = recv[0][:10]          # masters hear from several mirrors
    rng = np.random.default_rng(6)
    agg_ref, agg_new = agg.clone(), agg.clone()
    active_ref = torch.zeros(n, dtype=torch.bool)
    active_new = np.zeros(n, dtype=np.uint8)
    for idx in recv:
        mask = torch.from_numpy(rng.random(len(idx)) < 0.6)
        vals = torch.randn(int(mask.sum()), d, generator=torch.Generator().manual_seed(len(idx)))
        rows = torch.from_numpy(idx)[mask]
        agg_ref.index_add_(0, rows, vals)
        active_ref[rows] = True
        bitmap = pack_bits(mask.to(torch.int32).reshape(1, -1), 1).reshape(-1).numpy()
        K.add_flagged(agg_new.numpy(), active_new, idx, bitmap, vals.numpy())
    masters = torch.from_numpy(np.unique(np.concatenate(recv)))
    p_ref, p_new = pushed.clone(), pushed.clone()
    own = masters[ref.over_threshold(z[masters], p_ref[masters], 0.05)]
    agg_ref[own] += z[own] - p_ref[own]
    p_ref[own] = z[own]
    active_ref[own] = True
    K.master_own(z.numpy(), p_new.numpy(), agg_new.numpy(), active_new, masters.numpy(),
                 np.float32(0.05))
    assert torch.equal(agg_new, agg_ref)
    assert torch.equal(torch.nan_to_num(p_new, 7.0), torch.nan_to_num(p_ref, 7.0))
    assert torch.equal(torch.from_numpy(active_new).bool(), active_ref)
    # scatter: the active rows of every peer list, then the mirrors' overwrite
    lists = _Lists(recv)
    block, ooff = lists.block(d, lossless=False)
    K.select_active(agg_new.numpy(), active_new, lists.idx, lists.off, lists.bitmap,
                    lists.boff, block, ooff, lists.counts)
    target = torch.zeros(n, d)
    target_ref = target.clone()
    for q, idx in enumerate(recv):
        idx = torch.from_numpy(idx)
        mask = active_ref[idx]
        lo, c = int(lists.off[q]), int(lists.counts[q])
        assert torch.equal(torch.from_numpy(block[lo:lo + c]), agg_ref[idx[mask]])
        bitmap = lists.bitmap[lists.boff[q]:lists.boff[q + 1]]
        K.set_flagged(target.numpy(), idx.numpy(), bitmap, block[lo:lo + c])
        target_ref[idx[mask]] = agg_ref[idx[mask]]
    assert torch.equal(target, target_ref)
    cached = np.zeros(n, dtype=np.uint8)
    cached[masters.numpy()] = 1
    out = torch.empty_like(z)
    K.assemble(z.numpy(), agg_new.numpy(), cached, out.numpy())
    expect = z.clone()
    expect[masters] = agg_ref[masters]
    assert torch.equal(torch.nan_to_num(out, 7.0), torch.nan_to_num(expect, 7.0))


def _run(graph_file, method, **params):
    cfg = TrainConfig(dataset=None, graph=graph_file, epochs=6, warmup=1, hidden=16,
                      workers=4, hosts=2, partitioner="ebv", timeout_s=120, dropout=0.0,
                      method=method, method_params=params)
    rec = run_training(cfg)
    return ([e["loss"] for e in rec["epochs"]], [e["send_ratio"] for e in rec["epochs"]],
            [e["epsilon"] for e in rec["epochs"]],
            {t: (d["bytes"], d["rows"]) for t, d in rec["comm"]["by_tag"].items()})


@pytest.mark.parametrize("method,params", [
    ("cdfgnn-cache", {"epsilon": 0.02}),
    ("cdfgnn", {"epsilon": 0.02, "adaptive": False}),
    ("cdfgnn-cache", {"epsilon": 0.05, "error_feedback": False, "cache_interior": True}),
    ("cdfgnn-cache", {"epsilon": 0.02, "codec": "fp16"}),
    ("cdfgnn-cache", {"epsilon": 0.01, "codec": "stochastic-2"}),
])
def test_training_equals_the_torch_implementation(graph_file, monkeypatch, method, params):
    from cdfgnn.methods.cdfgnn_cache import CdfgnnCache
    fast = _run(graph_file, method, **params)
    calls = []
    torch_path = CdfgnnCache._torch_replica_sync
    with monkeypatch.context() as m:
        ref.patch(m)
        m.setattr(CdfgnnCache, "_torch_replica_sync",
                  lambda self, *a: calls.append(1) or torch_path(self, *a))
        slow = _run(graph_file, method, **params)
    assert calls, "the forced torch path was not taken"
    assert fast == slow
