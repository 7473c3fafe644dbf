"""TrainConfig: everything that defines one training run (it is copied into the RunRecord)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cdfgnn.errors import CdfgnnError


@dataclass
class TrainConfig:
    # data: either a dataset name (+ scale for synthetic twins) or a Graph file
    dataset: str | None = "synth-arxiv"
    scale: str = "tiny"
    graph: str | None = None              # path to a Graph file; overrides dataset
    data_root: str = "results/data"
    data_seed: int = 0                    # seed of a synthetic twin's generator
    # partition: a partitioner name, or a Partitioning file made by `cdfgnn partition`
    partitioner: str = "metis"
    partition_file: str | None = None
    partition_params: dict[str, Any] = field(default_factory=dict)
    workers: int = 2
    hosts: int = 1
    # trainer: "distributed" (P workers, a SyncStrategy), "full-graph" (the one-process
    # oracle) or "minibatch" (one-process neighbour sampling reference)
    trainer: str = "distributed"
    fanouts: list[int] = field(default_factory=lambda: [10, 10])
    batch_size: int = 1024
    # technique and model
    method: str = "exact"
    method_params: dict[str, Any] = field(default_factory=dict)
    model: str = "gcn"
    layers: int = 2
    hidden: int = 64
    dropout: float = 0.0
    lr: float = 0.01
    weight_decay: float = 0.0
    epochs: int = 50
    seed: int = 0
    # execution
    backend: str = "thread"               # thread | process
    device: str = "cpu"                   # cpu | cuda (process backend: nccl)
    warmup: int = 5                       # epochs excluded from timing averages
    eval_every: int = 1
    timeout_s: float = 300.0              # a dead or stuck rank stops the run after this
    network: str = "cdfgnn-table2"        # NetworkModel link profile
    out: str | None = None

    def validate(self) -> None:
        if self.dataset is None and self.graph is None:
            raise CdfgnnError("give --dataset or --graph")
        if self.epochs < 1:
            raise CdfgnnError(f"--epochs must be >= 1, got {self.epochs}")
        from cdfgnn.partition.base import Topology
        Topology.for_workers(self.workers, self.hosts)  # the one workers/hosts rule
        from cdfgnn.models import MODELS
        if self.model not in MODELS:
            raise CdfgnnError(f"unknown model {self.model!r}; valid: {', '.join(MODELS)}")
        if self.layers < 1:
            raise CdfgnnError(f"--layers must be >= 1, got {self.layers}")
        if self.hidden < 1:
            raise CdfgnnError(f"--hidden must be >= 1, got {self.hidden}")
        if not 0.0 <= self.dropout < 1.0:
            raise CdfgnnError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.backend not in ("thread", "process"):
            raise CdfgnnError(f"unknown backend {self.backend!r}; valid: process, thread")
        if self.trainer not in ("distributed", "full-graph", "minibatch"):
            raise CdfgnnError(f"unknown trainer {self.trainer!r}; valid: distributed, full-graph, minibatch")
        if self.eval_every < 1:
            raise CdfgnnError(f"--eval-every must be >= 1, got {self.eval_every}")
        if self.batch_size < 1:
            raise CdfgnnError(f"--batch-size must be >= 1, got {self.batch_size}")
        if any(f < 0 for f in self.fanouts):
            raise CdfgnnError(f"--fanouts must be >= 0, got {self.fanouts}")
        if not self.lr > 0:
            raise CdfgnnError(f"--lr must be > 0, got {self.lr}")
        if self.device != "cpu":
            # the communicators have an nccl path, but the engine keeps model and data on
            # the CPU: refuse rather than record a CPU run as a GPU one
            raise CdfgnnError(f"--device {self.device!r} is not supported yet: the training "
                              "engine runs on the CPU only (GPU runs are a roadmap item)")
        if self.warmup < 0:
            raise CdfgnnError(f"--warmup must be >= 0, got {self.warmup}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise CdfgnnError(f"unknown training option(s) {unknown}; valid: {sorted(known)}")
        return cls(**d)
