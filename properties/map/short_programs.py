"""Short programs for the model-vs-implementation property, from primitive strategies.

A program here is a short list of ``(op, key, namespace, value)`` tuples of
small ints, so that any Hypothesis backend can drive it, CrossHair's
symbolic one included (``--hypothesis-profile=crosshair``, see
docs/crosshair.md): each int is a symbolic value CrossHair can branch on.
:func:`decode` turns the tuples into :class:`~cowcheck.core.program.Step` s
(snapshots get ids in order, a release picks one of the live snapshots,
every live snapshot is read at the end) and :func:`run_program` applies them
through the :class:`~cowcheck.map.harness.Harness`, which raises
``CheckFailure`` on the first broken property or invariant.

>>> [str(s.op) for s in decode([(0, 1, 0, 5), (7, 0, 0, 0), (1, 1, 0, 0)])]
['put', 'snapshot', 'get', 'read_snapshot']
"""

from __future__ import annotations

import copy
from typing import Callable

from hypothesis import strategies as st

from cowcheck.core.program import Step
from cowcheck.map.harness import Harness

__all__ = ["OPS", "short_programs", "decode", "run_program"]

# Op codes of a program tuple, in the order their codes are drawn.
OPS = ("put", "get", "get_mutate", "remove", "remove_and_get_old", "put_and_get_old", "transform",
       "snapshot", "release", "rehash")


def short_programs(max_steps: int = 12, keys: int = 6, namespaces: int = 3) -> st.SearchStrategy:
    """Lists of at most ``max_steps`` op tuples; keys equal to namespaces hash
    to 0, so small key spaces build chains in bucket 0."""
    op = st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, keys - 1), st.integers(0, namespaces - 1),
                   st.integers(0, 9))
    return st.lists(op, max_size=max_steps)


def decode(ops) -> list[Step]:
    """The steps of a program of op tuples (see the module docstring)."""
    steps: list[Step] = []
    live: list[int] = []
    for code, key, namespace, value in ops:
        op = OPS[code]
        if op == "snapshot":
            sid = len([s for s in steps if s.op == "snapshot"])
            steps.append(Step("snapshot", (sid,)))
            live.append(sid)
        elif op == "release":
            if live:
                steps.append(Step("release", (live.pop(value % len(live)),)))
        elif op == "rehash":
            steps.append(Step("rehash", (-1, -1, 1 + value % 4)))
        elif op in ("put", "put_and_get_old"):
            steps.append(Step(op, (key, namespace, [value])))
        elif op in ("get_mutate", "transform"):
            steps.append(Step(op, (key, namespace, value)))
        else:
            steps.append(Step(op, (key, namespace)))
    steps += [Step("read_snapshot", (sid,)) for sid in live]
    return steps


def run_program(factory: Callable, ops, capacity: int = 4) -> Harness:
    """Apply the program to ``factory(capacity=, state_copier=)`` and the model; raises CheckFailure."""
    # Under CrossHair's backend the values are symbolic: the suite's own copies (deepcopy) and comparisons
    # (repr) make them concrete, which keeps each path short; copying flat lists and sorting symbolic
    # values instead, CrossHair stopped finding FLINK-26853 and get-versions-lte within 200 examples.
    harness = Harness(factory(capacity=capacity, state_copier=copy.deepcopy), state_copier=copy.deepcopy,
                      symbolic=True)
    for step in decode(ops):
        harness.apply(step)
    return harness
