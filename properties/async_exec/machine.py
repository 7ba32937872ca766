"""A Hypothesis state machine over the async execution controller (docs/contract.md §12).

``make_async_machine(factory, config, record)`` returns a
``RuleBasedStateMachine`` class with a rule per operation of
:data:`~properties.async_exec.ops.ASYNC_OPS`, made from the table
(:func:`properties.core.rules.operation_rules`): record arrivals, time
passing (the periodic buffer-timeout check then an idle mailbox), forced
triggers, drains to a target, partial mailbox runs and non-records (whose
trigger actions may start records); one more rule, a burst of 2 to 5
arrivals, is written here. Each step is a :class:`~properties.core.program.Step` applied
through the :class:`~properties.async_exec.harness.AsyncHarness`, which checks
A1–A11 after every step; every example ends with a drain to 0, which checks
that everything finished and the state equals the serial model's. Steps of
the last run are kept (``record.last.steps``), so a failure is data.

Few keys, a small batch size and a small in-flight limit make same-key
blocking, backpressure and partial batches happen in nearly every run.

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from reference.async_execution import AsyncExecutionController
>>> Machine = make_async_machine(AsyncExecutionController)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=5, database=None))
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st
from hypothesis.stateful import rule

from properties.async_exec.harness import AsyncHarness, AsyncMachineConfig
from properties.async_exec.ops import ASYNC_OPS
from properties.async_exec.walks import statement_choices, waits
from properties.core.machine import HarnessMachine, RunRecord, identify
from properties.core.rules import RuleContext, operation_rules

__all__ = ["AsyncMachineConfig", "make_async_machine", "record_programs", "replay_setup"]


def record_programs(config: AsyncMachineConfig) -> st.SearchStrategy:
    """Record programs (see ``model.async_model``) over the config's state names."""
    # One choice per statement: drawing is most of a run's cost.
    return st.lists(st.sampled_from(statement_choices(config)), min_size=1, max_size=config.max_statements)


class _Draws(RuleContext):
    """The values the machine's rules draw, per domain kind of :data:`~properties.async_exec.ops.ASYNC_OPS`:
    few keys, and time steps around the buffer timeout."""

    def __init__(self, config: AsyncMachineConfig) -> None:
        self.config = config
        self.arrivals = st.tuples(st.integers(0, config.keys - 1), record_programs(config))

    def arrival(self):
        return self.arrivals

    def millis(self):
        return st.sampled_from(waits(self.config))

    def in_flight(self):  # what a drain waits down to
        return st.integers(0, self.config.max_in_flight)

    def limit(self):
        return st.integers(1, 6)

    def spawn(self):
        return st.lists(self.arrivals.map(list), max_size=2)


def make_async_machine(factory: Callable, config: AsyncMachineConfig = AsyncMachineConfig(),
                       record: RunRecord | None = None) -> type:
    """A machine class testing controllers built by ``factory(batch_size=,
    max_in_flight=, buffer_timeout=, clock=, backend=)``."""
    record = record if record is not None else RunRecord()
    draws = _Draws(config)
    rules = operation_rules(ASYNC_OPS, draws, {})

    def __init__(self) -> None:
        HarnessMachine.__init__(self)
        self.attach(AsyncHarness(factory, config))

    @rule(arrivals=st.lists(draws.arrivals, min_size=2, max_size=5))
    def arrive_burst(self, arrivals):
        """Several records arrive between two other steps (a rule of their own: the table's
        ``repeat`` repeats one step, and a burst's records differ)."""
        for key, program in arrivals:
            self.apply("arrive", key, program)

    def teardown(self) -> None:
        try:
            # Hypothesis calls teardown after a failing rule too: keep that failure.
            if self.harness.failure is None:
                self.apply("drain", 0)
                record.coverage.update(self.harness.coverage)
        finally:
            self.harness.close()

    name = f"AsyncMachine[{getattr(factory, '__name__', 'impl')}]"
    machine = type(name, (HarnessMachine,), {**rules, "arrive_burst": arrive_burst, "__init__": __init__,
                                             "teardown": teardown})
    machine.__qualname__ = name
    machine.record = record
    return identify(machine, "async", factory, config)


def replay_setup(factory: Callable, config: AsyncMachineConfig):
    """How the async harness replays a program (it builds the controller itself)."""
    return (lambda: factory), {"config": config}
