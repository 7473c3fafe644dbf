"""Process backend: one OS process per rank over torch.distributed (docs/architecture.md).

gloo on CPU, nccl when the rank's device is CUDA (tensors are staged onto
``self.device``; results come back on it). The process group must already be
initialised (the launcher does it; under torchrun call ``init_process_group``
yourself and build a :class:`ProcessCommunicator`).

all_to_all with per-peer shapes and dtypes, in two steps:

1. **Header**: every rank sends every peer a fixed-size int64 record
   ``[ndim, dtype_code, shape_0 .. shape_7]`` (``ndim = -1``: nothing sent), with
   ``dist.all_to_all_single`` (equal splits). Now each rank knows what it receives.
2. **Payload**, one of two modes (both verified on torch 2.13 gloo, which does
   support ``all_to_all_single`` with uneven splits):

   * ``"single"`` (default): each tensor is viewed as bytes, padded to a 16-byte
     multiple (so every received slice can be re-viewed as any dtype), concatenated
     and exchanged with one ``all_to_all_single`` on uint8 with per-peer split sizes
     (gloo's list ``all_to_all`` needs equal sizes, so it cannot be used). Each
     received slice is then cloned so every received tensor owns its storage.
   * ``"p2p"``: ``batch_isend_irecv`` of the tensors themselves (no packing copy,
     2(P-1) point-to-point operations). Received tensors are separate allocations.

   Every rank must call the payload step even when it sends and receives nothing,
   because ``all_to_all_single`` is a collective.

Semantics match the thread backend: ``None``/empty -> received as ``None``;
``tensors[rank]`` is returned as the same object; received tensors never share
memory with the sender's. all_reduce is ``dist.all_reduce(SUM)`` in place: every
rank gets the same bits (gloo and nccl reduce then distribute), but the summation
order differs from the thread backend's rank order, so the two backends agree
within float tolerance only. Errors raised by torch.distributed (a peer died, a
timeout) become :class:`~cdfgnn.comm.thread.CollectiveAbortedError`, or, when the
communicator has a ``liveness`` watcher (:mod:`cdfgnn.comm.liveness`, set under
torchrun) that finds a peer gone, :class:`~cdfgnn.errors.PeerLostError` naming it.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from cdfgnn.comm.base import Communicator
from cdfgnn.errors import CdfgnnError, CollectiveAbortedError, PeerLostError
from cdfgnn.partition.base import Topology

#: dtypes that all_to_all can carry; the header stores the index into this tuple.
WIRE_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    torch.complex64, torch.complex128,
)
_DTYPE_CODE = {dt: i for i, dt in enumerate(WIRE_DTYPES)}
MAX_NDIM = 8
_HEADER = 2 + MAX_NDIM
_ALIGN = 16
A2A_MODES = ("single", "p2p")


def _padded(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


class ProcessCommunicator(Communicator):
    """One rank of an initialised torch.distributed process group."""

    backend = "process"

    def __init__(self, rank: int, world_size: int, topology: Topology,
                 device: str | torch.device = "cpu", a2a_mode: str = "single"):
        super().__init__(rank, world_size, topology)
        if not dist.is_initialized():
            raise CdfgnnError("ProcessCommunicator needs torch.distributed.init_process_group first")
        if dist.get_rank() != rank or dist.get_world_size() != world_size:
            raise CdfgnnError(f"ProcessCommunicator(rank={rank}, world_size={world_size}) does not "
                              f"match the process group (rank {dist.get_rank()} of "
                              f"{dist.get_world_size()})")
        if a2a_mode not in A2A_MODES:
            raise CdfgnnError(f"a2a_mode must be one of {A2A_MODES}, got {a2a_mode!r}")
        self.device = torch.device(device)
        self.dist_backend = str(dist.get_backend())
        if self.dist_backend == "nccl" and self.device.type != "cuda":
            raise CdfgnnError(f"nccl needs a cuda device, got device {self.device}")
        self.a2a_mode = a2a_mode
        #: a :class:`~cdfgnn.comm.liveness.Heartbeat` (torchrun sets it), or None
        self.liveness = None

    def _dist(self, what, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RuntimeError as exc:  # DistBackendError and gloo/nccl errors are RuntimeErrors
            lost = self.liveness.explain() if self.liveness is not None else None
            if lost is not None:  # a peer is gone: name it, not the address gloo saw
                raise PeerLostError(f"{lost} ({what} failed)") from exc
            raise CollectiveAbortedError(
                f"rank {self.rank}: {what} failed (a peer died or a timeout expired): {exc}"
            ) from exc

    # ------------------------------------------------------------ all_to_all
    def _all_to_all_impl(self, tensors):
        p, me, dev = self.world_size, self.rank, self.device
        send: list[torch.Tensor | None] = [None] * p
        header = torch.full((p, _HEADER), -1, dtype=torch.int64)
        for dst, t in enumerate(tensors):
            if t is not None and not isinstance(t, torch.Tensor):
                raise CdfgnnError(f"all_to_all entry {dst} must be a tensor or None, "
                                  f"got {type(t).__name__}")
            if dst == me or t is None or t.numel() == 0:
                continue
            if t.dtype not in _DTYPE_CODE:
                raise CdfgnnError(f"all_to_all entry {dst}: dtype {t.dtype} not supported; "
                                  f"supported: {[str(d) for d in WIRE_DTYPES]}")
            if t.dim() > MAX_NDIM:
                raise CdfgnnError(f"all_to_all entry {dst}: {t.dim()} dims, at most {MAX_NDIM}")
            send[dst] = t.detach().to(dev).contiguous()
            header[dst, 0] = t.dim()
            header[dst, 1] = _DTYPE_CODE[t.dtype]
            header[dst, 2:2 + t.dim()] = torch.tensor(t.shape, dtype=torch.int64)
        recv_header = torch.empty_like(header, device=dev)
        self._dist("all_to_all header", dist.all_to_all_single, recv_header, header.to(dev))
        recv_header = recv_header.cpu()
        specs: list[tuple[torch.dtype, tuple[int, ...]] | None] = [None] * p
        for src in range(p):
            ndim = int(recv_header[src, 0])
            if src != me and ndim >= 0:
                specs[src] = (WIRE_DTYPES[int(recv_header[src, 1])],
                              tuple(int(s) for s in recv_header[src, 2:2 + ndim]))
        if self.a2a_mode == "single":
            received = self._payload_single(send, specs)
        else:
            received = self._payload_p2p(send, specs)
        received[me] = tensors[me]
        return received

    def _payload_single(self, send, specs):
        p, dev = self.world_size, self.device
        pieces, in_splits = [], []
        for t in send:
            if t is None:
                in_splits.append(0)
                continue
            raw = t.view(-1).view(torch.uint8)
            pad = _padded(raw.numel()) - raw.numel()
            pieces.append(raw)
            if pad:
                pieces.append(torch.zeros(pad, dtype=torch.uint8, device=dev))
            in_splits.append(raw.numel() + pad)
        out_sizes = []
        for spec in specs:
            if spec is None:
                out_sizes.append((0, 0))
                continue
            dtype, shape = spec
            numel = 1
            for s in shape:
                numel *= s
            nbytes = numel * torch.empty((), dtype=dtype).element_size()
            out_sizes.append((nbytes, _padded(nbytes)))
        out_splits = [padded for _, padded in out_sizes]
        send_buf = torch.cat(pieces) if pieces else torch.empty(0, dtype=torch.uint8, device=dev)
        recv_buf = torch.empty(sum(out_splits), dtype=torch.uint8, device=dev)
        self._dist("all_to_all payload", dist.all_to_all_single, recv_buf, send_buf,
                   out_splits, in_splits)
        received: list[torch.Tensor | None] = [None] * p
        offset = 0
        for src, spec in enumerate(specs):
            nbytes, padded = out_sizes[src]
            if spec is not None:
                dtype, shape = spec
                # Clone: each received tensor owns its storage (a dtype view of a shared byte
                # buffer cannot be torch.save'd next to another, and would pin the whole buffer).
                received[src] = recv_buf[offset:offset + nbytes].clone().view(dtype).view(shape)
            offset += padded
        return received

    def _payload_p2p(self, send, specs):
        p, dev = self.world_size, self.device
        received: list[torch.Tensor | None] = [None] * p
        ops = []
        # Post receives and sends in rank order; batch_isend_irecv groups them (nccl needs it).
        for peer in range(p):
            if specs[peer] is not None:
                dtype, shape = specs[peer]
                received[peer] = torch.empty(shape, dtype=dtype, device=dev)
                ops.append(dist.P2POp(dist.irecv, received[peer], peer))
            if send[peer] is not None:
                ops.append(dist.P2POp(dist.isend, send[peer], peer))
        if ops:
            works = self._dist("all_to_all p2p", dist.batch_isend_irecv, ops)
            for w in works:
                self._dist("all_to_all p2p wait", w.wait)
        return received

    # ------------------------------------------------- reduce, bcast, misc
    def _staged(self, tensor: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """The tensor to hand to dist (on self.device, contiguous) and whether it is a copy."""
        data = tensor.detach()
        if data.device == self.device and data.is_contiguous():
            return data, False
        return data.to(self.device, memory_format=torch.contiguous_format, copy=True), True

    def _all_reduce_impl(self, tensor):
        if not isinstance(tensor, torch.Tensor):
            raise CdfgnnError(f"all_reduce needs a tensor, got {type(tensor).__name__}")
        work, copied = self._staged(tensor)
        self._dist("all_reduce", dist.all_reduce, work, op=dist.ReduceOp.SUM)
        if copied:
            tensor.detach().copy_(work)
        return tensor

    def _broadcast_impl(self, tensor, src):
        if not isinstance(src, int) or not 0 <= src < self.world_size:
            raise CdfgnnError(f"broadcast src must be a rank in [0, {self.world_size}), got {src!r}")
        work, copied = self._staged(tensor)
        self._dist("broadcast", dist.broadcast, work, src)
        if copied and self.rank != src:
            tensor.detach().copy_(work)
        return tensor

    def _barrier_impl(self):
        if self.dist_backend == "nccl":
            self._dist("barrier", dist.barrier, device_ids=[self.device.index or 0])
        else:
            self._dist("barrier", dist.barrier)

    def broadcast_object(self, obj, src: int = 0):
        """Rank ``src``'s picklable ``obj`` on every rank (bookkeeping only: not accounted)."""
        box = [obj if self.rank == src else None]
        self._dist("broadcast_object_list", dist.broadcast_object_list, box, src=src)
        return box[0]

    def _all_gather_object_impl(self, obj):
        out = [None] * self.world_size
        self._dist("all_gather_object", dist.all_gather_object, out, obj)
        return out
