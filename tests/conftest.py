"""Shared fixtures: small graphs built here, so engine tests do not depend on the twins."""
from __future__ import annotations

import numpy as np
import pytest

from cdfgnn.data.graph import Graph


def _make_graph(n: int = 240, avg_degree: float = 6.0, classes: int = 5, features: int = 12,
               seed: int = 0, isolated: int = 3, multilabel: bool = False) -> Graph:
    """A homophilous random graph with a few isolated vertices (exercises every code path)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    m = int(n * avg_degree / 2)
    src = rng.integers(0, n - isolated, m)
    # 70% of edges inside the class: pick a partner with the same label
    same = rng.random(m) < 0.7
    by_class = [np.flatnonzero(y[: n - isolated] == c) for c in range(classes)]
    dst = rng.integers(0, n - isolated, m)
    for c in range(classes):
        sel = same & (y[src] == c)
        if by_class[c].size:
            dst[sel] = rng.choice(by_class[c], sel.sum())
    x = (np.eye(classes)[y] @ rng.standard_normal((classes, features)) * 0.8
         + rng.standard_normal((n, features))).astype(np.float32)
    if multilabel:
        y = (rng.random((n, classes)) < 0.3).astype(np.float32)
    split = rng.random(n)
    return Graph.from_edges(src, dst, n, x=x, y=y, train=split < 0.5,
                            val=(split >= 0.5) & (split < 0.7), test=split >= 0.7,
                            name=f"test-graph-{seed}")


@pytest.fixture(scope="session")
def make_graph():
    """Factory fixture: ``make_graph(n=..., seed=...)`` builds a small test graph."""
    return _make_graph


@pytest.fixture(scope="session")
def small_graph() -> Graph:
    return _make_graph()


@pytest.fixture(scope="session")
def multilabel_graph() -> Graph:
    return _make_graph(n=160, seed=3, multilabel=True)


@pytest.fixture(scope="session")
def graph_file(tmp_path_factory, small_graph) -> str:
    """``small_graph`` saved as a Graph file (for run_training's ``graph=``)."""
    path = tmp_path_factory.mktemp("small-graph") / "graph.npz"
    small_graph.save(path)
    return str(path)


@pytest.fixture
def two_hosts():
    """Two namespaced hosts joined by a veth pair shaped to 1 Gbit/s (cdfgnn.comm.netns);
    skips naming why where they cannot be made (needs root, ``ip`` and ``tc``). Every
    process left in them is killed and both are deleted, even when the test fails."""
    from cdfgnn.comm import netns

    reason = netns.unavailable()
    if reason:
        pytest.skip(reason)
    hosts = netns.TwoHosts()
    try:
        try:
            hosts.build()
        except OSError as exc:
            pytest.skip(f"cannot make network namespaces here: {exc}")
        yield hosts
    finally:
        hosts.destroy()
        assert not hosts.exists()


def _new_smoke_build(tmp_path_factory):
    from smoke import SmokeBuild

    work = tmp_path_factory.mktemp("smoke") / "work"
    work.mkdir()
    return SmokeBuild(work)


@pytest.fixture(scope="session", autouse=True)
def _smoke_build(request, tmp_path_factory):
    """configs/smoke.yaml's build (tests/smoke.py), started with the session's first test
    when a selected test uses ``smoke_tree``: it runs at the lowest CPU priority on what
    the tests before it leave idle, instead of in a test's setup. Stopped (its processes
    killed) at the session's end if it is still running then. Under pytest-xdist each
    worker is a session with a tree of its own (`--dist loadfile` keeps a file's tests,
    which change the tree and restore it, on one worker)."""
    if not any("smoke_tree" in getattr(item, "fixturenames", ())
               for item in request.session.items):
        yield None
        return
    build = _new_smoke_build(tmp_path_factory)
    try:
        yield build
    finally:
        build.stop()


@pytest.fixture(scope="session")
def smoke_tree(_smoke_build, tmp_path_factory):
    """configs/smoke.yaml built once per session (interrupted, then resumed: tests/smoke.py),
    shared by tests/test_pipeline.py and tests/test_readme_commands.py."""
    build = _smoke_build or _new_smoke_build(tmp_path_factory)
    try:
        return build.result()
    finally:
        if _smoke_build is None:
            build.stop()
