"""The one record flattener every report reads (cdfgnn.report.aggregate.RunRow)."""
import math

import pytest

from cdfgnn.report.aggregate import RunRow, run_rows, runs_table


def _record(**sections):
    rec = {"config": {"dataset": "synth-arxiv", "trainer": "distributed", "method": "exact",
                      "method_params": {"codec": "fp16"}, "partitioner": "metis",
                      "hosts": 2, "workers": 4, "model": "gcn", "seed": 3, "epochs": 5},
           "epochs": [{"epoch": 0, "loss": 1.0, "test": 0.5}], "status": "complete",
           "_source": "results/runs/exp1/synth-arxiv/metis/h2x2/exact/s3.json"}
    rec.update(sections)
    return rec


def test_absent_sections_mean_empty_and_nan():
    """A record with only config and epochs: empty mappings and tuples, NaN summary numbers."""
    row = RunRow.from_record(_record())
    assert row.experiment == "exp1" and row.topology == "h2x2" and row.distributed
    assert row.method_label == "exact(codec=fp16)"
    assert row.by_tag == {} and row.per_epoch == {} and row.comm_epochs == ()
    assert row.minibatch == {} and row.energy == {} and row.prepare == {}
    assert row.batch_size is None and row.fanouts == ()
    assert row.compute_s == () and row.comm_s == () and row.slowdown == ()
    assert row.overlap is False and row.num_parts == 1 and row.dropped_arcs == 0
    assert math.isnan(row.modelled_epoch_s) and math.isnan(row.final_test)
    assert math.isnan(row.test_metric) and row.timed_epochs is None
    assert row.tag_total("bytes", ("halo/",)) == 0 and row.link_total("bytes") == 0


def test_null_sections_are_absent_sections():
    a = RunRow.from_record(_record(model_time=None, comm=None, partition=None, summary=None))
    b = RunRow.from_record(_record())
    assert a == b


def test_typed_fields_from_a_full_record():
    rec = _record(
        summary={"modelled_epoch_time_s": 0.5, "epoch_time_s": 2, "final_test": 0.7,
                 "test_at_best_val": None, "timed_epochs": 3, "peak_memory_mb": 10},
        model_time={"overlap": True, "compute_s": [1, 2], "comm_s": [0.5, 0.25]},
        comm={"by_tag": {"halo/fwd/0": {"bytes": 100, "rows": 5},
                         "gather/fwd/1": {"bytes": 20, "rows": 1},
                         "reduce": {"bytes": 7, "rows": 0}},
              "per_epoch": {"intra": {"bytes": 3.0}, "inter": {"bytes": 4.0, "msgs": 2}}},
        partition={"num_parts": 4, "rf": 1.5, "prepare": {"rapa": {"cross_arcs": 2}}},
        ranks=[{"rank": 0}, {"rank": 1}],
        minibatch={"workers": []}, energy={"cpu": {"status": "measured"}})
    rec["config"].update(batch_size=64, fanouts=[5, 10])
    row = RunRow.from_record(rec)
    assert row.modelled_epoch_s == 0.5 and isinstance(row.epoch_s, float)
    assert math.isnan(row.test_at_best_val) and math.isnan(row.test_metric)  # recorded as null
    assert row.timed_epochs == 3 and row.peak_memory_mb == 10.0
    assert row.overlap and row.compute_s == (1.0, 2.0) and row.comm_s == (0.5, 0.25)
    assert row.slowdown == (1.0, 1.0)                    # one per rank when not recorded
    assert row.tag_total("bytes", ("halo/", "gather/")) == 120
    assert row.tag_total("rows", ("halo/",)) == 5
    assert row.link_total("bytes") == 7.0 and row.link_total("msgs") == 2
    assert row.num_parts == 4 and row.rf == 1.5 and row.prepare["rapa"]["cross_arcs"] == 2
    assert row.batch_size == 64 and row.fanouts == (5, 10)
    assert row.energy["cpu"]["status"] == "measured"
    with pytest.raises(Exception):
        row.workers = 8                                  # frozen


def test_one_process_rows_and_the_runs_table():
    """A one-process run keeps its trainer; the runs table reads the same flattener."""
    rec = _record()
    rec["config"]["trainer"] = "full-graph"
    (row,) = run_rows([rec])
    assert not row.distributed and row.trainer == "full-graph"
    table = runs_table([rec, _record()])
    assert list(table["method"]) == ["full-graph", "exact(codec=fp16)"]
    assert list(table["topology"]) == ["h1x1", "h2x2"]
    assert table["experiment"].tolist() == ["exp1", "exp1"]
