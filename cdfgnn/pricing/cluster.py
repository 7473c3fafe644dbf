"""The cluster a run's counts are priced on, resolved once: one GPU profile per rank, the
network's link profile, the topology and the efficiency constants.

The network rules of the device model are written here, once:

* **backend**: a ``host_staged`` link profile is gloo's path (GPU data staged through
  host memory); any other profile is nccl's (device to device where the link allows:
  NVLink or PCIe peer-to-peer inside a server, the network between servers).
* **link efficiency**: every bandwidth of a nominal profile is multiplied by the
  backend's ``link_gloo`` or ``link_nccl`` (:mod:`cdfgnn.pricing.efficiency`); a profile
  marked ``sustained`` (measured rates) is used as it is.
* **NIC sharing**: the inter-host bandwidth is a host's, and the ``devices_per_host``
  ranks of a host exchange halos at once, so each gets ``inter / devices_per_host``.
* **staging** (gloo): rank r pays a device-to-host copy of the bytes it sends to other
  ranks and a host-to-device copy of the bytes it receives, at ``host_copy_bw x
  link_gloo`` of its host link's rate shared by the ``devices_per_host`` ranks of its
  host, which exchange at once and whose copies and gloo's loopback transfers share the
  host's memory and PCIe root (as NIC sharing shares the network): Sylvie's float32
  exchange grows 2.3-2.4x from 4 to 8 GPUs on one server, as the bytes over the whole
  host do, where a rank's own grow about 1.2x (docs/results.md, "A tenth change"). The
  copies are the whole path to a rank of the same host (they replace the intra-host
  link), and bytes to another host also pay the network. nccl pays no copies.
* **fixed cost per exchange message**: every message of a full-batch halo exchange
  costs ``msg_gloo_us`` or ``msg_nccl_us`` on top (:meth:`Cluster.exchange_seconds`): the
  software path of one point-to-point exchange (pack the rows on the GPU, copy them out,
  which waits for the kernels queued before it, send, wait for the peer, copy in). A
  gloo message is bounded by what the path costs (:data:`~cdfgnn.pricing.efficiency.FIT_BOUNDS`:
  at most 1 ms; `python benchmarks/gloo_message.py` measures 0.1-1.0 ms per message of
  the peers' exchange pattern on loopback on a 2-core machine, no GPU copy included).
  The gradient all-reduce (one collective call) and the sampled track's pulls are priced
  without it: no published row measures them apart.

:meth:`Cluster.send_seconds` applies them to one rank's traffic; the full-batch epoch
(:mod:`cdfgnn.pricing.epoch`) and the sampled step (:mod:`cdfgnn.pricing.step`) both call
it. :func:`allreduce_traffic` is the gradient all-reduce's traffic (ring).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
import numpy as np

from cdfgnn.comm.network import LinkProfile, NetworkModel, get_profile
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology
from cdfgnn.pricing.efficiency import Efficiency, load_efficiency
from cdfgnn.pricing.hardware import GpuProfile, run_gpus
from cdfgnn.pricing.roofline import host_copy_rate


@dataclass(frozen=True)
class Cluster:
    """What counts are priced on (module docstring). ``default_gpus``: the profiles are
    the default ones (no ``--devices``)."""

    gpus: tuple[GpuProfile, ...]
    link: LinkProfile
    topology: Topology
    eff: Efficiency
    default_gpus: bool = False

    def __post_init__(self) -> None:
        if len(self.gpus) != self.topology.num_parts:
            raise CdfgnnError(f"cluster: {len(self.gpus)} GPU profiles for "
                              f"{self.topology.num_parts} ranks")

    @property
    def backend(self) -> str:
        return "gloo" if self.link.host_staged else "nccl"

    @cached_property
    def effective_link(self) -> LinkProfile:
        """The link profile with the link efficiency and NIC sharing applied."""
        return effective_link(self.link, self.eff, self.topology.devices_per_host)

    @cached_property
    def network(self) -> NetworkModel:
        return NetworkModel(self.topology, self.effective_link)

    @cached_property
    def host(self) -> np.ndarray:
        return np.arange(self.topology.num_parts) // self.topology.devices_per_host

    def copy_seconds(self, r: int, nbytes: float) -> float:
        """One staging copy (D2H or H2D) of ``nbytes`` on rank r's host link, whose rate
        the ranks of its host share (module docstring)."""
        rate = host_copy_rate(self.gpus[r], self.eff) * self.eff.link("gloo")
        return float(nbytes) * self.topology.devices_per_host / rate

    def send_seconds(self, r: int, bytes_to, msgs_to, received: float) -> float:
        """Seconds rank r spends on one exchange: ``bytes_to[q]`` / ``msgs_to[q]`` sent to
        each rank, ``received`` bytes from the others (module docstring)."""
        b = np.asarray(bytes_to, dtype=np.float64)
        m = np.asarray(msgs_to, dtype=np.float64)
        if not self.link.host_staged:
            return self.network.comm_seconds(r, b, m)
        sent = float(b.sum() - b[r])
        b = np.where(self.host == self.host[r], 0.0, b)
        return (self.network.comm_seconds(r, b, m) + self.copy_seconds(r, sent)
                + self.copy_seconds(r, received))

    def exchange_seconds(self, r: int, bytes_to, msgs_to, received: float) -> float:
        """Seconds rank r spends on one epoch's halo exchanges: :meth:`send_seconds` plus
        the exchange's fixed cost per message it sends (``msg_gloo_us`` / ``msg_nccl_us``,
        module docstring)."""
        m = np.asarray(msgs_to, dtype=np.float64)
        sent = float(m.sum() - m[r])
        return (self.send_seconds(r, bytes_to, msgs_to, received)
                + sent * self.eff.message_seconds(self.backend))


def effective_link(link: LinkProfile, eff: Efficiency, devices_per_host: int) -> LinkProfile:
    """``link`` with its bandwidths x the backend's link efficiency (unless ``sustained``)
    and its inter-host bandwidths shared by a host's ``devices_per_host`` ranks."""
    scale = 1.0 if link.sustained else eff.link("gloo" if link.host_staged else "nccl")
    share = scale / max(devices_per_host, 1)
    return replace(link, intra_gbps=link.intra_gbps * scale,
                   intra_bcast_gbps=link.intra_bcast_gbps * scale,
                   inter_gbps=link.inter_gbps * share,
                   inter_bcast_gbps=link.inter_bcast_gbps * share)


def resolve_cluster(devices, network, topology: Topology, eff: Efficiency | None = None,
                    ) -> Cluster:
    """The cluster of a ``--devices`` spec (None: the default profile; or one
    :class:`GpuProfile` per rank), a network profile (name, YAML path or
    :class:`LinkProfile`) and a topology."""
    if isinstance(devices, (list, tuple)) and all(isinstance(g, GpuProfile) for g in devices):
        gpus, default = list(devices), False
    else:
        gpus, default = run_gpus(devices, topology.num_parts)
    return Cluster(tuple(gpus), get_profile(network), topology, eff or load_efficiency(),
                   default)


def allreduce_traffic(p: int, n_params: float) -> tuple[list[list[float]], list[list[float]]]:
    """Per rank, bytes and messages to every rank of one gradient all-reduce of
    ``n_params`` float32 values (ring: 2(P-1)/P of the vector to the next rank, in
    2(P-1) messages)."""
    red = np.zeros(p)
    red[0 if p == 1 else 1] = 2 * (p - 1) * n_params * 4 / p
    msgs = (red > 0) * 2.0 * (p - 1)
    return ([np.roll(red, r).tolist() for r in range(p)],
            [np.roll(msgs, r).tolist() for r in range(p)])

