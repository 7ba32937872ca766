"""Apache Flink 2.3.0's own CopyOnWriteStateMap behind the docs/contract.md §15 API (``--impl flink``).

The real Java class runs in-process through JPype (:mod:`cowcheck.flink.jvm`);
our helper ``MapHandle.java`` drives it call by call.

>>> m = FlinkStateMap()                      # doctest: +SKIP
>>> m.put("k", 0, [1]); s = m.snapshot()     # doctest: +SKIP
>>> m.get("k", 0).append(2)                  # doctest: +SKIP
>>> list(s), m.get("k", 0)                   # doctest: +SKIP
([('k', 0, [1])], [1, 2])

State identity (the harness checks ``is``): every Java state object that
reaches Python gets an id (Java side, by identity, never reused) and exactly
one Python *twin* list. The same Java object therefore always comes back as
the same Python object, and a fresh Java copy (made by Flink's serializer) as
a fresh Python list. A list handed to ``put`` becomes the twin of the new Java
list made from it, so ``get`` returns the caller's very object. Python owns
the content: callers mutate twins in place (``m.get(k, n).append(1)``), and
the map reads a state's content only through its serializer, so the helper's
serializer asks Python for the twin's current content right before every
``copy`` and ``serialize`` (one callback per copy). Twins of states that
neither the map nor a snapshot still held by Python can reach are forgotten
from time to time (``prune``), on both sides. States are ``None`` or lists
of int32 (Flink's ``ListSerializer(IntSerializer)``, whose ``copy`` makes a
new list, so copy-on-write is visible; ``state_copier`` is not used: Flink
copies with its serializer, which for these states equals ``copy.deepcopy``).

Keys and namespaces reach Flink as a Java caller would hand them
(:class:`~cowcheck.flink.convert.JavaKeys`): a Python object the map has not
seen becomes a new Java object (Flink's keys are always fresh, deserialized
ones), a Python object seen again the same Java object (a caller holding its
keys); values CPython keeps one object of (small ints, ``""`` and one Latin-1
character) one Java object per value.

White box: ``introspect()`` returns a :class:`FlinkView` built by reflection
(tables, sizes, rehash index, versions, threshold, mod count, entries with
their versions and hash). Every Java entry has one :class:`EntryMirror`,
updated in place at each ``introspect()``, so entry identity holds across
views, as ``cowcheck.reference.invariants.SnapshotGuard`` (I8/I9) needs.

Capacity: Flink's map always starts at 128 (``DEFAULT_CAPACITY``; the sized
constructor is private), so the factory accepts ``capacity=128`` only.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any, Callable, Iterator

import attrs

from cowcheck.core.errors import UsageError
from cowcheck.flink.convert import JavaKeys, Reader, answer, int_array, ints, translate
from cowcheck.flink.jvm import Java, jvm
from cowcheck.reference.errors import ConcurrentModificationError, ForeignSnapshotError
from cowcheck.reference.snapshot import SnapshotView

__all__ = ["FLINK_CAPACITY", "FlinkCapacityError", "FlinkStateMap", "FlinkSnapshot", "FlinkView", "EntryMirror"]

FLINK_CAPACITY = 128
_PRUNE_AT_LEAST = 4096


class FlinkCapacityError(UsageError, ValueError):
    """A capacity other than 128 for Flink's map (a bad argument: exit 2 on the command line)."""

    def __init__(self, capacity: Any) -> None:
        super().__init__(
            f"Flink's CopyOnWriteStateMap always starts with capacity {FLINK_CAPACITY} (DEFAULT_CAPACITY; its "
            f"sized constructor is private), got capacity={capacity!r}: use --capacity {FLINK_CAPACITY}")
        self.capacity = capacity


_PYTHON_SIDE: list = []


def _python_side():
    """The JPype class implementing PythonSide.java (made once the JVM runs)."""
    if not _PYTHON_SIDE:
        _PYTHON_SIDE.append(_python_side_class(Java.jpype))
    return _PYTHON_SIDE[0]


def _python_side_class(jpype):
    @jpype.JImplements("cowcheck.bridge.PythonSide")
    class PythonSide:
        """Callbacks of one map; a weak reference, so Java does not keep the map alive."""

        def __init__(self, owner) -> None:
            self.owner = weakref.ref(owner)

        @jpype.JOverride
        def twinContent(self, state_id):
            return int_array(self.owner()._twins[state_id])

        @jpype.JOverride
        def transform(self, previous_code):
            return self.owner()._run_pending(previous_code)

        @jpype.JOverride
        def filterOrTransform(self, state_code):
            return self.owner()._run_pending(state_code)

    return PythonSide



# ------------------------------------------------------------------- mirror


class EntryMirror:
    """A Python view of one Flink ``StateMapEntry``: one object per Java entry,
    updated in place by every ``introspect()`` (so ``is`` compares entries)."""

    __slots__ = ("key", "namespace", "state", "hash", "next", "entry_version", "state_version")

    def __init__(self, key, namespace) -> None:
        self.key = key
        self.namespace = namespace
        self.state = None
        self.hash = 0
        self.next = None
        self.entry_version = 0
        self.state_version = 0

    def __repr__(self) -> str:
        return (f"EntryMirror({self.key!r}, {self.namespace!r}, {self.state!r}, hash={self.hash}, "
                f"ev={self.entry_version}, sv={self.state_version})")


@attrs.define
class FlinkView:
    """The white-box view of ``cowcheck.reference.invariants`` for a Flink map, read by
    reflection at one moment (``introspect()``); tables hold EntryMirrors."""

    primary_table: list
    incremental_rehash_table: list
    is_rehashing: bool
    primary_table_size: int
    incremental_rehash_table_size: int
    rehash_index: int
    threshold: int
    mod_count: int
    state_map_version: int
    highest_required_snapshot_version: int
    snapshot_versions: set


# --------------------------------------------------------------------- map


class FlinkStateMap:
    """Flink 2.3.0's ``CopyOnWriteStateMap`` speaking docs/contract.md §15; see the module docstring.

    ``capacity`` must be 128 (FlinkCapacityError otherwise); ``state_copier`` is
    accepted for the factory protocol and unused (Flink copies with its serializer);
    ``corruption``: a seeded Java-side corruption (``cowcheck.flink.corruptions``).
    """

    def __init__(self, capacity: int = FLINK_CAPACITY, state_copier: Callable[[Any], Any] = copy.deepcopy,
                 corruption: str = "") -> None:
        if capacity != FLINK_CAPACITY or type(capacity) is not int:
            raise FlinkCapacityError(capacity)
        jvm()
        self._callbacks = _python_side()(self)
        self._handle = Java.MapHandle(self._callbacks, corruption)
        self._keys = JavaKeys()  # the Java object for each key and namespace the caller hands the map
        self._twins: dict[int, list] = {}  # state id -> the Python list that is its twin
        self._ids: dict[int, int] = {}  # id(twin) -> state id
        self._mirrors: dict[int, EntryMirror] = {}  # entry id -> mirror
        self._snapshots: weakref.WeakSet = weakref.WeakSet()  # snapshots Python still holds
        self._cursors: weakref.WeakSet = weakref.WeakSet()  # unfinished iterators and visitors
        self._prune_at = _PRUNE_AT_LEAST
        # The transform function or snapshot transformer of the Java call running now; an
        # exception it raises comes back through Java unchanged (JPype).
        self._pending: Callable | None = None

    # ------------------------------------------------------------- twins

    def _twin(self, code: int):
        """The Python object for a state code (see PythonSide.java)."""
        if code > 0:
            return self._twins[code]
        if code == 0:
            return None
        state_id = -code
        twin = ints(self._handle.content(state_id))
        self._twins[state_id] = twin
        self._ids[id(twin)] = state_id
        return twin

    def _state_id(self, state) -> int:
        """The Java state for a Python state: its own if it is a twin, else a new one."""
        if state is None:
            return 0
        state_id = self._ids.get(id(state))
        if state_id is not None:
            return state_id
        state_id = self._handle.adopt(int_array(state))
        self._twins[state_id] = state
        self._ids[id(state)] = state_id
        return state_id

    def _maybe_prune(self) -> None:
        """Forget twins and mirrors nothing can reach any more (between operations only,
        and not while an iterator is open: it may still return what it read ahead)."""
        if len(self._twins) + len(self._mirrors) < self._prune_at or len(self._cursors):
            return
        held = Java.object_array([s._snapshot for s in self._snapshots])
        dropped_states, dropped_entries = self._handle.prune(held)
        for state_id in ints(dropped_states):
            del self._ids[id(self._twins.pop(state_id))]
        for entry_id in ints(dropped_entries):
            self._mirrors.pop(entry_id, None)
        self._prune_at = max(_PRUNE_AT_LEAST, 2 * (len(self._twins) + len(self._mirrors)))

    # -------------------------------------------------------- keyed ops

    def get(self, key, namespace):
        self._maybe_prune()
        try:
            code = self._handle.get(self._keys(key), self._keys(namespace))
        except Java.JException as exc:
            raise translate(exc) from None
        return self._twin(code) if code else None

    def contains_key(self, key, namespace) -> bool:
        try:
            return bool(self._handle.containsKey(self._keys(key), self._keys(namespace)))
        except Java.JException as exc:
            raise translate(exc) from None

    def put(self, key, namespace, state) -> None:
        self._maybe_prune()
        state_id = self._state_id(state)
        try:
            self._handle.put(self._keys(key), self._keys(namespace), state_id)
        except Java.JException as exc:
            raise translate(exc) from None

    def put_and_get_old(self, key, namespace, state):
        self._maybe_prune()
        state_id = self._state_id(state)
        try:
            code = self._handle.putAndGetOld(self._keys(key), self._keys(namespace), state_id)
        except Java.JException as exc:
            raise translate(exc) from None
        return self._twin(code)

    def remove(self, key, namespace) -> None:
        try:
            self._handle.remove(self._keys(key), self._keys(namespace))
        except Java.JException as exc:
            raise translate(exc) from None

    def remove_and_get_old(self, key, namespace):
        try:
            code = self._handle.removeAndGetOld(self._keys(key), self._keys(namespace))
        except Java.JException as exc:
            raise translate(exc) from None
        return self._twin(code)

    def transform(self, key, namespace, value, fn: Callable[[Any, Any], Any]) -> None:
        """Flink's transform with a Java StateTransformationFunction that calls ``fn(old, value)``."""
        self._maybe_prune()
        self._pending = lambda old: fn(old, value)
        try:
            self._handle.transform(self._keys(key), self._keys(namespace))
        except Java.JException as exc:
            raise translate(exc) from None
        finally:
            self._pending = None

    def _run_pending(self, state_code: int) -> int:
        """PythonSide.transform / filterOrTransform: the pending function on a state."""
        return self._state_id(self._pending(self._twin(state_code)))

    def __len__(self) -> int:
        return int(self._handle.size())

    def is_empty(self) -> bool:
        return len(self) == 0

    # -------------------------------------------------------- iteration

    def _row(self, row) -> tuple:
        key, namespace, code = row
        return key, namespace, self._twin(code)

    def __iter__(self) -> Iterator[tuple]:
        """Flink's fail-fast StateEntryIterator, one entry per call."""
        return _LiveIterator(self)

    def keys(self, namespace) -> Iterator:
        """Flink's ``getKeys(namespace)``, lazily."""
        return _KeyIterator(self, namespace)

    def size_of_namespace(self, namespace) -> int:
        try:
            return int(self._handle.sizeOfNamespace(self._keys(namespace)))
        except Java.JException as exc:
            raise translate(exc) from None

    def incremental_visitor(self, recommended_max_records: int) -> "_Visitor":
        """Flink's StateIncrementalVisitorImpl (TTL cleanup)."""
        return _Visitor(self, recommended_max_records)

    # -------------------------------------------------------- snapshots

    def snapshot(self) -> "FlinkSnapshot":
        """Flink's ``stateSnapshot()``; release it when done."""
        self._maybe_prune()
        return FlinkSnapshot(self, self._handle.snapshot())

    # -------------------------------------------------------- white box

    def _entry_records(self, reader: Reader) -> None:
        """Update the mirrors from entry records (see MapHandle.entryRecords)."""
        mirrors = self._mirrors
        raw, key = reader.raw, reader.key
        records = []
        for _ in range(raw()):
            code = raw()
            if code < 0:
                mirror = mirrors[-code] = EntryMirror(key(), key())
            else:
                mirror = mirrors[code]
            records.append((mirror, raw(), raw(), raw(), raw(), raw()))
        twin = self._twin
        for mirror, next_id, state_code, entry_version, state_version, h in records:
            mirror.next = mirrors[next_id] if next_id else None
            mirror.state = twin(state_code) if state_code else None
            mirror.entry_version = entry_version
            mirror.state_version = state_version
            mirror.hash = h

    def _heads(self, reader: Reader) -> list:
        mirrors = self._mirrors
        return [mirrors[i] if i else None for i in (reader.raw() for _ in range(reader.raw()))]

    def introspect(self) -> FlinkView:
        """The white-box view (reflection): every mirror reachable from the tables
        or an unreleased snapshot is brought up to date."""
        reader = Reader(self._handle.introspect())
        raw = reader.raw
        _, _, psize, rsize, rehash_index, threshold, mod_count, version, required = (raw() for _ in range(9))
        rehashing = raw() == 1
        versions = {raw() for _ in range(raw())}
        self._entry_records(reader)
        primary = self._heads(reader)
        rehash = self._heads(reader)
        return FlinkView(primary, rehash, rehashing, psize, rsize, rehash_index, threshold, mod_count, version,
                         required, versions)

    def __repr__(self) -> str:
        return f"FlinkStateMap(size={len(self)})"


class _LiveIterator:
    __slots__ = ("map", "iterator", "done", "__weakref__")

    def __init__(self, m: FlinkStateMap) -> None:
        self.map = m
        self.iterator = m._handle.iterator()  # reads the first entry ahead, as Flink does
        self.done = False
        m._cursors.add(self)

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        if self.done:
            raise StopIteration
        m = self.map
        try:
            encoded = m._handle.next(self.iterator)
        except Java.CME:
            expected, actual = ints(m._handle.modCounts(self.iterator))
            raise ConcurrentModificationError(expected, actual) from None
        except Java.JException as exc:
            raise translate(exc) from None
        if encoded is None:
            self.done = True
            m._cursors.discard(self)
            raise StopIteration
        return m._row(answer(encoded))


class _KeyIterator:
    __slots__ = ("map", "iterator", "done", "__weakref__")

    def __init__(self, m: FlinkStateMap, namespace) -> None:
        self.map = m
        self.iterator = m._handle.keys(m._keys(namespace))
        self.done = False
        m._cursors.add(self)

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        try:
            encoded = self.map._handle.nextKey(self.iterator)
        except Java.JException as exc:
            raise translate(exc) from None
        if encoded is None:
            self.done = True
            self.map._cursors.discard(self)
            raise StopIteration
        return answer(encoded)[0]


class _Visitor:
    """``has_next()``, ``next_entries()`` (one chain of ``(key, namespace, state)``),
    ``remove(entry)``, ``update(entry, new_state)``."""

    __slots__ = ("map", "visitor", "__weakref__")

    def __init__(self, m: FlinkStateMap, recommended_max_records: int) -> None:
        self.map = m
        self.visitor = m._handle.visitor(recommended_max_records)
        m._cursors.add(self)

    def has_next(self) -> bool:
        more = bool(self.visitor.hasNext())
        if not more:
            self.map._cursors.discard(self)
        return more

    def next_entries(self) -> list:
        try:
            rows = answer(self.map._handle.nextEntries(self.visitor))
        except Java.JException as exc:
            raise translate(exc) from None
        return [self.map._row(r) for r in rows]

    def remove(self, entry: tuple) -> None:
        try:
            self.map._handle.visitorRemove(self.visitor, self.map._keys(entry[0]), self.map._keys(entry[1]))
        except Java.JException as exc:
            raise translate(exc) from None

    def update(self, entry: tuple, new_state) -> None:
        state_id = self.map._state_id(new_state)
        try:
            self.map._handle.visitorUpdate(self.visitor, self.map._keys(entry[0]), self.map._keys(entry[1]), state_id)
        except Java.JException as exc:
            raise translate(exc) from None


class FlinkSnapshot:
    """Flink's ``CopyOnWriteStateMapSnapshot`` (docs/contract.md §15 snapshot API plus the
    white-box ``entry_objects()`` and ``snapshot_data``)."""

    __slots__ = ("owner", "_snapshot", "version", "entry_count", "__weakref__")

    def __init__(self, owner: FlinkStateMap, java_snapshot) -> None:
        self.owner = owner
        self._snapshot = java_snapshot
        self.version, self.entry_count = ints(owner._handle.snapshotInfo(java_snapshot))
        owner._snapshots.add(self)

    def __len__(self) -> int:
        return self.entry_count

    @property
    def released(self) -> bool:
        return bool(self._snapshot.isReleased())

    def release(self) -> None:
        """Flink's ``release()``: idempotent."""
        try:
            self.owner._handle.release(self._snapshot)
        except Java.JException as exc:
            error = translate(exc)
            if isinstance(error, ValueError) and "different state map" in str(error):
                raise ForeignSnapshotError(self.version) from None
            raise error from None

    def is_owner(self, m) -> bool:
        return m is self.owner

    def __iter__(self) -> Iterator[tuple]:
        m = self.owner
        return iter([m._row(r) for r in answer(m._handle.read(self._snapshot))])

    def iterate(self, transformer: Callable[[Any], Any] | None = None) -> SnapshotView:
        """Flink's snapshot iterator; with a transformer, its TransformedSnapshotIterator
        (which rewrites the snapshot's array: the snapshot's last use)."""
        if transformer is None:
            return SnapshotView(self.entry_count, list(self))
        m = self.owner
        m._pending = transformer
        try:
            size, rows = answer(m._handle.readTransformed(self._snapshot))
        except Java.JException as exc:
            raise translate(exc) from None
        finally:
            m._pending = None
        return SnapshotView(size, [m._row(r) for r in rows])

    def write_state(self, out, key_serializer, namespace_serializer, state_serializer,
                    transformer: Callable[[Any], Any] | None = None) -> None:
        """Flink's ``writeState`` with Flink's serializers of the same ids as the
        given ``cowcheck.reference.serializers`` (states: ``list<int>`` only)."""
        state_id = getattr(state_serializer, "serializer_id", None)
        if state_id != "list<int>":
            raise ValueError(f"Flink bridge: states are written with ListSerializer(IntSerializer) "
                             f"('list<int>'), got {state_id!r}")
        if transformer is not None:
            raise ValueError("Flink bridge: write_state with a transformer is not supported")
        try:
            data = self.owner._handle.writeState(self._snapshot, key_serializer.serializer_id,
                                                 namespace_serializer.serializer_id)
        except Java.JException as exc:
            raise translate(exc) from None
        out.write(bytes(data))

    def _heads(self) -> list:
        m = self.owner
        reader = Reader(m._handle.snapshotEntries(self._snapshot))
        m._entry_records(reader)
        return m._heads(reader)

    @property
    def snapshot_data(self) -> list:
        """The snapshot's array of bucket heads, as entry mirrors."""
        return self._heads()

    def entry_objects(self) -> Iterator[EntryMirror]:
        """Entry mirrors of the (untransformed) snapshot in Flink's order (white-box)."""
        out = []
        for head in self._heads():
            e = head
            while e is not None:
                out.append(e)
                e = e.next
        return iter(out)

    def __repr__(self) -> str:
        return f"FlinkSnapshot(version={self.version}, entries={self.entry_count}, released={self.released})"
