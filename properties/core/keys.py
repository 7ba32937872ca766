"""The keys and namespaces the machines hand an implementation: families, fresh objects, files.

A map in Flink holds keys of one type and namespaces of one type (the key and
namespace serializers of its state), and every key it is handed has just
been deserialized: a **fresh object** equal to earlier ones, never the same
instance. CPython caches small ints (-5..256) and one-character strings, so a
suite that draws keys 0..31 hands the map the very same objects every time
and a map comparing keys by identity (Java's ``==`` on boxed Integers) passes.

A :class:`Family` is one type of key or namespace with its whole range
(docs/contract.md §17): ``int`` (Java ``Integer``, the int32 range: negatives, extremes,
values sharing low bits), ``long`` (beyond int32), ``string`` (ASCII,
accented, CJK, non-BMP, lone surrogates, pairs with equal ``hashCode`` such
as "Aa"/"BB"), ``tuple`` (:class:`~cowcheck.reference.keys.Tuple2`, a composite key
through the ``java_hash_code`` extension point), and for namespaces ``void``
(Flink's ``VoidNamespace`` singleton), ``int`` and ``window``
(:class:`~cowcheck.reference.keys.TimeWindow`). Each family draws values (seeded
walks: :meth:`Family.draw`; Hypothesis: :meth:`Family.strategy`), numbers a
bulk sequence (:meth:`Family.nth`), proposes simpler values for the shrinker
(small ints, short strings), checks values read from a file, and names the
serializer ``write_state`` is handed.

:func:`fresh` makes the new equal object a step passes to the
implementation; :func:`encode_value`/:func:`decode_value` carry the
non-JSON types through counterexample files as tagged objects
(``{"Tuple2": [1, "a"]}``), never as code.

>>> k = 1000; fresh(k) == k and fresh(k) is not k
True
>>> decode_value(encode_value(Tuple2(-7, "日本")))
Tuple2(-7, '日本')
>>> family_of("Aa").name, family_of(2**40).name, family_of(VOID_NAMESPACE).name
('string', 'long', 'void')
"""

from __future__ import annotations

import random
from typing import Any, Callable

from cowcheck.reference.hashing import INT_MAX, INT_MIN, to_int32
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2, VoidNamespace
from cowcheck.reference.serializers import (IntSerializer, LongSerializer, StringSerializer, TimeWindowSerializer,
                                   Tuple2Serializer, VoidNamespaceSerializer)

__all__ = ["Family", "FAMILIES", "INT", "KEY_FAMILIES", "NAMESPACE_FAMILIES", "families_of", "family_of", "fresh",
           "pinned",
           "encode_value",
           "decode_value", "nth_key", "magnitude", "serializers_for", "LONG_MIN", "LONG_MAX", "Tuple2",
           "TimeWindow", "VOID_NAMESPACE"]

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# ------------------------------------------------------------------ fresh objects


def _fresh_int(v: int) -> int:
    return v if -5 <= v <= 256 else v + 0  # outside CPython's small-int cache, + 0 allocates


def _fresh_str(s: str) -> str:
    if len(s) > 1:
        return s[:1] + s[1:]
    if s and ord(s) > 255:
        return chr(ord(s))  # CPython caches "" and one Latin-1 character only
    return s


def pinned(value) -> bool:
    """Whether ``value`` is one CPython keeps a single object of, so :func:`fresh` returns it as it
    is: ints -5..256, ``""`` and one Latin-1 character, bools, ``None``, ``VOID_NAMESPACE``. A bridge to
    another language hands a map one object per such value (it cannot tell a held key from a fresh one).

    >>> [pinned(v) for v in (256, 257, "é", "日", True, VOID_NAMESPACE, Tuple2(1, "a"))]
    [True, False, True, False, True, True, False]
    """
    t = type(value)
    if t is int:
        return -5 <= value <= 256
    if t is str:
        return not value or (len(value) == 1 and ord(value) < 256)
    return t is bool or value is None or value is VOID_NAMESPACE


_FRESH: dict[type, Callable[[Any], Any]] = {
    int: _fresh_int,
    str: _fresh_str,
    Tuple2: lambda t: Tuple2(fresh(t.f0), fresh(t.f1)),
    TimeWindow: lambda w: TimeWindow(_fresh_int(w.start), _fresh_int(w.end)),
}


def fresh(value):
    """A new object equal to ``value``, as deserializing it would give (singletons stay themselves)."""
    make = _FRESH.get(type(value))
    return make(value) if make is not None else value


# ------------------------------------------------------------------ families

# Characters strings are drawn from: ASCII, accented Latin, CJK, non-BMP (surrogate pairs in
# UTF-16), and lone surrogates (which Java's String holds and UTF-8 cannot encode).
_ASCII = "abcAB01 _"
_ACCENTED = "éüØñçß"
_CJK = "日本語中文"
_NON_BMP = "😀𝄞𠀋"
_LONE = "\ud800\udbff\udc00\udfff"
_ALPHABET = _ASCII + _ACCENTED + _CJK + _NON_BMP + _LONE
# Strings whose Java hashCode is equal ("Aa" and "BB" both 2112, and their concatenations).
_COLLIDING = ("Aa", "BB", "AaAa", "AaBB", "BBAa", "BBBB")
_NTH_ALPHABET = "aé日😀Zü中𝄞b\ud800Ø語cßñ文"  # the bulk sequence's digits (no low surrogate: see _canonical)


def _canonical(s: str) -> str:
    """``s`` with every high surrogate followed by a low one joined into the character they
    encode: in UTF-16, as Java holds strings, the two are the same string."""
    return s.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


class Family:
    """One type of key or namespace. ``role``: ``key``, ``namespace`` or ``both``
    (which generators draw it for; a file may use any family for either)."""

    def __init__(self, name: str, role: str, check: Callable[[Any], bool], draw: Callable[[random.Random], Any],
                 nth: Callable[[int], Any], simpler: Callable[[Any], list], serializer: Callable[[], Any],
                 strategy: Callable[[], Any], describe: str) -> None:
        self.name, self.role, self.describe = name, role, describe
        self._check, self._draw, self._nth, self._simpler = check, draw, nth, simpler
        self._serializer, self._strategy = serializer, strategy

    def __repr__(self) -> str:
        return f"<family {self.name}>"

    def holds(self, value) -> bool:
        """Whether ``value`` is of this family."""
        return self._check(value)

    def draw(self, r: random.Random):
        """One value, special values often, else anywhere in the family's range."""
        return self._draw(r)

    def nth(self, i: int):
        """The ``i``-th value (``i >= 0``) of the family's bulk sequence: distinct for distinct ``i``."""
        return self._nth(i)

    def simpler(self, value) -> list:
        """Simpler values than ``value`` (shrinking), simplest first; each strictly simpler."""
        return self._simpler(value)

    def serializer(self):
        """Flink's serializer of the family (what ``write_state`` is handed)."""
        return self._serializer()

    def strategy(self):
        """A Hypothesis strategy over the family."""
        return self._strategy()


def _is_int(v) -> bool:
    return type(v) is int and INT_MIN <= v <= INT_MAX


def _is_long(v) -> bool:
    return type(v) is int and LONG_MIN <= v <= LONG_MAX and not INT_MIN <= v <= INT_MAX


def _is_str(v) -> bool:
    return type(v) is str and _canonical(v) == v


_INT_SPECIALS = (0, 1, -1, 2, 7, 8, 16, 255, 256, 257, -5, -6, 1000, 65535, 65536, -65536, INT_MAX, INT_MIN,
                 INT_MAX - 1, INT_MIN + 1, 1 << 30, -(1 << 30), 99)


def _draw_int(r: random.Random) -> int:
    pick = r.random()
    if pick < 0.3:
        return r.randrange(32)
    if pick < 0.5:
        return _INT_SPECIALS[r.randrange(len(_INT_SPECIALS))]
    if pick < 0.75:  # values sharing their low bits: one bucket in small tables, apart in large ones
        return to_int32((r.getrandbits(24) << 8) | r.randrange(4))
    return r.randint(INT_MIN, INT_MAX)


def _simpler_int(v: int) -> list:
    """Toward 0 by magnitude: 0, the low bits (same bucket in small tables), half, the positive."""
    out = []
    for c in (0, v & 7, v & 0xFF, int(v / 2), -v):
        if _is_int(c) and (abs(c), c < 0) < (abs(v), v < 0) and c not in out:
            out.append(c)
    return out


_LONG_SPECIALS = (INT_MAX + 1, INT_MIN - 1, 1 << 32, (1 << 32) + 1, -(1 << 32), LONG_MAX, LONG_MIN, LONG_MAX - 1,
                  (1 << 40) + 7, -(1 << 40) - 7, 3 << 32)


def _draw_long(r: random.Random) -> int:
    pick = r.random()
    if pick < 0.3:
        return _LONG_SPECIALS[r.randrange(len(_LONG_SPECIALS))]
    if pick < 0.5:  # the same Long.hashCode as a small value: v ^ (v >>> 32) keeps its low half
        low = r.randrange(32)
        high = r.randrange(1, 1 << 8)
        return (high << 32) | (low ^ high)
    v = r.getrandbits(r.randrange(32, 63))
    v = v if v > INT_MAX else v + (1 << 31)
    return -v if r.random() < 0.3 else v


def _simpler_long(v: int) -> list:
    """Toward the smallest longs (just past int32), by magnitude."""
    out = []
    for c in (INT_MAX + 1, INT_MIN - 1, int(v / 2), -v):
        if _is_long(c) and (abs(c), c < 0) < (abs(v), v < 0) and c not in out:
            out.append(c)
    return out


_STRING_SPECIALS = ("", "a", "Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "é", "日本", "😀", "\ud800", "\udfff",
                    "a\ud800b", "key", "Ωmega")


def _draw_str(r: random.Random) -> str:
    pick = r.random()
    if pick < 0.35:
        return _STRING_SPECIALS[r.randrange(len(_STRING_SPECIALS))]
    if pick < 0.5:
        return "".join(_COLLIDING[r.randrange(2)] for _ in range(r.randrange(1, 4)))
    return _canonical("".join(_ALPHABET[r.randrange(len(_ALPHABET))] for _ in range(r.randrange(0, 7))))


def _simpler_str(s: str) -> list:
    """Shorter strings first, then plainer characters; each strictly simpler (length, then code points)."""
    out = []
    candidates = ["", s[:len(s) // 2], s[:-1], s[1:]]
    plain = next((i for i, c in enumerate(s) if c not in "ab"), None)
    if plain is not None:
        candidates.append(s[:plain] + "a" + s[plain + 1:])
    for c in map(_canonical, candidates):
        if (len(c), [ord(x) for x in c]) < (len(s), [ord(x) for x in s]) and c not in out:
            out.append(c)
    return out


def _is_tuple(v) -> bool:
    return type(v) is Tuple2 and _is_int(v.f0) and _is_str(v.f1)


def _draw_tuple(r: random.Random) -> Tuple2:
    return Tuple2(_draw_int(r) if r.random() < 0.5 else r.randrange(16), _draw_str(r))


def _simpler_tuple(t: Tuple2) -> list:
    return [Tuple2(f0, t.f1) for f0 in _simpler_int(t.f0)] + [Tuple2(t.f0, f1) for f1 in _simpler_str(t.f1)]


def _is_window(v) -> bool:
    return type(v) is TimeWindow and all(type(x) is int and LONG_MIN <= x <= LONG_MAX for x in (v.start, v.end))


_WINDOW_SIZES = (1, 1000, 60_000, 3_600_000)


def _draw_window(r: random.Random) -> TimeWindow:
    size = _WINDOW_SIZES[r.randrange(len(_WINDOW_SIZES))]
    pick = r.random()
    if pick < 0.5:
        start = r.randrange(8) * size
    elif pick < 0.8:
        start = (1_700_000_000_000 // size + r.randrange(16)) * size  # an epoch-like timestamp
    else:
        start = r.choice((LONG_MIN, -size, LONG_MAX - size))
    return TimeWindow(start, start + size)


def _simpler_window(w: TimeWindow) -> list:
    out = []
    size = w.end - w.start
    for c in (TimeWindow(0, 1), TimeWindow(0, size) if 0 < size <= LONG_MAX else None,
              TimeWindow(w.start // 2, w.start // 2 + size) if 0 < size and w.start else None):
        if c is not None and _is_window(c) and (abs(c.start), abs(c.end)) < (abs(w.start), abs(w.end)) \
                and c not in out:
            out.append(c)
    return out


def _nth_int(i: int) -> int:
    return to_int32(i * 0x9E3779B1)  # odd multiplier: a bijection of the 32-bit values, spread over the range


def _nth_str(i: int) -> str:
    """Bijective base-len(alphabet) numeral of i + 1: distinct strings, short, of every kind of character."""
    n, base, out = i + 1, len(_NTH_ALPHABET), []
    while n:
        n, digit = divmod(n - 1, base)
        out.append(_NTH_ALPHABET[digit])
    return "".join(out)


def _strategy_int():
    from hypothesis import strategies as st
    return st.one_of(st.integers(0, 31), st.sampled_from(_INT_SPECIALS), st.integers(INT_MIN, INT_MAX))


def _strategy_long():
    from hypothesis import strategies as st
    return st.one_of(st.sampled_from(_LONG_SPECIALS), st.integers(INT_MAX + 1, LONG_MAX),
                     st.integers(LONG_MIN, INT_MIN - 1))


def _strategy_str():
    from hypothesis import strategies as st
    return st.one_of(st.sampled_from(_STRING_SPECIALS),
                     st.text(st.sampled_from(_ALPHABET), max_size=6).map(_canonical),
                     st.lists(st.sampled_from(_COLLIDING[:2]), min_size=1, max_size=3).map("".join))


def _strategy_tuple():
    from hypothesis import strategies as st
    return st.builds(Tuple2, st.one_of(st.integers(0, 15), _strategy_int()), _strategy_str())


def _strategy_window():
    from hypothesis import strategies as st
    return st.builds(lambda k, size: TimeWindow(k * size, (k + 1) * size), st.integers(0, 7),
                     st.sampled_from(_WINDOW_SIZES))


def _strategy_void():
    from hypothesis import strategies as st
    return st.just(VOID_NAMESPACE)


INT = Family("int", "both", _is_int, _draw_int, _nth_int, _simpler_int, IntSerializer, _strategy_int,
             "Java Integer: the int32 range")
LONG = Family("long", "key", _is_long, _draw_long, lambda i: 3 * (1 << 32) + i * 7919, _simpler_long,
              LongSerializer, _strategy_long, "Java Long beyond int32")
STRING = Family("string", "key", _is_str, _draw_str, _nth_str, _simpler_str, StringSerializer, _strategy_str,
                "Java String: ASCII, accented, CJK, non-BMP, lone surrogates, equal hashCodes")
TUPLE = Family("tuple", "key", _is_tuple, _draw_tuple, lambda i: Tuple2(_nth_int(i), _nth_str(i % 11)),
               _simpler_tuple, lambda: Tuple2Serializer(IntSerializer(), StringSerializer()), _strategy_tuple,
               "Tuple2(int, string): a composite key")
VOID = Family("void", "namespace", lambda v: v is VOID_NAMESPACE, lambda r: VOID_NAMESPACE,
              lambda i: VOID_NAMESPACE, lambda v: [], VoidNamespaceSerializer, _strategy_void,
              "VoidNamespace: the singleton of non-windowed state")
WINDOW = Family("window", "namespace", _is_window, _draw_window,
                lambda i: TimeWindow(i * 60_000, (i + 1) * 60_000), _simpler_window, TimeWindowSerializer,
                _strategy_window, "TimeWindow(start, end): window state")

FAMILIES: dict[str, Family] = {f.name: f for f in (INT, LONG, STRING, TUPLE, VOID, WINDOW)}
KEY_FAMILIES = tuple(f for f in FAMILIES.values() if f.role in ("key", "both"))
NAMESPACE_FAMILIES = tuple(f for f in FAMILIES.values() if f.role in ("namespace", "both"))
_OF_ROLE = {"key": KEY_FAMILIES, "namespace": NAMESPACE_FAMILIES}


def families_of(role: str, names=None) -> tuple:
    """The families of ``role`` (``key`` or ``namespace``) that a run draws from: those named by
    ``names`` (in the order of :data:`KEY_FAMILIES` or :data:`NAMESPACE_FAMILIES`), or all of them
    for None. ValueError for a name that is not a family of that role, or for no name at all.

    >>> [f.name for f in families_of("key", ("string", "int"))], len(families_of("namespace"))
    (['int', 'string'], 3)
    """
    every = _OF_ROLE[role]
    if names is None:
        return every
    known = {f.name for f in every}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"{role} families are {', '.join(sorted(known))} (one or more, comma-separated); got "
                         f"{', '.join(map(repr, unknown)) if unknown else 'none'}")
    return tuple(f for f in every if f.name in names)


def family_of(value) -> Family | None:
    """The family ``value`` belongs to, or None (a type no family holds)."""
    t = type(value)
    if t is int:
        return INT if INT_MIN <= value <= INT_MAX else LONG if LONG_MIN <= value <= LONG_MAX else None
    if t is str:
        return STRING if _canonical(value) == value else None
    if t is Tuple2:
        return TUPLE if _is_tuple(value) else None
    if t is TimeWindow:
        return WINDOW if _is_window(value) else None
    if value is VOID_NAMESPACE:
        return VOID
    return None


def nth_key(family: str, i: int):
    """The ``i``-th key of ``family``'s bulk sequence (``put_range`` and friends)."""
    return FAMILIES[family].nth(i)


def serializers_for(key, namespace) -> tuple:
    """Flink's serializers of a key and a namespace, by their families (int for unknown types)."""
    kf, nf = family_of(key), family_of(namespace)
    return (kf or INT).serializer(), (nf or INT).serializer()


def magnitude(value) -> str:
    """What kind of value of its family ``value`` is (state-space coverage)."""
    t = type(value)
    if t is int:
        if -5 <= value <= 256:
            return "int, cached by CPython (-5..256)"
        if INT_MIN <= value <= INT_MAX:
            return "int, negative" if value < 0 else "int, > 256"
        return "long, beyond int32"
    if t is str:
        if not value:
            return "string, empty"
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            return "string, lone surrogate"
        if any(ord(c) > 0xFFFF for c in value):
            return "string, non-BMP"
        if any(ord(c) > 0x7F for c in value):
            return "string, non-ASCII"
        return "string, ASCII"
    if t is Tuple2:
        return "Tuple2"
    if t is TimeWindow:
        return "TimeWindow"
    if value is VOID_NAMESPACE:
        return "VoidNamespace"
    return type(value).__name__


# ------------------------------------------------------------------ files

_TAGS = {"Tuple2": 2, "TimeWindow": 2, "VoidNamespace": 0}


def encode_value(value):
    """``value`` as JSON data: the key types beyond JSON as one-key tagged objects."""
    t = type(value)
    if t is list or t is tuple:
        return [encode_value(v) for v in value]
    if t is Tuple2:
        return {"Tuple2": [encode_value(value.f0), encode_value(value.f1)]}
    if t is TimeWindow:
        return {"TimeWindow": [value.start, value.end]}
    if t is VoidNamespace:
        return {"VoidNamespace": []}
    return value


def decode_value(data):
    """The value :func:`encode_value` wrote; ValueError for an object that is not one of its tags."""
    t = type(data)
    if t is list:
        return [decode_value(v) for v in data]
    if t is not dict:
        return data
    if len(data) != 1:
        raise ValueError(f"a value object has exactly one of the keys {', '.join(_TAGS)}, got {data!r:.80}")
    (tag, fields), = data.items()
    if tag not in _TAGS or not isinstance(fields, list) or len(fields) != _TAGS[tag]:
        raise ValueError(f"not a value object: {data!r:.80} (known: Tuple2 [f0, f1], TimeWindow [start, end], "
                         f"VoidNamespace [])")
    if tag == "VoidNamespace":
        return VOID_NAMESPACE
    if tag == "TimeWindow":
        if not all(type(x) is int and LONG_MIN <= x <= LONG_MAX for x in fields):
            raise ValueError(f"TimeWindow start and end must be Java longs, got {fields!r:.80}")
        return TimeWindow(*fields)
    f0, f1 = (decode_value(v) for v in fields)
    for f in (f0, f1):
        if family_of(f) is None or type(f) is list:
            raise ValueError(f"Tuple2 fields must be ints, longs or strings, got {f!r:.60}")
    return Tuple2(f0, f1)
