"""A generic type through Kryo: Flink's ``KryoSerializer`` for one class of ``byte[]`` and ``int`` fields.

The reference does not port Kryo. It writes and reads the bytes Flink's
``KryoSerializer`` (Kryo 2.24, ``FieldSerializer``) writes for an object of
one class whose fields are ``byte[]`` or ``int`` (a :class:`~cowcheck.reference.pojo.Record`),
and takes that serializer's snapshot as opaque bytes recorded from Flink
(flink_format/pojo_snapshots.py). The bytes, the same in every release
1.13.6-2.3.0 (checked against Flink's serializer):

```
varint   the class's registration id + 2   (Flink registers the state's class after its 85
                                            default registrations: 87, 0x57); 0 for null, alone
varint   1                                  (a new object: Kryo's reference marker)
per field, in the order of their names:
  int     zig-zag varint
  byte[]  varint 0 for null, else 1 (a new object), then varint length + 1 and the bytes
```

A varint is Kryo's: 7 bits a byte, lowest first, the high bit set on all but
the last. An empty array is read with a zero-length read, as Flink's
``NoFetchingInput`` does up to 1.20 (2.x skips the read): the stream's answer
to it then decides (``java_read``: 0, never -1, for a zero-length read, as
``InputStream`` says).

The serializer has state of its own, as Flink's has a Kryo instance: a
scratch buffer that ``copy`` serializes through and reads back (Flink falls
back to that when Kryo cannot copy). ``duplicate()`` returns a serializer
with a buffer of its own, so the asynchronous part of a snapshot and the
task thread never share one.

>>> import io
>>> s = KryoSerializer("cowcheck.types.Blob", [("tag", "bytes"), ("n", "int"), ("data", "bytes")])
>>> out = io.BytesIO(); s.serialize(Record("cowcheck.types.Blob", {"data": b"\\x01\\x02", "n": 7, "tag": b""}), out)
>>> out.getvalue().hex()
'5701010301020e0101'
>>> s.deserialize(io.BytesIO(out.getvalue())).fields["tag"]
b''
"""

from __future__ import annotations

import io
from typing import BinaryIO, Optional

from cowcheck.reference.pojo import Record
from cowcheck.reference.serializers import SerializationError, _read_exact, register_serializer_family

__all__ = ["KryoSerializer", "java_read", "REGISTRATION_ID", "FIELD_KINDS", "KRYO_CLASSES",
           "register_kryo_class"]

# Flink's KryoSerializer registers the type it serializes after its default registrations.
REGISTRATION_ID = 85
FIELD_KINDS = ("bytes", "int")


def java_read(inp: BinaryIO, n: int) -> Optional[bytes]:
    """``inp.read(b, 0, n)`` as Java sees it: None for -1. A stream with a ``java_read`` of its own
    answers (cowcheck.reference.checkpoint.streams.ByteStreamInput); a plain file-like gives b"" for
    a zero-length read."""
    read = getattr(inp, "java_read", None)
    if read is not None:
        return read(n)
    data = inp.read(n)
    return data if data or n == 0 else None


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(inp: BinaryIO) -> int:
    result = 0
    for shift in range(0, 35, 7):
        b = _read_exact(inp, 1)[0]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
    raise SerializationError("Kryo: a varint longer than 5 bytes")


def _zigzag(value: int) -> int:
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def _unzigzag(value: int) -> int:
    result = (value >> 1) ^ -(value & 1)
    return result - (1 << 32) if result >= 1 << 31 else result


class KryoSerializer:
    """Flink ``KryoSerializer`` of ``class_name`` whose fields (``fields``: (name, kind) pairs, kind
    in :data:`FIELD_KINDS`) Kryo's ``FieldSerializer`` writes in name order. See the module docstring."""

    def __init__(self, class_name: str, fields: list) -> None:
        if not class_name or any(c in class_name for c in "<>,:/ "):
            raise ValueError(f"KryoSerializer: bad class name {class_name!r}")
        self.class_name = class_name
        self.fields = sorted(fields)
        if any(kind not in FIELD_KINDS for _, kind in self.fields):
            raise ValueError(f"KryoSerializer: field kinds are {FIELD_KINDS}, got {self.fields!r}")
        self._scratch = bytearray()  # what copy() serializes through (Kryo's Output buffer)

    @property
    def serializer_id(self) -> str:
        return f"kryo:{self.class_name}:" + ":".join(f"{n}/{k}" for n, k in self.fields)

    def encode(self, value: Optional[Record], out: bytearray) -> None:
        if value is None:
            out += b"\x00"
            return
        if not isinstance(value, Record) or value.class_name != self.class_name or \
                list(value.fields) != [n for n, _ in self.fields]:
            raise SerializationError(f"KryoSerializer({self.class_name}): {value!r:.100} is not an object of the class")
        out += _varint(REGISTRATION_ID + 2) + b"\x01"
        for name, kind in self.fields:
            field = value.fields[name]
            if kind == "int":
                if type(field) is not int or not -(1 << 31) <= field < 1 << 31:
                    raise SerializationError(f"KryoSerializer: field {name!r} is an int, got {field!r:.40}")
                out += _varint(_zigzag(field))
            elif field is None:
                out += b"\x00"
            else:
                out += b"\x01" + _varint(len(field) + 1) + bytes(field)

    def serialize(self, value: Optional[Record], out: BinaryIO) -> None:
        buffer = bytearray()
        self.encode(value, buffer)
        out.write(bytes(buffer))

    def deserialize(self, inp: BinaryIO) -> Optional[Record]:
        class_id = _read_varint(inp)
        if class_id == 0:
            return None
        if class_id != REGISTRATION_ID + 2:
            raise SerializationError(f"Kryo: class registration {class_id - 2}, expected {REGISTRATION_ID} "
                                     f"({self.class_name})")
        self._expect_new(inp, "the object")
        fields = {}
        for name, kind in self.fields:
            if kind == "int":
                fields[name] = _unzigzag(_read_varint(inp))
                continue
            marker = _read_varint(inp)
            if marker == 0:
                fields[name] = None
                continue
            if marker != 1:
                raise SerializationError(f"Kryo: field {name!r}: a back reference ({marker}), never written here")
            size = _read_varint(inp) - 1
            if size < 0:
                raise SerializationError(f"Kryo: field {name!r}: a null array where a length was expected")
            fields[name] = self._read_bytes(inp, size)
        return Record(self.class_name, fields)

    @staticmethod
    def _expect_new(inp: BinaryIO, what: str) -> None:
        marker = _read_varint(inp)
        if marker != 1:
            raise SerializationError(f"Kryo: {what}: reference marker {marker}, expected 1 (a new object)")

    @staticmethod
    def _read_bytes(inp: BinaryIO, size: int) -> bytes:
        """``NoFetchingInput.readBytes``: read until ``size`` bytes came, an empty array with one
        zero-length read; -1 from the stream is the end ("No more bytes left")."""
        data = bytearray()
        while True:
            chunk = java_read(inp, size - len(data))
            if chunk is None:
                raise SerializationError("Kryo: No more bytes left (the stream answered -1)")
            data += chunk
            if len(data) == size:
                return bytes(data)

    def copy(self, value: Optional[Record]) -> Optional[Record]:
        """Serialized into the scratch buffer and read back (a deep copy)."""
        scratch = self._scratch
        scratch.clear()
        self.encode(value, scratch)
        return self.deserialize(io.BytesIO(scratch))

    def duplicate(self) -> "KryoSerializer":
        return KryoSerializer(self.class_name, self.fields)

    def __repr__(self) -> str:
        return f"KryoSerializer({self.serializer_id})"


# The classes whose field layout the reference knows (class name -> (name, kind) pairs): a Kryo
# snapshot does not record the fields, so a restore needs them before any descriptor comes.
KRYO_CLASSES: dict = {}


def register_kryo_class(class_name: str, fields: list) -> KryoSerializer:
    """Make ``class_name``'s layout known to restores; its serializer."""
    serializer = KryoSerializer(class_name, fields)
    KRYO_CLASSES[class_name] = serializer.fields
    return serializer


def _kryo_from_id(parameters: str) -> KryoSerializer:
    class_name, *fields = parameters.split(":")
    return KryoSerializer(class_name, [tuple(f.split("/", 1)) for f in fields])


register_serializer_family("kryo", _kryo_from_id)
