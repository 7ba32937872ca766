"""The keyed state backend at the state level (Flink ``HeapKeyedStateBackend`` as an operator uses it).

Contract: a :class:`KeyedStateBackend` owns a key-group range of a job with
``max_parallelism`` key groups and a key serializer. An operator sets the
current key (``set_current_key``), gets its states through descriptors
(``get_or_create_keyed_state(namespace_serializer, descriptor)``), sets each
state's current namespace and reads or writes it; ``get_keys(name,
namespace)`` iterates the keys holding an entry of a state in a namespace.
States with time-to-live read the backend's clock (:class:`~cowcheck.reference.keyed.ttl.ManualClock`).

``snapshot(checkpoint_id, stream_factory)`` is the synchronous part of a
checkpoint (every table's snapshot, references only); the returned
:class:`SnapshotFuture` is its asynchronous part, run on the calling thread
(``run``) or on a thread of its own (``start``, then ``get``) while the task
thread keeps changing state: copy-on-write keeps the snapshot as it was. A
checkpoint writes each state through its snapshot transformer (TTL: what
has expired by then is left out). :class:`HashMapStateBackend` builds keyed
backends, fresh or restored from checkpoint handles into any key-group range
(one handle, a part of one, several merged: rescaling).

The byte layout of a checkpoint is the project's own (docs/checkpoint-format.md),
written by :class:`~cowcheck.reference.checkpoint.PendingCheckpoint`, or Flink's
(``checkpoint_format="flink"``: :mod:`cowcheck.reference.checkpoint.flink_format`, which
real Flink restores); a restore reads either, by the handles it is given.

Maintenance notes:

1. A state already in the backend under a descriptor's name (a restored one)
   is held to the serializer the descriptor gives (:mod:`cowcheck.reference.keyed.migration`):
   compatible as is, it stays; compatible after migration (a POJO's fields
   added or removed, time-to-live switched), every value is converted when the
   descriptor is registered; anything else is an error (Flink:
   ``StateMigrationException``), never a silent reinterpretation.
2. A restored state gets its snapshot transformer when its descriptor is
   registered again, as in Flink: until then checkpoints write it as it is.

>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.keyed import ValueStateDescriptor, StateTtlConfig
>>> backend = HashMapStateBackend(clock=ManualClock(1000))
>>> kb = backend.create_keyed_state_backend(IntSerializer(), 8, KeyGroupRange(0, 7))
>>> d = ValueStateDescriptor("count", IntSerializer()); d.enable_time_to_live(StateTtlConfig(ttl=10))
>>> s = kb.get_or_create_keyed_state(IntSerializer(), d)
>>> kb.set_current_key(42); s.set_current_namespace(0); s.update(7)
>>> future = kb.snapshot(1); s.update(8)          # the synchronous part, then the task moves on
>>> handle = future.run()                          # the asynchronous part writes the snapshot
>>> restored = backend.create_keyed_state_backend(IntSerializer(), 8, KeyGroupRange(0, 7), [handle])
>>> r = restored.get_or_create_keyed_state(IntSerializer(), d); restored.set_current_key(42)
>>> r.set_current_namespace(0); r.value()
7
>>> backend.clock.advance(10); r.value() is None   # expired
True
"""

from __future__ import annotations

import threading
from typing import Iterable, Iterator, Optional

import attrs

from cowcheck.reference.checkpoint.backend import HeapKeyedStateBackend
from cowcheck.reference.checkpoint.handle import CheckpointHandle
from cowcheck.reference.checkpoint.snapshot import PendingCheckpoint
from cowcheck.reference.checkpoint.streams import CheckpointStreamFactory
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.keyed.descriptors import LIST, MAP, REDUCING, VALUE, StateDescriptor
from cowcheck.reference.keyed.migration import AFTER_MIGRATION, INCOMPATIBLE, compatibility, migrate
from cowcheck.reference.keyed.states import (HeapListState, HeapMapState, HeapReducingState, HeapValueState, TtlListState,
                                    TtlMapState, TtlReduceFunction, TtlReducingState, TtlValueState)
from cowcheck.reference.keyed.ttl import ManualClock, snapshot_transformer
from cowcheck.reference.layout import DEFAULT_CAPACITY
from cowcheck.reference.state_table import DEFAULT_MAX_PARALLELISM, KeyGroupRange

__all__ = ["KeyedStateBackend", "HashMapStateBackend", "SnapshotFuture", "StateMigrationError"]


class StateMigrationError(ValueError):
    """A descriptor whose serializers differ from those of the state already registered under
    its name (Flink ``StateMigrationException``); ``.name``, ``.registered``, ``.requested``."""

    def __init__(self, name: str, registered: str, requested: str) -> None:
        super().__init__(f"state {name!r} is registered with serializers {registered}; the descriptor asks for "
                         f"{requested} (no migration between them)")
        self.name = name
        self.registered = registered
        self.requested = requested


class SnapshotFuture:
    """The asynchronous part of one checkpoint (Flink's ``RunnableFuture<SnapshotResult>``).

    ``run()`` writes it on the calling thread and returns the handle; ``start()``
    writes it on a thread of its own, and ``get(timeout)`` waits for it (the
    handle, or the exception the write raised; TimeoutError if it is still
    running). Either may be called once."""

    __slots__ = ("pending", "_thread", "_handle", "_error", "_started")

    def __init__(self, pending: PendingCheckpoint) -> None:
        self.pending = pending
        self._thread: Optional[threading.Thread] = None
        self._handle: Optional[CheckpointHandle] = None
        self._error: Optional[BaseException] = None
        self._started = False

    @property
    def checkpoint_id(self) -> int:
        return self.pending.checkpoint_id

    def _begin(self) -> None:
        if self._started:
            raise IllegalStateError(f"the asynchronous part of checkpoint {self.checkpoint_id} was already started")
        self._started = True

    def _write(self) -> None:
        try:
            self._handle = self.pending.complete()
        except BaseException as exc:  # kept for get(): the task thread decides what it means
            self._error = exc

    def run(self) -> CheckpointHandle:
        self._begin()
        self._write()
        return self.get()

    def start(self) -> None:
        self._begin()
        self._thread = threading.Thread(target=self._write, name=f"async-checkpoint-{self.checkpoint_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._started and (self._thread is None or not self._thread.is_alive())

    def get(self, timeout: Optional[float] = None) -> CheckpointHandle:
        if not self._started:
            raise IllegalStateError(f"the asynchronous part of checkpoint {self.checkpoint_id} never started")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the asynchronous part of checkpoint {self.checkpoint_id} is still running "
                                   f"after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._handle

    def __repr__(self) -> str:
        return f"SnapshotFuture({self.pending!r})"


_HEAP_STATES = {VALUE: HeapValueState, LIST: HeapListState, MAP: HeapMapState}
_TTL_STATES = {VALUE: TtlValueState, LIST: TtlListState, MAP: TtlMapState, REDUCING: TtlReducingState}


class KeyedStateBackend(HeapKeyedStateBackend):
    """See the module docstring. ``clock``: the time states with TTL read (a fresh
    :class:`ManualClock` at 0 if not given).

    Seams for seeded bugs: ``heap_states`` and ``ttl_states`` (kind -> state class),
    ``ttl_reduce_function``, ``future_class`` (the asynchronous part), ``pending_class``
    (the checkpoint writer), ``savepoint_class``, ``stream_input``, :meth:`snapshot_transformer`,
    :meth:`state_compatibility` and :meth:`_migrate`.
    """

    heap_states = _HEAP_STATES
    ttl_states = _TTL_STATES
    ttl_reduce_function = TtlReduceFunction
    future_class = SnapshotFuture

    def __init__(self, key_group_range: Optional[KeyGroupRange] = None,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, key_serializer=None,
                 capacity: int = DEFAULT_CAPACITY, stream_factory: Optional[CheckpointStreamFactory] = None,
                 clock: Optional[ManualClock] = None, checkpoint_format: str = "cowcheck") -> None:
        super().__init__(key_group_range, max_parallelism, key_serializer=key_serializer, capacity=capacity,
                         stream_factory=stream_factory, checkpoint_format=checkpoint_format)
        self.clock = clock if clock is not None else ManualClock()
        self.current_key = None
        self._created: dict = {}  # name -> (descriptor kind, the state object handed out)

    # ------------------------------------------------------- the key context

    def set_current_key(self, key) -> None:
        """The key every state reads and writes until the next call (its key group must be owned:
        a state access with a key outside the range raises KeyGroupOutOfRangeError)."""
        if key is None:
            raise TypeError("set_current_key: null key (Flink: 'Assigned key must not be null!')")
        self.current_key = key

    def get_current_key(self):
        return self.current_key

    # ------------------------------------------------------- states

    def get_or_create_keyed_state(self, namespace_serializer, descriptor: StateDescriptor):
        """The state ``descriptor`` names, created on first use (or taken over from a restore,
        maintenance note 1); the same object for every later call with that name."""
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a StateDescriptor, got {type(descriptor).__name__}")
        created = self._created.get(descriptor.name)
        if created is not None:
            kind, state = created
            if kind != descriptor.kind:
                raise ValueError(f"state {descriptor.name!r} is a {kind} state, not a {descriptor.kind} state")
            return state
        state_serializer = descriptor.state_serializer()
        transformer = self.snapshot_transformer(descriptor)
        if descriptor.name in self.state_names:
            registered = self.registered_state(descriptor.name)
            have = (registered.namespace_serializer.serializer_id, registered.state_serializer.serializer_id)
            want = (namespace_serializer.serializer_id, state_serializer.serializer_id)
            outcome = self.state_compatibility(registered.state_serializer, state_serializer)
            if have[0] != want[0] or outcome == INCOMPATIBLE:
                raise StateMigrationError(descriptor.name, " / ".join(have), " / ".join(want))
            if outcome == AFTER_MIGRATION:
                self._migrate(registered, state_serializer)
            self._states[descriptor.name] = attrs.evolve(registered, transformer=transformer, kind=descriptor.kind,
                                                         state_serializer=state_serializer)
        else:
            self.register_state(descriptor.name, namespace_serializer, state_serializer, transformer=transformer,
                                kind=descriptor.kind)
        state = self._build_state(descriptor, self.state(descriptor.name))
        self._created[descriptor.name] = (descriptor.kind, state)
        return state

    def state_compatibility(self, old, new) -> str:
        """Whether a state written with ``old`` may be read on with ``new`` (migration.compatibility)."""
        return compatibility(old, new)

    def _migrate(self, registered, state_serializer) -> None:
        """Every value of a restored state converted to what ``state_serializer`` holds (maintenance
        note 1), and its table copying with it."""
        old, now, table = registered.state_serializer, self.clock.current_timestamp(), registered.table
        for key, namespace, value in list(table):
            table.put(key, namespace, migrate(value, old, state_serializer, now))
        table.set_meta_info(state_serializer.copy)

    def snapshot_transformer(self, descriptor: StateDescriptor):
        """What checkpoints apply to the state's entries as they write them: a state with TTL
        drops what has expired (cleanup in full snapshots); None for one without."""
        ttl = descriptor.ttl_config
        return snapshot_transformer(descriptor.kind, ttl, self.clock) if ttl is not None else None

    def _build_state(self, descriptor: StateDescriptor, table):
        ttl = descriptor.ttl_config
        if descriptor.kind == REDUCING:
            if ttl is None:
                return HeapReducingState(self, table, descriptor.reduce_function)
            heap = HeapReducingState(self, table, None)
            decorated = self.ttl_states[REDUCING](heap, ttl, self.clock)
            heap.reduce_function = self.ttl_reduce_function(decorated, descriptor.reduce_function)
            return decorated
        heap = self.heap_states[descriptor.kind](self, table)
        return heap if ttl is None else self.ttl_states[descriptor.kind](heap, ttl, self.clock)

    def get_partitioned_state(self, namespace, namespace_serializer, descriptor: StateDescriptor):
        """``get_or_create_keyed_state`` with its current namespace set to ``namespace``."""
        state = self.get_or_create_keyed_state(namespace_serializer, descriptor)
        state.set_current_namespace(namespace)
        return state

    def get_keys(self, name: str, namespace) -> Iterator:
        """The keys with an entry of state ``name`` in ``namespace`` (expired ones a read has not
        cleared yet included: iteration reads no state). Empty for a name never registered."""
        if name not in self.state_names:
            return iter(())
        return iter(list(self.state(name).keys(namespace)))

    # ------------------------------------------------------- checkpoints

    def snapshot(self, checkpoint_id: int, stream_factory: Optional[CheckpointStreamFactory] = None, *,
                 compressed: bool = False) -> SnapshotFuture:
        """The synchronous part of checkpoint ``checkpoint_id``; run or start the result. ``compressed``:
        snapshot compression (Flink's ``setUseSnapshotCompression``: snappy key groups, in Flink's format)."""
        return self.future_class(self.checkpoint(checkpoint_id, stream_factory, compressed=compressed))

    def savepoint(self, checkpoint_id: int, stream_factory: Optional[CheckpointStreamFactory] = None,
                  canonical: bool = True, *, compressed: bool = False) -> SnapshotFuture:
        """The synchronous part of a savepoint; run or start the result. ``canonical``: Flink's
        backend-independent format (a ``KeyGroupsSavepointStateHandle``, restored by the savepoint
        reader); else a native savepoint, which a heap backend writes as its checkpoints (Flink's
        ``HeapSnapshotStrategy`` under savepoint options: the same bytes and handle). ``compressed``:
        snapshot compression, which Flink applies to both forms (snappy key groups)."""
        if not canonical:
            return self.snapshot(checkpoint_id, stream_factory, compressed=compressed)
        return self.future_class(self.canonical_savepoint(checkpoint_id, stream_factory, compressed=compressed))


class HashMapStateBackend:
    """Builds keyed backends (Flink ``HashMapStateBackend.createKeyedStateBackend``), all
    reading one ``clock``; ``capacity``: of every map of their tables (Flink: 128);
    ``checkpoint_format``: what their checkpoints are written in (``cowcheck`` or ``flink``)."""

    def __init__(self, *, clock: Optional[ManualClock] = None, capacity: int = DEFAULT_CAPACITY,
                 backend_class: type = KeyedStateBackend, checkpoint_format: str = "cowcheck") -> None:
        self.clock = clock if clock is not None else ManualClock()
        self.capacity = capacity
        self.backend_class = backend_class
        self.checkpoint_format = checkpoint_format

    def create_keyed_state_backend(self, key_serializer, max_parallelism: int, key_group_range: KeyGroupRange,
                                   state_handles: Iterable = (), class_version: int = 1) -> KeyedStateBackend:
        """A backend owning ``key_group_range``: empty, or holding what ``state_handles`` hold of
        those key groups (their key serializer must be ``key_serializer``'s): CheckpointHandle
        objects (the project's format) or KeyGroupsStateHandle ones (Flink's).
        ``class_version``: which version of its classes the job runs with (Flink: the user code
        class loader a restore resolves a snapshot's classes with); the reference names classes
        and reads their fields from the snapshot, so it needs none."""
        handles = list(state_handles)
        if not handles:
            return self.backend_class(key_group_range, max_parallelism, key_serializer=key_serializer,
                                      capacity=self.capacity, clock=self.clock,
                                      checkpoint_format=self.checkpoint_format)
        restored = self.backend_class.restore(handles, key_group_range, max_parallelism=max_parallelism,
                                              capacity=self.capacity, clock=self.clock,
                                              checkpoint_format=self.checkpoint_format)
        if restored.key_serializer.serializer_id != key_serializer.serializer_id:
            raise StateMigrationError("(key)", restored.key_serializer.serializer_id, key_serializer.serializer_id)
        if restored.max_parallelism != max_parallelism:
            raise ValueError(f"the handles were written with max_parallelism {restored.max_parallelism}, "
                             f"not {max_parallelism}")
        return restored
