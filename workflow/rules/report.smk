# Tables and figures. Each figure and table is its own target and depends only on
# the runs or partitions it shows, so asking for one file builds only that.


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


# Configured tables over partition sets (e.g. cdfgnn_table3_partitions: CDFGNN Table 3).
rule partition_set_table:
    input:
        lambda wc: grid.table_inputs(wc.table),
    output:
        csv="results/tables/{table}.csv",
        md="results/tables/{table}.md",
    params:
        kind=lambda wc: grid.table_kind(wc.table),
    threads: 1
    log:
        "results/logs/tables/{table}.log",
    benchmark:
        "results/benchmarks/tables/{table}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn aggregate --partitions {input} --format {params.kind}"
        " --out {output.csv} --md-out {output.md} > {log} 2>&1"


# Configured figures: figures/<paper>/<name>.png; the `plot` entry picks the drawing,
# the experiment (runs) or partition set (partition statistics) the inputs.
rule figure:
    input:
        lambda wc: grid.figure_inputs(wc.figure),
    output:
        "figures/{figure}.png",
    params:
        plot=lambda wc: grid.figure_plot(wc.figure),
        source=lambda wc: grid.figure_source(wc.figure),
    threads: 1
    log:
        "results/logs/figures/{figure}.log",
    benchmark:
        "results/benchmarks/figures/{figure}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn plot {params.plot} --{params.source} {input} --out {output} > {log} 2>&1"
