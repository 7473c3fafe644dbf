"""Topology, the Partitioning file and the partitioner registry.

Two families share one interface:

* **edge-cut** partitioners return ``node_parts`` (int64 [N], vertex -> part);
* **vertex-cut** partitioners return ``edge_parts`` (int64 [M], undirected edge id
  -> part), where edge ids follow :meth:`Graph.undirected_edges` (src < dst, CSR
  order). Both directions of an undirected edge live in the same part.

Every partitioner is a plain function registered under its name::

    @PARTITIONERS.register("hdrf")
    def hdrf(edges: EdgeList, topology: Topology, *, seed: int, **params) -> np.ndarray

with ``partitioner.kind`` set to ``"edge"`` or ``"vertex"`` by the decorator
:func:`partitioner`. Vertex-cut functions receive an :class:`EdgeList` (which may
contain self-loops or be empty); edge-cut functions receive the :class:`Graph`.
"""
from __future__ import annotations

import io
import json
import operator
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError, CorruptFileError
from cdfgnn.fileio import atomic_write_bytes
from cdfgnn.registry import Registry


@dataclass(frozen=True)
class Topology:
    """``hosts`` machines with ``devices_per_host`` workers each; device i is on host i // dph."""

    hosts: int = 1
    devices_per_host: int = 1

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.devices_per_host < 1:
            raise CdfgnnError(f"topology needs hosts >= 1 and devices_per_host >= 1, got "
                              f"{self.hosts}x{self.devices_per_host}")

    @property
    def num_parts(self) -> int:
        return self.hosts * self.devices_per_host

    def host_of(self, device: int | np.ndarray) -> int | np.ndarray:
        return device // self.devices_per_host

    def same_host(self, a: int, b: int) -> bool:
        return a // self.devices_per_host == b // self.devices_per_host

    @classmethod
    def for_workers(cls, workers: int, hosts: int = 1) -> "Topology":
        if workers < 1:
            raise CdfgnnError(f"--workers must be >= 1, got {workers}")
        if hosts < 1 or workers % hosts:
            raise CdfgnnError(f"--workers {workers} is not divisible by --hosts {hosts}: "
                              "workers must be a multiple of --hosts")
        return cls(hosts, workers // hosts)

    @property
    def label(self) -> str:
        return f"h{self.hosts}x{self.devices_per_host}"

    @classmethod
    def parse(cls, label: str) -> "Topology":
        """Parse ``h{hosts}x{dph}`` (the pipeline's topology wildcard)."""
        try:
            h, d = label.lstrip("h").split("x")
            return cls(int(h), int(d))
        except ValueError:
            raise CdfgnnError(f"bad topology {label!r}; expected h<hosts>x<devices_per_host>") from None


@dataclass
class EdgeList:
    """Undirected edges (one row per edge) handed to vertex-cut partitioners."""

    src: np.ndarray
    dst: np.ndarray
    num_nodes: int

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    @classmethod
    def from_graph(cls, graph: Graph) -> "EdgeList":
        s, d = graph.undirected_edges()
        return cls(s, d, graph.num_nodes)

    def degrees(self) -> np.ndarray:
        """Degree counting each edge once per endpoint (a self-loop counts twice)."""
        return (np.bincount(self.src, minlength=self.num_nodes)
                + np.bincount(self.dst, minlength=self.num_nodes)).astype(np.int64)


PARTITIONERS: Registry[Callable[..., np.ndarray]] = Registry("partitioner")


def check_seed(name: str, seed) -> int:
    """A partitioner's seed as a non-negative int; anything else raises CdfgnnError."""
    try:
        seed = operator.index(seed)
    except TypeError:
        raise CdfgnnError(f"partitioner {name!r}: seed must be an integer, got {seed!r}") from None
    if isinstance(seed, bool) or seed < 0:
        raise CdfgnnError(f"partitioner {name!r}: seed must be a non-negative integer, got {seed!r}")
    return seed


def partitioner(name: str, kind: str):
    """Register ``fn`` as partitioner ``name`` of family ``kind`` ('edge' or 'vertex')."""
    if kind not in ("edge", "vertex"):
        raise ValueError(kind)

    def deco(fn):
        fn.kind = kind
        fn.partitioner_name = name
        return PARTITIONERS.register(name)(fn)

    return deco


@dataclass
class Partitioning:
    """The output of a partitioner for one graph and topology, saved as one file.

    ``assignment`` is ``node_parts`` for edge-cut and ``edge_parts`` for vertex-cut.
    ``master`` (vertex -> part) is the owner of every vertex: the part itself for
    edge-cut; for vertex-cut the replica chosen by :func:`select_masters`.
    """

    kind: str
    assignment: np.ndarray
    master: np.ndarray
    topology: Topology
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    graph_fingerprint: str = ""
    graph_name: str = ""
    num_nodes: int = 0
    seconds: float = 0.0

    @property
    def num_parts(self) -> int:
        return self.topology.num_parts

    def check_graph(self, graph: Graph, source: str = "partitioning") -> None:
        if self.graph_fingerprint != graph.fingerprint():
            raise CdfgnnError(
                f"{source} was made for graph {self.graph_name!r} "
                f"({self.num_nodes} nodes), not for {graph.name!r} ({graph.num_nodes} nodes): "
                "re-run `cdfgnn partition` for this graph")

    def save(self, path: str | os.PathLike) -> None:
        header = {"format": "cdfgnn-partitioning", "kind": self.kind, "method": self.method,
                  "params": self.params, "hosts": self.topology.hosts,
                  "devices_per_host": self.topology.devices_per_host,
                  "graph_fingerprint": self.graph_fingerprint, "graph_name": self.graph_name,
                  "num_nodes": self.num_nodes, "seconds": self.seconds}
        buf = io.BytesIO()
        np.savez(buf, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                 assignment=self.assignment, master=self.master)
        atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Partitioning":
        path = Path(path)
        header, assignment, master = _read(path, ("assignment", "master"))
        topo = Topology(header["hosts"], header["devices_per_host"])
        p = cls(header["kind"], assignment, master, topo, header["method"], header["params"],
                header["graph_fingerprint"], header["graph_name"], header["num_nodes"],
                header.get("seconds", 0.0))
        if assignment.size and (assignment.min() < 0 or assignment.max() >= topo.num_parts):
            raise CorruptFileError(f"{path}: part ids outside [0, {topo.num_parts})")
        return p

    @staticmethod
    def read_header(path: str | os.PathLike) -> dict[str, Any]:
        """The file's header alone (kind, method, params, hosts, devices_per_host, ...),
        without reading the arrays: what a run is checked against before it starts."""
        return _read(Path(path), ())[0]


def _read(path: Path, arrays: tuple[str, ...]) -> tuple:
    """(header, *arrays) of a partition file; a one-line error naming the file otherwise."""
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(z["header"].tobytes().decode())
            loaded = [z[a] for a in arrays]
    except FileNotFoundError:
        raise CorruptFileError(f"{path}: partition file does not exist") from None
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, EOFError) as exc:
        raise CorruptFileError(f"{path}: not a readable partition file ({exc})") from None
    if header.get("format") != "cdfgnn-partitioning":
        raise CorruptFileError(f"{path}: not a cdfgnn partition file")
    return (header, *loaded)
