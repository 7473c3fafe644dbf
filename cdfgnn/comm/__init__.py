"""Communicators (thread and process backends), the launcher and the network cost model.

``launch(fn, world_size, topology=..., backend=...)`` runs ``fn(comm, *args)`` on
every rank; ``comm`` is a :class:`Communicator` whose traffic is accounted in
``comm.stats`` (see :mod:`cdfgnn.comm.base`). :class:`NetworkModel` turns that
traffic into modelled seconds.
"""
from __future__ import annotations

import importlib

# Each name is imported on first use (PEP 562), so that a module of this package that
# needs no torch (devices, tags, netns) can be imported without importing torch: the
# report jobs read device groups and message tags.
_WHERE = {
    "CommStats": "cdfgnn.comm.base", "Communicator": "cdfgnn.comm.base",
    "BACKENDS": "cdfgnn.comm.launcher", "launch": "cdfgnn.comm.launcher",
    "GB": "cdfgnn.comm.network", "NETWORK_PROFILES": "cdfgnn.comm.network",
    "LinkProfile": "cdfgnn.comm.network", "NetworkModel": "cdfgnn.comm.network",
    "ProcessCommunicator": "cdfgnn.comm.process",
    "ThreadCommunicator": "cdfgnn.comm.thread", "ThreadGroup": "cdfgnn.comm.thread",
    "CollectiveAbortedError": "cdfgnn.errors", "CollectiveTimeoutError": "cdfgnn.errors",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
