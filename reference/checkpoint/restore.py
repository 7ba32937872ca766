"""Reading checkpoints back (Flink ``HeapRestoreOperation`` / ``StateTableByKeyGroupReaders``).

:class:`CheckpointData` checks one checkpoint's bytes on construction
(header, metadata checksum, serializer ids, trailer, whole-file checksum,
key-group index, agreement with its handle) and decodes key groups on
demand; the helpers decide which handle each key group of a restore range
is read from (rescaling: one handle, part of one, or several merged).
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import Optional

from cowcheck.reference.checkpoint.format import (
    END_MAGIC,
    FORMAT_VERSION,
    HEADER_SIZE,
    I16,
    I32,
    I64,
    INDEX_ENTRY,
    INDEX_MAGIC,
    MAGIC,
    TRAILER_SIZE,
    U16,
    U32,
    CheckpointMetadata,
    Cursor,
    StateMetadata,
)
from cowcheck.reference.checkpoint.handle import CheckpointHandle
from cowcheck.reference.checkpoint.streams import ByteStreamInput
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.cow_state_map import CopyOnWriteStateMap
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import SerializationError, UnknownSerializerError, serializer_from_id
from cowcheck.reference.state_table import CopyOnWriteStateTable, KeyGroupRange

__all__ = ["CheckpointData", "joined_range", "assign_key_groups", "spans", "read_state_entries"]


class CheckpointData:
    """The bytes of one checkpoint, checked on construction: header,
    metadata and its checksum, serializer ids, trailer, whole-file checksum,
    key-group index, and agreement with ``handle`` if given. Key groups are
    decoded on demand (``load_key_group``, ``key_group_entries``)."""

    def __init__(self, data: bytes, name: str, handle: Optional[CheckpointHandle] = None,
                 stream_input: type = ByteStreamInput) -> None:
        self.stream_input = stream_input  # what key groups are read through (a seam for seeded bugs)
        self.data = data
        self.name = name
        self.handle = handle
        n = len(data)
        if handle is not None and handle.size != n:
            if n < handle.size:
                self._fail(n, f"truncated: the handle records {handle.size} bytes, found {n}")
            self._fail(handle.size, f"{n - handle.size} bytes beyond the {handle.size} the handle records")
        if data[:len(MAGIC)] != MAGIC:
            self._fail(0, f"not a cowcheck checkpoint (starts with {bytes(data[:4])!r}, expected {MAGIC!r})")
        if n < HEADER_SIZE:
            self._fail(n, "truncated inside the header")
        version = U16.unpack_from(data, 4)[0]
        if version != FORMAT_VERSION:
            self._fail(4, f"unsupported format version {version} (this reader knows {FORMAT_VERSION})")
        meta_end = HEADER_SIZE + U32.unpack_from(data, 6)[0]
        if meta_end + 4 > n:
            self._fail(n, f"truncated: the metadata ends at offset {meta_end + 4}, past the end of the file")
        stored, computed = U32.unpack_from(data, meta_end)[0], zlib.crc32(data[:meta_end])
        if stored != computed:
            self._fail(meta_end, f"metadata checksum mismatch over bytes 0..{meta_end - 1} "
                                 f"(stored {stored:08x}, computed {computed:08x})")
        self.metadata, self.key_serializer, self.serializers = self._parse_metadata(meta_end)
        self.blocks_start = meta_end + 4
        self._check_trailer()
        self.extents = self._parse_index()
        if handle is not None:
            self._check_handle(handle)

    def _fail(self, offset: int, problem: str):
        raise CheckpointFormatError(self.name, offset, problem)

    @property
    def max_parallelism(self) -> int:
        return self.metadata.max_parallelism

    @property
    def state_names(self) -> list[str]:
        """The states' names in state-id order."""
        return [s.name for s in self.metadata.states]

    def restored_states(self) -> list[tuple]:
        """``(name, kind, namespace serializer, state serializer)`` per state in state-id order; this
        format does not record a state's kind (None)."""
        return [(s.name, None, ns, st) for s, (ns, st) in zip(self.metadata.states, self.serializers)]

    # ----------------------------------------------------------- structure

    def _parse_metadata(self, meta_end: int):
        cur = Cursor(self.data, HEADER_SIZE, meta_end, self.name, "metadata")
        checkpoint_id = cur.take(I64)
        at = cur.pos
        max_parallelism, start, end = cur.take(I32), cur.take(I32), cur.take(I32)
        if not 1 <= max_parallelism <= 1 << 15 or not 0 <= start <= end < max_parallelism:
            self._fail(at, f"bad key groups: range [{start}, {end}] with max_parallelism {max_parallelism}")
        key_serializer = self._serializer(cur, "the key serializer")
        states, serializers = [], []
        for _ in range(cur.take(U16)):
            name = cur.utf()
            ns_ser = self._serializer(cur, f"the namespace serializer of state {name!r}")
            st_ser = self._serializer(cur, f"the state serializer of state {name!r}")
            states.append(StateMetadata(name, ns_ser.serializer_id, st_ser.serializer_id))
            serializers.append((ns_ser, st_ser))
        if cur.pos != meta_end:
            self._fail(cur.pos, f"{meta_end - cur.pos} unexpected bytes at the end of the metadata")
        if len({s.name for s in states}) != len(states):
            self._fail(HEADER_SIZE, "a state name appears twice in the metadata")
        meta = CheckpointMetadata(checkpoint_id, max_parallelism, KeyGroupRange(start, end),
                                  key_serializer.serializer_id, states)
        return meta, key_serializer, serializers

    def _serializer(self, cur: Cursor, what: str):
        at = cur.pos
        sid = cur.utf()
        try:
            return serializer_from_id(sid)
        except UnknownSerializerError as exc:
            self._fail(at, f"{what}: {exc}")

    def _check_trailer(self) -> None:
        data, n = self.data, len(self.data)
        if n < self.blocks_start + len(INDEX_MAGIC) + 4 + TRAILER_SIZE:
            self._fail(n, "truncated: no room for the key-group index and trailer")
        if data[n - 4:] != END_MAGIC:
            self._fail(n - 4, "no end marker: the file is truncated or was never finished")
        stored, computed = U32.unpack_from(data, n - 8)[0], zlib.crc32(data[: n - 8])
        if self.handle is not None and self.handle.checksum != stored:
            self._fail(n - 8, f"file checksum {stored:08x} differs from the handle's {self.handle.checksum:08x}")
        if stored != computed:
            self._locate_corruption(stored, computed)

    def _locate_corruption(self, stored: int, computed: int):
        """The whole-file checksum failed: name the first damaged key group if the index allows."""
        n = len(self.data)
        try:
            extents = self._parse_index()
        except CheckpointFormatError as damaged:
            self._fail(damaged.offset, f"file checksum mismatch (stored {stored:08x}, computed {computed:08x}); "
                                       f"{damaged.problem}")
        for group, (start, end) in extents.items():
            self._check_block(group, start, end)
        index_offset = I64.unpack_from(self.data, n - TRAILER_SIZE)[0]
        self._fail(index_offset, f"file checksum mismatch in the key-group index or trailer "
                                 f"(stored {stored:08x}, computed {computed:08x})")

    def _parse_index(self) -> dict[int, tuple[int, int]]:
        """Key group -> (start, end) of its block including the block checksum."""
        data, n = self.data, len(self.data)
        index_end = n - TRAILER_SIZE
        index_offset = I64.unpack_from(data, index_end)[0]
        if not self.blocks_start <= index_offset <= index_end - 8:
            self._fail(index_end, f"index offset {index_offset} is outside [{self.blocks_start}, {index_end - 8}]")
        if data[index_offset:index_offset + 4] != INDEX_MAGIC:
            self._fail(index_offset, "no key-group index at the offset the trailer records")
        count = U32.unpack_from(data, index_offset + 4)[0]
        groups = list(self.metadata.key_group_range)
        if count != len(groups) or index_offset + 8 + count * INDEX_ENTRY.size != index_end:
            self._fail(index_offset + 4, f"the index lists {count} key groups, the metadata range "
                                         f"{self.metadata.key_group_range} has {len(groups)}")
        entries = [INDEX_ENTRY.unpack_from(data, index_offset + 8 + i * INDEX_ENTRY.size) for i in range(count)]
        extents = {}
        previous = self.blocks_start
        for i, (group, offset) in enumerate(entries):
            at = index_offset + 8 + i * INDEX_ENTRY.size
            if group != groups[i]:
                self._fail(at, f"index entry {i} is for key group {group}, expected {groups[i]}")
            if offset != previous:
                self._fail(at, f"index places key group {group} at offset {offset}, but the previous block "
                               f"ends at {previous}")
            end = entries[i + 1][1] if i + 1 < count else index_offset
            if not offset + 8 <= end <= index_offset:
                self._fail(at, f"index gives key group {group} the impossible extent [{offset}, {end})")
            extents[group] = (offset, end)
            previous = end
        return extents

    def _check_handle(self, handle: CheckpointHandle) -> None:
        meta = self.metadata
        if (handle.checkpoint_id, handle.max_parallelism) != (meta.checkpoint_id, meta.max_parallelism):
            self._fail(HEADER_SIZE, f"the handle is for checkpoint {handle.checkpoint_id} with max_parallelism "
                                     f"{handle.max_parallelism}, the file for checkpoint {meta.checkpoint_id} "
                                     f"with max_parallelism {meta.max_parallelism}")
        part = handle.key_group_range
        if not part.is_empty() and part.intersection(meta.key_group_range) != part:
            self._fail(HEADER_SIZE + 12, f"the handle's key groups {part} are not all in the file's "
                                          f"{meta.key_group_range}")
        listed = [g for g, _ in handle.offsets]
        if listed != list(part):
            self._fail(0, f"the handle's offsets cover key groups {listed[:8]}, its range is {part}")
        for group, offset in handle.offsets:
            if offset != self.extents[group][0]:
                self._fail(offset, f"the handle places key group {group} at offset {offset}, the file's index "
                                   f"at {self.extents[group][0]}")

    def check_compatible(self, other: "CheckpointData") -> None:
        """Several handles restored together must describe the same states."""
        mine, theirs = self.metadata, other.metadata
        if mine.max_parallelism != theirs.max_parallelism:
            self._fail(HEADER_SIZE + 8, f"max_parallelism {mine.max_parallelism} differs from "
                                         f"{theirs.max_parallelism} in {other.name}")
        if (mine.key_serializer_id, mine.states) != (theirs.key_serializer_id, theirs.states):
            self._fail(HEADER_SIZE, f"states or serializers differ from those in {other.name}")

    # ----------------------------------------------------------- key groups

    def _check_block(self, group: int, start: int, end: int) -> None:
        stored = U32.unpack_from(self.data, end - 4)[0]
        computed = zlib.crc32(self.data[start:end - 4])
        if stored != computed:
            self._fail(start, f"checksum mismatch in key group {group} (stored {stored:08x}, "
                              f"computed {computed:08x})")

    def key_group_entries(self, group: int, tables: Optional[list[CopyOnWriteStateTable]] = None) -> list[list[tuple]]:
        """Per state (in state-id order), the ``(key, namespace, state)`` entries of ``group``,
        checked as restore reads them: each state's entries go into a map (the group's map
        of ``tables`` when restoring, else a throwaway one), and a (key, namespace) held
        twice is a format error, so ``checkpoint inspect`` passes only what restore accepts."""
        start, end = self.extents[group]
        self._check_block(group, start, end)
        inp = self.stream_input(self.data[start:end - 4], at_stream_end=False)  # the index follows
        written = I32.unpack(inp.read(4))[0]
        if written != group:
            self._fail(start, f"expected key group {group}, found {written}")
        result = []
        mp = self.metadata.max_parallelism
        for state_id, (state, (ns_ser, st_ser)) in enumerate(zip(self.metadata.states, self.serializers)):
            at = start + inp.tell()
            header = inp.read(6)
            if len(header) != 6:
                self._fail(at, f"key group {group} ends before state {state.name!r}")
            found_id, count = I16.unpack_from(header)[0], I32.unpack_from(header, 2)[0]
            if found_id != state_id:
                self._fail(at, f"expected state id {state_id} ({state.name!r}) in key group {group}, "
                               f"found {found_id}")
            if count < 0:
                self._fail(at + 2, f"negative entry count {count} for state {state.name!r}")
            target = tables[state_id].map_for_key_group(group) if tables is not None else CopyOnWriteStateMap()
            entries = read_state_entries(inp, start, group, state.name, count, self.key_serializer, ns_ser, st_ser,
                                         mp, target, self._fail)
            result.append(entries)
        left = end - 4 - start - inp.tell()
        if left:
            self._fail(start + inp.tell(), f"{left} unexpected bytes at the end of key group {group}")
        return result

    def load_key_group(self, group: int, tables: list[CopyOnWriteStateTable]) -> None:
        """Put ``group``'s entries into ``tables`` (one per state, in state-id order)."""
        self.key_group_entries(group, tables)


def read_state_entries(inp, base: int, group: int, name: str, count: int, key_serializer, namespace_serializer,
                       state_serializer, max_parallelism: Optional[int], target: CopyOnWriteStateMap, fail) -> list:
    """``count`` entries (namespace, key, state: ``writeStateInKeyGroup``) of state ``name`` in key group
    ``group``, read from ``inp`` (whose position 0 is offset ``base`` of the checkpoint) and put into
    ``target``; ``fail(offset, problem)`` raises. Every entry must decode, its key must belong to the
    group (unless ``max_parallelism`` is None: unknown), and no (key, namespace) may come twice."""
    entries = []
    for i in range(count):
        at = base + inp.tell()
        try:
            namespace = namespace_serializer.deserialize(inp)
            key = key_serializer.deserialize(inp)
            value = state_serializer.deserialize(inp)
        except (SerializationError, struct.error, UnicodeDecodeError, ValueError) as exc:
            fail(at, f"state {name!r}, key group {group}, entry {i}: {exc}")
        if max_parallelism is not None and key_group(key, max_parallelism) != group:
            fail(at, f"state {name!r}: key {key!r:.80} belongs to key group {key_group(key, max_parallelism)}, "
                     f"found in key group {group}")
        entries.append((key, namespace, value))
    before = len(target)
    for key, namespace, value in entries:
        target.put(key, namespace, value)
    if len(target) - before != len(entries):
        fail(base, f"state {name!r}: key group {group} holds the same (key, namespace) twice")
    return entries


# The largest data file read without a handle that records its size (a million entries take 19 MB).
MAX_DATA_BYTES = 256 << 20


def joined_range(handles: list[CheckpointHandle]) -> KeyGroupRange:
    ranges = sorted((h.key_group_range for h in handles if not h.key_group_range.is_empty()),
                    key=lambda r: r.start)
    if not ranges:
        raise ValueError("the handles hold no key groups")
    start, end = ranges[0].start, ranges[0].end
    for r in ranges[1:]:
        if r.start > end + 1:
            raise ValueError(f"the handles' key-group ranges leave a gap ({end + 1}..{r.start - 1}); "
                             f"give restore() a key_group_range")
        end = max(end, r.end)
    return KeyGroupRange(start, end)


def assign_key_groups(handles, target: KeyGroupRange, restore_range) -> dict[int, int]:
    """Key group -> index of the one handle it is read from."""
    owner: dict[int, int] = {}
    for i, handle in enumerate(handles):
        for group in restore_range(handle.key_group_range, target):
            if group in owner:
                raise ValueError(f"key group {group} is in two handles: {handles[owner[group]].source_name} "
                                 f"and {handle.source_name}")
            owner[group] = i
    missing = [g for g in target if g not in owner]
    if missing:
        raise ValueError(f"key groups {spans(missing)} of the restore range {target} are in none of the "
                         f"handles (ranges: {', '.join(str(h.key_group_range) for h in handles)})")
    return owner


def spans(groups: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``'1..3, 7'``."""
    spans = []
    start = prev = groups[0]
    for group in groups[1:] + [None]:
        if group != prev + 1:
            spans.append(str(start) if start == prev else f"{start}..{prev}")
            start = group
        prev = group
    return ", ".join(spans)
