"""Unit tests of the async execution controller, its parts and state futures (docs/contract.md §12)."""

import threading

import pytest

from cowcheck.reference.async_execution import (
    AsyncExecutionController,
    DrainStalledError,
    KeyAccountingUnit,
    ManualClock,
    RecordContext,
    StateRequestBuffer,
)
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.state_executor import VOID_NAMESPACE, HeapStateBackend, StateRequest, StateRequestType
from cowcheck.reference.state_future import CompletedStateFuture, ContextStateFuture, StateFutureImpl
from cowcheck.reference.state_table import CopyOnWriteStateTable


def _increment(state):
    """A record's read-modify-write: read, add one, write."""
    return lambda: state.async_value().then_apply(lambda v: (v or 0) + 1).then_compose(state.async_update)


def _controller(**kwargs):
    options = dict(batch_size=3, max_in_flight=10, buffer_timeout=0, clock=ManualClock())
    options.update(kwargs)
    return AsyncExecutionController(**options)


class _Runner:
    """A callback runner that queues tasks until told to run them."""

    def __init__(self):
        self.tasks = []

    def __call__(self, task):
        self.tasks.append(task)

    def run(self):
        while self.tasks:
            self.tasks.pop(0)()


# ------------------------------------------------------------------ futures


def test_then_apply_on_a_pending_future_runs_in_the_callback_runner_not_in_the_completing_thread():
    runner = _Runner()
    future = StateFutureImpl(runner)
    derived = future.then_apply(lambda v: v * 2)
    future.complete(21)
    assert not derived.is_done()
    runner.run()
    assert derived.get() == 42


def test_then_apply_on_a_done_future_runs_at_once_and_returns_a_completed_future():
    runner = _Runner()
    future = StateFutureImpl(runner)
    future.complete(1)
    derived = future.then_apply(lambda v: v + 1)
    assert isinstance(derived, CompletedStateFuture)
    assert (derived.get(), runner.tasks) == (2, [])


def test_then_accept_completes_its_future_with_none_after_the_action():
    runner, seen = _Runner(), []
    future = StateFutureImpl(runner)
    derived = future.then_accept(seen.append)
    future.complete("x")
    runner.run()
    assert (seen, derived.get()) == (["x"], None)


def test_then_compose_yields_the_result_of_the_inner_future():
    runner = _Runner()
    outer, inner = StateFutureImpl(runner), StateFutureImpl(runner)
    composed = outer.then_compose(lambda v: inner.then_apply(lambda w: v + w))
    outer.complete(1)
    runner.run()
    inner.complete(2)
    runner.run()
    assert composed.get() == 3


@pytest.mark.parametrize("first", ["this", "other"])
def test_then_combine_waits_for_both_futures_in_either_completion_order(first):
    runner = _Runner()
    this, other = StateFutureImpl(runner), StateFutureImpl(runner)
    combined = this.then_combine(other, lambda a, b: (a, b))
    (this if first == "this" else other).complete("a" if first == "this" else "b")
    runner.run()
    assert not combined.is_done()
    (other if first == "this" else this).complete("b" if first == "this" else "a")
    runner.run()
    assert combined.get() == ("a", "b")


def test_completed_future_chains_run_at_once():
    done = CompletedStateFuture(2)
    assert done.then_apply(lambda v: v * 3).get() == 6
    assert done.then_compose(lambda v: CompletedStateFuture(v + 1)).get() == 3
    assert done.then_combine(CompletedStateFuture(5), lambda a, b: a * b).get() == 10


def test_completing_a_future_twice_raises():
    future = StateFutureImpl(_Runner())
    future.complete(1)
    with pytest.raises(IllegalStateError, match="completed twice"):
        future.complete(2)


def test_get_of_a_pending_future_raises():
    with pytest.raises(IllegalStateError, match="not done"):
        StateFutureImpl(_Runner()).get()


def test_context_future_counts_one_per_future_and_callback_and_gives_them_back():
    runner = _Runner()
    context = RecordContext("r", "k", lambda c: None)
    future = ContextStateFuture(runner, context)
    assert context.ref_count == 1  # the request
    future.then_apply(lambda v: v)
    assert context.ref_count == 3  # + the callback + its derived future
    future.complete(0)
    assert context.ref_count == 2  # the request completed; the callback is queued
    runner.run()
    assert context.ref_count == 0  # the callback ran and completed its derived future


def test_completion_from_the_executor_disposes_through_the_runner_not_inline():
    runner, disposed = _Runner(), []
    context = RecordContext("r", "k", disposed.append)
    context.key_occupied = True
    ContextStateFuture(runner, context).complete(None)
    assert (context.ref_count, disposed, len(runner.tasks)) == (0, [], 1)
    runner.run()
    assert disposed == [context]


# ------------------------------------------------- record context and buffers


def test_record_context_disposes_once_when_the_count_reaches_zero_while_holding_its_key():
    disposed = []
    context = RecordContext("r", "k", disposed.append)
    context.key_occupied = True
    context.retain()
    context.release()
    context.retain()
    context.release()
    assert (disposed, context.key_occupied) == ([context], False)


def test_record_context_that_never_took_its_key_is_not_disposed_at_zero():
    disposed = []
    context = RecordContext("r", "k", disposed.append)
    context.retain()
    context.release()
    assert disposed == []


def test_key_accounting_refuses_a_second_record_and_rejects_release_by_a_non_holder():
    unit = KeyAccountingUnit()
    first, second = object(), object()
    assert unit.occupy(first, "k") is True
    assert unit.occupy(second, "k") is False
    with pytest.raises(IllegalStateError, match="does not hold"):
        unit.release(second, "k")


def _request(key, record="r"):
    return StateRequest(None, StateRequestType.VALUE_GET, None, None, RecordContext(record, key, lambda c: None))


def test_blocking_queue_unblocks_requests_of_a_key_in_fifo_order():
    buffer = StateRequestBuffer(0, ManualClock())
    requests = [_request("k", i) for i in range(3)] + [_request("other")]
    for request in requests:
        buffer.enqueue_to_blocking(request)
    assert [buffer.unblock_one_by_key("k") for _ in range(4)] == requests[:3] + [None]
    assert (buffer.blocking_queue_size, buffer.blocking_key_num()) == (1, 1)


def test_pop_active_takes_at_most_n_from_the_head():
    buffer = StateRequestBuffer(0, ManualClock())
    requests = [_request(i) for i in range(5)]
    for request in requests:
        buffer.enqueue_to_active(request)
    assert buffer.pop_active(3) == requests[:3]
    assert buffer.pop_active(3) == requests[3:]
    assert buffer.pop_active(3) == []


def test_timeout_is_armed_by_the_first_active_request_and_cleared_by_a_trigger():
    clock = ManualClock(100)
    buffer = StateRequestBuffer(10, clock)
    buffer.enqueue_to_active(_request(1))
    clock.advance(5)
    buffer.enqueue_to_active(_request(2))
    assert buffer.seq_and_timeout == (0, 110)
    clock.advance(5)
    assert buffer.timed_out_seq() == 0
    buffer.advance_seq()
    assert (buffer.seq_and_timeout, buffer.timed_out_seq()) == (None, None)


# ----------------------------------------------------------------- controller


def test_requests_of_different_keys_trigger_a_batch_exactly_at_the_batch_size():
    aec = _controller(batch_size=3)
    count = aec.value_state("count")
    for key in (1, 2):
        aec.process_record(key, key, count.async_value)
    assert aec.buffer.active_queue_size() == 2
    aec.process_record(3, 3, count.async_value)
    assert aec.buffer.active_queue_size() == 0


def test_a_second_record_of_a_key_waits_until_the_first_is_disposed_then_runs():
    aec = _controller()
    count = aec.value_state("count")
    started = []
    first = aec.process_record("r1", "k", lambda: (started.append("r1"), _increment(count)()))
    second = aec.process_record("r2", "k", lambda: started.append("r2"))
    assert started == ["r1"]
    assert (first.key_occupied, second.key_occupied, aec.buffer.blocking_queue_size) == (True, False, 1)
    aec.drain_inflight_records(0)
    assert started == ["r1", "r2"]
    assert (first.ref_count, second.ref_count, aec.key_accounting.occupied) == (0, 0, {})


def test_records_of_one_key_run_in_arrival_order_and_each_sees_the_previous_write():
    aec = _controller(batch_size=4, max_in_flight=5)
    count = aec.value_state("count")
    for record in range(20):
        aec.process_record(record, "k", _increment(count))
    aec.drain_inflight_records(0)
    assert list(aec.backend.items()) == [("count", "k", VOID_NAMESPACE, 20)]


def test_forced_trigger_runs_a_partial_batch_but_never_more_than_the_batch_size():
    aec = _controller(batch_size=2)
    count = aec.value_state("count")
    aec.process_record(1, 1, count.async_value)
    assert aec.trigger_if_needed(True) is True  # one request: a partial batch
    assert aec.trigger_if_needed(True) is False  # nothing left
    for key in range(2, 7):  # activated without a trigger, as a disposal activates a blocked request
        context = aec.build_context(key, key)
        future = aec.future_class(lambda task: None, context)
        aec.insert_active_buffer(StateRequest(count, StateRequestType.VALUE_GET, None, future, context))
    aec.trigger_if_needed(True)
    assert aec.buffer.active_queue_size() == 3


def test_buffer_timeout_runs_a_partial_batch_once_the_clock_passes_the_deadline():
    clock = ManualClock()
    aec = _controller(batch_size=5, buffer_timeout=10, clock=clock)
    count = aec.value_state("count")
    aec.process_record(1, 1, _increment(count))
    clock.advance(9)
    aec.run_mailbox(timers=True)
    assert aec.buffer.active_queue_size() == 1
    clock.advance(1)
    aec.run_mailbox(timers=True)  # the timeout trigger runs the read; its callback issues the write
    assert aec.buffer.active_queue_size() == 1
    clock.advance(10)
    aec.run_mailbox(timers=True)
    assert (aec.in_flight, list(aec.backend.items())) == (0, [("count", 1, VOID_NAMESPACE, 1)])


def test_a_timeout_armed_before_a_trigger_does_not_fire_after_it():
    clock = ManualClock()
    aec = _controller(batch_size=2, buffer_timeout=10, clock=clock)
    count = aec.value_state("count")
    aec.process_record(1, 1, count.async_value)
    clock.advance(10)
    assert aec.check_buffer_timeout() is True  # the timeout mail is posted …
    aec.process_record(2, 2, count.async_value)  # … but a full batch runs first
    seq = aec.buffer.current_seq
    aec.process_record(3, 3, count.async_value)
    aec.run_mailbox()
    assert (aec.buffer.current_seq, aec.buffer.active_queue_size()) == (seq, 1)


def test_a_new_record_drains_while_more_than_max_records_are_in_flight():
    # As Flink's AsyncExecutionControllerTest#testInFlightRecordControl: max + 1 is reached.
    aec = _controller(batch_size=5, max_in_flight=3)
    count = aec.value_state("count")
    for record in range(4):
        aec.process_record(record, "k", _increment(count))
    assert aec.in_flight == 4
    aec.process_record(4, "k", _increment(count))
    assert aec.in_flight == 4  # drained to 3, then counted itself
    aec.drain_inflight_records(0)
    assert (aec.in_flight, list(aec.backend.items())) == (0, [("count", "k", VOID_NAMESPACE, 5)])


def test_drain_to_zero_releases_every_key_and_empties_every_queue():
    aec = _controller(batch_size=4, max_in_flight=4)
    count = aec.value_state("count")
    contexts = [aec.process_record(r, r % 3, _increment(count)) for r in range(12)]
    aec.drain_inflight_records(0)
    assert [c.ref_count for c in contexts] == [0] * 12
    assert (aec.key_accounting.occupied_count(), aec.buffer.active_queue_size(),
            aec.buffer.blocking_queue_size, len(aec.mailbox)) == (0, 0, 0, 0)


def test_a_drain_that_can_never_finish_raises_instead_of_spinning():
    aec = _controller()
    aec.process_record("r", "k", lambda: aec.current_context.retain())  # a reference nobody gives back
    with pytest.raises(DrainStalledError) as caught:
        aec.drain_inflight_records(0)
    assert (caught.value.in_flight, caught.value.target) == (1, 0)


def test_callbacks_run_with_their_records_context_current():
    aec = _controller(batch_size=2)
    count = aec.value_state("count")
    seen = []

    def processing():
        mine = aec.current_context
        count.async_value().then_accept(lambda _: seen.append(aec.current_context is mine))

    for record in range(6):
        aec.process_record(record, record, processing)
    aec.drain_inflight_records(0)
    assert seen == [True] * 6


def test_update_with_none_clears_the_value():
    aec = _controller(batch_size=1)
    count = aec.value_state("count")
    aec.process_record(1, "k", lambda: count.async_update(5).then_compose(lambda _: count.async_update(None)))
    aec.drain_inflight_records(0)
    assert list(aec.backend.items()) == []


def test_handle_request_outside_a_record_is_an_error():
    aec = _controller()
    with pytest.raises(IllegalStateError, match="outside a record"):
        aec.value_state("count").async_value()


@pytest.mark.parametrize("field, value", [("batch_size", 0), ("max_in_flight", -1), ("buffer_timeout", 1.5)])
def test_invalid_settings_are_rejected_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        AsyncExecutionController(**{field: value})


def test_manual_clock_never_goes_back():
    with pytest.raises(ValueError, match="back"):
        ManualClock().advance(-1)


def test_backend_can_be_a_key_grouped_state_table():
    aec = _controller(backend=HeapStateBackend(CopyOnWriteStateTable))
    count = aec.value_state("count")
    for record in range(9):
        aec.process_record(record, record % 3, _increment(count))
    aec.drain_inflight_records(0)
    assert sorted(aec.backend.items()) == [("count", k, VOID_NAMESPACE, 3) for k in range(3)]


# ------------------------------------------------------------------ threaded


def test_threaded_executor_runs_batches_off_the_task_thread_and_callbacks_on_it():
    executed, called = set(), set()

    class RecordingStore(dict):
        def get(self, key, namespace):
            executed.add(threading.get_ident())
            return super().get((key, namespace))

        def put(self, key, namespace, value):
            self[(key, namespace)] = value

        def remove(self, key, namespace):
            self.pop((key, namespace), None)

    aec = AsyncExecutionController(batch_size=3, max_in_flight=4, buffer_timeout=0,
                                   backend=HeapStateBackend(RecordingStore), threaded=True)
    try:
        count = aec.value_state("count")

        def processing():
            count.async_value().then_apply(lambda v: (called.add(threading.get_ident()), (v or 0) + 1)[1]) \
                .then_compose(count.async_update)

        for record in range(30):
            aec.process_record(record, record % 4, processing)
        aec.drain_inflight_records(0)
    finally:
        aec.close()
    assert called == {threading.get_ident()}
    assert threading.get_ident() not in executed
    assert sorted(aec.backend.store("count").items()) == [((k, VOID_NAMESPACE), 8 if k < 2 else 7)
                                                          for k in range(4)]


def test_a_backend_error_on_the_worker_is_raised_on_the_task_thread():
    class BrokenStore:
        def get(self, key, namespace):
            raise KeyError("disk on fire")

    aec = AsyncExecutionController(batch_size=1, buffer_timeout=0, backend=HeapStateBackend(BrokenStore),
                                   threaded=True)
    try:
        aec.process_record(1, 1, aec.value_state("count").async_value)
        with pytest.raises(KeyError, match="disk on fire"):
            aec.drain_inflight_records(0)
    finally:
        aec.close()
