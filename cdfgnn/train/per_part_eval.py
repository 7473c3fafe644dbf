"""Per-part evaluation: every part infers on its own local graph, replicas are combined.

Used when a method sets ``per_part_eval`` (CoFree's ``eval=per-part``): each part of
this rank runs the forward pass on ``strategy.local_view(view, False)`` (in eval mode,
outside every timed section), weights each output row by
``strategy.replica_eval_weights()`` and the weighted rows of a vertex's replicas are
summed at its master, together with the weights, so that the combined output is

    out_v = sum_p w_{v,p} out_{v,p} / sum_p w_{v,p}      (over the parts p holding v)

i.e. a weighted average whose weights sum to 1. Metrics are then counted once per
vertex, at its master. The rows travel once per evaluation with one ``all_to_all``
under the ``eval`` tag (the mirror -> master direction of the vertex-cut book), so
the training traffic is unchanged. A rank may hold several parts: its parts'
rows are packed per destination rank in (source part, destination part) order,
which both sides derive from the same book lists. Edge-cut parts have no replicas:
every vertex has one label row (its owner's) and nothing is sent.
"""
from __future__ import annotations

import torch

from cdfgnn.comm.codecs import send_rows
from cdfgnn.train.parts import EVAL_TAG, TrainPart, metric_counts


def _weighted_rows(model, part: TrainPart) -> torch.Tensor:
    """``[w * out | w]`` for the part's label rows (local inference, eval mode)."""
    strategy = part.strategy
    view = strategy.local_view(part.prop.base_view.but(training=False), False)
    part.prop.use_view(view)
    out = model(part.data.x, part.prop, pre=part.pre)
    n = int(part.data.y.shape[0])
    w = strategy.replica_eval_weights()[:n].to(out.dtype).reshape(-1, 1)
    return torch.cat([out[:n] * w, w], 1)


def gather_to_masters(books: list, rows: list[torch.Tensor], comm,
                      tag: str = EVAL_TAG) -> list[torch.Tensor]:
    """Vertex-cut: the sum over every replica of ``rows`` at each master row.

    ``books[i]``/``rows[i]``: this rank's parts and one row per local row of each.
    Returns per part its ``num_owned`` master rows (its own replica plus every
    mirror's row). Part ``q`` may live on any rank: the ranks exchange which parts
    they hold (bookkeeping, not accounted), then send one tensor per rank.
    """
    held = comm.all_gather_object([int(b.rank) for b in books])
    out = [r[: b.num_owned].clone() for b, r in zip(books, rows)]
    if all(b.kind != "vertex" for b in books):
        return out
    outgoing = []
    for dst_parts in held:
        pieces = [r[b.send_idx[q]] for b, r in zip(books, rows) for q in dst_parts
                  if b.send_idx[q].size]
        outgoing.append(torch.cat(pieces) if pieces else None)
    incoming = send_rows(comm, outgoing, tag)
    for src_parts, msg in zip(held, incoming):
        offset = 0
        for p in src_parts:
            for b, o in zip(books, out):
                idx = b.recv_idx[p]
                if not idx.size:
                    continue
                o.index_add_(0, torch.from_numpy(idx).to(torch.int64),
                             msg[offset: offset + idx.size])
                offset += idx.size
        if msg is not None and offset != msg.shape[0]:
            raise RuntimeError(f"per-part evaluation: {msg.shape[0]} rows received, "
                               f"{offset} expected")
    return out


@torch.no_grad()
def per_part_counts(model, parts: list[TrainPart], comm) -> torch.Tensor:
    """This rank's metric counts (``metric_counts`` layout) of per-part evaluation."""
    model.eval()
    rows = [_weighted_rows(model, part) for part in parts]
    books = [part.strategy.book for part in parts]
    counts = torch.zeros(9, dtype=torch.float64)
    for part, acc in zip(parts, gather_to_masters(books, rows, comm)):
        w = acc[:, -1:]
        out = acc[:, :-1] / torch.where(w > 0, w, torch.ones_like(w))
        counts += metric_counts(out, part.data)
    return counts
