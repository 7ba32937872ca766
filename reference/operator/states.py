"""Operator states on the heap (Flink ``PartitionableListState`` and ``HeapBroadcastState``, as of 2.3.0).

A list state (SPLIT_DISTRIBUTE or UNION) holds a Python list, its elements in
the order they were added; ``get`` returns that very list (Flink returns its
``ArrayList``), so a caller can change an element in place. A broadcast state
holds a dict (Flink: a ``HashMap``, nulls allowed as keys and values).

Null handling, from 2.3.0's bytecode (docs/contract.md, section "Operator state",
gives each release's): ``add(None)`` raises (``You cannot add null to a
ListState.``) and changes nothing; ``add_all(None)`` raises; ``add_all`` with a
None among the values adds the values before it, then raises; ``update``
clears first, then adds as ``add_all`` does (so ``update(None)`` leaves the
state empty and raises). A broadcast state takes None anywhere but ``put_all``
(``HashMap.putAll(null)``). What a checkpoint cannot write (a None an int
serializer must write) fails the checkpoint, not the call.

``deep_copy`` is the snapshot's synchronous part: Flink's ``ArrayListSerializer``
(an immutable element type: a new list of the same elements; a mutable one: each
element copied with its serializer) and ``MapSerializer.copy`` (keys copied,
None values kept). ``write`` is its asynchronous part: each element through the
element serializer, its offset recorded first; a broadcast state writes its size,
then each key and value, in the order of a Java ``HashMap`` of its keys.

>>> import io
>>> from cowcheck.reference.serializers import IntSerializer
>>> s = PartitionableListState(OperatorStateMetaInfo("ids", SPLIT_DISTRIBUTE, IntSerializer()))
>>> s.add(7); s.add_all([8, 9]); s.get()
[7, 8, 9]
>>> out = _Positioned(); s.deep_copy().write(out)
[0, 4, 8]
"""

from __future__ import annotations

import io
from typing import Any, Optional

import attrs

from cowcheck.reference.operator.javamap import expected_size_capacity, java_map_order, java_string_hash, long_hash
from cowcheck.reference.serializers import IntSerializer, ListSerializer, LongSerializer, StringSerializer

__all__ = ["SPLIT_DISTRIBUTE", "UNION", "BROADCAST", "MODES", "OperatorStateMetaInfo", "PartitionableListState",
           "PartitionableListStateBefore119", "HeapBroadcastState", "java_hash_of", "IMMUTABLE_SERIALIZERS"]

SPLIT_DISTRIBUTE, UNION, BROADCAST = "SPLIT_DISTRIBUTE", "UNION", "BROADCAST"
MODES = (SPLIT_DISTRIBUTE, UNION, BROADCAST)
# Serializers whose isImmutableType() is true: ArrayListSerializer copies a list of them shallowly.
IMMUTABLE_SERIALIZERS = (IntSerializer, LongSerializer, StringSerializer)


def java_hash_of(serializer):
    """The Java ``hashCode`` of the values ``serializer`` reads (the key of a broadcast state's ``HashMap``)."""
    if type(serializer) is LongSerializer:
        return long_hash
    if type(serializer) is StringSerializer:
        return java_string_hash
    if type(serializer) is IntSerializer:
        return lambda value: value
    if type(serializer) is ListSerializer:
        element = java_hash_of(serializer.element_serializer)

        def list_hash(values):
            h = 1
            for v in values:
                h = (31 * h + (0 if v is None else element(v))) & 0xFFFFFFFF
            return h
        return list_hash
    raise TypeError(f"no Java hashCode for the values of {serializer!r}")


@attrs.frozen
class OperatorStateMetaInfo:
    """A registered operator state: name, distribution mode, and its serializers (``value_serializer``: a list
    state's element serializer, a broadcast state's value serializer; ``key_serializer``: a broadcast state's)."""

    name: str
    mode: str = attrs.field(validator=attrs.validators.in_(MODES))
    value_serializer: Any
    key_serializer: Any = None


class PartitionableListState:
    """See the module docstring. ``meta``: its :class:`OperatorStateMetaInfo`."""

    __slots__ = ("meta", "elements")

    def __init__(self, meta: OperatorStateMetaInfo, elements: Optional[list] = None) -> None:
        self.meta = meta
        self.elements = [] if elements is None else elements

    def get(self) -> list:
        return self.elements

    def add(self, value) -> None:
        if value is None:
            raise TypeError("You cannot add null to a ListState.")
        self.elements.append(value)

    def add_all(self, values) -> None:
        if values is None:
            raise TypeError("List of values to add cannot be null.")
        for value in values:
            if value is None:
                raise TypeError("Any value to add to a list cannot be null.")
            self.add(value)

    def update(self, values) -> None:
        self.elements.clear()
        self.add_all(values)

    def clear(self) -> None:
        self.elements.clear()

    def deep_copy(self) -> "PartitionableListState":
        serializer = self.meta.value_serializer
        if isinstance(serializer, IMMUTABLE_SERIALIZERS):
            return PartitionableListState(attrs.evolve(self.meta), list(self.elements))
        return PartitionableListState(attrs.evolve(self.meta), [serializer.copy(e) for e in self.elements])

    def write(self, out) -> list[int]:
        """Each element at the position ``out.tell()`` gives before it: the offsets."""
        offsets = []
        serializer = self.meta.value_serializer
        for element in self.elements:
            offsets.append(out.tell())
            buffer = io.BytesIO()
            serializer.serialize(element, buffer)
            out.write(buffer.getvalue())
        return offsets

    def __repr__(self) -> str:
        return f"PartitionableListState({self.meta.name!r}, {self.meta.mode}, {self.elements!r})"


class PartitionableListStateBefore119(PartitionableListState):
    """The list state of Flink 1.13-1.18 (``addAll`` without null checks, until 1.19.0): ``add_all(None)`` does
    nothing, Nones among the values are stored (so ``update(None)`` empties the state). A stored None that
    its serializer writes (a string) is checkpointed, and its restore fails: restore adds each element with
    ``add``, which rejects None."""

    __slots__ = ()

    def add_all(self, values) -> None:
        if values:
            self.elements.extend(values)


class HeapBroadcastState:
    """See the module docstring. ``meta``: its :class:`OperatorStateMetaInfo` (mode BROADCAST)."""

    __slots__ = ("meta", "entries_map")

    def __init__(self, meta: OperatorStateMetaInfo, entries: Optional[dict] = None) -> None:
        self.meta = meta
        self.entries_map = {} if entries is None else entries

    def get(self, key):
        return self.entries_map.get(key)

    def put(self, key, value) -> None:
        self.entries_map[key] = value

    def put_all(self, entries) -> None:
        if entries is None:
            raise TypeError("putAll(null): HashMap.putAll dereferences the map")
        self.entries_map.update(entries)

    def remove(self, key) -> None:
        self.entries_map.pop(key, None)

    def contains(self, key) -> bool:
        return key in self.entries_map

    def entries(self) -> list:
        """The (key, value) pairs, live values (a caller may change a mutable value in place)."""
        return list(self.entries_map.items())

    def clear(self) -> None:
        self.entries_map.clear()

    def java_order(self, keys=None) -> list:
        """The keys as a Java ``HashMap`` of them iterates (the copy ``deep_copy`` makes, sized for them)."""
        keys = list(self.entries_map) if keys is None else keys
        return java_map_order(keys, java_hash_of(self.meta.key_serializer), expected_size_capacity(len(keys)))

    def deep_copy(self) -> "HeapBroadcastState":
        copy_key, copy_value = self.meta.key_serializer.copy, self.meta.value_serializer.copy
        copied = {}
        for key in self.java_order():
            value = self.entries_map[key]
            copied[copy_key(key)] = None if value is None else copy_value(value)
        return HeapBroadcastState(attrs.evolve(self.meta), copied)

    def write(self, out) -> int:
        """The size, then each key and value; the offset ``out.tell()`` gave first."""
        offset = out.tell()
        buffer = io.BytesIO()
        buffer.write(len(self.entries_map).to_bytes(4, "big", signed=True))
        keys, values = self.meta.key_serializer, self.meta.value_serializer
        for key, value in self.entries_map.items():
            keys.serialize(key, buffer)
            values.serialize(value, buffer)
        out.write(buffer.getvalue())
        return offset

    def __repr__(self) -> str:
        return f"HeapBroadcastState({self.meta.name!r}, {self.entries_map!r})"


class _Positioned:
    """A stream with a position, for the docstring's example."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def tell(self) -> int:
        return len(self.data)
