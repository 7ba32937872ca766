"""Serializers writing the same bytes as Flink's serializers of the same names.

Each offers ``serialize(value, out)``, ``deserialize(inp)`` and ``copy(value)``;
``out``/``inp`` are binary file-likes. Big-endian, as Flink's DataOutputView.

>>> import io
>>> buf = io.BytesIO(); ListSerializer(IntSerializer()).serialize([1, 2], buf)
>>> buf.getvalue().hex()
'000000020000000100000002'
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

__all__ = ["IntSerializer", "LongSerializer", "StringSerializer", "ListSerializer", "SerializationError"]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class SerializationError(ValueError):
    """Bytes that do not decode (truncated input, bad length) or a value that cannot be written."""


def _read_exact(inp: BinaryIO, n: int) -> bytes:
    data = inp.read(n)
    if len(data) != n:
        raise SerializationError(f"unexpected end of input: wanted {n} bytes, got {len(data)}")
    return data


class IntSerializer:
    """Flink IntSerializer: 4 bytes big-endian. Ints are immutable, so ``copy`` is identity."""

    serializer_id = "int"

    def serialize(self, value: int, out: BinaryIO) -> None:
        try:
            out.write(_INT.pack(value))
        except struct.error as exc:
            raise SerializationError(f"IntSerializer: {value!r} is not an int32") from exc

    def deserialize(self, inp: BinaryIO) -> int:
        return _INT.unpack(_read_exact(inp, 4))[0]

    def copy(self, value: int) -> int:
        return value


class LongSerializer(IntSerializer):
    """Flink LongSerializer: 8 bytes big-endian."""

    serializer_id = "long"

    def serialize(self, value: int, out: BinaryIO) -> None:
        try:
            out.write(_LONG.pack(value))
        except struct.error as exc:
            raise SerializationError(f"LongSerializer: {value!r} is not an int64") from exc

    def deserialize(self, inp: BinaryIO) -> int:
        return _LONG.unpack(_read_exact(inp, 8))[0]


class StringSerializer:
    """Flink StringSerializer (``StringValue.writeString``): length+1 as a
    7-bit varint (0 means null), then each UTF-16 code unit as a 7-bit varint."""

    serializer_id = "string"

    @staticmethod
    def _write_varint(n: int, buf: bytearray) -> None:
        while n >= 0x80:
            buf.append((n & 0x7F) | 0x80)
            n >>= 7
        buf.append(n)

    def serialize(self, value: str | None, out: BinaryIO) -> None:
        buf = bytearray()
        if value is None:
            buf.append(0)
        else:
            units = value.encode("utf-16-be", "surrogatepass")
            self._write_varint(len(units) // 2 + 1, buf)
            for i in range(0, len(units), 2):
                self._write_varint((units[i] << 8) | units[i + 1], buf)
        out.write(bytes(buf))

    @staticmethod
    def _read_varint(inp: BinaryIO) -> int:
        shift = 0
        result = 0
        while True:
            b = _read_exact(inp, 1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise SerializationError("StringSerializer: varint longer than 5 bytes")

    def deserialize(self, inp: BinaryIO) -> str | None:
        length = self._read_varint(inp)
        if length == 0:
            return None
        units = bytearray()
        for _ in range(length - 1):
            c = self._read_varint(inp)
            if c > 0xFFFF:
                raise SerializationError(f"StringSerializer: code unit {c:#x} out of range")
            units += c.to_bytes(2, "big")
        return units.decode("utf-16-be", "surrogatepass")

    def copy(self, value: str | None) -> str | None:
        return value


class ListSerializer:
    """Flink ListSerializer: int32 size, then each element. ``copy`` copies every element."""

    def __init__(self, element_serializer: Any) -> None:
        self.element_serializer = element_serializer

    @property
    def serializer_id(self) -> str:
        return f"list<{self.element_serializer.serializer_id}>"

    def serialize(self, value: list, out: BinaryIO) -> None:
        if value is None:
            raise SerializationError("ListSerializer: cannot serialize None")
        out.write(_INT.pack(len(value)))
        ser = self.element_serializer
        for element in value:
            ser.serialize(element, out)

    def deserialize(self, inp: BinaryIO) -> list:
        size = _INT.unpack(_read_exact(inp, 4))[0]
        if size < 0:
            raise SerializationError(f"ListSerializer: negative size {size}")
        ser = self.element_serializer
        return [ser.deserialize(inp) for _ in range(size)]

    def copy(self, value: list) -> list:
        if value is None:
            raise SerializationError("ListSerializer: cannot copy None")
        c = self.element_serializer.copy
        return [c(x) for x in value]
