"""Every registered method across two hosts, against the same run on one machine.

For each method the package registers (full-batch and sampled tracks), two runs of the
same configuration (a small twin, synth-arxiv at scale small by default, GCN, 3 epochs,
2 hosts x 2 ranks, network profile ``veth-1gbit``, each method with its own partitioner
or metis / ebv by partition kind):

* **two hosts**: two network namespaces joined by a veth pair shaped by ``tc tbf`` to
  1 Gbit/s (:mod:`cdfgnn.comm.netns`), one ``torchrun`` node per namespace (2 ranks
  each, c10d rendezvous hosted by node 0, gloo over the veth);
* **one machine**: ``cdfgnn train --backend process --workers 4 --hosts 2`` (the built-in
  launcher, gloo over loopback), all methods in one child process.

A method is *equal to its one-machine run* when every epoch's loss agrees within
``TOL`` = 1e-6 and the per-tag bytes of the records (``comm.by_tag``: the mean bytes per
timed epoch of each tag, summed over ranks) are the same tags with equal bytes, and so
is every epoch's traffic (``comm.epochs``: bytes per link class and vertex rows per
tag, warm-up epochs included). ``LEFT_OUT`` may name at most 3 methods not compared,
each with what differs; it names none.

Exchange time, measured against the network model, two ways:

* within training: the seconds a rank spends in its collectives per timed epoch
  (vertex rows or pulls, and the gradient all-reduce; mean over ranks), on two hosts
  and on one machine, against the model's ``modelled_comm_s`` for the same counted
  bytes on ``veth-1gbit``; the measured time includes waiting for the slowest peer;
* alone: each method's bytes per timed epoch, spread evenly over the rank pairs of
  each link class, exchanged by one ``all_to_all`` between barriers on the two hosts
  (median of 5, slowest rank; one torchrun job for all methods), against the model's
  time for the same bytes (``--no-probe`` skips it). The model gives each rank the link
  to itself, while a host's two ranks share the veth.

The last line is exactly ``multi-host: N of M methods equal to their one-machine runs``
(M: the methods asked for, left-out ones included). Exit code 0 when every method run
is equal, 1 otherwise, 2 when namespaces cannot be made here (needs root, ``ip`` and
``tc``; one line says which). Namespaces, veth pairs and every process started are
removed on every way out (normal end, error, Ctrl-C, SIGTERM, a run past
``--run-timeout``); namespaces left by a run killed with SIGKILL are swept at start.

Usage: python benchmarks/multihost.py [--only NAME ...] [--dataset synth-arxiv]
       [--scale small] [--hidden 16] [--epochs 3] [--run-timeout 300] [--no-probe]
       [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, also in the ranks (PYTHONPATH)

from cdfgnn.comm import netns  # noqa: E402

TOL = 1e-6
NETWORK = "veth-1gbit"
#: one partitioner per partition kind, unless the method names its own
PARTITIONER = {"edge": "metis", "vertex": "ebv", None: "metis"}
#: methods not compared, with what differs between the two runs (at most 3); none so far
LEFT_OUT: dict[str, str] = {}


def registered() -> list[str]:
    """The package's own methods (tests and users may register more)."""
    import cdfgnn.methods  # noqa: F401  (registers them)
    from cdfgnn.methods.base import METHODS

    return [n for n in METHODS.names()
            if METHODS.get(n).__module__.startswith("cdfgnn.methods.")]


def method_args(name: str) -> list[str]:
    from cdfgnn.methods.base import METHODS

    cls = METHODS.get(name)
    return ["--method", name,
            "--partitioner", cls.default_partitioner or PARTITIONER[cls.partition_kind]]


def train_args(name: str, run: dict, out: Path, timeout_s: float) -> list[str]:
    """`cdfgnn train` arguments of ``name``'s run (both sides take the same ones)."""
    args = ["train", *method_args(name), "--network", NETWORK, "--timeout", f"{timeout_s:g}",
            "--out", str(out)]
    for key, value in run.items():
        args += [f"--{key}", str(value)]
    return args


# ------------------------------------------------------------------- one machine
def reference_main(folder: Path, run: dict, timeout_s: float, names: list[str]) -> int:
    """The child's work: every method on the built-in process backend, 2 hosts x 2, in
    this process (one torch import, one forkserver); ``<name>.one.json`` for each run
    that completes, ``<name>.one.err`` for each that does not."""
    from cdfgnn.cli import main

    for name in names:
        out = folder / f"{name}.one.json"
        argv = [*train_args(name, run, out, timeout_s), "--backend", "process",
                "--workers", "4", "--hosts", "2", "--launcher", "builtin"]
        try:
            code = main(argv)
        except Exception as exc:  # noqa: BLE001 - reported as that method's failure
            code = f"{type(exc).__name__}: {exc}"
        if code != 0 or not out.exists():
            (folder / f"{name}.one.err").write_text(f"exit {code}")
        print(f"one machine: {name} done", flush=True)
    return 0


@contextmanager
def own_group(cmd: list[str], log: Path, env: dict) -> Iterator[subprocess.Popen]:
    """``cmd`` in a session of its own; its whole process group is killed on the way out."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        yield proc
    finally:
        with netns.signals_held():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def run_references(names: list[str], folder: Path, run: dict, timeout_s: float,
                   env: dict) -> None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--reference", str(folder),
           "--run-timeout", f"{timeout_s:g}", *_run_flags(run), "--only", *names]
    with own_group(cmd, folder / "one-machine.log", env) as proc:
        try:
            proc.wait(timeout=timeout_s * len(names) + 60)
        except subprocess.TimeoutExpired:  # the runs without a record are reported failed
            pass


def _run_flags(run: dict) -> list[str]:
    return ["--dataset", run["dataset"], "--scale", str(run["scale"]),
            "--hidden", str(run["hidden"]), "--epochs", str(run["epochs"]),
            "--warmup", str(run["warmup"])]


# --------------------------------------------------------------------- two hosts
def two_host_run(name: str, folder: Path, run: dict, timeout_s: float, rate: str,
                 env: dict) -> tuple[dict | None, str]:
    """``name`` on two namespaced hosts; (record, '') or (None, why it has none)."""
    out = folder / f"{name}.two.json"
    script = ["-m", "cdfgnn.cli", *train_args(name, run, out, timeout_s),
              "--launcher", "torchrun"]
    logs = [folder / f"{name}.host{h}" for h in (0, 1)]
    with netns.two_hosts(rate) as hosts:
        procs = [hosts.torchrun(h, script, name, logs[h], env) for h in (0, 1)]
        deadline = time.monotonic() + timeout_s
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                return None, f"timed out after {timeout_s:g} s"
    codes = [p.returncode for p in procs]
    if codes != [0, 0] or not out.exists():
        err = [ln for h in (0, 1) for ln in logs[h].with_suffix(".err").read_text(
            errors="replace").splitlines() if ln.startswith("cdfgnn: error")]
        return None, f"exit codes {codes}: {(err or ['no error line'])[0][:200]}"
    return json.loads(out.read_text()), ""


# ------------------------------------------------------- the exchange alone, timed
PROBE_REPS = 5


def probe_sizes(rec: dict, rank: int, dph: int = 2) -> list[int]:
    """Bytes ``rank`` sends each peer in a probe of ``rec``'s traffic: the record's bytes
    per timed epoch of each link class (summed over ranks), spread evenly over the ordered
    rank pairs of that class."""
    world = len(rec["ranks"])
    per = rec["comm"]["per_epoch"]
    pairs = {"intra": world * (dph - 1), "inter": world * (world - dph)}

    def link(peer: int) -> str:
        return "intra" if peer // dph == rank // dph else "inter"

    return [0 if peer == rank else int(per[link(peer)]["bytes"] / max(pairs[link(peer)], 1))
            for peer in range(world)]


def probe_main(spec_path: Path, out_path: Path) -> int:
    """A torchrun rank: every volume of ``spec_path`` exchanged by one ``all_to_all``
    between barriers, ``PROBE_REPS`` times; rank 0 writes the slowest rank's seconds."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from cdfgnn.comm.process import ProcessCommunicator
    from cdfgnn.partition.base import Topology

    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = ProcessCommunicator(rank, world, Topology(2, world // 2))
    out = {}
    for name, sizes in json.loads(spec_path.read_text()).items():
        send = [torch.ones(n, dtype=torch.uint8) if n else None for n in sizes[rank]]
        times = []
        for _ in range(PROBE_REPS):
            comm.barrier()
            t0 = time.perf_counter()
            comm.all_to_all(send, tag="probe")
            times.append(time.perf_counter() - t0)
        every = comm.all_gather_object(times)
        out[name] = [max(t[i] for t in every) for i in range(PROBE_REPS)]
    comm.barrier()
    dist.destroy_process_group()
    if rank == 0:
        out_path.write_text(json.dumps(out))
    return 0


def run_probe(records: dict[str, dict], folder: Path, rate: str, env: dict,
              timeout_s: float) -> dict[str, tuple[float, float]] | str:
    """Per method (measured, modelled) seconds of its exchange alone on two hosts; or why
    there are none. Modelled: the slowest rank's time on ``NETWORK`` for its sizes (one
    message per peer)."""
    import numpy as np

    from cdfgnn.comm.network import NetworkModel
    from cdfgnn.partition.base import Topology

    spec = {n: [probe_sizes(rec, r) for r in range(len(rec["ranks"]))]
            for n, rec in records.items()}
    (folder / "probe.json").write_text(json.dumps(spec))
    out = folder / "probe.out.json"
    script = [str(Path(__file__).resolve()), "--probe", str(folder / "probe.json"),
              "--probe-out", str(out)]
    logs = [folder / f"probe.host{h}" for h in (0, 1)]
    with netns.two_hosts(rate) as hosts:
        procs = [hosts.torchrun(h, script, "probe", logs[h], env) for h in (0, 1)]
        deadline = time.monotonic() + timeout_s
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                return f"timed out after {timeout_s:g} s"
    if not out.exists():
        return f"exit codes {[p.returncode for p in procs]} (see {logs[0]}.err)"
    measured = json.loads(out.read_text())
    model = NetworkModel(Topology(2, 2), NETWORK)
    result = {}
    for name, sizes in spec.items():
        modelled = max(model.comm_seconds(r, np.asarray(b, dtype=float),
                                          np.asarray([1.0 if x else 0.0 for x in b]))
                       for r, b in enumerate(sizes))
        result[name] = (float(np.median(measured[name])), modelled)
    return result


# ------------------------------------------------------------------- comparison
def compare(one: dict, two: dict) -> dict:
    """Loss difference, per-tag bytes, cross-host bytes and exchange times of a pair."""
    la = [e["loss"] for e in one["epochs"]]
    lb = [e["loss"] for e in two["epochs"]]
    dloss = max((abs(a - b) for a, b in zip(la, lb)), default=float("inf"))
    if len(la) != len(lb):
        dloss = float("inf")
    ta, tb = one["comm"]["by_tag"], two["comm"]["by_tag"]
    differing = sorted(t for t in set(ta) | set(tb)
                       if ta.get(t, {}).get("bytes") != tb.get(t, {}).get("bytes"))
    # every epoch, warm-up included: bytes per link class and vertex rows per tag
    epochs_equal = one["comm"].get("epochs") == two["comm"].get("epochs")

    def comm_ms(rec: dict) -> float:  # mean over ranks of measured collective seconds
        ranks = rec["ranks"]
        return 1e3 * sum(r["comm_s"] + r.get("reduce_s", 0.0) for r in ranks) / len(ranks)

    modelled = 1e3 * sum(r["modelled_comm_s"] for r in two["ranks"]) / len(two["ranks"])
    return {"dloss": dloss, "tags": len(set(ta) | set(tb)), "differing": differing,
            "epochs_equal": epochs_equal,
            "equal": dloss <= TOL and not differing and epochs_equal,
            "inter_mb": two["comm"]["per_epoch"]["inter"]["bytes"] / 1e6,
            "two_ms": comm_ms(two), "one_ms": comm_ms(one), "model_ms": modelled}


def _row(name: str, track: str, c: dict | None, why: str = "") -> str:
    if c is None:
        return f"{name:16s} {track:10s} {'no':5s} {why}"
    tags = f"{c['tags'] - len(c['differing'])}/{c['tags']}"
    line = (f"{name:16s} {track:10s} {'yes' if c['equal'] else 'no':5s} {c['dloss']:11.2e} "
            f"{tags:>7s} {'yes' if c['epochs_equal'] else 'no':>6s} {c['inter_mb']:9.3f} "
            f"{c['two_ms']:9.1f} {c['one_ms']:9.1f} {c['model_ms']:9.2f}")
    if c["differing"]:
        line += f"  bytes differ: {', '.join(c['differing'][:4])}"
    return line


def print_probe(probe: dict[str, tuple[float, float]]) -> None:
    print(f"each method's exchange alone on two hosts: its bytes per timed epoch spread evenly "
          f"over the rank pairs of each link class, one all_to_all between barriers, median "
          f"of {PROBE_REPS} (slowest rank), against {NETWORK} for the same bytes")
    print(f"{'method':16s} {'measured ms':>11s} {'model ms':>9s} {'ratio':>6s}")
    for name, (meas, mod) in probe.items():
        print(f"{name:16s} {meas * 1e3:11.2f} {mod * 1e3:9.2f} "
              f"{meas / mod if mod > 0 else float('nan'):6.2f}")
    meas, mod = (sum(v[i] for v in probe.values()) for i in (0, 1))
    print(f"exchange alone, {len(probe)} methods summed: measured {meas * 1e3:.1f} ms, "
          f"modelled {mod * 1e3:.1f} ms, ratio {meas / mod:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", help="these methods only (default: every one)")
    ap.add_argument("--dataset", default="synth-arxiv")
    ap.add_argument("--scale", default="small")
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rate", default="1gbit", help="tc tbf rate of the veth pair")
    ap.add_argument("--run-timeout", type=float, default=300.0,
                    help="seconds one run may take (and the runs' collective timeout)")
    ap.add_argument("--keep", type=Path, help="keep records and logs in this folder")
    ap.add_argument("--no-probe", action="store_true",
                    help="skip timing each method's exchange alone on two hosts")
    ap.add_argument("--reference", type=Path, help=argparse.SUPPRESS)  # the child's mode
    ap.add_argument("--probe", type=Path, help=argparse.SUPPRESS)      # a probe rank's mode
    ap.add_argument("--probe-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe is not None:
        return probe_main(args.probe, args.probe_out)
    run = {"dataset": args.dataset, "scale": args.scale, "hidden": args.hidden,
           "epochs": args.epochs, "warmup": args.warmup}
    if args.reference is not None:
        return reference_main(args.reference, run, args.run_timeout, args.only)

    reason = netns.unavailable()
    if reason:
        print(f"multihost: cannot make two hosts here: {reason}", file=sys.stderr)
        return 2
    all_names = registered()
    names = [n for n in (args.only or all_names)]
    unknown = [n for n in names if n not in all_names]
    if unknown:
        print(f"multihost: --only {' '.join(unknown)}: not a registered method; valid: "
              f"{', '.join(all_names)}", file=sys.stderr)
        return 2
    from cdfgnn.methods.base import METHODS
    from cdfgnn.train.torchrun import job_env

    env = job_env(ROOT, OMP_NUM_THREADS="1")
    swept = netns.sweep_stale()
    if swept:
        print(f"removed {len(swept)} namespace(s) left by a killed run: {', '.join(swept)}")
    folder = Path(tempfile.mkdtemp(prefix="cdfgnn-multihost-")) if args.keep is None else args.keep
    folder.mkdir(parents=True, exist_ok=True)
    equal, ran, pairs, records, probe = 0, 0, [], {}, None
    try:
        with netns.terminate_raises():
            run_names = [n for n in names if n not in LEFT_OUT]
            t0 = time.monotonic()
            run_references(run_names, folder, run, args.run_timeout, env)
            print(f"{args.dataset} ({args.scale}), GCN, h2x2, {args.epochs} epochs; one machine: "
                  f"{len(run_names)} runs in {time.monotonic() - t0:.0f} s")
            print(f"{'method':16s} {'track':10s} {'equal':5s} {'max|dloss|':>11s} {'tags=':>7s} "
                  f"{'epochs':>6s} {'inter MB':>9s} {'2-host ms':>9s} {'1-mach ms':>9s} "
                  f"{'model ms':>9s}")
            for name in names:
                track = METHODS.get(name).track
                if name in LEFT_OUT:
                    print(f"{name:16s} {track:10s} left out: {LEFT_OUT[name]}", flush=True)
                    continue
                ran += 1
                one_path = folder / f"{name}.one.json"
                if not one_path.exists():
                    print(_row(name, track, None, "the one-machine run failed (see "
                               f"{folder / 'one-machine.log'})"), flush=True)
                    continue
                two, why = two_host_run(name, folder, run, args.run_timeout, args.rate, env)
                if two is None:
                    print(_row(name, track, None, f"two hosts: {why}"), flush=True)
                    continue
                c = compare(json.loads(one_path.read_text()), two)
                equal += c["equal"]
                pairs.append(c)
                records[name] = two
                print(_row(name, track, c), flush=True)
            probe = (run_probe(records, folder, args.rate, env, args.run_timeout)
                     if records and not args.no_probe else None)
    except KeyboardInterrupt:
        print("multihost: interrupted (namespaces and processes removed)", file=sys.stderr)
        return 130
    except netns.Terminated as exc:
        print(f"multihost: {exc} (namespaces and processes removed)", file=sys.stderr)
        return 128 + exc.signum
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print("tags=: tags whose bytes per timed epoch are equal / tags; epochs: every epoch's "
          "traffic equal; inter MB: cross-host bytes per timed epoch; ms: a rank's "
          "collective seconds per timed epoch (mean over ranks), measured on two hosts and "
          f"on one machine, and modelled on {NETWORK} for the counted bytes")
    if pairs:
        two_ms, one_ms, model_ms = (sum(c[k] for c in pairs) for k in
                                    ("two_ms", "one_ms", "model_ms"))
        print(f"exchange time, {len(pairs)} methods summed: measured {two_ms:.1f} ms on two "
              f"hosts, {one_ms:.1f} ms on one machine; modelled {model_ms:.1f} ms; measured "
              f"over modelled {two_ms / model_ms:.1f} (two hosts), {one_ms / model_ms:.1f} "
              "(one machine)")
    if isinstance(probe, str):
        print(f"exchange alone: no measurement: {probe}")
    elif probe:
        print_probe(probe)
    print(f"multi-host: {equal} of {len(names)} methods "
          "equal to their one-machine runs")
    return 0 if equal == ran else 1


if __name__ == "__main__":
    sys.exit(main())
