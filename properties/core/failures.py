"""What a harness reports when the implementation under test breaks a property.

A :class:`Failure` has a stable ``kind`` (DIVERGENCE, INVARIANT, CRASH,
TIMEOUT), the ``code`` of the property or invariant it broke (``P1``..``P7``,
``I0``..``I9``, ``A1``..``A10``, ``C1``..``C5``, ``time-limit``), a message
naming operation, key, namespace, expected and actual, and the index of the
failing step. Tests assert ``(kind, code)``, never the wording.

Values the implementation hands back can be hostile (an ``__eq__`` or
``__repr__`` that raises, an iterator that never ends): :func:`safe_repr`
and :func:`safe_equal` never raise, so describing a failure never becomes a
failure of the suite.

>>> Failure(DIVERGENCE, "P1", "get(1, 0): model returned [1], map returned [2]", 3).headline()
'DIVERGENCE P1: get(1, 0): model returned [1], map returned [2]'
"""

from __future__ import annotations

import reprlib
from typing import Any

import attrs

__all__ = ["Failure", "CheckFailure", "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT", "KINDS", "TIME_LIMIT",
           "safe_repr", "safe_equal", "json_data", "COMPARISON_RAISED", "printable", "MAX_DATA_ITEMS", "MAX_DATA_DEPTH",
           "long_container", "short_beginning", "LONG"]

DIVERGENCE = "DIVERGENCE"
INVARIANT = "INVARIANT"
CRASH = "CRASH"
TIMEOUT = "TIMEOUT"
KINDS = (DIVERGENCE, INVARIANT, CRASH, TIMEOUT)

TIME_LIMIT = "time-limit"  # the code of a TIMEOUT: a step (or a whole walk) ran past its time limit


@attrs.frozen
class Failure:
    """What went wrong: a stable ``kind``, the property or invariant ``code``,
    a message naming op, key, namespace, expected and actual, and the index
    of the failing step."""

    kind: str
    code: str
    message: str
    step_index: int
    expected: Any = None
    actual: Any = None

    def headline(self) -> str:
        return f"{self.kind} {self.code}: {self.message}"


class CheckFailure(AssertionError):
    """A property or invariant broke; ``.failure`` says which and where."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.headline())
        self.failure = failure


MAX_DATA_ITEMS = 1_000_000  # values in a failure's expected or actual (a large map's listing is 5 * 10^5)
MAX_DATA_DEPTH = 32  # levels of nesting, likewise
_MAX_INT_BITS = 13_000  # ints JSON writes and Python reads back (4,300 digits at most: sys.int_info)


class _TooMuch(Exception):
    pass


def json_data(value: Any) -> Any:
    """``value`` as detached JSON data: tuples become lists, anything JSON cannot
    hold becomes its :func:`safe_repr` (a failure keeps no live object of the
    implementation, and printing it never runs the implementation's code).

    Only values of the built-in types themselves are taken apart (a subclass of
    list is not: its ``__iter__`` could raise or never end), at most
    :data:`MAX_DATA_ITEMS` values nested :data:`MAX_DATA_DEPTH` deep; a larger
    value is kept as a short description of its beginning.

    >>> json_data((1, [2, None], {"a": object}))[:2]
    [1, [2, None]]
    >>> json_data([float("nan"), {1: True}])
    ['nan', {'1': True}]
    """
    budget = [MAX_DATA_ITEMS]

    def plain(v, depth: int):
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DATA_DEPTH:
            raise _TooMuch
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if v.bit_length() <= _MAX_INT_BITS else safe_repr(v)
        if t is float:
            return v if v - v == 0 else safe_repr(v)  # NaN and the infinities are not JSON
        if t is list or t is tuple:
            return [plain(x, depth + 1) for x in v]
        if t is dict:
            out = {}
            for k, x in v.items():
                key = _json_key(k)
                if key is None:
                    return safe_repr(v)
                out[key] = plain(x, depth + 1)
            return out
        return safe_repr(v)

    if type(value) in _CONTAINERS and _larger_than(value, MAX_DATA_ITEMS):
        return _beginning(value)  # known at once (taking it apart first would cost as much again)
    try:
        return plain(value, 0)
    except (_TooMuch, RecursionError):
        return _beginning(value)


def _beginning(value) -> str:
    """A short description of a large container of the built-in types: its first items, nested a
    few levels, and its length (never the whole, however large)."""
    try:
        text = _SHORT.repr(value)
    except Exception:
        return safe_repr(value)
    return long_container(type(value).__name__, len(value), text) if type(value) in _CONTAINERS else text


def _json_key(k) -> str | None:
    """The string JSON makes of dict key ``k`` (as ``json.dumps`` does), or None if it makes none."""
    t = type(k)
    if t is str:
        return k
    if k is None or t is bool:
        return {None: "null", True: "true", False: "false"}[k]
    if t is int and k.bit_length() <= _MAX_INT_BITS:
        return str(k)
    if t is float and k - k == 0:
        return repr(k)
    return None


LONG = 10_000  # items in all past which a value of the built-in containers is not repr()'d whole
_CONTAINERS = (list, tuple, dict, set, frozenset)
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxset, _SHORT.maxfrozenset = 6, 6, 6, 6, 6, 6
_SHORT.maxstring, _SHORT.maxlong, _SHORT.maxother = 60, 60, 60


def long_container(type_name: str, length: int, beginning: str) -> str:
    """How a failure shows a container too large to print whole (or to carry across processes):
    its beginning and its length. The same text whether the value was read in cowcheck's
    process (:func:`safe_repr`) or only its beginning reached it from the implementation's
    (``cowcheck.core.wire.Oversized``).

    >>> long_container("list", 50_000_000, "[0, 0, 0, 0, 0, 0, ...]")
    '[0, 0, 0, 0, 0, 0, ...] (list of 50,000,000 items)'
    """
    return f"{beginning} ({type_name} of {length:,} item{'' if length == 1 else 's'})"


def short_beginning(value) -> str:
    """The first items of a container, nested a few levels (never the whole, however large)."""
    return _SHORT.repr(value)


def _larger_than(value, budget: int) -> bool:
    """Whether ``value``'s containers of the built-in types hold more than ``budget`` items in all
    (a self-containing or very deep value is: each level counts)."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t in _CONTAINERS:
            budget -= len(v) + 1
            if budget < 0:
                return True
            stack.extend(v.values() if t is dict else v)
    return False


def safe_repr(value: Any, limit: int = 400) -> str:
    """``repr(value)``, or a description of it if its ``__repr__`` raises; at most ``limit`` characters.
    A value of the built-in containers holding more than :data:`LONG` items in all is shown by its
    beginning (and, at the top, its length): a repr of the whole would cost time and memory in
    proportion.

    >>> class Hostile:
    ...     def __repr__(self): raise RuntimeError("no")
    >>> safe_repr(Hostile())
    '<Hostile object whose __repr__ raised RuntimeError>'
    >>> safe_repr([7] * 10**8)
    '[7, 7, 7, 7, 7, 7, ...] (list of 100,000,000 items)'
    """
    t = type(value)
    if t in _CONTAINERS and _larger_than(value, LONG):
        try:
            text = _SHORT.repr(value)
            text = long_container(t.__name__, len(value), text) if len(value) > 6 else text
        except Exception as exc:
            text = f"<{t.__name__} of {len(value):,} items whose beginning's repr raised {type(exc).__name__}>"
        return text if len(text) <= limit else text[: limit - 1] + "…"
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
    except Exception as exc:
        text = f"<{type(value).__name__} object whose __repr__ raised {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


COMPARISON_RAISED = object()  # what safe_equal returns when comparing raised


def safe_equal(expected: Any, actual: Any):
    """``expected == actual`` as a bool, or :data:`COMPARISON_RAISED` if the
    comparison (a hostile ``__eq__`` on either side) raised or returned
    something that is not a truth value."""
    try:
        return bool(expected == actual)
    except Exception:
        return COMPARISON_RAISED


def printable(text: str, keep: str = "") -> str:
    r"""``text`` with every character that is not printable (control characters such as
    the ESC of terminal escape sequences and carriage returns, line separators, lone
    surrogates...) shown as its Python escape, except those in ``keep``: text from a
    file, on a terminal or in a generated comment, cannot move the cursor, end a
    line or forge output.

    >>> print(printable("ok\x1b[2K\r passes"))
    ok\x1b[2K\r passes
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else ascii(ch)[1:-1] for ch in text)
