"""A Hypothesis state machine over the async execution controller (docs/contract.md §12).

``make_async_machine(factory, config, record)`` returns a
``RuleBasedStateMachine`` class with one rule per operation of
:data:`~cowcheck.async_exec.ops.ASYNC_OPS`, its arguments drawn per domain
(:class:`Strategies`): record arrivals (one record, or a burst of them), time
passing (the periodic buffer-timeout check then an idle mailbox), forced
triggers, drains to a target, partial mailbox runs and non-records (whose
trigger actions fire timers on the records' keys). Each rule becomes a :class:`~cowcheck.core.program.Step` applied
through the :class:`~cowcheck.async_exec.harness.AsyncHarness`, which checks
A1–A11 after every step; every example ends with a drain to 0, which checks
that everything finished and the state equals the serial model's. Steps of
the last run are kept (``record.last.steps``), so a failure is data.

Few keys, a small batch size and a small in-flight limit make same-key
blocking, backpressure and partial batches happen in nearly every run.

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from cowcheck.reference.async_execution import AsyncExecutionController
>>> Machine = make_async_machine(AsyncExecutionController)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=5, database=None))
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st
from hypothesis.stateful import rule

from cowcheck.async_exec.harness import AsyncHarness, AsyncMachineConfig
from cowcheck.async_exec.ops import ASYNC_OPS
from cowcheck.async_exec.walks import BURST, statement_choices, timer_sizes, waits
from cowcheck.core.machine import HarnessMachine, RunRecord, identify

__all__ = ["AsyncMachineConfig", "Strategies", "make_async_machine", "replay_setup"]


class Strategies:
    """A Hypothesis strategy per argument domain of :data:`ASYNC_OPS` (the seeded walks draw the
    same domains with :class:`~cowcheck.async_exec.walks.WalkContext`)."""

    def __init__(self, config: AsyncMachineConfig) -> None:
        self.config = config
        self.keys = st.integers(0, config.keys - 1)
        # One choice per statement: drawing is most of a run's cost.
        self.programs = st.lists(st.sampled_from(statement_choices(config)), min_size=1,
                                 max_size=config.max_statements)

    def key(self):
        return self.keys

    def program(self):
        return self.programs

    def millis(self):
        return st.sampled_from(waits(self.config))

    def target(self):
        return st.integers(0, self.config.max_in_flight)

    def limit(self):
        return st.integers(1, 6)

    def timers(self):
        one = st.tuples(self.keys, self.programs).map(list)
        low, high = timer_sizes(self.config)
        # several timers of one key (timestamps apart) firing on one watermark, or a few on any keys
        same_key = st.tuples(self.keys, st.lists(self.programs, min_size=low, max_size=high)).map(
            lambda drawn: [[drawn[0], program] for program in drawn[1]])
        return st.one_of(st.lists(one, max_size=3), same_key)


def _rules_for(op, strategies: Strategies) -> dict:
    """The rule applying ``op`` with its arguments drawn per domain (and its burst rule)."""
    arguments = st.tuples(*(getattr(strategies, domain.kind)() for domain in op.domains))

    def apply(self, args):
        self.apply(op.name, *args)

    apply.__name__ = op.name
    rules = {op.name: rule(args=arguments)(apply)}
    if op.burst:
        def apply_burst(self, runs):
            for args in runs:
                self.apply(op.name, *args)

        apply_burst.__name__ = f"{op.name}_burst"
        rules[apply_burst.__name__] = rule(runs=st.lists(arguments, min_size=BURST[0], max_size=BURST[1]))(
            apply_burst)
    return rules


def make_async_machine(factory: Callable, config: AsyncMachineConfig = AsyncMachineConfig(),
                       record: RunRecord | None = None) -> type:
    """A machine class testing controllers built by ``factory(batch_size=,
    max_in_flight=, buffer_timeout=, clock=, backend=)``: one rule per operation of
    :data:`ASYNC_OPS` (and a burst of arrivals)."""
    record = record if record is not None else RunRecord()
    strategies = Strategies(config)

    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        self.attach(AsyncHarness(factory, config))

    def teardown(self) -> None:
        try:
            # Hypothesis calls teardown after a failing rule too: keep that failure.
            if self.harness.failure is None:
                self.apply("drain", 0)
                record.coverage.update(self.harness.coverage)
        finally:
            self.harness.close()

    namespace = {"__init__": __init__, "teardown": teardown, "record": record}
    for op in ASYNC_OPS:
        namespace.update(_rules_for(op, strategies))
    name = f"AsyncMachine[{getattr(factory, '__name__', 'impl')}]"
    machine = type(name, (HarnessMachine,), namespace)
    machine.__qualname__ = name
    return identify(machine, "async", factory, config)


def replay_setup(factory: Callable, config: AsyncMachineConfig):
    """How the async harness replays a program (it builds the controller itself)."""
    return (lambda: factory), {"config": config}
