"""The CDFGNN cache (Algorithm 2) as torch passes: its path on a GPU.

:class:`cdfgnn.methods.cdfgnn_cache.CdfgnnCache` runs the fused numba kernels
(``cdfgnn_kernels.py``) on the CPU and this formulation on any other device, chosen by
the device of the rows it synchronises; both compute the same float32 values in the
same order, so a CPU run through this path equals the kernels bit for bit
(``tests/test_cdfgnn_kernels.py`` forces it on the CPU). The state (``pushed``, the
cached aggregate) and every index list live on the rows' device; only the bitmaps'
bit packing and the codec's noise generator seed start on the host. Its wire format
puts the bitmap first (the kernels' puts it last); the byte count is the same, and
every rank of a run takes the same path.
"""
from __future__ import annotations

import torch

from cdfgnn.comm.codecs import pack_bits, unpack_bits
from cdfgnn.methods.base import SyncKey
from cdfgnn.methods.cache_state import CacheState


class TorchCachePath:
    """Mixed into CdfgnnCache: ``_torch_replica_sync`` and its helpers. Uses the
    cache's ``_send``/``_recv``/``_masters``/``_cached`` lists, ``_state``, ``codec``,
    ``eps``, ``params``, ``_count`` and ``_shadow``."""

    def _device_lists(self, device: torch.device) -> tuple:
        """(send lists, recv lists, masters, cached rows) on ``device``, built once."""
        got = getattr(self, "_lists_on", None)
        if got is None or got[0] != device:
            move = [i.to(device) for i in self._send], [i.to(device) for i in self._recv]
            got = self._lists_on = (device, *move, self._masters.to(device),
                                    self._cached.to(device))
        return got[1:]

    def _torch_replica_sync(self, z: torch.Tensor, layer: int, direction: str) -> torch.Tensor:
        width = int(z.shape[1])
        st = self._state.get((layer, direction))
        if st is None:
            st = self._state[(layer, direction)] = CacheState(z.shape[0], width, z.device)
        gkey = SyncKey(layer, direction, "gather", True, width)
        skey = SyncKey(layer, direction, "scatter", True, width)
        send, recv, masters, cached = self._device_lists(z.device)
        comm = self.comm
        # phase 1: mirrors send the differences that passed the threshold
        with comm.overhead("cache"):
            changed = torch.zeros(z.shape[0], dtype=torch.bool, device=z.device)
            mirrors = cached[masters.numel():]
            changed[mirrors] = self._t_over_threshold(z[mirrors], st.pushed[mirrors])
            wires, counts = self._t_pack(send, changed,
                                         lambda rows, mask: self._t_push(st, z, rows, mask, gkey))
        self._count(gkey, counts, send)
        incoming = self.send_encoded(gkey, wires, counts)
        # phase 2: masters add the differences and their own changed contribution
        with comm.overhead("cache"):
            active = torch.zeros(z.shape[0], dtype=torch.bool, device=z.device)
            for q, idx in enumerate(recv):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._t_decode(incoming[q], idx.numel(), width)
                rows = idx[mask]
                st.agg.index_add_(0, rows, rows_val)
                active[rows] = True
            own = masters[self._t_over_threshold(z[masters], st.pushed[masters])]
            st.agg[own] += z[own] - st.pushed[own]
            st.pushed[own] = z[own]
            active[own] = True
            # phase 3: scatter the cached aggregate of active vertices
            wires, counts = self._t_pack(
                recv, active,
                lambda rows, mask: self._t_encode(st.agg[rows], mask, skey, feedback=False)[0])
        self._count(skey, counts, recv)
        incoming = self.send_encoded(skey, wires, counts)
        with comm.overhead("cache"):
            for q, idx in enumerate(send):
                if incoming[q] is None or not idx.numel():
                    continue
                mask, rows_val = self._t_decode(incoming[q], idx.numel(), width)
                st.agg[idx[mask]] = rows_val
            out = z.clone()
            out[cached] = st.agg[cached]
        if self.params["shadow"]:
            self._shadow(z, out, layer, direction)
        return out

    @staticmethod
    def _t_pack(lists: list[torch.Tensor], flags: torch.Tensor, encode) -> tuple[list, list]:
        """Per peer: ``encode(rows, mask)`` of the flagged rows of its index list (None
        when none is flagged), and the row counts."""
        wires, counts = [], []
        for idx in lists:
            mask = flags[idx]
            rows = idx[mask]
            wires.append(encode(rows, mask) if rows.numel() else None)
            counts.append(int(rows.numel()))
        return wires, counts

    def _t_push(self, st, z: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor,
                key: SyncKey) -> torch.Tensor:
        """A mirror's message: the differences since the last push; updates ``pushed``."""
        wire, sent = self._t_encode(z[rows] - st.pushed[rows], mask, key)
        if self.params["error_feedback"]:
            st.pushed[rows] += sent
        else:
            st.pushed[rows] = z[rows]
        return wire

    def _t_over_threshold(self, z: torch.Tensor, pushed: torch.Tensor) -> torch.Tensor:
        """Rows whose relative L-inf change since the last push exceeds epsilon (a zero
        row is sent when its difference is non-zero)."""
        if not z.numel():
            return torch.zeros(z.shape[0], dtype=torch.bool, device=z.device)
        return (z - pushed).abs().amax(1) > self.eps * z.abs().amax(1)

    def _t_encode(self, rows: torch.Tensor, mask: torch.Tensor, key: SyncKey,
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

    def _t_decode(self, wire: torch.Tensor, length: int, width: int):
        nb = -(-length // 8)
        mask = unpack_bits(wire[:nb].reshape(1, -1), 1, length).reshape(-1).to(torch.bool)
        n = int(mask.sum())
        payload = wire[nb:]
        if self._wire_dtype != torch.uint8:
            payload = payload.clone().view(self._wire_dtype)
        return mask, self.codec.decode(payload, n, width).reshape(n, width)
