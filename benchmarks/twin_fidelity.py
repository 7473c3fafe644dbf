"""How well the twins partition like the real graphs: every published target, measured.

Generates every twin that stands for a graph of ``benchmarks/data/real_partition_stats.csv``
at 100,000 vertices (``--nodes``; the medium scale), partitions it at every P of the
targets and prints one row per point: graph, twin, statistic (with the partitioner that
measures it), P, twin value, real value, ratio (twin / real), and whether P was used in
the twin's locality fit (``benchmarks/fit_twins.py``: P = 2, 4, 8 of the twin's own graph;
``in-fit`` marks the points of the fit's objective). How each statistic is measured on
the twin (:mod:`cdfgnn.twins.targets`):

* METIS halo copies per vertex: vertex-balanced METIS (DGL's default), seed 0;
* edge-cut share: METIS with training-vertex and edge balance (EmbedPart's DGL call);
* halo volume (MB per epoch, Sylvie Table 3): METIS with the volume objective on the
  graph the run partitions (inductive runs: the training subgraph), the halo copies per
  vertex scaled to the real graph's size and the run's layer widths;
* halo copies and edge-cut share of one partition (partitioner ``metis-vol``: Bajaj et
  al.'s PipeGCN logs, DGL's volume objective on the whole graph): METIS with the volume
  objective, vertex-balanced, seed 0; checks only, never in a fit's objective;
* vertex-cut replication factor (CDFGNN Table 3): the project's EBV (gamma 0 and 0.1),
  HEP and DNE on 2 hosts x P/2 devices.

A table of its own then compares how unevenly METIS spreads the halo over the parts:
per graph of ``benchmarks/data/real_partition_parts.csv`` with a twin and per P, the
send skew (max over parts / mean of the rows a part sends per layer, the column sums of
``halo_rows``; vertex-balanced METIS, seed 0, the whole graph) of the twin and of the
real graph, their ratio, and one summary line

    send skew: N points, median ratio R, within 25%: S%

(not part of the fitted / predicted lines: no fit's objective holds the skew).

Statistics are cached as JSON under ``--cache`` (default ``results/twins/fidelity``),
keyed by the generator version, the twin's specification, the vertex count and the
statistic, so a rerun only measures what changed. The last two lines are

    fitted: N points, median ratio R, within 25%: S%
    predicted: N points, median ratio R, within 25%: S%

("predicted": P values the twin's fit never saw), before them the worst ratio of each
twin and the CPU time. Usage: python benchmarks/twin_fidelity.py [--targets CSV]
[--parts CSV] [--nodes N] [--twins NAME ...] [--cache DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdfgnn.data.graph import Graph, csr_from_sorted_pairs  # noqa: E402
from cdfgnn.data.synthetic import FIT_COMMAND, GENERATOR, TWINS, twin_edges, twin_split  # noqa: E402
from cdfgnn.fileio import atomic_write_json  # noqa: E402
from cdfgnn.partition.api import partition_graph  # noqa: E402
from cdfgnn.partition.base import Topology  # noqa: E402
from cdfgnn.partition.stats import partition_stats  # noqa: E402
from cdfgnn.twins.measure import metis_counts, metis_values, part_sends, send_skew  # noqa: E402
from cdfgnn.twins.targets import (TWIN_OF, VERTEX_CUT, fit_targets,  # noqa: E402
                                  read_part_sends, read_targets, volume_factor)

DEFAULT_TARGETS = ROOT / "benchmarks" / "data" / "real_partition_stats.csv"
DEFAULT_PARTS = ROOT / "benchmarks" / "data" / "real_partition_parts.csv"
DEFAULT_CACHE = ROOT / "results" / "twins" / "fidelity"
BAND = 0.25
#: a statistic's cache key names its partitioner's version where that changed: "metis-dgl"
#: became 2 when its four balance constraints reached METIS (2026-11-28; pymetis passes
#: one, cdfgnn.partition.edgecut._kway_constraints), so values cached before are measured anew
MEASURE_VERSION = {"metis-dgl": 2}


def fitted_targets(name: str, targets) -> set:
    """The targets ``name``'s own locality fit held (:func:`fit_targets`); none for a twin
    whose parameters are not (yet) fitted to its graph (``TwinSpec.fitted`` does not name
    FIT_COMMAND): all its points are predictions."""
    return set(fit_targets(name, targets)) if TWINS[name].fitted.startswith(FIT_COMMAND) \
        else set()


class Twin:
    """One twin at n vertices: its graph is generated on first use; values are cached."""

    def __init__(self, name: str, n: int, cache_dir: Path):
        self.name, self.n = name, n
        spec = TWINS[name]
        blob = json.dumps({"generator": GENERATOR, "spec": asdict(spec), "n": n},
                          sort_keys=True, default=str)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self.path = cache_dir / f"{name}-n{n}-{key}.json"
        self.values: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self._graph: Graph | None = None

    def graph(self) -> Graph:
        if self._graph is None:
            spec = TWINS[self.name]
            src, dst, _ = twin_edges(spec, self.n, 0)
            indptr, indices = csr_from_sorted_pairs(src, dst, self.n)
            del src, dst
            train, val, test = twin_split(spec, self.n, 0)
            # partitioners read only the topology (and the split, for the balance)
            self._graph = Graph(indptr, indices, np.zeros((self.n, 1), np.float32),
                                np.zeros(self.n, np.int64), train, val, test, self.name, {})
        return self._graph

    def value(self, target) -> float:
        key = f"{target.metric}|{target.partitioner}|{target.parts}"
        pt = target.point()
        if pt is not None and pt.partitioner in MEASURE_VERSION:
            key += f"|{pt.partitioner}-v{MEASURE_VERSION[pt.partitioner]}"
        if key not in self.values:
            self.values[key] = self._measure(target)
            atomic_write_json(self.path, self.values)
        return self.values[key]

    def skew(self, parts: int) -> float:
        """Send skew of vertex-balanced METIS (seed 0) at P = ``parts``, whole graph."""
        key = f"send_skew|metis|{parts}"
        if key not in self.values:
            self._metis_halo(parts)
            atomic_write_json(self.path, self.values)
        return self.values[key]

    def _metis_halo(self, parts: int) -> float:
        """Halo copies per vertex of vertex-balanced METIS (seed 0) at P = ``parts``, whole
        graph; the send skew of the same partition is kept beside them (:meth:`skew`)."""
        g = self.graph()
        c = metis_counts(g.indptr, g.indices, [parts], seed=0)[parts]
        self.values[f"send_skew|metis|{parts}"] = send_skew(part_sends(c["halo_rows"]))
        return float(c["halo_copies_per_vertex"])

    def _measure(self, target) -> float:
        g = self.graph()
        if target.metric == "replication_factor":
            method, params = VERTEX_CUT[target.partitioner]
            topo = Topology(2, target.parts // 2)
            return float(partition_stats(g, partition_graph(g, method, topo, seed=0,
                                                            **params))["rf"])
        pt = target.point()
        if (pt.metric, pt.partitioner, pt.regime) == ("halo", "metis", "full"):
            return self._metis_halo(pt.parts)
        v = float(metis_values(g.indptr, g.indices, [pt], train=g.train)[0])
        return v / volume_factor(target.graph) if target.metric == "halo_volume_mb" else v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default=str(DEFAULT_TARGETS))
    ap.add_argument("--parts", default=str(DEFAULT_PARTS),
                    help="per-part METIS send counts of the real graphs")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--twins", nargs="+", help="only these twins (default: every one)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    args = ap.parse_args()
    targets = [t for t in read_targets(args.targets)
               if t.twin and 2 <= t.parts <= 64 and (not args.twins or t.twin in args.twins)]
    skipped = sorted({t.graph for t in read_targets(args.targets) if not t.twin})
    t0 = time.process_time()
    rows = []
    print(f"{'graph':18} {'twin':17} {'statistic':34} {'P':>3} {'twin':>10} {'real':>10} "
          f"{'ratio':>6} {'fit-P':>5} {'in-fit':>6}", flush=True)
    by_twin: dict[str, list] = {}
    for t in targets:
        by_twin.setdefault(t.twin, []).append(t)
    for name, ts in by_twin.items():
        twin = Twin(name, args.nodes, Path(args.cache))
        held = fitted_targets(name, ts)
        held_parts = {h.parts for h in held}
        for t in sorted(ts, key=lambda t: (t.metric, t.partitioner, t.parts)):
            got = twin.value(t)
            fit_p = t.parts in held_parts
            in_fit = t in held
            ratio = got / t.value
            rows.append((name, ratio, fit_p))
            pt = t.point()
            stat = f"{t.metric} ({pt.partitioner if pt else t.partitioner})"
            print(f"{t.graph:18} {name:17} {stat:34} {t.parts:>3} {got:>10.4g} {t.value:>10.4g} "
                  f"{ratio:>6.3f} {'yes' if fit_p else 'no':>5} {'yes' if in_fit else 'no':>6}",
                  flush=True)
    if skipped:
        print(f"graphs without a twin (not measured): {', '.join(skipped)}")
    for name in by_twin:
        r = [x for n, x, _ in rows if n == name]
        worst = max(r, key=lambda x: abs(np.log(x)))
        print(f"worst ratio {name}: {worst:.3f} ({len(r)} points)")
    skew_table(read_part_sends(args.parts), args)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"{time.process_time() - t0:.0f} s CPU (cached values are not re-measured), peak "
          f"memory {rss:.2f} GB, twins at {args.nodes} vertices")
    for label, fit in (("fitted", True), ("predicted", False)):
        print(band_line(label, [x for _, x, f in rows if f == fit]))


def band_line(label: str, ratios) -> str:
    """``<label>: N points, median ratio R, within 25%: S%`` of twin / real ratios."""
    r = np.asarray(ratios, dtype=np.float64)
    if r.size == 0:
        return f"{label}: 0 points, median ratio nan, within 25%: nan%"
    within = 100.0 * np.mean(np.abs(r - 1.0) <= BAND)
    return f"{label}: {r.size} points, median ratio {np.median(r):.3f}, within 25%: {within:.0f}%"


def skew_table(real: dict[tuple[str, int], list[int]], args) -> None:
    """The send-skew table and its summary line (module docstring)."""
    print(f"{'graph':18} {'twin':17} {'P':>3} {'twin skew':>10} {'real skew':>10} {'ratio':>6}")
    ratios = []
    twins: dict[str, Twin] = {}
    for (graph, p), sends in real.items():
        name = TWIN_OF.get(graph)
        if name is None or not 2 <= p <= 64 or (args.twins and name not in args.twins):
            continue
        twin = twins.setdefault(name, Twin(name, args.nodes, Path(args.cache)))
        got, want = twin.skew(p), send_skew(sends)
        ratios.append(got / want)
        print(f"{graph:18} {name:17} {p:>3} {got:>10.3f} {want:>10.3f} {got / want:>6.3f}",
              flush=True)
    print(band_line("send skew", ratios))


if __name__ == "__main__":
    main()
