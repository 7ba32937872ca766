"""Java-compatible hashing (docs/contract.md §2).

Python's ``hash()`` of ``str`` is salted per process, so it never decides a
bucket here: every function below reproduces the int32 arithmetic of the JVM,
so layouts are identical in every process, on every Spark executor, and to
Flink's own ``CopyOnWriteStateMap``.

The int32 helpers state their contracts in PEP 316 docstring lines
(``pre:``/``post:``, ``__return__`` is the result), which ``cowcheck prove``
hands to CrossHair; preconditions bound inputs to the Java types they model.

>>> bit_mix(1), murmur_hash(0), key_group("abc", 128)
(1364076727, 593689054, 115)
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = [
    "INT_MIN",
    "INT_MAX",
    "MAX_PARALLELISM_UPPER_BOUND",
    "to_int32",
    "java_string_hash",
    "java_hash_code",
    "java_hash_code_cached",
    "register_java_hash",
    "bit_mix",
    "bit_mix_cached",
    "composite_hash",
    "murmur_hash",
    "key_group_for_hash",
    "key_group",
]

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
# Flink KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM (Short.MAX_VALUE + 1).
MAX_PARALLELISM_UPPER_BOUND = 1 << 15

# Extension point for key/namespace types beyond int, str and bool: a function
# returning the Java hashCode of a value. Never falls back to hash().
_EXTRA_HASHES: dict[type, Callable[[Any], int]] = {}

# String.hashCode is a loop in Python; keys repeat, so the hot path
# (java_hash_code_cached) memoises (the cache only speeds things up, the value
# is still Java's).
_STR_CACHE: dict[str, int] = {}
_STR_CACHE_LIMIT = 1 << 16


def to_int32(value: int) -> int:
    """Wrap an int to Java int32 (two's complement), like a Java ``(int)`` cast.

    >>> to_int32(2**31), to_int32(-1)
    (-2147483648, -1)

    post: INT_MIN <= __return__ <= INT_MAX
    post: (__return__ - value) % 2**32 == 0  # same value modulo 2**32: only the high bits are dropped
    """
    value &= _MASK32
    return value - 0x100000000 if value & 0x80000000 else value


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: ``h = 31*h + c`` over the UTF-16 code units, int32 wrap.

    >>> java_string_hash("Aa") == java_string_hash("BB") == 2112
    True

    post: INT_MIN <= __return__ <= INT_MAX
    post: (__return__ - _polynomial_hash(_utf16_units(s))) % 2**32 == 0  # sum of c[i] * 31**(n-1-i)
    """
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def _utf16_units(s: str) -> list[int]:
    """UTF-16 code units of ``s`` (a contract helper): characters above U+FFFF become surrogate pairs."""
    units = []
    for ch in s:
        c = ord(ch)
        if c > 0xFFFF:
            units += [0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF)]
        else:
            units.append(c)
    return units


def _polynomial_hash(units: list[int]) -> int:
    """``sum(c[i] * 31**(n-1-i))`` without wrapping (a contract helper)."""
    n = len(units)
    return sum(c * 31 ** (n - 1 - i) for i, c in enumerate(units))


def java_hash_code(value: Any) -> int:
    """The Java ``hashCode()`` of ``value`` as an int32.

    ``int`` in int32 range: the value (Integer.hashCode); other ints:
    Long.hashCode; ``str``: String.hashCode over UTF-16 code units; ``bool``:
    1231/1237. Other types need :func:`register_java_hash`.

    Pure (no memo): the contracts CrossHair checks call this one, and a cache
    on their path makes CrossHair see different paths for the same decisions.
    The maps' hot path uses :func:`java_hash_code_cached`.
    """
    t = type(value)
    if t is int:
        if INT_MIN <= value <= INT_MAX:
            return value
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise ValueError(f"java_hash_code: {value} does not fit a Java long")
        v = value & _MASK64
        return to_int32(v ^ (v >> 32))
    if t is str:
        return java_string_hash(value)
    return _other_hash_code(value, t, java_hash_code)


def java_hash_code_cached(value: Any) -> int:
    """:func:`java_hash_code` with strings memoised (``String.hashCode`` is a
    loop in Python and keys repeat; the cache holds only Java's values).

    >>> java_hash_code_cached("abc") == java_hash_code("abc") == 96354
    True
    """
    t = type(value)
    if t is int and INT_MIN <= value <= INT_MAX:
        return value
    if t is str:
        h = _STR_CACHE.get(value)
        if h is None:
            h = java_string_hash(value)
            if len(_STR_CACHE) >= _STR_CACHE_LIMIT:
                _STR_CACHE.clear()
            _STR_CACHE[value] = h
        return h
    return java_hash_code(value)


def _other_hash_code(value: Any, t: type, again: Callable[[Any], int]) -> int:
    fn = _EXTRA_HASHES.get(t)
    if fn is not None:
        return to_int32(fn(value))
    if t is bool:
        return 1231 if value else 1237
    if value is None:
        raise TypeError("java_hash_code: None has no hash code (Flink rejects null keys and namespaces)")
    for klass in t.__mro__:
        fn = _EXTRA_HASHES.get(klass)
        if fn is not None:
            return to_int32(fn(value))
    if isinstance(value, int):  # int subclasses other than bool
        return again(int(value))
    if isinstance(value, str):
        return again(str(value))
    raise TypeError(
        f"java_hash_code: no Java-compatible hash for type {t.__name__}; "
        f"register one with cowcheck.reference.hashing.register_java_hash({t.__name__}, fn)"
    )


def register_java_hash(klass: type, fn: Callable[[Any], int]) -> None:
    """Teach :func:`java_hash_code` a new type; ``fn(value)`` returns its Java hashCode."""
    _EXTRA_HASHES[klass] = fn


def bit_mix(h: int) -> int:
    """Murmur3 fmix32 in int32 arithmetic (Flink ``MathUtils.bitMix``).

    pre: INT_MIN <= h <= 0xFFFFFFFF  # an int32, or its 32 bits read unsigned (murmur_hash passes those)
    post: INT_MIN <= __return__ <= INT_MAX
    post: (__return__ == 0) == (h == 0)  # a bijection fixing 0: composite hash 0 means equal hash codes
    """
    h &= _MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - 0x100000000 if h & 0x80000000 else h


# bit_mix costs ~0.2 us per call in CPython and the map hashes on every keyed
# op, so memoise it. The cache only memoises Java arithmetic (a pure function
# of the int), so results never depend on it; it is bounded (~7 MB when full)
# and cleared when full. Clearing keeps the same dict, so
# ``bit_mix_cache_get`` stays valid.
_MIX_CACHE: dict[int, int] = {}
_MIX_CACHE_LIMIT = 1 << 16
bit_mix_cache_get = _MIX_CACHE.get


def bit_mix_cached(h: int) -> int:
    """:func:`bit_mix`, memoised.

    >>> bit_mix_cached(3) == bit_mix(3) == -2047822809
    True
    """
    mixed = _MIX_CACHE.get(h)
    if mixed is None:
        mixed = bit_mix(h)
        if len(_MIX_CACHE) >= _MIX_CACHE_LIMIT:
            _MIX_CACHE.clear()
        _MIX_CACHE[h] = mixed
    return mixed


def composite_hash(key: Any, namespace: Any) -> int:
    """The hash of a map entry: ``bit_mix(hashCode(key) ^ hashCode(namespace))``."""
    return bit_mix_cached(java_hash_code_cached(key) ^ java_hash_code_cached(namespace))


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur_hash(code: int) -> int:
    """Flink ``MathUtils.murmurHash(int)``: non-negative int32.

    pre: INT_MIN <= code <= INT_MAX
    post: 0 <= __return__ <= INT_MAX
    """
    c = code & _MASK32
    c = (c * 0xCC9E2D51) & _MASK32
    c = _rotl32(c, 15)
    c = (c * 0x1B873593) & _MASK32
    c = _rotl32(c, 13)
    c = (c * 5 + 0xE6546B64) & _MASK32
    c ^= 4
    c = bit_mix(c)
    if c >= 0:
        return c
    if c != INT_MIN:
        return -c
    return 0


def key_group_for_hash(key_hash: int, max_parallelism: int) -> int:
    """Flink ``computeKeyGroupForKeyHash``: ``murmur_hash(key_hash) % max_parallelism``.

    pre: INT_MIN <= key_hash <= INT_MAX
    pre: 0 < max_parallelism <= MAX_PARALLELISM_UPPER_BOUND
    post: 0 <= __return__ < max_parallelism
    """
    return murmur_hash(key_hash) % max_parallelism


def key_group(key: Any, max_parallelism: int) -> int:
    """Flink's key-group assignment: ``murmur_hash(hashCode(key)) % max_parallelism``.

    The contract covers int (Java Integer and Long) and str keys; the length
    bound only narrows what CrossHair explores.

    pre: 0 < max_parallelism <= MAX_PARALLELISM_UPPER_BOUND
    pre: isinstance(key, int) and _LONG_MIN <= key <= _LONG_MAX or isinstance(key, str) and len(key) <= 4
    post: 0 <= __return__ < max_parallelism
    post: __return__ == key_group(key, max_parallelism)  # deterministic: asked again, same group
    """
    if max_parallelism <= 0:
        raise ValueError(f"key_group: max_parallelism must be positive, got {max_parallelism}")
    return key_group_for_hash(java_hash_code(key), max_parallelism)
