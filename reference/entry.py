"""StateMapEntry: one node of a CopyOnWriteStateMap's bucket chains (Flink ``StateMapEntry``).

Its own module so that the map and its snapshot, which both build entries,
do not import each other. A plain ``__slots__`` class: the map allocates one
per insert and per copy, on its hot path.

>>> e = StateMapEntry("k", 0, [1], 7, None, 1, 1)
>>> e.copy_with_version(2).entry_version, e.copy_with_version(2).state is e.state
(2, True)
"""

from __future__ import annotations

__all__ = ["StateMapEntry"]


class StateMapEntry:
    """One chain node. ``entry_version``: map version when this object was
    created; ``state_version``: version when its state was last written or
    copied. The copy constructor shares the state *reference* and ``next``."""

    __slots__ = ("key", "namespace", "state", "hash", "next", "entry_version", "state_version")

    def __init__(self, key, namespace, state, hash_, next_, entry_version, state_version):
        self.key = key
        self.namespace = namespace
        self.state = state
        self.hash = hash_
        self.next = next_
        self.entry_version = entry_version
        self.state_version = state_version

    def copy_with_version(self, entry_version: int) -> "StateMapEntry":
        """Flink's ``StateMapEntry(other, entryVersion)``."""
        return StateMapEntry(
            self.key, self.namespace, self.state, self.hash, self.next, entry_version, self.state_version
        )

    def __repr__(self) -> str:
        return (
            f"StateMapEntry({self.key!r}, {self.namespace!r}, {self.state!r}, "
            f"hash={self.hash}, ev={self.entry_version}, sv={self.state_version})"
        )
