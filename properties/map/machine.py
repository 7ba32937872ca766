"""The Hypothesis state machine over any implementation of the docs/contract.md §15 map API.

``make_map_machine(factory)`` returns a ``RuleBasedStateMachine`` class with
one rule per operation of :data:`~cowcheck.map.ops.MAP_OPS`, its arguments
drawn from strategies per argument domain (:class:`Strategies`): get, put,
remove, transform, rehash progress, snapshots (a Bundle, released through
``consumes``), snapshot reads with and without a transformer, live iteration
and the incremental visitor; plus a burst of colliding puts. Every rule
becomes a :class:`~cowcheck.core.program.Step` applied through the
:class:`~cowcheck.map.harness.Harness`, which checks the model (P1–P7)
and, for implementations with introspection, the structural invariants
(I1–I9) after every step. The steps of the last run are kept, so the final
(shrunk) failing program is available as data.

Small capacities, small key and namespace spaces and keys equal to namespaces
(hash 0, one long chain) make chains, rehash during snapshot and overlapping
snapshots happen in nearly every run.

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from cowcheck.reference import CopyOnWriteStateMap
>>> Machine = make_map_machine(CopyOnWriteStateMap)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=5, database=None))
"""

from __future__ import annotations

import copy
from typing import Callable

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, rule

from cowcheck.core.ahead import example_harness
from cowcheck.core.api import StateMapFactory
from cowcheck.core.machine import HarnessMachine, RunRecord, add_space, identify
from cowcheck.core.rules import RuleContext, operation_rules, pools
from cowcheck.map.harness import CONTRACTS, Harness
from cowcheck.core.keys import INT, families_of, family_of
from cowcheck.map.ops import COUNT, FAMILY, MAP_OPS, NAMESPACE, PAIR, SIZE_CLASSES, TRANSFORMER_NAMES
from cowcheck.map.walks import SPACES

__all__ = ["MachineConfig", "World", "make_map_machine", "replay_setup", "Strategies"]


@attrs.frozen
class MachineConfig:
    """What the machine generates: map capacity, key/namespace pool sizes,
    whether the harness checks white-box invariants (None: if offered), the
    largest size class examples grow to (``sizes``: tiny, small, medium, large;
    bulk steps reach them) and the world keys come from (``space``: ``full``,
    every key and namespace family; ``classic``: int keys 0..keys-1 and
    namespaces 0..namespaces-1, no bulk steps); ``contract``: ``flink`` (Flink's
    copy discipline, P6) or ``isolation`` (docs/contract.md, contract levels);
    ``key_families``, ``namespace_families``: the families of keys and of
    namespaces programs draw from (docs/contract.md §17; None: every one, or those the map's
    probe finds it takes), e.g. ``("int", "string")`` for a map that takes only those."""

    capacity: int = 4
    keys: int = 12
    namespaces: int = 3
    white_box: bool | None = None
    strict_live_iteration: bool = False
    sizes: str = attrs.field(default="medium", validator=attrs.validators.in_(tuple(SIZE_CLASSES)))
    space: str = attrs.field(default="full", validator=attrs.validators.in_(SPACES))
    contract: str = attrs.field(default="flink", validator=attrs.validators.in_(CONTRACTS))
    key_families: tuple | None = attrs.field(default=None, converter=lambda v: _names("key", v))
    namespace_families: tuple | None = attrs.field(default=None, converter=lambda v: _names("namespace", v))

    def __attrs_post_init__(self) -> None:
        if self.space == "classic" and not (_takes(self.key_families, "int") and
                                            _takes(self.namespace_families, "int")):
            raise ValueError("the classic space draws int keys and int namespaces: its families must include int")


def _names(role: str, names) -> tuple | None:
    """Family names as a config holds them (in the families' own order; None: not chosen)."""
    if names is None:
        return None
    if isinstance(names, str):
        names = names.split(",")
    return tuple(f.name for f in families_of(role, tuple(names)))


def _takes(names: tuple | None, family: str) -> bool:
    return names is None or family in names


@attrs.frozen
class World:
    """One example's keys and namespaces: pools drawn from one family each, and
    whether the caller holds its key objects. Rules draw indexes into the pools."""

    family: str
    keys: tuple
    namespaces: tuple
    hold: bool = False
    size_class: str = "small"

    def pair(self, i: int, j: int, collide: bool) -> tuple:
        key = self.keys[i % len(self.keys)]
        if collide and self.family == "int" and family_of(self.namespaces[0]) is INT:
            return key, key  # int key == int namespace: composite hash 0, one long chain
        return key, self.namespaces[j % len(self.namespaces)]

    def namespace(self, j: int):
        return self.namespaces[j % len(self.namespaces)]


class Strategies(RuleContext):
    """A Hypothesis strategy per argument domain of the map's operations (the
    machine's context; ``cowcheck.map.walks`` and ``cowcheck.map.parity``
    draw the same domains their own way). Keys and namespaces are drawn as
    indexes into the example's :class:`World`, drawn once per example; pairs a
    rule wrote go to the ``written`` pool, from which reading rules draw half
    the time."""

    def __init__(self, config: MachineConfig, written: Bundle | None = None) -> None:
        self.config = config
        index = st.integers(0, 255)
        self.pairs = st.tuples(index, index, st.booleans())
        self.written = written
        self.per_step = _PER_STEP[config.sizes] if config.space == "full" else 0

    def world(self):
        config = self.config
        if config.space == "classic":
            return st.builds(World, st.just("int"), st.just(tuple(range(config.keys))),
                             st.just(tuple(range(config.namespaces))))
        # Small maps twice as often: most interleavings need few entries, large maps cost per step.
        sizes = [name for name in ("tiny", "small", "small", "medium", "large")
                 if SIZE_CLASSES[name] <= SIZE_CLASSES[config.sizes]]
        return st.tuples(st.sampled_from(families_of("key", config.key_families)),
                         st.sampled_from(families_of("namespace", config.namespace_families)),
                         st.booleans(), st.integers(0, 4), st.sampled_from(sizes)).flatmap(self._world_of)

    def _world_of(self, drawn):
        key_family, namespace_family, small_ints, hold, size_class = drawn
        config = self.config
        keys = st.lists(key_family.strategy(), min_size=1, max_size=config.keys, unique=True)
        if namespace_family.name == "int" and small_ints:
            namespaces = st.just(list(range(config.namespaces)))
        else:
            namespaces = st.lists(namespace_family.strategy(), min_size=1, max_size=config.namespaces, unique=True)
        return st.builds(World, st.just(key_family.name), keys.map(tuple), namespaces.map(tuple),
                         st.just(hold == 0), st.just(size_class))

    def pair(self):
        return self.pairs

    def namespace(self):
        return st.integers(0, 255)

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

    def max_empty(self):
        return st.integers(1, 4)

    def first(self):
        return st.one_of(st.just(0), st.integers(0, 1 << 12))

    def count(self):
        return st.integers(1, max(self.per_step, 1))

    # --------------------------------------------- the rules' hooks (cowcheck.core.rules)

    def strategy(self, op, domain):
        if domain is FAMILY:
            return None  # the example's key family
        if domain is PAIR and op.reads_written:
            return self.pairs | self.written
        return super().strategy(op, domain)

    def resolve(self, machine, op, domain, drawn) -> tuple:
        world = machine.world
        if domain is PAIR:
            return world.pair(*drawn)
        if domain is NAMESPACE:
            return (world.namespace(drawn),)
        if domain is FAMILY:
            return (world.family,)
        if domain is COUNT:
            return (machine.room(drawn),)
        return super().resolve(machine, op, domain, drawn)

    def target(self, op) -> str:
        return "written" if op.writes and PAIR in op.domains else super().target(op)

    def result(self, op, drawn: dict, ident):
        return drawn["pair"] if op.writes and "pair" in drawn else ident

    def condition(self, op):
        needs = op.needs
        return None if needs is None else (lambda machine: needs in machine.offered)

    def after(self, machine, op, args: tuple) -> None:
        if op.bulk and op.writes:
            machine.bulk_entries += args[2]


_PER_STEP = {"tiny": 4, "small": 32, "medium": 1_000, "large": 25_000}


def make_map_machine(factory: StateMapFactory, config: MachineConfig = MachineConfig(),
                     record: RunRecord | None = None, impl_spec: str | None = None) -> type:
    """A machine class testing maps built by ``factory(capacity=, state_copier=)``.

    ``impl_spec`` names the implementation in stored counterexamples (by
    default derived from the factory)."""
    record = record if record is not None else RunRecord()
    bundles = pools("snapshots", "written")
    strategies = Strategies(config, bundles["written"])

    make, options = replay_setup(factory, config)
    harness_class = example_harness(Harness, "map", factory, make)

    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        impl = self.construct(make)
        # the optional methods it offers, asked once (an implementation in a process of its own is
        # not asked while it runs an example's steps ahead)
        self.offered = frozenset(op.needs for op in MAP_OPS if op.needs is not None and hasattr(impl, op.needs))
        self.attach(harness_class(impl, **options))
        self.world = None
        self.bulk_entries = 0  # entries bulk puts may have added (the example's size class bounds it)

    def room(self, count: int) -> int:
        """``count`` cut to what the example's size class leaves for one bulk step."""
        bound = SIZE_CLASSES[self.world.size_class]
        return max(1, min(count, _PER_STEP[self.world.size_class], bound - self.bulk_entries))

    @initialize(world=strategies.world())
    def choose_world(self, world):
        self.world = world
        if world.hold:
            self.apply("hold_keys")

    # A burst of inserts of colliding keys (int key == namespace: hash 0): long chains and
    # tables fuller than their bucket count mid-rehash (cf. FLINK-9601).
    @rule(first=st.integers(0, 255), count=st.integers(2, 8))
    def burst_of_colliding_puts(self, first, count):
        for i in range(first, first + count):
            key, namespace = self.world.pair(i, 0, True)
            self.apply("put", key, namespace, [i % 10])

    def teardown(self) -> None:
        # Hypothesis calls teardown after a failing rule too: keep that failure.
        if self.harness.failure is None:
            self.settle()
        if self.harness.failure is not None:
            return
        # P2 at the end: every snapshot the model holds live must equal its frozen copy
        # (whatever the implementation says about it).
        for sid, (_, model_snapshot) in list(self.harness.snapshots.items()):
            if not model_snapshot.released:
                self.apply("read_snapshot", sid)
        self.settle()
        self.harness.final_check()
        record.coverage.update(self.harness.coverage)
        record.findings.update(self.harness.findings)
        record.space = add_space(record.space, self.harness.space)

    namespace = {**bundles, "__init__": __init__, "choose_world": choose_world, "room": room,
                 "burst_of_colliding_puts": burst_of_colliding_puts, "teardown": teardown}
    # hold_keys is chosen once per example with its world; the classic world has no bulk steps
    namespace.update(operation_rules(MAP_OPS, strategies, bundles, skip=lambda op: op.name == "hold_keys" or (
        op.bulk and not strategies.per_step)))
    name = f"MapMachine[{getattr(factory, '__name__', 'impl')}]"
    machine = type(name, (HarnessMachine,), namespace)
    machine.__qualname__ = name
    machine.record = record
    return identify(machine, "map", factory, config, impl_spec)


def replay_setup(factory: Callable, config: MachineConfig):
    """How the map harness replays a program: ``(make_impl, harness options)``."""
    make = lambda: factory(capacity=config.capacity, state_copier=copy.deepcopy)
    families = {name: getattr(config, name) for name in ("key_families", "namespace_families")
                if getattr(config, name) is not None}  # (chosen, or probed: the space coverage names the others)
    return make, {"white_box": config.white_box, "strict_live_iteration": config.strict_live_iteration,
                  "capacity": config.capacity, "contract": config.contract, **families}
