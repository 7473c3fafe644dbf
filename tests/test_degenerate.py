"""Every registered method at its declared degenerate setting equals the oracle.

Each method declares on its class (``SyncStrategy.degenerate``, a
:class:`~cdfgnn.methods.base.Degenerate`) the parameters at which it must equal
``exact`` and the partition kind to check them on; one parametrised test runs each at
P = 2 and 4 (GCN, 2 layers, dropout 0.3: the counter-based masks agree with the
oracle's) and compares every epoch's loss and the final accuracies with the
one-process full-graph oracle (which ``exact`` equals, tests/test_exactness.py) within
1e-5. A method without such a setting declares None and a reason; its cases are
reported as skipped with that reason. This replaces the per-method copies of
"equals exact" tests (the method tests keep what is specific to each method: bytes,
skipped broadcasts, hit rates).
"""
from __future__ import annotations

import numpy as np
import pytest

import cdfgnn.methods  # noqa: F401  (registers the methods)
from cdfgnn.methods.base import METHODS, SyncStrategy, build_strategy
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.run import run_training

TOL = 1e-5
EPOCHS = 6
#: the partitioner of each kind (a method's own ``default_partitioner`` when it names one)
PARTITIONER = {"edge": "metis", "vertex": "ebv"}
# the package's own methods: other tests register throw-away ones (test-stale, the docs'
# worked example), and collection order decides which of those are there yet
NAMES = [n for n in METHODS.names() if METHODS.get(n).__module__.startswith("cdfgnn.methods.")]


def _cfg(graph_file, **kw) -> TrainConfig:
    return TrainConfig(graph=graph_file, dataset=None, model="gcn", layers=2, hidden=16,
                       epochs=EPOCHS, warmup=1, dropout=0.3, timeout_s=120, **kw)


@pytest.fixture(scope="module")
def oracle(graph_file):
    return run_training(_cfg(graph_file, trainer="full-graph"))


def _partitioner(cls) -> str:
    kind = cls.degenerate.kind
    own = cls.default_partitioner
    if own is not None:
        from cdfgnn.partition.api import ensure_registered
        from cdfgnn.partition.base import PARTITIONERS
        ensure_registered()
        if PARTITIONERS.get(own).kind == kind:
            return own
    return PARTITIONER[kind]


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("name", NAMES)
def test_degenerate_setting_equals_oracle(graph_file, oracle, name, p):
    cls = METHODS.get(name)
    setting = cls.degenerate
    if setting.params is None:
        pytest.skip(f"{name}: no degenerate setting: {setting.reason}")
    rec = run_training(_cfg(graph_file, method=name, method_params=dict(setting.params),
                            workers=p, hosts=2, partitioner=_partitioner(cls)))
    got = np.array([e["loss"] for e in rec["epochs"]])
    ref = np.array([e["loss"] for e in oracle["epochs"]])
    diff = np.abs(got - ref).max()
    assert diff <= TOL, (f"{name} {setting.params} at P={p}: max |loss - oracle| = {diff:.3g} "
                         f"over {EPOCHS} epochs")
    for split in ("train", "val", "test"):
        a, b = rec["epochs"][-1][split], oracle["epochs"][-1][split]
        assert abs(a - b) <= TOL, f"{name} at P={p}: final {split} accuracy {a} != oracle {b}"


@pytest.mark.parametrize("name", NAMES)
def test_every_method_declares_its_degenerate_setting(name):
    cls = METHODS.get(name)
    declared = any("degenerate" in vars(k) for k in cls.__mro__ if k is not SyncStrategy)
    assert declared, f"{name} does not declare `degenerate` (a Degenerate on its class)"
    setting = cls.degenerate
    assert setting.kind in PARTITIONER, f"{name}: unknown partition kind {setting.kind!r}"
    assert cls.partition_kind in (None, setting.kind), name
    if setting.params is None:
        assert len(setting.reason) > 20, f"{name}: say why it has no degenerate setting"
    else:
        build_strategy(name, dict(setting.params))   # parameters the method accepts
