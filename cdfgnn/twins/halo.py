"""Halo rows of a dataset's twin under METIS, for models that price halo traffic.

:func:`twin_halo` answers, for the twin of a named dataset at P parts and a training
regime, the rows each part owns and the distinct halo rows it needs from every other
part, from METIS on the twin at ``nodes`` vertices (100,000 by default: the scale at
which the twins match the real graphs' METIS halo copies per vertex, docs/twins.md).
Counts are per twin vertex; :attr:`TwinHalo.scale` (real vertices / twin vertices)
takes them to the real graph's size, so that halo rows at full size = ``halo_rows *
scale``: the halo copies per vertex are what the twin matches, so the row counts scale
with the vertex ratio.

Regimes: ``"transductive"``, the whole graph is partitioned; ``"inductive"``, only the
subgraph induced by the training vertices (the twin's split), as inductive trainers
(GraphSAINT's datasets in Sylvie, BNS-GCN, PipeGCN) partition it.

Results are cached as JSON under ``cache_dir`` (default ``results/twins/halo``), keyed by
the generator version, the twin's full specification, ``nodes``, ``seed``, the regime,
P and the METIS objective, so a changed twin never reads a stale count.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cdfgnn.data.graph import csr_from_sorted_pairs
from cdfgnn.data.synthetic import GENERATOR, TWINS, twin_edges, twin_split
from cdfgnn.errors import CdfgnnError
from cdfgnn.fileio import atomic_write_json
from cdfgnn.partition.edgecut import metis_node_parts
from cdfgnn.partition.locality import share_of_reads
from cdfgnn.partition.stats import halo_counts
from cdfgnn.twins.measure import induced

REGIMES = ("transductive", "inductive")
DEFAULT_NODES = 100_000
DEFAULT_CACHE = Path("results") / "twins" / "halo"
#: what a cached count holds (2: each part's column locality, ``arc_share``)
COUNTS_VERSION = 2


@dataclass(frozen=True)
class TwinHalo:
    """METIS partition counts of a twin (per twin vertex; multiply by ``scale``)."""

    dataset: str                 # twin name
    parts: int
    regime: str
    objective: str               # METIS objective: "cut" or "vol"
    nodes: int                   # vertices of the twin generated
    part_nodes: int              # vertices partitioned (nodes, or the training subgraph)
    arcs: int                    # arcs of the graph partitioned
    scale: float                 # real vertices / twin vertices (1.0 without a real size)
    owned: list[int]             # rows owned by each part
    labelled: list[int]          # training rows owned by each part
    inner_arcs: list[int]        # arcs into part r whose source r owns
    halo_arcs: list[int]         # arcs into part r whose source another part owns
    halo_rows: list[list[int]]   # [r][q]: distinct rows part r needs from part q
    arc_share: list              # per part: its aggregation matrix's column locality

    @property
    def halo_rows_per_owned_row(self) -> list[float]:
        """Per part: distinct halo rows it receives / rows it owns."""
        h = np.asarray(self.halo_rows, dtype=np.float64)
        return (h.sum(axis=1) / np.maximum(np.asarray(self.owned), 1)).tolist()

    @property
    def halo_copies_per_vertex(self) -> float:
        """All halo rows / vertices partitioned (the statistic the twins are fitted to)."""
        return float(np.asarray(self.halo_rows).sum()) / max(self.part_nodes, 1)


def twin_halo(dataset: str, parts: int, regime: str = "transductive", *,
              nodes: int = DEFAULT_NODES, seed: int = 0, objective: str = "cut",
              cache_dir: str | Path | None = DEFAULT_CACHE,
              graphs: dict | None = None) -> TwinHalo:
    """METIS (``metis_node_parts``, seed 0) counts of ``dataset``'s twin (a key of
    ``TWINS``, e.g. ``synth-reddit-dgl`` for DGL's Reddit) at ``parts`` parts; cached.
    ``graphs``: a dict the caller keeps to reuse a generated twin (and its training
    subgraph) for several P, where many counts are built in one process."""
    if dataset not in TWINS:
        raise CdfgnnError(f"unknown twin {dataset!r}; valid: {', '.join(sorted(TWINS))}")
    if regime not in REGIMES:
        raise CdfgnnError(f"regime must be one of {REGIMES}, got {regime!r}")
    if int(parts) < 1:
        raise CdfgnnError(f"parts must be >= 1, got {parts!r}")
    spec = TWINS[dataset]
    key = _key(spec, nodes, seed, regime, int(parts), objective)
    path = Path(cache_dir) / f"{dataset}-{regime}-p{int(parts)}-{key}.json" if cache_dir else None
    if path is not None and path.is_file():
        return TwinHalo(**json.loads(path.read_text()))
    graph_key = (dataset, nodes, seed, regime)
    if graphs is not None and graph_key in graphs:
        indptr, indices, labelled = graphs[graph_key]
    else:
        indptr, indices, labelled = _partitioned_graph(spec, nodes, seed, regime)
        if graphs is not None:
            graphs[graph_key] = (indptr, indices, labelled)
    node_parts = metis_node_parts(indptr, indices, int(parts), seed=0, objective=objective)
    c = halo_counts(indptr, indices, node_parts, int(parts), labelled=labelled)
    counts = {k: c[k] for k in ("owned", "labelled", "inner_arcs", "halo_arcs", "halo_rows")}
    counts["arc_share"] = part_arc_shares(indptr, indices, node_parts, int(parts))
    real = spec.real_num_nodes
    out = TwinHalo(dataset=dataset, parts=int(parts), regime=regime, objective=objective,
                   nodes=nodes, part_nodes=int(indptr.shape[0] - 1),
                   arcs=int(indices.shape[0]), scale=(real / nodes) if real else 1.0, **counts)
    if path is not None:
        atomic_write_json(path, asdict(out))
    return out


def part_arc_shares(indptr: np.ndarray, indices: np.ndarray, node_parts: np.ndarray,
                    p: int) -> list:
    """Per part, the column locality (:func:`cdfgnn.partition.locality.share_of_reads`) of its
    aggregation matrix: rows its vertices, columns its vertices and their halo, one read
    per arc into its rows and one per self loop (the GCN aggregation's)."""
    n = indptr.shape[0] - 1
    node_parts = np.asarray(node_parts, dtype=np.int64)
    row_part = np.repeat(node_parts, np.diff(indptr))
    # the arcs grouped by the part of their row once, then one bincount per part's slice
    order = np.argsort(row_part, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(row_part, minlength=p))]
    out = []
    for r in range(p):
        reads = np.bincount(indices[order[bounds[r]:bounds[r + 1]]], minlength=n)
        reads[node_parts == r] += 1          # a self loop per row: every own column is read
        out.append(share_of_reads(reads[reads > 0]))
    return out


def _partitioned_graph(spec, nodes: int, seed: int, regime: str):
    """CSR of the graph a regime partitions (the twin, or its training subgraph) and
    which of its vertices are labelled."""
    src, dst, _ = twin_edges(spec, nodes, seed)
    indptr, indices = csr_from_sorted_pairs(src, dst, nodes)
    del src, dst
    train = twin_split(spec, nodes, seed)[0]
    if regime == "inductive":
        indptr, indices = induced(indptr, indices, train)
        return indptr, indices, np.ones(indptr.shape[0] - 1, dtype=bool)
    return indptr, indices, train


def _key(spec, nodes: int, seed: int, regime: str, parts: int, objective: str) -> str:
    blob = json.dumps({"generator": GENERATOR, "spec": asdict(spec), "nodes": nodes,
                       "seed": seed, "regime": regime, "parts": parts,
                       "objective": objective, "counts": COUNTS_VERSION},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
