"""A user's own map, tested black-box: ``cowcheck check --impl plain_dict_map:make_map``.

A dict with snapshots taken by deep copy. Simple and correct for reads and
snapshots, but it has no fail-fast iteration and copies every snapshot in
full; the suite reports what it breaks of docs/contract.md §15.
"""

import copy


class DictSnapshot:
    def __init__(self, owner, version):
        self.items = [(k, n, copy.deepcopy(s)) for (k, n), s in owner.data.items()]
        self.version = version
        self.released = False

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def iterate(self, transformer=None):
        if transformer is None:
            return list(self.items)
        return [(k, n, t) for k, n, s in self.items if (t := transformer(s)) is not None]

    def release(self):
        self.released = True


class DictStateMap:
    def __init__(self, capacity=128, state_copier=copy.deepcopy):
        self.data = {}
        self.version = 0

    def get(self, key, namespace):
        return self.data.get((key, namespace))

    def contains_key(self, key, namespace):
        return (key, namespace) in self.data

    def put(self, key, namespace, state):
        self.data[(key, namespace)] = state

    def put_and_get_old(self, key, namespace, state):
        old = self.data.get((key, namespace))
        self.data[(key, namespace)] = state
        return old

    def remove(self, key, namespace):
        self.data.pop((key, namespace), None)

    def remove_and_get_old(self, key, namespace):
        return self.data.pop((key, namespace), None)

    def transform(self, key, namespace, value, fn):
        self.data[(key, namespace)] = fn(self.data.get((key, namespace)), value)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        return iter([(k, n, s) for (k, n), s in self.data.items()])

    def keys(self, namespace):
        return iter([k for (k, n) in self.data if n == namespace])

    def size_of_namespace(self, namespace):
        return sum(1 for (_, n) in self.data if n == namespace)

    def snapshot(self):
        self.version += 1
        return DictSnapshot(self, self.version)


def make_map(capacity=128, state_copier=copy.deepcopy):
    return DictStateMap(capacity, state_copier)
