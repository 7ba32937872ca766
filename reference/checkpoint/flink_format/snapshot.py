"""The two-phase heap snapshot writing Flink's format (Flink ``HeapSnapshotStrategy``).

The same two phases as :class:`~cowcheck.reference.checkpoint.PendingCheckpoint`
(table snapshots at the synchronous part, one key group at a time after,
each map snapshot released once its group is written, everything released
on failure or cancel); what it writes is Flink's: the
``KeyedBackendSerializationProxy`` (proxy.py), then per key group its id
and per state its short id and ``writeStateInKeyGroup`` bytes, with no
checksum and no index: the offsets go into the returned
:class:`~cowcheck.reference.checkpoint.flink_format.handle.KeyGroupsStateHandle`.
A spilled stream is a file named ``chk-<id>-<16 hex>`` (no suffix).

With snapshot compression (``compressed=True``, Flink's
``SnappyStreamCompressionDecorator``) the proxy says so and each state of a key
group (its short id and entries) is a snappy framed stream of its own after the
group's id, which stays uncompressed (compression.py); the offsets point at the ids.
"""

from __future__ import annotations

import io

from cowcheck.reference.checkpoint.flink_format.compression import compress_stream
from cowcheck.reference.checkpoint.flink_format.datastream import I16, I32
from cowcheck.reference.checkpoint.flink_format.handle import KeyGroupsStateHandle
from cowcheck.reference.checkpoint.flink_format.proxy import STATE_TYPES, SerializationProxy, StateMetaInfo
from cowcheck.reference.checkpoint.snapshot import PendingCheckpoint, RegisteredState
from cowcheck.reference.serializers import ListSerializer, MapSerializer

__all__ = ["FlinkPendingCheckpoint", "state_kind"]


def state_kind(state: RegisteredState) -> str:
    """The state's kind; one registered without (the plain backend's ``register_state``) is a list or map
    state when its serializer is one, else a value state."""
    if state.kind is not None:
        return state.kind
    serializer = state.state_serializer
    return "list" if type(serializer) is ListSerializer else "map" if type(serializer) is MapSerializer else "value"


class FlinkPendingCheckpoint(PendingCheckpoint):
    """A :class:`~cowcheck.reference.checkpoint.PendingCheckpoint` writing Flink's format, its key groups
    compressed if ``compressed``. A state whose serializers Flink's format cannot name (snapshots.py)
    fails the synchronous part, before any table snapshot is taken (UnsupportedSerializerError)."""

    def __init__(self, backend, checkpoint_id: int, stream_factory, compressed: bool = False) -> None:
        states = backend.registered_states()
        self.compressed = compressed
        self.proxy = SerializationProxy(backend.key_serializer, [
            StateMetaInfo(s.name, STATE_TYPES[state_kind(s)], s.namespace_serializer, s.state_serializer)
            for s in states], compressed)
        self._proxy_bytes = self.proxy.encode()
        super().__init__(backend, checkpoint_id, stream_factory)

    def _open(self) -> None:
        self.stream = self.stream_factory.create_stream(self.checkpoint_id, suffix="")
        self._write(self._proxy_bytes)

    def _write(self, data: bytes) -> None:
        self.stream.write(data)

    def _encode_key_group(self, group: int) -> bytes:
        if not self.compressed:
            return super()._encode_key_group(group)
        out = bytearray(I32.pack(group))
        for state_id, state in enumerate(self.states):
            block = io.BytesIO()
            block.write(I16.pack(state_id))
            self._write_state_in_key_group(state, self.table_snapshots[state.name], group, block)
            out += compress_stream(block.getvalue())
        return bytes(out)

    def _write_key_group(self, group: int) -> None:
        block = self._encode_key_group(group)
        self.offsets.append((group, self.stream.tell()))
        self._write(block)

    def _finish(self) -> KeyGroupsStateHandle:
        path, inline, size = self.stream.close_and_get_result()
        return KeyGroupsStateHandle(self.key_group_range, self.offsets, size, path, inline, self.max_parallelism)
