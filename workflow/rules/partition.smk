# Partitions: one Partitioning file + statistics row per (dataset, preset, topology, seed).
# The partitioner wildcard is a preset name from the config's `partitioners` table,
# which carries the registered algorithm and its parameters (e.g. ebv-g0.1).
# With `batch: N` > 1 in the config, every partitioning is made by a batch rule instead
# (below): partitionings read by the same tables and figures, up to N to a job.


if grid.batch == 1:

    rule partition_graph:
        input:
            graph="results/data/{dataset}.npz",
        output:
            part="results/partitions/{dataset}/{partitioner}/{topology}/s{seed}.npz",
            stats="results/partitions/{dataset}/{partitioner}/{topology}/s{seed}.stats.json",
        params:
            args=lambda wc: grid.partition_args(wc.partitioner, wc.topology),
        threads: grid.threads["partition"]
        log:
            "results/logs/partition/{dataset}/{partitioner}/{topology}/s{seed}.log",
        benchmark:
            "results/benchmarks/partition/{dataset}/{partitioner}/{topology}/s{seed}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn partition --graph {input.graph} {params.args} --seed {wildcards.seed}"
            " --out {output.part} --stats-out {output.stats} > {log} 2>&1"


for _batch in grid.partition_batches():

    rule:
        name:
            _batch.rule
        input:
            grid.batch_inputs(_batch),
        output:
            grid.batch_outputs(_batch),
        params:
            commands=grid.batch_commands(_batch),
        threads: grid.threads["partition"]
        log:
            f"results/logs/batch/{_batch.rule}.log",
        benchmark:
            f"results/benchmarks/batch/{_batch.rule}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn {params.commands} > {log} 2>&1"


rule partitions_table:
    input:
        [job.stats_path for job in grid.all_partitions()],
    output:
        "results/tables/partitions.csv",
    threads: 1
    log:
        "results/logs/tables/partitions.log",
    benchmark:
        "results/benchmarks/tables/partitions.tsv"
    conda:
        "../../environment.yml"
    shell:
        "cdfgnn aggregate --partitions {input} --out {output} > {log} 2>&1"
