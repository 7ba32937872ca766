"""Drive an async execution controller and the serial model side by side (docs/contract.md §12).

A program is a list of :class:`~cowcheck.core.program.Step` over the ops of
:data:`~cowcheck.async_exec.ops.ASYNC_OPS`: record arrivals (each record runs a small program of
chained async state calls on its key, see ``cowcheck.model.async_model``), time
passing, forced triggers, drains and partial mailbox runs. The harness builds
the controller itself (``factory(batch_size=, max_in_flight=,
buffer_timeout=, clock=, backend=)``) around a manual clock and a heap backend
of ``CopyOnWriteStateMap``s, so a step list replays exactly.

Properties (``Failure.code``):

- A1 order: records of one key start in arrival order, and each key's
  requests reach the executor in arrival order of their records;
- A2 exclusive: never two records of one key active at once (a record starts
  only after the previous one of its key finished; one holder per key);
- A3 in-flight: at most ``max_in_flight + 1`` records in flight (Flink's
  bound: a new record is admitted while in-flight == max), plus the timers in
  flight when timers overdraw (``overdraft``); a drain leaves at most its target;
- A4 batch: a batch holds ``min(batch_size, active queue)`` requests, and an
  unforced trigger only happens at a full batch;
- A5 once: every callback runs exactly once, every future completes;
- A6 release: reference counts never go negative, and after a drain to 0
  every count is 0, every key released, every queue empty;
- A7 state: every read equals the serial model's, and so does the final state;
- A8 timeout: once time has advanced, no request waits longer than the buffer
  timeout; a request entering the active queue arms the timeout;
- A9 context: callbacks run with their record's context current;
- A10 liveness: a drain finishes (kind TIMEOUT), the controller does not raise
  (kind CRASH);
- A11 epochs (``non_record`` steps, ``cowcheck.reference.epochs``): a non-record's
  trigger action runs once, only after every record that arrived before it
  has finished and the previous non-record's final action has run; its final
  action runs once, after its trigger action and after every timer the
  trigger fired has finished; in serial mode both have run when
  ``process_non_record`` returns; after a drain to 0 every one has run (and,
  white-box, after any step with an empty mailbox, every action whose epoch
  has finished has run: none fires late). ``final_actions=False`` (a release
  without them): one action, the trigger.

Timers: a non-record's trigger fires timers on keys of the records' own key
space, as Flink's timer service does (``process_timer``: a context for the
timer's key, a sync point with the timer's callback, which makes its own state
accesses); a timer may fire on a key a record holds, and at the in-flight
limit. A key's records and timers start in the order they enter the key's
queue (:class:`cowcheck.model.async_model.KeyOrder`: a timer when it fires, a record once
its arrival call has returned; A1, A2), and the serial model runs each record
and timer when it starts (A7).

Black-box, from the records' programs alone: A1, A2 (start after the
predecessor finished), A3 (records that have not finished their program are
certainly in flight), A5, A7, A8 (with the synchronous executor), A9, A10,
A11 (early, twice, never; serial mode's wait).
White-box, reading ``in_flight``, ``key_accounting``, ``buffer`` and the
batches handed to ``state_executor``: A1's executor order, A2's holders, A3's
count, A4, A6, A8's armed deadline.

>>> from cowcheck.reference.async_execution import AsyncExecutionController
>>> h = AsyncHarness(AsyncExecutionController, AsyncMachineConfig(batch_size=2, max_in_flight=1))
>>> for key in (1, 1, 2):
...     h.apply(Step("arrive", (key, [["add", "a", 5]])))
>>> h.apply(Step("drain", (0,)))
>>> sorted(h.coverage)
['backpressure-drain', 'batch-full-trigger', 'forced-trigger', 'same-key-blocked-then-activated']
"""

from __future__ import annotations


import attrs

from cowcheck.model.async_model import AsyncModel, KeyOrder
from cowcheck.async_exec.ops import ASYNC_OPS
# arrive, fire_timer, non_record: regression files written before they moved to records.py import them from here
from cowcheck.async_exec.records import ProgramHooks, _state_names, arrive, fire_timer, issue_program, non_record
from cowcheck.core.failures import CRASH, DIVERGENCE, INVARIANT, TIMEOUT, CheckFailure, Failure, json_data
from cowcheck.core.harness import HarnessBase
from cowcheck.core.program import Step
from cowcheck.reference.async_execution import DrainStalledError, ManualClock
from cowcheck.reference.state_executor import HeapStateBackend

__all__ = [
    "AsyncMachineConfig",
    "AsyncHarness",
    "ASYNC_SCENARIOS",
    "ProgramHooks",
    "issue_program",
    "arrive",
    "render_async",
    "render_async_program",
    "non_record",
    "fire_timer",
    "EPOCH_MODES",
]

# AsyncMachineConfig.epoch_mode -> the controller's epoch_parallel_mode (passed only when not the default)
EPOCH_MODES = ("serial", "parallel")


@attrs.frozen
class AsyncMachineConfig:
    """The controller's settings and what the machine generates.

    ``batch_size``, ``max_in_flight``, ``buffer_timeout`` (ms) go to the
    factory; ``keys``: record keys are ``0..keys-1``; ``states``: value state
    names; ``max_statements``: statements per record program; ``threaded``:
    pass ``threaded=True`` (batches on a worker thread); ``white_box``: check
    the controller's internals too (None: if it offers them); ``epoch_mode``:
    serial or parallel epochs. What the implementation has (a Flink release's
    defaults, ``cowcheck.flink``): ``final_actions``, non-records with a final
    action besides the trigger; ``overdraft``, timers admitted past the
    in-flight limit (with False they wait for capacity as records do)."""

    batch_size: int = 3
    max_in_flight: int = 4
    buffer_timeout: int = 10
    keys: int = 3
    states: tuple = ("a", "b")
    max_statements: int = 3
    threaded: bool = False
    white_box: bool | None = None
    epoch_mode: str = attrs.field(default="serial", validator=attrs.validators.in_(EPOCH_MODES))
    final_actions: bool = True
    overdraft: bool = True


# docs/contract.md §13's async scenarios (the first four) and one more worth counting.
ASYNC_SCENARIOS: dict[str, str] = {
    "same-key-blocked-then-activated": "same-key request blocked, then activated when the key was released",
    "backpressure-drain": "a new record drained in-flight records first (backpressure)",
    "forced-trigger": "forced trigger of a partial batch (trigger or drain)",
    "timeout-trigger": "buffer timeout triggered a batch",
    "batch-full-trigger": "active queue reached the batch size and triggered",
    "epoch-waited-for-records": "a non-record's trigger action waited for records that arrived before it",
    "epoch-final-waited-for-spawned": "a non-record's final action waited for records its trigger started",
    "epochs-overlapped": "a record of a later epoch started before an earlier non-record's trigger ran",
    "timer-on-key-in-flight": "a timer fired on a key that a record or timer in flight held",
    "timer-at-in-flight-limit": "a timer fired while in-flight was at its limit",
    "timer-ahead-of-draining-record": "a timer fired while a record of its key drained for capacity (timer first)",
}


def render_async(step: Step) -> str:
    """The step as a line of Python against a controller ``aec`` and clock ``clock``."""
    return ASYNC_OPS.render(step)


def render_async_program(steps: list[Step], config: AsyncMachineConfig = AsyncMachineConfig(),
                         factory: str = "AsyncExecutionController") -> str:
    """A runnable Python program for the steps (the factory named as in ``cowcheck.reference.async_execution``)."""
    threaded = ", threaded=True" if config.threaded else ""
    if config.epoch_mode == "parallel":
        threaded += ", epoch_parallel_mode=ParallelMode.PARALLEL_BETWEEN_EPOCH"
    lines = [
        "from cowcheck.reference.async_execution import AsyncExecutionController, ManualClock, ParallelMode",
        "from cowcheck.reference.state_executor import HeapStateBackend",
        "from cowcheck.async_exec.records import arrive, non_record",
        "clock, backend = ManualClock(), HeapStateBackend()",
        (f"aec = {factory}(batch_size={config.batch_size}, max_in_flight={config.max_in_flight}, "
         f"buffer_timeout={config.buffer_timeout}, clock=clock, backend=backend{threaded})"),
    ]
    lines += [render_async(s) for s in steps]
    return "\n".join(lines)


class _NonRecord:
    """One non-record as the harness sees it: how many records had arrived
    before it, what its trigger starts, how often its actions ran."""

    def __init__(self, nid: int, before: int, spawn: list, step: int) -> None:
        self.nid = nid
        self.before = before  # records r0 .. r{before-1} arrived before it
        self.spawn = spawn
        self.step = step
        self.triggers = 0
        self.finals = 0
        self.spawned: list = []  # traces of the records its trigger started
        self.waited = False  # records that arrived before it were still running when it arrived

    def describe(self) -> str:
        return f"non-record n{self.nid}"


# -------------------------------------------------------------------- harness


class _Trace(ProgramHooks):
    """One record as the harness sees it."""

    def __init__(self, harness: "AsyncHarness", rid: int, key, program, timer: bool) -> None:
        self.harness = harness
        self.rid = rid
        self.key = key
        self.program = program
        self.timer = timer
        self.expected: list = []  # the serial model's reads, once the record starts
        self.context = None
        self.reads: list = []
        self.calls: list[int] = []
        self.futures: list = []
        self.requests: list = []  # (time issued, future) of every state request
        self.started = False
        self.finished = False  # known finished (AsyncHarness._finished)
        self.started_at = -1  # the how-manieth record to start
        self.blocked = False
        self.done = False

    def callback(self, fn):
        index = len(self.calls)
        self.calls.append(0)

        def observed(*args):
            self.calls[index] += 1
            self.harness._on_callback(self, index)
            return fn(*args)

        return observed

    def request(self, future):
        self.requests.append((self.harness.clock(), future))
        return self.future(future)

    def future(self, future):
        self.futures.append(future)
        return future

    def read(self, value) -> None:
        index = len(self.reads)
        self.reads.append(value)
        want = self.expected[index] if index < len(self.expected) else "no read"
        if index >= len(self.expected) or want != value:
            self.harness._violate(DIVERGENCE, "A7", f"record r{self.rid} (key {self.key!r}) read #{index}: "
                                                    f"model {want!r}, controller {value!r}", want, value)

    def describe(self) -> str:
        return f"{'timer ' if self.timer else ''}r{self.rid} (key {self.key!r})"


class _ObservedExecutor:
    """Wraps the controller's executor to see every batch as it is submitted."""

    def __init__(self, inner, harness: "AsyncHarness") -> None:
        self.inner = inner
        self.harness = harness

    def execute_batch(self, batch) -> None:
        self.harness._on_batch(batch)
        self.inner.execute_batch(batch)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def has_async_introspection(controller) -> bool:
    return all(hasattr(controller, name) for name in ("in_flight", "key_accounting", "buffer", "state_executor"))


class AsyncHarness(HarnessBase):
    """Drives one controller against the serial model.

    ``factory``: called with the controller keyword arguments (a class,
    usually); an already built controller stands for its class (it is closed
    and a fresh one built, since the harness must own the clock and backend).
    ``config``: an :class:`AsyncMachineConfig`.
    """

    operations = ASYNC_OPS
    crash_code = "A10"

    def __init__(self, factory, config: AsyncMachineConfig = AsyncMachineConfig()) -> None:
        super().__init__()
        if hasattr(factory, "handle_request") and not isinstance(factory, type):
            factory.close()
            factory = type(factory)
        self.config = config
        self.clock = ManualClock()
        self.backend = HeapStateBackend()
        options = dict(batch_size=config.batch_size, max_in_flight=config.max_in_flight,
                       buffer_timeout=config.buffer_timeout, clock=self.clock, backend=self.backend)
        if config.threaded:
            options["threaded"] = True
        if config.epoch_mode == "parallel":
            from cowcheck.reference.epochs import ParallelMode

            options["epoch_parallel_mode"] = ParallelMode.PARALLEL_BETWEEN_EPOCH
        self.controller = factory(**options)
        self.white_box = has_async_introspection(self.controller) if config.white_box is None else config.white_box
        self.model = AsyncModel()
        self.order = KeyOrder()
        self.states: dict = {}  # state name -> ValueState
        self.traces: list[_Trace] = []
        self.by_record: dict = {}  # record id -> trace
        self._unfinished = 0  # records whose program has not finished
        self._unfinished_timers = 0  # of which timers
        self._finished_upto = 0  # traces[:this] have all finished
        self._pending: list[Failure] = []
        self._forcing: list[bool] = []
        self._last_executed: dict = {}  # key -> the trace of its last executed request
        self._starts = 0
        # Requests a trigger left in the active queue: Flink arms the timeout
        # only when a request enters, so these may legitimately wait unarmed.
        self._leftovers: set = set()
        self.non_records: list[_NonRecord] = []
        if self.white_box:
            self._observe_controller()

    def _observe_controller(self) -> None:
        # Observation without test hooks in the reference: wrap the executor
        # and the trigger (internal calls go through the instance attribute).
        controller = self.controller
        controller.state_executor = _ObservedExecutor(controller.state_executor, self)
        trigger = controller.trigger_if_needed

        def observed_trigger(force: bool = False) -> bool:
            self._forcing.append(force)
            try:
                ran = trigger(force)
            finally:
                self._forcing.pop()
            if ran:
                self._leftovers = set(controller.buffer.active_queue)
            return ran

        controller.trigger_if_needed = observed_trigger

    def close(self) -> None:
        self.controller.close()

    # ------------------------------------------------------------- helpers

    def _violate(self, kind: str, code: str, message: str, expected=None, actual=None) -> None:
        """Record a broken property seen inside the controller's call stack;
        raised after the step, so the controller is never unwound mid-update."""
        self._pending.append(Failure(kind, code, message, len(self.steps) - 1, json_data(expected),
                                     json_data(actual)))

    def _crashed(self, step: Step, exc: Exception):
        """A stalled drain is A10's TIMEOUT, first: the task would hang, whatever else broke on the
        way (counted as ``+N more``); else a property already broken inside the call is the
        failure; anything else the controller raised, A10's CRASH."""
        if isinstance(exc, DrainStalledError):
            more = f" (+{len(self._pending)} more)" if self._pending else ""
            self._fail(TIMEOUT, "A10", f"{render_async(step)}: {exc}{more}", "the drain finishes", str(exc))
        self._raise_pending()
        super()._crashed(step, exc)

    def _raise_pending(self) -> None:
        if self._pending:
            first = self._pending[0]
            more = f" (+{len(self._pending) - 1} more)" if len(self._pending) > 1 else ""
            self.failure = attrs.evolve(first, message=first.message + more)
            raise CheckFailure(self.failure)

    # --------------------------------------------------------------- apply

    def _apply(self, step: Step) -> None:
        if step.op not in ASYNC_OPS:
            self._fail(CRASH, "program", f"unknown async operation {step.op!r}")
        getattr(self, "_op_" + step.op)(step, *step.args)
        self._raise_pending()
        self._check_after_step(step)

    def _op_arrive(self, step, key, program):
        self._arrive(step, key, program)

    def _arrive(self, step, key, program, spawned_by: "_NonRecord | None" = None):
        """A record arrives (from the step, through ``_call``), or a timer fires (``spawned_by``: from a
        trigger action, already inside the controller's call)."""
        rid = len(self.traces)
        trace = _Trace(self, rid, key, program, spawned_by is not None)
        if spawned_by is None:
            self.order.arrive(rid, key)
        else:
            self._count_timer_collisions(key)
            self.order.fire(rid, key)
            self._unfinished_timers += 1
        self._unfinished += 1
        self.traces.append(trace)
        self.by_record[rid] = trace
        for name in _state_names(program) - self.states.keys():
            self.states[name] = self.controller.value_state(name)
        if self.white_box and self.controller.in_flight > self.config.max_in_flight:
            self.coverage["backpressure-drain"] += 1

        def processing():
            self._on_start(trace)
            end = issue_program(self.states, program, trace)
            trace.future(end.then_accept(trace.callback(lambda _: self._on_done(trace))))

        if spawned_by is None:
            context = self._call(step, self.controller.process_record, rid, key, trace.callback(processing))
            self.order.entered(rid)
        else:
            spawned_by.spawned.append(trace)
            context = self.controller.process_timer(rid, key, trace.callback(processing))
        for earlier in self.non_records:
            if earlier.triggers == 0 and rid >= earlier.before:
                self.coverage["epochs-overlapped"] += 1
                break
        if trace.context is None:
            trace.context = context
            trace.blocked = True
        elif trace.context is not context:
            self._violate(DIVERGENCE, "A9", f"record {trace.describe()} started with a context that is not "
                                            f"its own ({trace.context!r})")

    def _count_timer_collisions(self, key) -> None:
        """Coverage: a timer about to fire on a key in flight, or at the in-flight limit."""
        if self.white_box:
            held = key in self.controller.key_accounting.occupied
            in_flight = self.controller.in_flight
        else:
            held = any(t.key == key and not self._finished(t) for t in self.traces[self._finished_prefix():])
            in_flight = self._unfinished
        if held:
            self.coverage["timer-on-key-in-flight"] += 1
        if in_flight >= self.config.max_in_flight:
            self.coverage["timer-at-in-flight-limit"] += 1
        if self.order.arriving(key):
            self.coverage["timer-ahead-of-draining-record"] += 1

    def _bound_text(self) -> str:
        timers = self._unfinished_timers if self.config.overdraft else 0
        return f"{self.config.max_in_flight} + 1" + (f" + {timers} timers" if timers else "")

    def _in_flight_bound(self) -> int:
        """A3: the limit + 1, and the timers in flight when timers overdraw."""
        return self.config.max_in_flight + 1 + (self._unfinished_timers if self.config.overdraft else 0)

    def _op_advance_time(self, step, millis):
        self.clock.advance(millis)
        self._call(step, lambda: self.controller.run_mailbox(timers=True))
        if self.config.buffer_timeout > 0:
            if self.white_box:
                self._check_timeout_fired(step)
            if not self.config.threaded:  # a worker thread completes in its own time
                self._check_requests_not_overdue(step)

    def _op_trigger(self, step):
        self._call(step, self.controller.trigger_if_needed, True)

    def _op_drain(self, step, target):
        self._call(step, self.controller.drain_inflight_records, target)
        if self.white_box and self.controller.in_flight > target:
            self._fail(INVARIANT, "A3", f"{render_async(step)}: returned with {self.controller.in_flight} "
                                        f"records in flight", target, self.controller.in_flight)
        if target == 0:
            self._check_all_finished(step)

    def _op_run_mail(self, step, limit):
        self._call(step, self.controller.run_mailbox, limit)

    def _op_non_record(self, step, timers):
        if not callable(getattr(self.controller, "process_non_record", None)):
            return  # a controller without epochs (optional, as the map's visitor is): nothing to check
        nr = _NonRecord(len(self.non_records), len(self.traces), timers, len(self.steps) - 1)
        nr.waited = self._finished_prefix() < len(self.traces)
        self.non_records.append(nr)
        final = self.config.final_actions
        self._call(step, non_record, self.controller, [], lambda: self._on_trigger(step, nr),
                   lambda: self._on_final(nr), final)
        want = (1, 1) if final else (1, 0)
        if self.config.epoch_mode == "serial" and (nr.triggers, nr.finals) != want and not self._pending:
            self._fail(DIVERGENCE, "A11", f"{render_async(step)}: returned in serial mode before its epoch "
                                          f"finished (trigger ran {nr.triggers}, final ran {nr.finals} times)",
                       "both ran" if final else "the trigger ran", f"trigger {nr.triggers}, final {nr.finals}")

    # ------------------------------------------------------------ epochs

    def _finished(self, trace: _Trace) -> bool:
        """The record finished: its program, every future it made (and white-box, its context).
        Once finished, for good (kept: the epoch checks ask again after every step)."""
        if trace.finished:
            return True
        if not trace.done or not all(f.is_done() for f in trace.futures):
            return False
        trace.finished = not self.white_box or trace.context is None or trace.context.ref_count == 0
        return trace.finished

    def _finished_prefix(self) -> int:
        """How many traces from the first on have all finished."""
        traces, at = self.traces, self._finished_upto
        while at < len(traces) and self._finished(traces[at]):
            at += 1
        self._finished_upto = at
        return at

    def _on_trigger(self, step, nr: _NonRecord) -> bool:
        """The trigger action of ``nr`` runs: False (start nothing) if it ran before."""
        nr.triggers += 1
        if nr.triggers > 1:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its trigger action ran {nr.triggers} times", 1,
                          nr.triggers)
            return False
        if self.controller.current_context is not None:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its trigger action ran with a record context "
                                             f"current ({self.controller.current_context!r})")
        previous = self.non_records[nr.nid - 1] if nr.nid else None
        if previous is not None and (previous.finals if self.config.final_actions else previous.triggers) != 1:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its trigger action ran before the final action "
                                             f"of {previous.describe()}", f"n{previous.nid} first",
                          f"n{nr.nid} first")
        waiting = [t.describe() for t in self.traces[:nr.before] if not self._finished(t)]
        if waiting:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its trigger action ran while records that "
                                             f"arrived before it had not finished: {', '.join(waiting[:3])}",
                          "every earlier record finished", waiting[:3])
        if nr.waited:
            self.coverage["epoch-waited-for-records"] += 1
        if callable(getattr(self.controller, "process_timer", None)):  # optional, as process_non_record is
            for key, program in nr.spawn:
                self._arrive(step, key, program, spawned_by=nr)
        return True

    def _on_final(self, nr: _NonRecord) -> None:
        nr.finals += 1
        if nr.finals > 1:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its final action ran {nr.finals} times", 1,
                          nr.finals)
            return
        if nr.triggers != 1:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its final action ran before its trigger action")
        waiting = [t.describe() for t in nr.spawned if not self._finished(t)]
        if waiting:
            self._violate(DIVERGENCE, "A11", f"{nr.describe()}: its final action ran while records its trigger "
                                             f"started had not finished: {', '.join(waiting[:3])}",
                          "every started record finished", waiting[:3])
        elif nr.spawned:
            self.coverage["epoch-final-waited-for-spawned"] += 1

    def _check_epochs_not_late(self, step: Step) -> None:
        """White-box, between steps with nothing left in the mailbox: an action whose
        epoch has finished has run (Flink runs them as the last record completes)."""
        if self.config.threaded or len(self.controller.mailbox):
            return
        finished = self._finished_prefix()
        for nr in self.non_records:
            if nr.before > finished:
                return  # this one waits, and so do the later ones
            if nr.triggers == 0:
                self._fail(DIVERGENCE, "A11", f"after {render_async(step)}: every record before {nr.describe()} "
                                              f"has finished, but its trigger action has not run",
                           "trigger ran", "not yet")
            if nr.finals == 0 and self.config.final_actions:
                if all(self._finished(t) for t in nr.spawned):
                    self._fail(DIVERGENCE, "A11", f"after {render_async(step)}: the records {nr.describe()}'s "
                                                  f"trigger started have finished, but its final action has "
                                                  f"not run", "final ran", "not yet")
                return

    # ------------------------------------------------------------ observed

    def _on_callback(self, trace: _Trace, index: int) -> None:
        if trace.calls[index] > 1:
            self._violate(DIVERGENCE, "A5", f"record {trace.describe()}: callback #{index} ran "
                                            f"{trace.calls[index]} times", 1, trace.calls[index])
        current = self.controller.current_context
        if trace.context is not None and current is not trace.context:
            self._violate(DIVERGENCE, "A9", f"record {trace.describe()}: callback #{index} ran with the "
                                            f"context of another record current ({current!r})")

    def _on_start(self, trace: _Trace) -> None:
        trace.started = True
        trace.started_at = self._starts
        self._starts += 1
        if trace.context is None:
            trace.context = self.controller.current_context
        if trace.blocked:
            self.coverage["same-key-blocked-then-activated"] += 1
        # Each start checks the ones of its key it must follow (KeyOrder), so together they check the
        # whole order; the model then runs the record, in the order the controller chose.
        for code, text in self.order.start(trace.rid, self._program_finished):
            self._violate(DIVERGENCE, code, f"record {trace.describe()}: {text}")
        if self.white_box:
            for other in map(self.traces.__getitem__, self.order.after(trace.rid)):
                if other.started and other.context is not None and other.context.ref_count != 0:
                    self._violate(INVARIANT, "A2", f"record {trace.describe()} started while r{other.rid} of the "
                                                   f"same key still has {other.context.ref_count} references", 0,
                                  other.context.ref_count)
        trace.expected = self.model.run_record(trace.key, trace.program)

    def _program_finished(self, rid: int) -> bool:
        other = self.traces[rid]
        return other.done and all(f.is_done() for f in other.futures)

    def _on_done(self, trace: _Trace) -> None:
        trace.done = True
        self._unfinished -= 1
        self._unfinished_timers -= trace.timer
        if len(trace.reads) != len(trace.expected):
            self._violate(DIVERGENCE, "A7", f"record {trace.describe()} finished after {len(trace.reads)} "
                                            f"reads, the model made {len(trace.expected)}",
                          trace.expected, trace.reads)

    def _on_batch(self, batch) -> None:
        controller, config = self.controller, self.config
        forced = self._forcing[-1] if self._forcing else None
        n = len(batch)
        before = n + controller.buffer.active_queue_size()
        if forced is None:  # triggered inside the implementation (Flink's own calls): judge by the queue
            forced = before < config.batch_size
        if n != min(config.batch_size, before) or n == 0:
            self._violate(INVARIANT, "A4", f"a batch of {n} requests was popped from an active queue of "
                                           f"{before} with batch size {config.batch_size}",
                          min(config.batch_size, before), n)
        elif forced is False and before < config.batch_size:
            self._violate(INVARIANT, "A4", f"an unforced trigger ran a batch of {n} below the batch size "
                                           f"{config.batch_size}", config.batch_size, n)
        if controller.in_flight > self._in_flight_bound():
            self._violate(INVARIANT, "A3", f"{controller.in_flight} records in flight, the bound is "
                                           f"{self._bound_text()}", self._in_flight_bound(), controller.in_flight)
        if forced:
            self.coverage["timeout-trigger" if self.steps[-1].op == "advance_time" else "forced-trigger"] += 1
        else:
            self.coverage["batch-full-trigger"] += 1
        for request in batch:
            context = request.context
            trace = self.by_record.get(context.record)
            if trace is None or trace.context is not context:
                self._violate(INVARIANT, "A2", f"executed a request of an unknown record context {context!r}")
                continue
            # A key's requests reach the executor in the order its records started (KeyOrder checks that order).
            last = self._last_executed.get(context.key)
            if last is not None and last.started_at > trace.started_at:
                self._violate(DIVERGENCE, "A1", f"key {context.key!r}: a request of r{trace.rid} executed after "
                                                f"one of r{last.rid}, which started later", f"r{trace.rid} first",
                              f"r{last.rid} first")
            if last is None or trace.started_at > last.started_at:
                self._last_executed[context.key] = trace
            holder = controller.key_accounting.occupied.get(context.key, None)
            if not context.key_occupied or holder != trace.rid:
                self._violate(INVARIANT, "A2", f"a request of record {trace.describe()} executed while the key "
                                               f"is held by {holder!r}", trace.rid, holder)

    # -------------------------------------------------------------- checks

    def _check_after_step(self, step: Step) -> None:
        if self.white_box:
            self._check_structure(step)
            if self.non_records:
                self._check_epochs_not_late(step)
        # A record that has not finished its program is certainly still in flight.
        bound = self._in_flight_bound()
        if self._unfinished > bound:
            self._fail(DIVERGENCE, "A3", f"after {render_async(step)}: {self._unfinished} records have not "
                                         f"finished, at most {self._bound_text()} may be in flight", bound,
                       self._unfinished)

    def _check_structure(self, step: Step) -> None:
        """White-box A2, A3, A6, A8 on the controller's own bookkeeping."""
        controller, config = self.controller, self.config
        in_flight = controller.in_flight
        if not 0 <= in_flight <= self._in_flight_bound():
            self._fail(INVARIANT, "A3", f"after {render_async(step)}: {in_flight} records in flight, the bound "
                                        f"is {self._bound_text()}", self._in_flight_bound(), in_flight)
        holders: dict = {}
        for trace in self.traces:
            ctx = trace.context
            if ctx is None:
                continue
            if ctx.ref_count < 0:
                self._fail(INVARIANT, "A6", f"after {render_async(step)}: record {trace.describe()} has "
                                            f"reference count {ctx.ref_count}", ">= 0", ctx.ref_count)
            if ctx.key_occupied:
                if trace.key in holders:
                    self._fail(INVARIANT, "A2", f"after {render_async(step)}: records r{holders[trace.key]} and "
                                                f"r{trace.rid} both hold key {trace.key!r}")
                holders[trace.key] = trace.rid
        occupied = dict(controller.key_accounting.occupied)
        for key, rid in list(occupied.items()):
            ctx = self.by_record[rid].context if rid in self.by_record else None
            if (len(controller.mailbox) and key not in holders and ctx is not None and ctx.ref_count == 0
                    and not ctx.key_occupied):
                del occupied[key]  # count reached 0 from the executor: the disposal may be a pending mail
        if occupied != holders:
            self._fail(INVARIANT, "A2", f"after {render_async(step)}: key accounting holds {occupied}, the "
                                        f"records holding their keys are {holders}", holders, occupied)
        if len(holders) > in_flight:
            self._fail(INVARIANT, "A3", f"after {render_async(step)}: {len(holders)} records hold keys but only "
                                        f"{in_flight} are counted in flight", len(holders), in_flight)
        if config.buffer_timeout > 0:
            self._check_timeout_armed(step)

    def _check_timeout_armed(self, step: Step) -> None:
        buffer = self.controller.buffer
        arrived = [r for r in buffer.active_queue if r not in self._leftovers]
        if arrived and buffer.seq_and_timeout is None:
            self._fail(INVARIANT, "A8", f"after {render_async(step)}: {len(arrived)} requests entered the active "
                                        f"queue since the last trigger but no timeout is armed")

    def _check_timeout_fired(self, step: Step) -> None:
        buffer, now = self.controller.buffer, self.clock()
        armed = buffer.seq_and_timeout
        if armed is not None and armed[1] <= now:
            self._fail(INVARIANT, "A8", f"after {render_async(step)}: the timeout armed for t={armed[1]} has "
                                        f"not fired at t={now}", f"a trigger by t={armed[1]}", "no trigger")

    def _check_requests_not_overdue(self, step: Step) -> None:
        """Black-box A8. Under process_record the active queue never outgrows a
        batch, so the timeout trigger takes every waiting request with it."""
        now, timeout = self.clock(), self.config.buffer_timeout
        for trace in self.traces:
            for issued, future in trace.requests:
                if issued + timeout <= now and not future.is_done():
                    self._fail(DIVERGENCE, "A8", f"after {render_async(step)}: a request of record "
                                                 f"{trace.describe()} issued at t={issued} is still pending at "
                                                 f"t={now} (buffer timeout {timeout})", "done", "pending")

    def _check_all_finished(self, step: Step) -> None:
        """After a drain to 0: everything ran exactly once and the state is the model's."""
        where = f"after {render_async(step)}"
        for trace in self.traces:
            if not trace.done:
                self._fail(DIVERGENCE, "A5", f"{where}: record {trace.describe()} never finished its program")
            missed = [i for i, n in enumerate(trace.calls) if n != 1]
            if missed:
                self._fail(DIVERGENCE, "A5", f"{where}: record {trace.describe()}: callbacks {missed} ran "
                                             f"{[trace.calls[i] for i in missed]} times", 1, trace.calls[missed[0]])
            pending = sum(1 for f in trace.futures if not f.is_done())
            if pending:
                self._fail(DIVERGENCE, "A5", f"{where}: record {trace.describe()}: {pending} futures never completed")
        if self.white_box:
            controller = self.controller
            counts = {t.rid: t.context.ref_count for t in self.traces if t.context.ref_count or t.context.key_occupied}
            if counts:
                self._fail(INVARIANT, "A6", f"{where}: records with references or keys left: {counts}", {}, counts)
            left = (controller.key_accounting.occupied_count(), controller.buffer.active_queue_size(),
                    controller.buffer.blocking_queue_size)
            if left != (0, 0, 0):
                self._fail(INVARIANT, "A6", f"{where}: {left[0]} keys held, {left[1]} requests active, "
                                            f"{left[2]} blocked", (0, 0, 0), left)
        want = (1, 1) if self.config.final_actions else (1, 0)
        for nr in self.non_records:
            if (nr.triggers, nr.finals) != want:
                self._fail(DIVERGENCE, "A11", f"{where}: {nr.describe()}'s trigger action ran {nr.triggers}, its "
                                              f"final action {nr.finals} times", want, (nr.triggers, nr.finals))
        want = {(key, name): value for (key, name), value in self.model.data.items()}
        got = {(key, name): value for name, key, _, value in self.backend.items()}
        if want != got:
            diff = sorted(set(want.items()) ^ set(got.items()), key=repr)[:4]
            self._fail(DIVERGENCE, "A7", f"{where}: final state differs from the model's in {diff}", want, got)
