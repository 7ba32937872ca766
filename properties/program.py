"""Programs as data: the operations the suite applies, as JSON-able steps.

A program is a list of :class:`Step`; the same list is produced by the
Hypothesis machines and by seeded random walks, replayed by the harness,
shrunk by deleting steps, stored as JSON and printed as runnable Python.
Snapshots are named by ``sid`` (the n-th snapshot of the program), so a step
list stays meaningful when steps are removed.

>>> print(render(Step("put", (1, 0, [7]))))
m.put(1, 0, [7])
"""

from __future__ import annotations

import copy
import json
from typing import Any

import attrs

from properties.failures import safe_repr

__all__ = [
    "Step",
    "drain",
    "entries",
    "same_entries",
    "visit_and_prune_even",
    "OPS",
    "render",
    "render_program",
    "transform_append",
    "copy_state",
    "SNAPSHOT_TRANSFORMERS",
    "step_from_json",
    "step_to_json",
]


@attrs.frozen
class Step:
    """One operation: ``op`` (a key of :data:`OPS`) and its JSON-able ``args``."""

    op: str = attrs.field(validator=attrs.validators.instance_of(str))
    args: tuple = attrs.field(converter=tuple, factory=tuple)

    def uses_sid(self) -> int | None:
        """The snapshot this step refers to (snapshot creates it), or None."""
        return self.args[0] if self.op in _SNAPSHOT_OPS else None


def transform_append(old, value):
    """The transform function of ``transform`` steps: append ``value`` in place
    (so a missing copy under a snapshot corrupts the snapshot)."""
    if old is None:
        return [value]
    old.append(value)
    return old


_ATOMIC = frozenset({int, str, bool, float, bytes, type(None)})


def copy_state(state):
    """``copy.deepcopy(state)`` without its machinery for the usual states:
    values of immutable types, and flat lists of them.

    >>> s = [1, 2]; c = copy_state(s); c == s and c is not s
    True
    """
    kind = type(state)
    if kind is list:
        if _ATOMIC.issuperset(map(type, state)):
            return state[:]
    elif kind in _ATOMIC:
        return state
    return copy.deepcopy(state)


def _drop_even_length(state):
    return None if isinstance(state, list) and len(state) % 2 == 0 else state


def _append_marker(state):
    return list(state) + [-1] if isinstance(state, list) else state


# json.dumps(x, sort_keys=True, default=safe_repr) without building an encoder per call.
_encode = json.JSONEncoder(sort_keys=True, default=safe_repr).encode


def entries(iterable) -> list[str]:
    """Entries ``(key, namespace, state)`` as sorted JSON strings: an order-free,
    process-independent way to compare contents."""
    return sorted([_encode([k, n, s]) for k, n, s in iterable])


def same_entries(a, b, symbolic: bool = False) -> bool:
    """Whether two lists of entries hold the same entries in any order: equal
    as Python values (``==``, as the harness compares every other result), or
    equal in the JSON form of :func:`entries` (which also settles values that
    do not sort, and lists against tuples).

    ``symbolic``: the values may be CrossHair's symbolic ones, on which every
    comparison of a sort is a branch to explore; their ``repr`` strings (which
    makes them concrete) are compared instead.
    """
    if len(a) != len(b):
        return False
    if symbolic:
        return sorted(map(repr, a)) == sorted(map(repr, b)) or entries(a) == entries(b)
    try:
        if sorted(a) == sorted(b):
            return True
    except Exception:  # values that do not sort together, or a hostile __lt__/__eq__
        pass
    return entries(a) == entries(b)


def drain(iterator):
    """Consume a live iterator; the entries, or the exception it raised."""
    out = []
    try:
        for item in iterator:
            out.append(item)
    except RuntimeError as exc:
        return exc
    return out


def visit_and_prune_even(m, max_empty: int) -> None:
    """TTL-style cleanup through the incremental visitor: remove states of even length."""
    visitor = m.incremental_visitor(max_empty)
    while visitor.has_next():
        for entry in visitor.next_entries():
            if isinstance(entry[2], list) and len(entry[2]) % 2 == 0:
                visitor.remove(entry)


# TTL-style snapshot transformers, by name (replayable).
SNAPSHOT_TRANSFORMERS = {
    "drop_even": _drop_even_length,
    "append_marker": _append_marker,
}

# op name -> (argument names, Python template used to print the step)
OPS: dict[str, tuple[tuple[str, ...], str]] = {
    "put": (("key", "namespace", "state"), "m.put({0!r}, {1!r}, {2!r})"),
    "put_and_get_old": (("key", "namespace", "state"), "m.put_and_get_old({0!r}, {1!r}, {2!r})"),
    "get": (("key", "namespace"), "m.get({0!r}, {1!r})"),
    "get_mutate": (("key", "namespace", "value"),
                   "v = m.get({0!r}, {1!r}); v is not None and v.append({2!r})  # mutate in place"),
    "contains_key": (("key", "namespace"), "m.contains_key({0!r}, {1!r})"),
    "remove": (("key", "namespace"), "m.remove({0!r}, {1!r})"),
    "remove_and_get_old": (("key", "namespace"), "m.remove_and_get_old({0!r}, {1!r})"),
    "transform": (("key", "namespace", "value"), "m.transform({0!r}, {1!r}, {2!r}, transform_append)"),
    "rehash": (("reads",), "for _ in range({0!r}): m.contains_key(-1, -1)  # drive the incremental rehash"),
    "snapshot": (("sid",), "s{0} = m.snapshot()"),
    "read_snapshot": (("sid",), "list(s{0})"),
    "read_snapshot_transformed": (("sid", "transformer"),
                                  "list(s{0}.iterate(SNAPSHOT_TRANSFORMERS[{1!r}])); s{0}.release()"),
    "release": (("sid",), "s{0}.release()"),
    "iterate": ((), "list(m)"),
    "iterate_modify": (("position", "key", "namespace", "change"),
                       "it = iter(m); [next(it) for _ in range({0!r})]; "
                       "m.{3}({1!r}, {2!r}{4}); list(it)  # live iteration across a change"),
    "keys": (("namespace",), "sorted(m.keys({0!r}))"),
    "size_of_namespace": (("namespace",), "m.size_of_namespace({0!r})"),
    "visit": (("max_empty",), "visit_and_prune_even(m, {0!r})  # incremental visitor, TTL-style"),
}

_SNAPSHOT_OPS = {"snapshot", "read_snapshot", "read_snapshot_transformed", "release"}


def render(step: Step) -> str:
    """The step as a line of Python against a map ``m``."""
    _, template = OPS[step.op]
    args = list(step.args)
    if step.op == "iterate_modify":
        args.append(", [0]" if step.args[3] == "put" else "")
    return template.format(*args)


def render_program(steps: list[Step], factory_line: str = "m = CopyOnWriteStateMap(capacity=4)") -> str:
    """A runnable Python program for the steps."""
    lines = [factory_line]
    lines += [render(s) for s in steps]
    return "\n".join(lines)


def step_to_json(step: Step) -> dict[str, Any]:
    return {"op": step.op, "args": list(step.args)}


def step_from_json(data: Any) -> Step:
    """Parse one step; ValueError naming the problem for anything malformed."""
    if not isinstance(data, dict) or "op" not in data or "args" not in data:
        raise ValueError(f"a step must be an object with 'op' and 'args', got {data!r:.80}")
    op, args = data["op"], data["args"]
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}")
    if not isinstance(args, list) or len(args) != len(OPS[op][0]):
        raise ValueError(f"{op}: expected arguments {list(OPS[op][0])}, got {args!r:.80}")
    if op == "rehash" and not (type(args[0]) is int and args[0] >= 1):
        raise ValueError(f"rehash: reads must be an int >= 1, got {args[0]!r:.80}")
    return Step(op, tuple(args))
