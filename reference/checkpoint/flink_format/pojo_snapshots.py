"""The snapshots of a POJO's and of Kryo's serializer, as Flink writes them (byte for byte).

``PojoSerializerSnapshot`` (version 2; the same bytes in every release 1.13.6-2.3.0):

```
utf   the POJO's class name
      the fields, an optional map (LinkedOptionalMapSerializer):
i64   0x4f2c69a3d70   (the map's magic number)
i32   number of fields, then per field in name order:
  utf   the field's name
  bool  1, i32 frame length, frame: utf declaring class, utf field name
  bool  1, i32 frame length, frame: the field serializer's versioned snapshot
      the registered subclasses' and the other subclasses' serializers: two empty optional maps
      (the magic number, i32 0); the reference writes and reads no subclasses
```

``KryoSerializerSnapshot`` (version 2): the class name, then Flink's Kryo
registrations (the class itself, and Flink's default Avro ``GenericData$Array``
registration) and two empty maps of default serializers. The reference writes
these bytes as Flink wrote them for the class (recorded from 2.3.0: the same
in 1.13.6, 1.17.2, 2.0.0) and reads back exactly those, for any class name:
it does not read Kryo registrations, and any other content is a
:class:`~cowcheck.reference.errors.CheckpointFormatError`.

>>> from cowcheck.reference.pojo import PojoSerializer
>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.checkpoint.flink_format.snapshots import snapshot_bytes, read_snapshot
>>> from cowcheck.reference.checkpoint.flink_format.datastream import FlinkCursor
>>> data = snapshot_bytes(PojoSerializer("a.B", [("x", IntSerializer())]))
>>> read_snapshot(FlinkCursor(data, 0, len(data), "f", "a snapshot")).serializer_id
'pojo:a.B:x<int>'
"""

from __future__ import annotations

from cowcheck.reference.checkpoint.flink_format.datastream import BOOL, I32, I64, FlinkCursor, java_utf
from cowcheck.reference.checkpoint.flink_format.snapshots import (CustomSnapshot, read_versioned,
                                                                  register_custom_snapshot, write_snapshot)
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.kryo import KRYO_CLASSES, KryoSerializer
from cowcheck.reference.pojo import PojoSerializer

__all__ = ["POJO_SNAPSHOT", "KRYO_SNAPSHOT", "OPTIONAL_MAP_MAGIC"]

POJO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
POJO_VERSION = KRYO_VERSION = 2
OPTIONAL_MAP_MAGIC = 0x4F2C69A3D70  # LinkedOptionalMapSerializer.HEADER_MAGIC_NUMBER
_EMPTY_MAP = I64.pack(OPTIONAL_MAP_MAGIC) + I32.pack(0)
# Flink's default Kryo registration of Avro's GenericData$Array (a dummy class and serializer without
# Avro on the class path), as KryoSerializerSnapshot writes it: the map key, then its frames.
_AVRO = bytes.fromhex(
    "00296f72672e6170616368652e6176726f2e67656e657269632e47656e6572696344617461244172726179010000002b"
    "00296f72672e6170616368652e6176726f2e67656e657269632e47656e657269634461746124417272617901000000b6"
    "00556f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e6b72"
    "796f2e53657269616c697a6572732444756d6d794176726f52656769737465726564436c6173730000000100596f7267"
    "2e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d652e6b72796f2e5365"
    "7269616c697a6572732444756d6d794176726f4b72796f53657269616c697a6572436c617373")


def _framed(content: bytes) -> bytes:
    """An optional map's present entry part: ``true``, the length, the bytes."""
    return BOOL.pack(1) + I32.pack(len(content)) + content


def _write_pojo(serializer: PojoSerializer, out: bytearray) -> None:
    out += I32.pack(POJO_VERSION) + java_utf(serializer.class_name)
    out += I64.pack(OPTIONAL_MAP_MAGIC) + I32.pack(len(serializer.fields))
    for name, field_serializer in serializer.fields:
        nested = bytearray()
        write_snapshot(field_serializer, nested)
        out += java_utf(name) + _framed(java_utf(serializer.class_name) + java_utf(name)) + _framed(bytes(nested))
    out += _EMPTY_MAP + _EMPTY_MAP


def _expect(cur: FlinkCursor, value: int, st, what: str) -> None:
    at = cur.pos
    found = cur.take(st)
    if found != value:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: {what} {found}, expected {value}")


def _frame(cur: FlinkCursor, what: str) -> FlinkCursor:
    """The cursor over a present entry part's frame (the caller's cursor moves past it)."""
    at = cur.pos
    if not cur.boolean():
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: {what} absent (the class did not know it)")
    size = cur.take(I32)
    if size < 0 or cur.pos + size > cur.end:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: {what}: a frame of {size} bytes does not fit")
    frame = FlinkCursor(cur.data, cur.pos, cur.pos + size, cur.name, f"{cur.what}, {what}")
    cur.pos += size
    return frame


def _read_pojo(cur: FlinkCursor, depth: int) -> PojoSerializer:
    _expect(cur, POJO_VERSION, I32, "POJO serializer snapshot version")
    class_name = cur.utf()
    _expect(cur, OPTIONAL_MAP_MAGIC, I64, "the fields' optional map magic number")
    count_at = cur.pos
    count = cur.take(I32)
    if not 0 <= count <= 1024:
        raise CheckpointFormatError(cur.name, count_at, f"{cur.what}: {count} fields")
    fields = []
    for _ in range(count):
        name = cur.utf()
        field = _frame(cur, f"field {name!r:.40}")
        declaring, field_name = field.utf(), field.utf()
        if (declaring, field_name) != (class_name, name) or field.pos != field.end:
            raise CheckpointFormatError(cur.name, field.pos, f"{cur.what}: field {name!r:.40} is {declaring!r:.60}."
                                                             f"{field_name!r:.40} (a superclass's fields are not read)")
        nested = _frame(cur, f"the serializer of field {name!r:.40}")
        fields.append((name, read_versioned(nested, depth + 1)))
        if nested.pos != nested.end:
            raise CheckpointFormatError(cur.name, nested.pos, f"{cur.what}: bytes left in field {name!r:.40}'s frame")
    for what in ("registered subclasses", "other subclasses"):
        _expect(cur, OPTIONAL_MAP_MAGIC, I64, f"the {what}' optional map magic number")
        _expect(cur, 0, I32, f"number of {what} (the reference reads POJOs without subclasses)")
    try:
        return PojoSerializer(class_name, fields)
    except ValueError as exc:
        raise CheckpointFormatError(cur.name, count_at, f"{cur.what}: {exc}") from None


def _kryo_content(class_name: str) -> bytes:
    name = java_utf(class_name)
    return (I32.pack(KRYO_VERSION) + name + I64.pack(OPTIONAL_MAP_MAGIC) + I32.pack(2)
            + name + _framed(name) + _framed(name + I32.pack(0)) + _AVRO + _EMPTY_MAP + _EMPTY_MAP)


def _write_kryo(serializer: KryoSerializer, out: bytearray) -> None:
    out += _kryo_content(serializer.class_name)


def _read_kryo(cur: FlinkCursor, depth: int) -> KryoSerializer:
    at = cur.pos
    _expect(cur, KRYO_VERSION, I32, "Kryo serializer snapshot version")
    class_name = cur.utf()
    cur.pos = at
    want = _kryo_content(class_name)
    if bytes(cur.data[at:at + len(want)]) != want:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: a Kryo serializer snapshot of {class_name!r:.80} "
                                                  f"other than the one Flink writes with its default registrations "
                                                  f"(the reference reads that one only)")
    cur.pos = at + len(want)
    fields = KRYO_CLASSES.get(class_name)
    if fields is None:
        raise CheckpointFormatError(cur.name, at, f"{cur.what}: Kryo class {class_name!r:.80}: the reference knows "
                                                  f"the fields of {', '.join(sorted(KRYO_CLASSES)) or 'no class'} only "
                                                  f"(a Kryo snapshot does not record them: register_kryo_class)")
    return KryoSerializer(class_name, fields)

register_custom_snapshot(CustomSnapshot(POJO_SNAPSHOT, PojoSerializer, _write_pojo, _read_pojo))
register_custom_snapshot(CustomSnapshot(KRYO_SNAPSHOT, KryoSerializer, _write_kryo, _read_kryo))
