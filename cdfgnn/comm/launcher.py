"""Run ``fn(comm, *args)`` on every rank of a simulated cluster (docs/architecture.md).

``launch(fn, world_size, topology=..., backend="thread"|"process")`` returns the
per-rank return values in rank order, or raises
:class:`~cdfgnn.errors.WorkerFailedError` naming the rank that failed first and
chaining its original exception.

* ``thread``: one daemon thread per rank sharing a
  :class:`~cdfgnn.comm.thread.ThreadGroup`; ``torch.set_num_threads(1)`` for the
  process while the ranks run (restored afterwards). The first exception aborts
  the group so no rank blocks; a rank that hangs outside a collective makes the
  others' barrier time out after ``timeout_s`` and is named as the culprit (it
  cannot be killed: its thread is abandoned).
* ``process``: ``torch.multiprocessing.start_processes``, one process per rank; each sets
  ``torch.set_num_threads(1)``, joins the process group through a FileStore in a
  private temp dir (no port races) with ``timeout=timeout_s``, and writes its
  return value (``torch.save``) or its error (pickle) to that dir. ``fn`` and
  ``args`` must be picklable: module-level functions, not lambdas or closures.
  On cuda, rank r uses ``cuda:r`` and nccl (one GPU per rank, as nccl requires).

  Start method: ``forkserver`` by default (Linux, macOS), else ``spawn``. Both start
  ranks from a fresh interpreter, never by forking the caller (CUDA- and
  thread-safe). With forkserver the ranks fork from a server process that has
  imported torch once, started at the first launch of this Python process and kept
  for later launches: a launch at P=4 then costs ~0.1 s instead of several seconds
  of torch imports per rank (measured on the 2-core test box); the code the ranks run
  is preloaded too where its layer asks (:func:`preload_in_ranks`). Gotcha: the ranks
  inherit the server's environment variables, i.e. those of the first launch;
  ``sys.path`` and ``__main__`` are passed at every launch as with spawn. Use
  ``start_method="spawn"`` to pick up changed environment variables.

Root cause, not victims: when one rank fails, its peers fail too (aborted
collectives, broken connections). The launcher reports, in order of preference,
the earliest *primary* error (anything but a collective abort), a rank that died
without an error (``os._exit``, a signal), a collective timeout (naming the rank
that never arrived where it can be known), and only then a secondary error.

Liveness rule: once any rank has finished, the others get ``timeout_s`` more to
finish; after that the run fails naming the stragglers. ``world_size == 1`` runs
``fn`` in the calling thread on a one-rank ThreadCommunicator (no spawn, same
accounting) for both backends.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from typing import Any, Callable

import torch

from cdfgnn.comm.thread import ThreadGroup
from cdfgnn.errors import CollectiveAbortedError
from cdfgnn.errors import CdfgnnError, WorkerFailedError
from cdfgnn.partition.base import Topology

BACKENDS = ("thread", "process")
# After a failure, how long to wait for the other ranks to unwind before reporting; also
# the margin of the straggler backstop past the collectives' own timeout.
_UNWIND_GRACE_S = 2.0
_POLL_S = 0.1
_PRELOAD = ["__main__", "torch", "torch.distributed", "cdfgnn.comm.process", "cdfgnn.comm.launcher"]
#: modules the ranks run, added to the forkserver's preload (:func:`preload_in_ranks`)
_RANK_MODULES: list[str] = []
# Longest wait for all spawned ranks to start (before the collective timeout applies).
_STARTUP_S = 120.0


def launch(fn: Callable[..., Any], world_size: int, *, topology: Topology,
           backend: str = "thread", timeout_s: float = 300, args: tuple = (),
           device: str = "cpu", start_method: str | None = None) -> list:
    """Run ``fn(comm, *args)`` on ranks 0..world_size-1; return their results in rank order.

    ``start_method`` (process backend only): ``"forkserver"`` (default where the
    platform has it) or ``"spawn"``; see the module docstring.
    """
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise CdfgnnError(f"world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(topology, Topology) or topology.num_parts != world_size:
        raise CdfgnnError(f"topology {getattr(topology, 'label', topology)!r} does not have "
                          f"world_size={world_size} devices")
    if backend not in BACKENDS:
        raise CdfgnnError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise CdfgnnError(f"timeout_s must be a number > 0, got {timeout_s!r}")
    dev = _check_device(device, backend, world_size)
    if not isinstance(args, tuple):
        raise CdfgnnError(f"args must be a tuple, got {type(args).__name__}")
    methods = _start_methods()
    if start_method is None:
        start_method = methods[0]
    if start_method not in methods:
        raise CdfgnnError(f"start_method {start_method!r} not available; valid: {', '.join(methods)}")
    if world_size == 1 or backend == "thread":
        return _launch_threads(fn, world_size, topology, float(timeout_s), args, dev)
    return _launch_processes(fn, world_size, topology, float(timeout_s), args, dev, start_method)


def preload_in_ranks(module: str) -> None:
    """Have the forkserver import ``module`` once, before it forks ranks, instead of every
    rank importing it after the fork (the training code: 0.3 CPU-s per rank on the 2-core
    test box). Takes effect when the server starts, at this process's first process-backend
    launch; a module named later is imported by each rank, as without it."""
    if module not in _RANK_MODULES:
        _RANK_MODULES.append(module)


def _start_methods() -> tuple[str, ...]:
    available = multiprocessing.get_all_start_methods()
    return tuple(m for m in ("forkserver", "spawn") if m in available)


def _check_device(device, backend: str, world_size: int) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise CdfgnnError(f"bad device {device!r}; expected 'cpu' or 'cuda'") from None
    if dev.type not in ("cpu", "cuda"):
        raise CdfgnnError(f"device {device!r} not supported; expected 'cpu' or 'cuda'")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CdfgnnError(f"device {device!r} requested but CUDA is not available")
        if backend == "process" and world_size > 1 and world_size > torch.cuda.device_count():
            raise CdfgnnError(f"process backend on cuda needs one GPU per rank (nccl): "
                              f"world_size {world_size} > {torch.cuda.device_count()} GPUs; "
                              "use backend='thread' or device='cpu'")
        if dev.index is None and (backend == "thread" or world_size == 1):
            # Only for ranks that run in this process: the process backend's ranks pick
            # cuda:rank themselves, and current_device() would initialise CUDA here.
            dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _failure(rank: int, exc: BaseException, extra: str = "") -> WorkerFailedError:
    err = WorkerFailedError(f"rank {rank} failed: {type(exc).__name__}: {exc}{extra}")
    err.rank = rank
    return err


# ------------------------------------------------------------------- threads
def _launch_threads(fn, world_size, topology, timeout_s, args, device) -> list:
    group = ThreadGroup(world_size, topology, timeout_s)
    results: list = [None] * world_size
    finished = threading.Condition()
    done: list[int] = []

    def run(rank: int) -> None:
        try:
            comm = group.communicator(rank, device)
            results[rank] = fn(comm, *args)
            group.mark(rank, "returned from fn")
        except BaseException as exc:  # noqa: BLE001 - every failure must stop the run
            group.fail(rank, exc)
        finally:
            with finished:
                done.append(rank)
                finished.notify_all()

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if world_size == 1:
            run(0)  # fast path: no thread, same communicator and accounting
        else:
            threads = [threading.Thread(target=run, args=(r,), name=f"cdfgnn-rank{r}", daemon=True)
                       for r in range(world_size)]
            for t in threads:
                t.start()
            try:
                _wait_threads(group, finished, done, world_size, timeout_s)
            except BaseException as exc:  # e.g. KeyboardInterrupt: release the ranks, re-raise
                group.fail(-1, exc)
                raise
    finally:
        torch.set_num_threads(previous_threads)

    stragglers = [r for r in range(world_size) if r not in done]
    extra = f"; rank(s) {stragglers} still running, abandoned" if stragglers else ""
    if group.failure is not None:
        rank, exc = group.failure
        raise _failure(rank, exc, extra) from exc
    if stragglers:
        raise WorkerFailedError(f"rank(s) {stragglers} did not finish within "
                                f"{timeout_s + _UNWIND_GRACE_S:g} s after the first rank "
                                "returned")
    return results


def _wait_threads(group, finished, done, world_size, timeout_s) -> None:
    deadline = None
    with finished:
        while len(done) < world_size:
            now = time.monotonic()
            if group.failure is not None:
                # The run is lost; give the peers a moment to unwind, then report.
                limit = now + _UNWIND_GRACE_S if deadline is None else min(deadline, now + _UNWIND_GRACE_S)
                finished.wait_for(lambda: len(done) == world_size, timeout=limit - now)
                return
            if done and deadline is None:
                # a rank still inside a collective is reported by that collective's own
                # timeout (which names the rank that never came); this backstop, for a
                # rank stuck outside any collective, waits past it so the two never race
                deadline = now + timeout_s + _UNWIND_GRACE_S
            if deadline is not None and now >= deadline:
                return
            finished.wait(timeout=_POLL_S if deadline is None else min(_POLL_S, deadline - now))


# ----------------------------------------------------------------- processes
def _process_entry(rank, fn, args, world_size, topology, device, timeout_s, workdir):
    """Body of one spawned rank: init the group, run fn, save the result or the error."""
    import torch.distributed as dist

    from cdfgnn.comm.process import ProcessCommunicator

    torch.set_num_threads(1)
    try:
        if device.type == "cuda":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
        backend = "nccl" if device.type == "cuda" else "gloo"
        _rendezvous(workdir, rank, world_size, max(_STARTUP_S, timeout_s))
        dist.init_process_group(backend, init_method="file://" + os.path.join(workdir, "store"),
                                rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        comm = ProcessCommunicator(rank, world_size, topology, device=device)
        result = fn(comm, *args)
        _atomic_write(os.path.join(workdir, f"result{rank}.pt"), lambda f: torch.save(result, f))
        # A final barrier keeps every rank's group alive until all ranks are done with it.
        comm._barrier_impl()
        dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - report every failure to the parent
        record = {"time": time.time(), "rank": rank, "type": type(exc).__name__,
                  "message": str(exc), "traceback": traceback.format_exc(),
                  "secondary": isinstance(exc, CollectiveAbortedError)}
        try:
            record["exception"] = pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - unpicklable exceptions travel as text only
            record["exception"] = None
        _atomic_write(os.path.join(workdir, f"error{rank}.pkl"), lambda f: pickle.dump(record, f))
        sys.stderr.write(f"[cdfgnn rank {rank}] {record['type']}: {record['message']}\n")
        sys.stderr.flush()
        os._exit(1)  # skip interpreter teardown: a broken nccl/gloo group can hang it


def _rendezvous(workdir: str, rank: int, world_size: int, limit_s: float) -> None:
    """Wait until every rank has started, so start-up skew (importing torch on a busy
    machine) does not eat into the collective timeout of init_process_group."""
    open(os.path.join(workdir, f"ready{rank}"), "wb").close()
    deadline = time.monotonic() + limit_s
    while not all(os.path.exists(os.path.join(workdir, f"ready{r}")) for r in range(world_size)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not all {world_size} ranks started within {limit_s:g} s")
        time.sleep(0.02)


def _atomic_write(path: str, write) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


class _RemoteTraceback(Exception):
    """Carries the text of a traceback raised in a worker process."""

    def __str__(self) -> str:
        return self.args[0]


def _launch_processes(fn, world_size, topology, timeout_s, args, device, start_method) -> list:
    import torch.multiprocessing as mp

    # Check before spawning: a pickling error half-way through the spawn loop would
    # leave the ranks already started waiting in init_process_group.
    try:
        pickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001
        raise CdfgnnError(f"process backend needs a picklable, module-level fn; {fn!r} is not "
                          f"({exc})") from None
    try:
        pickle.dumps(args)
    except Exception as exc:  # noqa: BLE001
        raise CdfgnnError(f"process backend needs picklable args ({exc})") from None
    workdir = tempfile.mkdtemp(prefix="cdfgnn-launch-")
    try:
        if start_method == "forkserver":
            # Ranks fork from one server that has imported torch once (per parent process),
            # instead of each importing it again; "__main__" mirrors spawn's re-import.
            multiprocessing.get_context("forkserver").set_forkserver_preload(
                _PRELOAD + _RANK_MODULES)
        ctx = mp.start_processes(_process_entry, nprocs=world_size, join=False,
                                 start_method=start_method,
                                 args=(fn, args, world_size, topology, device, timeout_s, workdir))
        _join_processes(ctx, world_size, timeout_s, workdir)
        results = []
        for rank in range(world_size):
            path = os.path.join(workdir, f"result{rank}.pt")
            if not os.path.exists(path):
                raise WorkerFailedError(f"rank {rank} exited without returning a result")
            results.append(torch.load(path, weights_only=False))
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _join_processes(ctx, world_size, timeout_s, workdir) -> None:
    first_exit = None
    while True:
        try:
            if ctx.join(timeout=_POLL_S, grace_period=_UNWIND_GRACE_S):
                return
        except Exception as exc:  # ProcessRaisedException / ProcessExitedException
            # ctx.join gave the others _UNWIND_GRACE_S to write their errors, then killed them.
            err = _diagnose(ctx, workdir, getattr(exc, "error_index", None))
            raise err from err.__cause__
        now = time.monotonic()
        if first_exit is None and any(p.exitcode is not None for p in ctx.processes):
            first_exit = now
        if first_exit is not None and now - first_exit > timeout_s + _UNWIND_GRACE_S:
            alive = [r for r, p in enumerate(ctx.processes) if p.is_alive()]
            _kill(ctx.processes)
            raise WorkerFailedError(f"rank(s) {alive} did not finish within {timeout_s:g} s "
                                    "after the first rank returned")


def _kill(processes) -> None:
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()


def _diagnose(ctx, workdir, reported: int | None) -> WorkerFailedError:
    """Pick the root cause among the ranks' error files and exit codes."""
    _kill(ctx.processes)
    records = {}
    for rank in range(len(ctx.processes)):
        path = os.path.join(workdir, f"error{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                records[rank] = pickle.load(f)
    finished = {r for r in range(len(ctx.processes))
                if os.path.exists(os.path.join(workdir, f"result{r}.pt"))}
    terminated = -int(signal.SIGTERM)
    died = [r for r, p in enumerate(ctx.processes)
            if r not in records and r not in finished and p.exitcode not in (0, terminated, None)]
    killed = [r for r, p in enumerate(ctx.processes)
              if r not in records and r not in finished and p.exitcode == terminated]

    primary = sorted((rec["time"], r) for r, rec in records.items() if not rec["secondary"])
    if primary:
        return _from_record(records[primary[0][1]])
    if died:
        rank = reported if reported in died else died[0]
        code = ctx.processes[rank].exitcode
        how = (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
        err = WorkerFailedError(f"rank {rank} failed: process died ({how}) without an error")
        err.rank = rank
        return err
    if records:
        first = records[min(records, key=lambda r: records[r]["time"])]
        if killed:
            # Every error is a collective abort and some ranks were still busy: they are the
            # ones the others waited for (e.g. a hang), so name them.
            err = _from_record(first)
            err.args = (f"rank {killed[0]} failed: rank(s) {killed} never reached the collective "
                        f"their peers waited in (terminated after the peers failed); first peer "
                        f"error: {first['type']}: {first['message']}",)
            err.rank = killed[0]
            return err
        return _from_record(first)
    rank = reported if reported is not None else 0
    return WorkerFailedError(f"rank {rank} failed: exit code {ctx.processes[rank].exitcode}")


def _from_record(rec: dict, extra: str = "") -> WorkerFailedError:
    err = WorkerFailedError(f"rank {rec['rank']} failed: {rec['type']}: {rec['message']}{extra}")
    err.rank = rec["rank"]
    original = None
    if rec.get("exception") is not None:
        try:
            original = pickle.loads(rec["exception"])
        except Exception:  # noqa: BLE001 - e.g. the class is not importable in the parent
            original = None
    if original is None:
        original = RuntimeError(f"{rec['type']}: {rec['message']}")
    original.__cause__ = _RemoteTraceback(rec["traceback"])
    err.__cause__ = original
    return err

