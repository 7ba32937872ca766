"""The backend machine for Hypothesis: one rule per operation of the table, generated from it.

``open`` is the machine's initialize rule (key type and max parallelism);
every other operation of :data:`~cowcheck.backend.ops.BACKEND_OPS`
becomes a rule whose arguments are drawn from their domains
(:data:`STRATEGIES`). Keys, key groups and splits are drawn as indexes and
resolved against what the example opened (its key pool and max
parallelism); checkpoint ids flow through two bundles: ``checkpoint``
produces a completed one, ``checkpoint_async`` a running one that
``join`` consumes (restores name any started one and wait for it).

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from cowcheck.reference.keyed import HashMapStateBackend
>>> Machine = make_backend_machine(HashMapStateBackend)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=2, stateful_step_count=10, database=None))
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, initialize, rule

from cowcheck.backend.harness import BackendHarness, BackendMachineConfig
from cowcheck.backend.ops import (BACKEND_OPS, FORMS, KEY_TYPES, MAX_PARALLELISMS, NAMESPACES, NULLABLE_MAPS,
                                  RELATIONS, SNAPSHOTS, STATES, TARGETS, TTL_CHANGES, USER_KEYS, key_pool,
                                  states_of_kind)
from cowcheck.backend.values import SCHEMAS
from cowcheck.core.machine import HarnessMachine, RunRecord, identify

__all__ = ["make_backend_machine", "replay_setup", "STRATEGIES"]

_INDEX = st.integers(0, 1 << 16)  # resolved modulo what the example opened
STRATEGIES = {
    **{f"state:{kind}": st.sampled_from(states_of_kind(kind)) for kind in ("value", "list", "map", "reducing")},
    "state": st.sampled_from([s.name for s in STATES]),
    "key": _INDEX,
    "namespace": st.integers(0, NAMESPACES - 1),
    "value": st.integers(0, 9),
    "nullable_value": st.none() | st.integers(0, 9),
    "values": st.lists(st.integers(0, 9), max_size=3),
    "user_key": st.integers(0, USER_KEYS - 1),
    "millis": st.sampled_from((1, 2, 3, 5, 8, 10, 15, 20)),
    "target": st.sampled_from(TARGETS),
    "seed": st.integers(0, (1 << 31) - 1),
    "group": _INDEX,
    "split": _INDEX,
    "compressed": st.booleans(),
    "state:nullable_map": st.sampled_from(NULLABLE_MAPS),
    "form": st.sampled_from(FORMS),
    "relation": st.sampled_from(RELATIONS),
    "snapshot": st.sampled_from(SNAPSHOTS),
    "state:pojo_value": st.just("value_pojo"),
    "schema": st.sampled_from(SCHEMAS),
    "ttl_change": st.sampled_from(TTL_CHANGES),
}
# What a config without native savepoints (Flink before 1.15) draws instead.
_CANONICAL_ONLY = {"form": st.just("canonical"), "snapshot": st.sampled_from(("checkpoint", "canonical"))}
# Checkpoint ids: the bundle a rule takes one from (None: it makes a new one) and the bundles it adds it to.
_RUNNING, _STARTED = Bundle("running"), Bundle("started")
_CIDS = {"checkpoint": (None, (_STARTED,)), "checkpoint_async": (None, (_RUNNING, _STARTED)),
         "savepoint": (None, (_STARTED,)), "savepoint_async": (None, (_RUNNING, _STARTED)),
         "checkpoint_threshold": (None, (_STARTED,)),
         "join": (consumes(_RUNNING), ()), "restore": (_STARTED, ()), "rescale": (_STARTED, ()),
         "recover": (_STARTED, ())}


def _make_rule(op, strategies: dict):
    """A rule applying ``op`` with arguments drawn from its domains (``strategies``)."""
    drawn = {arg: strategies[domain] for arg, domain in zip(op.args, op.domains) if domain != "cid"}
    source, targets = _CIDS.get(op.name, (None, ()))
    if source is not None:
        drawn["cid"] = source

    def apply_op(self, **values):
        if "cid" in op.args and source is None:
            values["cid"] = self.next_cid
            self.next_cid += 1
        args = [values["cid"] if domain == "cid" else self.resolve(domain, values[arg])
                for arg, domain in zip(op.args, op.domains)]
        if op.name == "restore":
            args[1:] = sorted(args[1:])
        self.apply(op.name, *args)
        return args[0] if targets else None

    apply_op.__name__ = op.name
    return rule(targets=targets, **drawn)(apply_op) if targets else rule(**drawn)(apply_op)


def make_backend_machine(factory: Callable, config: BackendMachineConfig = BackendMachineConfig(),
                         record: RunRecord | None = None) -> type:
    """A machine class testing the state backends ``factory()`` builds."""
    record = record if record is not None else RunRecord()

    class BackendMachine(HarnessMachine):
        running = _RUNNING
        started = _STARTED

        def __init__(self) -> None:
            super().__init__()
            self.attach(BackendHarness(self.construct(factory), keys=config.keys, async_part=config.async_part,
                                       native_savepoints=config.native_savepoints,
                                       ttl_migration=config.ttl_migration))
            self.next_cid = 0
            self.pool: list = []
            self.max_parallelism = 0

        @initialize(key_type=st.sampled_from(KEY_TYPES), max_parallelism=st.sampled_from(MAX_PARALLELISMS))
        def open(self, key_type, max_parallelism):
            self.pool = key_pool(key_type, config.keys)
            self.max_parallelism = max_parallelism
            self.apply("open", key_type, max_parallelism)

        def resolve(self, domain: str, value):
            if domain == "key":
                return self.pool[value % len(self.pool)]
            if domain == "group":
                return value % self.max_parallelism
            if domain == "split":
                return value % (self.max_parallelism - 1)
            return value

        def teardown(self) -> None:
            try:
                if self.harness.failure is None:
                    for cid in list(self.harness.futures):
                        self.apply("join", cid)
                    record.coverage.update(self.harness.coverage)
            finally:
                self.harness.close()

    strategies = STRATEGIES if config.native_savepoints else {**STRATEGIES, **_CANONICAL_ONLY}
    for op in BACKEND_OPS:
        if op.name != "open":
            setattr(BackendMachine, op.name, _make_rule(op, strategies))
    name = getattr(factory, "__name__", None) or type(factory).__name__
    BackendMachine.__name__ = BackendMachine.__qualname__ = f"BackendMachine[{name}]"
    BackendMachine.record = record
    return identify(BackendMachine, "backend", factory, config)


def replay_setup(factory: Callable, config: BackendMachineConfig):
    """How the backend harness replays a program: a fresh state backend per run."""
    return factory, {"keys": config.keys, "async_part": config.async_part,
                     "native_savepoints": config.native_savepoints, "ttl_migration": config.ttl_migration}
