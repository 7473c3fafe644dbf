# Training runs: one RunRecord JSON per run. Model settings come from the
# experiment's `train` block, the method wildcard is a preset from `methods`.
# With `batch: N` > 1 in the config, every run is made by a batch rule instead (below):
# runs read by the same tables and figures, up to N to a job, one process each.


if grid.batch == 1:

    rule train:
        input:
            graph="results/data/{dataset}.npz",
            part="results/partitions/{dataset}/{partitioner}/{topology}/s{seed}.npz",
        output:
            "results/runs/{experiment}/{dataset}/{partitioner}/{topology}/{method}/s{seed}.json",
        params:
            args=lambda wc: grid.train_args(wc.experiment, wc.topology, wc.method),
        threads: grid.threads["train"]
        resources:
            gpu=lambda wc: grid.gpus(wc.experiment, wc.topology, wc.method),
        log:
            "results/logs/train/{experiment}/{dataset}/{partitioner}/{topology}/{method}/s{seed}.log",
        benchmark:
            "results/benchmarks/train/{experiment}/{dataset}/{partitioner}/{topology}/{method}/s{seed}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn train --dataset {wildcards.dataset} --graph {input.graph} --partition {input.part}"
            " {params.args} --seed {wildcards.seed} --out {output} > {log} 2>&1"


    # One-process reference trainers (the full-graph oracle, mini-batch sampling).
    rule train_single:
        input:
            graph="results/data/{dataset}.npz",
        output:
            "results/runs/{experiment}/{dataset}/{trainer}/s{seed}.json",
        params:
            args=lambda wc: grid.train_args(wc.experiment, trainer=wc.trainer),
        threads: grid.threads["train"]
        resources:
            gpu=lambda wc: grid.gpus(wc.experiment, trainer=wc.trainer),
        log:
            "results/logs/train/{experiment}/{dataset}/{trainer}/s{seed}.log",
        benchmark:
            "results/benchmarks/train/{experiment}/{dataset}/{trainer}/s{seed}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn train --dataset {wildcards.dataset} --graph {input.graph}"
            " {params.args} --seed {wildcards.seed} --out {output} > {log} 2>&1"


for _batch in grid.run_batches():

    rule:
        name:
            _batch.rule
        input:
            grid.batch_inputs(_batch),
        output:
            grid.batch_outputs(_batch),
        params:
            commands=grid.batch_commands(_batch),
        threads: grid.threads["train"]
        resources:
            gpu=grid.batch_gpus(_batch),
        log:
            f"results/logs/batch/{_batch.rule}.log",
        benchmark:
            f"results/benchmarks/batch/{_batch.rule}.tsv"
        conda:
            "../../environment.yml"
        shell:
            "cdfgnn {params.commands} > {log} 2>&1"
