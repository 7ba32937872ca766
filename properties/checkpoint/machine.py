"""A Hypothesis state machine for checkpoints of key-grouped heap state (docs/contract.md §10, §11).

``make_checkpoint_machine(factory)`` returns a ``RuleBasedStateMachine``
class with a rule per operation of :data:`~cowcheck.checkpoint.ops.CHECKPOINT_OPS`
(:func:`cowcheck.core.rules.operation_rules`): keyed operations on two list
states (put, get, get-then-mutate-in-place, remove, transform) interleaved with
checkpoints: start (the synchronous part), write key groups (1-4 in a row),
complete, cancel, fail (an injected write error), and restores of completed
checkpoints into the same range, into smaller ranges, rescaled round trips
(split, checkpoint each part, merge) and recovery that continues on the
restored state. Every rule is a :class:`~cowcheck.core.program.Step` applied
through the
:class:`~cowcheck.checkpoint.harness.CheckpointHarness`, which checks the
model and the C1–C5 properties after every step.

``factory()`` (no arguments) builds a fresh backend without states, so the
same factory serves the machine and replay; :func:`small_backend` makes one
with few key groups and tiny maps, so writes interleave with changes and
maps rehash.

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> Machine = make_checkpoint_machine(small_backend())
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=3, database=None))
"""

from __future__ import annotations

import functools
from typing import Callable

import attrs
from hypothesis import strategies as st

from cowcheck.checkpoint.harness import STATES, CheckpointHarness, key_pool as keys_of
from cowcheck.checkpoint.ops import CHECKPOINT_OPS
from cowcheck.core.machine import HarnessMachine, RunRecord, identify
from cowcheck.core.rules import RuleContext, operation_rules, pools
from cowcheck.reference.checkpoint import DEFAULT_MEMORY_THRESHOLD, HeapKeyedStateBackend
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["CheckpointMachineConfig", "make_checkpoint_machine", "small_backend", "replay_setup"]

# Thresholds of the streams: 0 always spills to a file, the default keeps the
# machine's small checkpoints inline, 256 goes either way.
THRESHOLDS = (0, 256, DEFAULT_MEMORY_THRESHOLD)


@attrs.frozen
class CheckpointMachineConfig:
    """What the machine generates: how many distinct keys and namespaces, and
    whether the harness checks registered snapshot versions (None: if offered).
    The backend's key groups and map capacity come from the factory."""

    keys: int = 6
    namespaces: int = 2
    white_box: bool | None = None


def small_backend(backend_class: type = HeapKeyedStateBackend, max_parallelism: int = 8,
                  capacity: int = 4) -> Callable[[], HeapKeyedStateBackend]:
    """A no-argument factory of backends owning all ``max_parallelism`` key groups."""
    return functools.partial(backend_class, KeyGroupRange(0, max_parallelism - 1), max_parallelism,
                             capacity=capacity)


class _Draws(RuleContext):
    """The values the machine's rules draw, per domain kind of :data:`~cowcheck.checkpoint.ops.CHECKPOINT_OPS`:
    keyed steps on the backend's own keys, thresholds either side of the machine's checkpoint sizes,
    key-group ranges within the backend's."""

    def __init__(self, key_pool: list, namespaces: int, owned) -> None:
        self.key_pool, self.namespaces, self.owned = key_pool, namespaces, owned

    def at(self):
        return st.tuples(st.sampled_from([name for name, _, _ in STATES]), st.sampled_from(self.key_pool),
                         st.integers(0, self.namespaces - 1))

    def values(self):
        return st.lists(st.integers(0, 9), max_size=3)

    def value(self):
        return st.integers(0, 9)

    def threshold(self):
        return st.sampled_from(THRESHOLDS)

    def groups(self):
        groups = st.integers(self.owned.start, self.owned.end)
        return st.tuples(groups, groups).map(sorted)

    def parts(self):
        return st.integers(2, 4)


def make_checkpoint_machine(factory: Callable[[], object] | None = None,
                            config: CheckpointMachineConfig = CheckpointMachineConfig(),
                            record: RunRecord | None = None) -> type:
    """A machine class testing backends built by ``factory()`` (default: the reference's ``small_backend()``)."""
    factory = factory if factory is not None else small_backend()
    record = record if record is not None else RunRecord()
    probe = factory()
    owned = probe.key_group_range
    key_pool = keys_of(probe, config.keys)  # the first keys of the backend's key groups, as the walks use
    if not key_pool:
        raise ValueError(f"make_checkpoint_machine: no key in 0..99999 falls into the backend's key groups {owned}")
    bundles = pools("running", "completed")
    rules = operation_rules(CHECKPOINT_OPS, _Draws(key_pool, config.namespaces, owned), bundles)


    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        self.attach(CheckpointHarness(factory(), white_box=config.white_box))

    def teardown(self) -> None:
        try:
            # Hypothesis calls teardown after a failing rule too: keep that failure.
            if self.harness.failure is None:
                for cid in self.harness.model.running():
                    self.apply("cancel", cid)
                record.coverage.update(self.harness.coverage)
                record.findings.update(self.harness.findings)
        finally:
            self.harness.close()

    name = getattr(factory, "__name__", None) or getattr(getattr(factory, "func", None), "__name__", "backend")
    name = f"CheckpointMachine[{name}]"
    machine = type(name, (HarnessMachine,), {**bundles, **rules, "__init__": __init__, "teardown": teardown})
    machine.__qualname__ = name
    machine.record = record
    return identify(machine, "checkpoint", factory, config)


def replay_setup(factory: Callable, config: CheckpointMachineConfig):
    """How the checkpoint harness replays a program: a fresh backend per run."""
    return factory, {"white_box": config.white_box}
