"""Snappy framed streams as Flink's snapshot compression writes and reads them (``SnappyStreamCompressionDecorator``).

Flink compresses checkpoints (``ExecutionConfig#setUseSnapshotCompression``)
through xerial's ``SnappyFramedOutputStream(out, 65536, 0.85)`` and reads them
through ``SnappyFramedInputStream(in, verifyChecksums=false)`` (``javap`` on
1.13.6, 1.18.1 and 2.3.0: the same constants). The framing is snappy's
``framing_format.txt``:

```
ff 06 00 00 "sNaPpY"               the stream identifier, written when the stream opens
per chunk: u8 type, u24 length (little-endian), then the body:
  00  u32 masked CRC-32C of the uncompressed bytes (little-endian), the snappy block
  01  u32 masked CRC-32C, the bytes as they are
  ff  a stream identifier again (a reader skips it: several streams back to back)
  80-fe  skippable; 02-7f  reserved, a reader stops
```

The writer buffers 64 KiB and writes a chunk when the buffer is full and more
bytes come, or on ``flush``/``close``: compressed when the compressed block is
at most 0.85 of the bytes, as they are otherwise. The blocks themselves come
from ``cramjam`` (Rust's snap crate; its compressed bytes may differ from the C++
library's xerial ships, which every snappy reader accepts), as does the CRC.

On top of the framed streams, the two ways Flink uses them:

- keyed key groups (``HeapSnapshotStrategy``): each state of a key group in a
  framed stream of its own, read back by one framed stream per key group;
- operator state (from 1.18.0, ``CompressibleFSDataOutputStream``): one framed
  stream after the metadata, whose position (``tell``) flushes first (2.3.0:
  so each element starts a chunk; 1.18.x did not flush, FLINK-34063), and its
  reading side (``CompressibleFSDataInputStream``): ``seek`` drops what the
  framed stream holds decompressed (1.19.0 on) and moves the file.

>>> out = _Sink()
>>> framed = SnappyFramedOutput(out); framed.write(b"hello"); framed.close()
>>> bytes(out.data).hex()
'ff060000734e6150705901090000bb1f1c1968656c6c6f'
>>> SnappyFramedInput(RawInput(bytes(out.data), 0, "f")).read(5)
b'hello'
"""

from __future__ import annotations

from typing import Optional

import cramjam

from cowcheck.reference.errors import CheckpointFormatError

__all__ = ["HEADER", "BLOCK_SIZE", "MIN_COMPRESSION_RATIO", "SnappyFramedOutput", "SnappyFramedInput", "RawInput",
           "CompressibleOutput", "CompressibleInput", "compress_stream", "masked_crc32c"]

HEADER = b"\xff\x06\x00\x00sNaPpY"
BLOCK_SIZE = 65536  # SnappyStreamCompressionDecorator.COMPRESSION_BLOCK_SIZE
MIN_COMPRESSION_RATIO = 0.85  # SnappyStreamCompressionDecorator.MIN_COMPRESSION_RATIO
COMPRESSED, UNCOMPRESSED, STREAM_IDENTIFIER = 0x00, 0x01, 0xFF


def masked_crc32c(block: bytes) -> bytes:
    """The chunk's checksum field of ``block`` (at most 64 KiB): CRC-32C, masked as snappy masks it, little-endian.
    cramjam's framed encoder computes it; its first chunk carries it after the stream identifier."""
    framed = bytes(cramjam.snappy.compress(block))
    return framed[len(HEADER) + 4:len(HEADER) + 8]


def _chunk(block: bytes) -> bytes:
    crc = masked_crc32c(block)
    raw = bytes(cramjam.snappy.compress_raw(block))
    if len(raw) / len(block) <= MIN_COMPRESSION_RATIO:
        kind, body = COMPRESSED, crc + raw
    else:
        kind, body = UNCOMPRESSED, crc + block
    return bytes((kind,)) + len(body).to_bytes(3, "little") + body


class SnappyFramedOutput:
    """xerial's ``SnappyFramedOutputStream`` over ``out`` (anything with ``write(bytes)``): the stream identifier at
    once, then chunks of at most 64 KiB. ``close`` writes what is buffered and leaves ``out`` open (Flink wraps
    the checkpoint stream in a ``NonClosingOutputStreamDecorator``)."""

    __slots__ = ("out", "_buffer", "closed")

    def __init__(self, out) -> None:
        self.out = out
        self._buffer = bytearray()
        self.closed = False
        out.write(HEADER)

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ValueError("write to a closed snappy framed stream")
        at = 0
        while at < len(data):
            if len(self._buffer) >= BLOCK_SIZE:
                self.flush()
            take = min(len(data) - at, BLOCK_SIZE - len(self._buffer))
            self._buffer += data[at:at + take]
            at += take

    def flush(self) -> None:
        if self._buffer:
            self.out.write(_chunk(bytes(self._buffer)))
            self._buffer.clear()

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True


def compress_stream(data: bytes) -> bytes:
    """``data`` written through one framed stream, closed: what Flink writes for one state of a key group."""
    out = _Sink()
    framed = SnappyFramedOutput(out)
    framed.write(data)
    framed.close()
    return bytes(out.data)


class _Sink:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data


class RawInput:
    """Flink's ``FSDataInputStream`` over the bytes of one checkpoint: ``read``, ``seek``, ``tell``, reads past
    ``end`` (default: the end of the data) a CheckpointFormatError naming ``name``."""

    __slots__ = ("data", "pos", "end", "name")

    def __init__(self, data: bytes, pos: int, name: str, end: Optional[int] = None) -> None:
        self.data, self.pos, self.name = data, pos, name
        self.end = len(data) if end is None else end

    def read(self, n: int) -> bytes:
        got = self.data[self.pos:min(self.pos + n, self.end)]
        self.pos += len(got)
        return bytes(got)

    def read_exact(self, n: int, what: str) -> bytes:
        at = self.pos
        got = self.read(n)
        if len(got) != n:
            raise CheckpointFormatError(self.name, at, f"{what} ends early ({len(got)} of {n} bytes)")
        return got

    def seek(self, pos: int) -> None:
        if not 0 <= pos <= self.end:
            raise CheckpointFormatError(self.name, pos, f"seek to {pos}, outside the stream (0..{self.end})")
        self.pos = pos

    def tell(self) -> int:
        return self.pos

    def available(self) -> int:
        return 0


class SnappyFramedInput:
    """xerial's ``SnappyFramedInputStream(raw, verifyChecksums=false)``: reads the stream identifier at once (its
    absence: CheckpointFormatError), then decompresses one chunk at a time as it is read; stream identifiers
    between chunks are skipped, as are skippable chunks. ``available`` is what the current chunk still holds;
    ``tell`` counts the decompressed bytes read (for messages)."""

    __slots__ = ("raw", "_chunk", "_at", "_read")

    def __init__(self, raw: RawInput) -> None:
        self.raw = raw
        at = raw.pos
        if raw.read(len(HEADER)) != HEADER:
            raise CheckpointFormatError(raw.name, at, "not a snappy framed stream (no stream identifier: "
                                                      "compressed bytes expected here)")
        self._chunk = b""
        self._at = 0
        self._read = 0

    def available(self) -> int:
        return len(self._chunk) - self._at

    def tell(self) -> int:
        return self._read

    def _next_chunk(self) -> bool:
        raw = self.raw
        while True:
            at = raw.pos
            head = raw.read(4)
            if not head:
                return False
            if len(head) < 4:
                raise CheckpointFormatError(raw.name, at, "a snappy chunk header ends early")
            kind, length = head[0], int.from_bytes(head[1:4], "little")
            body = raw.read_exact(length, f"a snappy chunk of {length} bytes")
            if kind == COMPRESSED or kind == UNCOMPRESSED:
                if length < 4:
                    raise CheckpointFormatError(raw.name, at, f"snappy chunk of {length} bytes, too short for its "
                                                              f"checksum")
                if kind == UNCOMPRESSED:
                    self._chunk = body[4:]
                else:
                    try:
                        self._chunk = bytes(cramjam.snappy.decompress_raw(body[4:]))
                    except Exception as exc:  # cramjam raises its own DecompressionError
                        raise CheckpointFormatError(raw.name, at, f"a snappy block does not decompress: "
                                                                  f"{exc}") from None
                    if len(self._chunk) > BLOCK_SIZE:
                        raise CheckpointFormatError(raw.name, at, f"a snappy block decompresses to "
                                                                  f"{len(self._chunk)} bytes, more than 64 KiB")
                self._at = 0
                if self._chunk:
                    return True
            elif kind == STREAM_IDENTIFIER:
                if body != HEADER[4:]:
                    raise CheckpointFormatError(raw.name, at, "a malformed snappy stream identifier")
            elif kind < 0x80:
                raise CheckpointFormatError(raw.name, at, f"unsupported unskippable snappy chunk type {kind:#04x}")

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if self._at >= len(self._chunk) and not self._next_chunk():
                break
            take = min(n - len(out), len(self._chunk) - self._at)
            out += self._chunk[self._at:self._at + take]
            self._at += take
        self._read += len(out)
        return bytes(out)

    def skip(self, n: int) -> int:
        return len(self.read(n))


class CompressibleOutput:
    """Flink's ``CompressibleFSDataOutputStream`` (operator state, 1.18.0 on) over a checkpoint stream ``stream``
    (``write``, ``tell``): through one framed stream if ``compressed``. ``tell`` flushes the framed stream first
    (2.3.0; ``flush_on_tell=False`` is 1.18.x, FLINK-34063), so that a position it returns starts a chunk."""

    __slots__ = ("stream", "framed", "flush_on_tell")

    def __init__(self, stream, compressed: bool, flush_on_tell: bool = True) -> None:
        self.stream = stream
        self.framed = SnappyFramedOutput(stream) if compressed else None
        self.flush_on_tell = flush_on_tell

    def write(self, data: bytes) -> None:
        (self.framed or self.stream).write(data)

    def tell(self) -> int:
        if self.framed is not None and self.flush_on_tell:
            self.framed.flush()
        return self.stream.tell()

    def close(self) -> None:
        if self.framed is not None:
            self.framed.close()


class CompressibleInput:
    """Flink's ``CompressibleFSDataInputStream`` (2.3.0) over ``raw``: through one framed stream (opened here,
    reading its identifier) if ``compressed``; ``seek`` drops what the framed stream holds decompressed, then
    moves ``raw``; ``tell`` is ``raw``'s position."""

    __slots__ = ("raw", "framed")

    def __init__(self, raw: RawInput, compressed: bool) -> None:
        self.raw = raw
        self.framed = SnappyFramedInput(raw) if compressed else None

    def read(self, n: int) -> bytes:
        return (self.framed or self.raw).read(n)

    def seek(self, pos: int) -> None:
        if self.framed is not None and self.framed.available() > 0:
            self.framed.skip(self.framed.available())
        self.raw.seek(pos)

    def tell(self) -> int:
        return self.raw.tell()
