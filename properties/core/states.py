"""States and entries as the suite handles them: copies, order-free comparison, the transform function.

States are what a map holds per ``(key, namespace)``; entries are ``(key,
namespace, state)`` triples. The suite keeps its own copies of states (the
model's, the snapshot guard's) and compares entry lists without regard to
order, in a form that is the same in every process.

>>> same_entries([(1, 0, [2]), (0, 0, [])], [(0, 0, []), (1, 0, [2])])
True
"""

from __future__ import annotations

import copy
import io
import json

from cowcheck.core.failures import safe_repr
from cowcheck.core.keys import serializers_for
from cowcheck.reference.serializers import IntSerializer, ListSerializer, SerializationError

__all__ = ["copy_state", "entries", "same_entries", "transform_append", "Kept", "drain", "write_serializers",
           "decode_written"]


def transform_append(old, value):
    """The transform function of ``transform`` steps: append ``value`` in place
    (so a missing copy under a snapshot corrupts the snapshot)."""
    if old is None:
        return [value]
    old.append(value)
    return old


_ATOMIC = frozenset({int, str, bool, float, bytes, type(None)})


def copy_state(state):
    """``copy.deepcopy(state)`` without its machinery for the usual states:
    values of immutable types, and flat lists of them.

    >>> s = [1, 2]; c = copy_state(s); c == s and c is not s
    True
    """
    kind = type(state)
    if kind is list:
        if _ATOMIC.issuperset(map(type, state)):
            return state[:]
    elif kind in _ATOMIC:
        return state
    return copy.deepcopy(state)


# json.dumps(x, sort_keys=True, default=safe_repr) without building an encoder per call.
_encode = json.JSONEncoder(sort_keys=True, default=safe_repr).encode


def entries(iterable) -> list[str]:
    """Entries ``(key, namespace, state)`` as sorted JSON strings: an order-free,
    process-independent way to compare contents."""
    return sorted([_encode([k, n, s]) for k, n, s in iterable])


def same_entries(a, b, symbolic: bool = False) -> bool:
    """Whether two lists of entries hold the same entries in any order: equal
    as Python values (``==``, as the harness compares every other result), or
    equal in the JSON form of :func:`entries` (which also settles values that
    do not sort, and lists against tuples).

    ``symbolic``: the values may be CrossHair's symbolic ones, on which every
    comparison of a sort is a branch to explore; their ``repr`` strings (which
    makes them concrete) are compared instead.
    """
    if len(a) != len(b):
        return False
    if symbolic:
        return sorted(map(repr, a)) == sorted(map(repr, b)) or entries(a) == entries(b)
    try:  # by (key, namespace): linear, and no ordering of keys needed
        by_ident = {(k, n): s for k, n, s in a}
        if len(by_ident) == len(a):
            other = {(k, n): s for k, n, s in b}
            if len(other) == len(b) and by_ident == other:
                return True
    except Exception:
        pass
    try:
        if sorted(a) == sorted(b):
            return True
    except Exception:  # values that do not sort together, or a hostile __lt__/__eq__
        pass
    return entries(a) == entries(b)


class Kept:
    """A transform function that keeps what it was given and what it returned
    (``old``, ``result``, ``called``): ``m.transform(k, n, v, Kept(transform_append))``."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.called = False
        self.old = self.result = None

    def __call__(self, old, value):
        self.called, self.old = True, old
        self.result = self.fn(old, value)
        return self.result


def drain(iterator):
    """Consume a live iterator; the entries, or the exception it raised."""
    out = []
    try:
        for item in iterator:
            out.append(item)
    except RuntimeError as exc:
        return exc
    return out


# ------------------------------------------------ write_state bytes (docs/contract.md §15, Flink's layout)


def write_serializers(key=0, namespace=0) -> tuple:
    """The serializers the harness hands ``snapshot.write_state`` for a map whose
    keys and namespaces are like ``key`` and ``namespace`` (a map holds one type of
    each, as Flink's state does): Flink's serializer of each one's family
    (:mod:`cowcheck.core.keys`), and ListSerializer(IntSerializer) for the
    states, lists of int32."""
    key_serializer, namespace_serializer = serializers_for(key, namespace)
    return key_serializer, namespace_serializer, ListSerializer(IntSerializer())


def decode_written(data: bytes, serializers: tuple | None = None) -> tuple[int, list]:
    """``(count, entries)`` of ``write_state``'s bytes (docs/contract.md §15, Flink's layout):
    an int32 count, then namespace, key, state per entry, read with ``serializers``
    (:func:`write_serializers`' by default). SerializationError if they do not
    decode, or if bytes are left over after ``count`` entries."""
    key_serializer, namespace_serializer, state_serializer = serializers or write_serializers()
    inp = io.BytesIO(data)
    count = IntSerializer().deserialize(inp)
    if count < 0:
        raise SerializationError(f"negative entry count {count}")
    entries = []
    for _ in range(count):
        namespace = namespace_serializer.deserialize(inp)
        key = key_serializer.deserialize(inp)
        entries.append((key, namespace, state_serializer.deserialize(inp)))
    left = len(data) - inp.tell()
    if left:
        raise SerializationError(f"{left} bytes left over after {count} entries")
    return count, entries
