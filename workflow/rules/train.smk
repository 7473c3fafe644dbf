# Training runs: one RunRecord JSON per run. Model settings come from the
# experiment's `train` block, the method wildcard is a preset from `methods`.


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
