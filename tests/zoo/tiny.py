"""A small copy-on-write state map written apart from cowcheck: the base of the adversary zoo.

It imports nothing from the project. It keeps ``(key, namespace) -> [state,
state_version]`` in a dict and copies a state lazily, at the first access
after a snapshot newer than its last write (docs/contract.md §6's exact identity rule),
so snapshots can keep references to the states they saw. No hash table, no
rehash, no introspection: the suite checks it black-box.

    cowcheck check --impl tiny:make_map       # with tests/zoo on PYTHONPATH
"""

import copy


class ConcurrentModificationError(RuntimeError):
    """Its own fail-fast error (docs/contract.md §7 asks for a RuntimeError, not cowcheck's class)."""


class TinySnapshot:
    def __init__(self, owner, version, items):
        self.owner = owner
        self.version = version
        self.items = items  # (key, namespace, state) as they were
        self.released = False

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(list(self.items))

    def iterate(self, transformer=None):
        if transformer is None:
            return TinyView(list(self.items))
        kept = []
        for k, n, s in self.items:
            t = transformer(s)
            if t is not None:
                kept.append((k, n, t))
        return TinyView(kept)

    def write_state(self, out, key_serializer, namespace_serializer, state_serializer, transformer=None):
        view = self.iterate(transformer)
        out.write(len(view).to_bytes(4, "big", signed=True))
        for k, n, s in view:
            if s is None:
                raise ValueError(f"write_state: ({k!r}, {n!r}) has no state")
            namespace_serializer.serialize(n, out)
            key_serializer.serialize(k, out)
            state_serializer.serialize(s, out)

    def release(self):
        if not self.released:
            self.owner.release_version(self.version)
            self.released = True


class TinyView:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)


class TinyIterator:
    """Fail-fast: the modification count is taken when iteration starts."""

    def __init__(self, owner):
        self.owner = owner
        self.expected = owner.mods
        self.items = list(owner.data.items())
        self.at = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.at == len(self.items):
            raise StopIteration
        if self.owner.mods != self.expected:
            raise ConcurrentModificationError("the map changed during iteration")
        (k, n), slot = self.items[self.at]
        self.at += 1
        return (k, n, slot[0])


class TinyMap:
    def __init__(self, capacity=128, state_copier=copy.deepcopy):
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.copier = state_copier
        self.data = {}
        self.version = 0
        self.live = set()
        self.mods = 0

    def required(self):
        return max(self.live) if self.live else 0

    def _fresh(self, slot):
        """The slot's state, copied first if a live snapshot may share it."""
        if slot[1] < self.required():
            slot[0] = self.copier(slot[0])
            slot[1] = self.version
        return slot[0]

    def _old(self, slot):
        return self.copier(slot[0]) if slot[1] < self.required() else slot[0]

    def get(self, key, namespace):
        slot = self.data.get((key, namespace))
        return None if slot is None else self._fresh(slot)

    def contains_key(self, key, namespace):
        return (key, namespace) in self.data

    def put(self, key, namespace, state):
        if (key, namespace) not in self.data:
            self.mods += 1
        self.data[(key, namespace)] = [state, self.version]

    def put_and_get_old(self, key, namespace, state):
        slot = self.data.get((key, namespace))
        old = None if slot is None else self._old(slot)
        self.put(key, namespace, state)
        return old

    def remove(self, key, namespace):
        if self.data.pop((key, namespace), None) is not None:
            self.mods += 1

    def remove_and_get_old(self, key, namespace):
        slot = self.data.get((key, namespace))
        old = None if slot is None else self._old(slot)
        self.remove(key, namespace)
        return old

    def transform(self, key, namespace, value, fn):
        slot = self.data.get((key, namespace))
        new = fn(None if slot is None else self._old(slot), value)
        self.put(key, namespace, new)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        return TinyIterator(self)

    def keys(self, namespace):
        return (k for (k, n) in list(self.data) if n == namespace)

    def size_of_namespace(self, namespace):
        return sum(1 for (_, n) in self.data if n == namespace)

    def snapshot(self):
        self.version += 1
        self.live.add(self.version)
        return TinySnapshot(self, self.version, [(k, n, slot[0]) for (k, n), slot in self.data.items()])

    def release_version(self, version):
        if version not in self.live:
            raise ValueError(f"Attempt to release unknown snapshot version {version}")
        self.live.discard(version)


def make_map(capacity=128, state_copier=copy.deepcopy):
    return TinyMap(capacity, state_copier)
