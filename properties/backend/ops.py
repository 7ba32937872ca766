"""The backend machine's operations and states, declared once (:data:`BACKEND_OPS`, :data:`STATES`).

A program opens a keyed backend (its key type and max parallelism), then
works on the states registered through descriptors as an operator
registers them (:data:`STATES`): a value, a list, a map and a reducing (sum)
state of ints, each without time-to-live, with TTL updated on create and
write, and with TTL updated on read and write; and a value, a list and a map
state of a POJO and of a Kryo type (values.py). State-level steps name the
state, the key (the backend's current key is set to it first) and the
namespace. Around them: key iteration, the TTL clock, checkpoints to memory
or to files whose asynchronous part runs on the task thread
(``checkpoint``) or on a thread of its own (``checkpoint_async``, joined
by ``join``), compressed with snappy from a ``compress(True)`` step on (Flink's
format: key groups in snappy framed streams), and restores of completed checkpoints (a key-group range,
a split into two ranges merged back, recovery that goes on).

Each :class:`BackendOperation` says per argument which *domain* it draws
from (:data:`DOMAINS`): the Hypothesis rules (``machine.py``) and the
seeded walks (``walks.py``) are both built from this table, and a file's
arguments are checked against it.

>>> from cowcheck.core.program import Step
>>> BACKEND_OPS.render(Step("update", ("value_ttl", 3, 0, None)))
"at(3, 0, 'value_ttl').update(None)"
>>> [s.name for s in STATES if s.kind == "map"]
['map', 'map_ttl', 'map_ttl_read', 'map_pojo', 'map_kryo']
"""

from __future__ import annotations

from typing import Callable

import attrs

from cowcheck.model.keyed_model import StateSpec
from cowcheck.core.checks import INT32, arguments, int_in, list_of, one_of
from cowcheck.core.keys import FAMILIES
from cowcheck.core.program import Operation, OperationTable
from cowcheck.reference.hashing import to_int32
from cowcheck.reference.keyed import (ON_CREATE_AND_WRITE, ON_READ_AND_WRITE, ListStateDescriptor, MapStateDescriptor,
                             ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor)
from cowcheck.backend.values import SCHEMAS, serializer_of
from cowcheck.reference.serializers import IntSerializer

__all__ = ["BACKEND_OPS", "BackendOperation", "STATES", "STATE_NAMES", "KEY_TYPES", "MAX_PARALLELISMS", "TTL",
           "NAMESPACES", "TARGETS", "KEYED", "CHECKPOINTS", "THREADED", "FORMS", "RELATIONS", "SNAPSHOTS", "TTL_CHANGES", "NULLABLE_MAPS", "sum_int32", "key_pool", "states_of_kind",
           "DOMAINS", "Domain", "descriptor_of"]


def sum_int32(accumulator: int, value: int) -> int:
    """The reducing states' function: Java int addition (wraps)."""
    return to_int32(accumulator + value)


TTL = 10  # milliseconds; the clock advances 1-20 per step, so values expire within a few steps
STATES = tuple(
    StateSpec(name + suffix, kind, ttl, on_read, sum_int32 if kind == "reducing" else None)
    for name, kind in (("value", "value"), ("list", "list"), ("map", "map"), ("reducing", "reducing"))
    for suffix, ttl, on_read in (("", None, False), ("_ttl", TTL, False), ("_ttl_read", TTL, True))
) + tuple(
    # States of a POJO and of a Kryo type (values.py), without time-to-live: the map's user values.
    StateSpec(f"{kind}_{value_type}", kind, value_type=value_type)
    for value_type in ("pojo", "kryo") for kind in ("value", "list", "map")
)
STATE_NAMES = tuple(s.name for s in STATES)
KEY_TYPES = ("int", "long", "string")
MAX_PARALLELISMS = (4, 8, 128)
NAMESPACES = 3
TARGETS = ("memory", "file")
# Savepoints: Flink's canonical (backend-independent) format, or native (the backend's own, from 1.15).
FORMS = ("canonical", "native")
# Whether an upgrade switches time-to-live on for the int states without and off for those with.
TTL_CHANGES = ("same", "flipped")
# A file snapshot's size against its streams' inline threshold: one byte under it, at it, one over;
# and which snapshot it is.
RELATIONS = ("below", "at", "above")
SNAPSHOTS = ("checkpoint", *FORMS)
# The map states that take a null value: Flink's MapSerializer writes a null flag, but a TTL map
# wraps the null in a TtlValue that no IntSerializer writes (every snapshot of it fails, in every
# release: docs/contract.md K7), so null goes into the map without time-to-live only.
NULLABLE_MAPS = ("map",)
USER_KEYS = 4
MAX_VALUES = 1000


def descriptor_of(spec: StateSpec, schema: int = 1):
    """The descriptor an operator registers ``spec`` with: values of its type (values.py; int user
    keys for a map; ``schema``: the POJO's class version), the sum for a reducing state, its
    time-to-live if it has one."""
    values = serializer_of(spec.value_type, schema)
    if spec.kind == "value":
        descriptor = ValueStateDescriptor(spec.name, values)
    elif spec.kind == "list":
        descriptor = ListStateDescriptor(spec.name, values)
    elif spec.kind == "map":
        descriptor = MapStateDescriptor(spec.name, IntSerializer(), values)
    else:
        descriptor = ReducingStateDescriptor(spec.name, spec.reduce, values)
    if spec.ttl is not None:
        descriptor.enable_time_to_live(StateTtlConfig(spec.ttl, ON_READ_AND_WRITE if spec.update_on_read
                                                      else ON_CREATE_AND_WRITE))
    return descriptor


def states_of_kind(kind: str) -> tuple[str, ...]:
    return tuple(s.name for s in STATES if s.kind == kind)


def key_pool(key_type: str, keys: int) -> list:
    """The keys a program of ``key_type`` uses: the first ``keys`` of that family's bulk sequence
    (cowcheck.core.keys: ints across the int32 range, longs beyond it, strings of every plane)."""
    family = FAMILIES[key_type]
    return [family.nth(i) for i in range(keys)]


# ------------------------------------------------------------------ domains


@attrs.frozen
class Domain:
    """What an argument may be: ``check`` (a file's value), ``simpler`` (shrinking: simpler values)."""

    name: str
    check: Callable
    simpler: Callable = lambda value: ()


def _key_check(value):
    if type(value) is int and -(1 << 63) <= value < (1 << 63) or type(value) is str and len(value) <= 64:
        return None
    return f"expected a key (an int, a long or a string of at most 64 characters), got {value!r:.40}"


def _nullable(check):
    return lambda value: None if value is None else check(value)


def _smaller_int(value):
    return [v for v in (0, value // 2) if v != value and 0 <= v < value]


_VALUE = int_in(*INT32)
DOMAINS = {d.name: d for d in (
    Domain("key_type", one_of(*KEY_TYPES)),
    Domain("max_parallelism", one_of(*MAX_PARALLELISMS)),
    Domain("key", _key_check),
    Domain("namespace", int_in(0, NAMESPACES - 1), lambda v: [0] if v else []),
    Domain("value", _VALUE, _smaller_int),
    Domain("nullable_value", _nullable(_VALUE), lambda v: [None] if v is not None else []),
    Domain("values", list_of(_VALUE, MAX_VALUES), lambda v: [v[:-1]] if v else []),
    Domain("user_key", int_in(0, USER_KEYS - 1), lambda v: [0] if v else []),
    Domain("millis", int_in(0, 1 << 40), _smaller_int),
    Domain("target", one_of(*TARGETS), lambda v: ["memory"] if v != "memory" else []),
    Domain("seed", int_in(0, (1 << 31) - 1), lambda v: [0] if v else []),
    Domain("cid", int_in(0, 1_000_000)),
    Domain("group", int_in(0, max(MAX_PARALLELISMS) - 1)),
    Domain("split", int_in(0, max(MAX_PARALLELISMS) - 2)),
    *(Domain(f"state:{kind}", one_of(*states_of_kind(kind)), lambda v, kind=kind: [kind] if v != kind else [])
      for kind in ("value", "list", "map", "reducing")),
    Domain("state", one_of(*STATE_NAMES)),
    Domain("compressed", one_of(False, True), lambda v: [False] if v else []),
    Domain("state:nullable_map", one_of(*NULLABLE_MAPS)),
    Domain("form", one_of(*FORMS), lambda v: ["canonical"] if v != "canonical" else []),
    Domain("relation", one_of(*RELATIONS), lambda v: ["below"] if v != "below" else []),
    Domain("snapshot", one_of(*SNAPSHOTS), lambda v: ["checkpoint"] if v != "checkpoint" else []),
    Domain("state:pojo_value", one_of("value_pojo")),
    Domain("schema", one_of(*SCHEMAS), lambda v: [1] if v != 1 else []),
    Domain("ttl_change", one_of(*TTL_CHANGES), lambda v: ["same"] if v != "same" else []),
)}


@attrs.frozen(kw_only=True)
class BackendOperation(Operation):
    """An operation with the domain of each argument (``domains``, parallel to ``args``)."""

    domains: tuple = ()

    def __attrs_post_init__(self) -> None:
        if len(self.domains) != len(self.args) or any(d not in DOMAINS for d in self.domains):
            raise ValueError(f"{self.name}: one known domain per argument, got {self.domains}")


def _op(name: str, spec: str, template: str) -> BackendOperation:
    """``spec``: the arguments, ``arg`` or ``arg=domain`` (a domain named like its argument may be left out)."""
    pairs = [part.partition("=") for part in spec.split()]
    args = tuple(a for a, _, _ in pairs)
    domains = tuple(d or a for a, _, d in pairs)
    checks = [DOMAINS[d].check for d in domains]

    def simplify(values: tuple):
        for i, d in enumerate(domains):
            for simpler in DOMAINS[d].simpler(values[i]):
                yield values[:i] + (simpler,) + values[i + 1:]

    return BackendOperation(name=name, args=args, domains=domains, template=template, check=arguments(*checks),
                            simplify=simplify)


def _at(call: str) -> str:
    return "at({1!r}, {2!r}, {0!r})." + call


# Savepoints, file thresholds and null map values (docs/contract.md K7, K10): properties/backend/savepoints.py.
SNAPSHOT_FORM_OPS = [
    _op("map_put_null", "state=state:nullable_map key namespace user_key", _at("put({3!r}, None)")),
    _op("savepoint", "cid form to=target",
        "h{0} = kb.savepoint({0}, streams({2!r}), {1!r}).run()  # both parts on the task thread"),
    _op("savepoint_async", "cid form to=target seed",
        "f{0} = kb.savepoint({0}, streams({2!r}, yields={3!r}), {1!r}); f{0}.start()  # the asynchronous part "
        "on a thread of its own"),
    _op("forms", "to=target",
        "check_forms(streams({0!r}))  # a checkpoint and each savepoint of this state, each restored"),
    _op("checkpoint_threshold", "cid relation of=snapshot",
        "h{0} = snapshot_against_threshold({0}, {1!r}, {2!r})  # its size measured in memory, then to files "
        "whose inline threshold is that size plus one, the size, or minus one"),
]

# Typed values and upgrades (docs/contract.md K8-K10): properties/backend/upgrades.py.
UPGRADE_OPS = [
    _op("pojo_mutate", "state=state:pojo_value key namespace index=user_key value",
        "v = at({1!r}, {2!r}, {0!r}).value(); v.history[{3!r} % len(v.history)] = {4!r}; "
        "at({1!r}, {2!r}, {0!r}).update(v)  # the handed-out object changed in place, written back"),
    _op("upgrade", "of=snapshot schema ttl=ttl_change",
        "kb = upgrade(streams('memory'), {0!r}, account_version={1!r}, ttl={2!r})  # restore it into the job's "
        "new classes and descriptors"),
    _op("tail_checkpoint", "key value of=snapshot",
        "check_tail({0!r}, {1!r}, {2!r})  # a Kryo value whose bytes end the stream with an empty array"),
]

BACKEND_OPS = OperationTable("backend", [
    _op("open", "key_type max_parallelism",
        "kb = open_backend({0!r}, {1!r})  # key groups 0..{1}-1, every state of ops.STATES registered"),
    _op("update", "state=state:value key namespace value=nullable_value", _at("update({3!r})")),
    _op("value", "state=state:value key namespace", _at("value()")),
    _op("list_add", "state=state:list key namespace value", _at("add({3!r})")),
    _op("list_update", "state=state:list key namespace values", _at("update({3!r})")),
    _op("list_get", "state=state:list key namespace", _at("get()")),
    _op("map_put", "state=state:map key namespace user_key value", _at("put({3!r}, {4!r})")),
    _op("map_remove", "state=state:map key namespace user_key", _at("remove({3!r})")),
    _op("map_get", "state=state:map key namespace user_key", _at("get({3!r})")),
    _op("map_contains", "state=state:map key namespace user_key", _at("contains({3!r})")),
    _op("map_entries", "state=state:map key namespace", _at("entries()")),
    _op("reduce_add", "state=state:reducing key namespace value", _at("add({3!r})")),
    _op("reduce_get", "state=state:reducing key namespace", _at("get()")),
    _op("clear", "state key namespace", _at("clear()")),
    _op("keys", "state namespace", "list(kb.get_keys({0!r}, {1!r}))"),
    _op("advance", "millis", "clock.advance({0!r})"),
    _op("checkpoint", "cid to=target",
        "h{0} = kb.snapshot({0}, streams({1!r})).run()  # both parts on the task thread"),
    _op("checkpoint_async", "cid to=target seed",
        "f{0} = kb.snapshot({0}, streams({1!r}, yields={2!r})); f{0}.start()  # the asynchronous part on a "
        "thread of its own"),
    _op("join", "cid", "h{0} = f{0}.get(); check_restore(h{0})"),
    _op("restore", "cid start=group end=group", "check_restore(h{0}, KeyGroupRange({1}, {2}))"),
    _op("rescale", "cid split",
        "check_rescale(h{0}, split={1})  # restore into two ranges, checkpoint each, merge them back"),
    _op("recover", "cid", "kb = recover(h{0})  # go on from the restored state"),
    _op("compress", "on=compressed", "compression = {0!r}  # snapshot compression (snappy) of the next checkpoints"),
    *SNAPSHOT_FORM_OPS,
    *UPGRADE_OPS,
])

# Steps on one (state, key, namespace): the harness sets the current key and namespace first.
KEYED = frozenset(op.name for op in BACKEND_OPS if op.args[:3] == ("state", "key", "namespace"))
CHECKPOINTS = frozenset({"checkpoint", "checkpoint_async", "savepoint", "savepoint_async", "checkpoint_threshold"})
# The snapshots whose asynchronous part runs on a thread of its own until ``join``.
THREADED = frozenset({"checkpoint_async", "savepoint_async"})
