"""The checkpoint byte layout (docs/checkpoint-format.md): constants, metadata, bounded reads.

A checkpoint is a header (magic ``CWCK``, format version, metadata length),
the metadata and its crc32, one block per key group (its id, then per state
a short state id and that state's ``write_state`` bytes for the group, then
the block's crc32), an index of key-group offsets (``CWIX``), and a trailer
(the index offset, the whole file's crc32, ``CWCE``).
"""

from __future__ import annotations

import struct
import zlib

import attrs

from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["DEFAULT_MEMORY_THRESHOLD", "MAX_MEMORY_THRESHOLD", "FORMAT_VERSION", "MAGIC", "INDEX_MAGIC",
           "END_MAGIC", "DATA_SUFFIX", "HANDLE_SUFFIX", "HANDLE_FORMAT", "StateMetadata", "CheckpointMetadata",
           "Cursor", "utf_field"]

# Flink: CheckpointingOptions.FS_SMALL_FILE_THRESHOLD default 20 KB,
# FsCheckpointStreamFactory.MAX_FILE_STATE_THRESHOLD 1 MB.
DEFAULT_MEMORY_THRESHOLD = 20 * 1024
MAX_MEMORY_THRESHOLD = 1024 * 1024

FORMAT_VERSION = 1
MAGIC = b"CWCK"
INDEX_MAGIC = b"CWIX"
END_MAGIC = b"CWCE"
DATA_SUFFIX = ".cwck"
HANDLE_SUFFIX = ".handle.json"
HANDLE_FORMAT = "cowcheck-checkpoint-handle"

I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
INDEX_ENTRY = struct.Struct(">iq")
HEADER_SIZE = 10  # magic, format version (u16), metadata length (u32)
TRAILER_SIZE = 16  # index offset (i64), file crc32 (u32), end magic
CHECKSUM = "crc32"



@attrs.frozen
class StateMetadata:
    """One state as the checkpoint records it; its state id is its position."""

    name: str
    namespace_serializer_id: str
    state_serializer_id: str


@attrs.frozen
class CheckpointMetadata:
    """What a reader needs before the first key group: ids, range, serializers."""

    checkpoint_id: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    key_serializer_id: str
    states: tuple[StateMetadata, ...] = attrs.field(converter=tuple)
    format_version: int = FORMAT_VERSION

    def encode(self) -> bytes:
        """Header, body and the metadata checksum (docs/checkpoint-format.md)."""
        body = bytearray()
        body += I64.pack(self.checkpoint_id)
        body += I32.pack(self.max_parallelism)
        body += I32.pack(self.key_group_range.start)
        body += I32.pack(self.key_group_range.end)
        body += utf_field(self.key_serializer_id)
        body += U16.pack(len(self.states))
        for state in self.states:
            body += utf_field(state.name) + utf_field(state.namespace_serializer_id) + utf_field(state.state_serializer_id)
        head = MAGIC + U16.pack(self.format_version) + U32.pack(len(body)) + bytes(body)
        return head + U32.pack(zlib.crc32(head))


def utf_field(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ValueError(f"checkpoint metadata strings are at most 65535 UTF-8 bytes, got {len(data)}")
    return U16.pack(len(data)) + data


class Cursor:
    """Bounded big-endian reads over ``data[pos:end]`` with format errors on overrun."""

    __slots__ = ("data", "pos", "end", "name", "what")

    def __init__(self, data: bytes, pos: int, end: int, name: str, what: str) -> None:
        self.data, self.pos, self.end, self.name, self.what = data, pos, end, name, what

    def take(self, st: struct.Struct):
        if self.pos + st.size > self.end:
            raise CheckpointFormatError(self.name, self.pos, f"{self.what} ends early")
        value = st.unpack_from(self.data, self.pos)[0]
        self.pos += st.size
        return value

    def utf(self) -> str:
        at = self.pos
        size = self.take(U16)
        if self.pos + size > self.end:
            raise CheckpointFormatError(self.name, at, f"{self.what} ends early (a string of {size} bytes)")
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointFormatError(self.name, at, f"{self.what}: string is not UTF-8") from None
