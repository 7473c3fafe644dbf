"""Ranks started by ``torchrun`` (torch.distributed.run): one process per rank, any hosts.

``torchrun --nnodes H --nproc-per-node D -m cdfgnn.cli train ... [--launcher torchrun]``
starts ``H x D`` processes; each runs ``cdfgnn train`` as one rank instead of
launching its own (``--launcher auto``, the default, detects the environment
torchrun sets: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT). Each process:

* joins the process group from that environment (``init_method="env://"``): gloo
  on the CPU, nccl on cuda with device ``cuda:LOCAL_RANK``;
* takes the hosts x devices topology from the launcher: ``devices = LOCAL_WORLD_SIZE``,
  ``hosts = WORLD_SIZE / LOCAL_WORLD_SIZE``; ``--workers``/``--hosts`` and a
  ``--partition`` file must agree with it (a one-line error names both otherwise);
* loads the graph and the partitioning file itself (or receives rank 0's on-the-fly
  partitioning), trains its part with the same ``rank_main`` as the built-in
  process backend, and sends its per-rank result to every rank;
* rank 0 writes the run record (the others build it too but write nothing);
* from the rendezvous on (before loading and partitioning) beats a heartbeat through
  the job's store (:mod:`cdfgnn.comm.liveness`): a peer that has beaten, or a host,
  that goes silent for ``min(timeout_s, 10 s)`` (at least 3 s; link down,
  host down, process killed) ends the run on every surviving rank with one line
  naming it and exit code 1, instead of waiting for the collective timeout; no
  record is written. Rank 0's on-the-fly partitioning runs in a child process
  (:mod:`cdfgnn.partition.apart`), so a partitioner that holds the GIL does not stop
  its beat;
* on SIGTERM (torchrun's agent stops a host's ranks once one has failed) undoes what
  must not stay behind (:mod:`cdfgnn.exits`) and ends with exit code 143.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Callable, Mapping

import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.exits import end_on_sigterm
from cdfgnn.partition.base import Topology

#: what torchrun sets in every rank's environment
ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
            "MASTER_PORT")
LAUNCHERS = ("auto", "builtin", "torchrun")


def torchrun_env(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The torchrun variables when all of them are set, else None."""
    environ = os.environ if environ is None else environ
    if not all(k in environ for k in ENV_VARS):
        return None
    return {k: environ[k] for k in ENV_VARS}


def job_env(root: str | os.PathLike | None = None, **extra: str) -> dict[str, str]:
    """The environment for starting a new job from this process: this one without
    torchrun's variables (a rank's would leak into the job), ``root`` first on
    PYTHONPATH (a worktree's package wins), no progress bars, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    if root is not None:
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["CDFGNN_NO_PROGRESS"] = "1"
    return {**env, **extra}


def resolve_launcher(launcher: str, environ: Mapping[str, str] | None = None) -> str:
    """``builtin`` or ``torchrun`` (``auto``: torchrun when its environment is set)."""
    if launcher not in LAUNCHERS:
        raise CdfgnnError(f"unknown --launcher {launcher!r}; valid: {', '.join(LAUNCHERS)}")
    env = torchrun_env(environ)
    if launcher == "auto":
        return "torchrun" if env is not None else "builtin"
    if launcher == "torchrun" and env is None:
        environ = os.environ if environ is None else environ
        missing = [k for k in ENV_VARS if k not in environ]
        raise CdfgnnError(f"--launcher torchrun: {', '.join(missing)} not set; start the run "
                          "with `torchrun --nnodes H --nproc-per-node D -m cdfgnn.cli train ...`")
    return launcher


def env_topology(env: Mapping[str, str]) -> Topology:
    """hosts x devices from WORLD_SIZE and LOCAL_WORLD_SIZE."""
    try:
        world, local = int(env["WORLD_SIZE"]), int(env["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError):
        raise CdfgnnError("torchrun environment: WORLD_SIZE and LOCAL_WORLD_SIZE must be "
                          "integers") from None
    if local < 1 or world < 1 or world % local:
        raise CdfgnnError(f"torchrun environment: WORLD_SIZE {world} is not a multiple of "
                          f"LOCAL_WORLD_SIZE {local} (every host must run as many ranks)")
    return Topology(world // local, local)


def adopt_env(cfg, *, workers_given: bool, hosts_given: bool, backend_given: bool) -> None:
    """`cdfgnn train` under torchrun: workers, hosts and backend default to the launcher's."""
    env = torchrun_env()
    if env is None or resolve_launcher(cfg.launcher) != "torchrun":
        return
    topo = env_topology(env)
    if not workers_given:
        cfg.workers = topo.num_parts
        if not hosts_given:
            cfg.hosts = topo.hosts
    if not backend_given:
        cfg.backend = "process"


class TorchrunSession:
    """This process as one rank of a torchrun job (see the module docstring)."""

    def __init__(self, cfg, environ: Mapping[str, str] | None = None):
        import torch.distributed as dist

        from cdfgnn.comm.process import ProcessCommunicator

        env = torchrun_env(environ)
        if env is None:
            raise CdfgnnError("not started by torchrun: " + ", ".join(ENV_VARS) + " must be set")
        self.topology = env_topology(env)
        self.rank, self.local_rank = int(env["RANK"]), int(env["LOCAL_RANK"])
        world = self.topology.num_parts
        origin = (f"torchrun started {self.topology.hosts} host(s) x "
                  f"{self.topology.devices_per_host} rank(s) (WORLD_SIZE {world}, "
                  f"LOCAL_WORLD_SIZE {self.topology.devices_per_host})")
        if cfg.backend != "process":
            raise CdfgnnError(f"--backend {cfg.backend}: under torchrun every rank is a process; "
                              "use --backend process")
        if (cfg.workers, cfg.hosts) != (world, self.topology.hosts):
            src = f"--partition {cfg.partition_file}" if cfg.partition_file else "--workers/--hosts"
            raise CdfgnnError(f"{origin}, but {src} asks for {cfg.workers} worker(s) on "
                              f"{cfg.hosts} host(s) (h{cfg.hosts}x{cfg.workers // cfg.hosts})")
        if cfg.device == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
            backend = "nccl"
        else:
            device, backend = torch.device("cpu"), "gloo"
        self.device = device
        if not dist.is_initialized():
            dist.init_process_group(backend, init_method="env://", rank=self.rank,
                                    world_size=world, timeout=timedelta(seconds=cfg.timeout_s))
        self.comm = ProcessCommunicator(self.rank, world, self.topology, device=device)
        self.env, self.timeout_s = env, cfg.timeout_s
        self.heartbeat = None
        end_on_sigterm()
        self._start_heartbeat()

    def _start_heartbeat(self) -> None:
        """Beat from the rendezvous on (see cdfgnn.comm.liveness), through loading,
        partitioning (in a child process: pymetis holds the GIL for as long as it runs,
        42 s measured for 300k vertices) and setup."""
        from cdfgnn.comm.liveness import Heartbeat, lost_after

        if self.topology.num_parts == 1 or self.heartbeat is not None:
            return
        # one key space per job and restart, in the job's store (MASTER_ADDR:MASTER_PORT)
        job = os.environ.get("TORCHELASTIC_RUN_ID", "none")
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self.heartbeat = Heartbeat(self.rank, self.topology, self.env["MASTER_ADDR"],
                                   int(self.env["MASTER_PORT"]),
                                   f"cdfgnn/heartbeat/{job}/{restart}",
                                   lost_after(self.timeout_s)).start()
        self.comm.liveness = self.heartbeat

    @property
    def lead(self) -> bool:
        return self.rank == 0

    def from_lead(self, make: Callable[[], Any]) -> Any:
        """``make()`` on rank 0, its result on every rank (e.g. an on-the-fly partitioning);
        through the communicator, so a peer lost meanwhile is named."""
        return self.comm.broadcast_object(make() if self.lead else None, src=0)

    def run(self, fn: Callable[..., dict], *args) -> list[dict]:
        """``fn(comm, *args)`` as this rank; every rank's result, in rank order."""
        return self.comm.all_gather_object(fn(self.comm, *args))

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            self.comm.barrier()
            if self.heartbeat is not None:  # after the last collective every rank is done
                self.heartbeat.stop()
            dist.destroy_process_group()


def is_lead_process() -> bool:
    """False only in a torchrun rank other than 0 (it prints and writes nothing)."""
    env = torchrun_env()
    return env is None or int(env["RANK"]) == 0
