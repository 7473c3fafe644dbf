"""A process-backend run that fails inside its ranks ends cleanly: the error names the
rank and its cause, and Python's resource tracker finds nothing leaked (the ranks leave
by ``os._exit`` or SIGTERM, so anything they register with it, such as the named
semaphore of tqdm's default multiprocessing lock, would be reported at shutdown)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# the method is defined in the script, so the ranks (which re-import it as
# __mp_main__) register it too
SCRIPT = '''
import sys

from cdfgnn.errors import WorkerFailedError
from cdfgnn.methods.base import METHODS, SyncStrategy


class FailsInEpoch0(SyncStrategy):
    name = "test-fails-in-epoch-0"

    def on_epoch_start(self, epoch):
        super().on_epoch_start(epoch)
        raise RuntimeError("simulated failure in epoch 0")


if FailsInEpoch0.name not in METHODS:
    METHODS.register(FailsInEpoch0.name)(FailsInEpoch0)

if __name__ == "__main__":
    from cdfgnn.train.config import TrainConfig
    from cdfgnn.train.run import run_training
    cfg = TrainConfig(dataset=None, graph=sys.argv[1], workers=2, backend="process",
                      epochs=2, hidden=8, method=FailsInEpoch0.name, timeout_s=120)
    try:
        run_training(cfg)
    except WorkerFailedError as exc:
        print("run failed:", exc)
        sys.exit(1)
'''


def test_failing_process_run_leaks_no_semaphore(tmp_path, small_graph):
    graph = tmp_path / "g.npz"
    small_graph.save(graph)
    script = tmp_path / "fail_run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script), str(graph)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "RuntimeError: simulated failure in epoch 0" in proc.stdout
    assert "resource_tracker" not in proc.stderr, proc.stderr
    assert "leaked" not in proc.stderr, proc.stderr
