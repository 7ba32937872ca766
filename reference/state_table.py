"""CopyOnWriteStateTable: one CopyOnWriteStateMap per key group (docs/contract.md §10).

Contract: a ``(key, namespace) -> state`` table over a contiguous key-group
range of a job with ``max_parallelism`` key groups. Every keyed operation
routes through Flink's key-group assignment (``murmur_hash(hashCode(key)) %
max_parallelism``) to the map of that key group, so the state of one key
group can be written, shipped and restored on its own: the unit of
checkpointing and of rescaling.

Representation:

- ``key_group_range``: the groups this table owns, ``start..end`` inclusive
  (Flink ``KeyGroupRange``), never empty.
- ``maps``: ``maps[g - start]`` holds key group ``g``; all maps exist from the
  start (Flink creates every map eagerly).

Costs: a keyed operation is one key-group assignment (two 32-bit mixes) plus
the map operation; ``len`` is O(key groups); ``snapshot()`` is one map
snapshot per key group, O(total capacity), references only.

Maintenance notes:

1. A key outside the range is an error naming the key, its key group and the
   range (Flink 2.3: ``KeyGroupRangeOffsets.newIllegalKeyGroupException``); a
   None key or namespace is a TypeError, as in the map.
2. ``snapshot()`` snapshots every map at once, so map versions move in lock
   step and a table snapshot has one ``version``.
3. Live iteration walks the maps in key-group order (Flink's
   ``StateTable.iterator()``); it records every map's ``mod_count`` when it
   starts, so a structural change in the group being iterated or in one not
   reached yet raises ConcurrentModificationError; a change in a group
   already passed cannot affect what is left and goes unnoticed.

The one usage rule: release a table snapshot (or write every key group) when
done with it; until then every map keeps copying on write (FLINK-13469).

>>> t = CopyOnWriteStateTable(KeyGroupRange(0, 127), max_parallelism=128, capacity=4)
>>> t.put(42, 0, [1]); t.key_group_of(42)
29
>>> s = t.snapshot(); t.get(42, 0).append(2)
>>> list(s), t.get(42, 0)
([(42, 0, [1])], [1, 2])
>>> s.release(); s.released
True
"""

from __future__ import annotations

import copy
from itertools import chain
from typing import Any, BinaryIO, Callable, Iterator, Optional

import attrs

from cowcheck.reference.cow_state_map import CopyOnWriteStateMap
from cowcheck.reference.errors import ConcurrentModificationError, IllegalStateError, KeyGroupOutOfRangeError
from cowcheck.reference.hashing import java_hash_code_cached, key_group_for_hash
from cowcheck.reference.layout import DEFAULT_CAPACITY
from cowcheck.reference.snapshot import CopyOnWriteStateMapSnapshot, SnapshotView

__all__ = [
    "KeyGroupRange",
    "CopyOnWriteStateTable",
    "CopyOnWriteStateTableSnapshot",
    "key_group_range_for_operator",
    "DEFAULT_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
]

DEFAULT_MAX_PARALLELISM = 128
# Flink KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


def _non_negative(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"KeyGroupRange.{attribute.name} must be an int >= 0, got {value!r}")


@attrs.frozen
class KeyGroupRange:
    """Key groups ``start..end``, both inclusive (Flink ``KeyGroupRange``).
    ``KeyGroupRange.EMPTY`` (0, -1) is the empty range.

    >>> r = KeyGroupRange(0, 7)
    >>> len(r), 7 in r, str(r.intersection(KeyGroupRange(5, 20)))
    (8, True, '[5, 7]')
    """

    start: int = attrs.field(validator=_non_negative)
    end: int

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.end, int) or self.end < self.start - 1:
            raise ValueError(f"KeyGroupRange: end must be >= start - 1 (empty), got start={self.start}, "
                             f"end={self.end!r}")

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def is_empty(self) -> bool:
        return self.end < self.start

    def intersection(self, other: "KeyGroupRange") -> "KeyGroupRange":
        """The groups in both ranges (Flink ``getIntersection``); EMPTY if none."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY

    def __str__(self) -> str:
        return "[]" if self.is_empty() else f"[{self.start}, {self.end}]"


KeyGroupRange.EMPTY = KeyGroupRange(0, -1)


def _check_max_parallelism(max_parallelism: int) -> None:
    if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max_parallelism must be an int in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                         f"got {max_parallelism!r}")


def key_group_range_for_operator(max_parallelism: int, parallelism: int, operator_index: int) -> KeyGroupRange:
    """The key groups subtask ``operator_index`` of ``parallelism`` owns (Flink
    ``computeKeyGroupRangeForOperatorIndex``): how rescaling splits the groups.

    >>> [str(key_group_range_for_operator(128, 3, i)) for i in range(3)]
    ['[0, 42]', '[43, 85]', '[86, 127]']
    """
    _check_max_parallelism(max_parallelism)
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(f"parallelism must be in [1, max_parallelism={max_parallelism}], got {parallelism}")
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator_index must be in [0, {parallelism - 1}], got {operator_index}")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


class CopyOnWriteStateTable:
    """See the module docstring. ``key_group_range`` defaults to all
    ``max_parallelism`` groups; ``capacity`` and ``state_copier`` go to every
    map (Flink uses capacity 128 and ``TypeSerializer.copy``)."""

    __slots__ = ("key_group_range", "max_parallelism", "maps", "_start")

    def __init__(self, key_group_range: Optional[KeyGroupRange] = None,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, capacity: int = DEFAULT_CAPACITY,
                 state_copier: Callable[[Any], Any] = copy.deepcopy) -> None:
        _check_max_parallelism(max_parallelism)
        if key_group_range is None:
            key_group_range = KeyGroupRange(0, max_parallelism - 1)
        if not isinstance(key_group_range, KeyGroupRange):
            raise TypeError(f"key_group_range must be a KeyGroupRange, got {type(key_group_range).__name__}")
        if key_group_range.is_empty() or key_group_range.end >= max_parallelism:
            raise ValueError(f"key_group_range {key_group_range} must be non-empty and inside "
                             f"[0, {max_parallelism - 1}] (max_parallelism {max_parallelism})")
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._start = key_group_range.start
        self.maps: list[CopyOnWriteStateMap] = [
            CopyOnWriteStateMap(capacity=capacity, state_copier=state_copier) for _ in key_group_range
        ]

    def set_meta_info(self, state_copier: Callable[[Any], Any] = copy.deepcopy) -> None:
        """Re-register the state with a new serializer (Flink ``setMetaInfo``, schema
        evolution on restore): every map copies with ``state_copier`` from now on,
        as Flink does since FLINK-26853 (before the fix, the maps kept the old one)."""
        for m in self.maps:
            m.state_copier = state_copier

    # ------------------------------------------------------------- routing

    def key_group_of(self, key) -> int:
        """Flink's key-group assignment of ``key`` (whether or not this table owns it)."""
        if key is None:
            raise TypeError("CopyOnWriteStateTable: null key (Flink: 'Assigned key must not be null!')")
        return key_group_for_hash(java_hash_code_cached(key), self.max_parallelism)

    def map_for_key_group(self, group: int) -> CopyOnWriteStateMap:
        """The map of key group ``group``; KeyGroupOutOfRangeError if not owned."""
        index = group - self._start
        if 0 <= index < len(self.maps):
            return self.maps[index]
        raise KeyGroupOutOfRangeError(group, self.key_group_range, self.max_parallelism)

    def _map_for(self, key, namespace) -> CopyOnWriteStateMap:
        if key is None or namespace is None:
            raise TypeError(f"CopyOnWriteStateTable: null key or namespace (key={key!r}, namespace={namespace!r})")
        group = key_group_for_hash(java_hash_code_cached(key), self.max_parallelism)
        index = group - self._start
        if 0 <= index < len(self.maps):
            return self.maps[index]
        raise KeyGroupOutOfRangeError(group, self.key_group_range, self.max_parallelism, key=key)

    # ------------------------------------------------------------ keyed API

    def get(self, key, namespace):
        return self._map_for(key, namespace).get(key, namespace)

    def contains_key(self, key, namespace) -> bool:
        return self._map_for(key, namespace).contains_key(key, namespace)

    def put(self, key, namespace, state) -> None:
        self._map_for(key, namespace).put(key, namespace, state)

    def put_and_get_old(self, key, namespace, state):
        return self._map_for(key, namespace).put_and_get_old(key, namespace, state)

    def remove(self, key, namespace) -> None:
        self._map_for(key, namespace).remove(key, namespace)

    def remove_and_get_old(self, key, namespace):
        return self._map_for(key, namespace).remove_and_get_old(key, namespace)

    def transform(self, key, namespace, value, fn: Callable[[Any, Any], Any]) -> None:
        self._map_for(key, namespace).transform(key, namespace, value, fn)

    # ------------------------------------------------------ whole-table API

    def __len__(self) -> int:
        return sum(len(m) for m in self.maps)

    def is_empty(self) -> bool:
        return all(m.is_empty() for m in self.maps)

    def __iter__(self) -> Iterator[tuple]:
        """Live entries ``(key, namespace, state)`` in key-group order; fail-fast (note 3)."""
        return _TableIterator(self.maps)

    def keys(self, namespace) -> Iterator:
        return (k for k, n, _ in self if n == namespace)

    def size_of_namespace(self, namespace) -> int:
        return sum(m.size_of_namespace(namespace) for m in self.maps)

    def snapshot(self) -> "CopyOnWriteStateTableSnapshot":
        """Snapshot every key group's map at once; write or release it when done."""
        return CopyOnWriteStateTableSnapshot(self)

    def __repr__(self) -> str:
        return (f"CopyOnWriteStateTable(key_group_range={self.key_group_range}, "
                f"max_parallelism={self.max_parallelism}, size={len(self)})")


class _TableIterator:
    __slots__ = ("maps", "expected", "index", "current")

    def __init__(self, maps: list[CopyOnWriteStateMap]) -> None:
        self.maps = maps
        self.expected = [m.mod_count for m in maps]
        self.index = len(maps) - 1
        self.current: Iterator[tuple] = iter(())
        # Enter the first non-empty group now: the map's iterator reads its
        # first entry on creation, so an iterator over nothing stays empty.
        for index, m in enumerate(maps):
            if len(m):
                self.index, self.current = index, iter(m)
                break

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        while True:
            for entry in self.current:
                return entry
            self.index += 1
            if self.index == len(self.maps):
                self.index -= 1
                raise StopIteration
            m, expected = self.maps[self.index], self.expected[self.index]
            # Like the map: only a next() that would hand out an entry raises.
            if m.mod_count != expected and any(len(rest) for rest in self.maps[self.index:]):
                raise ConcurrentModificationError(expected, m.mod_count)
            self.current = iter(m)


class CopyOnWriteStateTableSnapshot:
    """The map snapshots of one table, one per key group (Flink
    ``CopyOnWriteStateTableSnapshot``). Writing key group ``g`` writes its map
    snapshot and releases it at once, so copy-on-write stops in that group
    while later groups are still being written; ``release()`` frees the rest.
    """

    __slots__ = ("owner", "key_group_range", "map_snapshots")

    def __init__(self, table: CopyOnWriteStateTable) -> None:
        self.owner = table
        self.key_group_range = table.key_group_range
        self.map_snapshots: list[CopyOnWriteStateMapSnapshot] = [m.snapshot() for m in table.maps]

    @property
    def version(self) -> int:
        """The maps' common version (they are always snapshotted together)."""
        return self.map_snapshots[0].version

    @property
    def released(self) -> bool:
        return all(s.released for s in self.map_snapshots)

    def unreleased_key_groups(self) -> list[int]:
        start = self.key_group_range.start
        return [start + i for i, s in enumerate(self.map_snapshots) if not s.released]

    def __len__(self) -> int:
        return sum(len(s) for s in self.map_snapshots)

    def __iter__(self) -> Iterator[tuple]:
        return chain.from_iterable(self.map_snapshots)

    def iterate(self, transformer: Optional[Callable[[Any], Any]] = None) -> SnapshotView:
        """All key groups' entries; with a transformer this is the last use (docs/contract.md §6)."""
        views = [s.iterate(transformer) for s in self.map_snapshots]
        return SnapshotView(sum(len(v) for v in views), [e for v in views for e in v])

    def map_snapshot(self, group: int) -> CopyOnWriteStateMapSnapshot:
        index = group - self.key_group_range.start
        if 0 <= index < len(self.map_snapshots):
            return self.map_snapshots[index]
        raise KeyGroupOutOfRangeError(group, self.key_group_range, self.owner.max_parallelism)

    def write_key_group(self, out: BinaryIO, group: int, key_serializer, namespace_serializer,
                        state_serializer, transformer: Optional[Callable[[Any], Any]] = None) -> None:
        """Write key group ``group`` (int32 count, then namespace, key, state per
        entry: Flink's ``writeStateInKeyGroup``) and release its map snapshot."""
        snapshot = self.map_snapshot(group)
        if snapshot.released:
            # Its entries are no longer protected from copy-on-write: writing them would write garbage.
            raise IllegalStateError(f"key group {group} of this table snapshot was already written or released")
        snapshot.write_state(out, key_serializer, namespace_serializer, state_serializer, transformer)
        snapshot.release()

    def release(self) -> None:
        """Release every map snapshot not released yet (idempotent; FLINK-13469)."""
        for snapshot in self.map_snapshots:
            snapshot.release()

    def __repr__(self) -> str:
        return (f"CopyOnWriteStateTableSnapshot(key_group_range={self.key_group_range}, version={self.version}, "
                f"entries={len(self)}, unreleased={len(self.unreleased_key_groups())})")
