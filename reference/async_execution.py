"""AsyncExecutionController: Flink 2.x's async state execution (docs/contract.md §12, FLIP-424/425).

Contract: records are processed asynchronously, yet every key behaves as if
its records ran one at a time in arrival order. A record's processing
function issues state requests (``ValueState.async_value()`` and friends)
that return ``StateFuture``s; requests are buffered and executed in batches
against the backend; callbacks run later on the task thread, with the
record's context restored.

How (one step per Flink class):

- ``RecordContext``: a record and its key, reference counted. Every request
  and every registered callback holds a reference (see
  ``cowcheck.reference.state_future``). At 0 the context is disposed: its key is
  released, the in-flight count drops by one and the first request blocked on
  that key is activated.
- ``KeyAccountingUnit``: which record holds which key. A record takes its key
  with its first request; while it holds it, no other record of that key runs.
- ``StateRequestBuffer``: the active queue (requests ready to run, FIFO) and,
  per key, a FIFO blocking queue; plus the buffer timeout.
- ``AsyncExecutionController.handle_request``: wrap the current context in a
  future, seize capacity (a new record drains while in-flight > max), put the
  request in the active queue if the record holds (or can take) its key, else
  in the key's blocking queue; trigger a batch when the active queue reaches
  the batch size. A trigger pops at most ``batch_size`` requests, forced or not.
- ``process_record``: what Flink's record processor does around
  ``processElement``: the processing function runs as the callback of a
  SYNC_POINT request, so it starts only once its record holds the key.
- ``process_timer``: what Flink's timer service does for a timer that fires
  (``InternalTimerServiceAsyncImpl.maintainContextAndProcess``): a context of
  its own for the timer's key, then a SYNC_POINT with the timer's callback,
  *with overdraft*: a timer at the in-flight limit drains only while that
  makes progress (and not at all more than 5 drains deep), then goes in
  anyway, so a timer fired inside the disposal of a record never waits for
  that record.

Threading model: everything runs on the task thread that calls the
controller, except the optional threaded executor, whose worker only posts
mails. The task thread runs mails in ``run_mailbox`` and while draining.
The buffer timeout is driven by an injectable clock (milliseconds): the
periodic check Flink runs on a timer thread is ``check_buffer_timeout()``,
which posts the timeout trigger as a mail; ``run_mailbox(timers=True)`` runs
it first.

- ``process_non_record(trigger, final)``: a watermark, timer or other
  non-record input closes the current epoch (``cowcheck.reference.epochs``): its
  trigger action runs once every record that arrived before it has finished
  (and every earlier epoch), records the trigger starts join the finishing
  epoch, and the final action runs once those have finished too. Actions run
  with no record context current. ``epoch_parallel_mode``:
  ``SERIAL_BETWEEN_EPOCH`` (Flink's, the default) drains every in-flight
  record before ``process_non_record`` returns; ``PARALLEL_BETWEEN_EPOCH``
  lets the next epoch's records run meanwhile.

Deviations from Flink 2.3, on purpose: no record priorities, declared
variables, inherited epochs (``build_context(..., inherit=True)``) or metrics; a drain that cannot make progress raises
``DrainStalledError`` instead of spinning forever (Flink: "There must be a
bug"); a future completed twice raises.

Quirks kept from Flink: in-flight may reach ``max_in_flight + 1`` (the drain
waits while in-flight > max, then the new record counts itself), and more
through timers' overdraft; requests
left in the active queue after a trigger carry no timeout until the next
request arrives (the trigger clears the deadline, only an enqueue sets one).

The one usage rule: a record touches state only inside its processing
function and the callbacks chained from it.

>>> aec = AsyncExecutionController(batch_size=2, max_in_flight=10, buffer_timeout=0)
>>> count = aec.value_state("count")
>>> def bump():
...     count.async_value().then_apply(lambda v: (v or 0) + 1).then_compose(count.async_update)
>>> for record in ("a", "b", "c"):
...     _ = aec.process_record(record, "k", bump)
>>> aec.drain_inflight_records(0)
>>> sorted(aec.backend.items()), aec.in_flight
([('count', 'k', 0, 3)], 0)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from cowcheck.reference.epochs import EpochManager, ParallelMode
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.state_executor import (
    VOID_NAMESPACE,
    HeapStateBackend,
    StateRequest,
    StateRequestType,
    SyncStateExecutor,
    ThreadedStateExecutor,
)
from cowcheck.reference.state_future import ContextStateFuture, StateFuture

__all__ = [
    "AsyncExecutionController",
    "RecordContext",
    "KeyAccountingUnit",
    "StateRequestBuffer",
    "Mailbox",
    "ManualClock",
    "ValueState",
    "DrainStalledError",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_BUFFER_TIMEOUT",
    "ParallelMode",
]

# Flink's defaults: execution.async-state.buffer-size, .in-flight-records-limit, .buffer-timeout (ms).
DEFAULT_BATCH_SIZE = 1000
DEFAULT_MAX_IN_FLIGHT = 6000
DEFAULT_BUFFER_TIMEOUT = 1000
# Flink (2.0 on): an overdraft drain inside more than this many nested drains does not drain at all.
OVERDRAFT_DEPTH = 5


class DrainStalledError(IllegalStateError):
    """A drain found nothing to run, nothing to trigger and no executor work
    pending (or waited ``stall_timeout`` seconds for it): it can never finish."""

    def __init__(self, in_flight: int, target: int, active: int, blocked: int) -> None:
        super().__init__(
            f"drain_inflight_records({target}) cannot make progress: {in_flight} records in flight, "
            f"{active} requests active, {blocked} blocked, no mail and no executor work pending"
        )
        self.in_flight = in_flight
        self.target = target
        self.active = active
        self.blocked = blocked


def monotonic_millis() -> float:
    return time.monotonic() * 1000.0


class ManualClock:
    """An injectable clock in milliseconds that moves only when told.

    >>> clock = ManualClock(); clock.advance(5); clock()
    5
    """

    __slots__ = ("now",)

    def __init__(self, start: int = 0) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, millis: int) -> None:
        if millis < 0:
            raise ValueError(f"ManualClock.advance: time cannot go back ({millis} ms)")
        self.now += millis


class Mailbox:
    """The task thread's queue of mails (callbacks, disposals, completions,
    timeout triggers). ``post`` may be called from any thread; the rest only
    from the task thread. A waiting task thread is woken by ``post``; a
    wake-up lost to a race costs at most the wait timeout (as Flink's 1 ms)."""

    __slots__ = ("_mails", "_cond", "_waiting")

    def __init__(self) -> None:
        self._mails: deque = deque()
        self._cond = threading.Condition()
        self._waiting = False

    def post(self, mail: Callable[[], None]) -> None:
        self._mails.append(mail)
        if self._waiting:
            with self._cond:
                self._cond.notify()

    def poll(self) -> Callable[[], None] | None:
        try:
            return self._mails.popleft()
        except IndexError:
            return None

    def wait_for_mail(self, timeout: float) -> None:
        with self._cond:
            if not self._mails:
                self._waiting = True
                self._cond.wait(timeout)
                self._waiting = False

    def __len__(self) -> int:
        return len(self._mails)


class RecordContext:
    """A record in flight: ``record``, ``key``, ``ref_count`` (>= 0; starts at
    0) and ``key_occupied`` (this record holds its key). When the count drops
    to 0 while the key is held, the key flag is cleared and ``disposer(self)``
    runs: at once, or through ``runner`` when the release came from outside
    the task thread's callbacks."""

    __slots__ = ("record", "key", "ref_count", "key_occupied", "disposer", "epoch")

    def __init__(self, record, key, disposer: Callable[["RecordContext"], None], epoch=None) -> None:
        self.record = record
        self.key = key
        self.ref_count = 0
        self.key_occupied = False
        self.disposer = disposer
        self.epoch = epoch  # the epoch the record belongs to (cowcheck.reference.epochs)

    def retain(self) -> int:
        self.ref_count += 1
        return self.ref_count

    def release(self, runner: Callable[[Callable[[], None]], None] | None = None) -> int:
        self.ref_count -= 1
        if self.ref_count == 0:
            self.reference_count_reached_zero(runner)
        return self.ref_count

    def reference_count_reached_zero(self, runner) -> None:
        if self.key_occupied:
            self.key_occupied = False
            if runner is None:
                self.disposer(self)
            else:
                runner(lambda: self.disposer(self))

    def __repr__(self) -> str:
        return (f"RecordContext(record={self.record!r}, key={self.key!r}, ref={self.ref_count}, "
                f"occupied={self.key_occupied})")


class KeyAccountingUnit:
    """``occupied``: key -> the record holding it (at most one per key)."""

    __slots__ = ("occupied",)

    def __init__(self) -> None:
        self.occupied: dict = {}

    def occupy(self, record, key) -> bool:
        """Take ``key`` for ``record``; False if another record holds it."""
        if key in self.occupied:
            return False
        self.occupied[key] = record
        return True

    def release(self, record, key) -> None:
        holder = self.occupied.pop(key, None)
        if holder is not record:
            raise IllegalStateError(
                f"The record {record!r}({key!r}) is trying to release key which it actually does not hold "
                f"(held by {holder!r})")

    def occupied_count(self) -> int:
        return len(self.occupied)


class StateRequestBuffer:
    """The active queue (FIFO, ready to run) and the blocking queues (per key,
    FIFO, waiting for the key's holder to finish).

    Timeout: the first request entering the active queue after a trigger arms
    ``seq_and_timeout = (current_seq, now + buffer_timeout)``; every trigger
    that runs a batch clears it and bumps ``current_seq``, so a timeout armed
    before a trigger never fires after it. ``buffer_timeout == 0``: no timeout.
    """

    __slots__ = ("active_queue", "blocking_queue", "blocking_queue_size", "buffer_timeout", "clock",
                 "seq_and_timeout", "current_seq")

    def __init__(self, buffer_timeout: int, clock: Callable[[], float]) -> None:
        self.active_queue: deque = deque()
        self.blocking_queue: dict = {}
        self.blocking_queue_size = 0
        self.buffer_timeout = buffer_timeout
        self.clock = clock
        self.seq_and_timeout: tuple | None = None
        self.current_seq = 0

    def enqueue_to_active(self, request: StateRequest) -> None:
        self.active_queue.append(request)
        if self.buffer_timeout > 0 and self.seq_and_timeout is None:
            self.seq_and_timeout = (self.current_seq, self.clock() + self.buffer_timeout)

    def enqueue_to_blocking(self, request: StateRequest) -> None:
        key = request.context.key
        waiting = self.blocking_queue.get(key)
        if waiting is None:
            waiting = self.blocking_queue[key] = deque()
        waiting.append(request)
        self.blocking_queue_size += 1

    def unblock_one_by_key(self, key) -> StateRequest | None:
        """Take the first request blocked on ``key`` (FIFO), or None."""
        waiting = self.blocking_queue.get(key)
        if not waiting:
            return None
        request = waiting.popleft()
        if not waiting:
            del self.blocking_queue[key]
        self.blocking_queue_size -= 1
        return request

    def pop_active(self, n: int) -> list[StateRequest]:
        """Up to ``n`` requests from the head of the active queue."""
        active = self.active_queue
        return [active.popleft() for _ in range(min(n, len(active)))]

    def advance_seq(self) -> None:
        self.seq_and_timeout = None
        self.current_seq += 1

    def check_current_seq(self, seq: int) -> bool:
        return self.current_seq == seq

    def timed_out_seq(self) -> int | None:
        """The armed sequence number if its deadline has passed, else None."""
        armed = self.seq_and_timeout
        if armed is not None and armed[0] == self.current_seq and armed[1] <= self.clock():
            return armed[0]
        return None

    def active_queue_size(self) -> int:
        return len(self.active_queue)

    def blocking_key_num(self) -> int:
        return len(self.blocking_queue)


class ValueState:
    """A handle on one value state; requests use the controller's current
    record context (Flink ``ValueState`` of the v2 API)."""

    __slots__ = ("controller", "name", "namespace")

    def __init__(self, controller: "AsyncExecutionController", name: str, namespace=VOID_NAMESPACE) -> None:
        self.controller = controller
        self.name = name
        self.namespace = namespace

    def async_value(self) -> StateFuture:
        return self.controller.handle_request(self, StateRequestType.VALUE_GET, None)

    def async_update(self, value) -> StateFuture:
        """Write ``value`` (None clears)."""
        return self.controller.handle_request(self, StateRequestType.VALUE_UPDATE, value)

    def async_clear(self) -> StateFuture:
        return self.controller.handle_request(self, StateRequestType.CLEAR, None)

    def __repr__(self) -> str:
        return f"ValueState({self.name!r})"


class AsyncExecutionController:
    """See the module docstring.

    ``batch_size`` (>= 1): requests per batch; ``max_in_flight`` (>= 1): a new
    record drains while more records than this are in flight; ``buffer_timeout``
    (ms, >= 0, 0 = off): run a partial batch this long after its first request;
    ``clock``: milliseconds, ``time.monotonic`` by default; ``backend``: an
    object with ``store(name)`` (default: a fresh ``HeapStateBackend`` of
    ``CopyOnWriteStateMap``s); ``threaded``: run batches on a worker thread;
    ``stall_timeout``: seconds a threaded drain waits for a mail before it
    gives up.

    White-box fields (read by the suite, never written from outside):
    ``in_flight``, ``current_context``, ``key_accounting``, ``buffer``,
    ``mailbox``, ``state_executor``.
    """

    # Seams for variants: the classes the controller builds its parts from.
    future_class = ContextStateFuture
    buffer_class = StateRequestBuffer
    key_accounting_class = KeyAccountingUnit
    epoch_manager_class = EpochManager

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 buffer_timeout: int = DEFAULT_BUFFER_TIMEOUT, clock: Callable[[], float] | None = None,
                 backend=None, *, threaded: bool = False, stall_timeout: float = 10.0,
                 epoch_parallel_mode: ParallelMode = ParallelMode.SERIAL_BETWEEN_EPOCH) -> None:
        for name, value, least in (("batch_size", batch_size, 1), ("max_in_flight", max_in_flight, 1),
                                   ("buffer_timeout", buffer_timeout, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"AsyncExecutionController: {name} must be an int >= {least}, "
                                 f"got {value!r} ({type(value).__name__})")
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.buffer_timeout = buffer_timeout
        self.clock = clock if clock is not None else monotonic_millis
        self.backend = backend if backend is not None else HeapStateBackend()
        self.stall_timeout = stall_timeout
        self.mailbox = Mailbox()
        self.key_accounting = self.key_accounting_class()
        self.buffer = self.buffer_class(buffer_timeout, self.clock)
        self.state_executor = (ThreadedStateExecutor(self.backend, self.mailbox) if threaded
                               else SyncStateExecutor(self.backend))
        self.in_flight = 0
        self.current_context: RecordContext | None = None
        if not isinstance(epoch_parallel_mode, ParallelMode):
            raise ValueError(f"AsyncExecutionController: epoch_parallel_mode must be a ParallelMode, got "
                             f"{epoch_parallel_mode!r}")
        self.epoch_parallel_mode = epoch_parallel_mode
        self.epoch_manager = self.epoch_manager_class(self.drain_inflight_records)
        self.drain_depth = 0  # drains running, nested (an overdraft drain stays out past OVERDRAFT_DEPTH)

    # ------------------------------------------------------------ records

    def value_state(self, name: str, namespace=VOID_NAMESPACE) -> ValueState:
        return ValueState(self, name, namespace)

    def build_context(self, record, key) -> RecordContext:
        return RecordContext(record, key, self.dispose_context, self.epoch_manager.on_record())

    def set_current_context(self, context: RecordContext | None) -> None:
        self.current_context = context

    def process_record(self, record, key, processing: Callable[[], Any]) -> RecordContext:
        """Process one record: ``processing()`` runs once the record holds
        ``key`` (at once if it is free, else from the mailbox later), with the
        record as current context. Returns the record's context."""
        return self._process_in_context(record, key, processing, allow_overdraft=False)

    def process_timer(self, timer, key, callback: Callable[[], Any]) -> RecordContext:
        """A timer fires on ``key`` (Flink's timer service): ``callback()`` runs
        once the timer holds ``key``, as a record of its own, admitted with
        overdraft. Returns the timer's context."""
        return self._process_in_context(timer, key, callback, allow_overdraft=True)

    def _process_in_context(self, record, key, fn: Callable[[], Any], allow_overdraft: bool) -> RecordContext:
        context = self.build_context(record, key)
        # ``fn`` counts as one more callback (Flink's setAsyncKeyedContextElement /
        # postProcessElement pair; the timer service's retain / release).
        context.retain()
        self.set_current_context(context)
        self.sync_point_request_with_callback(fn, allow_overdraft)
        context.release()
        return context

    def sync_point_request_with_callback(self, callback: Callable[[], Any],
                                         allow_overdraft: bool = False) -> StateFuture:
        """Run ``callback`` once the current record holds its key."""
        return self.handle_request(None, StateRequestType.SYNC_POINT, None,
                                   allow_overdraft).then_accept(lambda _: callback())

    def dispose_context(self, context: RecordContext) -> None:
        """Reference count 0: the record's epoch counts it finished (which may
        run non-record actions), then release the key, leave the in-flight
        count, and activate the first request blocked on the same key."""
        self.epoch_manager.complete_one_record(context.epoch)
        self.key_accounting.release(context.record, context.key)
        self.in_flight -= 1
        next_request = self.buffer.unblock_one_by_key(context.key)
        if next_request is not None:
            if not self.try_occupy_key(next_request.context):
                raise IllegalStateError(f"key({next_request.context.key!r}) is already occupied.")
            self.insert_active_buffer(next_request)

    def try_occupy_key(self, context: RecordContext) -> bool:
        """True if ``context`` holds its key now (already, or just taken)."""
        if context.key_occupied:
            return True
        if self.key_accounting.occupy(context.record, context.key):
            context.key_occupied = True
            return True
        return False

    def process_non_record(self, trigger_action: Callable[[], Any] | None,
                           final_action: Callable[[], Any] | None = None) -> None:
        """A non-record input (watermark, timer, record attribute): close the
        current epoch with these actions (see the module docstring). In
        SERIAL_BETWEEN_EPOCH mode every in-flight record is drained first."""
        self.epoch_manager.on_non_record(self._without_context(trigger_action),
                                         self._without_context(final_action), self.epoch_parallel_mode)

    def _without_context(self, action):
        if action is None:
            return None

        def run() -> None:
            stored = self.current_context
            self.set_current_context(None)
            action()
            self.set_current_context(stored)

        return run

    # ----------------------------------------------------------- requests

    def handle_request(self, state, request_type: StateRequestType, payload,
                       allow_overdraft: bool = False) -> StateFuture:
        """Submit one request for the current record; its future (``allow_overdraft``:
        see ``seize_capacity``)."""
        context = self.current_context
        if context is None:
            raise IllegalStateError(f"handle_request({request_type.value}) outside a record: "
                                    f"use process_record or set_current_context first")
        future = self.future_class(self._callback_runner(context), context)
        request = StateRequest(state, request_type, payload, future, context)
        self.seize_capacity(allow_overdraft)
        if self.try_occupy_key(context):
            self.insert_active_buffer(request)
        else:
            self.buffer.enqueue_to_blocking(request)
        self.trigger_if_needed(False)
        return future

    def _callback_runner(self, context: RecordContext) -> Callable[[Callable[[], None]], None]:
        post = self.mailbox.post

        def submit(task: Callable[[], None]) -> None:
            def mail() -> None:
                self.set_current_context(context)
                task()
            post(mail)

        return submit

    def seize_capacity(self, allow_overdraft: bool = False) -> None:
        """A record's first request waits until in-flight <= max, then counts it.
        With ``allow_overdraft`` it drains only while that makes progress (none
        at all inside more than ``OVERDRAFT_DEPTH`` nested drains), then counts
        itself whatever the count."""
        if self.current_context.key_occupied:
            return  # a later request of a record already in flight
        self._drain(self.max_in_flight, wait=not allow_overdraft)
        self.in_flight += 1

    def insert_active_buffer(self, request: StateRequest) -> None:
        if request.sync:
            request.future.complete(None)
        else:
            self.buffer.enqueue_to_active(request)

    def trigger_if_needed(self, force: bool = False) -> bool:
        """Run one batch (at most ``batch_size`` requests) if the active queue
        is full, or if ``force`` and it is not empty; True if a batch ran."""
        if not force and self.buffer.active_queue_size() < self.batch_size:
            return False
        batch = self.buffer.pop_active(self.batch_size)
        if not batch:
            return False
        self.state_executor.execute_batch(batch)
        self.buffer.advance_seq()
        return True

    # --------------------------------------------------------- task thread

    def drain_inflight_records(self, target: int) -> None:
        """Run mails and force batches until at most ``target`` records are in
        flight (0: everything finished). DrainStalledError if that can never happen."""
        self._drain(target, wait=True)

    def _drain(self, target: int, wait: bool) -> None:
        """``wait``: until the target is reached (else DrainStalledError); otherwise
        (overdraft) only while something can run, and not deeper than OVERDRAFT_DEPTH."""
        if not wait and self.drain_depth > OVERDRAFT_DEPTH:
            return
        stored = self.current_context
        waited_since = None
        self.drain_depth += 1
        try:
            while self.in_flight > target:
                mail = self.mailbox.poll()
                if mail is not None:
                    mail()
                    waited_since = None
                    continue
                if (target == 0 or not self.state_executor.fully_loaded()) and self.trigger_if_needed(True):
                    continue
                if not wait and not self.state_executor.fully_loaded():
                    return  # overdraft: nothing runs here now, go in anyway (Flink does not wait for the executor)
                if not self.state_executor.has_pending():
                    raise DrainStalledError(self.in_flight, target, self.buffer.active_queue_size(),
                                            self.buffer.blocking_queue_size)
                now = time.monotonic()
                waited_since = now if waited_since is None else waited_since
                if now - waited_since > self.stall_timeout:
                    raise DrainStalledError(self.in_flight, target, self.buffer.active_queue_size(),
                                            self.buffer.blocking_queue_size)
                self.mailbox.wait_for_mail(0.001)
        finally:
            self.drain_depth -= 1
            self.set_current_context(stored)

    def check_buffer_timeout(self) -> bool:
        """The periodic timeout check: if the armed deadline has passed, post
        the timeout trigger as a mail. True if one was posted."""
        seq = self.buffer.timed_out_seq()
        if seq is None:
            return False

        def on_timeout() -> None:
            if self.buffer.check_current_seq(seq):
                self.trigger_if_needed(True)

        self.mailbox.post(on_timeout)
        return True

    def run_mailbox(self, limit: int | None = None, *, timers: bool = False) -> int:
        """Run mails on the task thread until none is left (or ``limit`` ran);
        ``timers``: run the periodic timeout check first. The number run."""
        if timers:
            self.check_buffer_timeout()
        ran = 0
        while limit is None or ran < limit:
            mail = self.mailbox.poll()
            if mail is None:
                break
            mail()
            ran += 1
        return ran

    def close(self) -> None:
        """Stop the executor's worker thread, if any."""
        self.state_executor.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(batch_size={self.batch_size}, max_in_flight={self.max_in_flight}, "
                f"buffer_timeout={self.buffer_timeout}, in_flight={self.in_flight}, "
                f"active={self.buffer.active_queue_size()}, blocked={self.buffer.blocking_queue_size})")
