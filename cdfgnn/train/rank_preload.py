"""What the process backend's ranks would each load first, loaded once by the forkserver
they fork from (:func:`cdfgnn.comm.launcher.preload_in_ranks`): the training code, and
numba's CPU target with the dropout kernels, which numba sets up on a process's first
kernel (0.4 CPU-s; with the training code's imports 0.7 CPU-s per rank on the 2-core
test box). No torch operation runs here: the forkserver forks after it."""
from cdfgnn.models.dropout import warm_up
from cdfgnn.train import worker  # noqa: F401  (the ranks run worker.rank_main)

warm_up()
