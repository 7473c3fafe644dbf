# Datasets: one Graph file and one statistics row per dataset, then the Table 1 analogue.

from cdfgnn.data.synthetic import GENERATOR as TWIN_GENERATOR


# A twin or real dataset is named; a dataset imported from files (a mapping entry
# in the config's `datasets`) has its files as inputs, so a changed file rebuilds.
rule prepare:
    input:
        lambda wc: grid.dataset_files(wc.dataset),
    output:
        graph="results/data/{dataset}.npz",
        stats="results/data/{dataset}.stats.json",
    params:
        args=lambda wc: grid.prepare_args(wc.dataset),
        # not used by the command: a new twin generator version changes this parameter,
        # so Snakemake rebuilds Graph files made by the old one (rerun trigger "params")
        generator=TWIN_GENERATOR,
    threads: grid.threads["prepare"]
    log:
        "results/logs/prepare/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare/{dataset}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn prepare --dataset {wildcards.dataset} {params.args}"
        " --out {output.graph} --stats-out {output.stats} > {log} 2>&1"


rule datasets_table:
    input:
        [grid.dataset_stats_path(d) for d in grid.datasets()],
    output:
        "results/tables/datasets.csv",
    threads: 1
    log:
        "results/logs/tables/datasets.log",
    benchmark:
        "results/benchmarks/tables/datasets.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn aggregate --datasets {input} --out {output} > {log} 2>&1"
