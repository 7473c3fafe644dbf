"""Per-part send counts: the real graphs' data file and the send skew measured on twins
(benchmarks/data/real_partition_parts.csv, cdfgnn.twins.measure.send_skew)."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from cdfgnn.data.graph import csr_from_edges
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.stats import halo_counts
from cdfgnn.twins.measure import part_sends, send_skew
from cdfgnn.twins.targets import read_part_sends

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
SUM = re.compile(r"sum of the (\d+) per-part counts = (\d+), divided by N = (\d+)")


def _halo_rows_with_a_note():
    """halo_copies_per_vertex rows whose note holds the sum of the per-part counts."""
    with (DATA / "real_partition_stats.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            m = SUM.search(row.get("note") or "")
            if row["metric"] == "halo_copies_per_vertex" and m:
                yield row, tuple(int(x) for x in m.groups())


def test_per_part_counts_sum_to_the_published_halo_copies():
    parts = read_part_sends(DATA / "real_partition_parts.csv")
    noted = list(_halo_rows_with_a_note())
    assert len(noted) == len(parts) == 28
    for row, (p, total, n) in noted:
        sends = parts[(row["graph"], int(row["parts"]))]
        assert len(sends) == p == int(row["parts"])
        assert sum(sends) == total and n == int(row["vertices"])
        assert total / n == pytest.approx(float(row["value"]), abs=1e-6)


def test_send_skew_is_max_over_mean():
    assert send_skew([1, 2, 3]) == pytest.approx(1.5)
    assert send_skew([5, 5]) == 1.0
    reddit4 = read_part_sends(DATA / "real_partition_parts.csv")[("reddit-dgl", 4)]
    assert send_skew(reddit4) == pytest.approx(106126 / (403522 / 4))
    for bad in ([], [0, 0], [[1, 2]]):
        with pytest.raises(CdfgnnError):
            send_skew(bad)


def test_part_sends_are_the_rows_each_part_sends():
    """Column sums of halo_rows = per part, over its vertices, the other parts holding a
    neighbour (the count the real graphs' files hold), checked by brute force."""
    rng = np.random.default_rng(0)
    n, p = 60, 4
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    ok = src != dst
    ip, ix = csr_from_edges(src[ok], dst[ok], n)
    parts = rng.integers(0, p, n)
    want = np.zeros(p)
    for v in range(n):
        others = {int(parts[u]) for u in ix[ip[v]:ip[v + 1]]} - {int(parts[v])}
        want[parts[v]] += len(others)
    got = part_sends(halo_counts(ip, ix, parts, p)["halo_rows"])
    assert got.tolist() == want.tolist()


def test_bad_parts_file_is_refused(tmp_path):
    head = "graph,vertices,arcs,partitioner,parts,part,send_rows,source\n"
    for body in ("g,10,20,metis,2,0,5,s\ng,10,20,metis,2,0,6,s\n",   # part repeated
                 "g,10,20,metis,2,0,5,s\n",                          # part missing
                 "g,10,20,metis,2,2,5,s\ng,10,20,metis,2,0,5,s\n",   # part out of range
                 "g,10,20,metis,2,0,x,s\ng,10,20,metis,2,1,5,s\n"):  # not a count
        f = tmp_path / "parts.csv"
        f.write_text(head + body)
        with pytest.raises(CdfgnnError, match="parts.csv"):
            read_part_sends(f)
    with pytest.raises(CdfgnnError, match="does not exist"):
        read_part_sends(tmp_path / "none.csv")


def test_twin_fidelity_prints_the_skew_table_before_its_two_last_lines(tmp_path):
    """benchmarks/twin_fidelity.py end to end on a small twin: one skew row per P of the
    real graph's per-part file, the summary line, then the fitted / predicted lines."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "twin_fidelity.py"),
                          "--nodes", "3000", "--twins", "synth-arxiv",
                          "--cache", str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.strip().splitlines()
    rows = [ln.split() for ln in lines if ln.startswith("ogbn-arxiv ") and len(ln.split()) == 6]
    assert [int(r[2]) for r in rows] == [2, 3, 4, 8, 16, 32, 64]
    real = read_part_sends(DATA / "real_partition_parts.csv")
    for r in rows:
        assert float(r[4]) == pytest.approx(send_skew(real[("ogbn-arxiv", int(r[2]))]), abs=1e-3)
        assert float(r[5]) == pytest.approx(float(r[3]) / float(r[4]), abs=2e-3)
    assert re.fullmatch(r"send skew: 7 points, median ratio \d+\.\d{3}, within 25%: \d+%",
                        lines[-4])
    assert lines[-2].startswith("fitted: ") and lines[-1].startswith("predicted: ")
