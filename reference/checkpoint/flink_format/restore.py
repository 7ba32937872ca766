"""Reading a checkpoint in Flink's format (Flink ``HeapRestoreOperation`` / ``StateTableByKeyGroupReaders``).

After the metadata (proxy.py), each key group of the stream is

```
i32  key-group id                  (the handle's offset for the group points here)
per state, in any order (Flink writes them in the order of its state map, not by id):
  i16  state id                    (the state's position in the metadata)
  i32  entry count, then per entry namespace, key, state through their serializers
```

with nothing between one key group and the next; with snapshot compression (the
proxy's flag) each state's id, count and entries are a snappy framed stream of their
own after the group's id (compression.py), read as Flink reads them: one framed
stream per key group, skipping the identifiers between them. Flink checks the
key-group id at each offset and nothing else; :class:`FlinkCheckpointData`
checks, before anything is restored and with every read bounded: the
metadata (known serializer snapshots only), the
handle's offsets (one per key group of its range, in order, between the
metadata and the end), then per key group read: its id, each state id once,
every entry decodes, every key belongs to the group (when the job's max
parallelism is known), no (key, namespace) twice, and the group ends where
the next one of the handle begins. Without a handle (``cowcheck checkpoint
inspect`` of a bare file) the key groups are read one after the other to
the end of the stream.
"""

from __future__ import annotations

from typing import Optional

from cowcheck.reference.checkpoint.flink_format.compression import RawInput, SnappyFramedInput
from cowcheck.reference.checkpoint.flink_format.datastream import I16, I32
from cowcheck.reference.checkpoint.flink_format.handle import KeyGroupsStateHandle
from cowcheck.reference.checkpoint.flink_format.proxy import SerializationProxy
from cowcheck.reference.checkpoint.restore import read_state_entries
from cowcheck.reference.checkpoint.streams import ByteStreamInput
from cowcheck.reference.cow_state_map import CopyOnWriteStateMap
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.state_table import UPPER_BOUND_MAX_PARALLELISM, CopyOnWriteStateTable, KeyGroupRange

__all__ = ["FlinkCheckpointData", "looks_like_flink_checkpoint"]


def looks_like_flink_checkpoint(data: bytes) -> bool:
    """Whether ``data`` starts as Flink's keyed-state checkpoints do (the proxy's version, 6)."""
    return data[:4] == I32.pack(6)


class FlinkCheckpointData:
    """The bytes of one checkpoint in Flink's format, its metadata and the handle's offsets checked on
    construction; key groups decoded on demand (``load_key_group``, ``key_group_entries``).
    ``max_parallelism``: the job's (default: the handle's, if it records one; None: keys are not
    checked against their key groups)."""

    def __init__(self, data: bytes, name: str, handle: Optional[KeyGroupsStateHandle] = None,
                 max_parallelism: Optional[int] = None, stream_input: type = ByteStreamInput) -> None:
        self.stream_input = stream_input  # what key groups are read through (a seam for seeded bugs)
        self.data = data
        self.name = name
        self.handle = handle
        n = len(data)
        if handle is not None and handle.size != n:
            if n < handle.size:
                self._fail(n, f"truncated: the handle records {handle.size} bytes, found {n}")
            self._fail(handle.size, f"{n - handle.size} bytes beyond the {handle.size} the handle records")
        if max_parallelism is None and handle is not None:
            max_parallelism = handle.max_parallelism
        if max_parallelism is not None and not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            self._fail(0, f"max_parallelism {max_parallelism} is not in [1, {UPPER_BOUND_MAX_PARALLELISM}]")
        self.max_parallelism = max_parallelism
        self.proxy, self.blocks_start = SerializationProxy.decode(data, name)
        self.key_serializer = self.proxy.key_serializer
        # key group -> (offset, where it must end, or None: anywhere up to the end of the stream)
        self.extents = self._handle_extents(handle) if handle is not None else self._scan()

    def _fail(self, offset: int, problem: str):
        raise CheckpointFormatError(self.name, offset, problem)

    def restored_states(self) -> list[tuple]:
        """``(name, kind, namespace serializer, state serializer)`` per state, in state-id order."""
        return [(s.name, s.kind, s.namespace_serializer, s.state_serializer) for s in self.proxy.states]

    @property
    def key_group_range(self) -> KeyGroupRange:
        groups = sorted(self.extents)
        return KeyGroupRange(groups[0], groups[-1]) if groups else KeyGroupRange.EMPTY

    # ----------------------------------------------------------- structure

    def _handle_extents(self, handle: KeyGroupsStateHandle) -> dict:
        listed = [g for g, _ in handle.offsets]
        if listed != list(handle.key_group_range):
            self._fail(0, f"the handle's offsets cover key groups {listed[:8]}, its range is {handle.key_group_range}")
        n = len(self.data)
        extents, previous = {}, None
        for group, offset in handle.offsets:
            if not self.blocks_start <= offset <= n - 4:
                self._fail(offset, f"the handle places key group {group} at offset {offset}, outside the key groups "
                                   f"(bytes {self.blocks_start}..{n - 1})")
            if previous is not None:
                if offset <= previous[1]:
                    self._fail(offset, f"the handle places key group {group} at offset {offset}, not after key "
                                       f"group {previous[0]} (at {previous[1]})")
                extents[previous[0]] = (previous[1], offset)
            previous = (group, offset)
        if previous is not None:
            extents[previous[0]] = (previous[1], None)
        return extents

    def _scan(self) -> dict:
        """Without a handle: the key groups one after the other, each read whole, to the end."""
        extents, pos, n, expected = {}, self.blocks_start, len(self.data), None
        while pos < n:
            if n - pos < 4:
                self._fail(pos, f"{n - pos} bytes after the last key group, too few for another")
            group = I32.unpack_from(self.data, pos)[0]
            if expected is not None and group != expected:
                self._fail(pos, f"expected key group {expected} after key group {expected - 1}, found {group}")
            if not 0 <= group < UPPER_BOUND_MAX_PARALLELISM:
                self._fail(pos, f"key group {group} is not in [0, {UPPER_BOUND_MAX_PARALLELISM})")
            end = self._read_group(group, pos, None, None)[0]
            extents[group] = (pos, end)
            pos, expected = end, group + 1
        return extents

    @property
    def state_names(self) -> list[str]:
        """The states' names in state-id order (this checkpoint's own: each of Flink's handles numbers
        its states in the order its backend held them)."""
        return [s.name for s in self.proxy.states]

    def check_compatible(self, other: "FlinkCheckpointData") -> None:
        """Several handles restored together must describe the same states, in any order, and the same
        key serializer (each may be compressed or not: Flink reads each handle by its own proxy)."""
        if self.max_parallelism != other.max_parallelism:
            self._fail(0, f"max_parallelism {self.max_parallelism} differs from {other.max_parallelism} for "
                          f"{other.name}")
        mine, theirs = self.proxy, other.proxy
        if (mine.key_serializer_id, set(mine.states)) != (theirs.key_serializer_id, set(theirs.states)):
            self._fail(0, f"states or serializers differ from those in {other.name}")

    # ----------------------------------------------------------- key groups

    def _read_group(self, group: int, start: int, end: Optional[int], tables) -> tuple[int, list]:
        """Read key group ``group`` at ``start`` (into ``tables`` if given): where it ends, and its entries
        per state in state-id order. ``end``: where it must end (None: anywhere up to the end of the
        stream)."""
        limit = len(self.data) if end is None else end
        if limit - start < 4:
            self._fail(start, f"key group {group} ends before its id")
        written = I32.unpack_from(self.data, start)[0]
        if written != group:
            self._fail(start, f"expected key group {group}, found {written} (Flink: \"Unexpected key-group in "
                              f"restore\")")
        if self.proxy.compressed:
            raw = RawInput(self.data, start + 4, self.name, limit)
            inp, base = SnappyFramedInput(raw), start + 4
            position = raw.tell
        else:
            # (read as Java reads a handle's bytes: a key group sliced out of the stream ends at its end or not)
            inp, base = self.stream_input(self.data[start:limit], at_stream_end=limit == len(self.data)), start
            inp.seek(4)
            position = lambda: start + inp.tell()  # noqa: E731
        states = self.proxy.states
        seen: set = set()
        entries: list = [None] * len(states)
        for _ in states:
            at = base + inp.tell()
            header = inp.read(6)
            if len(header) != 6:
                self._fail(at, f"key group {group} ends after {len(seen)} of its {len(states)} states")
            state_id, count = I16.unpack_from(header)[0], I32.unpack_from(header, 2)[0]
            if not 0 <= state_id < len(states) or state_id in seen:
                self._fail(at, f"key group {group}: state id {state_id} "
                               + ("twice" if state_id in seen else f"is not one of the {len(states)} states"))
            seen.add(state_id)
            state = states[state_id]
            if count < 0:
                self._fail(at + 2, f"negative entry count {count} for state {state.name!r}")
            target = tables[state_id].map_for_key_group(group) if tables is not None else CopyOnWriteStateMap()
            entries[state_id] = read_state_entries(
                inp, base, group, state.name, count, self.key_serializer, state.namespace_serializer,
                state.state_serializer, self.max_parallelism, target, self._fail)
        if self.proxy.compressed and inp.available():
            self._fail(position(), f"{inp.available()} unexpected bytes at the end of key group {group}")
        if end is not None and position() != end:
            self._fail(position(), f"{end - position()} unexpected bytes at the end of key group {group}")
        return position(), entries

    def read_key_group(self, group: int, tables: Optional[list[CopyOnWriteStateTable]] = None) -> tuple[int, list]:
        """Where ``group`` ends, and per state (in state-id order) its ``(key, namespace, state)`` entries,
        checked as restore reads them (into ``tables`` when restoring, else into throwaway maps)."""
        start, end = self.extents[group]
        return self._read_group(group, start, end, tables)

    def key_group_entries(self, group: int, tables: Optional[list[CopyOnWriteStateTable]] = None) -> list[list[tuple]]:
        """Per state (in state-id order), the entries of ``group`` (``read_key_group``)."""
        return self.read_key_group(group, tables)[1]

    def load_key_group(self, group: int, tables: list[CopyOnWriteStateTable]) -> None:
        """Put ``group``'s entries into ``tables`` (one per state, in state-id order)."""
        self.key_group_entries(group, tables)
