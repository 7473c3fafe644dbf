"""Method and SyncStrategy: the plug-in interface of a communication technique.

Every registered method is a :class:`Method` (name, track, compatibility, ``PARAMS``).
A full-batch technique is one module that subclasses :class:`SyncStrategy`, overrides
the hooks it changes and registers itself in :data:`METHODS`; a sampled-track method
subclasses :class:`cdfgnn.methods.sampled.SampledMethod` instead (its own hooks). The
engine (``cdfgnn/train/``) calls the hooks and never looks at a method's name.
SyncStrategy hooks, coarse to fine; override only what the technique changes:

==========================  ==============================  ===========================
hook                        called                          overridden by (examples)
==========================  ==============================  ===========================
``check_compatible(run)``   when a config is validated      methods with conditions of
(classmethod)               (CLI, run_training, pipeline)   their own (base: declarations)
``prepare(graph, part,``    once, before PartitionBooks     halo pruning (RAPA): returns
``devices)``                are built                       ``Prepared(drop_arcs, info)``
``setup(ctx)``              once per rank and part          every stateful method
``local_view(view, t)``     before every forward pass       CoFree (local degrees, no
                            (``t``: training or eval)       sync), DropEdge-K, BNS-GCN
``on_epoch_start(e)``       every epoch, before forward     sampling, sync schedules
``aggregate(prop, ...)``    every layer's aggregation       SAR (one peer at a time)
``attend(prop, t, fn, l)``  every GAT layer's attention     (methods that cannot run GAT)
``halo_rows`` /             edge-cut sync points            broadcast peers (CAGNET,
``halo_grads``              (forward / backward)            Sancus), JACA, BNS-GCN
``replica_sync``            vertex-cut sync points          the CDFGNN cache
``stale(key)``              inside ``send``                 PipeGCN, Sylvie-A
``codec_for(key, rows)``    inside ``send``                 AdaQP (a width per message)
``overlaps(epoch)``         after every epoch               pipelined methods
``on_epoch_end(e, row)``    after every epoch               thresholds, statistics
``replica_eval_weights()``  per-part evaluation             CoFree (``eval=per-part``:
                            (``per_part_eval``)             DAR-weighted replicas)
``close()``                 once per part, on every exit    JACA (its shared tier)
                            path of the rank
==========================  ==============================  ===========================

Rows travel one way only: :meth:`SyncStrategy.send` (``send_encoded`` for messages a
method encodes itself), which calls :func:`cdfgnn.comm.codecs.send_rows` (encode,
``all_to_all``, decode; the identity codec is the fast path) and, where ``stale(key)``
says so, the shared stale path. It is a helper to call, not a hook to override.

Rows at a sync point (``SyncKey.phase``/``direction``) map to the book's index
lists as follows (:meth:`SyncStrategy.index_lists`): edge-cut ``halo``/``fwd``
sends ``send_idx[q]`` and receives ``recv_idx[q]``, ``halo``/``bwd`` the reverse;
vertex-cut ``gather`` (both directions) sends ``send_idx[q]`` (mirrors) and
receives ``recv_idx[q]`` (masters), ``scatter`` the reverse.

Parameters are declared once per class in ``PARAMS`` (name -> :class:`Param`);
``build_strategy`` validates them and names the bad value and the valid choices.
Every SyncStrategy takes ``codec`` (``cdfgnn.comm.codecs``), so any technique can run
with any message encoding.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import numpy as np
import torch

from cdfgnn.comm.codecs import CODEC_HELP, Codec, get_codec, is_identity, send_rows
from cdfgnn.errors import CdfgnnError
from cdfgnn.registry import Registry


@dataclass(frozen=True)
class SyncKey:
    layer: int
    direction: str      # "fwd" | "bwd"
    phase: str          # "halo" | "gather" | "scatter"
    training: bool = True
    width: int = 0      # row width at this sync point (the same on every rank)

    @property
    def tag(self) -> str:
        return f"{self.phase}/{self.direction}/{self.layer}"


@dataclass(frozen=True)
class Param:
    """A method parameter: default, accepted type, and an optional check."""

    default: Any
    kind: type = float
    choices: tuple | None = None
    check: Callable[[Any], bool] | None = None
    expect: str = ""            # what ``check`` requires, for the error message
    doc: str = ""

    def coerce(self, method: str, name: str, value: Any) -> Any:
        where = f"method {method!r}: parameter {name}={value!r}"
        if self.kind is bool:
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            if not isinstance(value, bool):
                raise CdfgnnError(f"{where}: expected true or false")
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CdfgnnError(f"{where}: expected a number")
            value = float(value)
            if not math.isfinite(value):
                raise CdfgnnError(f"{where}: expected a finite number")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise CdfgnnError(f"{where}: expected an integer")
        elif self.kind is str:
            value = str(value)
        if self.choices is not None and value not in self.choices:
            raise CdfgnnError(f"{where}: valid: {', '.join(map(str, self.choices))}")
        if self.check is not None:
            try:
                ok = self.check(value)
            except CdfgnnError as exc:
                raise CdfgnnError(f"{where}: {exc}") from None
            if not ok:
                raise CdfgnnError(f"{where}: must be {self.expect}")
        return value


@dataclass(frozen=True)
class Degenerate:
    """The setting at which a method must equal ``exact`` (and the one-process oracle).

    ``params``: the method parameters of that setting (``{}``: its defaults), checked at
    P = 2 and 4 on a ``kind``-cut partitioning ("edge": metis, "vertex": ebv) within
    1e-5 in every epoch's loss and the final accuracy (tests/test_degenerate.py). None:
    the method has no such setting, and ``reason`` says why.
    """

    params: dict[str, Any] | None
    kind: str = "edge"
    reason: str = ""


def valid_codec(spec: str) -> bool:
    get_codec(spec)  # raises CdfgnnError naming the valid specs
    return True


@dataclass
class RankContext:
    """What a strategy may read on its rank (set up once per rank and part)."""

    comm: Any                   # Communicator
    book: Any                   # PartitionBook of this part
    graph: Any                  # the whole Graph (read-only; global statistics)
    seed: int = 0
    epochs: int = 1
    part: int = 0               # this part's id (== rank unless a rank holds several parts)
    #: the run's device: model, data, propagator and the method's buffers live there
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    model: str = "gcn"          # the model's name (``--model``)
    #: width of every layer's input, then the output width: (features, hidden..., classes)
    dims: tuple[int, ...] = ()
    dropout: float = 0.0        # the model's dropout rate
    #: the whole Partitioning (read-only: global replica statistics), or None
    partitioning: Any = None
    #: the run's floating-point type (``--dtype``): model, rows and buffers use it
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class RunSpec:
    """A run as :meth:`Method.check_compatible` sees it: what the config says,
    before any graph or partitioning is loaded (``TrainConfig.run_spec``)."""

    model: str
    partitioner: str            # the partitioner's registry name
    partition_kind: str         # its kind: "edge" | "vertex" (the registry, or the file's)
    parts: int                  # parts of the partitioning
    workers: int                # ranks that train them
    device: str = "cpu"
    method_params: dict[str, Any] = field(default_factory=dict)
    precompute_first_layer: bool = False
    dtype: str = "float32"     # ``--dtype``


@dataclass(frozen=True)
class Prepared:
    """What :meth:`SyncStrategy.prepare` decided before the books are built."""

    #: bool mask over the graph's arcs (CSR order) to drop from every local graph, or None
    drop_arcs: np.ndarray | None = None
    #: what the run record keeps under ``partition.prepare``, or None
    info: dict[str, Any] | None = None


class Method:
    """What every registered method declares, whichever engine runs it: its name, the
    track, what it is compatible with (``check_compatible``), and its parameters
    (``PARAMS``, validated when the method is built). The hooks live in the two track
    bases: :class:`SyncStrategy` (the full-batch engine) and
    :class:`cdfgnn.methods.sampled.SampledMethod` (the sampled track)."""

    name = "base"
    #: "edge", "vertex" or None (works with both partition kinds)
    partition_kind: str | None = None
    #: the models the method runs (None: every model)
    supported_models: tuple[str, ...] | None = None
    #: the devices (``--device``) the method runs on. A method declares "cuda" only when
    #: every tensor it allocates follows the run's device (``ctx.device``, or the device
    #: of the rows it is handed); checked when the run is configured
    supported_devices: tuple[str, ...] = ("cpu",)
    #: the dtypes (``--dtype``) the method runs in. A method declares "float64" only when
    #: every buffer it allocates follows the rows it is handed (or ``ctx.dtype``); checked
    #: when the run is configured, with the codec (``check_compatible``)
    supported_dtypes: tuple[str, ...] = ("float32",)
    #: no vertex rows cross ranks in training (CoFree): a rank may then hold several
    #: parts of a partitioning, trained one after another with accumulated gradients
    communication_free: bool = False
    #: the engine that trains the method: "full-batch" (``cdfgnn/train/loop.py``) or
    #: "minibatch" (the sampled track, ``cdfgnn/train/minibatch.py``)
    track: str
    #: the partitioner `cdfgnn compare` uses for this method (None: metis for edge-cut
    #: or kind-agnostic methods, ebv for vertex-cut ones)
    default_partitioner: str | None = None
    #: where the method must equal ``exact`` (every method declares it; tested registry-wide)
    degenerate: Degenerate = Degenerate(None, reason="not declared")
    PARAMS: dict[str, Param] = {}

    def __init__(self, **params: Any):
        spec = self.param_spec()
        unknown = sorted(set(params) - set(spec))
        if unknown:
            raise CdfgnnError(f"method {self.name!r}: unknown parameter(s) {unknown}; valid: "
                              f"{', '.join(sorted(spec)) or '(none)'}")
        self.params: dict[str, Any] = {k: p.default for k, p in spec.items()}
        for k, v in params.items():
            self.params[k] = spec[k].coerce(self.name, k, v)
        self.check_params()

    @classmethod
    def param_spec(cls) -> dict[str, Param]:
        spec: dict[str, Param] = {}
        for klass in reversed(cls.__mro__):
            spec.update(getattr(klass, "PARAMS", {}) or {})
        return spec

    @classmethod
    def check_compatible(cls, run: RunSpec) -> str | None:
        """Why this method cannot run as ``run`` says, in one line naming both sides, or
        None. Called wherever a config is validated (``TrainConfig.validate``: `cdfgnn
        train`, ``run_training``, every run of a pipeline grid at workflow start), so an
        impossible pairing stops before anything is loaded. The base covers the
        declarations (partition kind, models, devices, parts per worker) and GAT's need
        for an edge-cut; a method with conditions of its own extends it
        (``super().check_compatible(run) or ...``)."""
        me = f"method {cls.name!r}"
        need = cls.partition_kind
        if need is not None and need != run.partition_kind:
            return (f"{me} needs a {need}-cut partitioning, partitioner {run.partitioner!r} "
                    f"makes a {run.partition_kind}-cut")
        models = cls.supported_models
        if models is not None and run.model not in models:
            return f"{me} supports models {', '.join(models)}, not {run.model!r}"
        if run.model == "gat" and run.partition_kind != "edge":
            return (f"model 'gat' needs an edge-cut partitioning, partitioner "
                    f"{run.partitioner!r} makes a {run.partition_kind}-cut")
        return (cls._device_problem(run.device, run.method_params)
                or cls._dtype_problem(run.dtype, run.method_params)
                or cls._parts_problem(run))

    @classmethod
    def _device_problem(cls, device: str, params: dict[str, Any]) -> str | None:
        """The method must run on ``device``. Every codec encodes where its rows are
        (numba on the CPU, torch kernels on cuda), so no codec restricts the device."""
        kind = str(device).split(":")[0]
        if kind not in cls.supported_devices:
            return (f"method {cls.name!r} does not run on --device {device}; "
                    f"it supports: {', '.join(cls.supported_devices)}")
        return None

    @classmethod
    def _codec_spec(cls, params: dict[str, Any] | None) -> str:
        """The codec a run uses: its ``codec=`` parameter, else the method's default
        ("none" for a method without one: the sampled track sends rows as they are)."""
        default = cls.param_spec().get("codec")
        return str((params or {}).get("codec", default.default if default else "none"))

    @classmethod
    def _parts_problem(cls, run: RunSpec) -> str | None:
        """More parts than workers: only for communication-free methods, W dividing P."""
        p, w = run.parts, run.workers
        if p == w:
            return None
        if p % w:
            return f"--workers {w} does not divide the {p} parts of the partitioning"
        if not cls.communication_free:
            return (f"method {cls.name!r} exchanges rows between parts: it needs one part per "
                    f"worker (--workers {p}), got {p} parts on {w} workers")
        if run.precompute_first_layer:
            return (f"--precompute-first-layer needs one part per worker, got {p} parts on "
                    f"{w} workers (method {cls.name!r})")
        return None

    @classmethod
    def _dtype_problem(cls, dtype: str, params: dict[str, Any]) -> str | None:
        """The method (with ``params``) must run in ``dtype``. The lossy codecs encode
        float32 rows and decode to float32, so in another dtype only a codec that sends
        the rows as they are is accepted."""
        if dtype not in cls.supported_dtypes:
            return (f"method {cls.name!r} does not run in --dtype {dtype}; "
                    f"it supports: {', '.join(cls.supported_dtypes)}")
        codec = cls._codec_spec(params)
        wire = get_codec(codec)
        if dtype != "float32" and not (wire.exact and wire.bits == 32):
            return (f"method {cls.name!r}: codec={codec!r} encodes float32 rows; "
                    f"in --dtype {dtype} use codec=none")
        return None

    def check_params(self) -> None:
        """Cross-parameter checks (raise CdfgnnError); single values are checked by Param."""

    @classmethod
    def same_function_as_exact(cls, params: dict[str, Any] | None = None) -> bool:
        """Does the method with ``params`` train the model ``exact`` trains? True only at its
        declared degenerate setting (:attr:`degenerate`, tested to equal ``exact``) with
        every other parameter at its default; a method without one (dropped edges, stale
        rows, sampling) changes the model's function. Conservative: a parameter that only
        changes timing also counts as a change."""
        if cls.degenerate.params is None:
            return False
        return cls(**(params or {})).params == cls(**cls.degenerate.params).params


class SyncStrategy(Method):
    """Base strategy: exact synchronisation (every row, every sync) with a codec."""

    track = "full-batch"
    #: communication overlaps computation (pipelining): the modelled epoch is then
    #: max(compute, vertex communication) + gradient all-reduce, per rank
    overlaps_compute: bool = False
    #: evaluate by one-process full-graph inference on rank 0 (e.g. CoFree's default)
    #: instead of distributed inference with exact sync; forced when a rank holds
    #: several parts
    full_graph_eval: bool = False
    #: evaluate per part instead (CoFree's ``eval=per-part``): every part infers on
    #: ``local_view(view, False)`` and the outputs of a vertex's replicas are averaged
    #: at its master with the weights of ``replica_eval_weights`` (one all_to_all under
    #: the ``eval`` tag; ``cdfgnn.train.per_part_eval``); works with several parts a rank
    per_part_eval: bool = False
    #: evaluate through the method's own sync hooks (e.g. cached halo rows) instead of
    #: exact sync; CaPGNN's public code reads its caches in evaluation too
    evaluates_with_method: bool = False
    PARAMS: dict[str, Param] = {
        "codec": Param("none", str, check=valid_codec, expect=CODEC_HELP,
                       doc="message encoding of every vertex row sent"),
    }

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.codec = get_codec(self.params.get("codec", "none"))
        self.ctx: RankContext | None = None
        self.comm = None
        self.book = None
        self.epoch = 0
        self._stale_rows: dict[str, list] = {}

    # ----------------------------------------------------------- lifecycle
    def prepare(self, graph, part, devices: str | None = None) -> Prepared:
        """Once per run, before the books: the arcs to drop from every local graph and
        what the record keeps of the decision. ``devices``: the run's ``--devices``
        spec (per-worker device profiles; None when not given). Must be deterministic."""
        return Prepared()

    def setup(self, ctx: RankContext) -> None:
        self.ctx, self.comm, self.book = ctx, ctx.comm, ctx.book

    def local_view(self, view, training: bool):
        """The local graph of the next forward pass (``cdfgnn.models.propagate.LocalView``)."""
        return view

    def replica_eval_weights(self) -> torch.Tensor:
        """Per-part evaluation: the weight of every local row's output in its vertex's
        combined output (the engine divides by their sum over the replicas). Default:
        1, the plain mean over the replicas."""
        return torch.ones(self.book.num_local, device=self.device)

    def prebuilt_views(self, view) -> list:
        """Training views whose matrices the engine builds before epoch 0 (outside the
        timed epochs), e.g. DropEdge-K's K precomputed masks."""
        return []

    def on_epoch_start(self, epoch: int) -> None:
        self.epoch = epoch

    def overlaps(self, epoch: int) -> bool:
        """Did this epoch's vertex communication overlap computation (modelled time)?"""
        return self.overlaps_compute

    def count_key(self, epoch: int) -> Hashable | None:
        """What, besides the part, its view's key and which parameters hold a gradient,
        decides the kernels a training pass of this part issues in ``epoch`` and their
        shapes: two passes with equal keys issue the same kernels on the same shapes, so
        the operation ledger counts one and reuses its counts for the others
        (``cdfgnn.cost.reuse.counted_once``; tests compare with counting every op). None
        (the default): not declared, every pass is counted op by op. A method whose
        hooks follow values (cache hits, thresholds, sampled boundaries) keeps None, and
        a subclass that changes what a declaring parent's hooks issue overrides it.
        Hook work that follows values no key can know before the pass (a cache's
        lookups, the rows its peers ask for) may run in ``cdfgnn.cost.reuse.live``
        sections: counted op by op every pass and left out of the reused counts; the
        key then decides the rest of the pass."""
        return None

    def count_sizes(self, epoch: int) -> Sequence[int] | None:
        """How a training pass of this part is counted when :meth:`count_key` declares a
        key. None (the default): the key fixes the counts, counted once and reused
        (``reuse.counted_once``). A sequence of integers: the pass's counts are an affine
        function of these sizes under the key, learnt from counted passes, verified on
        two more and checked on every 256th reused one, a difference raising
        (``reuse.counted_affine``); an empty one when the key itself is a prediction of
        what the hooks will do (from a cache's state), so that a wrong one is caught."""
        return None

    def on_epoch_end(self, epoch: int, metrics: dict[str, float]) -> dict[str, Any]:
        """Update state from the epoch's metrics; return extra columns for the epoch row."""
        return {}

    def close(self) -> None:
        """Release what ``setup`` acquired (shared memory, host-wide registries). The
        engine calls it once per part on every exit path of its rank: after the last
        epoch, or after an error (then possibly after a partial ``setup``); no
        collectives here, the peers may be gone."""

    # ------------------------------------------------------------ sync hooks
    def aggregate(self, prop, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        """``A_norm @ expand(t)``: the layer's neighbour aggregation."""
        return prop.matrix(norm) @ prop.expand(t, layer)

    def attend(self, prop, t: torch.Tensor, fn, layer: int) -> torch.Tensor:
        """Attention (GAT): ``fn(expand(t), prop)``, the edge softmax over local + halo rows."""
        return fn(prop.expand(t, layer), prop)

    def halo_rows(self, prop, t: torch.Tensor, key: SyncKey) -> list:
        """Edge-cut forward: the halo rows each peer delivers (aligned with ``recv_idx``)."""
        return self.send(key, [t[i] if i.numel() else None for i in prop.send])

    def halo_grads(self, prop, grad_halo: list, key: SyncKey) -> list:
        """Edge-cut backward: halo-row gradients each peer returns (aligned with ``send_idx``)."""
        return self.send(key, grad_halo)

    def replica_sync(self, prop, z: torch.Tensor, layer: int, direction: str,
                     training: bool) -> torch.Tensor:
        """Vertex-cut: every replica of v gets sum over replicas (gather + scatter)."""
        key = SyncKey(layer, direction, "gather", training, int(z.shape[1]))
        incoming = self.send(key, [z[i] if i.numel() else None for i in prop.send])
        out = z.clone()
        for q, idx in enumerate(prop.recv):
            if idx.numel() and incoming[q] is not None:
                out.index_add_(0, idx, incoming[q])
        key = SyncKey(layer, direction, "scatter", training, int(z.shape[1]))
        incoming = self.send(key, [out[i] if i.numel() else None for i in prop.recv])
        for q, idx in enumerate(prop.send):
            if idx.numel() and incoming[q] is not None:
                out[idx] = incoming[q]
        return out

    def stale(self, key: SyncKey) -> bool:
        """May this sync point use the rows received at the previous training epoch?"""
        return False

    def codec_for(self, key: SyncKey, outgoing: list) -> Codec | list[Codec]:
        """The codec of the messages at this sync point: the method's ``codec``, or one
        per peer (AdaQP picks a bit width per message)."""
        return self.codec

    # ------------------------------------------------------------ sending rows
    def send(self, key: SyncKey, outgoing: list, incoming_rows: list[int] | None = None) -> list:
        """Deliver ``outgoing[q]`` to peer q; return the rows each peer delivered here.

        The one way a method moves vertex rows: encoded with ``codec_for(key, ...)``,
        sent and decoded by :func:`cdfgnn.comm.codecs.send_rows` under ``key.tag``
        (codec time counts as communication). A training sync point that
        ``stale(key)`` marks delivers the rows received at the previous training epoch
        instead (the shared stale path). ``incoming_rows[q]``: the rows peer q sends
        here (default: the lengths of the receive lists of :meth:`index_lists`).
        """
        if key.training and self.stale(key):
            return self._stale_exchange(key, outgoing, incoming_rows)
        fresh = self._transmit(key, outgoing, incoming_rows)
        if key.training and key.tag in self._stale_rows:
            # a synchronous epoch of a pipelined method (Sylvie's bounded staleness):
            # the next stale epoch consumes these rows, not older ones
            self._stale_rows[key.tag] = self.merge_stale(key, self._stale_rows[key.tag], fresh)
        return fresh

    def send_encoded(self, key: SyncKey, wires: list, rows: list[int]) -> list:
        """Messages the method encoded itself (the CDFGNN cache's fused kernels: rows and
        a bitmap in one byte buffer), through the same primitive as they are; ``rows[q]``
        is the vertex rows message q carries (accounted with its bytes)."""
        return send_rows(self.comm, wires, key.tag, rows=rows)

    def _transmit(self, key: SyncKey, outgoing: list, incoming_rows: list[int] | None) -> list:
        codec = self.codec_for(key, outgoing)
        lossless = all(map(is_identity, [codec] if isinstance(codec, Codec) else codec))
        if lossless:
            return send_rows(self.comm, outgoing, key.tag)
        if incoming_rows is None:
            incoming_rows = [len(i) for i in self.index_lists(key)[1]]
        return send_rows(self.comm, outgoing, key.tag, codec, incoming_rows=incoming_rows,
                         width=key.width, generator=self.generator(key))

    # ------------------------------------------------------------ helpers
    @property
    def device(self) -> torch.device:
        """The run's device: where the method's buffers live (the CPU before setup)."""
        return self.ctx.device if self.ctx is not None else torch.device("cpu")

    def index_lists(self, key: SyncKey) -> tuple[list, list]:
        """(local rows sent to each peer, local rows each peer's message lands on)."""
        send, recv = self.book.send_idx, self.book.recv_idx
        if (key.phase, key.direction) == ("halo", "bwd") or key.phase == "scatter":
            return recv, send
        return send, recv

    def generator(self, key: SyncKey) -> torch.Generator:
        """Seeded noise for stochastic codecs: (seed, rank, epoch, layer, direction, phase)."""
        ctx = self.ctx
        seed, part = (ctx.seed, ctx.part) if ctx is not None else (0, 0)
        # crc32, not hash(): str hashes differ between processes (PYTHONHASHSEED)
        h = zlib.crc32(f"{seed}/{part}/{self.epoch}/{key.layer}/{key.direction}/"
                       f"{key.phase}".encode())
        return torch.Generator().manual_seed(h)

    def _stale_exchange(self, key: SyncKey, outgoing: list,
                        incoming_rows: list[int] | None = None) -> list:
        """Send this epoch's rows; deliver those received at the previous training epoch.

        One shared mechanism for every pipelined method (PipeGCN, Sylvie-A, CaPGNN's
        overlap): the rows sent now are consumed one epoch later; the first epoch
        consumes zeros (Sylvie, arXiv 2303.01277, does not say; its public code uses
        zeros). ``merge_stale`` may smooth the buffer.
        """
        fresh = self._transmit(key, outgoing, incoming_rows)
        previous = self._stale_rows.get(key.tag)
        if previous is None:
            previous = [None if f is None else torch.zeros_like(f) for f in fresh]
        self._stale_rows[key.tag] = self.merge_stale(key, previous, fresh)
        return previous

    def merge_stale(self, key: SyncKey, previous: list, fresh: list) -> list:
        """What the buffer holds for the next epoch (PipeGCN smoothing overrides this)."""
        return fresh


METHODS: Registry[type[Method]] = Registry("method")


def build_strategy(name: str, params: dict[str, Any] | None = None) -> Method:
    return METHODS.get(name)(**(params or {}))
