"""Seeded bugs of CopyOnWriteStateMap and its snapshot: each a small subclass.

Every mutant is a mistake a person porting or maintaining the structure
could make; the docstring line is its catalogue description. Real Flink bugs
carry their ticket in ``source``.
"""

from __future__ import annotations

import copy
import functools
import random

from cowcheck.core.mutants import register_mutant
from cowcheck.reference.cow_state_map import EMPTY_TABLE, CopyOnWriteStateMap, StateIncrementalVisitor, _ChainIterator
from cowcheck.reference.hashing import java_hash_code, register_java_hash
from cowcheck.reference.snapshot import CopyOnWriteStateMapSnapshot

map_mutant = functools.partial(register_mutant, machine="map")  # the map machine kills them

__all__: list[str] = []


def _chain(head):
    while head is not None:
        yield head
        head = head.next


@map_mutant("skip-prefix-copy", "copy-on-write copies only the entry to change, not the older entries "
                 "before it in the chain", "I9 / P2")
class SkipPrefixCopy(CopyOnWriteStateMap):
    def _chained_copy_on_write(self, tab, idx, until):
        copied = until.copy_with_version(self.state_map_version)
        if tab[idx] is until:
            tab[idx] = copied
        else:
            prev = tab[idx]
            while prev.next is not until:
                prev = prev.next
            prev.next = copied  # writes into a node a snapshot may still share
        return copied


@map_mutant("rehash-no-copy", "the incremental rehash moves entries shared with a snapshot without "
                 "copying them first", "I9 / P2")
class RehashNoCopy(CopyOnWriteStateMap):
    def _incremental_rehash(self):
        required = self.highest_required_snapshot_version
        self.highest_required_snapshot_version = 0  # the rehash ignores live snapshots
        try:
            super()._incremental_rehash()
        finally:
            self.highest_required_snapshot_version = required


@map_mutant("snapshot-missing-region", "a snapshot taken while rehashing leaves out the upper half of the "
                 "rehash table (buckets i + old_len)", "P2 / I8")
class SnapshotMissingRegion(CopyOnWriteStateMap):
    def snapshot_map_arrays(self):
        primary_length, rehash_index = len(self.primary_table), self.rehash_index
        out = super().snapshot_map_arrays()
        out[primary_length:primary_length + rehash_index] = [None] * rehash_index
        return out


@map_mutant("flink-9601-array-size", "the snapshot array is sized by the table length only, so "
                 "flattening more entries than buckets overflows it", "P7 (crash)", source="FLINK-9601")
class SnapshotArraySizedByTable(CopyOnWriteStateMap):
    def snapshot_map_arrays(self):
        length = len(self.primary_table) + self.rehash_index
        return super().snapshot_map_arrays()[:length]


@map_mutant("release-resets-required-version", "releasing any snapshot resets the highest required "
                 "version to 0 while older snapshots are still live", "I5 / P2",
                 source="pre-merge prototype of FLINK-5715")
class ReleaseResetsRequiredVersion(CopyOnWriteStateMap):
    def release_snapshot_version(self, version):
        super().release_snapshot_version(version)
        self.highest_required_snapshot_version = 0


@map_mutant("flink-7683-keys-ignore-rehash-table", "keys(namespace) walks the primary table only and "
                 "misses entries already moved to the rehash table", "P1", source="FLINK-7683")
class KeysIgnoreRehashTable(CopyOnWriteStateMap):
    def keys(self, namespace):
        return (e.key for head in self.primary_table for e in _chain(head) if e.namespace == namespace)


@map_mutant("flink-26853-stale-copier", "the map keeps the copier of the previous (immutable-state) "
                 "serializer, which returns the same object", "P6 / I8", source="FLINK-26853")
class StaleCopier(CopyOnWriteStateMap):
    def __init__(self, capacity=128, state_copier=copy.deepcopy):
        super().__init__(capacity, state_copier=lambda state: state)


@map_mutant("rehash-finish-loses-size", "when the rehash finishes, the entries counted in the rehash "
                 "table are not added to the primary size", "P4 / I2")
class RehashFinishLosesSize(CopyOnWriteStateMap):
    def _incremental_rehash(self):
        moved_before = self.incremental_rehash_table_size
        super()._incremental_rehash()
        if self.incremental_rehash_table is EMPTY_TABLE:
            self.primary_table_size -= moved_before


@map_mutant("snapshot-version-not-bumped", "a snapshot registers the current map version instead of "
                 "a new one, so writes since the last snapshot are not copied", "P5 / I9")
class SnapshotVersionNotBumped(CopyOnWriteStateMap):
    def snapshot_map_arrays(self):
        self.state_map_version -= 1  # cancels the increment in the reference
        out = super().snapshot_map_arrays()
        return out


@map_mutant("remove-without-mod-count", "remove does not bump mod_count, so live iteration does not "
                 "fail fast after a removal", "P7", source="cf. FLINK-9060")
class RemoveWithoutModCount(CopyOnWriteStateMap):
    def _remove_entry(self, key, namespace):
        before = self.mod_count
        removed = super()._remove_entry(key, namespace)
        self.mod_count = before
        return removed


@map_mutant("remove-counts-primary-table", "remove always decrements the primary table's size, even "
                 "for an entry in the rehash table", "I2 (white-box only)")
class RemoveCountsPrimaryTable(CopyOnWriteStateMap):
    def _remove_entry(self, key, namespace):
        rehash_size = self.incremental_rehash_table_size
        removed = super()._remove_entry(key, namespace)
        if removed is not None and self.incremental_rehash_table_size < rehash_size:
            self.incremental_rehash_table_size += 1
            self.primary_table_size -= 1
        return removed


class _KeepsDroppedEntries(CopyOnWriteStateMapSnapshot):
    def _transform_in_place(self, transformer):
        return super()._transform_in_place(lambda state: transformer(state) or state)


@map_mutant("transformed-snapshot-keeps-dropped", "a snapshot iterated with a TTL transformer keeps the "
                 "entries the transformer dropped", "P2")
class TransformedSnapshotKeepsDropped(CopyOnWriteStateMap):
    def snapshot(self):
        return _KeepsDroppedEntries(self)


def _identity(state):
    return state


@map_mutant("get-without-state-copy", "get under a snapshot copies the entry but hands out the state "
                 "object the snapshot still shares", "P6 / I8")
class GetWithoutStateCopy(CopyOnWriteStateMap):
    def get(self, key, namespace):
        copier, self.state_copier = self.state_copier, _identity  # the state copy is forgotten
        try:
            return super().get(key, namespace)
        finally:
            self.state_copier = copier


@map_mutant("put-and-get-old-returns-live-state", "put_and_get_old returns the old state object itself "
                 "although a live snapshot still shares it", "P6")
class PutAndGetOldReturnsLiveState(CopyOnWriteStateMap):
    def put_and_get_old(self, key, namespace, state):
        copier, self.state_copier = self.state_copier, _identity
        try:
            return super().put_and_get_old(key, namespace, state)
        finally:
            self.state_copier = copier


@map_mutant("transform-mutates-shared-state", "transform hands the transformation the state a live "
                 "snapshot shares instead of a copy", "P6 / I8 / P2")
class TransformMutatesSharedState(CopyOnWriteStateMap):
    def transform(self, key, namespace, value, fn):
        copier, self.state_copier = self.state_copier, _identity
        try:
            super().transform(key, namespace, value, fn)
        finally:
            self.state_copier = copier


@map_mutant("get-versions-lte", "get compares versions with <= instead of <, so it copies states and "
                 "entries nobody shares", "P6")
class GetVersionsLessOrEqual(CopyOnWriteStateMap):
    def get(self, key, namespace):
        self.highest_required_snapshot_version += 1  # `v < R + 1` is `v <= R`
        try:
            return super().get(key, namespace)
        finally:
            self.highest_required_snapshot_version -= 1


class _SkippingChains(_ChainIterator):
    def _scan(self):
        found = super()._scan()
        if found is None and self.pos < len(self.active):
            self.pos += 1  # after a run of max_empty empty buckets, one bucket too far
        return found


class _SkippingVisitor(StateIncrementalVisitor):
    def __init__(self, m, recommended_max_records):
        super().__init__(m, recommended_max_records)
        self.chains = _SkippingChains(m, recommended_max_records)


@map_mutant("visitor-skips-after-empty-run", "the incremental visitor resumes one bucket too far after "
                 "scanning its quota of empty buckets, so TTL cleanup never sees some entries", "P1")
class VisitorSkipsAfterEmptyRun(CopyOnWriteStateMap):
    def incremental_visitor(self, recommended_max_records):
        return _SkippingVisitor(self, recommended_max_records)


def _no_chain_copy(tab, idx, until):
    return until


@map_mutant("remove-without-prev-copy", "removing a non-head entry relinks its predecessor in place "
                 "although a snapshot shares it", "I9 / P2")
class RemoveWithoutPrevCopy(CopyOnWriteStateMap):
    def _remove_entry(self, key, namespace):
        self._chained_copy_on_write = _no_chain_copy  # shadows the method for this call
        try:
            return super()._remove_entry(key, namespace)
        finally:
            del self._chained_copy_on_write


@map_mutant("put-writes-shared-entry", "put writes the new state into an entry a snapshot shares "
                 "instead of into a copy", "I9 / P2")
class PutWritesSharedEntry(CopyOnWriteStateMap):
    def put(self, key, namespace, state):
        self._chained_copy_on_write = _no_chain_copy
        try:
            super().put(key, namespace, state)
        finally:
            del self._chained_copy_on_write


@map_mutant("get-writes-shared-entry", "get stores its state copy into the entry a snapshot shares "
                 "instead of copying the entry first", "I9")
class GetWritesSharedEntry(CopyOnWriteStateMap):
    def get(self, key, namespace):
        self._chained_copy_on_write = _no_chain_copy
        try:
            return super().get(key, namespace)
        finally:
            del self._chained_copy_on_write


class _Same:
    """A key or namespace compared by identity, as Java's ``==`` compares boxed values."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __eq__(self, other):
        return other is self.obj

    def __ne__(self, other):
        return other is not self.obj

    __hash__ = None


register_java_hash(_Same, lambda same: java_hash_code(same.obj))


def _by_identity(name: str):
    def method(self, key, namespace, *rest):
        return getattr(CopyOnWriteStateMap, name)(self, _Same(key), _Same(namespace), *rest)
    method.__name__ = name
    return method


@map_mutant("identity-compared-keys", "keys and namespaces are compared by identity (Java's == on boxed "
                 "Integers): an equal key that is another object is not found, so it is inserted twice",
                 "I3 / P1 / P4")
class IdentityComparedKeys(CopyOnWriteStateMap):
    # Right as long as the caller passes the same objects, or ints CPython caches (-5..256).
    get = _by_identity("get")
    contains_key = _by_identity("contains_key")
    put = _by_identity("put")
    put_and_get_old = _by_identity("put_and_get_old")
    remove = _by_identity("remove")
    remove_and_get_old = _by_identity("remove_and_get_old")
    transform = _by_identity("transform")

    def _insert_entry(self, tab, index, key, namespace, h):
        return super()._insert_entry(tab, index, key.obj, namespace.obj, h)


@map_mutant("rehash-past-1024-drops-entry", "a rehash into a table of 2,048 buckets or more (the fourth "
                 "doubling from Flink's 128) drops the head entry of each chain of two or more it moves",
                 "P4 / P1 / I2")
class RehashPast1024DropsEntry(CopyOnWriteStateMap):
    def _incremental_rehash(self):
        old = self.primary_table
        i = self.rehash_index
        if len(self.incremental_rehash_table) >= 2048 and old[i] is not None and old[i].next is not None:
            old[i] = old[i].next
            self.primary_table_size -= 1
        super()._incremental_rehash()


@map_mutant("snapshot-loses-entry-at-random", "a snapshot leaves out one entry one time in six, at random "
                 "(a race: its own random.Random(), seeded by neither the suite nor the program)", "P2", racy=True)
class SnapshotLosesEntryAtRandom(CopyOnWriteStateMap):
    """Nondeterministic: the same program fails in some replays and not in others, so its
    counterexample is stored as nondeterministic with how often it reproduced."""

    chance = 1 / 6
    race = random.Random  # called once per map: seeded from the operating system

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._race = self.race()

    def snapshot_map_arrays(self):
        out = super().snapshot_map_arrays()
        if self._race.random() < self.chance:
            for i, head in enumerate(out):
                if head is not None:
                    out[i] = head.next  # the snapshot no longer reaches this chain's first entry
                    break
        return out
