"""Traffic tags: how the communicator's per-tag counters are named and classified.

A sync point's tag is ``<phase>/<direction>/<layer>`` (``SyncKey.tag`` in
:mod:`cdfgnn.methods.base`); the phases that move vertex rows are the edge-cut
halo exchange and the vertex-cut replica gather and scatter. Everything else
(``reduce``: the gradient all-reduce, ``eval``, ``precompute``, ...) is not vertex
traffic. The engine models vertex and reduce traffic apart (:mod:`cdfgnn.train.run`)
and reports count vertex bytes and rows by these prefixes.
"""

#: tag prefixes of the traffic that carries vertex rows (activations or gradients)
VERTEX_TAGS = ("halo/", "gather/", "scatter/")

