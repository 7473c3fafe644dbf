"""Vertex-cut partitioners (edge -> part). Importing this package registers all of them.

Every public module in this folder is imported in sorted name order, so a new
partitioner is one new module with an ``@partitioner(name, kind="vertex")`` function;
modules whose name starts with ``_`` are helpers and are not imported here.
"""
from __future__ import annotations

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
