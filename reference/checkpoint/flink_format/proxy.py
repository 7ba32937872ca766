"""The metadata at the head of a Flink keyed-state checkpoint (``KeyedBackendSerializationProxy``, version 6).

Layout (every release 1.13.6-2.3.0 writes the same bytes):

```
i32   6                          the proxy's version (VersionedIOReadableWritable)
bool  key groups compressed      (snappy framed streams, compression.py)
      the key serializer's snapshot (snapshots.py: i32 2, then the versioned snapshot)
i16   number of states
per state (StateMetaInfoSnapshotReadersWriters, version 6):
  utf  name
  i32  backend state type        (0: KEY_VALUE; 3: PRIORITY_QUEUE, timers, not supported)
  i32  number of options, then (utf, utf) pairs: KEYED_STATE_TYPE -> VALUE, LIST, MAP or REDUCING
  i32  number of serializers, then (utf, snapshot) pairs: VALUE_SERIALIZER and NAMESPACE_SERIALIZER
       (Flink writes VALUE_SERIALIZER first; a reader takes them in any order)
```

``utf`` is Java's ``writeUTF`` (datastream.py). A state's id in the key
groups that follow is its position in this list.

>>> from cowcheck.reference.serializers import IntSerializer
>>> proxy = SerializationProxy(IntSerializer(), [StateMetaInfo("v", "VALUE", IntSerializer(), IntSerializer())])
>>> data = proxy.encode()
>>> data[:5].hex()
'0000000600'
>>> SerializationProxy.decode(data, "f")[0] == proxy
True
"""

from __future__ import annotations

from typing import Any

import attrs

from cowcheck.reference.checkpoint.flink_format.datastream import I16, I32, FlinkCursor, java_utf
from cowcheck.reference.checkpoint.flink_format.snapshots import read_snapshot, snapshot_bytes
from cowcheck.reference.errors import CheckpointFormatError

__all__ = ["SerializationProxy", "StateMetaInfo", "PROXY_FORMAT_VERSION", "STATE_TYPES", "KIND_OF_TYPE"]

PROXY_FORMAT_VERSION = 6
KEY_VALUE = 0  # StateMetaInfoSnapshot.BackendStateType.KEY_VALUE
_BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE")
KEYED_STATE_TYPE = "KEYED_STATE_TYPE"
VALUE_SERIALIZER = "VALUE_SERIALIZER"
NAMESPACE_SERIALIZER = "NAMESPACE_SERIALIZER"
# Flink's StateDescriptor.Type names of the kinds the reference has (cowcheck.reference.keyed.descriptors).
STATE_TYPES = {"value": "VALUE", "list": "LIST", "map": "MAP", "reducing": "REDUCING"}
KIND_OF_TYPE = {v: k for k, v in STATE_TYPES.items()}


@attrs.frozen
class StateMetaInfo:
    """A keyed state as the proxy records it: name, Flink's state type (``VALUE``...), serializers."""

    name: str
    state_type: str
    namespace_serializer: Any = attrs.field(eq=False)
    state_serializer: Any = attrs.field(eq=False)

    @property
    def kind(self) -> str:
        """The reference's kind (``value``, ``list``, ``map``, ``reducing``)."""
        return KIND_OF_TYPE[self.state_type]

    @property
    def serializer_ids(self) -> tuple[str, str]:
        return self.namespace_serializer.serializer_id, self.state_serializer.serializer_id

    def __eq__(self, other) -> bool:
        return (isinstance(other, StateMetaInfo) and (self.name, self.state_type, self.serializer_ids)
                == (other.name, other.state_type, other.serializer_ids))

    def __hash__(self) -> int:
        return hash((self.name, self.state_type, self.serializer_ids))

    def encode(self) -> bytes:
        return (java_utf(self.name) + I32.pack(KEY_VALUE)
                + I32.pack(1) + java_utf(KEYED_STATE_TYPE) + java_utf(self.state_type)
                + I32.pack(2) + java_utf(VALUE_SERIALIZER) + snapshot_bytes(self.state_serializer)
                + java_utf(NAMESPACE_SERIALIZER) + snapshot_bytes(self.namespace_serializer))

    @classmethod
    def decode(cls, cur: FlinkCursor) -> "StateMetaInfo":
        at = cur.pos
        name = cur.utf()
        where = f"state {name!r:.80}"
        type_at = cur.pos
        backend_type = cur.take(I32)
        if backend_type != KEY_VALUE:
            known = _BACKEND_STATE_TYPES[backend_type] if 0 <= backend_type < len(_BACKEND_STATE_TYPES) else None
            raise CheckpointFormatError(cur.name, type_at, f"{where}: backend state type {backend_type}"
                                        + (f" ({known}): only keyed value states are supported" if known else
                                           " is not one Flink has"))
        options = _pairs(cur, where, "options", lambda: cur.utf())
        if set(options) != {KEYED_STATE_TYPE}:
            raise CheckpointFormatError(cur.name, at, f"{where}: options {sorted(options)!r:.120}, expected "
                                                      f"{KEYED_STATE_TYPE} only")
        state_type = options[KEYED_STATE_TYPE]
        if state_type not in KIND_OF_TYPE:
            raise CheckpointFormatError(cur.name, at, f"{where}: state type {state_type!r:.40} is not one the "
                                                      f"reference has ({', '.join(KIND_OF_TYPE)})")
        serializers = _pairs(cur, where, "serializers", lambda: read_snapshot(cur))
        if set(serializers) != {VALUE_SERIALIZER, NAMESPACE_SERIALIZER}:
            raise CheckpointFormatError(cur.name, at, f"{where}: serializers {sorted(serializers)!r:.120}, expected "
                                                      f"{VALUE_SERIALIZER} and {NAMESPACE_SERIALIZER}")
        return cls(name, state_type, serializers[NAMESPACE_SERIALIZER], serializers[VALUE_SERIALIZER])


def _pairs(cur: FlinkCursor, where: str, what: str, value) -> dict:
    """An ``i32`` count, then that many (utf key, value) pairs; a key twice is an error."""
    at = cur.pos
    count = cur.take(I32)
    if not 0 <= count <= 2:  # what a keyed state's meta info holds; a larger count is damage
        raise CheckpointFormatError(cur.name, at, f"{where}: {count} {what}")
    pairs: dict = {}
    for _ in range(count):
        key_at = cur.pos
        key = cur.utf()
        if key in pairs:
            raise CheckpointFormatError(cur.name, key_at, f"{where}: {what} name {key!r:.40} twice")
        pairs[key] = value()
    return pairs


@attrs.frozen
class SerializationProxy:
    """What a Flink keyed-state checkpoint starts with: the key serializer and the states."""

    key_serializer: Any = attrs.field(eq=False)
    states: tuple[StateMetaInfo, ...] = attrs.field(converter=tuple)
    compressed: bool = False

    @property
    def key_serializer_id(self) -> str:
        return self.key_serializer.serializer_id

    def __eq__(self, other) -> bool:
        return (isinstance(other, SerializationProxy) and (self.key_serializer_id, self.states, self.compressed)
                == (other.key_serializer_id, other.states, other.compressed))

    def __hash__(self) -> int:
        return hash((self.key_serializer_id, self.states, self.compressed))

    def encode(self) -> bytes:
        if len(self.states) > 0x7FFF:
            raise ValueError("at most 32767 states (Flink writes their number as a short)")
        out = bytearray(I32.pack(PROXY_FORMAT_VERSION))
        out.append(1 if self.compressed else 0)
        out += snapshot_bytes(self.key_serializer) + I16.pack(len(self.states))
        for state in self.states:
            out += state.encode()
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes, name: str, end: int | None = None) -> tuple["SerializationProxy", int]:
        """The proxy at the start of ``data`` and the offset where it ends."""
        cur = FlinkCursor(data, 0, len(data) if end is None else end, name, "the checkpoint's metadata")
        version = cur.take(I32)
        if version != PROXY_FORMAT_VERSION:
            raise CheckpointFormatError(name, 0, f"not a Flink keyed-state checkpoint of a version this reader knows "
                                                 f"(serialization proxy version {version}, expected "
                                                 f"{PROXY_FORMAT_VERSION})")
        compressed = cur.boolean()
        key_serializer = read_snapshot(cur)
        count_at = cur.pos
        count = cur.take(I16)
        if count < 0:
            raise CheckpointFormatError(name, count_at, f"negative number of states {count}")
        states = [StateMetaInfo.decode(cur) for _ in range(count)]
        if len({s.name for s in states}) != len(states):
            raise CheckpointFormatError(name, count_at, "a state name appears twice in the metadata")
        return cls(key_serializer, states, compressed), cur.pos
