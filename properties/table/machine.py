"""A Hypothesis state machine and seeded walks over the table machine's operations."""

from __future__ import annotations

import random
from typing import Callable, Iterator

from hypothesis import strategies as st

from cowcheck.core.machine import HarnessMachine, RunRecord, identify
from cowcheck.core.program import Step
from cowcheck.core.rules import RuleContext, operation_rules, pools
from cowcheck.table.harness import TableHarness, TableMachineConfig
from cowcheck.table.ops import TABLE_OPS

__all__ = ["make_table_machine", "replay_setup", "walk_program", "walk", "same_object"]


def same_object(state):
    """The copier of a serializer that declares values immutable: ``copy`` returns its argument."""
    return state


class _Draws(RuleContext):
    """The values the machine's rules draw, per domain kind of :data:`~cowcheck.table.ops.TABLE_OPS`."""

    def __init__(self, config: TableMachineConfig) -> None:
        self.config = config

    def key(self):
        return st.integers(0, self.config.keys - 1)

    def namespace(self):
        return st.integers(0, self.config.namespaces - 1)

    def state(self):
        return st.lists(st.integers(0, 9), max_size=3)

    def value(self):
        return st.integers(0, 9)


def make_table_machine(factory: Callable, config: TableMachineConfig = TableMachineConfig(),
                       record: RunRecord | None = None) -> type:
    """A machine class testing tables built by ``factory()``: a rule per operation of
    :data:`~cowcheck.table.ops.TABLE_OPS` (:func:`cowcheck.core.rules.operation_rules`)."""
    record = record if record is not None else RunRecord()
    bundles = pools("snapshots")
    rules = operation_rules(TABLE_OPS, _Draws(config), bundles)

    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        self.attach(TableHarness(factory()))

    def teardown(self) -> None:
        if self.harness.failure is None:
            for sid in list(self.harness.snapshots):
                if sid not in self.harness.released:
                    self.apply("read_snapshot", sid)
            record.coverage.update(self.harness.coverage)

    name = f"TableMachine[{getattr(factory, '__name__', 'table')}]"
    machine = type(name, (HarnessMachine,), {**bundles, **rules, "__init__": __init__, "teardown": teardown})
    machine.__qualname__ = name
    machine.record = record
    return identify(machine, "table", factory, config)


def replay_setup(factory: Callable, config: TableMachineConfig):
    """How the table harness replays a program: a fresh table per run."""
    return factory, {"white_box": config.white_box}


def walk_program(seed: int, steps: int, keys: int = 6, namespaces: int = 2) -> Iterator[Step]:
    """A seeded swarm walk of the table machine (the walk phase)."""
    r = random.Random(seed)
    kinds = ("put", "get", "get_mutate", "set_meta_info", "snapshot", "read_snapshot", "release", "write_snapshot")
    weights = [0.0 if r.random() < 0.3 else r.random() for _ in kinds]
    weights[0] = weights[0] or 1.0
    copying, live, taken = False, [], 0
    for _ in range(steps):
        kind = r.choices(kinds, weights)[0]
        k, n = r.randrange(keys), r.randrange(namespaces)
        if kind == "put":
            yield Step("put", (k, n, [r.randrange(10) for _ in range(r.randint(0, 3))]))
        elif kind == "get":
            yield Step("get", (k, n))
        elif kind == "get_mutate" and copying:
            yield Step("get_mutate", (k, n, r.randrange(10)))
        elif kind == "set_meta_info" and not copying:
            copying = True
            yield Step("set_meta_info", ())
        elif kind == "snapshot":
            live.append(taken)
            taken += 1
            yield Step("snapshot", (live[-1],))
        elif kind == "read_snapshot" and live:
            yield Step("read_snapshot", (r.choice(live),))
        elif kind in ("release", "write_snapshot") and live:
            yield Step(kind, (live.pop(r.randrange(len(live))),))
    for sid in live:
        yield Step("read_snapshot", (sid,))


def walk(seed: int, steps: int, instance) -> Iterator[Step]:
    return walk_program(seed, steps)
