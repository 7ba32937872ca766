"""Keyed states over a CopyOnWriteStateTable (Flink ``HeapValueState``... and their TTL decorators).

Every state reads and writes the table entry of (the backend's current key,
its current namespace). As in Flink, list and map states change the list or
dict the table hands out *in place* (``add`` appends to the object ``get``
returned): the table's copy-on-write is what keeps a running checkpoint's
snapshot apart, since ``get`` hands out a fresh copy of a state a snapshot
still shares.

Emptiness (Flink's): ``update(None)`` of a value state, ``update([])`` of a
list state and ``remove`` of a map's last user key remove the entry;
``clear()`` always does. A list or map state with TTL returns an empty list
(dict) where one without returns None.

The TTL decorators are ports of Flink's ``TtlValueState``, ``TtlListState``,
``TtlMapState`` and ``TtlReducingState`` (with ``TtlReduceFunction``): what a
read finds expired is cleared and not returned; under ``OnReadAndWrite`` an
unexpired read rewrites the value with the current time.

>>> from cowcheck.reference.keyed import HashMapStateBackend, ListStateDescriptor
>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.state_table import KeyGroupRange
>>> kb = HashMapStateBackend().create_keyed_state_backend(IntSerializer(), 8, KeyGroupRange(0, 7))
>>> s = kb.get_or_create_keyed_state(IntSerializer(), ListStateDescriptor("l", IntSerializer()))
>>> kb.set_current_key(3); s.set_current_namespace(0); s.add(1); s.add(2); s.get()
[1, 2]
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from cowcheck.reference.keyed.ttl import TtlDecorator
from cowcheck.reference.serializers import TtlValue

__all__ = ["HeapValueState", "HeapListState", "HeapMapState", "HeapReducingState", "TtlValueState", "TtlListState",
           "TtlMapState", "TtlReducingState", "TtlReduceFunction"]


class _HeapState:
    """The table entry of (current key, current namespace)."""

    __slots__ = ("backend", "table", "namespace")

    def __init__(self, backend, table) -> None:
        self.backend = backend
        self.table = table
        self.namespace = None

    def set_current_namespace(self, namespace) -> None:
        self.namespace = namespace

    def _key(self):
        key = self.backend.current_key
        if key is None:
            raise TypeError("no current key: call set_current_key first (Flink: 'No key set.')")
        return key

    def get_internal(self):
        return self.table.get(self._key(), self.namespace)

    def update_internal(self, state) -> None:
        self.table.put(self._key(), self.namespace, state)

    def clear(self) -> None:
        self.table.remove(self._key(), self.namespace)


class HeapValueState(_HeapState):
    __slots__ = ()

    def value(self):
        return self.get_internal()

    def update(self, value) -> None:
        if value is None:
            self.clear()
        else:
            self.update_internal(value)


class HeapListState(_HeapState):
    __slots__ = ()

    def get(self) -> Optional[list]:
        return self.get_internal()

    def add(self, value) -> None:
        if value is None:
            raise TypeError("You cannot add null to a ListState.")
        key = self._key()
        elements = self.table.get(key, self.namespace)
        if elements is None:
            elements = []
            self.table.put(key, self.namespace, elements)
        elements.append(value)

    def update(self, values: list) -> None:
        if values is None:
            raise TypeError("List of values to add cannot be null.")
        if not values:
            self.clear()
            return
        if any(v is None for v in values):
            raise TypeError("You cannot add null to a ListState.")
        self.update_internal(list(values))


class HeapMapState(_HeapState):
    __slots__ = ()

    def get(self, user_key):
        entries = self.get_internal()
        return None if entries is None else entries.get(user_key)

    def put(self, user_key, user_value) -> None:
        key = self._key()
        entries = self.table.get(key, self.namespace)
        if entries is None:
            entries = {}
            self.table.put(key, self.namespace, entries)
        entries[user_key] = user_value

    def contains(self, user_key) -> bool:
        entries = self.get_internal()
        return entries is not None and user_key in entries

    def remove(self, user_key) -> None:
        entries = self.get_internal()
        if entries is None:
            return
        entries.pop(user_key, None)
        if not entries:
            self.clear()

    def entries(self) -> Optional[list]:
        entries = self.get_internal()
        return None if entries is None else list(entries.items())


class HeapReducingState(_HeapState):
    __slots__ = ("reduce_function",)

    def __init__(self, backend, table, reduce_function: Callable[[Any, Any], Any]) -> None:
        super().__init__(backend, table)
        self.reduce_function = reduce_function

    def get(self):
        return self.get_internal()

    def add(self, value) -> None:
        reduce = self.reduce_function
        self.table.transform(self._key(), self.namespace, value,
                             lambda previous, v: v if previous is None else reduce(previous, v))


# ------------------------------------------------------------------ TTL decorators


class TtlValueState(TtlDecorator):
    __slots__ = ()

    def value(self):
        o = self.original
        return self.get_with_ttl_check_and_update(o.value, o.update, o.clear)

    def update(self, value) -> None:
        self.original.update(None if value is None else self.wrap(value))


class TtlListState(TtlDecorator):
    __slots__ = ()

    def get(self) -> list:
        elements = self.original.get() or []
        if self.config.update_on_read:
            refreshed = [self.wrap(e.user_value) for e in elements if not self.is_expired(e)]
            if refreshed:
                self.original.update(refreshed)
        found = [e.user_value for e in elements if not self.is_expired(e)]
        if not found:  # Flink's iterator clears the state once it has seen nothing unexpired
            self.original.clear()
        return found

    def add(self, value) -> None:
        if value is None:
            raise TypeError("You cannot add null to a ListState.")
        self.original.add(self.wrap(value))

    def update(self, values: list) -> None:
        if values is None:
            raise TypeError("List of values to update cannot be null.")
        if any(v is None for v in values):
            raise TypeError("You cannot have null element in a ListState.")
        self.original.update([self.wrap(v) for v in values])


class TtlMapState(TtlDecorator):
    __slots__ = ()

    def _get_wrapped(self, user_key):
        o = self.original
        return self.get_with_ttl_check_and_update(lambda: o.get(user_key), lambda v: o.put(user_key, v),
                                                  lambda: o.remove(user_key))

    def get(self, user_key):
        return self._get_wrapped(user_key)

    def put(self, user_key, user_value) -> None:
        self.original.put(user_key, self.wrap(user_value))

    def contains(self, user_key) -> bool:
        return self._get_wrapped(user_key) is not None

    def remove(self, user_key) -> None:
        self.original.remove(user_key)

    def entries(self) -> list:
        """Unexpired entries; an expired one is removed from the user map as it is met (the map
        stays in the table even when that empties it, as Flink's iterator removal leaves it)."""
        entries = self.original.get_internal()
        if entries is None:
            return []
        found = []
        for user_key, value in list(entries.items()):
            if self.is_expired(value):
                del entries[user_key]
                continue
            if self.config.update_on_read:
                self.original.put(user_key, self.wrap(value.user_value))
            found.append((user_key, value.user_value))
        return found


class TtlReduceFunction:
    """The reduce function a TTL reducing state's table runs (Flink ``TtlReduceFunction``): an
    expired accumulator is dropped, so adding to it starts again from the value added."""

    __slots__ = ("decorator", "reduce_function")

    def __init__(self, decorator: TtlDecorator, reduce_function: Callable[[Any, Any], Any]) -> None:
        self.decorator = decorator
        self.reduce_function = reduce_function

    def __call__(self, accumulator: TtlValue, value: TtlValue) -> Optional[TtlValue]:
        d = self.decorator
        user_accumulator, user_value = d.unexpired(accumulator), d.unexpired(value)
        if user_accumulator is not None and user_value is not None:
            return d.wrap(self.reduce_function(user_accumulator, user_value))
        if user_accumulator is not None:
            return d.wrap(user_accumulator)
        return d.wrap(user_value) if user_value is not None else None


class TtlReducingState(TtlDecorator):
    __slots__ = ()

    def get(self):
        o = self.original
        return self.get_with_ttl_check_and_update(o.get_internal, o.update_internal, o.clear)

    def add(self, value) -> None:
        self.original.add(self.wrap(value))
