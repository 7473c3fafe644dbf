# cdfgnn pipeline: dataset -> Graph file -> Partitioning -> RunRecord -> tables -> figures.
#
#   snakemake --cores 2                                  # configs/quick.yaml (default)
#   snakemake --cores 2 --configfile configs/full.yaml   # paper scale, real datasets
#   snakemake --cores 2 figures/engine/accuracy_vs_epoch.png   # one named target
#   snakemake --cores 2 cdfgnn                           # every table and figure of a group
#
# The rules only call the `cdfgnn` CLI; which files exist and the arguments of each
# job come from cdfgnn/experiments/grid.py.
import os
import shlex
import sys

from snakemake.utils import min_version, validate

from cdfgnn.errors import CdfgnnError
from cdfgnn.experiments.config import check_schema, load_config
from cdfgnn.experiments.grid import Grid

min_version("8.0")


report: "workflow/report/workflow.rst"

# The default config is read only when none is given on the command line, so
# `--configfile configs/full.yaml` replaces quick.yaml instead of being merged
# into it (per-paper override files, e.g. configs/cdfgnn.yaml, are meant to be
# layered: `--configfile configs/quick.yaml configs/cdfgnn.yaml`).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "configs", "quick.yaml")


# Each config file is read again with its `include:` fragments deep-merged into it
# (conflicting values are an error naming both files), then the files are layered
# in order as Snakemake layers them, with `--config KEY=VALUE` on top.
# A bad config stops the run with one line naming the key and the valid values (no
# traceback), exit status 2, before anything is written.
try:
    _merged = load_config(
        workflow.configfiles,
        root=workflow.basedir,
        overrides=workflow.config_settings.config,
    )
    config.clear()
    config.update(_merged)
    check_schema(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.json"))
    validate(config, "workflow/schemas/config.schema.json")
    grid = Grid(config)
except CdfgnnError as _exc:
    sys.stderr.write(f"cdfgnn: error: {_exc}\n")
    sys.exit(2)

# Jobs call the `cdfgnn` installed next to this Snakemake, even when its
# virtual environment is not activated (e.g. `.venv/bin/snakemake --cores 2`).
shell.prefix(f'export PATH={shlex.quote(os.path.dirname(sys.executable))}:"$PATH"; ')


wildcard_constraints:
    **grid.wildcard_constraints(),


include: "workflow/rules/datasets.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        grid.all_targets(),


# One target rule per group of tables and figures (the name up to the first '/' of
# a figure, '_' of a table: the paper it belongs to), e.g. `snakemake --cores 2 cdfgnn`.
for _group, _files in grid.groups(reserved=[r.name for r in workflow.rules]).items():

    rule:
        name:
            _group
        input:
            _files,
