"""Java's ``DataOutput`` / ``DataInput`` as Flink's views use them: big-endian ints, ``writeUTF``.

``writeUTF`` writes a ``u16`` byte length, then the string's UTF-16 code units
in Java's *modified* UTF-8: a unit 0x01-0x7F in one byte, 0x00 and
0x80-0x7FF in two, every other unit (each half of a surrogate pair
included) in three. :class:`FlinkCursor` reads it back as Java's
``readUTF`` does, and every read is bounded by the cursor's end: a
:class:`~cowcheck.reference.errors.CheckpointFormatError` names the file, the offset
and what was being read.

>>> java_utf("a\\x00é").hex()
'000561c080c3a9'
>>> FlinkCursor(java_utf("a\\x00é"), 0, 7, "f", "a name").utf()
'a\\x00é'
"""

from __future__ import annotations

import struct

from cowcheck.reference.checkpoint.format import Cursor
from cowcheck.reference.errors import CheckpointFormatError

__all__ = ["java_utf", "FlinkCursor", "BOOL", "I16", "I32", "I64", "U16"]

BOOL = struct.Struct(">B")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def java_utf(text: str) -> bytes:
    """``DataOutput.writeUTF(text)``; ValueError past 65535 bytes (Java: UTFDataFormatException)."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        c = (units[i] << 8) | units[i + 1]
        if 0 < c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes((0xC0 | c >> 6, 0x80 | c & 0x3F))
        else:
            out += bytes((0xE0 | c >> 12, 0x80 | c >> 6 & 0x3F, 0x80 | c & 0x3F))
    if len(out) > 0xFFFF:
        raise ValueError(f"a Java UTF string is at most 65535 bytes, this one takes {len(out)}")
    return U16.pack(len(out)) + bytes(out)


class FlinkCursor(Cursor):
    """A :class:`~cowcheck.reference.checkpoint.format.Cursor` whose strings are Java's ``readUTF``."""

    __slots__ = ()

    def utf(self) -> str:
        at = self.pos
        size = self.take(U16)
        if self.pos + size > self.end:
            raise CheckpointFormatError(self.name, at, f"{self.what} ends early (a string of {size} bytes)")
        raw, i, units = self.data, self.pos, bytearray()
        end = self.pos + size
        ascii_run = bytes(raw[i:end])
        if ascii_run.isascii():  # one byte per unit: what the loop below decodes, at C speed
            self.pos = end
            return ascii_run.decode("ascii")
        while i < end:
            b = raw[i]
            if b < 0x80:
                c, i = b, i + 1
            elif b >> 5 == 0b110 and i + 1 < end and raw[i + 1] >> 6 == 0b10:
                c, i = (b & 0x1F) << 6 | raw[i + 1] & 0x3F, i + 2
            elif b >> 4 == 0b1110 and i + 2 < end and raw[i + 1] >> 6 == 0b10 and raw[i + 2] >> 6 == 0b10:
                c, i = (b & 0x0F) << 12 | (raw[i + 1] & 0x3F) << 6 | raw[i + 2] & 0x3F, i + 3
            else:
                raise CheckpointFormatError(self.name, i, f"{self.what}: malformed Java UTF string")
            units += c.to_bytes(2, "big")
        self.pos = end
        return units.decode("utf-16-be", "surrogatepass")

    def boolean(self) -> bool:
        at = self.pos
        value = self.take(BOOL)
        if value > 1:
            raise CheckpointFormatError(self.name, at, f"{self.what}: a boolean byte is 0 or 1, found {value}")
        return bool(value)
