"""Communication techniques as SyncStrategy plug-ins. Importing this package registers them."""
import importlib
import pkgutil

from cdfgnn.methods.base import METHODS, SyncKey, SyncStrategy, build_strategy

for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "base":
        importlib.import_module(f"{__name__}.{_mod.name}")

__all__ = ["METHODS", "SyncKey", "SyncStrategy", "build_strategy"]
