"""The dataset registry: one name -> one Graph, synthetic twins and real datasets alike.

See docs/architecture.md, Datasets. Synthetic twins (``synth-*``) are generated from
:mod:`cdfgnn.data.synthetic` (deterministic by ``seed``, sized by ``scale``). Real
datasets are read from ``<root>/<name with '-' -> '_'>/``: first the converted Graph
cache ``graph.npz``, else the raw files (read by :mod:`cdfgnn.data.real`, then cached),
else they are downloaded by :mod:`cdfgnn.data.download`. When that fails (offline) the
error names the synthetic twin to use instead.

The cache is trusted as is: delete ``graph.npz`` to rebuild it from changed raw files.
``scale`` and ``seed`` do not change a real dataset (Friendster's generated features and
labels use seed 0, so its cache is reproducible).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cdfgnn.data import download as dl
from cdfgnn.data import real
from cdfgnn.data.graph import Graph
from cdfgnn.data.synthetic import TWINS, generate_twin
from cdfgnn.errors import CorruptFileError, DatasetUnavailableError
from cdfgnn.registry import Registry

CACHE_FILE = "graph.npz"


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    kind: str                        # "synthetic" or "real"
    twin: str | None                 # real: its synthetic twin; synthetic: the real dataset
    build: Callable[[str | int, int, Path], Graph]


DATASETS: Registry[DatasetEntry] = Registry("dataset")


def get_graph(name: str, *, scale: str | int = "small", seed: int = 0,
              root: str | Path = "results/data") -> Graph:
    """The Graph of dataset ``name``; unknown names raise with the list of valid ones."""
    entry = DATASETS.get(name)
    return entry.build(scale, seed, Path(root))


def list_datasets(kind: str | None = None) -> list[str]:
    """Registered names, optionally only ``"synthetic"`` or ``"real"`` ones."""
    return [n for n in DATASETS.names() if kind is None or DATASETS.get(n).kind == kind]


def dataset_dir(name: str, root: str | Path) -> Path:
    """Folder of a real dataset under ``root`` (OGB's naming: ``ogbn-arxiv`` -> ``ogbn_arxiv``)."""
    return Path(root) / name.replace("-", "_")


# ------------------------------------------------------------------------ registration
def _register_twin(name: str) -> None:
    def build(scale: str | int, seed: int, root: Path) -> Graph:
        return generate_twin(name, scale, seed)
    DATASETS.register(name)(DatasetEntry(name, "synthetic", TWINS[name].twin_of, build))


def _register_real(name: str, twin: str, reader: Callable[[Path], Graph]) -> None:
    def build(scale: str | int, seed: int, root: Path) -> Graph:
        return _load_real(name, twin, reader, dataset_dir(name, root))
    DATASETS.register(name)(DatasetEntry(name, "real", twin, build))


def _load_real(name: str, twin: str, reader: Callable[[Path], Graph], ddir: Path) -> Graph:
    cache = ddir / CACHE_FILE
    if cache.is_file():
        return Graph.load(cache)
    lacking = dl.missing_files(name, ddir)
    if lacking:
        try:
            dl.fetch_dataset(name, ddir)
        except (dl.DownloadError, CorruptFileError) as exc:
            raise DatasetUnavailableError(
                f"{name} is not on disk ({dl.raw_dir_for(name, ddir)} lacks {', '.join(lacking)}) "
                f"and could not be downloaded ({exc}): use {twin} for offline runs") from None
    g = reader(dl.raw_dir_for(name, ddir))
    g.save(cache)
    return g


for _twin in TWINS:
    _register_twin(_twin)

_register_real("reddit", "synth-reddit", lambda raw: real.load_reddit(raw, "reddit"))
_register_real("flickr", "synth-flickr", lambda raw: real.load_graphsaint(raw, "flickr"))
_register_real("yelp", "synth-yelp", lambda raw: real.load_graphsaint(raw, "yelp"))
_register_real("amazon-products", "synth-amazon",
               lambda raw: real.load_graphsaint(raw, "amazon-products"))
for _ogb, _twin in (("ogbn-arxiv", "synth-arxiv"), ("ogbn-products", "synth-products"),
                    ("ogbn-papers100M", "synth-papers100m")):
    _register_real(_ogb, _twin, lambda raw, _n=_ogb: real.load_ogb_nodeprop(raw, _n))
_register_real("friendster", "synth-friendster",
               lambda raw: real.load_friendster(raw, "friendster", seed=0))
