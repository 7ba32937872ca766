"""Seeded bugs of the async execution controller: each a small subclass.

Every mutant is a mistake a person porting or maintaining Flink's
AsyncExecutionController, StateRequestBuffer, KeyAccountingUnit or
ContextStateFutureImpl could make; the docstring line is its catalogue
description. All are killed by the ``async`` machine (``expected`` names the
properties of ``cowcheck.async_exec.harness`` that may catch them, first the
one that usually does).
"""

from __future__ import annotations

from cowcheck.core.mutants import register_mutant
from cowcheck.reference.async_execution import AsyncExecutionController, KeyAccountingUnit, StateRequestBuffer
from cowcheck.reference.epochs import Epoch, EpochManager, EpochStatus
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.state_future import ContextStateFuture

__all__: list[str] = []


def _activate(controller: AsyncExecutionController, request) -> None:
    """The tail of dispose_context: occupy the key for ``request`` and make it active."""
    if request is not None:
        if not controller.try_occupy_key(request.context):
            raise IllegalStateError(f"key({request.context.key!r}) is already occupied.")
        controller.insert_active_buffer(request)


@register_mutant("async-key-not-released", "disposing a record context leaves its key held in the key "
                 "accounting unit", "A2 / A6 / A10", machine="async")
class KeyNotReleased(AsyncExecutionController):
    def dispose_context(self, context):
        self.epoch_manager.complete_one_record(context.epoch)
        self.in_flight -= 1
        _activate(self, self.buffer.unblock_one_by_key(context.key))


class _NewestFirstBuffer(StateRequestBuffer):
    def unblock_one_by_key(self, key):
        waiting = self.blocking_queue.get(key)
        if not waiting:
            return None
        request = waiting.pop()  # the newest blocked request instead of the oldest
        if not waiting:
            del self.blocking_queue[key]
        self.blocking_queue_size -= 1
        return request


@register_mutant("async-unblock-newest-first", "a released key activates the newest blocked request of that "
                 "key instead of the oldest (LIFO, not FIFO)", "A1 / A7", machine="async")
class UnblockNewestFirst(AsyncExecutionController):
    buffer_class = _NewestFirstBuffer


@register_mutant("async-unblock-wrong-key", "a released key activates the oldest blocked request of whichever "
                 "key has waited longest, not of the released key", "A10 / A1", machine="async")
class UnblockWrongKey(AsyncExecutionController):
    def dispose_context(self, context):
        self.epoch_manager.complete_one_record(context.epoch)
        self.key_accounting.release(context.record, context.key)
        self.in_flight -= 1
        oldest_key = next(iter(self.buffer.blocking_queue), None)
        _activate(self, self.buffer.unblock_one_by_key(oldest_key) if oldest_key is not None else None)


@register_mutant("async-in-flight-off-by-one", "a new record is admitted while in-flight == max + 1 (the "
                 "drain target is off by one)", "A3", machine="async")
class InFlightOffByOne(AsyncExecutionController):
    def seize_capacity(self, allow_overdraft=False):
        if self.current_context.key_occupied:
            return
        self._drain(self.max_in_flight + 1, wait=not allow_overdraft)
        self.in_flight += 1


class _NoCallbackReference(ContextStateFuture):
    __slots__ = ()

    def callback_registered(self):
        pass  # the +1 for a registered callback is never taken


@register_mutant("async-callback-ref-not-taken", "registering a callback does not retain the record context, "
                 "so a record can be disposed while its callbacks are pending (and its epoch may finish early)",
                 "A3 / A2 / A6 / A11", machine="async")
class CallbackRefNotTaken(AsyncExecutionController):
    future_class = _NoCallbackReference


class _NeverTimesOut(StateRequestBuffer):
    def timed_out_seq(self):
        return None


@register_mutant("async-timeout-never-fires", "the periodic buffer-timeout check never finds the armed deadline "
                 "due, so a partial batch waits for a full one or a forced trigger", "A8", machine="async")
class TimeoutNeverFires(AsyncExecutionController):
    buffer_class = _NeverTimesOut


class _OverwritingKeyAccounting(KeyAccountingUnit):
    def occupy(self, record, key):
        self.occupied[key] = record  # no check that another record holds the key
        return True


@register_mutant("async-occupy-overwrites", "occupying a key never fails: a second record of the key takes it "
                 "over while the first is still active", "A2 / A7", machine="async")
class OccupyOverwrites(AsyncExecutionController):
    key_accounting_class = _OverwritingKeyAccounting


class _CompletionNotReleased(ContextStateFuture):
    __slots__ = ()

    def post_complete(self, in_callback_runner):
        pass  # the -1 for a completed request is never given back


@register_mutant("async-completion-not-released", "completing a request does not release its reference, so no "
                 "record is ever disposed and a drain never finishes", "A10 / A6", machine="async")
class CompletionNotReleased(AsyncExecutionController):
    future_class = _CompletionNotReleased


# ------------------------------------------------------------------ epochs


class _EarlyEpoch(Epoch):
    __slots__ = ()

    def try_finish(self):
        if self.status is EpochStatus.CLOSED:  # no wait for the epoch's records to finish
            self.status = EpochStatus.FINISHING
            if self.trigger_action is not None:
                self.trigger_action()
        if self.status is EpochStatus.FINISHING:
            self.status = EpochStatus.FINISHED
            if self.final_action is not None:
                self.final_action()
        return self.status is EpochStatus.FINISHED


class _EarlyEpochManager(EpochManager):
    epoch_class = _EarlyEpoch


@register_mutant("async-epoch-fires-early", "a non-record's actions run as soon as it arrives, without waiting "
                 "for the records of its epoch to finish", "A11", machine="async")
class EpochFiresEarly(AsyncExecutionController):
    epoch_manager_class = _EarlyEpochManager


class _RetriggeringEpoch(Epoch):
    __slots__ = ()

    def try_finish(self):
        if self.ongoing:
            return False
        if self.status in (EpochStatus.CLOSED, EpochStatus.FINISHING):  # FINISHING: the trigger runs again
            self.status = EpochStatus.FINISHING
            if self.trigger_action is not None:
                self.trigger_action()
        if not self.ongoing and self.status is EpochStatus.FINISHING:
            self.status = EpochStatus.FINISHED
            if self.final_action is not None:
                self.final_action()
        return self.status is EpochStatus.FINISHED


class _RetriggeringEpochManager(EpochManager):
    epoch_class = _RetriggeringEpoch


@register_mutant("async-epoch-fires-twice", "an epoch waiting for the records its trigger action started runs "
                 "the trigger action again when they finish", "A11", machine="async")
class EpochFiresTwice(AsyncExecutionController):
    epoch_manager_class = _RetriggeringEpochManager


class _ForgetfulEpochManager(EpochManager):
    def complete_one_record(self, epoch):
        epoch.ongoing -= 1  # the closed epochs waiting for this record are never looked at again


@register_mutant("async-epoch-never-fires", "a record finishing does not let the closed epochs waiting for it "
                 "finish: a non-record that arrives while records run never fires", "A11 / A10", machine="async")
class EpochNeverFires(AsyncExecutionController):
    epoch_manager_class = _ForgetfulEpochManager


class _ActiveOnlyEpochManager(EpochManager):
    def on_record(self):
        self.active.ongoing += 1  # records a trigger action starts join the open epoch, not the finishing one
        return self.active


@register_mutant("async-epoch-final-skips-spawned", "records started by a non-record's trigger action join the "
                 "next epoch, so its final action runs before they finish", "A11", machine="async")
class EpochFinalSkipsSpawned(AsyncExecutionController):
    epoch_manager_class = _ActiveOnlyEpochManager


# ------------------------------------------------------------------ timers


@register_mutant("async-timer-waits-for-capacity", "a timer at the in-flight limit waits for capacity as a record "
                 "does (no overdraft, as Flink 1.20): fired inside the disposal of a record of its key, it waits "
                 "for that very record", "A10", machine="async")
class TimerWaitsForCapacity(AsyncExecutionController):
    def process_timer(self, timer, key, callback):
        return self.process_record(timer, key, callback)

