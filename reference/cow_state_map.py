"""CopyOnWriteStateMap: a port of Flink 2.3.0's heap state map (docs/contract.md §3–§7).

Contract: a hash map ``(key, namespace) -> state`` with chaining, incremental
rehash and asynchronous snapshots. A snapshot costs one shallow copy of the
bucket array; afterwards every write that would touch an entry reachable from
a live snapshot goes to a copy instead (copy-on-write), so the snapshot can be
read later, on another thread, while the map keeps changing.

Representation:

- ``primary_table``: list of bucket heads (``StateMapEntry`` or None), length a
  power of two >= MINIMUM_CAPACITY.
- ``incremental_rehash_table``: the table twice as large that buckets move to
  while a rehash runs; the shared ``EMPTY_TABLE`` sentinel otherwise.
- ``rehash_index``: buckets ``< rehash_index`` of the primary have moved.
- versions: ``state_map_version`` (V) goes 1, 2, 3… with each snapshot;
  ``highest_required_snapshot_version`` (R) is the newest live snapshot or 0.
  An entry (or state) older than R may be shared with a snapshot and is never
  written in place.

Costs: get/put/remove O(1) expected plus at most one rehash step (>= 4 moved
entries); snapshot O(capacity); the first write to a shared entry copies it
and every older entry before it in its chain (never the ones after).

Maintenance notes:

1. Every keyed operation, reads included, first advances the rehash by one
   step; ``len``, iteration, ``keys``, ``snapshot`` and ``release`` do not.
2. ``put_entry`` picks the table *before* it may start a rehash, and a new
   entry goes to the head of its chain.
3. Faithful to Flink includes its quirks: reads that drive the rehash during a
   live iteration can make the iterator repeat or skip entries (docs/contract.md §7).
4. For speed (see ``benchmarks/bench_map.py``) the keyed ops spell out their
   lookup (rehash step, hash, select_active_table, chain walk) instead of
   sharing a helper: get, put, _put_entry, _remove_entry and _lookup. A
   change to one of these rules must be made in all five. ``put`` does not
   call ``_put_entry``; every path still goes through ``_incremental_rehash``,
   ``_chained_copy_on_write``, ``_insert_entry`` and ``_remove_entry``, so a
   subclass overriding those (seeded bugs) changes every op that uses them.
5. Registering a snapshot version and releasing one hold ``_VERSIONS_LOCK``
   (Flink: ``synchronized (snapshotVersions)``): a checkpoint's asynchronous
   part releases its snapshots on its own thread while the task thread may
   take the next snapshot, and R must never drop below a live version.

The one usage rule: a state returned by ``get`` may be mutated in place by the
caller; states handed to ``put`` belong to the map from then on.

White-box fields (read by ``cowcheck.reference.invariants``) are public attributes
named as in docs/contract.md §3; they are not to be written from outside.

>>> m = CopyOnWriteStateMap(capacity=4)
>>> m.put("k", 0, [1])
>>> s = m.snapshot()
>>> m.get("k", 0).append(2)
>>> list(s), m.get("k", 0)
([('k', 0, [1])], [1, 2])
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Iterator

from cowcheck.reference.entry import StateMapEntry
from cowcheck.reference.errors import (
    ConcurrentModificationError,
    ForeignSnapshotError,
    RehashInProgressError,
    UnknownSnapshotVersionError,
)
from cowcheck.reference.hashing import bit_mix_cache_get, bit_mix_cached, java_hash_code_cached
from cowcheck.reference.layout import (
    DEFAULT_CAPACITY,
    MAXIMUM_CAPACITY,
    MIN_TRANSFERRED_PER_INCREMENTAL_REHASH,
    MINIMUM_CAPACITY,
    doubled_capacity,
    is_valid_capacity,
    new_bucket,
    snapshot_array_length,
    snapshot_regions,
    threshold_for,
    uses_primary_table,
)
from cowcheck.reference.snapshot import CopyOnWriteStateMapSnapshot

__all__ = ["CopyOnWriteStateMap", "StateMapEntry", "EMPTY_TABLE"]

# Flink shares one array of length MINIMUM_CAPACITY >>> 1 as "not rehashing";
# a tuple keeps the length-2 shape and makes a stray write fail loudly.
EMPTY_TABLE: tuple = (None,) * (MINIMUM_CAPACITY >> 1)

_INT_MIN = -(1 << 31)
_INT_MAX = (1 << 31) - 1


# Registering and releasing snapshot versions (maintenance note 5); one lock for every map: both are rare.
_VERSIONS_LOCK = threading.Lock()


def _hash_of(key, namespace) -> int:
    """``composite_hash`` (docs/contract.md §2), rejecting None like Flink rejects null.

    get, put, _put_entry and _remove_entry inline the int32 fast path below:
    in CPython the call alone would add about half to the hash's cost.
    """
    if type(key) is int and type(namespace) is int and (
        _INT_MIN <= key <= _INT_MAX and _INT_MIN <= namespace <= _INT_MAX
    ):
        # Integer.hashCode is the value itself.
        h = bit_mix_cache_get(key ^ namespace)
        return h if h is not None else bit_mix_cached(key ^ namespace)
    if key is None or namespace is None:
        raise TypeError(
            f"CopyOnWriteStateMap: null key or namespace (key={key!r}, namespace={namespace!r})"
        )
    return bit_mix_cached(java_hash_code_cached(key) ^ java_hash_code_cached(namespace))


class CopyOnWriteStateMap:
    """See the module docstring. ``capacity``: power of two >= 4 (Flink always
    uses 128); ``state_copier``: deep copy of a state (Flink
    ``TypeSerializer.copy``), ``copy.deepcopy`` by default."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, state_copier: Callable[[Any], Any] = copy.deepcopy):
        if not is_valid_capacity(capacity):
            raise ValueError(
                f"CopyOnWriteStateMap: capacity must be a power of two in "
                f"[{MINIMUM_CAPACITY}, {MAXIMUM_CAPACITY}], got {capacity!r}"
            )
        self.state_copier = state_copier
        self.threshold = 0
        self.primary_table: list = self._make_table(capacity)
        self.incremental_rehash_table = EMPTY_TABLE
        self.primary_table_size = 0
        self.incremental_rehash_table_size = 0
        self.rehash_index = 0
        self.mod_count = 0
        self.state_map_version = 0
        self.snapshot_versions: set[int] = set()
        self.highest_required_snapshot_version = 0

    # ----------------------------------------------------------------- sizes

    def __len__(self) -> int:
        return self.primary_table_size + self.incremental_rehash_table_size

    def is_empty(self) -> bool:
        return len(self) == 0

    @property
    def is_rehashing(self) -> bool:
        return self.incremental_rehash_table is not EMPTY_TABLE

    def introspect(self) -> "CopyOnWriteStateMap":
        """White-box view for ``cowcheck.reference.invariants``: the map itself."""
        return self

    # ------------------------------------------------------------ table logic

    def _make_table(self, capacity: int) -> list:
        self.threshold = threshold_for(capacity)
        return [None] * capacity

    def _select_active_table(self, h: int) -> list:
        primary = self.primary_table
        return primary if uses_primary_table(h, len(primary), self.rehash_index) else self.incremental_rehash_table

    def _double_capacity(self) -> None:
        if self.incremental_rehash_table is not EMPTY_TABLE:
            raise RehashInProgressError()
        new_capacity = doubled_capacity(len(self.primary_table))
        if new_capacity is None:
            return
        self.incremental_rehash_table = self._make_table(new_capacity)

    def _incremental_rehash(self) -> None:
        old_map = self.primary_table
        new_map = self.incremental_rehash_table
        old_capacity = len(old_map)
        required = self.highest_required_snapshot_version
        version = self.state_map_version
        rh_idx = self.rehash_index
        transferred = 0
        # Move whole buckets until at least MIN_TRANSFERRED entries moved.
        while transferred < MIN_TRANSFERRED_PER_INCREMENTAL_REHASH:
            e = old_map[rh_idx]
            while e is not None:
                # copy-on-write check for entry
                if e.entry_version < required:
                    e = StateMapEntry(e.key, e.namespace, e.state, e.hash, e.next, version, e.state_version)
                n = e.next
                pos = new_bucket(e.hash, old_capacity)
                e.next = new_map[pos]
                new_map[pos] = e
                e = n
                transferred += 1
            old_map[rh_idx] = None
            rh_idx += 1
            if rh_idx == old_capacity:
                self.primary_table = new_map
                self.incremental_rehash_table = EMPTY_TABLE
                self.primary_table_size += self.incremental_rehash_table_size
                self.incremental_rehash_table_size = 0
                self.rehash_index = 0
                return
        self.primary_table_size -= transferred
        self.incremental_rehash_table_size += transferred
        self.rehash_index = rh_idx

    def _chained_copy_on_write(self, tab: list, idx: int, until: StateMapEntry) -> StateMapEntry:
        """Copy every node older than R from the chain head up to ``until``;
        the tail after ``until`` stays shared with snapshots."""
        required = self.highest_required_snapshot_version
        version = self.state_map_version
        # StateMapEntry(..) below is copy_with_version(version), spelled out
        # to save a call per copied node.
        current = tab[idx]
        if current.entry_version < required:
            copied = StateMapEntry(current.key, current.namespace, current.state, current.hash,
                                   current.next, version, current.state_version)
            tab[idx] = copied
        else:
            copied = current
        while current is not until:
            current = current.next
            if current.entry_version < required:
                copied.next = StateMapEntry(current.key, current.namespace, current.state, current.hash,
                                            current.next, version, current.state_version)
                copied = copied.next
            else:
                copied = current
        return copied

    def _put_entry(self, key, namespace) -> StateMapEntry:
        if self.incremental_rehash_table is not EMPTY_TABLE:
            self._incremental_rehash()
        # _hash_of, int32 fast path inlined (see _hash_of)
        if type(key) is int and type(namespace) is int and (
            -0x80000000 <= key <= 0x7FFFFFFF and -0x80000000 <= namespace <= 0x7FFFFFFF
        ):
            h = bit_mix_cache_get(key ^ namespace)
            if h is None:
                h = bit_mix_cached(key ^ namespace)
        else:
            h = _hash_of(key, namespace)
        # layout.uses_primary_table, then layout.bucket_index, inlined; tests/test_contracts.py checks they agree
        tab = self.primary_table
        index = h & (len(tab) - 1)
        if index < self.rehash_index:
            tab = self.incremental_rehash_table
            index = h & (len(tab) - 1)
        e = tab[index]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                # copy-on-write check for entry
                if e.entry_version < self.highest_required_snapshot_version:
                    e = self._chained_copy_on_write(tab, index, e)
                return e
            e = e.next
        return self._insert_entry(tab, index, key, namespace, h)

    def _insert_entry(self, tab: list, index: int, key, namespace, h: int) -> StateMapEntry:
        """The not-found half of ``put_entry``: ``tab`` was chosen by the caller."""
        self.mod_count += 1
        if self.primary_table_size + self.incremental_rehash_table_size > self.threshold:
            self._double_capacity()
        # The new entry goes into ``tab``, chosen before doubling (Flink).
        version = self.state_map_version
        new_entry = StateMapEntry(key, namespace, None, h, tab[index], version, version)
        tab[index] = new_entry
        if tab is self.primary_table:
            self.primary_table_size += 1
        else:
            self.incremental_rehash_table_size += 1
        return new_entry

    def _remove_entry(self, key, namespace):
        if self.incremental_rehash_table is not EMPTY_TABLE:
            self._incremental_rehash()
        # _hash_of, int32 fast path inlined (see _hash_of)
        if type(key) is int and type(namespace) is int and (
            -0x80000000 <= key <= 0x7FFFFFFF and -0x80000000 <= namespace <= 0x7FFFFFFF
        ):
            h = bit_mix_cache_get(key ^ namespace)
            if h is None:
                h = bit_mix_cached(key ^ namespace)
        else:
            h = _hash_of(key, namespace)
        # layout.uses_primary_table, then layout.bucket_index, inlined; tests/test_contracts.py checks they agree
        tab = self.primary_table
        index = h & (len(tab) - 1)
        if index < self.rehash_index:
            tab = self.incremental_rehash_table
            index = h & (len(tab) - 1)
        prev = None
        e = tab[index]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                if prev is None:
                    tab[index] = e.next
                else:
                    # copy-on-write check for entry
                    if prev.entry_version < self.highest_required_snapshot_version:
                        prev = self._chained_copy_on_write(tab, index, prev)
                    prev.next = e.next
                self.mod_count += 1
                if tab is self.primary_table:
                    self.primary_table_size -= 1
                else:
                    self.incremental_rehash_table_size -= 1
                return e
            prev = e
            e = e.next
        return None

    def _lookup(self, key, namespace):
        """(table, index, entry or None) after one rehash step."""
        if self.incremental_rehash_table is not EMPTY_TABLE:
            self._incremental_rehash()
        h = _hash_of(key, namespace)
        # layout.uses_primary_table, then layout.bucket_index, inlined; tests/test_contracts.py checks they agree
        tab = self.primary_table
        index = h & (len(tab) - 1)
        if index < self.rehash_index:
            tab = self.incremental_rehash_table
            index = h & (len(tab) - 1)
        e = tab[index]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                return tab, index, e
            e = e.next
        return tab, index, None

    # ------------------------------------------------------------ public API

    def get(self, key, namespace):
        """The state of ``(key, namespace)`` or None; a copy if a live snapshot may share it."""
        if self.incremental_rehash_table is not EMPTY_TABLE:
            self._incremental_rehash()
        # _hash_of, int32 fast path inlined (see _hash_of)
        if type(key) is int and type(namespace) is int and (
            -0x80000000 <= key <= 0x7FFFFFFF and -0x80000000 <= namespace <= 0x7FFFFFFF
        ):
            h = bit_mix_cache_get(key ^ namespace)
            if h is None:
                h = bit_mix_cached(key ^ namespace)
        else:
            h = _hash_of(key, namespace)
        # layout.uses_primary_table, then layout.bucket_index, inlined; tests/test_contracts.py checks they agree
        tab = self.primary_table
        index = h & (len(tab) - 1)
        if index < self.rehash_index:
            tab = self.incremental_rehash_table
            index = h & (len(tab) - 1)
        e = tab[index]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                required = self.highest_required_snapshot_version
                # copy-on-write check for state
                if e.state_version < required:
                    # copy-on-write check for entry
                    if e.entry_version < required:
                        e = self._chained_copy_on_write(tab, index, e)
                    e.state_version = self.state_map_version
                    e.state = self.state_copier(e.state)
                return e.state
            e = e.next
        return None

    def contains_key(self, key, namespace) -> bool:
        return self._lookup(key, namespace)[2] is not None

    def put(self, key, namespace, state) -> None:
        """Map ``(key, namespace)`` to ``state`` (never copied)."""
        # _put_entry's lookup inlined: put is the hottest op and the call costs ~15%.
        if self.incremental_rehash_table is not EMPTY_TABLE:
            self._incremental_rehash()
        # _hash_of, int32 fast path inlined (see _hash_of)
        if type(key) is int and type(namespace) is int and (
            -0x80000000 <= key <= 0x7FFFFFFF and -0x80000000 <= namespace <= 0x7FFFFFFF
        ):
            h = bit_mix_cache_get(key ^ namespace)
            if h is None:
                h = bit_mix_cached(key ^ namespace)
        else:
            h = _hash_of(key, namespace)
        # layout.uses_primary_table, then layout.bucket_index, inlined; tests/test_contracts.py checks they agree
        tab = self.primary_table
        index = h & (len(tab) - 1)
        if index < self.rehash_index:
            tab = self.incremental_rehash_table
            index = h & (len(tab) - 1)
        e = tab[index]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                # copy-on-write check for entry
                if e.entry_version < self.highest_required_snapshot_version:
                    e = self._chained_copy_on_write(tab, index, e)
                break
            e = e.next
        else:
            e = self._insert_entry(tab, index, key, namespace, h)
        e.state = state
        e.state_version = self.state_map_version

    def put_and_get_old(self, key, namespace, state):
        """Like put; returns the previous state (a copy if a snapshot may share it) or None."""
        e = self._put_entry(key, namespace)
        # copy-on-write check for state
        old = self.state_copier(e.state) if e.state_version < self.highest_required_snapshot_version else e.state
        e.state = state
        e.state_version = self.state_map_version
        return old

    def remove(self, key, namespace) -> None:
        self._remove_entry(key, namespace)

    def remove_and_get_old(self, key, namespace):
        """Remove; returns the removed state (a copy if a snapshot may share it) or None."""
        e = self._remove_entry(key, namespace)
        if e is None:
            return None
        # copy-on-write check for state
        return self.state_copier(e.state) if e.state_version < self.highest_required_snapshot_version else e.state

    def transform(self, key, namespace, value, fn: Callable[[Any, Any], Any]) -> None:
        """``state = fn(old_state_or_None, value)``; ``fn`` gets a copy if a snapshot may share the old state."""
        e = self._put_entry(key, namespace)
        old = self.state_copier(e.state) if e.state_version < self.highest_required_snapshot_version else e.state
        e.state = fn(old, value)
        e.state_version = self.state_map_version

    # -------------------------------------------------------------- iteration

    def __iter__(self) -> Iterator[tuple]:
        """Live entries ``(key, namespace, state)``; fail-fast on structural change."""
        return StateEntryIterator(self)

    def entries(self) -> Iterator[StateMapEntry]:
        """Live entry objects (white-box), with the same fail-fast rule as ``iter``."""
        return StateEntryIterator(self, raw=True)

    def keys(self, namespace) -> Iterator:
        """Keys that have ``namespace``, lazily."""
        return (k for k, n, _ in self if n == namespace)

    def size_of_namespace(self, namespace) -> int:
        # Flink counts over its live iterator; nothing can change the map meanwhile, so a plain
        # scan of both tables counts the same entries, without the iterator's per-entry cost.
        count = 0
        for table in (self.primary_table, self.incremental_rehash_table):
            for e in filter(None, table):
                while e is not None:
                    if e.namespace == namespace:
                        count += 1
                    e = e.next
        return count

    def incremental_visitor(self, recommended_max_records: int) -> "StateIncrementalVisitor":
        """TTL-style visitor: one whole chain per ``next_entries()`` call."""
        return StateIncrementalVisitor(self, recommended_max_records)

    # -------------------------------------------------------------- snapshots

    def snapshot(self) -> CopyOnWriteStateMapSnapshot:
        """Take a snapshot (Flink ``stateSnapshot``); release it when done."""
        return CopyOnWriteStateMapSnapshot(self)

    def snapshot_map_arrays(self) -> list:
        """Register a new snapshot version and return the flattened bucket heads."""
        with _VERSIONS_LOCK:
            self.state_map_version += 1
            self.highest_required_snapshot_version = self.state_map_version
            self.snapshot_versions.add(self.state_map_version)
        primary = self.primary_table
        rehash = self.incremental_rehash_table
        rehashing = rehash is not EMPTY_TABLE
        plan = snapshot_regions(len(primary), self.rehash_index, rehashing)
        out = [None] * snapshot_array_length(len(primary), self.rehash_index, len(self))
        for source, start, length, dest in plan:
            table = primary if source == "primary" else rehash
            out[dest : dest + length] = table[start : start + length]
        return out

    def release_snapshot(self, snapshot) -> None:
        if snapshot.owner is not self:
            raise ForeignSnapshotError(snapshot.version)
        self.release_snapshot_version(snapshot.version)

    def release_snapshot_version(self, version: int) -> None:
        with _VERSIONS_LOCK:
            versions = self.snapshot_versions
            if version not in versions:
                raise UnknownSnapshotVersionError(version, sorted(versions))
            versions.discard(version)
            self.highest_required_snapshot_version = max(versions) if versions else 0

    def __repr__(self) -> str:
        return (
            f"CopyOnWriteStateMap(size={len(self)}, capacity={len(self.primary_table)}, "
            f"rehashing={self.is_rehashing}, version={self.state_map_version}, "
            f"live_snapshots={sorted(self.snapshot_versions)})"
        )


class _ChainIterator:
    """Flink's StateEntryChainIterator: bucket heads of the primary table
    captured at start, then the current rehash table if the primary has not
    been swapped meanwhile. Scans at most ``max_empty`` empty buckets per call."""

    __slots__ = ("map", "active", "pos", "max_empty")

    def __init__(self, m: CopyOnWriteStateMap, max_empty: int = 1 << 62):
        self.map = m
        self.active = m.primary_table
        self.pos = 0
        self.max_empty = max_empty

    def has_next(self) -> bool:
        m = self.map
        return len(m) > 0 and (self.pos < len(self.active) or self.active is m.primary_table)

    def next_head(self):
        m = self.map
        while True:
            nxt = self._scan()
            if (
                nxt is not None
                or self.pos < len(self.active)
                or self.active is m.incremental_rehash_table
                or self.active is not m.primary_table
            ):
                return nxt
            self.active = m.incremental_rehash_table
            self.pos = 0

    def _scan(self):
        """The next non-empty bucket's head, looking at no more than ``max_empty`` empty buckets."""
        tab = self.active
        pos = self.pos
        stop = min(len(tab), pos + self.max_empty)  # each bucket passed over is an empty one
        while pos < stop:
            e = tab[pos]
            pos += 1
            if e is not None:
                self.pos = pos
                return e
        self.pos = pos
        return None


class StateEntryIterator:
    """Live iterator; raises ConcurrentModificationError on ``next()`` after a
    structural change (a change after the last element raises nothing)."""

    __slots__ = ("map", "chains", "next_entry", "expected_mod_count", "raw")

    def __init__(self, m: CopyOnWriteStateMap, raw: bool = False):
        self.map = m
        self.chains = _ChainIterator(m)
        self.expected_mod_count = m.mod_count
        self.raw = raw
        self.next_entry = self.chains.next_head()

    def __iter__(self):
        return self

    def __next__(self):
        e = self.next_entry
        if e is None:
            raise StopIteration
        if self.map.mod_count != self.expected_mod_count:
            raise ConcurrentModificationError(self.expected_mod_count, self.map.mod_count)
        nxt = e.next
        self.next_entry = nxt if nxt is not None else self.chains.next_head()
        return e if self.raw else (e.key, e.namespace, e.state)


class StateIncrementalVisitor:
    """Flink's StateIncrementalVisitorImpl (TTL cleanup): no mod_count check."""

    def __init__(self, m: CopyOnWriteStateMap, recommended_max_records: int):
        self.map = m
        self.chains = _ChainIterator(m, recommended_max_records)

    def has_next(self) -> bool:
        return self.chains.has_next()

    def next_entries(self) -> list:
        """The next whole chain as ``(key, namespace, state)`` tuples; may be empty."""
        if not self.has_next():
            return []
        out = []
        e = self.chains.next_head()
        while e is not None:
            out.append((e.key, e.namespace, e.state))
            e = e.next
        return out

    def remove(self, entry: tuple) -> None:
        self.map.remove(entry[0], entry[1])

    def update(self, entry: tuple, new_state) -> None:
        self.map.put(entry[0], entry[1], new_state)
