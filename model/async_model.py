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
    """Which record or timer of a key may start, and when (docs/contract.md §12, A1).

    A key's records and timers start in the order they *enter the key's queue*, one at a
    time. A record enters when its first request is admitted (``arrive`` when it arrives,
    ``entered`` once that call has returned: in between it may be draining for capacity);
    a timer enters when it fires (``fire``), after every record of its key that has entered
    and every timer of its key fired before it, and before every record of its key that
    enters later, including one that was still draining for capacity when the timer fired.
    In serial mode every record has entered before a watermark's timers fire; in parallel
    mode the moment the trigger fires decides where its timers go among the next epoch's
    records, and the harness sees that moment: so the order is defined in both modes, and
    every allowed interleaving of epochs is accepted.

    Ids are the harness's record ids (records and timers, in the order they arrive or fire).
    ``start(rid, finished)`` returns the problems (``(code, text)``) of starting ``rid``
    now; ``finished(rid)`` says whether a started one has finished (all its work done).

    >>> order = KeyOrder()
    >>> order.arrive(0, "k"); order.entered(0)
    >>> order.arrive(1, "k")                     # draining for capacity when the timer fires
    >>> order.fire(2, "k"); order.entered(1)
    >>> order.start(0, finished=lambda rid: True)
    []
    >>> order.start(1, finished=lambda rid: True)
    [('A1', 'r1 started before the earlier r2 of the same key')]
    """

    def __init__(self) -> None:
        self._last_entered: dict = {}  # key -> its last record or timer in the queue
        self._arriving: dict = {}  # key -> its records arriving (not entered yet)
        self._after: dict = {}  # id -> the ids it must start after (each finished first)
        self._key: dict = {}
        self._active: dict = {}  # key -> ids started and maybe not finished
        self._started: set = set()

    def arrive(self, rid: int, key) -> None:
        last = self._last_entered.get(key)
        self._after[rid] = [] if last is None else [last]
        self._arriving.setdefault(key, []).append(rid)
        self._key[rid] = key

    def entered(self, rid: int) -> None:
        """Record ``rid``'s arrival call returned: it is in its key's queue (or running)."""
        key = self._key[rid]
        self._arriving[key].remove(rid)
        self._last_entered[key] = rid

    def fire(self, tid: int, key) -> None:
        last = self._last_entered.get(key)
        self._after[tid] = [] if last is None else [last]
        self._last_entered[key] = tid
        self._key[tid] = key
        for rid in self._arriving.get(key, ()):
            self._after[rid].append(tid)  # it enters after the timer

    def arriving(self, key) -> list:
        """The records of ``key`` that have arrived but not entered its queue yet."""
        return self._arriving.get(key, [])

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
