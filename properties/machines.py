"""Hypothesis state machines over any implementation of the SPEC §15 API.

``make_map_machine(factory)`` returns a ``RuleBasedStateMachine`` class whose
rules interleave get, put, remove, transform, rehash progress, snapshots (a
Bundle, released through ``consumes``), snapshot reads with and without a
transformer, live iteration and the incremental visitor. Every rule becomes a
:class:`~properties.program.Step` applied through the
:class:`~properties.harness.Harness`, which checks the model (P1–P7) and, for
implementations with introspection, the structural invariants (I1–I9) after
every step. The steps of the last run are kept, so the final (shrunk) failing
program is available as data.

Small capacities, small key and namespace spaces and keys equal to namespaces
(hash 0, one long chain) make chains, rehash during snapshot and overlapping
snapshots happen in nearly every run.

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from reference import CopyOnWriteStateMap
>>> Machine = make_map_machine(CopyOnWriteStateMap)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=5, database=None))
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from typing import Callable

import attrs
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, precondition, rule

from properties.errors import InternalError
from properties.failures import CheckFailure, Failure
from properties.harness import Harness
from properties.limits import BudgetSpent
from properties.program import SNAPSHOT_TRANSFORMERS, Step

__all__ = ["MachineConfig", "RunRecord", "HarnessMachine", "make_map_machine", "MachineKind", "MACHINE_KINDS", "machine_kind",
           "replay_setup"]


@attrs.frozen
class MachineConfig:
    """What the machine generates: map capacity, key/namespace space sizes,
    and whether the harness checks white-box invariants (None: if offered)."""

    capacity: int = 4
    keys: int = 12
    namespaces: int = 3
    white_box: bool | None = None
    strict_live_iteration: bool = False


@attrs.define
class RunRecord:
    """Shared by every example a machine class runs: counts, coverage, and the
    harness of the latest example (on failure: the shrunk one)."""

    examples: int = 0
    steps: int = 0
    coverage: Counter = attrs.Factory(Counter)
    findings: Counter = attrs.Factory(Counter)
    last: Harness | None = None
    first_failure_at: tuple[int, int] | None = None  # (examples, steps) when the first failure showed
    on_example: Callable[["RunRecord"], None] | None = None
    # The first failure as it happened (Hypothesis may replay it afterwards, or
    # an unreliable implementation may not fail again): its failure and program.
    first_failure: Failure | None = None
    first_failure_steps: list | None = None
    internal: InternalError | None = None  # the first error of cowcheck's own
    deadline: float | None = None  # time.monotonic() after which no step starts (BudgetSpent)


def _spec_of(factory: Callable) -> str:
    """The implementation spec that resolves back to ``factory``."""
    from model import ModelMap
    from reference import CopyOnWriteStateMap

    if factory is CopyOnWriteStateMap:
        return "reference"
    if factory is ModelMap:
        return "model"
    return f"{factory.__module__}:{factory.__qualname__}"


class HarnessMachine(RuleBasedStateMachine):
    """Base of the suite's machines: each rule becomes a Step applied through
    ``self.harness``; examples and steps are counted in the class's
    ``record`` (a RunRecord) and each scenario reached is a Hypothesis event."""

    record: RunRecord

    def attach(self, harness) -> None:
        self.harness = harness
        self.seen: set = set()
        record = self.record
        record.last = harness
        record.examples += 1
        if record.on_example is not None:
            record.on_example(record)

    def apply(self, op: str, *args) -> None:
        record = self.record
        if record.deadline is not None and time.monotonic() > record.deadline:
            raise BudgetSpent()
        record.steps += 1
        try:
            self.harness.apply(Step(op, args))
        except CheckFailure as exc:
            if record.first_failure is None:
                record.first_failure_at = (record.examples, record.steps)
                record.first_failure = exc.failure
                record.first_failure_steps = list(self.harness.steps)
            raise
        except InternalError as exc:
            if record.internal is None:
                record.internal = exc
            raise
        for name in self.harness.coverage.keys() - self.seen:
            self.seen.add(name)
            event(name)


def make_map_machine(factory: Callable, config: MachineConfig = MachineConfig(),
                     record: RunRecord | None = None, impl_spec: str | None = None) -> type:
    """A machine class testing maps built by ``factory(capacity=, state_copier=)``.

    ``impl_spec`` names the implementation in stored counterexamples (by
    default derived from the factory)."""
    record = record if record is not None else RunRecord()
    keys = st.integers(0, config.keys - 1)
    namespaces = st.integers(0, config.namespaces - 1)
    # Keys equal to namespaces all hash to 0: one long chain in bucket 0.
    pairs = st.one_of(st.tuples(keys, namespaces), keys.map(lambda k: (k, k)))
    states = st.lists(st.integers(0, 9), max_size=3)
    values = st.integers(0, 9)

    class MapMachine(HarnessMachine):
        snapshots = Bundle("snapshots")
        written = Bundle("written")

        def __init__(self) -> None:
            super().__init__()
            impl = factory(capacity=config.capacity, state_copier=copy.deepcopy)
            self.attach(Harness(impl, white_box=config.white_box, strict_live_iteration=config.strict_live_iteration))
            self.next_sid = 0

        # Writes remember their (key, namespace); reads and removes draw from
        # those half the time, so they mostly hit entries that exist.
        @rule(target=written, kn=pairs, state=states)
        def put(self, kn, state):
            self.apply("put", kn[0], kn[1], state)
            return kn

        @rule(target=written, kn=pairs, state=states)
        def put_and_get_old(self, kn, state):
            self.apply("put_and_get_old", kn[0], kn[1], state)
            return kn

        @rule(kn=pairs | written)
        def get(self, kn):
            self.apply("get", *kn)

        @rule(kn=pairs | written, value=values)
        def get_then_mutate_in_place(self, kn, value):
            self.apply("get_mutate", kn[0], kn[1], value)

        @rule(kn=pairs | written)
        def contains_key(self, kn):
            self.apply("contains_key", *kn)

        @rule(kn=pairs | written)
        def remove(self, kn):
            self.apply("remove", *kn)

        @rule(kn=pairs | written)
        def remove_and_get_old(self, kn):
            self.apply("remove_and_get_old", *kn)

        @rule(target=written, kn=pairs | written, value=values)
        def transform(self, kn, value):
            self.apply("transform", kn[0], kn[1], value)
            return kn

        # A burst of inserts with key == namespace (hash 0): long chains and
        # tables fuller than their bucket count mid-rehash (cf. FLINK-9601).
        @rule(first=keys, count=st.integers(2, 8))
        def burst_of_colliding_puts(self, first, count):
            for k in range(first, first + count):
                self.apply("put", k, k, [k % 10])

        @rule(reads=st.integers(1, 8))
        def rehash(self, reads):
            self.apply("rehash", reads)

        @rule(target=snapshots)
        def snapshot(self):
            sid = self.next_sid
            self.next_sid += 1
            self.apply("snapshot", sid)
            return sid

        @rule(sid=snapshots)
        def read_snapshot(self, sid):
            self.apply("read_snapshot", sid)

        @rule(sid=consumes(snapshots), transformer=st.sampled_from(sorted(SNAPSHOT_TRANSFORMERS)))
        def read_snapshot_transformed_then_release(self, sid, transformer):
            self.apply("read_snapshot_transformed", sid, transformer)

        @rule(sid=consumes(snapshots))
        def release(self, sid):
            self.apply("release", sid)

        @rule()
        def iterate(self):
            self.apply("iterate")

        @rule(position=st.integers(0, 8), kn=pairs, change=st.sampled_from(["put", "remove"]))
        def iterate_across_change(self, position, kn, change):
            self.apply("iterate_modify", position, kn[0], kn[1], change)

        @rule(namespace=namespaces)
        def keys_of_namespace(self, namespace):
            self.apply("keys", namespace)

        @rule(namespace=namespaces)
        def size_of_namespace(self, namespace):
            self.apply("size_of_namespace", namespace)

        @precondition(lambda self: hasattr(self.harness.impl, "incremental_visitor"))
        @rule(max_empty=st.integers(1, 4))
        def visit_and_prune(self, max_empty):
            self.apply("visit", max_empty)

        def teardown(self) -> None:
            # Hypothesis calls teardown after a failing rule too: keep that failure.
            if self.harness.failure is not None:
                return
            # P2 at the end: every snapshot the model holds live must equal its frozen copy
            # (whatever the implementation says about it).
            for sid, (_, model_snapshot) in list(self.harness.snapshots.items()):
                if not model_snapshot.released:
                    self.apply("read_snapshot", sid)
            record.coverage.update(self.harness.coverage)
            record.findings.update(self.harness.findings)

    MapMachine.__name__ = MapMachine.__qualname__ = f"MapMachine[{getattr(factory, '__name__', 'impl')}]"
    MapMachine.record = record
    MapMachine.config = config
    MapMachine.impl_spec = impl_spec or _spec_of(factory)
    return MapMachine


def replay_setup(factory: Callable, config: MachineConfig):
    """How the map harness replays a program: ``(make_impl, harness options)``."""
    make = lambda: factory(capacity=config.capacity, state_copier=copy.deepcopy)
    return make, {"white_box": config.white_box, "strict_live_iteration": config.strict_live_iteration}


def reference_factory() -> Callable:
    from reference import CopyOnWriteStateMap

    return CopyOnWriteStateMap


@attrs.frozen
class MachineKind:
    """A state machine and everything needed to run and replay it, as
    ``"module:attribute"`` references imported on first use:

    - ``builder(factory, config, record)`` -> machine class,
    - ``config_class`` (attrs; a ``white_box`` field if it has white-box checks),
    - ``harness_class`` that replays its steps,
    - ``replay_setup(factory, config)`` -> ``(make_impl, harness options)``,
    - ``reference()`` -> the factory of the reference implementation,
    - ``scenarios``: SPEC §13 scenario ids -> descriptions,
    - ``render(step)`` -> a line of Python, ``step_from_json(data)`` -> Step.
    """

    name: str
    builder: str
    config_class: str
    harness_class: str
    replay_setup: str
    reference: str
    scenarios: str
    render: str
    step_from_json: str

    def load(self, attribute: str):
        import importlib

        module, _, name = getattr(self, attribute).partition(":")
        return getattr(importlib.import_module(module), name)

    def config(self, **settings):
        """The machine's config with those of ``settings`` it has (None values skipped)."""
        config_class = self.load("config_class")
        fields = attrs.fields_dict(config_class)
        return config_class(**{k: v for k, v in settings.items() if k in fields and v is not None})


MACHINE_KINDS: dict[str, MachineKind] = {
    "map": MachineKind("map", "properties.machines:make_map_machine", "properties.machines:MachineConfig",
                       "properties.harness:Harness", "properties.machines:replay_setup",
                       "properties.machines:reference_factory", "properties.scenarios:MAP_SCENARIOS",
                       "properties.program:render", "properties.program:step_from_json"),
    "async": MachineKind("async", "properties.async_machine:make_async_machine",
                         "properties.async_harness:AsyncMachineConfig", "properties.async_harness:AsyncHarness",
                         "properties.async_machine:replay_setup", "properties.async_machine:reference_factory",
                         "properties.async_harness:ASYNC_SCENARIOS", "properties.async_harness:render_async",
                         "properties.async_harness:async_step_from_json"),
    "checkpoint": MachineKind("checkpoint", "properties.checkpoint_machine:make_checkpoint_machine",
                              "properties.checkpoint_machine:CheckpointMachineConfig",
                              "properties.checkpoint_harness:CheckpointHarness",
                              "properties.checkpoint_machine:replay_setup",
                              "properties.checkpoint_machine:small_backend",
                              "properties.checkpoint_harness:CHECKPOINT_SCENARIOS",
                              "properties.checkpoint_harness:render_checkpoint_step",
                              "properties.checkpoint_harness:checkpoint_step_from_json"),
}


def machine_kind(name: str) -> MachineKind:
    """The machine called ``name``; ValueError naming the known ones otherwise."""
    if name not in MACHINE_KINDS:
        raise ValueError(f"unknown machine {name!r}; known: {', '.join(sorted(MACHINE_KINDS))}")
    return MACHINE_KINDS[name]
