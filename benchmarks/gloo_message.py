"""What one gloo message of a halo exchange costs on this machine, measured.

The peers' full-batch exchange (PipeGCN's, BNS-GCN's, Sylvie's and Bajaj et al.'s
``__gloo_all_to_all``, e.g. zxmeng98/Sylvie@72572f6 helper/feature_buffer.py) posts, for
every other rank in ring order, an ``irecv`` from the left and an ``isend`` to the right,
then waits for all of them. This script runs that pattern between ``--ranks`` processes
over gloo on loopback, with CPU tensors (no GPU copy), and prints rank 0's time per
exchange divided by its messages: the software path of one message, which bounds
``msg_gloo_us`` in ``cdfgnn/pricing/efficiency.py`` (``FIT_BOUNDS``; docs/time-model.md).

    python benchmarks/gloo_message.py [--ranks 2 4] [--bytes 64 65536] [--exchanges 2000]

It prints microseconds of wall time per message, measured here (a loaded machine reads
higher); docs/results.md ("A tenth change", "An eleventh check") keeps the runs.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time


def _rank(rank: int, size: int, store: str, floats: int, exchanges: int, out) -> None:
    import torch
    import torch.distributed as dist
    # a file store, as the engine's launcher uses (no port to find free)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=size)
    try:
        torch.set_num_threads(1)
        send = [torch.zeros(floats) for _ in range(size)]
        recv = [torch.zeros(floats) for _ in range(size)]

        def exchange(tag: int) -> None:
            reqs = []
            for i in range(1, size):
                left, right = (rank - i) % size, (rank + i) % size
                reqs.append(dist.irecv(recv[left], src=left, tag=tag))
                reqs.append(dist.isend(send[right], dst=right, tag=tag))
            for r in reqs:
                r.wait()

        for t in range(50):                       # warm-up: connections, buffers
            exchange(t)
        dist.barrier()
        t0 = time.perf_counter()
        for t in range(exchanges):
            exchange(50 + t)
        seconds = time.perf_counter() - t0
        if rank == 0:
            out.put(seconds / exchanges / (size - 1))
    finally:
        dist.destroy_process_group()


def per_message_seconds(ranks: int, nbytes: int, exchanges: int) -> float:
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_rank, args=(r, ranks, os.path.join(tmp, "store"),
                                                 max(nbytes // 4, 1), exchanges, out))
                 for r in range(ranks)]
        for p in procs:
            p.start()
        for p in procs:                       # rank 0's one float is queued before it exits
            p.join(timeout=600)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if any(p.exitcode for p in procs) or out.empty():
        raise SystemExit(f"gloo_message: ranks exited with {[p.exitcode for p in procs]}")
    return out.get()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--bytes", type=int, nargs="+", default=[64, 65536])
    ap.add_argument("--exchanges", type=int, default=2000)
    args = ap.parse_args(argv)
    if min(args.ranks) < 2 or min(args.bytes) < 1 or args.exchanges < 1:
        ap.error("--ranks >= 2, --bytes >= 1 and --exchanges >= 1")
    print(f"{'ranks':>5} {'bytes':>8} {'us per message':>15}   (measured here, {os.cpu_count()} "
          f"cores, gloo on loopback, CPU tensors)")
    for ranks in args.ranks:
        for nbytes in args.bytes:
            us = per_message_seconds(ranks, nbytes, args.exchanges) * 1e6
            print(f"{ranks:>5} {nbytes:>8} {us:>15.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
