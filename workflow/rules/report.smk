# Tables and figures. Each figure and table is its own target and depends only on
# the runs or partitions it shows, so asking for one file builds only that. Tables and
# figures of one group that read the same files are drawn by one job (one process: a
# batch rule, below); the `table` and `figure` rules draw the others.


rule runs_tables:
    input:
        [run.path for run in grid.all_runs()],
    output:
        runs="results/tables/runs.csv",
        epochs="results/tables/epochs.csv",
    threads: 1
    log:
        "results/logs/tables/runs.log",
    benchmark:
        "results/benchmarks/tables/runs.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn aggregate --runs {input} --out {output.runs} --epochs-out {output.epochs} > {log} 2>&1"


# Configured tables: results/tables/<name>.csv + .md, drawn by the table report named
# in `kind` (cdfgnn/report/registry.py) from its experiments and/or partition sets.
rule table:
    input:
        lambda wc: grid.report_inputs("table", wc.table),
    output:
        csv=report(
            "results/tables/{table}.csv",
            caption="../report/caption.rst",
            category="tables",
            labels={"table": "{table}", "format": "csv"},
        ),
        md=report(
            "results/tables/{table}.md",
            caption="../report/caption.rst",
            category="tables",
            labels={"table": "{table}", "format": "markdown"},
        ),
    params:
        args=lambda wc: grid.report_args("table", wc.table),
        caption=lambda wc: grid.caption("table", wc.table),
    threads: 1
    log:
        "results/logs/tables/{table}.log",
    benchmark:
        "results/benchmarks/tables/{table}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn report {params.args} --out {output.csv} --md-out {output.md} > {log} 2>&1"


# Configured figures: figures/<group>/<name>.png, drawn by the figure report named in
# `plot` from its experiments (run records) and/or partition sets (statistics).
rule figure:
    input:
        lambda wc: grid.report_inputs("figure", wc.figure),
    output:
        report(
            "figures/{figure}.png",
            caption="../report/caption.rst",
            category="figures",
            labels={"figure": "{figure}"},
        ),
    params:
        args=lambda wc: grid.report_args("figure", wc.figure),
        caption=lambda wc: grid.caption("figure", wc.figure),
    threads: 1
    log:
        "results/logs/figures/{figure}.log",
    benchmark:
        "results/benchmarks/figures/{figure}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn report {params.args} --out {output} > {log} 2>&1"


for _batch in grid.report_batches():

    rule:
        name:
            _batch.rule
        input:
            grid.batch_inputs(_batch),
        output:
            [
                report(
                    path,
                    caption="../report/caption.rst",
                    category=f"{out.kind}s",
                    labels=(
                        {"figure": out.name}
                        if out.kind == "figure"
                        else {"table": out.name, "format": "csv" if path.endswith(".csv") else "markdown"}
                    ),
                )
                for out in _batch.members
                for path in out.paths
            ],
        params:
            commands=grid.batch_commands(_batch),
            caption=grid.batch_caption(_batch),
        threads: 1
        log:
            f"results/logs/batch/{_batch.rule}.log",
        benchmark:
            f"results/benchmarks/batch/{_batch.rule}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn {params.commands} > {log} 2>&1"


# Every paper's headline claims on one page, each linked to its run records.
rule claims_page:
    input:
        grid.claims_tables(),
    output:
        report(
            "results/tables/claims.md",
            caption="../report/caption.rst",
            category="tables",
            labels={"table": "claims", "format": "markdown"},
        ),
    params:
        caption="Every paper's headline claims beside the values measured here, with verdicts.",
    threads: 1
    log:
        "results/logs/tables/claims.log",
    benchmark:
        "results/benchmarks/tables/claims.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn claims --tables {input} --out {output} > {log} 2>&1"
