"""Operation counts, the data a ledger holds and pricing reads (no torch here).

Per rank, epoch and phase, a :class:`Ledger` holds integer counts of every kernel
the training step issues, by kind:

* ``spmm``: sparse (CSR) x dense products: ``nnz`` and ``nnz_w`` (nnz x width,
  the gathered input elements), ``rows_w`` (output elements), ``cols_w`` (distinct
  input elements), ``flops`` = 2 nnz width;
* ``dense``: dense products (mm, addmm, bmm): ``flops`` = 2mnk, ``bytes`` of the
  operands and the result;
* ``elementwise``: every other kernel (activation, dropout, bias, normalisation,
  loss, optimizer arithmetic, reductions, fills): ``bytes`` of its tensor inputs
  and outputs;
* ``gather``: indexed reads and writes (index_select, indexing, index_add, scatter,
  cat): ``bytes`` = index bytes + twice the moved rows' bytes;
* ``codec``: message encode/decode: ``bytes`` = passes x bytes in + bytes out;
* ``cache``: cache checks, selections and updates: ``bytes`` read and written;
* ``copy``: host-device copies (``bytes``), e.g. a host cache tier;
* ``spmm_fp64``, ``dense_fp64``: the same products with float64 operands (a
  ``--dtype float64`` run), counted apart because a GPU runs them at its FP64 rate
  (on a GeForce card 1/64 of FP32) and an SpMM's traffic is 8-byte values. A float32
  run never has them, so its ledger is what it was before they existed.

Every kind counts ``calls`` (kernel launches). Bytes of the other kinds are counted at
the tensors' element size, so they need no FP64 twin. Counts are integers, so two runs of
one configuration give equal ledgers whatever the backend, thread interleaving or
machine (nothing here is timed).

:mod:`cdfgnn.cost.ledger` counts them (a torch dispatch mode); :mod:`cdfgnn.pricing`
prices them, and needs only this module.
"""
from __future__ import annotations

from typing import Mapping

KINDS = ("spmm", "dense", "elementwise", "gather", "codec", "cache", "copy", "spmm_fp64",
         "dense_fp64")
#: the kind of a product whose operands are float64 (priced at the FP64 rates)
FP64_KIND = {"spmm": "spmm_fp64", "dense": "dense_fp64"}
FIELDS = ("calls", "flops", "bytes", "nnz_w", "rows_w", "cols_w", "nnz")
_FIELD_INDEX = {f: i for i, f in enumerate(FIELDS)}


class Ledger:
    """``{phase: {kind: [ints in FIELDS order]}}`` with exact (integer) equality.

    Counts reused from an earlier count (``cdfgnn.cost.reuse``) are added when the ledger
    is next read or written (:meth:`defer`), so the addition (a few dozen integers) runs
    after the step that reused them rather than inside it."""

    __slots__ = ("_store", "_pending")

    def __init__(self) -> None:
        self._store: dict[str, dict[str, list[int]]] = {}
        self._pending: list = []

    @property
    def _data(self) -> dict[str, dict[str, list[int]]]:
        if self._pending:
            self._flush()
        return self._store

    def defer(self, start: str, rows, adds) -> None:
        """Add later: make every (phase, kind) row of ``rows`` (phase None: ``start``) and
        add ``adds``, (row, field, value) triples, into them."""
        self._pending.append((start, rows, adds))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for start, rows, adds in pending:
            made = [self._row(start if ph is None else ph, kind) for ph, kind in rows]
            for r, f, v in adds:
                made[r][f] += v

    def rows(self) -> list[tuple[str, str, list[int]]]:
        """``(phase, kind, ints in FIELDS order)`` of every row, in the order made."""
        return [(ph, kind, vals) for ph, kinds in self._data.items()
                for kind, vals in kinds.items()]

    def _row(self, phase: str, kind: str) -> list[int]:
        if self._pending:
            self._flush()
        kinds = self._store.get(phase)
        if kinds is None:
            kinds = self._store[phase] = {}
        row = kinds.get(kind)
        if row is None:
            row = kinds[kind] = [0] * len(FIELDS)
        return row

    def add(self, phase: str, kind: str, **fields: int) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown ledger kind {kind!r}; valid: {', '.join(KINDS)}")
        row = self._row(phase, kind)
        for k, v in fields.items():
            row[_FIELD_INDEX[k]] += int(v)

    def merge(self, other: "Ledger") -> "Ledger":
        for phase, kinds in other._data.items():
            for kind, vals in kinds.items():
                row = self._row(phase, kind)
                for i, v in enumerate(vals):
                    row[i] += v
        return self

    @property
    def phases(self) -> list[str]:
        return sorted(self._data)

    def get(self, phase: str, kind: str) -> dict[str, int]:
        row = self._data.get(phase, {}).get(kind, [0] * len(FIELDS))
        return dict(zip(FIELDS, row))

    def totals(self) -> dict[str, dict[str, int]]:
        """``{kind: {field: sum over phases}}``."""
        out: dict[str, list[int]] = {}
        for kinds in self._data.values():
            for kind, vals in kinds.items():
                acc = out.setdefault(kind, [0] * len(FIELDS))
                for i, v in enumerate(vals):
                    acc[i] += v
        return {k: dict(zip(FIELDS, out[k])) for k in sorted(out)}

    def calls(self) -> int:
        return sum(v[0] for kinds in self._data.values() for v in kinds.values())

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        """Plain, sorted JSON: ``{phase: {kind: {field: int}}}`` (zero fields left out)."""
        return {p: {k: {f: v for f, v in zip(FIELDS, vals) if v}
                    for k, vals in sorted(kinds.items())}
                for p, kinds in sorted(self._data.items())}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Ledger":
        led = cls()
        for phase, kinds in data.items():
            for kind, fields in kinds.items():
                led.add(str(phase), str(kind), **{str(f): int(v) for f, v in fields.items()})
        return led

    def __eq__(self, other) -> bool:
        return isinstance(other, Ledger) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Ledger({self.to_dict()})"


#: phases of a rank's epoch outside its parts' forward and backward (``run_epochs``):
#: zero_grad and the optimizer step, the gradient all-reduce's flatten and copy back
STEP_PHASES = ("optimizer", "reduce")
