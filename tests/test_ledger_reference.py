"""The operation ledger's counts are a fixed point: reference runs recorded before the
counting was made cheaper (tests/fixtures/ledger_reference.json) are recomputed and
compared exactly, so that repricing old records and the claims built on them do not move
when the counting's implementation changes.

Per configuration the fixture holds the run's ledger totals (readable), a SHA-256 of
``model_time.device.inputs`` (every epoch's or step's ledger per rank and phase, per
part where a rank holds several, the exchanged bytes the device model prices: all of
what ``reprice`` reads), the per-tag bytes and messages of the communicator and the
per-epoch losses. Ledgers, bytes and messages are integers that no machine changes;
the losses are compared to 1e-6 (relative) in float32 and 1e-12 in float64, since the
last bits of a float32 product depend on the CPU's BLAS kernels. (A cache's hits follow
values, so a float32 cache run's counts could in principle move with those last bits on
another CPU; the CDFGNN cache runs only in float32.)

Regenerate (only when the counts are meant to change, and say why in the commit):
``python tests/test_ledger_reference.py``.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "ledger_reference.json"

#: small graphs: (vertices, seed) of conftest's ``_make_graph``
GRAPHS = {"g240": dict(n=240, seed=0), "g600": dict(n=600, seed=5, isolated=0)}
_BASE = dict(graph="g240", epochs=4, warmup=0, hidden=8, workers=2, hosts=1,
             partitioner="metis", seed=0, timeout_s=120)
_SAMPLED = dict(graph="g600", model="sage", workers=2, hosts=2, fanouts=[4, 4],
                batch_size=32, hidden=16, network="rapidgnn-chameleon", devices="p100")

#: name -> TrainConfig keywords (``graph``: a GRAPHS key; ``ne_parts``: an NE partition
#: into that many parts, ``workers`` ranks holding them)
CONFIGS: dict[str, dict] = {
    "exact-gcn-p1": dict(workers=1, partitioner="random-nodes"),
    "exact-gcn-p2-dropout": dict(dropout=0.5),
    "exact-sage-p4": dict(model="sage", workers=4, hosts=2),
    "exact-gat-p2": dict(model="gat", heads=2, dropout=0.3),
    "exact-gcn-p3-float64": dict(workers=3, dtype="float64"),
    "exact-linear8-p2": dict(method_params={"codec": "linear-8"}, hosts=2),
    "cdfgnn-cache-p2": dict(method="cdfgnn-cache", partitioner="ne"),
    "cdfgnn-quant-p4": dict(method="cdfgnn-quant", partitioner="ne", workers=4),
    "cofree-16parts-p2": dict(method="cofree", model="sage", dropout=0.3, ne_parts=16),
    "jaca-p2": dict(method="jaca", hosts=2),
    "capgnn-p4": dict(method="capgnn", workers=4, hosts=2),
    "sar-p3": dict(method="sar", workers=3),
    "sylvie-s-p2": dict(method="sylvie-s"),
    "pipegcn-p2": dict(method="pipegcn"),
    "bns-gcn-p2": dict(method="bns-gcn", dropout=0.5),
    "distdgl-metis-p2": dict(method="distdgl-metis", **_SAMPLED),
    "rapidgnn-p2": dict(method="rapidgnn", **_SAMPLED),
    "rapidgnn-gat-p3": dict(method="rapidgnn", **{**_SAMPLED, "model": "gat", "workers": 3,
                                                  "hosts": 3, "dropout": 0.3}),
}


def _graph_files(tmp: Path) -> dict[str, str]:
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import _make_graph
    files = {}
    for name, kw in GRAPHS.items():
        files[name] = str(tmp / f"{name}.npz")
        _make_graph(**kw).save(files[name])
    return files


def _config(name: str, files: dict[str, str], tmp: Path):
    from cdfgnn.data.graph import Graph
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Topology
    from cdfgnn.train.config import TrainConfig

    kw = {**_BASE, **CONFIGS[name]}
    kw["graph"] = files[kw["graph"]]
    parts = kw.pop("ne_parts", None)
    if parts:
        pfile = tmp / f"{name}-ne{parts}.npz"
        partition_graph(Graph.load(kw["graph"]), "ne", Topology(1, parts), seed=0).save(pfile)
        kw["partition_file"] = str(pfile)
    return TrainConfig(dataset=None, **kw)


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def counts_only(inputs: dict) -> dict:
    """The record's device inputs without the column-locality curves (``arc_share``: a
    statistic of each rank's matrix for the SpMM pricing, not a count; it was added to
    the inputs after the fixture was recorded and is tested in tests/test_locality.py)."""
    return {**inputs, "ranks": [{**rk, "patterns": [{k: v for k, v in pat.items()
                                                      if k != "arc_share"}
                                                     for pat in rk["patterns"]]}
                                for rk in inputs["ranks"]]}


def summarise(rec: dict) -> dict:
    """What the fixture keeps of a run record."""
    dev = rec["model_time"]["device"]
    return {"ledger_totals": dev["ledger_totals"],
            "inputs_sha256": digest(counts_only(dev["inputs"])),
            "by_tag": {t: {k: v[k] for k in ("bytes", "msgs")}
                       for t, v in sorted(rec["comm"]["by_tag"].items())},
            "losses": [row["loss"] for row in rec["epochs"]],
            "dtype": rec["config"]["dtype"]}


def run(name: str, files: dict[str, str], tmp: Path) -> dict:
    from cdfgnn.train.run import run_training
    return summarise(run_training(_config(name, files, tmp)))


@pytest.fixture(scope="module")
def reference():
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ledger-reference")
    return tmp, _graph_files(tmp)


def test_the_fixture_covers_every_configuration(reference):
    assert sorted(reference) == sorted(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_counts_equal_the_reference(name, reference, files):
    tmp, gfiles = files
    got, want = run(name, gfiles, tmp), reference[name]
    assert got["ledger_totals"] == want["ledger_totals"]
    assert got["inputs_sha256"] == want["inputs_sha256"], "a phase's or epoch's counts moved"
    assert got["by_tag"] == want["by_tag"]
    tol = 1e-12 if want["dtype"] == "float64" else 1e-6
    assert len(got["losses"]) == len(want["losses"])
    for a, b in zip(got["losses"], want["losses"]):
        assert math.isclose(a, b, rel_tol=tol), (got["losses"], want["losses"])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = _graph_files(tmp)
        out = {name: run(name, files, tmp) for name in CONFIGS}
    FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes, {len(out)} configurations)")


if __name__ == "__main__":
    main()
