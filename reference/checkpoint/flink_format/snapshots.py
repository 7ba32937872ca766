"""Serializer snapshots as Flink writes them (``TypeSerializerSnapshot``), for the serializers the reference has.

A Flink checkpoint names each serializer by the Java class of its snapshot
and the snapshot's own bytes; Flink restores it by loading that class. The
reference never loads anything a file names: :data:`SNAPSHOTS` is a fixed
table from snapshot class name to the reference serializer it stands for,
and a name outside it is a :class:`~cowcheck.reference.errors.CheckpointFormatError`.

Layout (the same bytes in every release 1.13.6-2.3.0: class names checked
with ``javap`` on 1.13.6 and 2.2.0, the bytes restored by real Flink 1.13.6 and
2.3.0 through ``cowcheck.flink.backend_releases``; the facts below in
``tests/test_flink_format.py``):

- at the top level (``TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot``):
  ``i32 2`` (the proxy's version), then the versioned snapshot;
- a versioned snapshot (``TypeSerializerSnapshot.writeVersionedSnapshot``): the
  class name (``writeUTF``), ``i32`` its version, its content;
- a simple serializer's snapshot (``SimpleTypeSerializerSnapshot``, version 3):
  no content;
- a composite one (``CompositeTypeSerializerSnapshot``, version 3): ``i32
  911108`` (its magic number), ``i32`` the outer version (list 1, map 1,
  TTL 2), then the nested snapshots (``NestedSerializersSnapshotDelegate``):
  ``i32 1333245``, ``i32 1``, ``i32`` their count, each a versioned snapshot.

>>> from cowcheck.reference.serializers import IntSerializer, ListSerializer
>>> data = snapshot_bytes(ListSerializer(IntSerializer()))
>>> data[6:6 + 16]
b'org.apache.flink'
>>> from cowcheck.reference.checkpoint.flink_format.datastream import FlinkCursor
>>> read_snapshot(FlinkCursor(data, 0, len(data), "f", "a snapshot")).serializer_id
'list<int>'
"""

from __future__ import annotations

from typing import Callable

import attrs

from cowcheck.reference.checkpoint.flink_format.datastream import I32, FlinkCursor, java_utf
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.serializers import (MAX_SERIALIZER_DEPTH, BytesSerializer, IntSerializer, ListSerializer,
                                             LongArraySerializer, LongSerializer, MapSerializer, StringSerializer,
                                             TimeWindowSerializer, TtlSerializer, VoidNamespaceSerializer)

__all__ = ["SnapshotKind", "SNAPSHOTS", "snapshot_class", "snapshot_bytes", "write_snapshot", "read_snapshot",
           "read_versioned", "UnsupportedSerializerError", "PROXY_VERSION", "CustomSnapshot", "CUSTOM",
           "register_custom_snapshot"]

PROXY_VERSION = 2  # TypeSerializerSnapshotSerializationProxy
SIMPLE_VERSION = 3  # SimpleTypeSerializerSnapshot
COMPOSITE_VERSION = 3  # CompositeTypeSerializerSnapshot
COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
NESTED_VERSION = 1

_BASE = "org.apache.flink.api.common.typeutils.base."


class UnsupportedSerializerError(ValueError):
    """A serializer with no snapshot in :data:`SNAPSHOTS` (``.serializer_id``): it cannot be written in
    Flink's checkpoint format."""

    def __init__(self, serializer) -> None:
        sid = getattr(serializer, "serializer_id", repr(serializer))
        super().__init__(f"Flink's checkpoint format: no serializer snapshot for {sid} (supported: "
                         f"{', '.join(sorted(k.name for k in SNAPSHOTS.values()))})")
        self.serializer_id = sid


@attrs.frozen
class SnapshotKind:
    """One snapshot class: its Java name, the reference serializer class it stands for, and, for a
    composite, its outer version and how to get (``nested``) and rebuild (``build``) its parts."""

    name: str
    java_class: str
    serializer_class: type
    outer_version: int = 0  # 0: a simple snapshot
    arity: int = 0  # how many snapshots a composite nests
    nested: Callable = lambda serializer: ()
    build: Callable = lambda *parts: None

    @property
    def composite(self) -> bool:
        return self.outer_version != 0


_KINDS = (
    SnapshotKind("int", _BASE + "IntSerializer$IntSerializerSnapshot", IntSerializer),
    SnapshotKind("long", _BASE + "LongSerializer$LongSerializerSnapshot", LongSerializer),
    SnapshotKind("string", _BASE + "StringSerializer$StringSerializerSnapshot", StringSerializer),
    SnapshotKind("bytes", _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot",
                 BytesSerializer),
    SnapshotKind("longs", _BASE + "array.LongPrimitiveArraySerializer$LongPrimitiveArraySerializerSnapshot",
                 LongArraySerializer),
    SnapshotKind("void", "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
                 VoidNamespaceSerializer),
    SnapshotKind("timewindow",
                 "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot",
                 TimeWindowSerializer),
    SnapshotKind("list", _BASE + "ListSerializerSnapshot", ListSerializer, 1, 1,
                 lambda s: (s.element_serializer,), lambda element: ListSerializer(element)),
    SnapshotKind("map", _BASE + "MapSerializerSnapshot", MapSerializer, 1, 2,
                 lambda s: (s.key_serializer, s.value_serializer), lambda key, value: MapSerializer(key, value)),
    # TtlSerializer is a CompositeSerializer of the timestamp (LongSerializer) and the user value.
    SnapshotKind("ttl", "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot", TtlSerializer, 2, 2,
                 lambda s: (LongSerializer(), s.user_value_serializer), lambda timestamp, value: TtlSerializer(value)),
)
SNAPSHOTS: dict[str, SnapshotKind] = {k.java_class: k for k in _KINDS}
_BY_CLASS: dict[type, SnapshotKind] = {k.serializer_class: k for k in _KINDS}


@attrs.frozen
class CustomSnapshot:
    """A snapshot whose content is not simple or composite (a POJO's, Kryo's: pojo_snapshots.py):
    ``write(serializer, out)`` appends its version and content, ``read(cursor, depth)`` reads them
    after the class name and returns the serializer."""

    java_class: str
    serializer_class: type
    write: Callable
    read: Callable


CUSTOM: dict[str, CustomSnapshot] = {}
_CUSTOM_BY_CLASS: dict[type, CustomSnapshot] = {}


def register_custom_snapshot(custom: CustomSnapshot) -> None:
    CUSTOM[custom.java_class] = custom
    _CUSTOM_BY_CLASS[custom.serializer_class] = custom


def _custom_of(serializer):
    """The custom snapshot of ``serializer``'s class or of the class it derives from, or None."""
    return next((_CUSTOM_BY_CLASS[c] for c in type(serializer).__mro__ if c in _CUSTOM_BY_CLASS), None)


def _kind_of(serializer) -> SnapshotKind:
    kind = _BY_CLASS.get(type(serializer))
    if kind is None:
        raise UnsupportedSerializerError(serializer)
    return kind


def snapshot_class(serializer) -> str:
    """The Java class of ``serializer``'s snapshot."""
    custom = _custom_of(serializer)
    return custom.java_class if custom is not None else _kind_of(serializer).java_class


def write_snapshot(serializer, out: bytearray) -> None:
    """``serializer``'s versioned snapshot (no proxy version in front: as nested snapshots are written)."""
    custom = _custom_of(serializer)
    if custom is not None:
        out += java_utf(custom.java_class)
        custom.write(serializer, out)
        return
    kind = _kind_of(serializer)
    out += java_utf(kind.java_class)
    if not kind.composite:
        out += I32.pack(SIMPLE_VERSION)
        return
    nested = kind.nested(serializer)
    out += I32.pack(COMPOSITE_VERSION) + I32.pack(COMPOSITE_MAGIC) + I32.pack(kind.outer_version)
    out += I32.pack(NESTED_MAGIC) + I32.pack(NESTED_VERSION) + I32.pack(len(nested))
    for part in nested:
        write_snapshot(part, out)


def snapshot_bytes(serializer) -> bytes:
    """What ``writeSerializerSnapshot`` writes for ``serializer``: the proxy's version, then its snapshot."""
    out = bytearray(I32.pack(PROXY_VERSION))
    write_snapshot(serializer, out)
    return bytes(out)


def _expect(cur: FlinkCursor, want: int, what: str) -> None:
    at = cur.pos
    found = cur.take(I32)
    if found != want:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: {what} {found}, expected {want}")


def read_versioned(cur: FlinkCursor, depth: int = 0):
    """The reference serializer a versioned snapshot stands for; CheckpointFormatError otherwise."""
    at = cur.pos
    if depth >= MAX_SERIALIZER_DEPTH:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: serializer snapshots nested deeper than "
                                                  f"{MAX_SERIALIZER_DEPTH} levels")
    name = cur.utf()
    if name in CUSTOM:
        return CUSTOM[name].read(cur, depth)
    kind = SNAPSHOTS.get(name)
    if kind is None:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: serializer snapshot class {name!r:.120} is not one "
                                                  f"this reader knows (a file's class names are never loaded; known: "
                                                  f"{', '.join(sorted(k.name for k in _KINDS))})")
    if not kind.composite:
        _expect(cur, SIMPLE_VERSION, f"{kind.name} serializer snapshot version")
        return kind.serializer_class()
    _expect(cur, COMPOSITE_VERSION, f"{kind.name} serializer snapshot version")
    _expect(cur, COMPOSITE_MAGIC, "composite serializer snapshot magic number")
    _expect(cur, kind.outer_version, f"{kind.name} serializer snapshot outer version")
    _expect(cur, NESTED_MAGIC, "nested serializer snapshots magic number")
    _expect(cur, NESTED_VERSION, "nested serializer snapshots version")
    _expect(cur, kind.arity, f"number of serializers nested in a {kind.name} serializer snapshot")
    parts = [read_versioned(cur, depth + 1) for _ in range(kind.arity)]
    if kind.name == "ttl" and type(parts[0]) is not LongSerializer:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: a TTL serializer's timestamp serializer is "
                                                  f"{parts[0].serializer_id}, not long")
    return kind.build(*parts)


def read_snapshot(cur: FlinkCursor):
    """What ``readSerializerSnapshot`` reads: the proxy's version, then a versioned snapshot."""
    _expect(cur, PROXY_VERSION, "serializer snapshot proxy version")
    return read_versioned(cur)
