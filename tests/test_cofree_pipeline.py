"""CoFree in the pipeline: the configs expand to every cofree output, the experiment's
``workers`` cap puts several parts on each worker, a cap that does not divide is refused."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.config import check_schema, load_config
from cdfgnn.experiments.grid import Grid

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.json"
OUTPUTS = ["results/tables/cofree_table1_runtime.md", "results/tables/cofree_table2_accuracy.md",
           "results/tables/cofree_table3_reweighting.md",
           "results/tables/cofree_table4_partitioners.md", "results/tables/cofree_claims.md",
           "figures/cofree/fig3_partitions_vs_time.png", "figures/cofree/fig4_training_curves.png",
           "figures/cofree/fig5_partitions_vs_accuracy.png",
           "figures/cofree/replication_by_degree.png"]


def _load(name):
    return load_config([REPO / "configs" / f"{name}.yaml"], root=REPO)


@pytest.mark.parametrize("name", ["smoke", "quick", "full"])
def test_cofree_outputs_are_targets(name):
    cfg = _load(name)
    check_schema(cfg, str(SCHEMA))
    targets = Grid(cfg).all_targets()
    for t in OUTPUTS:
        assert t in targets, (name, t)


def test_workers_cap_gives_several_parts_per_worker():
    grid = Grid(_load("quick"))
    args = grid.train_args("cofree_scaling", "h1x256", "cofree")
    assert "--workers 2 --hosts 1" in args
    assert "--workers 2 " in grid.train_args("cofree_scaling", "h1x2", "cofree")
    assert "--workers 1 " in grid.train_args("cofree_scaling", "h1x1", "cofree")
    # no cap: one worker per part
    assert "--workers 5 " in grid.train_args("cofree_main_products", "h1x5", "cofree")


def test_workers_cap_must_divide_the_parts():
    cfg = copy.deepcopy(_load("smoke"))
    cfg["experiments"]["cofree_parts"]["workers"] = 3
    with pytest.raises(CdfgnnError, match=r"cofree_parts.workers: 3 does not divide the 8 parts"):
        Grid(cfg)
