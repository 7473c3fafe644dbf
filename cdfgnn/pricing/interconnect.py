"""Interconnects as papers write them, read into link figures.

:func:`parse_interconnect` reads a text such as ``"PCIe 4.0"``, ``"NVLink + 100 Gb/s
InfiniBand EDR"``, ``"PCIe 3.0 x8, 25 Gbps Ethernet"`` or ``"none"`` into an
:class:`Interconnect`: the link between GPUs of one server and the network between
servers. Parts are separated by ``+``, ``,``, ``;``, ``/`` or ``and``; a bracketed
remark (``(assumed)``) is ignored. Each part must be one of

* ``PCIe <gen>[.0] [x<lanes>]``: nominal per-direction rate of the PCI-SIG base
  specifications (gen3: 0.985 GB/s per lane, x16 = 15.75 GB/s; gen4 31.5; gen5 63;
  :data:`PCIE_LANE_GBPS`), 16 lanes unless written;
* ``NVLink [gen]`` (or ``NVSwitch``): the card's own NVLink figure (``peer_link_gbps``
  of its profile); a generation without a card figure is refused;
* ``<speed> Gbps|Gb/s|Gbit/s|GbE Ethernet`` (also ``10GbE``, ``RoCE``): the line rate;
* ``InfiniBand <SDR|DDR|QDR|FDR|EDR|HDR|NDR>`` and/or ``<speed> Gb/s InfiniBand``: the
  written speed, else the generation's 4x rate (:data:`INFINIBAND_GBIT`);
* ``none`` / ``single GPU``: nothing.

Anything else, a network without a speed (``Ethernet`` alone), or two of a kind raises
:class:`~cdfgnn.errors.CdfgnnError` with one line naming the text. Latencies are not
written in papers: :data:`LATENCY_S` holds the assumed per-message latencies.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from cdfgnn.comm.network import LinkProfile
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology
from cdfgnn.pricing.hardware import GpuProfile

#: GB/s per lane and direction (128b/130b from gen3 on; gen1/2 8b/10b)
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.984375, 4: 1.96875, 5: 3.9375, 6: 7.875}
#: 4x link data rates (Gbit/s) of each InfiniBand generation (InfiniBand Trade Association
#: roadmap: SDR 10, DDR 20, QDR 40, FDR 56, EDR 100, HDR 200, NDR 400)
INFINIBAND_GBIT = {"sdr": 10, "ddr": 20, "qdr": 40, "fdr": 56, "edr": 100, "hdr": 200,
                   "ndr": 400, "xdr": 800}
#: assumed per-message latencies (seconds): no paper gives them
LATENCY_S = {"nvlink": 2e-6, "pcie": 5e-6, "ethernet": 50e-6, "infiniband": 5e-6}
_NONE = {"none", "-", "", "single gpu", "n/a", "na", "single"}
_SPEED = r"(\d+(?:\.\d+)?)\s*(?:gbps|gb/s|gbit/s|gbits?|gbe|g(?=\s|$|b))"


@dataclass(frozen=True)
class Interconnect:
    """The parsed text: the intra-server link (``pcie`` / ``nvlink`` / None) and the
    network between servers (``ethernet`` / ``infiniband`` / None) with its rate."""

    text: str
    intra: str | None = None
    pcie_gen: int | None = None
    pcie_lanes: int = 16
    inter: str | None = None
    inter_gbit: float | None = None

    @property
    def pcie_gbps(self) -> float | None:
        """Nominal GB/s per direction of the written PCIe link (None: not written)."""
        if self.pcie_gen is None:
            return None
        return PCIE_LANE_GBPS[self.pcie_gen] * self.pcie_lanes

    @property
    def inter_gbps(self) -> float | None:
        return None if self.inter_gbit is None else self.inter_gbit / 8.0


def _parts(text: str) -> list[str]:
    clean = re.sub(r"\([^)]*\)", " ", text.lower())
    return [p.strip() for p in re.split(r"\+|,|;|/(?!s)|\band\b", clean) if p.strip()]


def parse_interconnect(text: str) -> Interconnect:
    """The :class:`Interconnect` a paper's text names (module docstring); one-line error
    naming the text otherwise."""
    found: dict[str, dict] = {}
    for part in _parts(text):
        if part in _NONE:
            continue
        kind, values = _part(part, text)
        if kind in found:
            raise CdfgnnError(f"interconnect {text!r}: {kind} written twice")
        found[kind] = values
    networks = [k for k in ("ethernet", "infiniband") if k in found]
    if len(networks) > 1:
        raise CdfgnnError(f"interconnect {text!r}: two networks between servers "
                          f"({', '.join(networks)})")
    fields: dict = {**found.get("pcie", {}), **found.get("nvlink", {})}
    # NVLink joins the GPUs of a server where written; the PCIe generation stays the
    # GPUs' host link (staging copies)
    fields["intra"] = "nvlink" if "nvlink" in found else "pcie" if "pcie" in found else None
    if networks:
        fields.update(inter=networks[0], **found[networks[0]])
    return Interconnect(text=text, **fields)


def _part(part: str, text: str) -> tuple[str, dict]:
    m = re.fullmatch(r"pci-?e\s*(?:gen\s*)?(\d)(?:\.0)?(?:\s*x\s*(\d+))?", part)
    if m:
        gen = int(m.group(1))
        if gen not in PCIE_LANE_GBPS:
            raise CdfgnnError(f"interconnect {text!r}: unknown PCIe generation {gen}")
        return "pcie", {"pcie_gen": gen, "pcie_lanes": int(m.group(2) or 16)}
    if re.fullmatch(r"(nvlink|nvswitch)\s*\d?(\.0)?(\s*bridge)?", part):
        return "nvlink", {}
    speed = re.search(_SPEED, part)
    if "infiniband" in part or re.search(r"\bib\b", part):
        gen = next((g for g in INFINIBAND_GBIT if re.search(rf"\b{g}\b", part)), None)
        rate = float(speed.group(1)) if speed else INFINIBAND_GBIT.get(gen)
        rate = None if rate is None else float(rate)
        if rate is None:
            raise CdfgnnError(f"interconnect {text!r}: InfiniBand without a speed or "
                              f"generation ({', '.join(g.upper() for g in INFINIBAND_GBIT)})")
        return "infiniband", {"inter_gbit": rate}
    if re.search(r"ethernet|gbe\b|roce", part):
        if not speed:
            raise CdfgnnError(f"interconnect {text!r}: Ethernet without a speed "
                              f"(write it, e.g. '10 Gbps Ethernet')")
        return "ethernet", {"inter_gbit": float(speed.group(1))}
    raise CdfgnnError(f"interconnect {text!r}: cannot read {part!r} (PCIe <gen> [x<lanes>], "
                      f"NVLink, <speed> Gbps Ethernet, InfiniBand <gen> or <speed> Gb/s "
                      f"InfiniBand, none)")


def with_host_link(gpu: GpuProfile, ic: Interconnect) -> GpuProfile:
    """``gpu`` with its host link set to the written PCIe link (as it is where none is
    written): the staging copies of gloo run over it."""
    if ic.pcie_gen is None:
        return gpu
    return replace(gpu, host_link=f"pcie{ic.pcie_gen}x{ic.pcie_lanes}",
                   host_link_gbps=ic.pcie_gbps)


def link_profile(ic: Interconnect, backend: str, gpu: GpuProfile, topology: Topology,
                 ) -> LinkProfile:
    """The nominal link profile of a written interconnect for ``backend`` (``gloo``:
    host-staged; ``nccl``: device to device), on ``topology`` with GPUs like ``gpu``.

    Inside a server: NVLink at the card's own NVLink figure, else the written PCIe link,
    else the card's host link (peer-to-peer over PCIe). Between servers: the written
    network; several servers without one is refused, as is NVLink on a card without it."""
    if backend not in ("gloo", "nccl"):
        raise CdfgnnError(f"backend {backend!r}: valid gloo, nccl")
    if ic.intra == "nvlink":
        if gpu.peer_link_gbps <= 0:
            raise CdfgnnError(f"interconnect {ic.text!r}: NVLink, but the {gpu.name} "
                              f"profile has no NVLink")
        intra, intra_kind = gpu.peer_link_gbps, "nvlink"
    else:
        intra, intra_kind = ic.pcie_gbps or gpu.host_link_gbps, "pcie"
    if topology.hosts > 1 and ic.inter_gbps is None:
        raise CdfgnnError(f"interconnect {ic.text!r}: no network between the "
                          f"{topology.hosts} servers")
    inter = ic.inter_gbps if ic.inter_gbps is not None else intra
    inter_kind = ic.inter or intra_kind
    return LinkProfile(f"{ic.text} ({backend})", intra, inter, intra, inter,
                       LATENCY_S[intra_kind], LATENCY_S[inter_kind],
                       source=f"read from the interconnect text {ic.text!r} "
                              "(cdfgnn.pricing.interconnect); latencies assumed",
                       host_staged=backend == "gloo")
