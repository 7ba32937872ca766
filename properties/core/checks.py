"""Checks of step arguments read from a file (``Operation.check``), built from small parts.

Arguments in a counterexample file are data someone else may have written:
an argument outside what the machines generate (a string where an id goes,
an int no serializer writes, a time step of a year) must be bad input
(exit 2), never a failure blamed on the implementation nor an error of
cowcheck. Each machine's ``ops.py`` declares, per argument, what it accepts:

>>> check = arguments(int_in(0, 9), list_of(int_in(-1, 1), 3))
>>> check((3, [0, 1])) is None
True
>>> check((3, [0, 2]))
'argument 2: item 1: expected an int in [-1, 1], got 2'
>>> check((True, []))
'argument 1: expected an int in [0, 9], got True'
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["Check", "arguments", "int_in", "list_of", "one_of", "name_like", "INT32", "INT64"]

Check = Callable[[object], "str | None"]

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


def int_in(lo: int, hi: int) -> Check:
    """An int (not a bool) in ``[lo, hi]``."""
    def check(value):
        if type(value) is not int or not lo <= value <= hi:
            return f"expected an int in [{lo}, {hi}], got {value!r:.40}"
        return None
    return check


def list_of(item: Check, max_length: int, min_length: int = 0) -> Check:
    """A list of ``min_length`` to ``max_length`` items, each passing ``item``."""
    def check(value):
        if not isinstance(value, list) or not min_length <= len(value) <= max_length:
            return f"expected a list of {min_length} to {max_length} items, got {value!r:.60}"
        for i, x in enumerate(value):
            problem = item(x)
            if problem:
                return f"item {i}: {problem}"
        return None
    return check


def one_of(*choices) -> Check:
    def check(value):
        return None if any(value == c and type(value) is type(c) for c in choices) else \
            f"expected one of {', '.join(map(repr, choices))}, got {value!r:.40}"
    return check


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


def name_like(value) -> str | None:
    """A short identifier (a state name)."""
    return None if isinstance(value, str) and _NAME.match(value) else f"expected a name like 'a', got {value!r:.40}"


def arguments(*checks: Check) -> Callable[[tuple], "str | None"]:
    """``Operation.check`` from one check per argument, in order."""
    def check(args: tuple):
        for i, (one, value) in enumerate(zip(checks, args), 1):
            problem = one(value)
            if problem:
                return f"argument {i}: {problem}"
        return None
    return check
