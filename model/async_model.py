"""The oracle of docs/contract.md §12: records run one at a time, to completion, in arrival
order, against a plain dict.

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

__all__ = ["AsyncModel", "STATEMENT_ARITY"]

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
