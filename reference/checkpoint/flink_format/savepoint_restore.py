"""Reading a canonical savepoint (Flink ``HeapSavepointRestoreOperation`` over ``FullSnapshotRestoreOperation``).

The layout is savepoint.py's. Flink reads, for each key group of the handle
whose offset is not 0, the state id, then key/value byte arrays until a key
flagged "meta data follows", then either the next state id or the end mark;
(through one snappy framed stream per key group when the proxy says the key groups are
compressed); it decodes each key's key group, key and namespace (and a map's user key),
and each value with the state's serializer, and puts them into the state's
table. :class:`FlinkSavepointData` reads the same, every read bounded by the
stream, and checks before anything is restored: the metadata (proxy.py), the
offsets (one per key group of the handle's range, 0 or inside the key groups,
increasing), and per key group: state ids of the proxy, each once; key bytes
of the group (its prefix, a key of the group when the job's max parallelism
is known), decoding exactly to their end; values decoding exactly to theirs;
no (key, namespace) twice (no user key twice in a map); the group ending at or
before the next group's offset.

>>> from cowcheck.reference.checkpoint import HeapKeyedStateBackend
>>> from cowcheck.reference.checkpoint.flink_format.savepoint import CanonicalSavepoint
>>> from cowcheck.reference.serializers import IntSerializer, MapSerializer
>>> from cowcheck.reference.state_table import KeyGroupRange
>>> b = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4)
>>> b.register_state("m", IntSerializer(), MapSerializer(IntSerializer(), IntSerializer()), kind="map").put(5, 0, {1: None, 2: 3})
>>> handle = CanonicalSavepoint(b, 1, b.stream_factory).complete()
>>> list(HeapKeyedStateBackend.restore([handle], max_parallelism=8).state("m"))
[(5, 0, {1: None, 2: 3})]
"""

from __future__ import annotations

import io
import struct
from typing import Optional

from cowcheck.reference.checkpoint.flink_format.compression import RawInput, SnappyFramedInput
from cowcheck.reference.checkpoint.flink_format.datastream import I16, I32, U16
from cowcheck.reference.checkpoint.flink_format.proxy import SerializationProxy
from cowcheck.reference.checkpoint.streams import ByteStreamInput
from cowcheck.reference.checkpoint.flink_format.savepoint import (END_OF_KEY_GROUP_MARK, LIST_DELIMITER,
                                                                  META_DATA_FOLLOWS, KeyGroupsSavepointStateHandle,
                                                                  fixed_length, key_group_prefix_bytes)
from cowcheck.reference.cow_state_map import CopyOnWriteStateMap
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import SerializationError
from cowcheck.reference.state_table import UPPER_BOUND_MAX_PARALLELISM, CopyOnWriteStateTable, KeyGroupRange

__all__ = ["FlinkSavepointData"]

_DECODE_ERRORS = (SerializationError, struct.error, UnicodeDecodeError, ValueError, EOFError)


def _done(stream) -> bool:
    """Whether every byte of a byte array being decoded was read."""
    return stream.tell() == len(stream.getbuffer())


class FlinkSavepointData:
    """The bytes of one canonical savepoint, its metadata and offsets checked on construction, key groups
    decoded on demand (``load_key_group``, ``key_group_entries``); the same interface as
    :class:`~cowcheck.reference.checkpoint.flink_format.FlinkCheckpointData`. ``max_parallelism``: the
    job's (it decides the key-group prefix's size, so it is needed)."""

    def __init__(self, data: bytes, name: str, handle: KeyGroupsSavepointStateHandle,
                 max_parallelism: Optional[int] = None, stream_input: type = ByteStreamInput) -> None:
        self.data, self.name, self.handle = data, name, handle
        self.stream_input = stream_input  # what keys and values are read through (a seam for seeded bugs)
        n = len(data)
        if handle.size != n:
            self._fail(min(n, handle.size), f"the handle records {handle.size} bytes, found {n}")
        if max_parallelism is None:
            max_parallelism = handle.max_parallelism
        if max_parallelism is not None and not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            self._fail(0, f"max_parallelism {max_parallelism} is not in [1, {UPPER_BOUND_MAX_PARALLELISM}]")
        self.max_parallelism = max_parallelism
        self.proxy, self.blocks_start = SerializationProxy.decode(data, name)
        self.key_serializer = self.proxy.key_serializer
        self.extents = self._extents(handle)

    def _fail(self, offset: int, problem: str):
        raise CheckpointFormatError(self.name, offset, problem)

    @property
    def state_names(self) -> list[str]:
        return [s.name for s in self.proxy.states]

    def restored_states(self) -> list[tuple]:
        """``(name, kind, namespace serializer, state serializer)`` per state, in state-id order."""
        return [(s.name, s.kind, s.namespace_serializer, s.state_serializer) for s in self.proxy.states]

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self.handle.key_group_range

    def check_compatible(self, other) -> None:
        if self.max_parallelism != other.max_parallelism or \
                (self.proxy.key_serializer_id, set(self.proxy.states)) != \
                (other.proxy.key_serializer_id, set(other.proxy.states)):
            self._fail(0, f"states, serializers or max_parallelism differ from those in {other.name}")

    def _extents(self, handle) -> dict:
        """key group -> (offset, where it may end at the latest); groups with offset 0 hold nothing."""
        listed = [g for g, _ in handle.offsets]
        if listed != list(handle.key_group_range):
            self._fail(0, f"the handle's offsets cover key groups {listed[:8]}, its range is {handle.key_group_range}")
        written = [(g, o) for g, o in handle.offsets if o != 0]
        n, extents, previous = len(self.data), {}, self.blocks_start
        for i, (group, offset) in enumerate(written):
            if not previous <= offset <= n - 2:
                self._fail(offset, f"the handle places key group {group} at offset {offset}, outside the key groups "
                                   f"or before the previous one (bytes {previous}..{n - 1})")
            end = written[i + 1][1] if i + 1 < len(written) else n
            extents[group] = (offset, end)
            previous = offset + 1
        return extents

    # ----------------------------------------------------------- key groups

    def _read_pairs(self, group: int, start: int, end: int) -> list[tuple[int, int, bytes, bytes]]:
        """The group's (offset, state id, key bytes, value bytes), the flag cleared."""
        if self.proxy.compressed:  # one snappy framed stream per key group, bounded by the next group's offset
            inp = SnappyFramedInput(RawInput(self.data, start, self.name, end))
        else:
            inp = io.BytesIO(self.data[start:end])
        pairs, seen = [], set()

        def short(what: str) -> int:
            raw = inp.read(2)
            if len(raw) != 2:
                self._fail(start + inp.tell(), f"key group {group} ends early (expected {what})")
            return U16.unpack(raw)[0]

        def array(what: str) -> bytes:
            at = start + inp.tell()
            raw = inp.read(4)
            size = I32.unpack(raw)[0] if len(raw) == 4 else -1
            data = inp.read(size) if size >= 0 else b""
            if size < 0 or len(data) != size:
                self._fail(at, f"key group {group}: {what} ends early or has a bad length")
            return data

        state_id = short("a state id")
        while True:
            if state_id in seen or not 0 <= I16.unpack(U16.pack(state_id))[0] < len(self.proxy.states):
                self._fail(start + inp.tell() - 2, f"key group {group}: state id {state_id} "
                                                   + ("twice" if state_id in seen else "is not one of the proxy's"))
            seen.add(state_id)
            while True:
                at = start + inp.tell()
                key, value = array("a key"), array("a value")
                if not key:
                    self._fail(at, f"key group {group}: an empty key")
                flagged = key[0] & META_DATA_FOLLOWS
                pairs.append((at, state_id, bytes((key[0] & ~META_DATA_FOLLOWS,)) + key[1:], value))
                if flagged:
                    break
            state_id = short("a state id or the end mark")
            if state_id == END_OF_KEY_GROUP_MARK:
                return pairs

    def read_key_group(self, group: int, tables: Optional[list[CopyOnWriteStateTable]] = None) -> list[list[tuple]]:
        """Per state (in state-id order) the ``(key, namespace, state)`` entries of ``group``, checked
        as restore reads them (into ``tables`` when restoring, else into throwaway maps)."""
        states = self.proxy.states
        entries: list = [[] for _ in states]
        if group not in self.extents:
            return entries
        start, end = self.extents[group]
        prefix = key_group_prefix_bytes(self.max_parallelism or UPPER_BOUND_MAX_PARALLELISM)
        decoded: list = [{} for _ in states]  # per state: (key, namespace) -> state
        for at, state_id, key_bytes, value_bytes in self._read_pairs(group, start, end):
            state = states[state_id]
            where = f"state {state.name!r}, key group {group}"
            kin, vin = self.stream_input(key_bytes), self.stream_input(value_bytes)
            try:
                written_group = int.from_bytes(kin.read(prefix), "big")
                key = self._read_ambiguous(self.key_serializer, kin, state.namespace_serializer)
                namespace = self._read_ambiguous(state.namespace_serializer, kin, self.key_serializer)
                if state.kind == "map":
                    user_key = state.state_serializer.key_serializer.deserialize(kin)
                    null = vin.read(1)
                    if null not in (b"\x00", b"\x01"):
                        raise SerializationError(f"a map value's null flag is {null!r}, not 0 or 1")
                    value = None if null == b"\x01" else state.state_serializer.value_serializer.deserialize(vin)
                elif state.kind == "list":
                    value = self._read_list(state.state_serializer.element_serializer, vin)
                else:
                    value = state.state_serializer.deserialize(vin)
            except _DECODE_ERRORS as exc:
                self._fail(at, f"{where}: {exc}")
            if not _done(kin) or not _done(vin):
                self._fail(at, f"{where}: {'key' if not _done(kin) else 'value'} bytes left over after decoding")
            if written_group != group:
                self._fail(at, f"{where}: the key's bytes name key group {written_group}")
            if self.max_parallelism is not None and key_group(key, self.max_parallelism) != group:
                self._fail(at, f"{where}: key {key!r:.80} belongs to key group {key_group(key, self.max_parallelism)}")
            held = decoded[state_id]
            if state.kind == "map":
                user_map = held.setdefault((key, namespace), {})
                if user_key in user_map:
                    self._fail(at, f"{where}: user key {user_key!r:.40} twice for key {key!r:.40}")
                user_map[user_key] = value
            elif (key, namespace) in held:
                self._fail(at, f"{where}: (key {key!r:.40}, namespace {namespace!r:.40}) twice")
            else:
                held[(key, namespace)] = value
        for state_id, held in enumerate(decoded):
            target = tables[state_id].map_for_key_group(group) if tables is not None else CopyOnWriteStateMap()
            for (key, namespace), value in held.items():
                target.put(key, namespace, value)
                entries[state_id].append((key, namespace, value))
        return entries

    @staticmethod
    def _read_ambiguous(serializer, inp, other):
        """``CompositeKeySerializationUtils.readKey``/``readNamespace``: the value, then its length's
        bytes when both serializers are of variable length (skipped)."""
        before = inp.tell()
        value = serializer.deserialize(inp)
        if fixed_length(serializer) < 0 and fixed_length(other) < 0:
            length = inp.tell() - before
            while True:
                if not inp.read(1):
                    raise EOFError("the key's length bytes end early")
                length >>= 8
                if length == 0:
                    break
        return value

    @staticmethod
    def _read_list(element_serializer, inp) -> list:
        """``ListDelimitedSerializer.deserializeList``: elements separated by one delimiter byte."""
        values = []
        while not _done(inp):
            values.append(element_serializer.deserialize(inp))
            if not _done(inp) and inp.read(1) != LIST_DELIMITER:
                raise SerializationError("a list's elements are not separated by ','")
        return values

    def key_group_entries(self, group: int, tables: Optional[list[CopyOnWriteStateTable]] = None) -> list[list[tuple]]:
        return self.read_key_group(group, tables)

    def load_key_group(self, group: int, tables: list[CopyOnWriteStateTable]) -> None:
        self.read_key_group(group, tables)
