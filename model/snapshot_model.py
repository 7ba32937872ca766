"""The oracle: snapshot semantics as a plain mapping (docs/contract.md §9).

The live state is a dict ``(key, namespace) -> state``; each live snapshot is
a frozen deep copy of that dict taken when it was made. Versions go 1, 2, 3…
To predict *identity* (docs/contract.md §6, exact identity rule) each state also carries
the version at which it was last written or copied: a state handed out is a
fresh copy iff a live snapshot is newer than that version.

Speaks the docs/contract.md §15 API, so the machines can run against the model itself.

>>> m = ModelMap(); m.put(1, 0, [1]); s = m.snapshot(); m.get(1, 0).append(2)
>>> list(s), m.get(1, 0)
([(1, 0, [1])], [1, 2])
"""

from __future__ import annotations

import copy

__all__ = ["ModelMap", "ModelSnapshot", "ModelReleaseError", "ModelConcurrentModification"]


class ModelReleaseError(RuntimeError):
    """Release of a version that is not live (Flink: IllegalStateException)."""


class ModelConcurrentModification(RuntimeError):
    """Live iteration continued after an insert of a new key or a remove."""


_ABSENT = object()  # a snapshot's saved value of a slot that did not exist when it was taken


class ModelMap:
    """The live state and its snapshots. A snapshot costs nothing when taken:
    before a slot changes (a write, a remove, a copy on hand-out), every live
    snapshot that has not saved that slot yet saves a copy of its value. So a
    write costs O(live snapshots) and a map of 10^5 entries with snapshots
    taken all along stays linear; reading a snapshot is O(entries)."""

    def __init__(self, capacity: int = 128, state_copier=copy.deepcopy):
        self.state_copier = state_copier
        self.data: dict = {}  # (key, namespace) -> [state, version of last write or copy]
        self.structure = 0  # bumped by inserts of new keys and removes (fail-fast iteration)
        self.version = 0
        self.live: dict = {}  # version -> ModelSnapshot

    def required_version(self) -> int:
        return max(self.live) if self.live else 0

    def _save(self, ident, slot) -> None:
        """Every live snapshot keeps the value ``ident`` had when it was taken."""
        for snap in self.live.values():
            saved = snap.saved
            if ident not in saved:
                saved[ident] = _ABSENT if slot is None else self.state_copier(slot[0])

    def _hand_out(self, slot: list):
        """The state as the map hands it out: copied iff a live snapshot is newer."""
        if slot[1] < self.required_version():
            return self.state_copier(slot[0]), True
        return slot[0], False

    def get(self, key, namespace):
        slot = self.data.get((key, namespace))
        if slot is None:
            return None
        state, copied = self._hand_out(slot)
        if copied:
            self._save((key, namespace), slot)
            slot[:] = [state, self.version]
        return state

    def contains_key(self, key, namespace) -> bool:
        return (key, namespace) in self.data

    def put(self, key, namespace, state) -> None:
        ident = (key, namespace)
        slot = self.data.get(ident)
        if self.live:
            self._save(ident, slot)
        self.structure += slot is None
        self.data[ident] = [state, self.version]

    def put_and_get_old(self, key, namespace, state):
        slot = self.data.get((key, namespace))
        old = self._hand_out(slot)[0] if slot else None
        self.put(key, namespace, state)
        return old

    def remove(self, key, namespace) -> None:
        self.remove_and_get_old(key, namespace)

    def remove_and_get_old(self, key, namespace):
        ident = (key, namespace)
        slot = self.data.get(ident)
        if slot is None:
            return None
        if self.live:
            self._save(ident, slot)
        del self.data[ident]
        self.structure += 1
        return self._hand_out(slot)[0]

    def transform(self, key, namespace, value, fn) -> None:
        slot = self.data.get((key, namespace))
        if slot is not None and self.live:
            self._save((key, namespace), slot)  # fn may change an uncopied state in place
        old = self._hand_out(slot)[0] if slot else None
        self.put(key, namespace, fn(old, value))

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self):
        return self._iterate(self.structure, [(k, n, slot[0]) for (k, n), slot in self.data.items()])

    def _iterate(self, stamp: int, items: list):
        for item in items:
            if self.structure != stamp:
                raise ModelConcurrentModification("map structurally modified during iteration")
            yield item

    def keys(self, namespace):
        return iter([k for (k, n) in self.data if n == namespace])

    def size_of_namespace(self, namespace) -> int:
        return sum(1 for (_, n) in self.data if n == namespace)

    def snapshot(self) -> "ModelSnapshot":
        self.version += 1
        snap = ModelSnapshot(self, self.version, len(self.data))
        self.live[self.version] = snap
        return snap

    def release_snapshot_version(self, version: int) -> None:
        if version not in self.live:
            raise ModelReleaseError(f"Attempt to release unknown snapshot version {version}")
        del self.live[version]


class ModelSnapshot:
    """The map's content when the snapshot was taken: the live data, except the
    slots changed since, whose values the snapshot saved (``saved``). Read it
    while it is live; after its release nothing is promised."""

    def __init__(self, owner: ModelMap, version: int, size: int):
        self.owner = owner
        self.version = version
        self.size = size
        self.saved: dict = {}  # (key, namespace) -> value when taken, or _ABSENT
        self.released = False

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return iter(self.iterate())

    @property
    def frozen(self) -> list:
        """The entries ``(key, namespace, state)`` the snapshot holds."""
        saved = self.saved
        out = [(k, n, slot[0]) for (k, n), slot in self.owner.data.items() if (k, n) not in saved]
        out += [(k, n, v) for (k, n), v in saved.items() if v is not _ABSENT]
        return out

    def iterate(self, transformer=None) -> list:
        if transformer is None:
            return self.frozen
        out = []
        for k, n, state in self.frozen:
            new = transformer(state)
            if new is not None:
                out.append((k, n, new))
        return out

    def release(self) -> None:
        if not self.released:
            self.owner.release_snapshot_version(self.version)
            self.released = True
