"""Communicators (thread and process backends), the launcher and the network cost model.

``launch(fn, world_size, topology=..., backend=...)`` runs ``fn(comm, *args)`` on
every rank; ``comm`` is a :class:`Communicator` whose traffic is accounted in
``comm.stats`` (see :mod:`cdfgnn.comm.base`). :class:`NetworkModel` turns that
traffic into modelled seconds.
"""
from cdfgnn.comm.base import CommStats, Communicator
from cdfgnn.comm.launcher import BACKENDS, launch
from cdfgnn.comm.network import GB, NETWORK_PROFILES, LinkProfile, NetworkModel
from cdfgnn.comm.process import ProcessCommunicator
from cdfgnn.comm.thread import ThreadCommunicator, ThreadGroup
from cdfgnn.errors import CollectiveAbortedError, CollectiveTimeoutError

__all__ = [
    "BACKENDS", "GB", "NETWORK_PROFILES", "CollectiveAbortedError", "CollectiveTimeoutError",
    "CommStats", "Communicator", "LinkProfile", "NetworkModel", "ProcessCommunicator",
    "ThreadCommunicator", "ThreadGroup", "launch",
]
