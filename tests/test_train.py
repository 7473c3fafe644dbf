"""run_training end to end: records, trainers, bad input, failing workers."""
from __future__ import annotations

import json

import pytest

from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.methods.base import METHODS, SyncStrategy
from cdfgnn.partition.api import partition_graph
from cdfgnn.partition.base import Topology
from cdfgnn.train.config import TrainConfig
from cdfgnn.train.record import validate_record
from cdfgnn.train.run import run_training


def cfg(graph_file, **kw):
    base = dict(graph=graph_file, dataset=None, epochs=6, warmup=2, hidden=16, workers=4,
                hosts=2, partitioner="metis", timeout_s=60)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("trainer", ["full-graph", "minibatch", "distributed"])
def test_record_validates_and_is_written_atomically(tmp_path, graph_file, trainer):
    out = tmp_path / "run.json"
    rec = run_training(cfg(graph_file, trainer=trainer, out=str(out), fanouts=[5, 5],
                           batch_size=32))
    on_disk = json.loads(out.read_text())
    validate_record(on_disk)
    assert on_disk["summary"] == json.loads(json.dumps(rec["summary"]))
    assert len(on_disk["epochs"]) == 6
    assert not list(tmp_path.glob(".*tmp*")), "temporary file left behind"


def test_distributed_record_accounts_traffic_by_link_class(graph_file):
    rec = run_training(cfg(graph_file, partitioner="hdrf"))
    pe = rec["comm"]["per_epoch"]
    assert pe["intra"]["bytes"] > 0 and pe["inter"]["bytes"] > 0
    # vertex-cut exact: 2 directions x 2 phases x layers tags plus the gradient all-reduce
    tags = set(rec["comm"]["by_tag"])
    assert {"gather/fwd/0", "scatter/fwd/0", "gather/bwd/1", "grad_allreduce"} <= tags
    assert rec["partition"]["kind"] == "vertex"
    assert rec["model_time"]["epoch_s"] > 0
    assert rec["summary"]["timed_epochs"] == 4
    assert len(rec["ranks"]) == 4 and {r["host"] for r in rec["ranks"]} == {0, 1}


def test_halo_rows_match_partition_book(small_graph, graph_file):
    """Rows sent per epoch by exact = sum of halo sizes x layers x 2 directions."""
    rec = run_training(cfg(graph_file, layers=2))
    from cdfgnn.partition.book import build_books
    part = partition_graph(small_graph, "metis", Topology(2, 2), seed=0)
    halo = sum(sum(i.size for i in b.recv_idx) for b in build_books(small_graph, part))
    assert rec["comm"]["per_epoch"]["rows_sent"] == pytest.approx(halo * 2 * 2)


def test_minibatch_learns(tmp_path, make_graph):
    """A smoke test of the trainer end to end (block exactness: test_models.py)."""
    g = make_graph(n=600, seed=5, isolated=0)
    path = tmp_path / "g.npz"
    g.save(path)
    rec = run_training(TrainConfig(graph=str(path), dataset=None, trainer="minibatch",
                                   epochs=15, fanouts=[5, 5], batch_size=64, hidden=32))
    assert rec["summary"]["final_test"] > 2.0 / 5  # 5 classes: chance is 0.2


@pytest.mark.parametrize("kw,msg", [
    (dict(epochs=0), "--epochs"),
    (dict(workers=3, hosts=2), "multiple of --hosts"),
    (dict(method="no-such-method"), "unknown method 'no-such-method'; valid: "),
    (dict(partitioner="nope"), "unknown partitioner 'nope'; valid: "),
    (dict(workers=1000, hosts=1), "vertices"),
    (dict(model="gat2"), "unknown model"),
])
def test_bad_input_is_a_clear_error(tmp_path, graph_file, kw, msg):
    out = tmp_path / "run.json"
    with pytest.raises(CdfgnnError, match=msg.replace("(", r"\(")):
        run_training(cfg(graph_file, out=str(out), **kw))
    assert not out.exists()


def test_partition_file_for_another_graph(tmp_path, graph_file, make_graph):
    other = make_graph(n=100, seed=9)
    part = partition_graph(other, "metis", Topology(2, 2), seed=0)
    pfile = tmp_path / "p.npz"
    part.save(pfile)
    with pytest.raises(CdfgnnError, match="was made for graph"):
        run_training(cfg(graph_file, partition_file=str(pfile)))


def test_corrupt_partition_file(tmp_path, graph_file):
    pfile = tmp_path / "p.npz"
    pfile.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CdfgnnError, match=str(pfile)):
        run_training(cfg(graph_file, partition_file=str(pfile)))


class _DiesOnRank2(SyncStrategy):
    name = "test-dies"

    def send(self, key, outgoing, incoming_rows=None):
        if self.comm.rank == 2 and key.direction == "bwd":
            raise RuntimeError("simulated worker crash")
        return super().send(key, outgoing, incoming_rows)


if "test-dies" not in METHODS:
    METHODS.register("test-dies")(_DiesOnRank2)


def test_dead_worker_stops_the_run(tmp_path, graph_file):
    """(The process backend's failure handling is tested in test_comm.py.)"""
    out = tmp_path / "run.json"
    with pytest.raises(WorkerFailedError, match="rank 2"):
        run_training(cfg(graph_file, method="test-dies", out=str(out), timeout_s=20))
    assert not out.exists()


def test_same_seed_same_record(graph_file):
    a = run_training(cfg(graph_file, partitioner="ebv"))
    b = run_training(cfg(graph_file, partitioner="ebv"))
    assert [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]]
    assert a["comm"] == b["comm"]
    assert a["partition"]["rf"] == b["partition"]["rf"]


def test_config_typo_is_named():
    with pytest.raises(CdfgnnError, match="hiden"):
        TrainConfig.from_dict({"hiden": 3})
