"""Cyclic garbage collected once the process has grown by a quarter of a GiB.

Python frees a value when its last reference goes, except inside reference
cycles, which wait for the cycle collector; and the collector runs after so
many objects are made, not after so many bytes. An implementation's program
that leaves a cycle behind (a map whose snapshot points back at it, an
exception kept with its frames) while holding a few very large values (a
state of millions of items) makes few objects and many bytes: run after run,
they would pile up. :func:`collect_if_grown` runs as each program's
implementation is built (``cowcheck.core.boundary.build``: every walk,
Hypothesis example and replay), so what a run holds stays bounded by what one
program holds.
"""

from __future__ import annotations

import gc
import os

__all__ = ["collect_if_grown", "GROWTH"]

GROWTH = 256 << 20  # bytes the process may grow by before the next collection
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_BASE = [None]  # resident bytes after the last collection (or the lowest seen since)


def _resident() -> int | None:
    """The process's resident bytes (Linux: /proc/self/statm), or None where that cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def collect_if_grown() -> bool:
    """Run the cycle collector if the process grew by :data:`GROWTH` since it last ran here;
    whether it ran. About 10 us when it does not.

    >>> collect_if_grown() in (True, False)
    True
    """
    now = _resident()
    if now is None:
        return False
    base = _BASE[0]
    if base is None or now < base:
        _BASE[0] = now
        return False
    if now - base <= GROWTH:
        return False
    gc.collect()
    _BASE[0] = _resident() or now
    return True
