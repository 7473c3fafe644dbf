"""SyncStrategy: the plug-in interface of a communication technique.

A technique is one module that subclasses :class:`SyncStrategy`, overrides the
hooks it changes and registers itself in :data:`METHODS`. The engine
(``cdfgnn/train/``) calls the hooks and never looks at a method's name. Hooks,
coarse to fine; override only what the technique changes:

==========================  ==============================  ===========================
hook                        called                          overridden by (examples)
==========================  ==============================  ===========================
``prepare(graph, part)``    once, before PartitionBooks     halo pruning (RAPA): returns
                            are built                       a mask of arcs to drop
``setup(ctx)``              once per rank and part          every stateful method
``local_view(view, t)``     before every forward pass       CoFree (local degrees, no
                            (``t``: training or eval)       sync), DropEdge-K, BNS-GCN
``on_epoch_start(e)``       every epoch, before forward     sampling, sync schedules
``aggregate(prop, ...)``    every layer's aggregation       SAR (one peer at a time)
``attend(prop, t, fn, l)``  every GAT layer's attention     (methods that cannot run GAT)
``halo_rows`` /             edge-cut sync points            broadcast peers (CAGNET,
``halo_grads``              (forward / backward)            Sancus)
``replica_sync``            vertex-cut sync points          the CDFGNN cache
``exchange(key, rows)``     every sync point                caches, sampling
``stale(key)``              inside ``exchange``             PipeGCN, Sylvie-A
``transmit(key, rows)``     inside ``exchange``             (codec: a parameter)
``overlaps(epoch)``         after every epoch               pipelined methods
``on_epoch_end(e, row)``    after every epoch               thresholds, statistics
``replica_eval_weights()``  per-part evaluation             CoFree (``eval=per-part``:
                            (``per_part_eval``)             DAR-weighted replicas)
==========================  ==============================  ===========================

Rows at a sync point (``SyncKey.phase``/``direction``) map to the book's index
lists as follows (:meth:`SyncStrategy.index_lists`): edge-cut ``halo``/``fwd``
sends ``send_idx[q]`` and receives ``recv_idx[q]``, ``halo``/``bwd`` the reverse;
vertex-cut ``gather`` (both directions) sends ``send_idx[q]`` (mirrors) and
receives ``recv_idx[q]`` (masters), ``scatter`` the reverse.

Parameters are declared once per class in ``PARAMS`` (name -> :class:`Param`);
``build_strategy`` validates them and names the bad value and the valid choices.
Every method takes ``codec`` (``cdfgnn.comm.codecs``), so any technique can run
with any message encoding.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from cdfgnn.comm.codecs import CODEC_HELP, encoded_all_to_all, get_codec
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


def _valid_codec(spec: str) -> bool:
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
    extra: dict = field(default_factory=dict)
    #: the run's device: model, data, propagator and the method's buffers live there
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    #: the run's floating-point type (``--dtype``): model, rows and buffers use it
    dtype: torch.dtype = torch.float32


class SyncStrategy:
    """Base strategy: exact synchronisation (every row, every sync) with a codec."""

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
    #: when the run is configured, with the codec (``check_dtype``)
    supported_dtypes: tuple[str, ...] = ("float32",)
    #: communication overlaps computation (pipelining): the modelled epoch is then
    #: max(compute, vertex communication) + gradient all-reduce, per rank
    overlaps_compute: bool = False
    #: no vertex rows cross ranks in training (CoFree): a rank may then hold several
    #: parts of a partitioning, trained one after another with accumulated gradients
    communication_free: bool = False
    #: evaluate by one-process full-graph inference on rank 0 (e.g. CoFree's default)
    #: instead of distributed inference with exact sync; forced when a rank holds
    #: several parts
    full_graph_eval: bool = False
    #: evaluate per part instead (CoFree's ``eval=per-part``): every part infers on
    #: ``local_view(view, False)`` and the outputs of a vertex's replicas are averaged
    #: at its master with the weights of ``replica_eval_weights`` (one all_to_all under
    #: the ``eval`` tag; ``cdfgnn.train.per_part_eval``); works with several parts a rank
    per_part_eval: bool = False
    #: "full-batch" (this engine) or "minibatch" (the sampled track)
    track: str = "full-batch"
    #: the partitioner `cdfgnn compare` uses for this method (None: metis for edge-cut
    #: or kind-agnostic methods, ebv for vertex-cut ones)
    default_partitioner: str | None = None
    #: the run's ``--devices`` (per-worker device profiles), set by the engine before
    #: ``prepare`` (resource-aware partitioning reads it); None when not given
    devices: str | None = None
    #: what ``prepare`` wants in the run record (``partition.prepare``), or None
    prepare_info: dict | None = None
    #: where the method must equal ``exact`` (every method declares it; tested registry-wide)
    degenerate: Degenerate = Degenerate(None, reason="not declared")
    PARAMS: dict[str, Param] = {
        "codec": Param("none", str, check=_valid_codec, expect=CODEC_HELP,
                       doc="message encoding of every vertex row sent"),
    }

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
        self.codec = get_codec(self.params.get("codec", "none"))
        self.ctx: RankContext | None = None
        self.comm = None
        self.book = None
        self.epoch = 0
        self._stale_rows: dict[str, list] = {}

    @classmethod
    def param_spec(cls) -> dict[str, Param]:
        spec: dict[str, Param] = {}
        for klass in reversed(cls.__mro__):
            spec.update(getattr(klass, "PARAMS", {}) or {})
        return spec

    @classmethod
    def check_device(cls, device: str, params: dict[str, Any] | None = None) -> None:
        """Raise a one-line CdfgnnError unless the method (with ``params``) runs on
        ``device``. The codecs (cdfgnn.comm.codecs) encode on the CPU, so off the CPU
        only the identity codec is accepted."""
        kind = str(device).split(":")[0]
        if kind not in cls.supported_devices:
            raise CdfgnnError(f"method {cls.name!r} does not run on --device {device}; "
                              f"it supports: {', '.join(cls.supported_devices)}")
        codec = (params or {}).get("codec", "none")
        if kind != "cpu" and codec != "none":
            raise CdfgnnError(f"method {cls.name!r}: codec={codec!r} encodes on the CPU only; "
                              f"on --device {device} use codec=none")

    @classmethod
    def check_dtype(cls, dtype: str, params: dict[str, Any] | None = None) -> None:
        """Raise a one-line CdfgnnError unless the method (with ``params``) runs in
        ``dtype``. The lossy codecs encode float32 rows and decode to float32, so in
        another dtype only a codec that sends the rows as they are is accepted."""
        if dtype not in cls.supported_dtypes:
            raise CdfgnnError(f"method {cls.name!r} does not run in --dtype {dtype}; "
                              f"it supports: {', '.join(cls.supported_dtypes)}")
        codec = (params or {}).get("codec", cls.param_spec()["codec"].default)
        wire = get_codec(codec)
        if dtype != "float32" and not (wire.exact and wire.bits == 32):
            raise CdfgnnError(f"method {cls.name!r}: codec={codec!r} encodes float32 rows; "
                              f"in --dtype {dtype} use codec=none")

    def check_params(self) -> None:
        """Cross-parameter checks (raise CdfgnnError); single values are checked by Param."""

    # ----------------------------------------------------------- lifecycle
    def prepare(self, graph, part):
        """Once, before the books: a bool mask over the graph's arcs (CSR order) to drop
        from every local graph, or None. Must be deterministic (every rank calls it)."""
        return None

    def setup(self, ctx: RankContext) -> None:
        self.ctx, self.comm, self.book = ctx, ctx.comm, ctx.book

    def local_view(self, view, training: bool):
        """The local graph of the next forward pass (``cdfgnn.models.propagate.LocalView``)."""
        return view

    def replica_eval_weights(self) -> torch.Tensor:
        """Per-part evaluation: the weight of every local row's output in its vertex's
        combined output (the engine divides by their sum over the replicas). Default:
        1, the plain mean over the replicas."""
        return torch.ones(self.book.num_local)

    def prebuilt_views(self, view) -> list:
        """Training views whose matrices the engine builds before epoch 0 (outside the
        timed epochs), e.g. DropEdge-K's K precomputed masks."""
        return []

    def on_epoch_start(self, epoch: int) -> None:
        self.epoch = epoch

    def overlaps(self, epoch: int) -> bool:
        """Did this epoch's vertex communication overlap computation (modelled time)?"""
        return self.overlaps_compute

    def on_epoch_end(self, epoch: int, metrics: dict[str, float]) -> dict[str, Any]:
        """Update state from the epoch's metrics; return extra columns for the epoch row."""
        return {}

    # ------------------------------------------------------------ sync hooks
    def aggregate(self, prop, t: torch.Tensor, norm: str, layer: int) -> torch.Tensor:
        """``A_norm @ expand(t)``: the layer's neighbour aggregation."""
        return prop.matrix(norm) @ prop.expand(t, layer)

    def attend(self, prop, t: torch.Tensor, fn, layer: int) -> torch.Tensor:
        """Attention (GAT): ``fn(expand(t), prop)``, the edge softmax over local + halo rows."""
        return fn(prop.expand(t, layer), prop)

    def halo_rows(self, prop, t: torch.Tensor, key: SyncKey) -> list:
        """Edge-cut forward: the halo rows each peer delivers (aligned with ``recv_idx``)."""
        return self.exchange(key, [t[i] if i.numel() else None for i in prop.send])

    def halo_grads(self, prop, grad_halo: list, key: SyncKey) -> list:
        """Edge-cut backward: halo-row gradients each peer returns (aligned with ``send_idx``)."""
        return self.exchange(key, grad_halo)

    def replica_sync(self, prop, z: torch.Tensor, layer: int, direction: str,
                     training: bool) -> torch.Tensor:
        """Vertex-cut: every replica of v gets sum over replicas (gather + scatter)."""
        key = SyncKey(layer, direction, "gather", training, int(z.shape[1]))
        incoming = self.exchange(key, [z[i] if i.numel() else None for i in prop.send])
        out = z.clone()
        for q, idx in enumerate(prop.recv):
            if idx.numel() and incoming[q] is not None:
                out.index_add_(0, idx, incoming[q])
        key = SyncKey(layer, direction, "scatter", training, int(z.shape[1]))
        incoming = self.exchange(key, [out[i] if i.numel() else None for i in prop.recv])
        for q, idx in enumerate(prop.send):
            if idx.numel() and incoming[q] is not None:
                out[idx] = incoming[q]
        return out

    def exchange(self, key: SyncKey, outgoing: list) -> list:
        """Deliver ``outgoing[q]`` to peer q; return what each peer delivered here."""
        if key.training and self.stale(key):
            return self._stale_exchange(key, outgoing)
        fresh = self.transmit(key, outgoing)
        if key.training and key.tag in self._stale_rows:
            # a synchronous epoch of a pipelined method (Sylvie's bounded staleness):
            # the next stale epoch consumes these rows, not older ones
            self._stale_rows[key.tag] = self.merge_stale(key, self._stale_rows[key.tag], fresh)
        return fresh

    def stale(self, key: SyncKey) -> bool:
        """May this sync point use the rows received at the previous training epoch?"""
        return False

    def transmit(self, key: SyncKey, outgoing: list) -> list:
        """Encode with the codec, all_to_all, decode (codec time counts as communication)."""
        if self.codec.exact and self.codec.bits == 32:
            return self.comm.all_to_all(outgoing, tag=key.tag)
        _, incoming_idx = self.index_lists(key)
        return encoded_all_to_all(self.comm, self.codec, outgoing,
                                  [len(i) for i in incoming_idx], key.width,
                                  key.tag, self.generator(key))

    # ------------------------------------------------------------ helpers
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

    def _stale_exchange(self, key: SyncKey, outgoing: list) -> list:
        """Send this epoch's rows; deliver those received at the previous training epoch.

        One shared mechanism for every pipelined method (PipeGCN, Sylvie-A, CaPGNN's
        overlap): the rows sent now are consumed one epoch later; the first epoch
        consumes zeros (Sylvie digest Q11). ``merge_stale`` may smooth the buffer.
        """
        fresh = self.transmit(key, outgoing)
        previous = self._stale_rows.get(key.tag)
        if previous is None:
            previous = [None if f is None else torch.zeros_like(f) for f in fresh]
        self._stale_rows[key.tag] = self.merge_stale(key, previous, fresh)
        return previous

    def merge_stale(self, key: SyncKey, previous: list, fresh: list) -> list:
        """What the buffer holds for the next epoch (PipeGCN smoothing overrides this)."""
        return fresh


METHODS: Registry[type[SyncStrategy]] = Registry("method")


def build_strategy(name: str, params: dict[str, Any] | None = None) -> SyncStrategy:
    return METHODS.get(name)(**(params or {}))
