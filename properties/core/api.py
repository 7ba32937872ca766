"""The map API every implementation under test speaks, as ``typing.Protocol`` classes.

The suite drives any map through these calls: the reference port, the model,
the seeded mutants, a user's map (``--impl MODULE:FACTORY``) and Flink's own
class through the bridge. Each method's docstring is its promise in short;
the long form, and the codes that hold an implementation to it, are
docs/contract.md §15 (the calls), §6 (snapshots and the identity rule) and §7
(live iteration). The protocols are ``runtime_checkable``, so
``isinstance(m, StateMap)`` tells whether an object offers every call (not
whether it keeps the promises: that is what the suite checks).

``write_state`` (:class:`WritesState`), ``incremental_visitor``
(:class:`HasIncrementalVisitor`) and ``introspect`` (docs/introspection.md)
are optional: a map without them is not asked for them, or is checked
black-box.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> m = CopyOnWriteStateMap(capacity=4)
>>> isinstance(m, StateMap), isinstance(m.snapshot(), StateMapSnapshot)
(True, True)
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, Iterable, Iterator, Protocol, runtime_checkable

__all__ = ["StateMap", "StateMapSnapshot", "SnapshotView", "WritesState", "IncrementalVisitor",
           "HasIncrementalVisitor", "StateMapFactory"]

Entry = tuple  # (key, namespace, state): entries compare as plain tuples


@runtime_checkable
class SnapshotView(Protocol):
    """What ``snapshot.iterate(transformer)`` returns: its entries and their count."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Entry]: ...


@runtime_checkable
class StateMapSnapshot(Protocol):
    """A read-only view of a map at one version (contract §6; P2, P3, P4, P5).

    ``version``: the n-th snapshot of a map has version n (P5); an attribute or
    a method. ``released``: False until :meth:`release`, True after it (P3); an
    attribute, a property or a method. Both are observations the suite compares
    with its model, never reasons to skip a check."""

    version: Any
    released: Any

    def __len__(self) -> int:
        """The number of entries the map held when the snapshot was taken (P4)."""

    def __iter__(self) -> Iterator[Entry]:
        """The entries the map held when the snapshot was taken, whatever happened since (P2)."""

    def iterate(self, transformer: Callable[[Any], Any] | None = None) -> SnapshotView:
        """The entries for which ``transformer(state)`` is not None, with its result as their
        state (all of them for None). The snapshot's last use: the suite releases it right after."""

    def release(self) -> None:
        """Unregister the snapshot, so the map stops copying for it; a second call does nothing (P3)."""


@runtime_checkable
class WritesState(Protocol):
    """A snapshot that writes what a checkpoint stores (optional; P2)."""

    def write_state(self, out: BinaryIO, key_serializer, namespace_serializer, state_serializer) -> None:
        """Write to ``out`` a big-endian int32 entry count, then each entry's namespace, key and
        state through the serializer given for each (Flink's layout, byte for byte)."""


@runtime_checkable
class StateMap(Protocol):
    """``(key, namespace) -> state`` with copy-on-write snapshots (contract §4–§7, P1–P7).

    Keys and namespaces arrive as fresh objects equal to earlier ones: compare them
    by equality. *The identity rule* (P6): a state that :meth:`get`,
    :meth:`put_and_get_old`, :meth:`remove_and_get_old` or :meth:`transform` hands out
    is a fresh copy if and only if a live snapshot is newer than the state's last
    write or copy; otherwise it is the caller's own object."""

    def get(self, key, namespace) -> Any:
        """The state, or None (P1; a copy exactly as the identity rule says, P6)."""

    def contains_key(self, key, namespace) -> bool:
        """Whether the map holds the key in that namespace (P1); copies nothing."""

    def put(self, key, namespace, state) -> None:
        """Store ``state`` itself, never a copy."""

    def put_and_get_old(self, key, namespace, state) -> Any:
        """As :meth:`put`; the previous state (identity rule) or None."""

    def remove(self, key, namespace) -> None:
        """Remove the key's entry in that namespace, if any (a structural change, §7)."""

    def remove_and_get_old(self, key, namespace) -> Any:
        """As :meth:`remove`; the previous state (identity rule) or None."""

    def transform(self, key, namespace, value, fn: Callable[[Any, Any], Any]) -> None:
        """Call ``fn(old, value)`` exactly once with the state or None (identity rule) and store
        what it returns."""

    def __len__(self) -> int:
        """The number of entries (P4)."""

    def __iter__(self) -> Iterator[Entry]:
        """The live entries. After an insert of a new key or a removal, the next ``next()`` of an
        iterator that has not returned every entry raises ConcurrentModificationError (a
        RuntimeError); in no other case does it raise (P7, §7)."""

    def keys(self, namespace) -> Iterable:
        """The keys that have this namespace (an iterator; any iterable will do)."""

    def size_of_namespace(self, namespace) -> int:
        """How many entries have this namespace."""

    def snapshot(self) -> StateMapSnapshot:
        """A snapshot of the map now; the map copies before it changes anything the snapshot reaches."""


@runtime_checkable
class IncrementalVisitor(Protocol):
    """Flink's TTL cleanup (optional, §7): one bucket's chain per call, no fail-fast."""

    def has_next(self) -> bool: ...

    def next_entries(self) -> Iterable[Entry]: ...

    def remove(self, entry: Entry) -> None: ...

    def update(self, entry: Entry, new_state) -> None: ...


@runtime_checkable
class HasIncrementalVisitor(Protocol):
    """A map that offers the incremental visitor (the ``visit`` operation checks it, P1)."""

    def incremental_visitor(self, recommended_max_records: int) -> IncrementalVisitor: ...


class StateMapFactory(Protocol):
    """What ``--impl MODULE:FACTORY`` names: builds an empty map. A factory that rejects the
    arguments the tool chose is bad usage (exit 2), never a failure."""

    def __call__(self, *, capacity: int, state_copier: Callable[[Any], Any]) -> StateMap: ...
