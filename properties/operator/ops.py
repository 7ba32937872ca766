"""The operator machine's states and operations, declared once (:data:`STATES`, :data:`OPERATOR_OPS`).

A program opens a job of 1 to 10 parallel instances, each an operator state
backend with the ten states of :data:`STATES` registered through descriptors
as an operator's ``initializeState`` registers them: list states (split on
rescaling) and union list states of ints, longs, strings and lists of ints
(mutable: a checkpoint must copy them), and broadcast states (maps). Steps
name an instance and a state. Values travel as small int *codes*
(:func:`value_of`: the state's type turns a code into its value; ``-1`` is
None, ``-2`` a list holding None), so a program shrinks the same way whatever
its types, and prints with the values themselves.

Around the state-level steps: checkpoints of every instance (to memory or
files; compressed or not, per step) whose asynchronous parts run on the task
thread (``checkpoint``) or on threads of their own (``checkpoint_async``,
joined by ``join``), savepoints taken the same two ways (``savepoint``,
``savepoint_async``: the backend's snapshot with savepoint options, restored
like checkpoints), restores at any parallelism (``restore``: checked, then
dropped) and recoveries that go on (``recover``, a state registered first with
an incompatible serializer if the step says so).

>>> from cowcheck.core.program import Step
>>> OPERATOR_OPS.render(Step("add", (1, "split_long", 3)))
'op[1].split_long.add(1099511627779)'
>>> value_of("list", -2), value_of("string", 6)
([0, None], 'ü6')
"""

from __future__ import annotations

from typing import Callable

import attrs

from cowcheck.core.checks import arguments, int_in, one_of
from cowcheck.core.program import Operation, OperationTable
from cowcheck.model.operator_model import BROADCAST, SPLIT_DISTRIBUTE, UNION, OperatorStateSpec
from cowcheck.reference.keyed import ListStateDescriptor, MapStateDescriptor
from cowcheck.reference.serializers import IntSerializer, ListSerializer, LongSerializer, StringSerializer

__all__ = ["STATES", "SPECS", "OPERATOR_OPS", "value_of", "values_of", "entries_of", "descriptor_of",
           "incompatible_descriptor", "MAX_PARALLELISM", "CODES", "LIST_STATES", "BROADCAST_STATES",
           "MUTABLE_STATES", "CHECKPOINTS", "ASYNC", "SAVEPOINTS", "TARGETS", "SERIALIZERS"]

MAX_PARALLELISM = 10
CODES = (-2, -1, 0, 9)  # the smallest and largest code; -1 None, -2 a list holding None
TARGETS = ("memory", "file")
STATES = (
    OperatorStateSpec("split_int", SPLIT_DISTRIBUTE, "int"),
    OperatorStateSpec("split_long", SPLIT_DISTRIBUTE, "long"),
    OperatorStateSpec("split_string", SPLIT_DISTRIBUTE, "string"),
    OperatorStateSpec("split_list", SPLIT_DISTRIBUTE, "list"),
    OperatorStateSpec("union_int", UNION, "int"),
    OperatorStateSpec("union_string", UNION, "string"),
    OperatorStateSpec("union_list", UNION, "list"),
    OperatorStateSpec("bcast_int_long", BROADCAST, "long", "int"),
    OperatorStateSpec("bcast_string_string", BROADCAST, "string", "string"),
    OperatorStateSpec("bcast_long_list", BROADCAST, "list", "long"),
)
SPECS = {s.name: s for s in STATES}
LIST_STATES = tuple(s.name for s in STATES if not s.broadcast)
BROADCAST_STATES = tuple(s.name for s in STATES if s.broadcast)
MUTABLE_STATES = tuple(s.name for s in STATES if s.kind == "list")
SERIALIZERS = {"int": IntSerializer, "long": LongSerializer, "string": StringSerializer,
               "list": lambda: ListSerializer(IntSerializer())}
# The serializer each type is registered with when a program re-registers a restored state incompatibly.
_INCOMPATIBLE = {"int": LongSerializer, "long": IntSerializer, "string": IntSerializer,
                 "list": lambda: ListSerializer(LongSerializer())}


def value_of(kind: str, code: int):
    """The value of type ``kind`` that ``code`` stands for (-1: None; -2: a list holding None, else None)."""
    if code == -1 or code == -2 and kind != "list":
        return None
    if kind == "int":
        return code
    if kind == "long":
        return (1 << 40) + code
    if kind == "string":
        return f"ü{code}" if code >= 5 else f"s{code}"
    if code == -2:
        return [0, None]
    return list(range(code % 3)) + [code]


def values_of(kind: str, codes):
    """A list argument (``add_all``, ``update``): None stays None, else each code's value."""
    return None if codes is None else [value_of(kind, c) for c in codes]


def entries_of(spec: OperatorStateSpec, pairs):
    """A ``put_all`` argument: None stays None, else a dict of the pairs' keys and values."""
    return None if pairs is None else {value_of(spec.key_type, k): value_of(spec.kind, v) for k, v in pairs}


def descriptor_of(spec: OperatorStateSpec, incompatible: bool = False):
    """The descriptor ``initializeState`` registers ``spec`` with (``incompatible``: its serializers replaced by
    ones no release can migrate from: Flink's StateMigrationException on a restored state)."""
    table = _INCOMPATIBLE if incompatible else SERIALIZERS
    if spec.broadcast:
        return MapStateDescriptor(spec.name, table[spec.key_type](), SERIALIZERS[spec.kind]())
    return ListStateDescriptor(spec.name, table[spec.kind]())


def incompatible_descriptor(spec: OperatorStateSpec):
    return descriptor_of(spec, incompatible=True)


# ------------------------------------------------------------------ domains and checks

_CODE = int_in(-2, 9)


def _nullable_codes(value):
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > 20:
        return f"expected a list of at most 20 codes or None, got {value!r:.40}"
    return next((p for p in map(_CODE, value) if p), None)


def _nullable_pairs(value):
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > 20 or not all(isinstance(p, list) and len(p) == 2 for p in value):
        return f"expected a list of at most 20 [key, value] code pairs or None, got {value!r:.40}"
    return next((p for pair in value for p in map(_CODE, pair) if p), None)


def _simpler_code(value):
    return [v for v in (0, value // 2) if v != value and 0 <= v < value] if value > 0 else ([0] if value else [])


def _simpler_list(value):
    return [] if value is None else [value[:-1]] if value else []


@attrs.frozen
class _Domain:
    check: Callable
    simpler: Callable = lambda value: ()


_DOMAINS = {
    "parallelism": _Domain(int_in(1, MAX_PARALLELISM), lambda v: [1] if v != 1 else []),
    "instance": _Domain(int_in(0, MAX_PARALLELISM - 1), lambda v: [0] if v else []),
    "list_state": _Domain(one_of(*LIST_STATES)),
    "broadcast_state": _Domain(one_of(*BROADCAST_STATES)),
    "state": _Domain(one_of(*(s.name for s in STATES))),
    "mutable_state": _Domain(one_of(*MUTABLE_STATES)),
    "code": _Domain(_CODE, _simpler_code),
    "codes": _Domain(_nullable_codes, _simpler_list),
    "pairs": _Domain(_nullable_pairs, _simpler_list),
    "where": _Domain(int_in(0, 20), lambda v: [0] if v else []),
    "compressed": _Domain(one_of(False, True), lambda v: [False] if v else []),
    "target": _Domain(one_of(*TARGETS), lambda v: ["memory"] if v != "memory" else []),
    "seed": _Domain(int_in(0, (1 << 31) - 1), lambda v: [0] if v else []),
    "cid": _Domain(int_in(0, 1_000_000)),
    "reregister": _Domain(one_of("", *(s.name for s in STATES)), lambda v: [""] if v else []),
}


@attrs.frozen(kw_only=True)
class OperatorOperation(Operation):
    """An operation with the domain of each argument (``domains``, parallel to ``args``)."""

    domains: tuple = ()


def _show(step_args: tuple, names: tuple, template: str) -> str:
    """Render with values instead of codes: ``names`` says per argument how it shows."""
    shown = []
    state = next((a for a, n in zip(step_args, names) if n.endswith("state")), None)
    spec = SPECS.get(state)
    for value, name in zip(step_args, names):
        if name == "code" and spec is not None:
            shown.append(repr(value_of(spec.kind, value)))
        elif name == "key":
            shown.append(repr(value_of(spec.key_type, value)))
        elif name == "codes":
            shown.append(repr(values_of(spec.kind, value)))
        elif name == "pairs":
            shown.append(repr(entries_of(spec, value)))
        else:
            shown.append(value if name.endswith("state") else repr(value))
    return template.format(*shown)


def _op(name: str, spec: str, template: str) -> OperatorOperation:
    """``spec``: ``arg`` or ``arg=domain``; a ``key`` argument shows as the broadcast state's key."""
    pairs = [part.partition("=") for part in spec.split()]
    args = tuple(a for a, _, _ in pairs)
    domains = tuple(d or a for a, _, d in pairs)
    shows = tuple("key" if a == "key" else d for a, d in zip(args, domains))

    def simplify(values: tuple):
        for i, d in enumerate(domains):
            for simpler in _DOMAINS[d].simpler(values[i]):
                yield values[:i] + (simpler,) + values[i + 1:]

    return OperatorOperation(name=name, args=args, domains=domains,
                             render_with=lambda values: _show(values, shows, template),
                             check=arguments(*(_DOMAINS[d].check for d in domains)), simplify=simplify)


OPERATOR_OPS = OperationTable("operator", [
    _op("open", "parallelism", "op = open_job({0})  # each instance's ten states registered"),
    _op("add", "instance state=list_state value=code", "op[{0}].{1}.add({2})"),
    _op("add_all", "instance state=list_state values=codes", "op[{0}].{1}.add_all({2})"),
    _op("update", "instance state=list_state values=codes", "op[{0}].{1}.update({2})"),
    _op("get", "instance state=list_state", "op[{0}].{1}.get()"),
    _op("clear", "instance state", "op[{0}].{1}.clear()"),
    _op("put", "instance state=broadcast_state key=code value=code", "op[{0}].{1}.put({2}, {3})"),
    _op("put_all", "instance state=broadcast_state entries=pairs", "op[{0}].{1}.put_all({2})"),
    _op("remove", "instance state=broadcast_state key=code", "op[{0}].{1}.remove({2})"),
    _op("lookup", "instance state=broadcast_state key=code", "op[{0}].{1}.get({2})"),
    _op("contains", "instance state=broadcast_state key=code", "op[{0}].{1}.contains({2})"),
    _op("entries", "instance state=broadcast_state", "dict(op[{0}].{1}.entries())"),
    _op("mutate", "instance state=mutable_state where value=code",
        "mutate(op[{0}].{1}, {2}, {3})  # the element {2}th in sorted order, or the value of key {2}: appended to"),
    _op("checkpoint", "cid compressed to=target",
        "h{0} = checkpoint(op, {0}, compressed={1}, to={2})  # every instance, asynchronous parts on the task thread"),
    _op("checkpoint_async", "cid compressed to=target seed",
        "f{0} = checkpoint(op, {0}, compressed={1}, to={2}, threads=True)  # asynchronous parts racing the next steps"),
    _op("savepoint", "cid compressed to=target",
        "h{0} = savepoint(op, {0}, compressed={1}, to={2})  # canonical; asynchronous parts on the task thread"),
    _op("savepoint_async", "cid compressed to=target seed",
        "f{0} = savepoint(op, {0}, compressed={1}, to={2}, threads=True)  # asynchronous parts racing the next steps"),
    _op("join", "cid", "h{0} = f{0}.get(); check_restore(h{0})"),
    _op("restore", "cid parallelism", "check_restore(h{0}, parallelism={1})  # repartitioned, restored, compared"),
    _op("recover", "cid parallelism reregister",
        "op = recover(h{0}, parallelism={1}, incompatible={2})  # go on from the restored instances"),
])

CHECKPOINTS = frozenset({"checkpoint", "checkpoint_async", "savepoint", "savepoint_async"})
ASYNC = frozenset({"checkpoint_async", "savepoint_async"})  # the steps whose asynchronous parts run until ``join``
SAVEPOINTS = frozenset({"savepoint", "savepoint_async"})
