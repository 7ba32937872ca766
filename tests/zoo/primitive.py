"""A copy-on-write state map for primitive keys only, written apart from cowcheck, and three seeded bugs.

Like a map specialised for primitive keys, it hashes ``int`` and ``str`` keys
and namespaces itself (Java's ``hashCode``: an int32 as it is, a long folded
``v ^ v >>> 32``, a string over its UTF-16 code units) and raises ``TypeError``
for anything else: ``Tuple2`` keys, ``VoidNamespace`` and ``TimeWindow``
namespaces. Its structure is Flink's, small: a fixed table of chains (no
rehash), each entry with the map version that made it and the version that
last wrote its state; a snapshot keeps the chains' heads, and an entry a live
snapshot may reach is copied, with every entry before it in its chain, before
anything is written through it (docs/contract.md §4, §6).

    cowcheck check --impl primitive:make_map                 # passes; tuple, void, window left out
    cowcheck check --impl primitive:identity_keys            # keys compared with `is`
    cowcheck check --impl primitive:copies_target_only       # copy-on-write of the target entry only
    cowcheck check --impl primitive:version_not_bumped       # a snapshot takes the current version
    cowcheck check --impl primitive:no_keys                  # takes no key at all: bad usage, exit 2

(with tests/zoo on PYTHONPATH). Nothing here imports cowcheck.
"""

import copy


def java_hash(value) -> int:
    """Java's hashCode of an ``int`` (Integer or Long) or a ``str``; TypeError for any other type."""
    if type(value) is int:
        if -(1 << 31) <= value < (1 << 31):
            return value
        v = value & 0xFFFFFFFFFFFFFFFF
        return _int32(v ^ (v >> 32))
    if type(value) is str:
        h = 0
        for unit in range(0, len(data := value.encode("utf-16-be", "surrogatepass")), 2):
            h = (31 * h + int.from_bytes(data[unit:unit + 2], "big")) & 0xFFFFFFFF
        return _int32(h)
    raise TypeError(f"primitive map: keys and namespaces are int or str, got {type(value).__name__}")


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class ConcurrentModificationError(RuntimeError):
    pass


class Entry:
    __slots__ = ("key", "namespace", "state", "hash", "next", "entry_version", "state_version")

    def __init__(self, key, namespace, state, h, following, entry_version, state_version):
        self.key, self.namespace, self.state, self.hash, self.next = key, namespace, state, h, following
        self.entry_version, self.state_version = entry_version, state_version

    def copied(self, version):
        return Entry(self.key, self.namespace, self.state, self.hash, self.next, version, self.state_version)


def _walk(heads):
    for head in heads:
        e = head
        while e is not None:
            yield e
            e = e.next


class Snapshot:
    def __init__(self, owner, version, heads, size):
        self.owner, self.version, self.heads, self.size = owner, version, heads, size
        self.released = False

    def __len__(self):
        return self.size

    def __iter__(self):
        return iter([(e.key, e.namespace, e.state) for e in _walk(self.heads)])

    def iterate(self, transformer=None):
        entries = list(self)
        if transformer is not None:
            entries = [(k, n, t) for k, n, s in entries if (t := transformer(s)) is not None]
        return _View(entries)

    def release(self):
        if not self.released:
            self.owner.release_version(self.version)
            self.released = True


class _View:
    def __init__(self, entries):
        self.entries = entries

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)


class _LiveIterator:
    def __init__(self, owner):
        self.owner, self.expected = owner, owner.mods
        self.entries = [(e.key, e.namespace, e.state) for e in _walk(owner.table)]
        self.at = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.at == len(self.entries):
            raise StopIteration
        if self.owner.mods != self.expected:
            raise ConcurrentModificationError("the map changed during iteration")
        self.at += 1
        return self.entries[self.at - 1]


class PrimitiveMap:
    def __init__(self, capacity=128, state_copier=copy.deepcopy):
        if capacity < 1 or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two, got {capacity}")
        self.copier = state_copier
        self.table = [None] * capacity
        self.size = 0
        self.version = 0  # the map version; a snapshot takes a new one
        self.live = set()  # versions of the live snapshots
        self.mods = 0

    # ---------------------------------------------------------- structure

    def required(self):
        return max(self.live) if self.live else 0

    @staticmethod
    def same(a, b):
        return a == b

    def _find(self, key, namespace):
        h = java_hash(key) * 31 + java_hash(namespace)
        h ^= h >> 16
        index = h & (len(self.table) - 1)
        prev, e = None, self.table[index]
        while e is not None and not (e.hash == h and self.same(e.key, key) and self.same(e.namespace, namespace)):
            prev, e = e, e.next
        return h, index, prev, e

    def _copy_chain(self, index, until):
        """Copy every entry a snapshot may reach from the head of the chain to ``until``; the copy of ``until``."""
        required, prev, e = self.required(), None, self.table[index]
        while True:
            original = e
            if e.entry_version < required:
                e = e.copied(self.version)
                if prev is None:
                    self.table[index] = e
                else:
                    prev.next = e
            if original is until:
                return e
            prev, e = e, e.next

    def _entry(self, key, namespace):
        h, index, _, e = self._find(key, namespace)
        if e is not None:
            return e if e.entry_version >= self.required() else self._copy_chain(index, e)
        self.mods += 1
        if self.size >= 3 * len(self.table) // 4:
            self._grow()
            index = h & (len(self.table) - 1)
        e = self.table[index] = Entry(key, namespace, None, h, self.table[index], self.version, self.version)
        self.size += 1
        return e

    def _grow(self):
        """A table twice as long, of new entries (the snapshots keep the old ones, and their states)."""
        old, self.table = self.table, [None] * (2 * len(self.table))
        for e in _walk(old):
            index = e.hash & (len(self.table) - 1)
            self.table[index] = Entry(e.key, e.namespace, e.state, e.hash, self.table[index], self.version,
                                      e.state_version)

    def _old(self, e):
        return self.copier(e.state) if e.state_version < self.required() else e.state

    # ---------------------------------------------------------- the API

    def get(self, key, namespace):
        _, index, _, e = self._find(key, namespace)
        if e is None:
            return None
        if e.state_version < self.required():
            if e.entry_version < self.required():
                e = self._copy_chain(index, e)
            e.state, e.state_version = self.copier(e.state), self.version
        return e.state

    def contains_key(self, key, namespace):
        return self._find(key, namespace)[3] is not None

    def put(self, key, namespace, state):
        e = self._entry(key, namespace)
        e.state, e.state_version = state, self.version

    def put_and_get_old(self, key, namespace, state):
        e = self._find(key, namespace)[3]
        old = None if e is None else self._old(e)
        self.put(key, namespace, state)
        return old

    def remove(self, key, namespace):
        _, index, prev, e = self._find(key, namespace)
        if e is None:
            return
        if prev is None:
            self.table[index] = e.next
        else:
            if prev.entry_version < self.required():
                prev = self._copy_chain(index, prev)
            prev.next = e.next
        self.mods += 1
        self.size -= 1

    def remove_and_get_old(self, key, namespace):
        e = self._find(key, namespace)[3]
        old = None if e is None else self._old(e)
        self.remove(key, namespace)
        return old

    def transform(self, key, namespace, value, fn):
        e = self._entry(key, namespace)
        e.state, e.state_version = fn(self._old(e), value), self.version

    def __len__(self):
        return self.size

    def __iter__(self):
        return _LiveIterator(self)

    def keys(self, namespace):
        return iter([e.key for e in _walk(self.table) if e.namespace == namespace])

    def size_of_namespace(self, namespace):
        return sum(1 for e in _walk(self.table) if e.namespace == namespace)

    def snapshot(self):
        self.version += 1
        self.live.add(self.version)
        return Snapshot(self, self.version, list(self.table), self.size)

    def release_version(self, version):
        if version not in self.live:
            raise ValueError(f"Attempt to release unknown snapshot version {version}")
        self.live.discard(version)


# ---------------------------------------------------------------- seeded bugs


class IdentityKeys(PrimitiveMap):
    """Keys and namespaces compared with ``is`` (Java's ``==`` on boxed Integers)."""

    @staticmethod
    def same(a, b):
        return a is b


class CopiesTargetOnly(PrimitiveMap):
    """Copy-on-write of the entry to change only: the entries before it in its chain, which a
    snapshot shares, are relinked in place."""

    def _copy_chain(self, index, until):
        prev, e = None, self.table[index]
        while e is not until:
            prev, e = e, e.next
        if e.entry_version >= self.required():
            return e
        e = e.copied(self.version)
        if prev is None:
            self.table[index] = e
        else:
            prev.next = e
        return e


class VersionNotBumped(PrimitiveMap):
    """A snapshot registers the current map version instead of taking a new one."""

    def snapshot(self):
        self.live.add(self.version)
        return Snapshot(self, self.version, list(self.table), self.size)


class NoKeys(PrimitiveMap):
    """A map that takes no key cowcheck draws (its hash function refuses them all)."""

    def _find(self, key, namespace):
        raise TypeError(f"no key of type {type(key).__name__} here")


def make_map(capacity=128, state_copier=copy.deepcopy):
    return PrimitiveMap(capacity, state_copier)


def identity_keys(capacity=128, state_copier=copy.deepcopy):
    return IdentityKeys(capacity, state_copier)


def copies_target_only(capacity=128, state_copier=copy.deepcopy):
    return CopiesTargetOnly(capacity, state_copier)


def version_not_bumped(capacity=128, state_copier=copy.deepcopy):
    return VersionNotBumped(capacity, state_copier)


def no_keys(capacity=128, state_copier=copy.deepcopy):
    return NoKeys(capacity, state_copier)
