"""Flink's operator-state checkpoint format: ``OperatorBackendSerializationProxy`` and ``OperatorStreamStateHandle``.

Layout of one operator backend's checkpoint stream (``javap`` and bytes written
by 1.13.6, 1.17.2, 1.18.1 and 2.3.0; docs/checkpoint-format.md):

```
i32   5 (to 1.17.x) or 6 (1.18.0 on)      the proxy's version
bool  compressed                          version 6 only (snapshot compression, snappy)
i16   number of list states (SPLIT_DISTRIBUTE and UNION), then their meta infos
i16   number of broadcast states, then their meta infos
then, after the metadata: each list state's elements, each broadcast state's size and entries,
      through one snappy framed stream if compressed (compression.py)
```

A meta info is written as keyed state's are (``StateMetaInfoSnapshotReadersWriters``,
version 6): ``utf`` name, ``i32`` backend state type (1 OPERATOR, 2 BROADCAST),
``i32 1`` and the option ``OPERATOR_STATE_DISTRIBUTION_MODE`` with the mode,
then the serializers: a list state's ``VALUE_SERIALIZER``; a broadcast
state's ``VALUE_SERIALIZER`` then ``KEY_SERIALIZER`` (their ``HashMap``'s
order). The offsets are in the handle only: per state name, the offset of
each element (a broadcast state: one, where its size is) and the mode.

>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.operator.states import OperatorStateMetaInfo, SPLIT_DISTRIBUTE
>>> proxy = OperatorProxy([OperatorStateMetaInfo("ids", SPLIT_DISTRIBUTE, IntSerializer())], [], compressed=True)
>>> data = proxy.encode(); data[:7].hex()
'00000006010001'
>>> OperatorProxy.decode(RawInput(data, 0, "f")).compressed
True
"""

from __future__ import annotations

import base64
from typing import Optional

import attrs

from cowcheck.reference.checkpoint.flink_format.compression import RawInput
from cowcheck.reference.checkpoint.flink_format.datastream import I16, I32, FlinkCursor, java_utf
from cowcheck.reference.checkpoint.flink_format.snapshots import read_snapshot, snapshot_bytes
from cowcheck.reference.checkpoint.handle import read_file
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.hashing import to_int32
from cowcheck.reference.operator.javamap import java_map_order, java_string_hash
from cowcheck.reference.operator.states import BROADCAST, MODES, OperatorStateMetaInfo

__all__ = ["OperatorProxy", "StateOffsets", "StreamData", "OperatorStreamStateHandle", "RawInput",
           "OPERATOR_PROXY_VERSION", "LEGACY_PROXY_VERSION"]

OPERATOR_PROXY_VERSION = 6  # 1.18.0 on: a compression flag after the version
LEGACY_PROXY_VERSION = 5  # 1.13-1.17
OPERATOR, BROADCAST_TYPE = 1, 2  # StateMetaInfoSnapshot.BackendStateType ordinals
MODE_OPTION = "OPERATOR_STATE_DISTRIBUTION_MODE"
VALUE_SERIALIZER, KEY_SERIALIZER = "VALUE_SERIALIZER", "KEY_SERIALIZER"
MAX_STATES = 0x7FFF
_KEPT = 16
_DECODED: list = []  # (the metadata's bytes, the proxy they decode to), latest first
_ENCODED: dict = {}  # (name, mode, serializer ids) -> a meta info's bytes


def _meta_bytes(meta: OperatorStateMetaInfo) -> bytes:
    key = (meta.name, meta.mode, meta.value_serializer.serializer_id,
           None if meta.key_serializer is None else meta.key_serializer.serializer_id)
    encoded = _ENCODED.get(key)
    if encoded is None:
        if len(_ENCODED) > 256:
            _ENCODED.clear()
        encoded = _ENCODED[key] = _encode_meta(meta)
    return encoded


def _encode_meta(meta: OperatorStateMetaInfo) -> bytes:
    broadcast = meta.mode == BROADCAST
    out = bytearray(java_utf(meta.name) + I32.pack(BROADCAST_TYPE if broadcast else OPERATOR))
    out += I32.pack(1) + java_utf(MODE_OPTION) + java_utf(meta.mode)
    if not broadcast:
        return bytes(out + I32.pack(1) + java_utf(VALUE_SERIALIZER) + snapshot_bytes(meta.value_serializer))
    # A HashMap of the two keys, sized for 2: VALUE_SERIALIZER iterates first.
    out += I32.pack(2) + java_utf(VALUE_SERIALIZER) + snapshot_bytes(meta.value_serializer)
    return bytes(out + java_utf(KEY_SERIALIZER) + snapshot_bytes(meta.key_serializer))


def _read_meta(cur: FlinkCursor, broadcast: bool) -> OperatorStateMetaInfo:
    at = cur.pos
    name = cur.utf()
    where = f"operator state {name!r:.80}"
    kind = cur.take(I32)
    if kind != (BROADCAST_TYPE if broadcast else OPERATOR):
        raise CheckpointFormatError(cur.name, at, f"{where}: backend state type {kind}, expected "
                                                  f"{BROADCAST_TYPE if broadcast else OPERATOR}")
    options = _pairs(cur, where, "options", cur.utf)
    mode = options.get(MODE_OPTION)
    if set(options) != {MODE_OPTION} or mode not in MODES or (mode == BROADCAST) != broadcast:
        raise CheckpointFormatError(cur.name, at, f"{where}: options {options!r:.120}")
    serializers = _pairs(cur, where, "serializers", lambda: read_snapshot(cur))
    want = {VALUE_SERIALIZER, KEY_SERIALIZER} if broadcast else {VALUE_SERIALIZER}
    if set(serializers) != want:
        raise CheckpointFormatError(cur.name, at, f"{where}: serializers {sorted(serializers)}, expected "
                                                  f"{sorted(want)}")
    return OperatorStateMetaInfo(name, mode, serializers[VALUE_SERIALIZER], serializers.get(KEY_SERIALIZER))


def _pairs(cur: FlinkCursor, where: str, what: str, value) -> dict:
    at = cur.pos
    count = cur.take(I32)
    if not 0 <= count <= 2:
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
class OperatorProxy:
    """The metadata of an operator backend's checkpoint: its list states and broadcast states, in the
    order written (the order of the backend's maps), and whether what follows is compressed."""

    operator_states: tuple = attrs.field(converter=tuple)
    broadcast_states: tuple = attrs.field(converter=tuple)
    compressed: bool = False
    version: int = OPERATOR_PROXY_VERSION

    def encode(self) -> bytes:
        if len(self.operator_states) > MAX_STATES or len(self.broadcast_states) > MAX_STATES:
            raise ValueError("at most 32767 states of each kind (Flink writes their number as a short)")
        if self.version == LEGACY_PROXY_VERSION and self.compressed:
            raise ValueError("the version 5 proxy (Flink 1.13-1.17) has no compressed operator state")
        out = bytearray(I32.pack(self.version))
        if self.version >= OPERATOR_PROXY_VERSION:
            out.append(1 if self.compressed else 0)
        for states in (self.operator_states, self.broadcast_states):
            out += I16.pack(len(states))
            for meta in states:
                out += _meta_bytes(meta)
        return bytes(out)

    @classmethod
    def decode(cls, raw: RawInput) -> "OperatorProxy":
        """The proxy at ``raw``'s position; ``raw`` is left after it. The proxies decoded last are kept by their
        bytes (a job's instances, and every restore of its checkpoints, write the same metadata)."""
        for prefix, proxy in _DECODED:
            if raw.data.startswith(prefix, raw.pos) and raw.pos + len(prefix) <= raw.end:
                raw.seek(raw.pos + len(prefix))
                return proxy
        start = raw.pos
        proxy = cls._decode(raw)
        _DECODED.insert(0, (bytes(raw.data[start:raw.pos]), proxy))
        del _DECODED[_KEPT:]
        return proxy

    @classmethod
    def _decode(cls, raw: RawInput) -> "OperatorProxy":
        cur = FlinkCursor(raw.data, raw.pos, raw.end, raw.name, "the operator state's metadata")
        version = cur.take(I32)
        if version not in (LEGACY_PROXY_VERSION, OPERATOR_PROXY_VERSION):
            raise CheckpointFormatError(raw.name, raw.pos, f"not an operator-state checkpoint of a version this "
                                                           f"reader knows (proxy version {version}, expected 5 or 6)")
        compressed = cur.boolean() if version >= OPERATOR_PROXY_VERSION else False
        lists = [_read_meta(cur, False) for _ in range(_count(cur))]
        broadcasts = [_read_meta(cur, True) for _ in range(_count(cur))]
        names = [m.name for m in lists + broadcasts]
        if len(set(names)) != len(names):
            raise CheckpointFormatError(raw.name, raw.pos, "a state name appears twice in the metadata")
        raw.seek(cur.pos)
        return cls(lists, broadcasts, compressed, version)


def _count(cur: FlinkCursor) -> int:
    at = cur.pos
    count = cur.take(I16)
    if count < 0:
        raise CheckpointFormatError(cur.name, at, f"negative number of states {count}")
    return count


@attrs.frozen
class StateOffsets:
    """``OperatorStateHandle.StateMetaInfo``: where a state's partitions are, and its distribution mode."""

    offsets: tuple = attrs.field(converter=tuple)
    mode: str = attrs.field(validator=attrs.validators.in_(MODES))


@attrs.frozen
class StreamData:
    """The stream a handle reads (Flink ``ByteStreamStateHandle`` or ``FileStateHandle``): ``inline`` bytes or
    the file at ``path``, of ``size`` bytes; ``name`` identifies it (``hashCode``: 31 * the name's)."""

    name: str
    size: int
    inline: Optional[bytes] = attrs.field(default=None, repr=False)
    path: Optional[str] = None

    @property
    def java_hash(self) -> int:
        return to_int32(31 * java_string_hash(self.name))

    def read_bytes(self) -> bytes:
        if self.inline is not None:
            return self.inline
        data = read_file(self.path, self.size + 1)
        if len(data) != self.size:
            raise CheckpointFormatError(self.path, min(len(data), self.size),
                                        f"the handle records {self.size} bytes, the file has {len(data)}")
        return data


@attrs.frozen
class OperatorStreamStateHandle:
    """Flink's ``OperatorStreamStateHandle``: per state name its :class:`StateOffsets` (``states``, in insertion
    order; ``capacity``: the initial capacity of Flink's ``HashMap`` of them, which with the names' hashes
    decides the order Flink iterates them: :meth:`names`) over a stream (:class:`StreamData`)."""

    states: dict = attrs.field(converter=dict)
    stream: StreamData
    capacity: Optional[int] = None

    def names(self) -> list[str]:
        """The state names in the order Flink's handle iterates them."""
        return java_map_order(self.states, java_string_hash, self.capacity)

    def describe(self) -> str:
        """The handle as text (``OperatorHandle.describe`` writes Flink's the same way): per state ``state NAME
        MODE OFFSETS...``, then ``bytes BASE64`` or ``file SIZE PATH``."""
        lines = [f"state {name} {self.states[name].mode} " + " ".join(map(str, self.states[name].offsets))
                 for name in self.names()]
        s = self.stream
        lines.append(f"bytes {base64.b64encode(s.inline).decode('ascii')}" if s.inline is not None
                     else f"file {s.size} {s.path}")
        return "\n".join(line.rstrip() for line in lines)

    @classmethod
    def rebuild(cls, text: str, name: str = "described") -> "OperatorStreamStateHandle":
        """The handle :meth:`describe` (or ``OperatorHandle.describe``) wrote; a file is read where it lies."""
        states = {}
        *state_lines, data_line = text.split("\n")
        for line in state_lines:
            _, state, mode, *offsets = line.split(" ")
            states[state] = StateOffsets([int(o) for o in offsets], mode)
        kind, rest = data_line.split(" ", 1)
        if kind == "bytes":
            data = base64.b64decode(rest)
            stream = StreamData(name, len(data), inline=data)
        else:
            size, path = rest.split(" ", 1)
            if path.startswith("file:"):
                path = "/" + path[len("file:"):].lstrip("/")
            stream = StreamData(path, int(size), path=path)
        return cls(states, stream)


