"""``cofree``: CoFree-GNN, communication-free training on a vertex cut (arXiv 2308.03209).

Every part is trained as an independent graph: each replica of a vertex carries its
features and label, aggregates over its **local** neighbours only (local degrees in
the normalisation, its own self term and bias), and no feature or gradient row
crosses parts. Only the weight gradients are all-reduced (the engine's one
all-reduce), so a rank may hold several parts (gradients accumulate,
as the paper simulates 256 parts for Tables 3-4).

Parameters:

* ``reweight``: the loss weight of replica ``v[i]`` of training vertex ``v``:
  ``dar`` (default, Degree-Aware Reweighting, ``D(v[i]) / D(v)``, computed once from
  the unmasked degrees), ``none`` (1 on every replica) or ``inv-rf`` (``1 / RF(v)``).
  A replica is a part holding at least one edge of ``v``; an isolated vertex lives
  only at its master, with weight 1 (the paper does not say; 0/0 := 1). The loss is then the
  weighted sum over the global number of training vertices (eq. 3
  is a plain sum; we choose the scale), so on one
  part every scheme equals full-graph training.
* ``dropedge_k``: DropEdge-K, ``K`` precomputed edge masks per part, one drawn
  uniformly per iteration (training only); 0 (default) switches it off.
  ``drop_ratio`` is the fraction of undirected local edges each mask drops (both arcs
  together); aggregation is the mean over the surviving edges (no 1/(1-p) rescale),
  one mask is shared by all layers (the paper does not say; we choose).
* ``dropedge_resample``: draw a fresh mask every iteration instead of cycling
  through K precomputed ones ("naive DropEdge", the speed baseline of DropEdge-K).

* ``eval``: ``full-graph`` (default; the paper does not say how it
  evaluates; we choose): one-process full-graph inference
  with the trained weights (``full_graph_eval``); ``per-part``: every part infers on
  its own local graph (the training view without DropEdge) and the logits of a
  vertex's replicas are averaged at its master with the reweighting's weights
  (``sum_p w_{v,p} logits_{v,p}`` with the weights normalised to sum to 1: DAR's
  ``D(v[i]) / D(v)``, inv-rf's ``1 / RF``, none: the plain mean), metrics counted once
  per vertex (``per_part_eval``; ``cdfgnn.train.per_part_eval``).
"""
from __future__ import annotations

import threading

import numpy as np
import torch

from cdfgnn.errors import CdfgnnError
from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncStrategy
from cdfgnn.partition.stats import replication_counts

REWEIGHTS = ("dar", "none", "inv-rf")
EVALS = ("full-graph", "per-part")
MASK_SALT = 0x4D41534B   # "MASK": the DropEdge-K masks' RNG stream

_RF_CACHE: dict[int, tuple[object, np.ndarray]] = {}
_RF_LOCK = threading.Lock()


def _cached_rf(graph, partitioning) -> np.ndarray:
    """One RF computation per partitioning object (a rank holding many parts shares it)."""
    with _RF_LOCK:
        hit = _RF_CACHE.get(id(partitioning))
        if hit is not None and hit[0] is partitioning:
            return hit[1]
        rf = replication_counts(graph, partitioning)
        _RF_CACHE.clear()
        _RF_CACHE[id(partitioning)] = (partitioning, rf)
        return rf


def loss_weights(reweight: str, local_deg: np.ndarray, global_deg: np.ndarray,
                 rf: np.ndarray | None = None) -> np.ndarray:
    """Per local row: the replica's loss weight (0 on a row that holds none of v's edges
    unless v is isolated)."""
    local_deg = local_deg.astype(np.float64)
    global_deg = global_deg.astype(np.float64)
    isolated = global_deg == 0
    present = (local_deg > 0) | isolated
    if reweight == "dar":
        w = np.where(isolated, 1.0, local_deg / np.maximum(global_deg, 1.0))
    elif reweight == "none":
        w = np.ones_like(local_deg)
    elif reweight == "inv-rf":
        if rf is None:
            raise CdfgnnError("reweight 'inv-rf' needs the replication counts")
        w = 1.0 / np.maximum(rf.astype(np.float64), 1.0)
    else:
        raise CdfgnnError(f"unknown reweighting {reweight!r}; valid: {', '.join(REWEIGHTS)}")
    return np.where(present, w, 0.0)


def dropedge_masks(indptr: np.ndarray, indices: np.ndarray, k: int, ratio: float,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` keep-masks over the arcs of a symmetric CSR; both arcs of an undirected
    edge are kept or dropped together."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    lo, hi = np.minimum(rows, indices), np.maximum(rows, indices)
    _, edge = np.unique(lo * (len(indptr) - 1) + hi, return_inverse=True)
    n_edges = int(edge.max()) + 1 if edge.size else 0
    return [(rng.random(n_edges) >= ratio)[edge] for _ in range(k)]


def masked_csr(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    out = np.zeros_like(indptr)
    np.cumsum(np.bincount(rows[keep], minlength=len(indptr) - 1), out=out[1:])
    return out, indices[keep]


#: why CoFree has no setting that equals ``exact`` (``SyncStrategy.degenerate``)
COMMUNICATION_FREE = ("communication-free: a part never sees the rows of its neighbours on "
                      "other parts, so at P > 1 it trains another model by design (it equals "
                      "the oracle at P = 1 only, tests/test_cofree.py)")


@METHODS.register("cofree")
class CoFree(SyncStrategy):
    name = "cofree"
    degenerate = Degenerate(None, "vertex", reason=COMMUNICATION_FREE)
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "vertex"
    communication_free = True
    full_graph_eval = True
    default_partitioner = "ne"
    PARAMS = {
        "reweight": Param("dar", str, choices=REWEIGHTS,
                          doc="loss weight of a replica: dar (D(v[i])/D(v)), none, inv-rf (1/RF)"),
        "dropedge_k": Param(0, int, check=lambda k: k >= 0,
                            expect="an integer >= 0 (0: DropEdge-K off)",
                            doc="DropEdge-K: precomputed edge masks per part (0: off)"),
        "drop_ratio": Param(0.5, float, check=lambda r: 0.0 <= r < 1.0, expect="in [0, 1)",
                            doc="DropEdge-K: fraction of local edges each mask drops"),
        "dropedge_resample": Param(False, bool,
                                   doc="draw a fresh mask every iteration (naive DropEdge)"),
        "eval": Param("full-graph", str, choices=EVALS,
                      doc="evaluation: full-graph inference, or per-part inference with "
                          "the replicas' logits averaged by the reweighting's weights"),
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.per_part_eval = self.params["eval"] == "per-part"
        self.full_graph_eval = not self.per_part_eval

    def check_params(self) -> None:
        if self.params["dropedge_resample"] and self.params["dropedge_k"] < 1:
            raise CdfgnnError(f"method {self.name!r}: dropedge_resample=true needs "
                              f"dropedge_k >= 1, got dropedge_k={self.params['dropedge_k']}")

    def setup(self, ctx) -> None:
        super().setup(ctx)
        book = ctx.book
        self._indptr, self._indices = book.adj_indptr, book.adj_indices
        self._deg = np.diff(book.adj_indptr)
        rf = None
        if self.params["reweight"] == "inv-rf":
            part = ctx.partitioning
            if part is None:
                raise CdfgnnError("cofree reweight=inv-rf needs the partitioning in the "
                                  "rank context")
            rf = _cached_rf(ctx.graph, part)[book.local_nodes]
        w = loss_weights(self.params["reweight"], self._deg, book.global_degree, rf)
        # the loss weights multiply rows on the run's device
        self.weights = torch.from_numpy(w.astype(np.float32)).to(ctx.device)
        self._masks: list[np.ndarray] = []
        self._views: dict = {}
        k = self.params["dropedge_k"]
        if k and not self.params["dropedge_resample"]:
            # seeded by (seed, part) only: the same masks in every process and run
            rng = np.random.default_rng([ctx.seed, ctx.part, MASK_SALT])
            self._masks = dropedge_masks(self._indptr, self._indices, k,
                                         self.params["drop_ratio"], rng)

    def _view(self, base, key, indptr, indices):
        deg = np.diff(indptr)
        return base.but(key=key, indptr=indptr, indices=indices, row_deg=deg, col_deg=deg,
                        self_rows=base.num_out, sync=False, loss_weight=self.weights)

    def prebuilt_views(self, view) -> list:
        """The local view and, with DropEdge-K, its K masked views (built before epoch 0)."""
        k = self.params["dropedge_k"]
        if not k or self.params["dropedge_resample"]:
            return [] if k else [self.local_view(view, True)]
        return [self._masked(view, j) for j in range(k)]

    def _masked(self, view, j: int):
        if j not in self._views:
            self._views[j] = masked_csr(self._indptr, self._indices, self._masks[j])
        return self._view(view, ("cofree-dropedge", j), *self._views[j])

    def replica_eval_weights(self) -> torch.Tensor:
        return self.weights

    def count_key(self, epoch: int):
        """No exchange; a pass's kernels follow its view (the engine's key holds it):
        one key."""
        return ()

    def local_view(self, view, training: bool):
        if not training:
            if self.per_part_eval:  # the local graph, never DropEdge's masks
                return self._view(view, ("cofree", view.key), self._indptr, self._indices)
            return view
        k = self.params["dropedge_k"]
        if not k:
            return self._view(view, ("cofree", view.key), self._indptr, self._indices)
        if self.params["dropedge_resample"]:
            rng = np.random.default_rng([self.ctx.seed, self.ctx.part, self.epoch, 1])
            keep = dropedge_masks(self._indptr, self._indices, 1, self.params["drop_ratio"],
                                  rng)[0]
            return self._view(view, ("cofree-resample", self.epoch),
                              *masked_csr(self._indptr, self._indices, keep))
        j = int(np.random.default_rng([self.ctx.seed, self.ctx.part, self.epoch]).integers(k))
        return self._masked(view, j)


@METHODS.register("cofree-edgecut")
class CoFreeEdgeCut(SyncStrategy):
    """The "Edge Cut" row of CoFree Table 4 (the paper does not say if halos
    or weights were kept; we keep neither): a node partition (METIS), each
    part trained alone on its induced subgraph (cross edges dropped, no halo rows, local
    degrees), every vertex once (its owner), weight 1; Cluster-GCN-style partition
    training with the weight gradients all-reduced. ``reweight=dar`` weights a vertex's
    loss by its kept degree over its global degree instead (the paper does not say which
    weights its Table 4 row used; see docs/fidelity.md, case 5)."""

    name = "cofree-edgecut"
    degenerate = Degenerate(None, reason=COMMUNICATION_FREE)
    supported_devices = ("cpu", "cuda")   # host CSR views, matrices built on the device
    partition_kind = "edge"
    communication_free = True
    full_graph_eval = True
    default_partitioner = "metis"
    PARAMS = {
        "reweight": Param("none", str, choices=("none", "dar"),
                          doc="loss weight of an owned training vertex: none (1; arXiv "
                              "2308.03209 names no weights for its edge cut) or dar (its "
                              "induced-subgraph degree over its global degree, DAR applied "
                              "to the vertex's single copy)"),
    }

    def setup(self, ctx) -> None:
        super().setup(ctx)
        book = ctx.book
        keep = book.adj_indices < book.num_owned
        self._csr = masked_csr(book.adj_indptr, book.adj_indices, keep)
        self.weights = None   # the engine's default: 1 on every owned row
        if self.params["reweight"] == "dar":
            # DAR's D(v[i]) / D(v) on the one copy each vertex has: the edges the cut kept
            # over all its edges (cross edges count in D(v), not in D(v[i]))
            owned = book.num_owned
            w = np.zeros(book.num_local, dtype=np.float64)
            w[:owned] = loss_weights("dar", np.diff(self._csr[0])[:owned],
                                     book.global_degree[:owned])
            # the loss weights multiply rows on the run's device
            self.weights = torch.from_numpy(w.astype(np.float32)).to(ctx.device)

    def prebuilt_views(self, view) -> list:
        return [self.local_view(view, True)]

    def count_key(self, epoch: int):
        """No exchange, one induced subgraph: one key."""
        return ()

    def local_view(self, view, training: bool):
        if not training:
            return view
        indptr, indices = self._csr
        deg = np.diff(indptr)
        return view.but(key=("cofree-edgecut", view.key), indptr=indptr, indices=indices,
                        row_deg=deg, col_deg=deg, num_in=view.num_out, sync=False,
                        loss_weight=self.weights)
