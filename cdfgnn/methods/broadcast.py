"""Whole-partition broadcast peers of CDFGNN (re-implementations, not the original systems).

Both run on an **edge-cut** partitioning (rows of A and H split by owner, as in
CAGNET's 1D algorithm and Sancus's decentralised broadcast; CDFGNN, arXiv 2408.00232,
compares against them without giving their settings):

``cagnet`` (re-implementation of CAGNET 1D)
    forward: every rank broadcasts its whole owned block ``t = H W`` (``n_r x d``)
    to every other rank at every layer; a rank reads its halo rows out of the
    blocks. Backward: every rank sends every peer a dense block of that peer's
    owned rows (``n_q x d``, the partial gradient of its rows; zero where it has no
    edge), the volume of CAGNET 1D's backward broadcast. Results equal ``exact``.
``sancus`` (re-implementation of Sancus's staleness-aware skipping)
    like ``cagnet``, but in training a rank skips its forward broadcast of a layer
    when its block changed little since its last broadcast (relative Frobenius
    change ``||t - t_last|| / ||t_last|| <= threshold``) and it was broadcast at
    most ``staleness`` epochs ago; receivers then reuse the block they last
    received (historical embeddings). ``staleness=0`` always broadcasts and equals
    ``exact``. Gradients are always sent (CAGNET-style dense blocks).

Every peer's owned global ids are exchanged once at setup (bookkeeping, not
accounted). Messages go through the method's codec like every other method.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cdfgnn.methods.base import METHODS, Degenerate, Param, SyncKey, SyncStrategy


@METHODS.register("cagnet")
class Cagnet(SyncStrategy):
    """CAGNET-1D-like (re-implementation): every owned block to every rank, every layer."""

    name = "cagnet"
    degenerate = Degenerate({})   # whole blocks carry every halo row
    supported_devices = ("cpu", "cuda")   # buffers follow ctx.device / the rows
    partition_kind = "edge"

    def setup(self, ctx) -> None:
        super().setup(ctx)
        book = ctx.book
        owned = self.comm.all_gather_object(np.asarray(book.owned_nodes))
        self._sizes = [int(len(o)) for o in owned]
        gids = book.local_nodes
        # position of my halo rows from peer q inside q's owned block (sorted by gid)
        self._pos = [torch.from_numpy(np.searchsorted(owned[q], gids[r])).to(
            ctx.device, torch.int64) for q, r in enumerate(book.recv_idx)]
        self._send = [torch.from_numpy(i).to(ctx.device, torch.int64) for i in book.send_idx]

    def count_key(self, epoch: int):
        """Every pass broadcasts every block: one key (Sancus, which may skip, has none)."""
        return ()

    def _fresh(self, key: SyncKey, t: torch.Tensor) -> bool:
        """Does this rank broadcast its block at this sync point? (Sancus may skip)"""
        return True

    def _received(self, key: SyncKey, blocks: list) -> list:
        """Blocks to read halo rows from (Sancus substitutes the cached ones)."""
        return blocks

    def halo_rows(self, prop, t: torch.Tensor, key: SyncKey) -> list:
        me = self.comm.rank
        send = t.detach().contiguous() if self._fresh(key, t) else None
        outgoing = [None if q == me else send for q in range(self.comm.world_size)]
        blocks = self._received(key, self.send(key, outgoing, self._sizes))
        return [blocks[q][self._pos[q]] if self._pos[q].numel() and blocks[q] is not None
                else None for q in range(len(blocks))]

    def halo_grads(self, prop, grad_halo: list, key: SyncKey) -> list:
        me, n_me = self.comm.rank, self._sizes[self.comm.rank]
        outgoing: list[Any] = []
        for q, g in enumerate(grad_halo):
            if q == me or not self._sizes[q]:
                outgoing.append(None)
                continue
            dense = torch.zeros(self._sizes[q], key.width, device=self.device)
            if g is not None and self._pos[q].numel():
                dense[self._pos[q]] = g
            outgoing.append(dense)
        incoming = self.send(key, outgoing, [n_me] * self.comm.world_size)
        return [incoming[q][idx] if idx.numel() and incoming[q] is not None else None
                for q, idx in enumerate(self._send)]


@METHODS.register("sancus")
class Sancus(Cagnet):
    """Sancus-like (re-implementation): staleness-bounded skipping of block broadcasts."""

    name = "sancus"
    degenerate = Degenerate({"staleness": 0})   # never skips a broadcast
    PARAMS = {
        "staleness": Param(4, int, check=lambda k: k >= 0, expect="an integer >= 0",
                           doc="most epochs a block may go without a broadcast (0: never skip)"),
        "threshold": Param(0.1, float, check=lambda x: x >= 0, expect=">= 0",
                           doc="relative Frobenius change below which a broadcast is skipped"),
    }

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._last_sent: dict[int, tuple[int, torch.Tensor]] = {}   # layer -> (epoch, block)
        self._cache: dict[int, list] = {}                            # layer -> blocks by peer
        self._skipped = [0, 0]                                       # [skipped, decisions]

    def count_key(self, epoch: int):
        """None: whether a block is broadcast follows its change (values)."""
        return None

    def _fresh(self, key: SyncKey, t: torch.Tensor) -> bool:
        if not key.training:
            return True
        with self.comm.overhead("cache"):
            last = self._last_sent.get(key.layer)
            fresh = True
            if last is not None and self.epoch - last[0] <= self.params["staleness"]:
                ref = float(last[1].norm())
                change = float((t.detach() - last[1]).norm())
                fresh = change > self.params["threshold"] * ref or (ref == 0 and change > 0)
            if fresh:
                self._last_sent[key.layer] = (self.epoch, t.detach().clone())
        self._skipped[0] += int(not fresh)
        self._skipped[1] += 1
        return fresh

    def _received(self, key: SyncKey, blocks: list) -> list:
        if not key.training:
            return blocks
        cache = self._cache.setdefault(key.layer, [None] * len(blocks))
        for q, b in enumerate(blocks):
            if b is not None:
                cache[q] = b
        return list(cache)

    def on_epoch_end(self, epoch: int, metrics: dict[str, float]) -> dict[str, Any]:
        counts = self.comm.all_gather_object(tuple(self._skipped))
        self._skipped = [0, 0]
        skipped, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
        return {"skipped_broadcasts": skipped / total if total else 0.0}
