"""What each named option accepts: the registered methods, partitioners, datasets, models,
network profiles and device profiles, for help texts and `cdfgnn list`.

Each catalogue is a function that imports its registry when called, so building the
command line stays quick: `cdfgnn train --help` calls them only when it prints.
"""
from __future__ import annotations

from typing import Callable


def methods() -> list[str]:
    """Every registered method (``--method``; hidden variants included: they are valid)."""
    import cdfgnn.methods  # noqa: F401  (registers every method module)
    from cdfgnn.methods.base import METHODS

    return METHODS.names()


def partitioners() -> list[str]:
    from cdfgnn.partition.api import ensure_registered
    from cdfgnn.partition.base import PARTITIONERS

    ensure_registered()
    return PARTITIONERS.names()


def datasets() -> list[str]:
    from cdfgnn.data.datasets import DATASETS

    return DATASETS.names()


def models() -> list[str]:
    from cdfgnn.models import MODELS

    return list(MODELS)


def networks() -> list[str]:
    """Network profiles by name (``--network`` also takes a YAML file)."""
    from cdfgnn.comm.network import NETWORK_PROFILES

    return NETWORK_PROFILES.names() + ["FILE.yaml"]


def devices() -> list[str]:
    """Device profiles (``--devices``): the GPU profiles, CaPGNN Table 1's measured cards,
    CaPGNN Table 4's groups, or a YAML file (``cdfgnn profile`` writes one)."""
    from cdfgnn.pricing.devices import DEVICE_PROFILES, GROUPS
    from cdfgnn.pricing.hardware import registered

    names = list(registered())
    names += [n for n in DEVICE_PROFILES.names() if n not in names]
    return names + list(GROUPS) + ["table4", "FILE.yaml"]


def reports() -> list[str]:
    from cdfgnn.report.registry import discover

    return discover().names()


#: catalogue name -> lister (the keys `cdfgnn list` accepts)
CATALOGUES: dict[str, Callable[[], list[str]]] = {
    "methods": methods, "partitioners": partitioners, "datasets": datasets,
    "models": models, "networks": networks, "devices": devices, "reports": reports}


def valid_text(name: str, limit: int = 0) -> str:
    """``"valid: a, b, c"`` for catalogue ``name`` (at most ``limit`` names, then a count
    and the `cdfgnn list NAME` command; 0: all)."""
    names = CATALOGUES[name]()
    shown = names if not limit or len(names) <= limit else names[:limit]
    more = "" if len(shown) == len(names) else \
        f", ... ({len(names)} in all: `cdfgnn list {name}`)"
    return "valid: " + ", ".join(shown) + more
