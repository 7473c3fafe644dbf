"""``cdfgnn train`` with faults to inject, for the tests of lost ranks and hosts
(tests/test_lost_ranks.py, tests/test_multihost_netns.py): two more methods and one
more partitioner.

Run it as a script in place of ``-m cdfgnn.cli`` (``python tests/_fault_train.py train
... --method exact-fault --method-param fault=kill``, or as torchrun's training script):
the registrations run in every rank too (torchrun runs this script; the process
backend's forkserver and the partitioning child's spawn import ``__main__``).

Methods ``exact-fault`` (``exact``) and ``capgnn-fault`` (``capgnn``, whose shared tier
is a shared-memory file per host on the process backend) take a real fault on one rank.
Parameters: ``fault_rank``; ``fault_phase``: ``epoch`` (at the start of epoch
``fault_epoch``, 0-based: 2 is the third) or ``setup`` (in the method's setup, at the
rank's first barrier there: capgnn's shared segment is made and mapped, its creator's
descriptor still open; at the end of the setup when it has no barrier); ``fault`` says what:

* ``kill``: the rank writes ``fault_dir/killed`` (the wall time) and sends itself
  SIGKILL: it dies as a killed process does, mid-run, without a word;
* ``wait``: the rank writes ``fault_dir/reached`` and waits (at most 120 s) for
  ``fault_dir/go``, so the test can take a link down or kill a host meanwhile (its
  peers are blocked in their next collective).

Partitioner ``metis-hold`` (edge cut, ``metis``'s parts) writes ``fault_dir/reached``,
then holds the GIL for ``hold_s`` seconds in one C call (as pymetis does for a whole
partition of a large graph; the process's other threads cannot run meanwhile), then
partitions.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from cdfgnn.methods.base import METHODS, Param
from cdfgnn.methods.capgnn import Capgnn
from cdfgnn.methods.exact import Exact
from cdfgnn.partition.base import partitioner
from cdfgnn.partition.edgecut import metis

FAULT_PARAMS = {
    "fault": Param("kill", str, choices=("kill", "wait")),
    "fault_rank": Param(0, int),
    "fault_phase": Param("epoch", str, choices=("epoch", "setup")),
    "fault_epoch": Param(2, int),
    "fault_dir": Param(".", str),
}


def _write_now(path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(repr(time.time()))
    os.replace(tmp, path)


def fault(where: str, what: str) -> None:
    """Kill this process, or signal ``reached`` and wait for ``go`` (see the docstring)."""
    if what == "kill":
        _write_now(os.path.join(where, "killed"))
        os.kill(os.getpid(), signal.SIGKILL)
    _write_now(os.path.join(where, "reached"))
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(where, "go")) and time.monotonic() < deadline:
        time.sleep(0.05)


class WithFault:
    """A fault on one rank, in the setup or at the start of one epoch."""

    def _mine(self, phase: str) -> bool:
        return (self.params["fault_phase"] == phase
                and self.comm.rank == self.params["fault_rank"])

    def _fault(self) -> None:
        fault(self.params["fault_dir"], self.params["fault"])

    def setup(self, ctx) -> None:
        if not (self.params["fault_phase"] == "setup"
                and ctx.comm.rank == self.params["fault_rank"]):
            return super().setup(ctx)
        comm, done = ctx.comm, []
        barrier = comm.barrier

        def faulting_barrier() -> None:
            if not done:
                done.append(True)
                self._fault()
            barrier()

        comm.barrier = faulting_barrier
        try:
            super().setup(ctx)
        finally:
            del comm.barrier  # the instance attribute: the class's method again
        if not done:
            self._fault()

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        if self._mine("epoch") and epoch == self.params["fault_epoch"]:
            self._fault()


@METHODS.register("exact-fault")
class ExactWithFault(WithFault, Exact):
    name = "exact-fault"
    PARAMS = {**Exact.PARAMS, **FAULT_PARAMS}


@METHODS.register("capgnn-fault")
class CapgnnWithFault(WithFault, Capgnn):
    name = "capgnn-fault"
    PARAMS = {**Capgnn.PARAMS, **FAULT_PARAMS}


def hold_gil(seconds: int) -> None:
    """Block this process's Python threads for ``seconds``: libc's ``sleep`` called
    through ``PyDLL``, which keeps the GIL for the whole call (``CDLL`` would release it)."""
    sleep = ctypes.PyDLL(None).sleep
    sleep.argtypes = [ctypes.c_uint]
    sleep(int(seconds))


@partitioner("metis-hold", kind="edge")
def metis_hold(graph, topology, *, seed: int, fault_dir: str = ".", hold_s: int = 0,
               **params):
    """``metis`` after writing ``fault_dir/reached`` and holding the GIL ``hold_s`` s."""
    _write_now(os.path.join(fault_dir, "reached"))
    hold_gil(int(hold_s))
    return metis(graph, topology, seed=seed, **params)


if __name__ == "__main__":
    from cdfgnn.cli import main

    sys.exit(main())
