"""TrainConfig: everything that defines one training run (it is copied into the RunRecord).

TrainConfig is also the one list of training options. Each field carries its help
text, its `cdfgnn train` argument group and, where it differs from the field name,
its flag in ``metadata``; the argparse type and arity follow from the annotation
(``int`` -> ``type=int``; ``list[int]`` -> ``nargs="+"``; ``dict`` -> repeatable
``KEY=VALUE``). :func:`train_options` turns the fields into :class:`TrainOption`
rows, from which ``cdfgnn train`` builds its flags (cdfgnn/cli.py) and the
pipeline its allowed experiment ``train:`` keys (``grid=True`` fields,
cdfgnn/experiments/grid.py). Adding a training option is one field here.
"""
from __future__ import annotations

import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any

from cdfgnn.errors import CdfgnnError

DISTRIBUTED = "distributed"
#: One-process trainers (no partition, no SyncStrategy): the full-graph oracle and the
#: mini-batch sampling reference. The pipeline's ``single:`` lists take these names.
ONE_PROCESS_TRAINERS: tuple[str, ...] = ("full-graph", "minibatch", "cluster-gcn", "graphsaint")
TRAINERS: tuple[str, ...] = (DISTRIBUTED, *ONE_PROCESS_TRAINERS)
DEVICES: tuple[str, ...] = ("cpu", "cuda")
#: one-process trainers that run on a GPU (the distributed trainer: per method,
#: ``SyncStrategy.supported_devices``)
DEVICE_TRAINERS: tuple[str, ...] = (DISTRIBUTED, "full-graph")
#: floating-point types of model, features, messages and optimiser state (``--dtype``)
DTYPES: tuple[str, ...] = ("float32", "float64")
#: one-process trainers that run in float64 (the distributed trainer: per method,
#: ``SyncStrategy.supported_dtypes``)
DTYPE_TRAINERS: tuple[str, ...] = (DISTRIBUTED, "full-graph")


#: the argument groups of `cdfgnn train --help`, in order: where and how a run executes
#: is apart from what its counts are priced on (``--device`` vs ``--devices``)
EXECUTION = "execution (where and how the run executes)"
PRICING = "pricing (what the run's counts are priced on: modelled times only)"


def option(help: str, group: str, *, flag: str | None = None, metavar: str | None = None,
           grid: bool = False, catalogue: str | None = None) -> dict[str, Any]:
    """Field metadata of a training option.

    ``flag`` defaults to ``--`` + the field name with ``_`` -> ``-``; ``grid`` marks
    the options a pipeline experiment may set in its ``train:`` block (the others
    come from the rule: files, names, topology, seed); ``catalogue`` names the list of
    valid values (:data:`cdfgnn.experiments.catalogue.CATALOGUES`) that the help text shows.
    """
    return {"help": help, "group": group, "flag": flag, "metavar": metavar, "grid": grid,
            "catalogue": catalogue}


@dataclass
class TrainConfig:
    # data: either a dataset name (+ scale for synthetic twins) or a Graph file
    dataset: str | None = field(default="synth-arxiv", metadata=option(
        "dataset name (loaded or generated)", "data", catalogue="datasets"))
    scale: str = field(default="tiny", metadata=option("twin size for --dataset", "data"))
    graph: str | None = field(default=None, metadata=option(
        "Graph file (overrides --dataset for the data; the name is kept)", "data"))
    data_root: str = field(default="results/data", metadata=option(
        "folder for real datasets", "data"))
    data_seed: int = field(default=0, metadata=option("seed of a synthetic twin", "data"))
    # partition: a partitioner name, or a Partitioning file made by `cdfgnn partition`
    partitioner: str = field(default="metis", metadata=option(
        "partitioner name (partitioned on the fly)", "partition", catalogue="partitioners"))
    partition_file: str | None = field(default=None, metadata=option(
        "Partitioning file from `cdfgnn partition`", "partition", flag="--partition"))
    partition_params: dict[str, Any] = field(default_factory=dict, metadata=option(
        "partitioner parameter (repeatable)", "partition", flag="--partition-param",
        metavar="KEY=VALUE"))
    workers: int = field(default=2, metadata=option("workers P", "partition"))
    hosts: int = field(default=1, metadata=option("hosts H", "partition"))
    # trainer: "distributed" (P workers, a SyncStrategy) or a one-process trainer
    trainer: str = field(default=DISTRIBUTED, metadata=option(" | ".join(TRAINERS),
                                                              "technique and model"))
    fanouts: list[int] = field(default_factory=lambda: [10, 10], metadata=option(
        "minibatch trainer: fan-out per layer", "technique and model", grid=True))
    batch_size: int = field(default=1024, metadata=option(
        "minibatch trainer: seed vertices per batch", "technique and model", grid=True))
    clusters_per_batch: int = field(default=5, metadata=option(
        "cluster-gcn trainer: clusters per batch (a batch holds ~batch-size vertices)",
        "technique and model", grid=True))
    saint_sampler: str = field(default="rw", metadata=option(
        "graphsaint trainer: node | rw (batch-size vertices or roots)", "technique and model",
        grid=True))
    walk_length: int = field(default=2, metadata=option(
        "graphsaint trainer: random-walk length of the rw sampler", "technique and model",
        grid=True))
    # technique and model
    method: str = field(default="exact", metadata=option(
        "sync technique", "technique and model", catalogue="methods"))
    method_params: dict[str, Any] = field(default_factory=dict, metadata=option(
        "method parameter (repeatable)", "technique and model", flag="--method-param",
        metavar="KEY=VALUE"))
    model: str = field(default="gcn", metadata=option("GNN model", "technique and model",
                                                      grid=True, catalogue="models"))
    heads: int = field(default=1, metadata=option(
        "attention heads of a gat model (averaged)", "technique and model", grid=True))
    layers: int = field(default=2, metadata=option("GNN layers", "technique and model", grid=True))
    hidden: int = field(default=64, metadata=option("hidden width", "technique and model",
                                                    grid=True))
    dropout: float = field(default=0.0, metadata=option("dropout rate in [0, 1)",
                                                        "technique and model", grid=True))
    precompute_first_layer: bool = field(default=False, metadata=option(
        "compute the first layer's neighbour aggregation of the input features once, "
        "with the full halo, before training; the first layer then exchanges nothing",
        "technique and model", grid=True))
    lr: float = field(default=0.01, metadata=option("Adam learning rate", "technique and model",
                                                    grid=True))
    weight_decay: float = field(default=0.0, metadata=option(
        "Adam weight decay", "technique and model", grid=True))
    epochs: int = field(default=50, metadata=option("training epochs", "technique and model",
                                                    grid=True))
    seed: int = field(default=0, metadata=option(
        "run seed (partitioner, init, sampling, noise)", "technique and model"))
    # execution
    backend: str = field(default="thread", metadata=option(
        "thread | process: ranks as threads of one process, or one process each", EXECUTION,
        grid=True))
    device: str = field(default="cpu", metadata=option(
        "cpu | cuda: where the run executes (process backend: nccl, one GPU per rank; "
        "methods declare the devices they run on). Not the GPUs its times are priced on: "
        "that is --devices", EXECUTION, grid=True))
    dtype: str = field(default="float32", metadata=option(
        "float32 | float64: floating-point type of weights, features, messages, gradients "
        "and Adam state (float64: exactness checks below float32 rounding; methods declare "
        "the dtypes they run in)", EXECUTION, grid=True))
    launcher: str = field(default="auto", metadata=option(
        "auto | builtin | torchrun: who starts the ranks (torchrun: one process per rank "
        "started by `torchrun --nnodes H --nproc-per-node D -m cdfgnn.cli train ...`, the "
        "topology taken from its environment; auto: torchrun when that environment is set)",
        EXECUTION))
    warmup: int = field(default=5, metadata=option("epochs excluded from timing", EXECUTION,
                                                   grid=True))
    eval_every: int = field(default=1, metadata=option("evaluate every N epochs", EXECUTION,
                                                       grid=True))
    timeout_s: float = field(default=300.0, metadata=option(
        "seconds before a stuck rank stops the run", EXECUTION, flag="--timeout", grid=True))
    network: str = field(default="cdfgnn-table2", metadata=option(
        "link profile the traffic is priced on (a name, or a YAML file with bandwidths and "
        "latencies)", PRICING, grid=True, catalogue="networks"))
    count_ops: bool = field(default=True, metadata=option(
        "count the operation ledger (every aten op a GPU would run: the device-modelled "
        "epoch); false: no device model, and measured times free of the counting cost "
        "(docs/time-model.md, 'What counting costs')", PRICING, grid=True))
    devices: str | None = field(default=None, metadata=option(
        "GPU profiles the run's operation ledger is priced on (device-modelled epoch; also "
        "the CPU-measured model's CaPGNN slowdown): one name for every worker (a100-80, "
        "h100, ...), one per worker (comma-separated), a CaPGNN Table 4 group (x2..x8, "
        "table4) or profile YAML files; default: rtx3090, CPU time as measured. Not where "
        "the run executes: that is --device", PRICING, grid=True, catalogue="devices"))
    memory_budget: str | None = field(default=None, metadata=option(
        "refuse a run whose estimated peak memory exceeds this (e.g. 16GiB; default: the "
        "memory available on this machine)", EXECUTION, grid=True))
    out: str | None = field(default=None, metadata=option("RunRecord JSON to write", EXECUTION))

    def validate(self, parts: int | None = None) -> None:
        """Every check that needs no data, ending with the method's ``check_compatible``
        (``parts``: the partitioning's parts when known without a file, e.g. a pipeline
        topology; default: the partition file's, else one per worker)."""
        if self.dataset is None and self.graph is None:
            raise CdfgnnError("give --dataset or --graph")
        if self.epochs < 1:
            raise CdfgnnError(f"--epochs must be >= 1, got {self.epochs}")
        from cdfgnn.partition.base import Topology
        Topology.for_workers(self.workers, self.hosts)  # the one workers/hosts rule
        from cdfgnn.models import MODELS
        if self.model not in MODELS:
            raise CdfgnnError(f"unknown model {self.model!r}; valid: {', '.join(MODELS)}")
        if self.heads < 1:
            raise CdfgnnError(f"--heads must be >= 1, got {self.heads}")
        if self.heads != 1 and self.model != "gat":
            raise CdfgnnError(f"--heads {self.heads} applies to --model gat only, "
                              f"not {self.model!r}")
        if self.layers < 1:
            raise CdfgnnError(f"--layers must be >= 1, got {self.layers}")
        if self.hidden < 1:
            raise CdfgnnError(f"--hidden must be >= 1, got {self.hidden}")
        if not 0.0 <= self.dropout < 1.0:
            raise CdfgnnError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.backend not in ("thread", "process"):
            raise CdfgnnError(f"unknown backend {self.backend!r}; valid: process, thread")
        if self.trainer not in TRAINERS:
            raise CdfgnnError(f"unknown trainer {self.trainer!r}; valid: {', '.join(TRAINERS)}")
        if self.precompute_first_layer and self.trainer == "minibatch":
            raise CdfgnnError("--precompute-first-layer applies to full-batch trainers "
                              "(distributed, full-graph), not to --trainer minibatch")
        if self.eval_every < 1:
            raise CdfgnnError(f"--eval-every must be >= 1, got {self.eval_every}")
        if self.batch_size < 1:
            raise CdfgnnError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.clusters_per_batch < 1:
            raise CdfgnnError(f"--clusters-per-batch must be >= 1, got {self.clusters_per_batch}")
        if self.saint_sampler not in ("node", "rw"):
            raise CdfgnnError(f"unknown --saint-sampler {self.saint_sampler!r}; valid: node, rw")
        if self.walk_length < 0:
            raise CdfgnnError(f"--walk-length must be >= 0, got {self.walk_length}")
        if any(f < 0 for f in self.fanouts):
            raise CdfgnnError(f"--fanouts must be >= 0, got {self.fanouts}")
        if not self.lr > 0:
            raise CdfgnnError(f"--lr must be > 0, got {self.lr}")
        if self.device != "cpu":
            self._check_device()
        if self.dtype != "float32":
            self._check_dtype()
        if self.launcher not in ("auto", "builtin", "torchrun"):
            raise CdfgnnError(f"unknown --launcher {self.launcher!r}; valid: auto, builtin, "
                              "torchrun")
        if self.devices:
            from cdfgnn.pricing.devices import parse_devices
            parse_devices(self.devices, None)   # names here; the count when the run starts
            if not self.count_ops:
                self._check_uncounted_devices()
        if self.warmup < 0:
            raise CdfgnnError(f"--warmup must be >= 0, got {self.warmup}")
        if self.memory_budget is not None:
            from cdfgnn.train.memory import parse_bytes
            parse_bytes(self.memory_budget)
        if self.trainer == DISTRIBUTED:
            self._check_method(parts)

    def _check_uncounted_devices(self) -> None:
        """Without the ledger, ``--devices`` only scales the CPU-measured model, and only
        by CaPGNN Table 1 measurements: any other profile would be silently ignored."""
        from cdfgnn.pricing.devices import measured_only, parse_devices
        if not measured_only(parse_devices(self.devices, self.workers)):
            raise CdfgnnError(f"--devices {self.devices} names GPU profiles priced on the "
                              "operation ledger, which --count-ops false turns off; give "
                              "CaPGNN Table 1 devices only, or count operations")

    def _check_method(self, parts: int | None) -> None:
        """The one call of the method's ``check_compatible``: a one-line error naming
        both sides of an impossible pairing, before any graph is loaded."""
        import cdfgnn.methods  # noqa: F401  (registers methods)
        from cdfgnn.methods.base import METHODS
        reason = METHODS.get(self.method).check_compatible(self.run_spec(parts))
        if reason:
            raise CdfgnnError(reason)

    def run_spec(self, parts: int | None = None):
        """The run as a method's ``check_compatible`` sees it (a ``RunSpec``): the
        partitioner's name, kind and parts from the partition file's header, else the
        partitioner registry's kind and ``parts`` (default: one part per worker)."""
        from cdfgnn.methods.base import RunSpec
        if self.partition_file:
            from cdfgnn.partition.base import Partitioning
            header = Partitioning.read_header(self.partition_file)
            name, kind = header["method"], header["kind"]
            parts = int(header["hosts"]) * int(header["devices_per_host"])
        else:
            from cdfgnn.partition.api import ensure_registered
            from cdfgnn.partition.base import PARTITIONERS
            ensure_registered()
            name, kind = self.partitioner, PARTITIONERS.get(self.partitioner).kind
        return RunSpec(model=self.model, partitioner=name, partition_kind=kind,
                       parts=parts or self.workers, workers=self.workers, device=self.device,
                       method_params=dict(self.method_params),
                       precompute_first_layer=self.precompute_first_layer, dtype=self.dtype)

    def _check_device(self) -> None:
        """``--device cuda``: a known device, and a trainer that runs there (a method's
        devices: its ``check_compatible``; availability: check_runtime)."""
        if self.device not in DEVICES:
            raise CdfgnnError(f"unknown --device {self.device!r}; valid: {', '.join(DEVICES)}")
        if self.trainer not in DEVICE_TRAINERS:
            raise CdfgnnError(f"trainer {self.trainer!r} does not run on --device {self.device}; "
                              f"on {self.device}: {', '.join(DEVICE_TRAINERS)}")

    def _check_dtype(self) -> None:
        """``--dtype float64``: a known dtype and a one-process trainer that runs in it (a
        method's dtypes and codec: its ``check_compatible``)."""
        if self.dtype not in DTYPES:
            raise CdfgnnError(f"unknown --dtype {self.dtype!r}; valid: {', '.join(DTYPES)}")
        if self.trainer != DISTRIBUTED and self.trainer not in DTYPE_TRAINERS:
            raise CdfgnnError(f"trainer {self.trainer!r} does not run in --dtype {self.dtype}; "
                              f"in {self.dtype}: {', '.join(DTYPE_TRAINERS)}")

    @property
    def torch_dtype(self):
        """``dtype`` as a ``torch.dtype``."""
        import torch
        return getattr(torch, self.dtype)

    def check_runtime(self) -> None:
        """What this machine must offer (run start, not validation: a pipeline may plan GPU
        jobs on a head node without one): ``--device cuda`` needs a usable GPU."""
        if self.device == "cpu":
            return
        import torch
        if not torch.cuda.is_available():
            raise CdfgnnError(f"--device {self.device} requested but CUDA is not available "
                              "(torch.cuda.is_available() is False)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise CdfgnnError(f"unknown training option(s) {unknown}; valid: {sorted(known)}")
        return cls(**d)


@dataclass(frozen=True)
class TrainOption:
    """One TrainConfig field as a command-line flag (and maybe a pipeline ``train:`` key).

    ``shape`` is ``"scalar"`` (one value of ``type``), ``"list"`` (``nargs="+"`` of
    ``type``) or ``"params"`` (repeatable ``KEY=VALUE`` -> dict).
    """
    name: str
    flag: str
    group: str
    help: str
    type: type
    shape: str
    metavar: str | None
    grid: bool
    default: Any = None           # TrainConfig's default (shown in `cdfgnn train --help`)
    catalogue: str | None = None  # the list of valid values (cdfgnn.experiments.catalogue)


@lru_cache(maxsize=None)
def train_options() -> tuple[TrainOption, ...]:
    """Every TrainConfig field as a :class:`TrainOption`, in field order."""
    hints = typing.get_type_hints(TrainConfig)
    out = []
    for f in fields(TrainConfig):
        meta = f.metadata
        if "help" not in meta:
            raise TypeError(f"TrainConfig.{f.name} has no option(...) metadata")
        base, shape = _shape(hints[f.name], f.name)
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        out.append(TrainOption(name=f.name, flag=meta["flag"] or "--" + f.name.replace("_", "-"),
                               group=meta["group"], help=meta["help"], type=base, shape=shape,
                               metavar=meta["metavar"], grid=meta["grid"], default=default,
                               catalogue=meta.get("catalogue")))
    return tuple(out)


def grid_options() -> dict[str, TrainOption]:
    """The options a pipeline experiment may set in ``train:``, by field name."""
    return {o.name: o for o in train_options() if o.grid}


def _shape(hint: Any, name: str) -> tuple[type, str]:
    """(element type, shape) of an annotation: int, str | None, list[int], dict[str, Any]."""
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        return typing.get_args(hint)[0], "list"
    if origin is dict:
        return str, "params"
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:  # Optional[X] / X | None
        return _shape(args[0], name)
    if hint in (int, float, str, bool):
        return hint, "scalar"
    raise TypeError(f"TrainConfig.{name}: cannot map annotation {hint!r} to a flag")
