"""A Hypothesis state machine over the async execution controller (docs/contract.md §12).

``make_async_machine(factory, config, record)`` returns a
``RuleBasedStateMachine`` class whose rules interleave record arrivals (one
record, or a burst of them), time passing (the periodic buffer-timeout check
then an idle mailbox), forced triggers, drains to a target, partial
mailbox runs and non-records (whose trigger actions may start records). Each rule becomes a :class:`~properties.core.program.Step` applied
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
from properties.async_exec.walks import statement_choices, waits
from properties.core.machine import HarnessMachine, RunRecord, identify

__all__ = ["AsyncMachineConfig", "make_async_machine", "record_programs", "replay_setup"]


def record_programs(config: AsyncMachineConfig) -> st.SearchStrategy:
    """Record programs (see ``model.async_model``) over the config's state names."""
    # One choice per statement: drawing is most of a run's cost.
    return st.lists(st.sampled_from(statement_choices(config)), min_size=1, max_size=config.max_statements)


def make_async_machine(factory: Callable, config: AsyncMachineConfig = AsyncMachineConfig(),
                       record: RunRecord | None = None) -> type:
    """A machine class testing controllers built by ``factory(batch_size=,
    max_in_flight=, buffer_timeout=, clock=, backend=)``."""
    record = record if record is not None else RunRecord()
    keys = st.integers(0, config.keys - 1)
    programs = record_programs(config)
    arrival = st.tuples(keys, programs)
    pauses = waits(config)

    class AsyncMachine(HarnessMachine):
        def __init__(self) -> None:
            super().__init__()
            self.attach(AsyncHarness(factory, config))

        @rule(arrival=arrival)
        def arrive(self, arrival):
            self.apply("arrive", *arrival)

        @rule(arrivals=st.lists(arrival, min_size=2, max_size=5))
        def arrive_burst(self, arrivals):
            for key, program in arrivals:
                self.apply("arrive", key, program)

        @rule(millis=st.sampled_from(pauses))
        def advance_time(self, millis):
            self.apply("advance_time", millis)

        @rule()
        def trigger(self):
            self.apply("trigger")

        @rule(limit=st.integers(0, config.max_in_flight))
        def drain(self, limit):
            self.apply("drain", limit)

        @rule(limit=st.integers(1, 6))
        def run_mail(self, limit):
            self.apply("run_mail", limit)

        @rule(spawn=st.lists(arrival.map(list), max_size=2))
        def non_record(self, spawn):
            self.apply("non_record", spawn)

        def teardown(self) -> None:
            try:
                # Hypothesis calls teardown after a failing rule too: keep that failure.
                if self.harness.failure is None:
                    self.apply("drain", 0)
                    record.coverage.update(self.harness.coverage)
            finally:
                self.harness.close()

    AsyncMachine.__name__ = AsyncMachine.__qualname__ = f"AsyncMachine[{getattr(factory, '__name__', 'impl')}]"
    AsyncMachine.record = record
    return identify(AsyncMachine, "async", factory, config)


def replay_setup(factory: Callable, config: AsyncMachineConfig):
    """How the async harness replays a program (it builds the controller itself)."""
    return (lambda: factory), {"config": config}
