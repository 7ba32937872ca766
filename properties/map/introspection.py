"""The white-box introspection contract (docs/contract.md §15): what ``introspect()`` must return.

White-box checks (I1–I9, the §13 scenario counts, replay diagrams) read the
structure of a map through ``m.introspect()``. Any object with the fields
below will do (the reference returns the map itself, the Flink bridge a
mirror built by reflection); an implementation without ``introspect()``, or
whose view does not conform, is checked black-box (the model alone) and
told why in one line (docs/introspection.md).

The view:

===================================  =====================================================
``primary_table``                    sequence of bucket heads (an entry or None); len a power of two
``incremental_rehash_table``         sequence of bucket heads; twice the primary while rehashing
``is_rehashing``                     bool (an attribute, a property or a method)
``primary_table_size``               int: entries reachable from the primary table
``incremental_rehash_table_size``    int: entries reachable from the rehash table
``rehash_index``                     int: primary buckets below it have moved
``threshold``                        int: size above which the next insert doubles
``state_map_version``                int: V, one more per snapshot
``highest_required_snapshot_version``  int: R, the newest live snapshot's version or 0
``snapshot_versions``                collection of int: versions of the live snapshots
``mod_count``                        int (optional: parity only)
===================================  =====================================================

Entries: ``key``, ``namespace``, ``state``, ``hash`` (int, the composite
hash of docs/contract.md §2), ``next`` (the next entry of the chain or None),
``entry_version`` (int), ``state_version`` (int). Snapshots (white-box):
``entry_objects()`` iterates the entry objects the snapshot reaches, in its
array's order; ``snapshot_data`` (optional, for diagrams) is that array.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> view_problem(CopyOnWriteStateMap(capacity=4).introspect()) is None
True
>>> view_problem((1, 2))
'the view (a tuple) has no attribute primary_table'
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

__all__ = ["VIEW_FIELDS", "ENTRY_FIELDS", "view_problem", "entry_problem", "deep_view_problem",
           "introspection_problem", "snapshot_problem", "adapt", "observe_flag"]

_SEQUENCE = "sequence"
_INT = "int"
_BOOL = "bool"
_INTS = "collection of int"

VIEW_FIELDS: tuple[tuple[str, str], ...] = (
    ("primary_table", _SEQUENCE),
    ("incremental_rehash_table", _SEQUENCE),
    ("is_rehashing", _BOOL),
    ("primary_table_size", _INT),
    ("incremental_rehash_table_size", _INT),
    ("rehash_index", _INT),
    ("threshold", _INT),
    ("state_map_version", _INT),
    ("highest_required_snapshot_version", _INT),
    ("snapshot_versions", _INTS),
)
ENTRY_FIELDS: tuple[tuple[str, str], ...] = (
    ("key", "any"), ("namespace", "any"), ("state", "any"), ("hash", _INT), ("next", "entry or None"),
    ("entry_version", _INT), ("state_version", _INT),
)
_MISSING = object()
_WALK_LIMIT = 1 << 20  # entries a deep check walks at most (a longer walk: a cycle)


def _kind(value) -> str:
    return f"a {type(value).__name__}"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def observe_flag(obj, name: str):
    """``obj.name``, called if it is a method (docs/contract.md §16: either is fine)."""
    value = getattr(obj, name)
    return value() if callable(value) else value


def _field_problem(owner: str, name: str, kind: str, value) -> str | None:
    if kind == _INT and not _is_int(value):
        return f"{owner}.{name} is {_kind(value)}, not an int"
    if kind == _BOOL and not isinstance(value, bool):
        return f"{owner}.{name} is {_kind(value)}, not a bool"
    if kind == _SEQUENCE and not (isinstance(value, Sized) and hasattr(value, "__getitem__")):
        return f"{owner}.{name} is {_kind(value)}, not a sequence of bucket heads"
    if kind == _INTS:
        try:
            values = list(value)
        except TypeError:
            return f"{owner}.{name} is {_kind(value)}, not a collection of int"
        if not all(_is_int(v) for v in values):
            return f"{owner}.{name} holds something that is not an int"
    return None


def view_problem(view) -> str | None:
    """The first way ``view`` breaks the contract (fields and their types), or None."""
    for name, kind in VIEW_FIELDS:
        try:
            value = observe_flag(view, name) if kind == _BOOL else getattr(view, name, _MISSING)
        except Exception as exc:
            return f"reading the view's {name} raised {type(exc).__name__}"
        if value is _MISSING:
            return f"the view ({_kind(view)}) has no attribute {name}"
        problem = _field_problem("the view", name, kind, value)
        if problem:
            return problem
    return None


def entry_problem(entry) -> str | None:
    """The first way a chain entry breaks the contract, or None."""
    for name, kind in ENTRY_FIELDS:
        value = getattr(entry, name, _MISSING)
        if value is _MISSING:
            return f"an entry ({_kind(entry)}) has no attribute {name}"
        if kind == _INT and not _is_int(value):
            return f"an entry's {name} is {_kind(value)}, not an int"
    return None


def deep_view_problem(view) -> str | None:
    """:func:`view_problem`, then every entry reachable from both tables."""
    problem = view_problem(view)
    if problem:
        return problem
    walked = 0
    for name in ("primary_table", "incremental_rehash_table"):
        try:
            heads = list(getattr(view, name))
        except Exception as exc:
            return f"iterating the view's {name} raised {type(exc).__name__}"
        for e in heads:
            while e is not None:
                problem = entry_problem(e)
                if problem:
                    return f"{name}: {problem}"
                walked += 1
                if walked > _WALK_LIMIT:
                    return f"{name}: a chain does not end (cycle)"
                e = e.next
    return None


def introspection_problem(impl) -> str | None:
    """Why ``impl`` cannot be checked white-box, or None: no ``introspect()``,
    it raises, or its view (or a snapshot's ``entry_objects()``) breaks the contract."""
    introspect = getattr(impl, "introspect", None)
    if not callable(introspect):
        return "it has no introspect() method"
    try:
        view = introspect()
    except Exception as exc:
        return f"introspect() raised {type(exc).__name__}: {exc}"
    problem = deep_view_problem(view)
    if problem:
        return f"introspect() returns a view that breaks the contract: {problem}"
    return None


def snapshot_problem(snapshot) -> str | None:
    """Why a snapshot cannot be checked white-box (I8/I9 read ``entry_objects()``), or None."""
    entry_objects = getattr(snapshot, "entry_objects", None)
    if not callable(entry_objects):
        return "its snapshots have no entry_objects() method"
    try:
        for e in entry_objects():
            problem = entry_problem(e)
            if problem:
                return f"a snapshot's entry_objects(): {problem}"
    except Exception as exc:
        return f"a snapshot's entry_objects() raised {type(exc).__name__}: {exc}"
    return None


class _Adapted:
    """A conforming view whose ``is_rehashing`` is a method: read as an attribute."""

    __slots__ = ("_view",)

    def __init__(self, view) -> None:
        object.__setattr__(self, "_view", view)

    @property
    def is_rehashing(self) -> bool:
        return bool(observe_flag(self._view, "is_rehashing"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


def adapt(view):
    """``view`` itself, or a wrapper if its ``is_rehashing`` is a method."""
    return _Adapted(view) if callable(getattr(view, "is_rehashing", None)) else view
