"""Network cost model: accounted traffic -> modelled seconds (docs/architecture.md, Metrics).

Every pair of distinct ranks is joined by a link of class ``intra`` (same host of
the :class:`~cdfgnn.partition.base.Topology`) or ``inter`` (different hosts). A
:class:`LinkProfile` gives each class a bandwidth and a per-message latency, for
point-to-point traffic and for broadcasts. The time rank r spends sending is

    comm_r = sum_{d != r} msgs[r, d] * latency(r, d) + bytes[r, d] / bandwidth(r, d)

(messages to one destination are serialised; different destinations are summed,
i.e. no overlap between peers: a conservative, simple model). A device never
pays for traffic to itself. Units: **GB = 1e9 bytes**, bandwidth in GB/s,
latency in seconds.

Epoch time (docs/architecture.md, Metrics, "modelled on this machine"):

    epoch = max_r ( compute_r * slowdown_r + comm_r )            (no overlap)
    epoch = max_r max( compute_r * slowdown_r, comm_r )           (overlap=True)

``slowdown`` is a per-device compute factor and ``transfer`` a per-device factor on
``comm_r`` (CaPGNN heterogeneity, default 1.0; from device profiles,
:mod:`cdfgnn.pricing.devices`).

Profiles (:data:`NETWORK_PROFILES`):

* ``cdfgnn-table2`` (default): CDFGNN Table 2 measurements, PCIe P2P 22.70 GB/s
  intra-host, InfiniBand P2P 8.27 GB/s inter-host, broadcast 19.47 / 11.98 GB/s.
  The paper gives no latency: 5 us intra / 10 us inter is **our assumption**.
* ``ethernet-10g``: PCIe intra-host as above; inter-host 10 Gbit/s Ethernet =
  1.25 GB/s nominal line rate, 50 us per message (assumed TCP round of a
  commodity cluster); broadcast bandwidth = P2P.
* ``nvlink``: nominal spec values, not measurements: NVLink 3 (A100) 300 GB/s per
  direction intra-host, HDR InfiniBand 200 Gbit/s = 25 GB/s inter-host; 2 us /
  5 us latency assumed; broadcast bandwidth = P2P.
* ``rapidgnn-chameleon``: RapidGNN's cluster, nominal PCIe 3.0 x16 / 10 GbE.
* ``pcie4-host-staged``: the single-server GPU boxes of Sylvie (and CaPGNN before pcie3-host-staged), PCIe 4.0
  halved for host staging, 10 GbE between servers (assumed). Marked ``host_staged``:
  the device-modelled epoch prices the staging as D2H + H2D copies on each GPU's own
  host link (intra-host) and adds them to the inter-host link
  (:mod:`cdfgnn.pricing.cluster`).
* ``pcie3-host-staged``: CaPGNN's server, PCIe 3.0 x8 halved for host staging
  (gloo), 10 GbE between servers (assumed); host-staged as above.
* ``pcie4-p2p``: CoFree-GNN's A100 server, PCIe 4.0 x16 without NVLink, NCCL
  peer-to-peer; 10 GbE between machines (assumed).
* ``veth-1gbit``: the two-host test of ``tests/test_multihost_netns.py``: two network
  namespaces on one machine joined by a veth pair that ``tc tbf`` shapes to 1 Gbit/s.

A user-defined profile is a small YAML file (:func:`load_profile`); anywhere a
profile name is accepted (``--network``), a path ending in ``.yaml`` works too.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import read_yaml_mapping
from cdfgnn.partition.base import Topology
from cdfgnn.registry import Registry

if TYPE_CHECKING:  # the ranks' traffic: comm.base imports torch, pricing needs none
    from cdfgnn.comm.base import CommStats

GB = 1e9
PATTERNS = ("p2p", "broadcast")


@dataclass(frozen=True)
class LinkProfile:
    """Bandwidth (GB/s, GB = 1e9 B) and per-message latency (s) of each link class."""

    name: str
    intra_gbps: float
    inter_gbps: float
    intra_bcast_gbps: float
    inter_bcast_gbps: float
    intra_latency_s: float
    inter_latency_s: float
    source: str = ""
    #: GPU-to-GPU data is staged through host memory (gloo): the device-modelled epoch
    #: adds a device-to-host copy of what a rank sends and a host-to-device copy of what
    #: it receives, priced on each GPU's host link (cdfgnn.pricing.cluster)
    host_staged: bool = False
    #: the bandwidths are measured sustained rates, not nominal ones: the device model
    #: does not scale them by its link efficiency (cdfgnn.pricing.cluster)
    sustained: bool = False

    def __post_init__(self) -> None:
        for key in ("intra_gbps", "inter_gbps", "intra_bcast_gbps", "inter_bcast_gbps"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise CdfgnnError(f"link profile {self.name!r}: {key} must be a finite number > 0, "
                                  f"got {v!r}")
        for key in ("intra_latency_s", "inter_latency_s"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise CdfgnnError(f"link profile {self.name!r}: {key} must be a finite number >= 0, "
                                  f"got {v!r}")
        for key in ("host_staged", "sustained"):
            if not isinstance(getattr(self, key), bool):
                raise CdfgnnError(f"link profile {self.name!r}: {key} must be true or false, "
                                  f"got {getattr(self, key)!r}")

    def bandwidth(self, link: str, pattern: str = "p2p") -> float:
        """Bytes per second of link class ``link`` ('intra'/'inter') for ``pattern``."""
        key = f"{link}_gbps" if pattern == "p2p" else f"{link}_bcast_gbps"
        return getattr(self, key) * GB

    def latency(self, link: str) -> float:
        return getattr(self, f"{link}_latency_s")


NETWORK_PROFILES: Registry[LinkProfile] = Registry("network profile")


def _register(profile: LinkProfile) -> LinkProfile:
    return NETWORK_PROFILES.register(profile.name)(profile)


_register(LinkProfile("cdfgnn-table2", 22.70, 8.27, 19.47, 11.98, 5e-6, 10e-6,
                      source="CDFGNN Table 2 (PCIe / InfiniBand, measured); latencies assumed",
                      sustained=True))
_register(LinkProfile("ethernet-10g", 22.70, 1.25, 22.70, 1.25, 5e-6, 50e-6,
                      source="PCIe as CDFGNN Table 2; 10 GbE nominal line rate; latencies assumed"))
_register(LinkProfile("nvlink", 300.0, 25.0, 300.0, 25.0, 2e-6, 5e-6,
                      source="nominal NVLink 3 per direction / HDR InfiniBand; latencies assumed"))
_register(LinkProfile("rapidgnn-chameleon", 15.75, 1.25, 15.75, 1.25, 5e-6, 50e-6,
                      source="RapidGNN Table 1 cluster: 2x P100 per node on PCIe 3.0 x16 "
                             "(nominal 15.75 GB/s), 10 Gbit/s Ethernet between nodes "
                             "(nominal 1.25 GB/s); latencies assumed"))
_register(LinkProfile("pcie4-host-staged", 15.75, 1.25, 15.75, 1.25, 10e-6, 50e-6,
                      source="CaPGNN / Sylvie servers: PCIe 4.0 x16 (nominal 31.5 GB/s) "
                             "halved because GPU-to-GPU data is staged through host memory "
                             "without P2P (CaPGNN sec. 2.1); between servers 10 Gbit/s "
                             "Ethernet assumed (the papers do not say); latencies assumed. "
                             "host-staged: the device model prices the staging as D2H + H2D "
                             "copies on each GPU's host link instead of the halved intra link",
                      host_staged=True))
_register(LinkProfile("pcie3-host-staged", 3.94, 1.25, 3.94, 1.25, 10e-6, 50e-6,
                      source="CaPGNN's server (CaPGNN, Neurocomputing, sec. 5.1): GPUs on PCIe 3.0 x8 "
                             "(8 GT/s x 8 lanes, 128b/130b = 7.88 GB/s per direction) halved "
                             "because gloo stages GPU-to-GPU data through host memory; between "
                             "servers 10 Gbit/s Ethernet assumed (not stated); latencies "
                             "assumed. host-staged as pcie4-host-staged",
                      host_staged=True))
_register(LinkProfile("pcie4-p2p", 31.5, 1.25, 31.5, 1.25, 5e-6, 50e-6,
                      source="CoFree-GNN's server (arXiv 2308.03209, experimental setup): A100 GPUs on "
                             "PCIe 4.0 x16, no NVLink (nominal 31.5 GB/s per direction, NCCL "
                             "peer-to-peer); the paper does not describe its inter-machine "
                             "network: 10 Gbit/s Ethernet assumed; latencies assumed"))
_register(LinkProfile("veth-1gbit", 0.40, 0.125, 0.40, 0.125, 20e-6, 25e-6,
                      source="two network namespaces on one machine joined by a veth pair "
                             "shaped by tc tbf to 1 Gbit/s (tests/test_multihost_netns.py): "
                             "inter-host = the tbf rate, 0.125 GB/s (one TCP stream measured "
                             "0.117 GB/s); intra-host = loopback TCP inside one namespace, "
                             "one Python socket stream measured 0.36-0.44 GB/s on the 2-core "
                             "test machine; latencies = half the TCP ping-pong round trip "
                             "measured there (21-215 us over the veth, 21-41 us on loopback; "
                             "the low end taken)", sustained=True))


PROFILE_KEYS = ("intra_gbps", "inter_gbps", "intra_bcast_gbps", "inter_bcast_gbps",
                "intra_latency_s", "inter_latency_s")


def load_profile(path: str | os.PathLike) -> LinkProfile:
    """A user-defined link profile from a small YAML file::

        name: my-cluster            # optional (default: the file name)
        intra_gbps: 24.0            # GB/s (1e9 B/s) between devices of one host
        inter_gbps: 1.25            # GB/s between hosts (10 Gbit/s Ethernet)
        intra_latency_s: 5.0e-6     # seconds per message
        inter_latency_s: 5.0e-5
        intra_bcast_gbps: 24.0      # optional: broadcast bandwidths (default: P2P's)
        inter_bcast_gbps: 1.25
        source: "measured with ..." # optional: where the numbers come from
        host_staged: false          # optional: GPU data staged through host memory (gloo)
        sustained: false            # optional: bandwidths are measured, not nominal
    """
    path = Path(path)
    spec = read_yaml_mapping(path, f"network profile {path}", ", ".join(PROFILE_KEYS))
    unknown = sorted(set(spec) - {*PROFILE_KEYS, "name", "source", "host_staged", "sustained"})
    if unknown:
        raise CdfgnnError(f"network profile {path}: unknown key(s) {unknown}; valid: "
                          f"name, source, host_staged, sustained, {', '.join(PROFILE_KEYS)}")
    missing = [k for k in ("intra_gbps", "inter_gbps", "intra_latency_s", "inter_latency_s")
               if k not in spec]
    if missing:
        raise CdfgnnError(f"network profile {path}: missing {', '.join(missing)}")
    return LinkProfile(str(spec.get("name", path.stem)), spec["intra_gbps"], spec["inter_gbps"],
                       spec.get("intra_bcast_gbps", spec["intra_gbps"]),
                       spec.get("inter_bcast_gbps", spec["inter_gbps"]),
                       spec["intra_latency_s"], spec["inter_latency_s"],
                       source=str(spec.get("source", f"user profile {path}")),
                       host_staged=spec.get("host_staged", False),
                       sustained=spec.get("sustained", False))


def get_profile(spec: str | LinkProfile) -> LinkProfile:
    """A registered profile by name, or a YAML file's (a path ending in .yaml/.yml)."""
    if isinstance(spec, LinkProfile):
        return spec
    if str(spec).endswith((".yaml", ".yml")):
        return load_profile(spec)
    return NETWORK_PROFILES.get(spec)


class NetworkModel:
    """Topology + link profile + per-device compute slowdown -> modelled times."""

    def __init__(self, topology: Topology, profile: str | LinkProfile = "cdfgnn-table2",
                 slowdown: list[float] | None = None, transfer: list[float] | None = None):
        if not isinstance(topology, Topology):
            raise CdfgnnError(f"NetworkModel needs a Topology, got {type(topology).__name__}")
        self.topology = topology
        self.profile = get_profile(profile)
        p = topology.num_parts
        if slowdown is None:
            slowdown = [1.0] * p
        slowdown = [float(s) for s in slowdown]
        if len(slowdown) != p:
            raise CdfgnnError(f"slowdown has {len(slowdown)} factors, topology {topology.label} "
                              f"has {p} devices")
        if not all(math.isfinite(s) and s > 0 for s in slowdown):
            raise CdfgnnError(f"slowdown factors must be finite and > 0, got {slowdown}")
        self.slowdown = slowdown
        # per-device transfer factor (CaPGNN device profiles): scales what a rank sends
        transfer = [1.0] * p if transfer is None else [float(s) for s in transfer]
        if len(transfer) != p or not all(math.isfinite(s) and s > 0 for s in transfer):
            raise CdfgnnError(f"transfer factors must be {p} finite numbers > 0, got {transfer}")
        self.transfer = transfer
        # Per (src, dst): seconds per byte and seconds per message; diagonal is free.
        host = np.arange(p) // topology.devices_per_host
        same = host[:, None] == host[None, :]
        self._sec_per_byte = {
            pat: np.where(same, 1.0 / self.profile.bandwidth("intra", pat),
                          1.0 / self.profile.bandwidth("inter", pat)) for pat in PATTERNS}
        self._sec_per_msg = np.where(same, self.profile.intra_latency_s, self.profile.inter_latency_s)
        for arr in (*self._sec_per_byte.values(), self._sec_per_msg):
            np.fill_diagonal(arr, 0.0)

    @property
    def world_size(self) -> int:
        return self.topology.num_parts

    def describe(self) -> dict:
        """The constants used, for run records (CDFGNN 'Table 2 analogue')."""
        return {**asdict(self.profile), "gb_bytes": GB, "slowdown": list(self.slowdown),
                "transfer": list(self.transfer),
                "topology": self.topology.label}

    def _vector(self, name: str, values) -> np.ndarray:
        arr = np.asarray(values, dtype=np.float64)
        if arr.shape != (self.world_size,):
            raise CdfgnnError(f"{name} must have one entry per rank ({self.world_size}), "
                              f"got shape {arr.shape}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise CdfgnnError(f"{name} must be finite and >= 0, got {arr.tolist()}")
        return arr

    def comm_seconds(self, rank: int, bytes_to, msgs_to, pattern: str = "p2p") -> float:
        """Modelled seconds for ``rank`` to send ``bytes_to[d]`` bytes in ``msgs_to[d]`` messages."""
        if not isinstance(rank, (int, np.integer)) or not 0 <= rank < self.world_size:
            raise CdfgnnError(f"rank must be in [0, {self.world_size}), got {rank!r}")
        if pattern not in PATTERNS:
            raise CdfgnnError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
        b = self._vector("bytes_to", bytes_to)
        m = self._vector("msgs_to", msgs_to)
        return self.transfer[rank] * float(np.dot(m, self._sec_per_msg[rank])
                                           + np.dot(b, self._sec_per_byte[pattern][rank]))

    def from_stats(self, stats_per_rank: list[CommStats], prefix: str = "",
                   pattern: str = "p2p") -> list[float]:
        """Per-rank modelled comm seconds of the traffic whose tag starts with ``prefix``."""
        if len(stats_per_rank) != self.world_size:
            raise CdfgnnError(f"from_stats needs {self.world_size} CommStats (one per rank), "
                              f"got {len(stats_per_rank)}")
        out = []
        for rank, st in enumerate(stats_per_rank):
            if st.world_size != self.world_size:
                raise CdfgnnError(f"CommStats of rank {rank} is for world size {st.world_size}, "
                                  f"topology has {self.world_size}")
            out.append(self.comm_seconds(rank, st.total_bytes_to(prefix), st.total_msgs_to(prefix),
                                         pattern))
        return out

    def epoch_seconds(self, compute_cpu_s, comm_s, overlap: bool = False) -> float:
        """max over ranks of compute*slowdown + comm (or of their max when overlapping)."""
        compute = self._vector("compute_cpu_s", compute_cpu_s) * np.asarray(self.slowdown)
        comm = self._vector("comm_s", comm_s)
        per_rank = np.maximum(compute, comm) if overlap else compute + comm
        return float(per_rank.max())
