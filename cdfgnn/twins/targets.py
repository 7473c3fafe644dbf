"""Published partition statistics of the real graphs, as targets for their twins.

Reads ``benchmarks/data/real_partition_stats.csv`` (columns ``graph, vertices, arcs,
partitioner, metric, parts, value, source, note``; sources per row) into
:class:`Target` rows and says which twin stands for which graph and how each statistic
is measured on the twin:

* ``halo_copies_per_vertex`` (partitioner ``metis``): DGL's ``metis_partition_assignment``
  defaults, i.e. vertex-balanced k-way METIS -> :class:`~cdfgnn.twins.measure.Point`
  ``("halo", P)`` with the "metis" partitioner;
* ``edge_cut_share`` (``metis``, from EmbedPart): DGL's ``partition_graph`` with
  training-vertex and edge balance -> ``("cut", P)`` with "metis-dgl";
* ``halo_volume_mb`` (``metis``, Sylvie Table 3): halo bytes per epoch of GraphSAGE on
  8 parts, METIS with the volume objective, inductive runs on the training subgraph ->
  a ``("halo", 8)`` point with "metis-vol" whose value is the halo copies per vertex of
  the graph partitioned, ``MB 2^20 / (2 syncs hidden 4 B V_part)`` (:data:`VOLUME_SETTINGS`);
* ``halo_copies_per_vertex`` and ``edge_cut_share`` (``metis-vol``, from the training logs
  of Bajaj et al.'s PipeGCN runs: both statistics of one partition, DGL's
  ``partition_graph(..., objtype='vol')`` on the whole graph) -> ``("halo", P)`` and
  ``("cut", P)`` with "metis-vol": checks of the twins, never in a fit
  (:attr:`Target.checked_only`);
* ``replication_factor`` (``ebv-g0.0``, ``ebv-g0.1``, ``hep``, ``dne``; CDFGNN Table 3):
  vertex-cut RF on 2 hosts x P/2 devices (not a :class:`Point`: measured by the fidelity
  benchmark with the project's partitioners).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from cdfgnn.errors import CdfgnnError
from cdfgnn.twins.measure import Point

#: the real graph each registered twin stands for (graph names of the CSV)
TWIN_OF = {
    "reddit-dgl": "synth-reddit-dgl",
    "reddit-graphsaint": "synth-reddit",
    "ogbn-products": "synth-products",
    "ogbn-arxiv": "synth-arxiv",
    "ogbn-papers100m": "synth-papers100m",
    "yelp": "synth-yelp",
    "amazon-products": "synth-amazon",
    "friendster": "synth-friendster",
}
VERTEX_CUT = {"ebv-g0.0": ("ebv", {"gamma": 0.0}), "ebv-g0.1": ("ebv", {"gamma": 0.1}),
              "hep": ("hep", {}), "dne": ("dne", {})}
METRICS = ("halo_copies_per_vertex", "edge_cut_share", "halo_volume_mb", "replication_factor")


@dataclass(frozen=True)
class VolumeSetting:
    """The run behind a published halo volume (Sylvie, arXiv 2303.01277, Table 3)."""

    syncs: int            # layers that exchange halos (--use-pp: all but the first)
    hidden: int           # width of the rows exchanged
    regime: str           # "train": inductive, the training subgraph; "full"
    part_vertices: int    # vertices of the graph partitioned


#: GraphSAGE (layers, hidden) of the matching Sylvie result files, as the CSV notes say;
#: training subgraph sizes: Reddit 153,431 (CSV note), Yelp 0.75 and AmazonProducts
#: 1,255,968 of their vertices (GraphSAINT splits)
VOLUME_SETTINGS = {
    "reddit-dgl": VolumeSetting(3, 256, "train", 153_431),
    "yelp": VolumeSetting(3, 512, "train", round(0.75 * 716_847)),
    "ogbn-products": VolumeSetting(2, 128, "full", 2_449_029),
    "amazon-products": VolumeSetting(3, 256, "train", 1_255_968),
}
MB = 2 ** 20
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Target:
    """One row of the CSV."""

    graph: str
    vertices: int
    arcs: int
    partitioner: str
    metric: str
    parts: int
    value: float
    source: str

    @property
    def twin(self) -> str | None:
        return TWIN_OF.get(self.graph)

    @property
    def checked_only(self) -> bool:
        """A statistic the twins are checked against but never fitted to: the
        same-partition pairs of halo copies and cut of the volume objective."""
        return self.partitioner == "metis-vol"

    def point(self, weight: float = 1.0) -> Point | None:
        """The :class:`Point` measuring this statistic on the twin (None: vertex-cut)."""
        if self.partitioner == "metis-vol" and self.metric in ("halo_copies_per_vertex",
                                                                "edge_cut_share"):
            metric = "halo" if self.metric == "halo_copies_per_vertex" else "cut"
            return Point(metric, self.parts, self.value, "full", weight, "metis-vol")
        if self.metric == "halo_copies_per_vertex":
            return Point("halo", self.parts, self.value, "full", weight, "metis")
        if self.metric == "edge_cut_share":
            return Point("cut", self.parts, self.value, "full", weight, "metis-dgl")
        if self.metric == "halo_volume_mb":
            s = VOLUME_SETTINGS[self.graph]
            return Point("halo", self.parts, self.value * volume_factor(self.graph), s.regime,
                         weight, "metis-vol")
        return None


#: the twins a locality fit covers (benchmarks/fit_twins.py), always at P = 2, 4, 8 of
#: their own graph: METIS halo copies and EmbedPart's cuts (the halo twins, whose median
#: gives the defaults; papers100M has cuts alone), or Sylvie's halo volume where that is
#: the only target
FIT_PARTS = (2, 4, 8)
HALO_TWINS = ("synth-reddit-dgl", "synth-products", "synth-arxiv")
CUT_ONLY = ("synth-papers100m",)
VOLUME_ONLY = ("synth-yelp", "synth-amazon")
FIT_METRICS = ("halo_copies_per_vertex", "edge_cut_share")


def fit_targets(twin: str, targets) -> list[Target]:
    """The targets ``twin``'s locality fit holds: its volume for a twin of
    :data:`VOLUME_ONLY`, else its METIS halo copies and cuts (never vertex-cut
    statistics, never the checks of :attr:`Target.checked_only`)."""
    metrics = ("halo_volume_mb",) if twin in VOLUME_ONLY else FIT_METRICS
    return [t for t in targets if t.twin == twin and t.parts in FIT_PARTS
            and t.metric in metrics and not t.checked_only]

def volume_factor(graph: str) -> float:
    """Halo copies per vertex of the graph partitioned, per published MB."""
    s = VOLUME_SETTINGS[graph]
    return MB / (2.0 * s.syncs * s.hidden * FLOAT_BYTES * s.part_vertices)


def read_part_sends(path: str | Path) -> dict[tuple[str, int], list[int]]:
    """Per-part send counts of ``benchmarks/data/real_partition_parts.csv`` (columns
    ``graph, vertices, arcs, partitioner, parts, part, send_rows, source``): ``{(graph,
    P): [rows part 0 sends, ..., rows part P-1 sends]}`` (METIS rows only); every part of
    a (graph, P) must be there exactly once."""
    path = Path(path)
    if not path.is_file():
        raise CdfgnnError(f"{path}: per-part send counts file does not exist")
    got: dict[tuple[str, int], dict[int, int]] = {}
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                if row["partitioner"] != "metis":
                    continue
                key, part = (row["graph"], int(row["parts"])), int(row["part"])
                sends = got.setdefault(key, {})
                if part in sends or not 0 <= part < key[1]:
                    raise ValueError(f"part {part} repeated or outside 0..{key[1] - 1}")
                sends[part] = int(row["send_rows"])
            except (KeyError, ValueError) as exc:
                raise CdfgnnError(f"{path}: line {i}: bad row ({exc})") from None
    for (graph, p), sends in got.items():
        if len(sends) != p:
            raise CdfgnnError(f"{path}: {graph} at P = {p} has {len(sends)} parts")
    return {k: [v[q] for q in range(k[1])] for k, v in sorted(got.items())}


def read_targets(path: str | Path) -> list[Target]:
    """Every row of the CSV with a known metric (others, e.g. message counts, skipped)."""
    path = Path(path)
    if not path.is_file():
        raise CdfgnnError(f"{path}: targets file does not exist")
    out = []
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            if row.get("metric") not in METRICS:
                continue
            try:
                out.append(Target(row["graph"], int(row["vertices"]), int(row["arcs"]),
                                  row["partitioner"], row["metric"], int(row["parts"]),
                                  float(row["value"]), row["source"]))
            except (KeyError, ValueError) as exc:
                raise CdfgnnError(f"{path}: line {i}: bad row ({exc})") from None
    if not out:
        raise CdfgnnError(f"{path}: no target rows")
    return out
