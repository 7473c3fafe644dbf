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


#: test files that must share a worker under pytest-xdist (one scheduling unit each):
#: those on the smoke tree (a worker builds it once; its tests change it and restore
#: it) and those that make network namespaces (they check host-wide state they made)
SHARED_WORKER = {"test_pipeline.py": "smoke-tree", "test_readme_commands.py": "smoke-tree",
                 "test_lost_ranks.py": "netns", "test_multihost_netns.py": "netns"}


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the files of :data:`SHARED_WORKER` joined into one unit each
    (xdist's ``--dist loadgroup`` would do it by markers, but with pytest 9.2 its groups
    are silently ignored: it rewrites ``item._nodeid``, which ``Item.nodeid`` no longer
    reads; measured with xdist 3.8.0)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(path.rsplit("/", 1)[-1], path)

    return SharedFileScheduling(config, log)


def _new_smoke_build(tmp_path_factory):
    from smoke import SmokeBuild

    work = tmp_path_factory.mktemp("smoke") / "work"
    work.mkdir()
    return SmokeBuild(work)


@pytest.fixture(scope="session")
def _smoke_build(request, tmp_path_factory):
    """configs/smoke.yaml's build (tests/smoke.py), started with the first test of a file
    on the tree (:func:`_smoke_build_starts_with_its_files`) when a selected test uses
    ``smoke_tree``: it runs beside the tests before the first that needs it, instead of
    in that test's setup. Stopped (its processes killed) at the session's end if it is
    still running then. Under pytest-xdist each worker is a session of its
    own; the files on the tree share a worker (:func:`pytest_xdist_make_scheduler`), so
    only that worker builds."""
    if not any("smoke_tree" in getattr(item, "fixturenames", ())
               for item in request.session.items):
        yield None
        return
    build = _new_smoke_build(tmp_path_factory)
    try:
        yield build
    finally:
        build.stop()


@pytest.fixture(autouse=True, scope="module")
def _smoke_build_starts_with_its_files(request):
    """Start the smoke build at the first test of a file on the smoke tree
    (:data:`SHARED_WORKER`), so that a worker which runs none of them builds nothing."""
    if SHARED_WORKER.get(request.path.name) == "smoke-tree":
        request.getfixturevalue("_smoke_build")


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
