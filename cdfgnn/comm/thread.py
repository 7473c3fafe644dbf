"""Thread backend: P virtual ranks as threads of one process (docs/architecture.md).

All ranks of one run share a :class:`ThreadGroup`: one mailbox slot per rank and a
``threading.Barrier(P, timeout=timeout_s)``. Every collective is a sequence of
*deposit -> barrier -> read -> barrier* phases; the closing barrier guarantees that
no rank overwrites a slot (or the tensor it deposited) while a peer still reads it.
Torch kernels release the GIL, so P = 64 ranks run on 2 cores with one intra-op
thread each (the launcher sets ``torch.set_num_threads(1)``).

Semantics shared with the process backend (so both give the same numbers):

* ``all_to_all``: a ``None`` or empty tensor sends nothing and is received as
  ``None``; ``tensors[rank]`` comes back as the same object. **Clone on send**:
  the sender deposits ``t.detach().clone()`` (contiguous), so received tensors are
  private memory: later in-place writes by the sender (or the receiver) cannot
  leak across ranks, and received tensors never require grad.
* ``all_reduce``: deterministic sum in rank order ``((t_0 + t_1) + t_2) + ...``,
  written in place; every rank ends with identical bits. The work is split into
  P contiguous slices of the flattened tensor, rank r sums slice r over all ranks
  in order 0..P-1 (elementwise IEEE additions, so slicing does not change a bit),
  then every rank copies the P slices into its own tensor.
* ``broadcast``: non-root ranks ``copy_`` the root's tensor into theirs (in place).
* ``all_gather_object``: every rank receives ``copy.deepcopy`` of every object
  (its own included), matching the pickle round trip of the process backend.

Failure handling (docs/architecture.md: "a dead rank stops the whole run within a timeout"):
an exception inside a rank is recorded once with :meth:`ThreadGroup.fail`, which
aborts the barrier; every rank waiting in (or later entering) a collective then
raises :class:`CollectiveAbortedError`. If the barrier times out because a rank
never arrived, the group records a :class:`CollectiveTimeoutError` on behalf of
the missing rank(s), so the launcher names the rank that hung, not its victims.
Ranks that open different collectives at the same point (a mismatched program)
fail with a CdfgnnError listing what each rank called.
"""
from __future__ import annotations

import copy
import threading

import torch

from cdfgnn.comm.base import Communicator
from cdfgnn.errors import CdfgnnError, CollectiveAbortedError, CollectiveTimeoutError
from cdfgnn.partition.base import Topology


class ThreadGroup:
    """Shared state of one thread-backend run: mailboxes, barrier, first failure."""

    def __init__(self, world_size: int, topology: Topology, timeout_s: float = 300.0):
        if not isinstance(world_size, int) or world_size < 1:
            raise CdfgnnError(f"world_size must be an int >= 1, got {world_size!r}")
        if topology.num_parts != world_size:
            raise CdfgnnError(f"topology {topology.label} has {topology.num_parts} devices, "
                              f"world_size is {world_size}")
        if not timeout_s > 0:
            raise CdfgnnError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.world_size = world_size
        self.topology = topology
        self.timeout_s = float(timeout_s)
        self._barrier = threading.Barrier(world_size, timeout=self.timeout_s)
        self._lock = threading.Lock()
        self._slots: list = [None] * world_size
        self._partials: list = [None] * world_size
        # Per rank: barriers entered and where it is, to name a hung rank on timeout.
        self._arrivals = [0] * world_size
        self._where = ["started"] * world_size
        # The collective each rank opened last; only rewritten after a release barrier,
        # so it is stable while ranks compare it (catches mismatched programs).
        self._ops: list[str | None] = [None] * world_size
        self.failure: tuple[int, BaseException] | None = None

    def communicator(self, rank: int, device: str | torch.device = "cpu") -> "ThreadCommunicator":
        return ThreadCommunicator(self, rank, device)

    # ------------------------------------------------------------- failures
    def fail(self, rank: int, exc: BaseException) -> None:
        """Record ``exc`` as the run's failure (first one wins) and wake every waiting rank.

        ``rank = -1``: the launcher itself was interrupted.
        """
        with self._lock:
            if self.failure is None:
                self.failure = (rank, exc)
                if rank >= 0:
                    self._where[rank] = f"failed ({type(exc).__name__})"
        self._barrier.abort()

    def mark(self, rank: int, where: str) -> None:
        self._where[rank] = where

    def sync(self, rank: int, what: str, opening: bool = False) -> None:
        """Barrier for collective ``what``; raises CollectiveAbortedError if the group broke.

        ``opening``: first barrier of a multi-phase collective; afterwards every rank
        checks that all ranks opened the same collective.
        """
        self._arrivals[rank] += 1
        self._where[rank] = f"in {what}"
        if opening:
            self._ops[rank] = what
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise self._aborted(rank, what) from None
        if opening and any(op != what for op in self._ops):
            ops = ", ".join(f"rank {r}: {op}" for r, op in enumerate(self._ops))
            raise CdfgnnError(f"mismatched collectives: ranks called different collectives at "
                              f"the same point ({ops})")

    def _aborted(self, rank: int, what: str) -> CollectiveAbortedError:
        with self._lock:
            if self.failure is None:
                # Nobody called fail(): the barrier timed out, so some rank never arrived.
                newest = max(self._arrivals)
                missing = [r for r in range(self.world_size) if self._arrivals[r] < newest]
                culprit = missing[0] if missing else rank
                states = ", ".join(f"rank {r} {self._where[r]}" for r in missing) or "unknown"
                self.failure = (culprit, CollectiveTimeoutError(
                    f"rank(s) {missing} did not reach collective {what!r} within "
                    f"{self.timeout_s:g} s ({states})"))
                self._barrier.abort()
            failed_rank, exc = self.failure
        who = f"rank {failed_rank} failed" if failed_rank >= 0 else "the launcher was interrupted"
        return CollectiveAbortedError(
            f"rank {rank}: {what} aborted because {who}: {type(exc).__name__}: {exc}")


class ThreadCommunicator(Communicator):
    """One virtual rank of a :class:`ThreadGroup` (see the module docstring for semantics)."""

    backend = "thread"

    def __init__(self, group: ThreadGroup, rank: int, device: str | torch.device = "cpu"):
        if not 0 <= rank < group.world_size:
            raise CdfgnnError(f"rank {rank} outside [0, {group.world_size})")
        super().__init__(rank, group.world_size, group.topology)
        self.group = group
        self.device = torch.device(device)

    def _guard(self, what, fn, *args):
        # An error inside a collective (bad input, mismatched shapes) must release peers
        # already waiting in the barrier, even when no launcher wraps this rank.
        try:
            return fn(*args)
        except CollectiveAbortedError:
            raise
        except BaseException as exc:
            self.group.fail(self.rank, exc)
            raise

    # ------------------------------------------------------------ all_to_all
    def _all_to_all_impl(self, tensors):
        return self._guard("all_to_all", self._a2a, tensors)

    def _a2a(self, tensors):
        g, me = self.group, self.rank
        outgoing = [None] * g.world_size
        for dst, t in enumerate(tensors):
            if t is not None and not isinstance(t, torch.Tensor):
                raise CdfgnnError(f"all_to_all entry {dst} must be a tensor or None, "
                                  f"got {type(t).__name__}")
            if dst != me and t is not None and t.numel():
                outgoing[dst] = t.detach().clone(memory_format=torch.contiguous_format)
        g._slots[me] = outgoing
        g.sync(me, "all_to_all", opening=True)
        received = [g._slots[src][me] if src != me else tensors[me] for src in range(g.world_size)]
        g.sync(me, "all_to_all (release)")
        g._slots[me] = None
        g.mark(me, "computing")
        return received

    # ------------------------------------------------------------ all_reduce
    def _all_reduce_impl(self, tensor):
        return self._guard("all_reduce", self._allreduce, tensor)

    def _allreduce(self, tensor):
        g, me, p = self.group, self.rank, self.group.world_size
        if not isinstance(tensor, torch.Tensor):
            raise CdfgnnError(f"all_reduce needs a tensor, got {type(tensor).__name__}")
        data = tensor.detach()
        g._slots[me] = data.contiguous()
        g.sync(me, "all_reduce", opening=True)
        inputs = g._slots
        for r in range(p):
            if inputs[r].shape != data.shape or inputs[r].dtype != data.dtype:
                raise CdfgnnError(
                    f"all_reduce: rank {r} passed {tuple(inputs[r].shape)} {inputs[r].dtype}, "
                    f"rank {me} passed {tuple(data.shape)} {data.dtype}; all ranks must agree")
        n = data.numel()
        lo, hi = n * me // p, n * (me + 1) // p
        acc = inputs[0].reshape(-1)[lo:hi].clone()
        for r in range(1, p):
            acc += inputs[r].reshape(-1)[lo:hi].to(acc.device)
        g._partials[me] = acc
        g.sync(me, "all_reduce (sum)")
        # Every input has been read: now each rank may overwrite its own tensor.
        total = torch.cat([part.to(data.device) for part in g._partials]) if p > 1 else acc
        data.copy_(total.view(data.shape))
        g.sync(me, "all_reduce (release)")
        g._slots[me] = g._partials[me] = None
        g.mark(me, "computing")
        return tensor

    # ------------------------------------------------------------- broadcast
    def _broadcast_impl(self, tensor, src):
        return self._guard("broadcast", self._bcast, tensor, src)

    def _bcast(self, tensor, src):
        g, me = self.group, self.rank
        if not isinstance(src, int) or not 0 <= src < g.world_size:
            raise CdfgnnError(f"broadcast src must be a rank in [0, {g.world_size}), got {src!r}")
        g._slots[me] = (src, tensor.detach())
        g.sync(me, "broadcast", opening=True)
        srcs = {s for s, _ in g._slots}
        if len(srcs) != 1:
            raise CdfgnnError(f"broadcast: ranks disagree on src ({sorted(srcs)})")
        root = g._slots[src][1]
        if me != src:
            if root.shape != tensor.shape or root.dtype != tensor.dtype:
                raise CdfgnnError(f"broadcast: root {src} sends {tuple(root.shape)} {root.dtype}, "
                                  f"rank {me} expects {tuple(tensor.shape)} {tensor.dtype}")
            tensor.detach().copy_(root)
        g.sync(me, "broadcast (release)")
        g._slots[me] = None
        g.mark(me, "computing")
        return tensor

    # ---------------------------------------------------- barrier, objects
    def _barrier_impl(self):
        self._guard("barrier", self._sync_only)

    def _sync_only(self):
        self.group.sync(self.rank, "barrier")
        self.group.mark(self.rank, "computing")

    def _all_gather_object_impl(self, obj):
        return self._guard("all_gather_object", self._gather, obj)

    def _gather(self, obj):
        g, me = self.group, self.rank
        g._slots[me] = obj
        g.sync(me, "all_gather_object", opening=True)
        out = [copy.deepcopy(o) for o in g._slots]
        g.sync(me, "all_gather_object (release)")
        g._slots[me] = None
        g.mark(me, "computing")
        return out
