"""Seeded bugs of the reference keyed backend (machine ``backend``): each a small subclass.

Every mutant is a mistake someone writing Flink's keyed states, their TTL
decorators or the checkpoint path could make; its catalogue entry says what
it does and which property should catch it. The registered factory builds
the reference state backend (maps of capacity 4) with the mutated keyed
backend class.
"""

from __future__ import annotations

import attrs

from cowcheck.core.mutants import register_mutant
from cowcheck.reference.checkpoint import PendingCheckpoint
from cowcheck.reference.checkpoint.flink_format import FlinkPendingCheckpoint
from cowcheck.reference.keyed import HashMapStateBackend, KeyedStateBackend
from cowcheck.reference.keyed.backend import SnapshotFuture
from cowcheck.reference.keyed.descriptors import LIST, MAP, VALUE
from cowcheck.reference.keyed.states import HeapListState, HeapMapState, HeapValueState, TtlReduceFunction
from cowcheck.reference.keyed.ttl import ON_CREATE_AND_WRITE, expiration_timestamp
from cowcheck.reference.state_table import KeyGroupRange

__all__: list[str] = []


def _backend_mutant(name: str, description: str, expected: str, source: str = ""):
    """Register a keyed backend subclass as a machine="backend" mutant."""

    def decorate(backend_class: type) -> type:
        def factory():
            return HashMapStateBackend(capacity=4, backend_class=backend_class)

        factory.__name__ = factory.__qualname__ = backend_class.__name__
        register_mutant(name, description, expected, machine="backend", source=source)(factory)
        return backend_class

    return decorate


class _NullStoringValueState(HeapValueState):
    __slots__ = ()

    def update(self, value) -> None:
        self.update_internal(value)  # None is stored instead of removing the entry


@_backend_mutant("backend-null-update-stores-null", "ValueState.update(null) stores null instead of removing "
                 "the entry, so the key is still iterated (and a checkpoint cannot write it)", "K2 / K3 / K4 / K5 / K6 / K7",
                 source="ValueState.update javadoc")
class NullUpdateStoresNull(KeyedStateBackend):
    heap_states = {**KeyedStateBackend.heap_states, VALUE: _NullStoringValueState}


def _late(ttl_class: type) -> type:
    def is_expired(self, value) -> bool:
        return expiration_timestamp(value.timestamp, self.config.ttl) < self.clock.current_timestamp()

    return type(f"Late{ttl_class.__name__}", (ttl_class,), {"__slots__": (), "is_expired": is_expired})


@_backend_mutant("backend-ttl-expires-late", "a TTL state treats a value as expired only after timestamp + ttl, "
                 "not at it, so a read at the exact expiry still returns it", "K1 / K3 / K4 / K5 / K7")
class TtlExpiresLate(KeyedStateBackend):
    ttl_states = {kind: _late(cls) for kind, cls in KeyedStateBackend.ttl_states.items()}


@_backend_mutant("backend-ttl-read-does-not-refresh", "OnReadAndWrite states are built as OnCreateAndWrite: "
                 "reads never renew the timestamp, so read state expires early", "K1 / K3 / K4 / K5 / K7")
class TtlReadDoesNotRefresh(KeyedStateBackend):
    def _build_state(self, descriptor, table):
        if descriptor.ttl_config is not None:
            descriptor = _with_ttl(descriptor, attrs.evolve(descriptor.ttl_config, update_type=ON_CREATE_AND_WRITE))
        return super()._build_state(descriptor, table)


def _with_ttl(descriptor, config):
    import copy

    changed = copy.copy(descriptor)
    changed.ttl_config = config
    return changed


class _KeepsExpiredAccumulator(TtlReduceFunction):
    __slots__ = ()

    def __call__(self, accumulator, value):
        d = self.decorator
        if accumulator is None:
            return d.wrap(value.user_value)
        return d.wrap(self.reduce_function(accumulator.user_value, value.user_value))  # expired or not


@_backend_mutant("backend-reduce-keeps-expired", "a TTL reducing state adds to its accumulator even after it "
                 "has expired, instead of starting again from the value added", "K1 / K3 / K4 / K5 / K7 / K8")
class ReduceKeepsExpired(KeyedStateBackend):
    ttl_reduce_function = _KeepsExpiredAccumulator


class _EmptyListKeeper(HeapListState):
    __slots__ = ()

    def update(self, values) -> None:
        self.update_internal(list(values))  # an empty list is stored instead of removing the entry


@_backend_mutant("backend-list-update-empty-keeps-entry", "ListState.update([]) stores an empty list instead of "
                 "removing the entry, so the key is still iterated", "K2 / K3 / K4 / K5 / K7")
class ListUpdateEmptyKeepsEntry(KeyedStateBackend):
    heap_states = {**KeyedStateBackend.heap_states, LIST: _EmptyListKeeper}


class _EmptyMapKeeper(HeapMapState):
    __slots__ = ()

    def remove(self, user_key) -> None:
        entries = self.get_internal()
        if entries is not None:
            entries.pop(user_key, None)  # the entry stays when its map empties


@_backend_mutant("backend-map-remove-keeps-empty-map", "MapState.remove of the last user key leaves an empty map "
                 "in the table, so the key is still iterated", "K2 / K3 / K4 / K5 / K7")
class MapRemoveKeepsEmptyMap(KeyedStateBackend):
    heap_states = {**KeyedStateBackend.heap_states, MAP: _EmptyMapKeeper}


@_backend_mutant("backend-checkpoint-ignores-ttl-cleanup", "checkpoints write TTL states without their snapshot "
                 "transformer: entries that had expired when the checkpoint was taken are restored "
                 "(and iterated)", "K3 / K4 / K5 / K7")
class CheckpointIgnoresTtlCleanup(KeyedStateBackend):
    def snapshot_transformer(self, descriptor):
        return None


@_backend_mutant("backend-restore-range-end-exclusive", "restore treats the end of a key-group range as "
                 "exclusive when intersecting a handle with the target range, dropping its last key group",
                 "K3 / K4 / K5 / K7 / K8")
class RestoreRangeEndExclusive(KeyedStateBackend):
    @staticmethod
    def _restore_range(handle_range, target):
        start, end = max(handle_range.start, target.start), min(handle_range.end, target.end) - 1
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY


class _ReleasedAtSyncPoint(PendingCheckpoint):
    def __init__(self, backend, checkpoint_id, stream_factory, **options):
        super().__init__(backend, checkpoint_id, stream_factory, **options)
        for snapshot in self.table_snapshots.values():
            snapshot.release()  # "the references are taken, the maps may go on"

    def _write_state_in_key_group(self, state, snapshot, group, out):
        snapshot.map_snapshot(group).write_state(out, self.key_serializer, state.namespace_serializer,
                                                 state.state_serializer, state.transformer)


class _FlinkReleasedAtSyncPoint(_ReleasedAtSyncPoint, FlinkPendingCheckpoint):
    """The same bug in the writer of Flink's format (a backend with checkpoint_format="flink")."""


class _WritesWhenJoined(SnapshotFuture):
    """An asynchronous part that starts writing only when joined (a legal schedule: every step in
    between races it), which makes the race of the mutant below happen every time."""

    __slots__ = ()

    def start(self) -> None:
        self._begin()

    @property
    def done(self) -> bool:
        return self._started

    def get(self, timeout=None):
        if self._handle is None and self._error is None:
            self._write()
        return super().get(timeout)


@_backend_mutant("backend-release-at-sync-point", "the map snapshots are released at the synchronous part, so "
                 "copy-on-write stops before the asynchronous part has written them (which runs when joined: "
                 "every step in between races it); caught only when a step races an asynchronous part", "K5 / K7")
class ReleaseAtSyncPoint(KeyedStateBackend):
    pending_class = _ReleasedAtSyncPoint
    flink_pending_class = _FlinkReleasedAtSyncPoint
    future_class = _WritesWhenJoined
