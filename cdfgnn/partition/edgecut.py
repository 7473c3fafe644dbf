"""Edge-cut (vertex -> part) partitioners: METIS and a balanced random baseline.

CoFree-GNN (arXiv 2308.03209) Table 4, "Edge Cut" row (METIS node partition as the contrast case),
CDFGNN (arXiv 2408.00232; METIS appears only in its related work) and docs/architecture.md
(edge-cut partitionings feed the halo-exchange methods: BNS-GCN, PipeGCN, ...).

``metis``
    ``pymetis.part_graph`` on the graph's symmetric CSR (unit vertex and edge weights),
    multilevel k-way (``recursive=False``, the ``gpmetis`` default and what DistDGL
    uses) for both objectives:

    * ``objective="cut"`` (default): minimise the number of cut edges;
    * ``objective="vol"``: minimise the total communication volume, i.e.
      sum over vertices of the number of *other* parts among its neighbours -- the
      halo rows an edge-cut method exchanges. METIS supports it only in k-way mode.

    Vertex weights (``vweights``, ``n x ncon`` vertex-major) give ncon balance
    constraints; more than one goes through :func:`_kway_constraints`, since pymetis
    passes only one.

    The seed is passed as METIS's ``seed`` option, which makes the result
    deterministic for a given graph, seed and pymetis build. METIS k-way can leave a
    part empty on tiny graphs; each empty part then takes the highest-id vertex of the
    largest part (only ever triggered on such degenerate inputs). ``ufactor`` (METIS's load
    imbalance tolerance in 1/1000, default 30 -> max part <= 1.03 x mean) can be set.
    A graph without edges is dealt like ``random`` (METIS has nothing to cut, and some
    builds leave parts empty there).

``random``
    A seeded uniform permutation of the vertices dealt round-robin: part sizes differ
    by at most one, every vertex equally likely in every part.
"""
from __future__ import annotations

import operator

import numpy as np

from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError
from cdfgnn.partition.base import Topology, check_seed, partitioner

_TAG_RANDOM = 0x524E44  # "RND"
_TAG_METIS = 0x4D4554  # "MET"
OBJECTIVES = ("cut", "vol")


def _check_inputs(name: str, graph: Graph, topology: Topology, params: dict) -> int:
    if not isinstance(graph, Graph):
        raise CdfgnnError(f"partitioner {name!r}: expected a Graph, got {type(graph).__name__}")
    if not isinstance(topology, Topology):
        raise CdfgnnError(f"partitioner {name!r}: expected a Topology, got {type(topology).__name__}")
    if params:
        raise CdfgnnError(f"partitioner {name!r}: unknown parameter(s) {sorted(params)}")
    return topology.num_parts


def round_robin_parts(n: int, p: int, seed: int, tag: int = _TAG_RANDOM) -> np.ndarray:
    """Seeded permutation of ``n`` vertices dealt round-robin to ``p`` parts (int64 [n])."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, tag])))
    parts = np.empty(n, dtype=np.int64)
    parts[rng.permutation(n)] = np.arange(n, dtype=np.int64) % p
    return parts


def metis_node_parts(indptr: np.ndarray, indices: np.ndarray, p: int, *, seed: int,
                     objective: str = "cut", ufactor: int | None = None,
                     vweights: np.ndarray | None = None) -> np.ndarray:
    """METIS k-way node partition of a symmetric, self-loop-free CSR graph (int64 [n]).

    ``vweights``: METIS vertex weights, ``n * ncon`` integers (vertex-major) for ncon
    balance constraints (default: every vertex weighs 1)."""
    if objective not in OBJECTIVES:
        raise CdfgnnError(f"partitioner 'metis': objective must be one of {list(OBJECTIVES)}, "
                          f"got {objective!r}")
    n = indptr.shape[0] - 1
    if p == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if indices.shape[0] == 0:
        return round_robin_parts(n, p, seed, _TAG_METIS)
    # imported here: the rest of the package, and one part, do not need it (a GPU machine
    # without pymetis still trains on one worker: benchmarks/gpu_check.sh)
    import pymetis

    obj = pymetis.ObjType.VOL if objective == "vol" else pymetis.ObjType.CUT
    ncon = 1 if vweights is None else len(vweights) // max(n, 1)
    if vweights is not None and (ncon < 1 or ncon * n != len(vweights)):
        raise CdfgnnError(f"partitioner 'metis': vweights must hold n x ncon = {n} x ncon "
                          f"integers, got {len(vweights)}")
    if ncon > 1:
        parts = _kway_constraints(indptr, indices, p, np.asarray(vweights), ncon,
                                  seed=seed, objtype=int(obj), ufactor=ufactor)
    else:
        opts = pymetis.Options(seed=int(seed), objtype=int(obj))
        if ufactor is not None:
            opts.ufactor = int(ufactor)
        result = pymetis.part_graph(p, pymetis.CSRAdjacency(indptr, indices), recursive=False,
                                    options=opts, vweights=vweights)
        parts = np.asarray(result.vertex_part, dtype=np.int64)
    _fill_empty_parts(parts, p)
    return parts


#: METIS_NOPTIONS of METIS 5.1 and 5.2 (the options array's length)
_METIS_NOPTIONS = 40


def _kway_constraints(indptr: np.ndarray, indices: np.ndarray, p: int, vweights: np.ndarray,
                      ncon: int, *, seed: int, objtype: int, ufactor: int | None) -> np.ndarray:
    """METIS k-way with ``ncon`` balance constraints (vertex-major ``vweights``).

    ``pymetis.part_graph`` always passes one constraint (``ncon = 1``: pymetis's
    src/wrapper/wrapper.cpp), so a weight array of ``n x ncon`` would be read as the
    weights of the first vertices. DGL's ``metis_partition_assignment(balance_ntypes=...,
    balance_edges=True)`` passes every constraint; this calls the same METIS entry point,
    ``METIS_PartGraphKway``, from the METIS that pymetis bundles and exports, with the
    option indices pymetis reads from it (``pymetis._internal.options_indices``)."""
    import ctypes

    import pymetis._internal as metis_lib

    idx = {32: ctypes.c_int32, 64: ctypes.c_int64}[metis_lib._idx_type_width()]
    np_idx = np.int32 if idx is ctypes.c_int32 else np.int64
    lib = ctypes.CDLL(metis_lib.__file__)
    n = indptr.shape[0] - 1
    xadj = np.ascontiguousarray(indptr, dtype=np_idx)
    adjncy = np.ascontiguousarray(indices, dtype=np_idx)
    vwgt = np.ascontiguousarray(vweights, dtype=np_idx)
    options = (idx * _METIS_NOPTIONS)()
    lib.METIS_SetDefaultOptions(options)
    where = metis_lib.options_indices
    options[where.OBJTYPE] = objtype
    options[where.SEED] = int(seed)
    options[where.NUMBERING] = 0
    if ufactor is not None:
        options[where.UFACTOR] = int(ufactor)
    nvtxs, ncon_c, nparts, edgecut = idx(n), idx(ncon), idx(p), idx(0)
    part = np.empty(n, dtype=np_idx)
    ptr = lambda a: a.ctypes.data_as(ctypes.POINTER(idx))  # noqa: E731
    status = lib.METIS_PartGraphKway(
        ctypes.byref(nvtxs), ctypes.byref(ncon_c), ptr(xadj), ptr(adjncy), ptr(vwgt), None,
        None, ctypes.byref(nparts), None, None, options, ctypes.byref(edgecut), ptr(part))
    if status != 1:                                    # METIS_OK
        raise CdfgnnError(f"partitioner 'metis': METIS_PartGraphKway with {ncon} balance "
                          f"constraints failed (status {status})")
    return part.astype(np.int64)


def _fill_empty_parts(parts: np.ndarray, p: int) -> None:
    """Give every empty part one vertex (the highest id) of the currently largest part.

    METIS k-way can leave parts empty on tiny or very uneven graphs; an edge-cut worker
    without vertices has nothing to train on, so each gets one while vertices allow.
    """
    sizes = np.bincount(parts, minlength=p)
    for empty in np.flatnonzero(sizes == 0):
        donor = int(np.argmax(sizes))
        if sizes[donor] < 2:
            break
        v = int(np.flatnonzero(parts == donor)[-1])
        parts[v] = empty
        sizes[donor] -= 1
        sizes[empty] += 1


@partitioner("metis", kind="edge")
def metis(graph: Graph, topology: Topology, *, seed: int, objective: str = "cut",
          ufactor: int | None = None, **params) -> np.ndarray:
    """METIS node -> part assignment (int64 [N]); ``objective`` "cut" or "vol"."""
    p = _check_inputs("metis", graph, topology, params)
    seed = check_seed("metis", seed)
    if ufactor is not None:
        try:
            ufactor = operator.index(ufactor)
        except TypeError:
            raise CdfgnnError(f"partitioner 'metis': ufactor must be an integer, got {ufactor!r}") from None
        if ufactor < 1:
            raise CdfgnnError(f"partitioner 'metis': ufactor must be >= 1, got {ufactor}")
    return metis_node_parts(graph.indptr, graph.indices, p, seed=seed, objective=objective,
                            ufactor=ufactor)


@partitioner("random-nodes", kind="edge")
def random_nodes(graph: Graph, topology: Topology, *, seed: int, **params) -> np.ndarray:
    """Balanced random node -> part assignment (int64 [N])."""
    p = _check_inputs("random-nodes", graph, topology, params)
    return round_robin_parts(graph.num_nodes, p, check_seed("random-nodes", seed))
