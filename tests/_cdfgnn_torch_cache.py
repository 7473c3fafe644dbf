"""The CDFGNN cache as plain torch passes: the implementation before the fused numba
kernels (cdfgnn/methods/cdfgnn_kernels.py), kept as the reference the kernels must
equal bit for bit (tests/test_cdfgnn_kernels.py). ``patch(monkeypatch)`` swaps it into
CdfgnnCache (and so into Cdfgnn) for one test. Its wire format puts the bitmap first;
the byte count is the same."""
from __future__ import annotations

import torch

from cdfgnn.comm.codecs import pack_bits, unpack_bits
from cdfgnn.methods.base import SyncKey
from cdfgnn.methods.cdfgnn_cache import CdfgnnCache, _CacheState


class TorchCache:
    """The previous CdfgnnCache methods (setup is shared: _send, _recv, _masters,
    _cached, _wire_dtype)."""

    def replica_sync(self, prop, z: torch.Tensor, layer: int, direction: str,
                     training: bool) -> torch.Tensor:
        if not training:
            return super(CdfgnnCache, self).replica_sync(prop, z, layer, direction, training)
        width = int(z.shape[1])
        st = self._state.get((layer, direction))
        if st is None:
            st = self._state[(layer, direction)] = _CacheState(z.shape[0], width)
        gkey = SyncKey(layer, direction, "gather", True, width)
        skey = SyncKey(layer, direction, "scatter", True, width)
        z = z.detach()
        comm = self.comm
        # phase 1: mirrors send the differences that passed the threshold
        with comm.overhead("cache"):
            changed = torch.zeros(z.shape[0], dtype=torch.bool)
            mirrors = self._cached[self._masters.numel():]
            changed[mirrors] = self._over_threshold(z[mirrors], st.pushed[mirrors])
            wires, counts = self._pack(self._send, changed,
                                       lambda rows, mask: self._push(st, z, rows, mask, gkey))
        self._count(gkey, counts, self._send)
        incoming = comm.all_to_all(wires, tag=gkey.tag, rows=counts)
        # phase 2: masters add the differences and their own changed contribution
        with comm.overhead("cache"):
            active = torch.zeros(z.shape[0], dtype=torch.bool)
            for q, idx in enumerate(self._recv):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._decode(incoming[q], idx.numel(), width)
                rows = idx[mask]
                st.agg.index_add_(0, rows, rows_val)
                active[rows] = True
            m = self._masters
            own = m[self._over_threshold(z[m], st.pushed[m])]
            st.agg[own] += z[own] - st.pushed[own]
            st.pushed[own] = z[own]
            active[own] = True
            # phase 3: scatter the cached aggregate of active vertices
            wires, counts = self._pack(
                self._recv, active,
                lambda rows, mask: self._encode(st.agg[rows], mask, skey, feedback=False)[0])
        self._count(skey, counts, self._recv)
        incoming = comm.all_to_all(wires, tag=skey.tag, rows=counts)
        with comm.overhead("cache"):
            for q, idx in enumerate(self._send):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._decode(incoming[q], idx.numel(), width)
                st.agg[idx[mask]] = rows_val
            out = z.clone()
            out[self._cached] = st.agg[self._cached]
        if self.params["shadow"]:
            self._shadow(z, out, layer, direction)
        return out

    @staticmethod
    def _pack(lists: list[torch.Tensor], flags: torch.Tensor, encode) -> tuple[list, list]:
        """Per peer: ``encode(rows, mask)`` of the flagged rows of its index list (None
        when none is flagged), and the row counts."""
        wires, counts = [], []
        for idx in lists:
            mask = flags[idx]
            rows = idx[mask]
            wires.append(encode(rows, mask) if rows.numel() else None)
            counts.append(int(rows.numel()))
        return wires, counts

    def _push(self, st: _CacheState, z: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor,
              key: SyncKey) -> torch.Tensor:
        """A mirror's message: the differences since the last push; updates ``pushed``."""
        wire, sent = self._encode(z[rows] - st.pushed[rows], mask, key)
        if self.params["error_feedback"]:
            st.pushed[rows] += sent
        else:
            st.pushed[rows] = z[rows]
        return wire

    def _over_threshold(self, z: torch.Tensor, pushed: torch.Tensor) -> torch.Tensor:
        """Rows whose relative L-inf change since the last push exceeds epsilon (our choice:
        a zero row is sent when its difference is non-zero)."""
        if not z.numel():
            return torch.zeros(z.shape[0], dtype=torch.bool)
        return (z - pushed).abs().amax(1) > self.eps * z.abs().amax(1)

    def _encode(self, rows: torch.Tensor, mask: torch.Tensor, key: SyncKey,
                feedback: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One uint8 buffer: bitmap over the index list + encoded rows; and (if asked)
        the rows as the receiver decodes them (for error feedback)."""
        bitmap = pack_bits(mask.to(torch.int32).reshape(1, -1), 1).reshape(-1)
        enc = self.codec.encode(rows, self.generator(key))
        payload = enc.contiguous().view(torch.uint8).reshape(-1)
        sent = None
        if feedback:
            n, d = rows.shape
            sent = rows if self.codec.exact else self.codec.decode(enc, n, d).reshape(n, d)
        return torch.cat([bitmap, payload]), sent

    def _decode(self, wire: torch.Tensor, length: int, width: int):
        nb = -(-length // 8)
        mask = unpack_bits(wire[:nb].reshape(1, -1), 1, length).reshape(-1).to(torch.bool)
        n = int(mask.sum())
        payload = wire[nb:]
        if self._wire_dtype != torch.uint8:
            payload = payload.clone().view(self._wire_dtype)
        return mask, self.codec.decode(payload, n, width).reshape(n, width)


def over_threshold(z: torch.Tensor, pushed: torch.Tensor, eps: float) -> torch.Tensor:
    """The torch threshold test, as a function."""
    return TorchCache._over_threshold(type("E", (), {"eps": eps})(), z, pushed)


def patch(monkeypatch) -> None:
    for name in ("replica_sync", "_pack", "_push", "_over_threshold", "_encode", "_decode"):
        monkeypatch.setattr(CdfgnnCache, name, TorchCache.__dict__[name], raising=False)
