"""Two hosts on one machine: network namespaces joined by a shaped veth pair.

:class:`TwoHosts` builds two network namespaces (``cdfgnn-<tag>-a`` / ``-b``) joined by
a veth pair whose addresses, 198.18.0.1 and 198.18.0.2 on a /30, come from the range
reserved for network benchmark tests (RFC 2544) and exist only inside the two
namespaces; each end's egress is shaped by ``tc tbf`` (1 Gbit/s by default; ``netem`` is
not available everywhere, so no latency is added). A fresh namespace has no route but
that /30 and its own loopback, so nothing started in it can reach any other address.
:meth:`TwoHosts.torchrun` starts node ``host`` of a ``2 x nproc`` torchrun job in a
namespace (c10d rendezvous hosted by node 0, gloo bound to the veth with
``GLOO_SOCKET_IFNAME``). The network model's ``veth-1gbit`` profile
(:mod:`cdfgnn.comm.network`) describes this link.

Clean-up: :func:`two_hosts` deletes both namespaces (and so the veth pair) and kills
every process left in them on every way out of its ``with`` block: a normal end, an
exception, Ctrl-C, and SIGTERM or SIGHUP (turned into :class:`Terminated` while the block
runs, in the main thread); signals are held back while it cleans up. A process killed
with SIGKILL cannot clean up: :func:`sweep_stale` deletes the namespaces of a dead owner
(the tag starts with the owner's pid). Used by tests/test_multihost_netns.py,
tests/test_lost_ranks.py and benchmarks/multihost.py; needs root, ``ip`` and ``tc``
(iproute2): :func:`unavailable` says why not in one line.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

ADDRS = ("198.18.0.1", "198.18.0.2")     # RFC 2544 benchmark range, inside the namespaces only
RDZV_PORT = 29400                         # free: each namespace has its own port space
PREFIX = "cdfgnn-"                         # every namespace this module makes starts so
IFACE_DIGITS = 10                          # cdf + 10 hex digits + a|b: 14 characters
_IFACE = re.compile(rf"cdf[0-9a-f]{{{IFACE_DIGITS}}}[ab]")
_serial = itertools.count()


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived inside :func:`two_hosts` (a BaseException, like Ctrl-C's
    KeyboardInterrupt, so that ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (one line), or None."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (`ip` and `tc`)"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "needs root to create network namespaces"
    return None


def namespaces() -> list[str]:
    """The network namespaces this module made that exist now."""
    res = _ip("netns", "list")
    return [w for w in res.stdout.split() if w.startswith(PREFIX)] if res.returncode == 0 else []


def links() -> list[str]:
    """Interfaces of the root namespace named as this module names its veth ends."""
    res = _ip("-o", "link", "show")
    names = [line.split(":")[1].strip().split("@")[0] for line in res.stdout.splitlines()
             if line.count(":") >= 2]
    return [n for n in names if _IFACE.fullmatch(n)]


class TwoHosts:
    """Two namespaced hosts joined by a veth pair shaped to ``rate`` (see the module
    docstring). ``tag`` (default ``<pid>-<n>``) names the namespaces and interfaces."""

    def __init__(self, tag: str | None = None, rate: str = "1gbit"):
        self.tag = tag or f"{os.getpid()}-{next(_serial)}"
        self.rate = rate

    @property
    def netns(self) -> tuple[str, str]:
        return (f"{PREFIX}{self.tag}-a", f"{PREFIX}{self.tag}-b")

    @property
    def ifaces(self) -> tuple[str, str]:
        """The veth ends: at most 15 characters (the kernel's limit), whatever the tag."""
        short = hashlib.sha1(self.tag.encode()).hexdigest()[:IFACE_DIGITS]
        return (f"cdf{short}a", f"cdf{short}b")

    def build(self) -> None:
        """Make both namespaces, the veth pair, the addresses and the shaping; OSError
        naming the failed step."""
        (a, b), (va, vb) = self.netns, self.ifaces
        steps = [("netns", "add", a), ("netns", "add", b),
                 ("link", "add", va, "type", "veth", "peer", "name", vb),
                 ("link", "set", va, "netns", a), ("link", "set", vb, "netns", b)]
        for ns, dev, addr in ((a, va, ADDRS[0]), (b, vb, ADDRS[1])):
            steps += [("-n", ns, "addr", "add", f"{addr}/30", "dev", dev),
                      ("-n", ns, "link", "set", "lo", "up"),
                      ("-n", ns, "link", "set", dev, "up")]
        for step in steps:
            res = _ip(*step)
            if res.returncode:
                raise OSError(f"ip {' '.join(step)}: {res.stderr.strip()}")
        for ns, dev in ((a, va), (b, vb)):
            res = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
                                  "rate", self.rate, "burst", "256kb", "latency", "50ms"],
                                 capture_output=True, text=True, timeout=30)
            if res.returncode:
                raise OSError(f"tc qdisc add ... tbf on {dev}: {res.stderr.strip()}")

    def routes(self, host: int) -> list[str]:
        return _ip("-n", self.netns[host], "route", "show").stdout.strip().splitlines()

    def pids(self, host: int) -> list[int]:
        """Every process whose network namespace is ``host``'s."""
        res = _ip("netns", "pids", self.netns[host])
        return [int(p) for p in res.stdout.split()] if res.returncode == 0 else []

    def link_down(self) -> None:
        res = _ip("-n", self.netns[0], "link", "set", self.ifaces[0], "down")
        if res.returncode:
            raise OSError(f"ip link set {self.ifaces[0]} down: {res.stderr.strip()}")

    def kill(self, host: int) -> None:
        """SIGKILL every process of ``host`` (a host that loses its power)."""
        for pid in self.pids(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def destroy(self) -> None:
        """Kill every process in both namespaces, then delete them (and the veth pair)."""
        for host in (0, 1):
            self.kill(host)
        deadline = time.monotonic() + 10
        while any(self.pids(h) for h in (0, 1)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for ns in self.netns:
            _ip("netns", "del", ns)  # deletes the veth end inside it, and so its peer
        for dev in self.ifaces:      # an end never moved into a namespace
            if _ip("link", "show", dev).returncode == 0:
                _ip("link", "del", dev)

    def exists(self) -> bool:
        """Is any part of this pair (a namespace, an interface) still there?"""
        return bool(set(self.netns) & set(namespaces())) or bool(
            set(self.ifaces) & set(links()))

    def torchrun_command(self, host: int, script: list[str], run_id: str, log_dir: Path,
                         nproc: int = 2) -> list[str]:
        """Node ``host`` of a ``2 x nproc`` torchrun job; node 0 hosts the c10d rendezvous.
        ``log_dir``: torchrun's own folder (its workers' error files), which it otherwise
        makes in the temporary directory (``torchelastic_*``) and never removes."""
        return ["ip", "netns", "exec", self.netns[host], sys.executable, "-m",
                "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", str(nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{ADDRS[0]}:{RDZV_PORT}",
                "--rdzv-id", run_id,
                "--rdzv-conf", f"is_host={int(host == 0)},join_timeout=120",
                # --local-addr: the node's address in the rendezvous (node ranks sort by it)
                "--local-addr", ADDRS[host], "--max-restarts", "0",
                "--monitor-interval", "0.2", "--log-dir", str(log_dir), *script]

    def torchrun(self, host: int, script: list[str], run_id: str, log: Path,
                 env: Mapping[str, str], nproc: int = 2) -> subprocess.Popen:
        """Start node ``host`` (see :meth:`torchrun_command`) with ``env`` plus gloo's
        interface, stdout/stderr to ``log`` with suffixes ``.out``/``.err``, in ``log``'s
        folder (torchrun's own files in its ``torchelastic`` subfolder), in a session of
        its own."""
        env = {**env, "GLOO_SOCKET_IFNAME": self.ifaces[host]}
        cmd = self.torchrun_command(host, script, run_id, log.parent / "torchelastic", nproc)
        with open(log.with_suffix(".out"), "w") as out, \
                open(log.with_suffix(".err"), "w") as err:
            return subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=log.parent,
                                    start_new_session=True)


def sweep_stale() -> list[str]:
    """Delete the namespaces (and veth ends) of owners that are gone (tags start with the
    owner's pid: a process killed by SIGKILL cannot clean up); returns their names."""
    gone = []
    for ns in namespaces():
        pid = owner(ns)
        if pid is not None and not alive(pid):
            for p in _ip("netns", "pids", ns).stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns)
            gone.append(ns)
    return gone


def owner(ns: str) -> int | None:
    """The pid that made namespace ``ns`` (its tag starts with it), or None."""
    pid = ns[len(PREFIX):].split("-")[0]
    return int(pid) if pid.isdigit() else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While the block runs (main thread only), SIGTERM and SIGHUP raise :class:`Terminated`,
    so ``finally`` clauses run as they do for Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_(signum, _frame):
        raise Terminated(signum)

    old = {s: signal.signal(s, raise_) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP (delivered on exit), so a second Ctrl-C does
    not cut a clean-up short."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def two_hosts(rate: str = "1gbit", tag: str | None = None) -> Iterator[TwoHosts]:
    """A built :class:`TwoHosts`, destroyed on every way out (see the module docstring);
    OSError naming the step when it cannot be built (what was built is removed)."""
    hosts = TwoHosts(tag, rate)
    with terminate_raises():
        try:
            hosts.build()
            yield hosts
        finally:
            with signals_held():
                hosts.destroy()
