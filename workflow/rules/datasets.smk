# Datasets: one Graph file and one statistics row per dataset, then the Table 1 analogue.


rule prepare:
    output:
        graph="results/data/{dataset}.npz",
        stats="results/data/{dataset}.stats.json",
    params:
        scale=grid.scale,
        seed=grid.data_seed,
    threads: grid.threads["prepare"]
    log:
        "results/logs/prepare/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare/{dataset}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn prepare --dataset {wildcards.dataset} --scale {params.scale} --seed {params.seed}"
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
