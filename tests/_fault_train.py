"""``cdfgnn train`` with one more method, ``exact-fault``: ``exact`` plus a real fault at
the start of one epoch on one rank, for the tests of lost ranks and hosts
(tests/test_lost_ranks.py, tests/test_multihost_netns.py).

Run it as a script in place of ``-m cdfgnn.cli`` (``python tests/_fault_train.py train
... --method exact-fault --method-param fault=kill``, or as torchrun's training script): the
registration runs in every rank too (torchrun runs this script; the process backend's
forkserver imports ``__main__``).

Parameters: ``fault_rank`` and ``fault_epoch`` (0-based: 2 is the third epoch) say where;
``fault`` says what:

* ``kill``: the rank writes ``fault_dir/killed`` (the wall time) and sends itself
  SIGKILL: it dies as a killed process does, mid-run, without a word;
* ``wait``: the rank writes ``fault_dir/reached`` and waits (at most 120 s) for
  ``fault_dir/go``, so the test can take a link down or kill a host while the run is
  inside that epoch (its peers are blocked in the epoch's first collective).
"""
from __future__ import annotations

import os
import signal
import sys
import time

from cdfgnn.methods.base import METHODS, Param
from cdfgnn.methods.exact import Exact


def _write_now(path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(repr(time.time()))
    os.replace(tmp, path)


@METHODS.register("exact-fault")
class ExactWithFault(Exact):
    name = "exact-fault"
    PARAMS = {
        "fault": Param("kill", str, choices=("kill", "wait")),
        "fault_rank": Param(0, int),
        "fault_epoch": Param(2, int),
        "fault_dir": Param(".", str),
    }

    def on_epoch_start(self, epoch: int) -> None:
        super().on_epoch_start(epoch)
        if epoch != self.params["fault_epoch"] or self.comm.rank != self.params["fault_rank"]:
            return
        where = self.params["fault_dir"]
        if self.params["fault"] == "kill":
            _write_now(os.path.join(where, "killed"))
            os.kill(os.getpid(), signal.SIGKILL)
        _write_now(os.path.join(where, "reached"))
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(where, "go")) and time.monotonic() < deadline:
            time.sleep(0.05)


if __name__ == "__main__":
    from cdfgnn.cli import main

    sys.exit(main())
