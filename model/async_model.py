"""The oracle of docs/contract.md §12: records run one at a time, to completion, in arrival
order, against a plain dict; :class:`KeyOrder` says which orders of a key's records and
timers the contract allows.

A record program is a list of statements, each a list ``[op, *args]`` over the
record's own key (state names are strings, values ints):

- ``["add", s, d]`` / ``["add_in_accept", s, d]``: read s, write (read or 0) + d
- ``["sum", s1, s2, t]``: read s1, read s2, write t = (s1 or 0) + (s2 or 0)
- ``["read", s]``: read s
- ``["put", s, v]``: write v
- ``["clear", s]``: remove s

The two ``add`` forms differ only in how the controller is driven (a chain, or
a write fired from inside a callback); their meaning is the same.

>>> m = AsyncModel()
>>> m.run_record(7, [["add", "a", 2], ["sum", "a", "b", "b"]])
[None, 2, None]
>>> m.data
{(7, 'a'): 2, (7, 'b'): 2}
"""

from __future__ import annotations

__all__ = ["AsyncModel", "KeyOrder", "STATEMENT_ARITY"]

STATEMENT_ARITY = {"add": 2, "add_in_accept": 2, "sum": 3, "read": 1, "put": 2, "clear": 1}


class AsyncModel:
    """``data``: ``(key, state name) -> value``; absent means None."""

    def __init__(self) -> None:
        self.data: dict = {}

    def run_record(self, key, program) -> list:
        """Run one record to completion; the values it reads, in program order."""
        reads = []
        for op, *args in program:
            if op in ("add", "add_in_accept"):
                state, delta = args
                value = self.data.get((key, state))
                reads.append(value)
                self.data[(key, state)] = (value or 0) + delta
            elif op == "sum":
                first, second, target = args
                x, y = self.data.get((key, first)), self.data.get((key, second))
                reads += [x, y]
                self.data[(key, target)] = (x or 0) + (y or 0)
            elif op == "read":
                reads.append(self.data.get((key, args[0])))
            elif op == "put":
                self.data[(key, args[0])] = args[1]
            elif op == "clear":
                self.data.pop((key, args[0]), None)
            else:
                raise ValueError(f"unknown statement {op!r}")
        return reads


class KeyOrder:
    """Which record or timer of a key may start, and when (docs/contract.md §12, timers).

    Records (``arrive``) of a key start in arrival order. A timer (``fire``) takes
    its place in its key's order when it fires: after every record of its key
    that arrived before its non-record and every timer of its key fired before
    it, and before every record of its key that arrives after it fired. Records
    of its key that arrived after its non-record but before it fired (parallel
    epochs only) may go before or after it: that is the one freedom. Whatever
    the order, one at a time per key: a record or timer starts only when no
    other of its key is active. So serial mode defines one order; parallel mode
    allows exactly the interleavings of that freedom.

    Ids are the harness's record ids, in the order records arrive and timers
    fire. ``start(rid, finished)`` returns the problems (``(code, text)``) of
    starting ``rid`` now; ``finished(rid)`` says whether a started one has
    finished (all its work done).

    >>> order = KeyOrder()
    >>> order.arrive(0, "k"); order.fire(1, "k", before=1); order.arrive(2, "k")
    >>> order.start(0, finished=lambda rid: False)
    []
    >>> order.start(2, finished=lambda rid: True)  # r2 arrived after the timer r1 fired
    [('A1', 'r2 started before the earlier r1 of the same key')]
    """

    def __init__(self) -> None:
        self._records: dict = {}  # key -> ids of its records, in arrival order
        self._last_record: dict = {}  # key -> its last record
        self._last_timer: dict = {}  # key -> its last timer fired
        self._after: dict = {}  # id -> the ids it must start after (each finished first)
        self._key: dict = {}
        self._active: dict = {}  # key -> ids started and maybe not finished
        self._started: set = set()

    def arrive(self, rid: int, key) -> None:
        self._after[rid] = [p for p in (self._last_record.get(key), self._last_timer.get(key)) if p is not None]
        self._last_record[key] = rid
        self._records.setdefault(key, []).append(rid)
        self._key[rid] = key

    def fire(self, tid: int, key, before: int) -> None:
        """Timer ``tid`` fires on ``key``; its non-record came after the records ``< before``."""
        earlier = [r for r in self._records.get(key, ()) if r < before]
        self._after[tid] = [p for p in (earlier[-1] if earlier else None, self._last_timer.get(key)) if p is not None]
        self._last_timer[key] = tid
        self._key[tid] = key

    def after(self, rid: int) -> list:
        """The ids ``rid`` must start after."""
        return self._after[rid]

    def start(self, rid: int, finished) -> list:
        problems = []
        for p in self._after[rid]:
            if p not in self._started:
                problems.append(("A1", f"r{rid} started before the earlier r{p} of the same key"))
            elif not finished(p):
                problems.append(("A2", f"r{rid} started while r{p} of the same key was still active"))
        key = self._key[rid]
        active = [a for a in self._active.get(key, ()) if not finished(a)]
        problems += [("A2", f"r{rid} started while r{a} of the same key was still active") for a in active
                     if a not in self._after[rid]]
        self._active[key] = active + [rid]
        self._started.add(rid)
        return problems
