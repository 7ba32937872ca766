"""The Hypothesis state machine over any implementation of the SPEC §15 map API.

``make_map_machine(factory)`` returns a ``RuleBasedStateMachine`` class with
one rule per operation of :data:`~properties.map.ops.MAP_OPS`, its arguments
drawn from strategies per argument domain (:class:`Strategies`): get, put,
remove, transform, rehash progress, snapshots (a Bundle, released through
``consumes``), snapshot reads with and without a transformer, live iteration
and the incremental visitor; plus a burst of colliding puts. Every rule
becomes a :class:`~properties.core.program.Step` applied through the
:class:`~properties.map.harness.Harness`, which checks the model (P1–P7)
and, for implementations with introspection, the structural invariants
(I1–I9) after every step. The steps of the last run are kept, so the final
(shrunk) failing program is available as data.

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
from typing import Callable

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, precondition, rule

from model import ModelMap
from properties.core.machine import HarnessMachine, RunRecord
from properties.map.harness import Harness
from properties.map.ops import LIVE_SNAPSHOT, MAP_OPS, NEW_SNAPSHOT, PAIR, RELEASED_SNAPSHOT, TRANSFORMER_NAMES
from reference import CopyOnWriteStateMap

__all__ = ["MachineConfig", "make_map_machine", "replay_setup", "Strategies"]


@attrs.frozen
class MachineConfig:
    """What the machine generates: map capacity, key/namespace space sizes,
    and whether the harness checks white-box invariants (None: if offered)."""

    capacity: int = 4
    keys: int = 12
    namespaces: int = 3
    white_box: bool | None = None
    strict_live_iteration: bool = False


class Strategies:
    """A Hypothesis strategy per argument domain of the map's operations (the
    machine's context; ``properties.map.walks`` and ``properties.map.parity``
    draw the same domains their own way)."""

    def __init__(self, config: MachineConfig) -> None:
        self.keys = st.integers(0, config.keys - 1)
        self.namespaces = st.integers(0, config.namespaces - 1)
        # Keys equal to namespaces all hash to 0: one long chain in bucket 0.
        self.pairs = st.one_of(st.tuples(self.keys, self.namespaces), self.keys.map(lambda k: (k, k)))

    def pair(self):
        return self.pairs

    def state(self):
        return st.lists(st.integers(0, 9), max_size=3)

    def value(self):
        return st.integers(0, 9)

    def reads(self):
        return st.integers(1, 8)

    def transformer(self):
        return st.sampled_from(list(TRANSFORMER_NAMES))

    def position(self):
        return st.integers(0, 8)

    def change(self):
        return st.sampled_from(["put", "remove"])

    def namespace(self):
        return self.namespaces

    def max_empty(self):
        return st.integers(1, 4)


# Keyword names of the rules' arguments, per domain kind (a rule's arguments are drawn in this order).
_ARGUMENT = {"pair": "kn", "live_snapshot": "sid", "released_snapshot": "sid"}


def _rule_for(op, strategies: Strategies, snapshots: Bundle, written: Bundle):
    """The Hypothesis rule applying ``op``: its arguments drawn per domain."""
    arguments = {}
    for domain in op.domains:
        if domain is NEW_SNAPSHOT:
            continue  # numbered by the machine
        name = _ARGUMENT.get(domain.kind, domain.kind)
        if domain is PAIR:
            arguments[name] = strategies.pairs | written if op.reads_written else strategies.pairs
        elif domain is LIVE_SNAPSHOT:
            arguments[name] = snapshots
        elif domain is RELEASED_SNAPSHOT:
            arguments[name] = consumes(snapshots)
        else:
            arguments[name] = getattr(strategies, domain.kind)()
    names = list(arguments)

    if op.domains and op.domains[0] is NEW_SNAPSHOT:
        def apply(self):
            sid = self.next_sid
            self.next_sid += 1
            self.apply(op.name, sid)
            return sid

        target = {"target": snapshots}
    else:
        def apply(self, **drawn):
            args: tuple = ()
            for name in names:
                value = drawn[name]
                args += tuple(value) if name == "kn" else (value,)
            self.apply(op.name, *args)
            return drawn["kn"] if op.writes else None

        target = {"target": written} if op.writes else {}
    apply.__name__ = op.rule_name
    decorated = rule(**target, **arguments)(apply)
    if op.needs is not None:
        decorated = precondition(lambda self, needs=op.needs: hasattr(self.harness.impl, needs))(decorated)
    return decorated


def make_map_machine(factory: Callable, config: MachineConfig = MachineConfig(),
                     record: RunRecord | None = None, impl_spec: str | None = None) -> type:
    """A machine class testing maps built by ``factory(capacity=, state_copier=)``.

    ``impl_spec`` names the implementation in stored counterexamples (by
    default derived from the factory)."""
    record = record if record is not None else RunRecord()
    strategies = Strategies(config)
    keys = strategies.keys
    snapshots = Bundle("snapshots")
    written = Bundle("written")

    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        impl = factory(capacity=config.capacity, state_copier=copy.deepcopy)
        self.attach(Harness(impl, white_box=config.white_box, strict_live_iteration=config.strict_live_iteration))
        self.next_sid = 0

    # A burst of inserts with key == namespace (hash 0): long chains and
    # tables fuller than their bucket count mid-rehash (cf. FLINK-9601).
    @rule(first=keys, count=st.integers(2, 8))
    def burst_of_colliding_puts(self, first, count):
        for k in range(first, first + count):
            self.apply("put", k, k, [k % 10])

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

    namespace = {"snapshots": snapshots, "written": written, "__init__": __init__,
                 "burst_of_colliding_puts": burst_of_colliding_puts, "teardown": teardown}
    for op in MAP_OPS:
        namespace[op.rule_name] = _rule_for(op, strategies, snapshots, written)
    name = f"MapMachine[{getattr(factory, '__name__', 'impl')}]"
    machine = type(name, (HarnessMachine,), namespace)
    machine.__qualname__ = name
    machine.record = record
    machine.config = config
    machine.factory = factory
    machine.impl_spec = impl_spec or _spec_of(factory)
    return machine


def _spec_of(factory: Callable) -> str:
    """The implementation spec that resolves back to ``factory``."""
    if factory is CopyOnWriteStateMap:
        return "reference"
    if factory is ModelMap:
        return "model"
    return f"{factory.__module__}:{factory.__qualname__}"


def replay_setup(factory: Callable, config: MachineConfig):
    """How the map harness replays a program: ``(make_impl, harness options)``."""
    make = lambda: factory(capacity=config.capacity, state_copier=copy.deepcopy)
    return make, {"white_box": config.white_box, "strict_live_iteration": config.strict_live_iteration}
