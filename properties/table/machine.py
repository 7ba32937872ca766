"""A Hypothesis state machine and seeded walks over the table machine's operations."""

from __future__ import annotations

import random
from typing import Callable, Iterator

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, precondition, rule

from properties.core.machine import HarnessMachine, RunRecord, identify
from properties.core.program import Step
from properties.table.harness import TableHarness, TableMachineConfig

__all__ = ["make_table_machine", "replay_setup", "walk_program", "walk", "same_object"]


def same_object(state):
    """The copier of a serializer that declares values immutable: ``copy`` returns its argument."""
    return state


def make_table_machine(factory: Callable, config: TableMachineConfig = TableMachineConfig(),
                       record: RunRecord | None = None) -> type:
    record = record if record is not None else RunRecord()
    keys = st.integers(0, config.keys - 1)
    namespaces = st.integers(0, config.namespaces - 1)
    states = st.lists(st.integers(0, 9), max_size=3)

    class TableMachine(HarnessMachine):
        snapshots = Bundle("snapshots")

        def __init__(self) -> None:
            super().__init__()
            self.attach(TableHarness(factory()))
            self.next_sid = 0

        @rule(key=keys, namespace=namespaces, state=states)
        def put(self, key, namespace, state):
            self.apply("put", key, namespace, state)

        @rule(key=keys, namespace=namespaces)
        def get(self, key, namespace):
            self.apply("get", key, namespace)

        @precondition(lambda self: self.harness.copying)
        @rule(key=keys, namespace=namespaces, value=st.integers(0, 9))
        def get_mutate(self, key, namespace, value):
            self.apply("get_mutate", key, namespace, value)

        @precondition(lambda self: not self.harness.copying)
        @rule()
        def set_meta_info(self):
            self.apply("set_meta_info")

        @rule(target=snapshots)
        def snapshot(self):
            sid = self.next_sid
            self.next_sid += 1
            self.apply("snapshot", sid)
            return sid

        @rule(sid=snapshots)
        def read_snapshot(self, sid):
            self.apply("read_snapshot", sid)

        @rule(sid=consumes(snapshots))
        def release(self, sid):
            self.apply("release", sid)

        @rule(sid=consumes(snapshots))
        def write_snapshot(self, sid):
            self.apply("write_snapshot", sid)

        def teardown(self) -> None:
            if self.harness.failure is None:
                for sid in list(self.harness.snapshots):
                    if sid not in self.harness.released:
                        self.apply("read_snapshot", sid)
                record.coverage.update(self.harness.coverage)

    TableMachine.__name__ = TableMachine.__qualname__ = f"TableMachine[{getattr(factory, '__name__', 'table')}]"
    TableMachine.record = record
    return identify(TableMachine, "table", factory, config)


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
