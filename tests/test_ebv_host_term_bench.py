"""benchmarks/ebv_host_term.py on graph files: the host term per source, same partitioner."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "osm_helsinki_roads.txt.gz"


def _load():
    spec = importlib.util.spec_from_file_location("ebv_host_term_bench",
                                                  ROOT / "benchmarks" / "ebv_host_term.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(bench, monkeypatch, capsys, *args: str) -> list[str]:
    """The output lines of ``ebv_host_term.py --graphs FIXTURE ARGS``."""
    monkeypatch.setattr(sys, "argv", ["ebv_host_term.py", "--graphs", str(FIXTURE), *args])
    bench.main()
    return capsys.readouterr().out.strip().splitlines()


def test_a_graph_file_gets_one_line_per_topology_and_its_own_mean(monkeypatch, capsys):
    out = _run(_load(), monkeypatch, capsys, "--topologies", "2x2", "2x4")
    runs = [line for line in out if line.startswith("osm_helsinki_roads h2x")]
    assert [line.split()[1] for line in runs] == ["h2x2", "h2x4"]
    changes = [float(re.search(r"Outer ([+-]\d+\.\d)%", line).group(1)) for line in runs]
    mean = re.fullmatch(r"osm_helsinki_roads: mean Outer change ([+-]\d+\.\d)% over 2 runs",
                        out[-2])
    assert mean and float(mean.group(1)) == pytest.approx(sum(changes) / 2, abs=0.06)
    assert out[-1].startswith("order degree gamma 0.1: mean Outer change")


def test_with_twins_needs_graphs(monkeypatch):
    bench = _load()
    monkeypatch.setattr(sys, "argv", ["ebv_host_term.py", "--with-twins"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2


def test_outer_share_over_chance():
    """1 where every mirror is on another host (one device per host) and for host-blind
    shares; below 1 where mirrors keep to their host."""
    bench = _load()
    from cdfgnn.data.importers import read_any_graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.partition.stats import partition_stats
    g = read_any_graph(FIXTURE)
    one_each = partition_stats(g, partition_graph(g, "ebv", Topology(4, 1), seed=0))
    assert bench.chance_share(one_each) == pytest.approx(1.0, abs=1e-12)
    base = {"num_parts": 4, "devices_per_host": 2}
    assert bench.chance_share({**base, "outer_sum": 2, "inner_sum": 1}) == pytest.approx(1.0)
    assert bench.chance_share({**base, "outer_sum": 1, "inner_sum": 2}) == pytest.approx(0.5)


def test_rewiring_keeps_every_degree_up_to_dropped_loops_and_repeats():
    """The configuration model: each vertex keeps its degree less the ends of the dropped
    self-loops and repeated pairs; the result is symmetric, loop-free and seeded."""
    bench = _load()
    from cdfgnn.data.importers import read_any_graph
    g = read_any_graph(FIXTURE)
    h, kept = bench.rewire(g, seed=3)
    deg, new = np.diff(g.indptr), np.diff(h.indptr)
    assert h.num_nodes == g.num_nodes and np.all(new <= deg)
    assert h.num_edges == pytest.approx(kept * g.num_edges, abs=1)
    assert 0.99 < kept <= 1.0       # a road network: almost no loop or repeat to drop
    src = np.repeat(np.arange(h.num_nodes), new)
    assert not np.any(src == h.indices)
    pairs = set(zip(src.tolist(), h.indices.tolist()))
    assert all((b, a) in pairs for a, b in pairs) and len(pairs) == h.indices.shape[0]
    again, _ = bench.rewire(g, seed=3)
    assert np.array_equal(again.indices, h.indices)
    assert not np.array_equal(bench.rewire(g, seed=4)[0].indices, h.indices)
    # its edges are not the graph's: the rewiring keeps degrees, not neighbours
    assert len(pairs & set(zip(np.repeat(np.arange(g.num_nodes), deg).tolist(),
                               g.indices.tolist()))) < 0.05 * len(pairs)


def test_rewire_adds_the_rewired_graph_beside_the_graph(monkeypatch, capsys):
    out = _run(_load(), monkeypatch, capsys, "--topologies", "2x2", "--rewire")
    assert any(re.fullmatch(r"osm_helsinki_roads-rewired seed 0: \d+\.\d% of the edges kept "
                            r"\(self-loops and repeated pairs dropped\)", line) for line in out)
    means = {line.split(":")[0]: float(re.search(r"([+-]\d+\.\d)%", line).group(1))
             for line in out if ": mean Outer change" in line and not line.startswith("order")}
    assert set(means) == {"osm_helsinki_roads", "osm_helsinki_roads-rewired"}
    # the last line averages the graphs themselves, not their rewirings
    last = re.fullmatch(r"order degree gamma 0.1: mean Outer change ([+-]\d+\.\d)% over 1 "
                        r"configurations \(target: <= -10%\)", out[-1])
    assert last and float(last.group(1)) == means["osm_helsinki_roads"]
