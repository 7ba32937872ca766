"""A Hypothesis state machine for checkpoints of key-grouped heap state (docs/contract.md §10, §11).

``make_checkpoint_machine(factory)`` returns a ``RuleBasedStateMachine``
class whose rules interleave keyed operations on two list states (put, get,
get-then-mutate-in-place, remove, transform) with checkpoints: start (the
synchronous part), write one key group, complete, cancel, fail (an injected
write error), and restores of completed checkpoints into the same range,
into smaller ranges, rescaled round trips (split, checkpoint each part,
merge) and recovery that continues on the restored state. Every rule is a
:class:`~properties.core.program.Step` applied through the
:class:`~properties.checkpoint.harness.CheckpointHarness`, which checks the
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
from hypothesis.stateful import Bundle, consumes, rule

from properties.checkpoint.harness import STATES, CheckpointHarness, key_pool as keys_of
from properties.core.machine import HarnessMachine, RunRecord, identify
from reference.checkpoint import DEFAULT_MEMORY_THRESHOLD, HeapKeyedStateBackend
from reference.state_table import KeyGroupRange

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
    keyed = st.tuples(st.sampled_from([name for name, _, _ in STATES]), st.sampled_from(key_pool),
                      st.integers(0, config.namespaces - 1))
    values = st.lists(st.integers(0, 9), max_size=3)
    groups = st.integers(owned.start, owned.end)

    class CheckpointMachine(HarnessMachine):
        running = Bundle("running")
        completed = Bundle("completed")

        def __init__(self) -> None:
            super().__init__()
            self.attach(CheckpointHarness(factory(), white_box=config.white_box))
            self.next_cid = 0

        @rule(at=keyed, value=values)
        def put(self, at, value):
            self.apply("kv_put", *at, value)

        @rule(at=keyed)
        def get(self, at):
            self.apply("kv_get", *at)

        @rule(at=keyed, value=st.integers(0, 9))
        def get_then_mutate_in_place(self, at, value):
            self.apply("kv_get_mutate", *at, value)

        @rule(at=keyed)
        def remove(self, at):
            self.apply("kv_remove", *at)

        @rule(at=keyed, value=st.integers(0, 9))
        def transform(self, at, value):
            self.apply("kv_transform", *at, value)

        @rule(target=running, threshold=st.sampled_from(THRESHOLDS))
        def start_checkpoint(self, threshold):
            cid = self.next_cid
            self.next_cid += 1
            self.apply("checkpoint", cid, threshold)
            return cid

        # The asynchronous part often writes several key groups between two
        # operations of the task thread: one step per key group, 1-4 in a row.
        @rule(cid=running, count=st.integers(1, 4))
        def write_key_groups(self, cid, count):
            for _ in range(count):
                self.apply("write_key_group", cid)

        @rule(target=completed, cid=consumes(running))
        def complete(self, cid):
            self.apply("complete", cid)
            return cid

        @rule(cid=consumes(running))
        def cancel(self, cid):
            self.apply("cancel", cid)

        @rule(cid=consumes(running))
        def fail_write(self, cid):
            self.apply("fail", cid)

        @rule(cid=completed, bounds=st.tuples(groups, groups).map(sorted))
        def restore(self, cid, bounds):
            self.apply("restore", cid, bounds[0], bounds[1])

        @rule(cid=completed, parts=st.integers(2, 4))
        def rescale(self, cid, parts):
            self.apply("rescale", cid, parts)

        @rule(cid=completed)
        def recover(self, cid):
            self.apply("recover", cid)

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
    CheckpointMachine.__name__ = CheckpointMachine.__qualname__ = f"CheckpointMachine[{name}]"
    CheckpointMachine.record = record
    return identify(CheckpointMachine, "checkpoint", factory, config)


def replay_setup(factory: Callable, config: CheckpointMachineConfig):
    """How the checkpoint harness replays a program: a fresh backend per run."""
    return factory, {"white_box": config.white_box}
