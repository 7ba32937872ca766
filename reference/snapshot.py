"""CopyOnWriteStateMapSnapshot: a read-only view of a map at one version (docs/contract.md §6).

Isolation is one-way: the map copies before it writes anything a live
snapshot can reach, but objects read from a snapshot may still be shared with
the map, so they must not be mutated. Release the snapshot when done, or the
map keeps copying forever.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> m = CopyOnWriteStateMap(capacity=4)
>>> m.put(1, 0, [1])
>>> s = m.snapshot()
>>> m.remove(1, 0)
>>> (s.version, len(s), list(s))
(1, 1, [(1, 0, [1])])
>>> s.release(); s.release()  # idempotent
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, Iterator, Optional

from cowcheck.reference.entry import StateMapEntry

__all__ = ["CopyOnWriteStateMapSnapshot"]


class CopyOnWriteStateMapSnapshot:
    """Bucket heads of the owning map, its version and entry count at snapshot time.

    ``iterate(transformer)`` with a transformer (TTL-style ``state -> state or
    None``) rewrites the snapshot's own array in place, as Flink does: it is
    the snapshot's last use.
    """

    __slots__ = ("owner", "snapshot_data", "version", "entry_count", "released")

    def __init__(self, owner):
        self.owner = owner
        self.snapshot_data: list = owner.snapshot_map_arrays()
        self.version: int = owner.state_map_version
        self.entry_count: int = len(owner)
        self.released = False

    def __len__(self) -> int:
        return self.entry_count

    def release(self) -> None:
        """Tell the owner this snapshot is no longer needed; a second call does nothing."""
        if not self.released:
            self.owner.release_snapshot(self)
            self.released = True

    def is_owner(self, m) -> bool:
        return m is self.owner

    # ----------------------------------------------------------- iteration

    def entry_objects(self) -> Iterator:
        """Entry objects of the untransformed snapshot in Flink's order (white-box)."""
        for head in self.snapshot_data:
            e = head
            while e is not None:
                yield e
                e = e.next

    def __iter__(self) -> Iterator[tuple]:
        for e in self.entry_objects():
            yield (e.key, e.namespace, e.state)

    def iterate(self, transformer: Optional[Callable[[Any], Any]] = None) -> "SnapshotView":
        """Entries in Flink's order; with a transformer, the filtered/transformed
        entries (Flink's TransformedSnapshotIterator, which flattens in place)."""
        if transformer is None:
            return SnapshotView(self.entry_count, list(self))
        return SnapshotView(*self._transform_in_place(transformer))

    def _transform_in_place(self, transformer):
        data = self.snapshot_data
        # Move the chains to the back of the array, keeping their order...
        index = len(data) - 1
        while index >= 0 and data[index] is not None:
            index -= 1
        last_null = index
        index -= 1
        while index >= 0:
            entry = data[index]
            if entry is not None:
                data[last_null] = entry
                data[index] = None
                last_null -= 1
            index -= 1
        # ...then flatten the transformed entries into the front.
        count = 0
        for i in range(last_null + 1, len(data)):
            e = data[i]
            while e is not None:
                new_state = transformer(e.state)
                if new_state is not None:
                    kept = e
                    if new_state is not e.state:
                        kept = StateMapEntry(e.key, e.namespace, new_state, e.hash, e.next, e.entry_version, e.state_version)
                    data[count] = kept
                    count += 1
                e = e.next
        return count, [(data[i].key, data[i].namespace, data[i].state) for i in range(count)]

    # --------------------------------------------------------------- output

    def write_state(self, out: BinaryIO, key_serializer, namespace_serializer, state_serializer,
                    transformer: Optional[Callable[[Any], Any]] = None) -> None:
        """int32 count, then namespace, key, state per entry (Flink's layout)."""
        view = self.iterate(transformer)
        out.write(len(view).to_bytes(4, "big", signed=True))
        for key, namespace, state in view:
            if state is None:
                raise ValueError(
                    f"write_state: entry (key={key!r}, namespace={namespace!r}) has a None state"
                )
            namespace_serializer.serialize(namespace, out)
            key_serializer.serialize(key, out)
            state_serializer.serialize(state, out)

    def __repr__(self) -> str:
        return f"CopyOnWriteStateMapSnapshot(version={self.version}, entries={self.entry_count}, released={self.released})"


class SnapshotView:
    """The result of ``snapshot.iterate()``: iterable entries plus Flink's reported size."""

    __slots__ = ("size", "items")

    def __init__(self, size: int, items: list):
        self.size = size
        self.items = items

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return iter(self.items)
