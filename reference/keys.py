"""Key and namespace types of Flink's keyed state beyond Python's builtins, with Java's ``hashCode``.

Flink hands a state map keys of the job's key type and namespaces of the
state's namespace type; besides ``Integer``, ``Long`` and ``String`` (Python
``int`` and ``str``, docs/contract.md §2) three types are everyday:

- :class:`Tuple2` (``org.apache.flink.api.java.tuple.Tuple2``): a composite
  key, as ``keyBy`` on two fields makes; ``hashCode = 31 * h(f0) + h(f1)``
  (0 for a null field);
- :class:`TimeWindow` (``...streaming.api.windowing.windows.TimeWindow``): the
  namespace of window state; equal iff start and end are;
  ``hashCode = MathUtils.longToIntWithBitMixing(start + end)``;
- :data:`VOID_NAMESPACE` (``org.apache.flink.runtime.state.VoidNamespace``):
  the one namespace of non-windowed state, a singleton equal only to itself,
  ``hashCode = 99``.

Importing this module teaches :func:`cowcheck.reference.hashing.java_hash_code` these
types (its documented extension point), so their layouts match Flink's. Each also
answers ``hashCode()`` with that value, as the Java object does, so a map that
computes Java hash codes itself (a key's ``hashCode()`` where it has one) needs
nothing from cowcheck; Python's ``hash()`` of them is another number (salted for
strings, never a layout). All three are immutable; ``repr`` is the Python that
builds an equal value.

>>> from cowcheck.reference.hashing import java_hash_code
>>> java_hash_code(Tuple2(1, "a")), java_hash_code(VOID_NAMESPACE), java_hash_code(TimeWindow(0, 10))
(128, 99, -1456339591)
>>> Tuple2(1, "a").hashCode(), VOID_NAMESPACE.hashCode(), TimeWindow(0, 10).hashCode()
(128, 99, -1456339591)
"""

from __future__ import annotations

from cowcheck.reference.hashing import java_hash_code_cached, register_java_hash, to_int32

__all__ = ["Tuple2", "TimeWindow", "VoidNamespace", "VOID_NAMESPACE", "long_to_int_with_bit_mixing"]

_MASK64 = (1 << 64) - 1


class Tuple2:
    """Flink's ``Tuple2(f0, f1)``: fields compared with ``==``, ordered field by field."""

    __slots__ = ("f0", "f1")

    def __init__(self, f0, f1) -> None:
        self.f0 = f0
        self.f1 = f1

    def __eq__(self, other):
        if type(other) is not Tuple2:
            return NotImplemented
        return self.f0 == other.f0 and self.f1 == other.f1

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __lt__(self, other) -> bool:
        if type(other) is not Tuple2:
            return NotImplemented
        return (self.f0, self.f1) < (other.f0, other.f1)

    def __hash__(self) -> int:
        return hash((Tuple2, self.f0, self.f1))

    def hashCode(self) -> int:  # noqa: N802  (Java's name: what Flink's Tuple2.hashCode() returns)
        return _tuple2_hash(self)

    def __repr__(self) -> str:
        return f"Tuple2({self.f0!r}, {self.f1!r})"

    def __reduce__(self):
        return Tuple2, (self.f0, self.f1)


class TimeWindow:
    """Flink's ``TimeWindow(start, end)`` (milliseconds, Java longs)."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    def __eq__(self, other):
        if type(other) is not TimeWindow:
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __lt__(self, other) -> bool:
        if type(other) is not TimeWindow:
            return NotImplemented
        return (self.start, self.end) < (other.start, other.end)

    def __hash__(self) -> int:
        return hash((TimeWindow, self.start, self.end))

    def hashCode(self) -> int:  # noqa: N802  (Java's name: TimeWindow.hashCode())
        return long_to_int_with_bit_mixing(self.start + self.end)

    def __repr__(self) -> str:
        return f"TimeWindow({self.start!r}, {self.end!r})"

    def __reduce__(self):
        return TimeWindow, (self.start, self.end)


class VoidNamespace:
    """Flink's ``VoidNamespace``: one instance, :data:`VOID_NAMESPACE` (equal only to itself)."""

    __slots__ = ()
    _instance: "VoidNamespace | None" = None

    def __new__(cls) -> "VoidNamespace":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __lt__(self, other) -> bool:
        return False if type(other) is VoidNamespace else NotImplemented

    def hashCode(self) -> int:  # noqa: N802  (Java's name: VoidNamespace.hashCode())
        return 99

    def __repr__(self) -> str:
        return "VOID_NAMESPACE"

    def __reduce__(self):
        return "VOID_NAMESPACE"  # unpickles as this module's singleton


VOID_NAMESPACE = VoidNamespace()


def long_to_int_with_bit_mixing(value: int) -> int:
    """Flink ``MathUtils.longToIntWithBitMixing(long)`` (splitmix64's finaliser, then ``(int)``).

    >>> long_to_int_with_bit_mixing(0), long_to_int_with_bit_mixing(10)
    (0, -1456339591)
    """
    v = value & _MASK64
    v = ((v ^ (v >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    v = ((v ^ (v >> 27)) * 0x94D049BB133111EB) & _MASK64
    v ^= v >> 31
    return to_int32(v)


def _tuple2_hash(t: Tuple2) -> int:
    h0 = 0 if t.f0 is None else java_hash_code_cached(t.f0)
    h1 = 0 if t.f1 is None else java_hash_code_cached(t.f1)
    return to_int32(31 * h0 + h1)


register_java_hash(Tuple2, _tuple2_hash)
register_java_hash(TimeWindow, TimeWindow.hashCode)
register_java_hash(VoidNamespace, VoidNamespace.hashCode)
