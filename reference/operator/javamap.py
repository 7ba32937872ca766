"""The iteration order of a Java ``HashMap``, which decides what Flink's operator backend writes first.

Flink keeps operator states, their snapshot copies, a handle's offsets and the
repartitioner's groups in ``HashMap``s and iterates them: the order of the
states in a checkpoint, and which instance a round-robin split starts with,
follow from it. A ``HashMap`` iterates its table bucket by bucket (bucket
``(h ^ h >>> 16) & (capacity - 1)`` of the key's ``hashCode`` ``h``), the keys
of one bucket in insertion order (a resize splits a bucket keeping that order;
bins become trees only past 8 keys in a table of 64, which these maps never
reach). Its capacity starts at the power of two at or above the requested
initial capacity (16 by default) and doubles whenever the size passes three
quarters of it.

>>> java_map_order(["b", "a", "c"], hash_of=java_string_hash)
['a', 'b', 'c']
>>> java_map_order([17, 1], hash_of=lambda k: k)
[17, 1]
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from cowcheck.reference.hashing import java_hash_code_cached, to_int32

__all__ = ["java_map_order", "table_size_for", "expected_size_capacity", "java_string_hash", "long_hash"]

_MAXIMUM_CAPACITY = 1 << 30


def java_string_hash(s: str) -> int:
    """``String.hashCode`` (memoised: state names repeat)."""
    return java_hash_code_cached(s)


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``capacity`` (1 for 0)."""
    n = 1
    while n < capacity:
        n <<= 1
    return min(n, _MAXIMUM_CAPACITY)


def expected_size_capacity(expected: int) -> int:
    """The initial capacity Flink's ``CollectionUtil.newHashMapWithExpectedSize(expected)`` asks for."""
    return expected + 1 if expected <= 2 else -(-expected * 4 // 3)


def long_hash(value: int) -> int:
    """``Long.hashCode``."""
    v = value & 0xFFFFFFFFFFFFFFFF
    return to_int32(v ^ (v >> 32))


def java_map_order(keys: Iterable, hash_of: Callable, initial_capacity: Optional[int] = None) -> list:
    """``keys`` (distinct, in insertion order) as a ``HashMap`` built with ``initial_capacity`` (None: the
    default constructor) iterates them; ``hash_of(key)`` is the key's Java ``hashCode`` (None: 0)."""
    keys = list(keys)
    capacity = 16 if initial_capacity is None else table_size_for(initial_capacity)
    while len(keys) > int(capacity * 0.75) and capacity < _MAXIMUM_CAPACITY:
        capacity <<= 1

    def bucket(key) -> int:
        h = 0 if key is None else hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [key for _, _, key in sorted((bucket(k), i, k) for i, k in enumerate(keys))]
