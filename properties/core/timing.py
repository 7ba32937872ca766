"""Where the time between a failure found and its verdict goes: seconds per phase of settling it.

Settling a failure (:mod:`cowcheck.core.settle`) replays its program many
times: to *confirm* it (a failure found through another path replayed call
by call), to *shrink* it, and to count its *replays* (how reliably it fails,
before and after shrinking). The functions that do the confirming and the
counting are marked with :func:`timed_as`; what the shrinking itself takes
is the rest of the settling. ``cowcheck check`` prints the split
(``time to the verdict``) and the kill table's benchmark reads it.

A phase inside another is charged to the inner one only, so the phases add
up to the time spent in them.

>>> reset()
>>> @timed_as("replays")
... def count(): return 3
>>> count(), sorted(taken())
(3, ['replays'])
"""

from __future__ import annotations

import functools
import time
from collections import Counter

__all__ = ["PHASES", "timed_as", "charged", "taken", "reset"]

PHASES = ("finding", "confirming", "shrinking", "replays")

_SECONDS: Counter = Counter()
_OPEN: list = []  # [phase, started, seconds charged to phases inside it] of the phases running, innermost last


class charged:
    """Context manager: the time inside it is ``phase``'s (less what phases inside it take)."""

    def __init__(self, phase: str) -> None:
        self.phase = phase

    def __enter__(self) -> "charged":
        _OPEN.append([self.phase, time.perf_counter(), 0.0])
        return self

    def __exit__(self, *exc) -> None:
        phase, started, inner = _OPEN.pop()
        spent = time.perf_counter() - started
        _SECONDS[phase] += spent - inner
        if _OPEN:
            _OPEN[-1][2] += spent


def timed_as(phase: str):
    """Decorator: every call of the function is ``phase``'s time."""
    def decorate(fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with charged(phase):
                return fn(*args, **kwargs)
        return timed
    return decorate


def taken() -> dict:
    """Seconds per phase since the last :func:`reset` (the phases that ran)."""
    return dict(_SECONDS)


def reset() -> None:
    _SECONDS.clear()
