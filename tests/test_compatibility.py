"""One compatibility check per method (``SyncStrategy.check_compatible``), run wherever a
config is validated: `cdfgnn train` stops an impossible pairing before any graph is
loaded or any rank starts, and a pipeline config with one fails validation, in both
cases with one line naming both sides."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

import cdfgnn.methods  # noqa: F401  (registers methods)
from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.config import load_config
from cdfgnn.experiments.grid import Grid
from cdfgnn.methods.base import METHODS, RunSpec
from cdfgnn.train.config import TrainConfig

REPO = Path(__file__).resolve().parent.parent


def _spec(**kw) -> RunSpec:
    base = dict(model="gcn", partitioner="metis", partition_kind="edge", parts=2, workers=2)
    return RunSpec(**{**base, **kw})


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run_counting_cpu(cmd: list[str], cwd: Path, timeout: float) -> tuple[int, str, float]:
    """Run ``cmd``; return its exit code, its stderr and the CPU seconds of that child alone.

    ``os.wait4`` reports the usage of the one child it reaps. A difference of
    ``RUSAGE_CHILDREN`` around the run would also count any earlier test's child that
    ``subprocess`` happens to reap in that window (it reaps leftovers on every new
    ``Popen``): CI once charged this run 190 s that way.
    """
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        stderr = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, stderr, usage.ru_utime + usage.ru_stime


def test_cli_refuses_gat_with_bns_gcn_before_any_work(tmp_path):
    """`cdfgnn train --model gat --method bns-gcn` exits 2 with one line naming both.

    The graph is a twin the run would have to generate and the partitioning one it
    would have to compute, so nothing under ``tmp_path`` means the check came first.
    The bound is on the child's CPU seconds, not the wall clock (2 shared cores here):
    measured 3.4-3.9 s under a load average of 18-20, of which importing torch alone
    took 3.0-3.4 s in the same conditions.
    """
    out = tmp_path / "run.json"
    returncode, stderr, cpu_s = _run_counting_cpu(
        [sys.executable, "-m", "cdfgnn.cli", "train", "--model", "gat", "--method", "bns-gcn",
         "--dataset", "synth-arxiv", "--scale", "small", "--data-root", str(tmp_path / "data"),
         "--partitioner", "metis", "--workers", "2", "--backend", "process",
         "--out", str(out)],
        cwd=tmp_path, timeout=300)
    assert returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "'bns-gcn'" in lines[0] and "'gat'" in lines[0]
    assert "rank" not in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert cpu_s < 5.0, f"{cpu_s:.2f} CPU seconds"


def test_validate_names_both_sides_in_one_line():
    cases = [
        (dict(model="gat", method="bns-gcn"), ("'bns-gcn'", "'gat'")),
        (dict(model="gat", method="sar"), ("'sar'", "'gat'")),
        (dict(method="cdfgnn", partitioner="metis"), ("'cdfgnn'", "'metis'")),
        (dict(method="jaca", partitioner="hdrf"), ("'jaca'", "'hdrf'")),
        (dict(method="rapa", partitioner="ebv"), ("'rapa'", "'ebv'")),
        (dict(method="rapidgnn", partitioner="hdrf"), ("'rapidgnn'", "'hdrf'")),
        (dict(model="gat", method="exact", partitioner="hdrf"), ("'gat'", "'hdrf'")),
    ]
    for kw, names in cases:
        with pytest.raises(CdfgnnError) as err:
            TrainConfig(epochs=1, **kw).validate()
        msg = str(err.value)
        assert "\n" not in msg and all(n in msg for n in names), (kw, msg)


def test_every_method_declares_what_it_checks():
    """The base check reads the declarations; every registered method accepts a run
    that fits them and refuses one that does not."""
    for name in METHODS.names():
        cls = METHODS.get(name)
        kind = cls.partition_kind or "edge"
        model = (cls.supported_models or ("gcn",))[0]
        assert cls.check_compatible(_spec(model=model, partition_kind=kind)) is None, name
        if cls.partition_kind is not None:
            other = "vertex" if kind == "edge" else "edge"
            assert name in cls.check_compatible(_spec(model=model, partition_kind=other))
        if cls.supported_models is not None and "gat" not in cls.supported_models:
            assert "'gat'" in cls.check_compatible(_spec(model="gat", partition_kind=kind))
        many = cls.check_compatible(_spec(model=model, partition_kind=kind, parts=4))
        assert (many is None) == bool(cls.communication_free), name


def test_parts_per_worker_from_a_partition_file(tmp_path, small_graph):
    from cdfgnn.partition.api import partition_graph
    from cdfgnn.partition.base import Partitioning, Topology

    path = tmp_path / "p.npz"
    partition_graph(small_graph, "ne", Topology(1, 4), seed=0).save(path)
    assert Partitioning.read_header(path)["kind"] == "vertex"
    ok = TrainConfig(method="cofree", partition_file=str(path), workers=2)
    ok.validate()
    assert ok.run_spec().parts == 4
    with pytest.raises(CdfgnnError, match=r"method 'exact' exchanges rows between parts: it "
                                          r"needs one part per worker"):
        TrainConfig(method="exact", partition_file=str(path), workers=2).validate()


def _bad_pipeline_config() -> dict:
    cfg = load_config([REPO / "configs" / "smoke.yaml"], root=REPO)
    cfg["methods"]["bns"] = {"name": "bns-gcn"}
    cfg["experiments"]["gat-bns"] = {"datasets": ["synth-arxiv"], "partitioners": ["metis"],
                                      "topologies": ["h1x2"], "methods": ["exact", "bns"],
                                      "seeds": [0], "train": {"model": "gat", "epochs": 2}}
    return cfg


def test_pipeline_config_with_an_impossible_pairing_fails_validation():
    with pytest.raises(CdfgnnError) as err:
        Grid(_bad_pipeline_config())
    msg = str(err.value)
    assert "\n" not in msg
    assert "experiments.gat-bns" in msg and "'bns-gcn'" in msg and "'gat'" in msg


def test_pipeline_parts_per_worker_checked_per_topology():
    cfg = load_config([REPO / "configs" / "smoke.yaml"], root=REPO)
    cfg["experiments"]["capped"] = {"datasets": ["synth-arxiv"], "partitioners": ["metis"],
                                    "topologies": ["h1x4"], "methods": ["exact"],
                                    "seeds": [0], "workers": 2}
    with pytest.raises(CdfgnnError, match=r"experiments.capped: run metis/h1x4/exact: method "
                                          r"'exact' exchanges rows between parts"):
        Grid(cfg)


def test_snakemake_stops_at_workflow_start(tmp_path):
    """The Snakefile's validation (a dry run) refuses the config, naming both sides."""
    override = tmp_path / "bad.yaml"
    bad = _bad_pipeline_config()
    override.write_text(yaml.safe_dump({"methods": {"bns": bad["methods"]["bns"]},
                                        "experiments": {"gat-bns":
                                                        bad["experiments"]["gat-bns"]}}))
    env = _env()
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                           "configs/smoke.yaml", str(override)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    line = next(l for l in text.splitlines() if "experiments.gat-bns" in l)
    assert "'bns-gcn'" in line and "'gat'" in line
    assert "Job stats" not in text
