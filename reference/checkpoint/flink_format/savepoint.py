"""Canonical savepoints: Flink's backend-independent snapshot format, written by the reference.

Flink takes a canonical savepoint of a heap keyed backend through
``SavepointSnapshotStrategy`` over the backend's ``savepoint()`` resources
(the same table snapshots a checkpoint takes, references only), run by a
``SnapshotStrategyRunner``; its asynchronous part is ``FullSnapshotAsyncWriter``
over a ``HeapKeyValueStateIterator``. What it writes (checked with ``javap`` on
1.13.6 and 2.3.0; the same bytes in every release between):

```
      KeyedBackendSerializationProxy (proxy.py: version 6, the states' meta info)
per key group of the range that holds an entry (the handle's offset points here; 0 for a group
with none):
  per state with entries in the group (any order: Flink follows a HashMap of StateUIDs whose
  hash mixes an enum's identity hash, so its order changes from one JVM to the next):
    i16  state id                       (its position in the proxy)
    per entry: key bytes, value bytes   (each as a byte[]: i32 length, the bytes)
    the last entry of a state has bit 0x80 set in the first byte of its key ("meta data follows")
  i16  0xFFFF                           (END_OF_KEY_GROUP_MARK, after the group's last entry)
```

With snapshot compression (the backend's ``keyGroupCompressionDecorator``, which
``savepoint()`` hands to the writer) the proxy says so and each key group, from
its first state id to its end mark, is one snappy framed stream of its own
(``decorateWithCompression`` per group, closed after the mark); the offsets
point at the framed streams (compression.py).

The key bytes (``SerializedCompositeKeyBuilder``): the key group in 1 byte (2
when the job has more than 128 key groups), big-endian; the key; the
namespace; a map state's user key. A key or namespace of variable length is
followed by its length (little-endian bytes, ``writeVariableIntBytes``) only
when both are of variable length. The value bytes: a value or reducing
state's value; a list's elements separated by ``,`` (0x2C:
``ListDelimitedSerializer``); per user key of a map, a null flag (1: null) and
the user value. An empty list or map writes nothing; states with time-to-live
go through their snapshot transformer first (what has expired is left out).

The reference writes the states of a key group in state-id order and a map's
user keys in the map's order: Flink restores that (the reader does not care
about either order). The handle is Flink's ``KeyGroupsSavepointStateHandle``
(:class:`KeyGroupsSavepointStateHandle`): restoring it goes through
``HeapSavepointRestoreOperation`` (savepoint_restore.py), into any range.

>>> from cowcheck.reference.checkpoint import HeapKeyedStateBackend
>>> from cowcheck.reference.serializers import IntSerializer, ListSerializer
>>> from cowcheck.reference.state_table import KeyGroupRange
>>> b = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4, checkpoint_format="flink")
>>> b.register_state("clicks", IntSerializer(), ListSerializer(IntSerializer())).put(42, 0, [1, 2])
>>> handle = CanonicalSavepoint(b, 1, b.stream_factory).complete()
>>> [(group, offset) for group, offset in handle.offsets if offset]    # key 42 is in key group 5
[(5, 446)]
>>> data = handle.inline[446:]
>>> data[:2].hex(), data[2:6].hex(), data[6:15].hex()   # state 0; a key of 9 bytes: group | 0x80, 42, namespace 0
('0000', '00000009', '850000002a00000000')
>>> data[15:19].hex(), data[19:28].hex(), data[28:].hex()   # the list's 9 bytes: 1 ',' 2; the end mark
('00000009', '000000012c00000002', 'ffff')
"""

from __future__ import annotations

import io

import attrs

from cowcheck.reference.checkpoint.flink_format.compression import compress_stream
from cowcheck.reference.checkpoint.flink_format.datastream import I32, U16
from cowcheck.reference.checkpoint.flink_format.handle import FLINK_SAVEPOINT_HANDLE_FORMAT, KeyGroupsStateHandle
from cowcheck.reference.checkpoint.flink_format.snapshot import FlinkPendingCheckpoint, state_kind
from cowcheck.reference.serializers import (IntSerializer, LongSerializer, TimeWindowSerializer,
                                             VoidNamespaceSerializer)

__all__ = ["CanonicalSavepoint", "KeyGroupsSavepointStateHandle", "key_group_prefix_bytes", "fixed_length",
           "END_OF_KEY_GROUP_MARK", "META_DATA_FOLLOWS", "LIST_DELIMITER", "encode_pairs"]

END_OF_KEY_GROUP_MARK = 0xFFFF
META_DATA_FOLLOWS = 0x80  # FullSnapshotUtil.FIRST_BIT_IN_BYTE_MASK
LIST_DELIMITER = b","  # ListDelimitedSerializer.DELIMITER
# TypeSerializer.getLength() of the serializers with a fixed length (-1, variable, for every other).
_FIXED = {IntSerializer: 4, LongSerializer: 8, VoidNamespaceSerializer: 1, TimeWindowSerializer: 16}


def fixed_length(serializer) -> int:
    """Flink's ``getLength()`` of ``serializer``: its fixed size in bytes, or -1 (variable)."""
    return _FIXED.get(type(serializer), -1)


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """``CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix``."""
    return 2 if max_parallelism > 128 else 1


def variable_int_bytes(value: int) -> bytes:
    """``writeVariableIntBytes``: the int's bytes from the lowest, until what is left is zero."""
    out = bytearray()
    while True:
        out.append(value & 0xFF)
        value >>= 8
        if value == 0:
            return bytes(out)


@attrs.frozen
class KeyGroupsSavepointStateHandle(KeyGroupsStateHandle):
    """A canonical savepoint (Flink ``KeyGroupsSavepointStateHandle``): a :class:`KeyGroupsStateHandle`
    whose stream holds the canonical format; a key group without entries has offset 0. Its
    intersection with a range is a savepoint handle too, as Flink's is."""

    _FORMAT = FLINK_SAVEPOINT_HANDLE_FORMAT

    def _inline_name(self) -> str:
        return f"<inline Flink canonical savepoint {self.key_group_range}>"


class _CompositeKey:
    """The key bytes of one (key, namespace) (``SerializedCompositeKeyBuilder``)."""

    __slots__ = ("prefix", "key_serializer", "ambiguous")

    def __init__(self, prefix: int, key_serializer, namespace_serializer) -> None:
        self.prefix = prefix
        self.key_serializer = key_serializer
        self.ambiguous = fixed_length(key_serializer) < 0 and fixed_length(namespace_serializer) < 0

    def build(self, group: int, key, namespace, namespace_serializer) -> bytes:
        out = io.BytesIO()
        out.write(group.to_bytes(self.prefix, "big"))
        for value, serializer in ((key, self.key_serializer), (namespace, namespace_serializer)):
            start = out.tell()
            serializer.serialize(value, out)
            if self.ambiguous:
                out.write(variable_int_bytes(out.tell() - start))
        return out.getvalue()


def _serialized(serializer, value) -> bytes:
    out = io.BytesIO()
    serializer.serialize(value, out)
    return out.getvalue()


def state_pairs(kind: str, composite: bytes, state, state_serializer) -> list[tuple[bytes, bytes]]:
    """The (key bytes, value bytes) pairs of one entry (``HeapKeyValueStateIterator``'s writeOut*):
    none for an empty list or map."""
    if kind == "list":
        if not state:
            return []
        element = state_serializer.element_serializer
        return [(composite, LIST_DELIMITER.join(_serialized(element, e) for e in state))]
    if kind == "map":
        user_keys, user_values = state_serializer.key_serializer, state_serializer.value_serializer
        return [(composite + _serialized(user_keys, k), b"\x01" if v is None else b"\x00" + _serialized(user_values, v))
                for k, v in state.items()]
    return [(composite, _serialized(state_serializer, state))]


def encode_pairs(pairs: list[tuple[int, bytes, bytes]]) -> bytes:
    """One key group's bytes from its ``(state id, key bytes, value bytes)`` pairs, grouped by state
    (``FullSnapshotAsyncWriter.writeKVStateData``): each state's id before its first pair, the
    last pair of a state flagged, the end mark after the last."""
    out = bytearray()
    for i, (state_id, key, value) in enumerate(pairs):
        if i == 0 or pairs[i - 1][0] != state_id:
            out += U16.pack(state_id)
        last_of_state = i + 1 == len(pairs) or pairs[i + 1][0] != state_id
        if last_of_state:
            key = bytes((key[0] | META_DATA_FOLLOWS,)) + key[1:]
        out += I32.pack(len(key)) + key + I32.pack(len(value)) + value
    out += U16.pack(END_OF_KEY_GROUP_MARK)
    return bytes(out)


class CanonicalSavepoint(FlinkPendingCheckpoint):
    """A canonical savepoint whose synchronous part is done (the backend's savepoint resources: its
    table snapshots, as for a checkpoint); ``advance``/``complete`` write it key group by key group
    as ``FullSnapshotAsyncWriter`` does, and ``complete`` returns a :class:`KeyGroupsSavepointStateHandle`.
    Map snapshots are released when the savepoint ends (Flink releases the resources then)."""

    def __init__(self, backend, checkpoint_id: int, stream_factory, compressed: bool = False) -> None:
        super().__init__(backend, checkpoint_id, stream_factory, compressed)
        self.kinds = [state_kind(s) for s in self.states]
        self.composite = _CompositeKey(key_group_prefix_bytes(self.max_parallelism), self.key_serializer,
                                       IntSerializer())

    def _key_group_pairs(self, group: int) -> list[tuple[int, bytes, bytes]]:
        """The group's (state id, key bytes, value bytes), states in state-id order."""
        pairs = []
        for state_id, (state, kind) in enumerate(zip(self.states, self.kinds)):
            view = self.table_snapshots[state.name].map_snapshot(group).iterate(state.transformer)
            builder = _CompositeKey(self.composite.prefix, self.key_serializer, state.namespace_serializer)
            for key, namespace, value in view:
                composite = builder.build(group, key, namespace, state.namespace_serializer)
                pairs += [(state_id, k, v) for k, v in state_pairs(kind, composite, value, state.state_serializer)]
        return pairs

    def _write_key_group(self, group: int) -> None:
        pairs = self._key_group_pairs(group)
        if not pairs:
            self.offsets.append((group, 0))
            return
        self.offsets.append((group, self.stream.tell()))
        data = encode_pairs(pairs)
        self._write(compress_stream(data) if self.compressed else data)

    def _finish(self) -> KeyGroupsSavepointStateHandle:
        path, inline, size = self.stream.close_and_get_result()
        return KeyGroupsSavepointStateHandle(self.key_group_range, self.offsets, size, path, inline,
                                             self.max_parallelism)
