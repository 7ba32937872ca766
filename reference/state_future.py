"""StateFuture: the result of an asynchronous state request (Flink's StateFutureImpl,
ContextStateFutureImpl and the completed future of StateFutureUtils; FLIP-424/425).

Contract: a future completes once, with a value. ``then_apply``, ``then_accept``,
``then_compose`` and ``then_combine`` chain callbacks on it. A callback
registered on a future that is not done yet never runs in the completing
thread: completion hands it to the *callback runner* (the task thread's
mailbox, with the record's context restored first). A callback registered on a
future that is already done runs at once, in the caller (which is the task
thread by the usage rule below).

Reference counting (``ContextStateFuture``, docs/contract.md §12): the record context a
future belongs to is retained +1 when the future is created, +1 when a
callback is registered; released -1 when the future completes and -1 when a
callback finishes. Derived futures (the ones ``then_*`` return while the
source is pending) are context futures too, so they count as well. When the
count reaches 0 the context is disposed (see ``RecordContext``).

Maintenance notes:

1. Completing inside the callback runner releases inline; completing from the
   executor releases through the runner (Flink: ``postComplete(inCallbackRunner)``),
   so a disposal triggered by the executor always happens on the task thread.
2. ``then_combine`` on a pending future waits for the other future without
   counting (Flink's ``thenSyncAccept``), then submits one callback.
3. A second completion raises ``IllegalStateError``. Flink's CompletableFuture
   ignores it but still releases a reference, which would corrupt the count
   silently; the port makes that framework bug loud.

The one usage rule: register callbacks and complete futures on the task
thread only; executors on other threads hand completions to the mailbox.

>>> ran = []
>>> f = StateFutureImpl(ran.append)          # the runner just collects tasks
>>> g = f.then_apply(lambda v: v + 1)
>>> f.complete(41); ran[0](); g.get()
42
"""

from __future__ import annotations

import abc
from typing import Any, Callable

from cowcheck.reference.errors import IllegalStateError

__all__ = ["StateFuture", "StateFutureImpl", "ContextStateFuture", "CompletedStateFuture", "completed_future"]

_PENDING = object()


class StateFuture(abc.ABC):
    """The user-facing API of a state future (Flink ``StateFuture``): an
    abstract interface, implemented by :class:`StateFutureImpl` (and its
    record-context variant) and :class:`CompletedStateFuture`."""

    __slots__ = ()

    @abc.abstractmethod
    def then_apply(self, fn: Callable[[Any], Any]) -> "StateFuture":
        """A future of ``fn(result)``."""

    @abc.abstractmethod
    def then_accept(self, action: Callable[[Any], None]) -> "StateFuture":
        """Run ``action(result)``; a future of None that completes after it."""

    @abc.abstractmethod
    def then_compose(self, fn: Callable[[Any], "StateFuture"]) -> "StateFuture":
        """A future of the result of the future that ``fn(result)`` returns."""

    @abc.abstractmethod
    def then_combine(self, other: "StateFuture", fn: Callable[[Any, Any], Any]) -> "StateFuture":
        """A future of ``fn(result, other_result)`` once both are done."""

    @abc.abstractmethod
    def then_sync_accept(self, action: Callable[[Any], None]) -> None:
        """Run ``action(result)`` in the completing thread, without counting
        (internal; Flink ``InternalStateFuture.thenSyncAccept``)."""

    @abc.abstractmethod
    def is_done(self) -> bool:
        """Whether the future has completed."""

    @abc.abstractmethod
    def get(self) -> Any:
        """The result; IllegalStateError if not done."""


class CompletedStateFuture(StateFuture):
    """An already completed future with no record context: callbacks run at
    once and nothing is counted (Flink ``StateFutureUtils.completedFuture``)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any = None) -> None:
        self._value = value

    def then_apply(self, fn):
        return CompletedStateFuture(fn(self._value))

    def then_accept(self, action):
        action(self._value)
        return CompletedStateFuture(None)

    def then_compose(self, fn):
        return fn(self._value)

    def then_combine(self, other, fn):
        value = self._value
        return other.then_compose(lambda u: CompletedStateFuture(fn(value, u)))

    def then_sync_accept(self, action):
        action(self._value)

    def is_done(self) -> bool:
        return True

    def get(self):
        return self._value

    def __repr__(self) -> str:
        return f"CompletedStateFuture({self._value!r})"


def completed_future(value: Any = None) -> CompletedStateFuture:
    return CompletedStateFuture(value)


class StateFutureImpl(StateFuture):
    """A pending future. ``callback_runner(task)`` submits ``task`` to the task
    thread; ``_waiters`` are run by ``complete`` in the completing thread and
    only ever submit to the runner (or, for ``then_sync_accept``, run
    internal bookkeeping)."""

    __slots__ = ("callback_runner", "_value", "_waiters")

    def __init__(self, callback_runner: Callable[[Callable[[], None]], None]) -> None:
        self.callback_runner = callback_runner
        self._value = _PENDING
        self._waiters: list | None = []

    # ------------------------------------------------------ counting hooks

    def make_new_future(self) -> "StateFutureImpl":
        """The derived future ``then_*`` return while this one is pending."""
        return StateFutureImpl(self.callback_runner)

    def callback_registered(self) -> None:
        """Called when a callback is registered (counting subclasses: +1)."""

    def callback_finished(self) -> None:
        """Called when a callback has run (counting subclasses: -1)."""

    def post_complete(self, in_callback_runner: bool) -> None:
        """Called after completion (counting subclasses: -1)."""

    # ------------------------------------------------------------ chaining

    def then_apply(self, fn):
        self.callback_registered()
        if self._value is not _PENDING:
            result = fn(self._value)
            self.callback_finished()
            return CompletedStateFuture(result)
        ret = self.make_new_future()

        def on_complete(value):
            def task():
                ret.complete_in_callback_runner(fn(value))
                self.callback_finished()
            self.callback_runner(task)

        self._waiters.append(on_complete)
        return ret

    def then_accept(self, action):
        self.callback_registered()
        if self._value is not _PENDING:
            action(self._value)
            self.callback_finished()
            return CompletedStateFuture(None)
        ret = self.make_new_future()

        def on_complete(value):
            def task():
                action(value)
                ret.complete_in_callback_runner(None)
                self.callback_finished()
            self.callback_runner(task)

        self._waiters.append(on_complete)
        return ret

    def then_compose(self, fn):
        self.callback_registered()
        if self._value is not _PENDING:
            self.callback_finished()
            return fn(self._value)
        ret = self.make_new_future()

        def on_complete(value):
            def task():
                fn(value).then_accept(ret.complete_in_callback_runner)
                self.callback_finished()
            self.callback_runner(task)

        self._waiters.append(on_complete)
        return ret

    def then_combine(self, other, fn):
        self.callback_registered()
        if self._value is not _PENDING:
            value = self._value

            def finish(u):
                combined = fn(value, u)
                self.callback_finished()
                return CompletedStateFuture(combined)

            return other.then_compose(finish)
        ret = self.make_new_future()

        def on_other(u):
            def on_complete(value):
                def task():
                    ret.complete_in_callback_runner(fn(value, u))
                    self.callback_finished()
                self.callback_runner(task)
            self.then_sync_accept(on_complete)

        other.then_sync_accept(on_other)
        return ret

    def then_sync_accept(self, action):
        if self._value is not _PENDING:
            action(self._value)
        else:
            self._waiters.append(action)

    # ---------------------------------------------------------- completion

    def is_done(self) -> bool:
        return self._value is not _PENDING

    def get(self):
        if self._value is _PENDING:
            raise IllegalStateError("StateFuture.get: the future is not done yet")
        return self._value

    def _set(self, value) -> None:
        if self._value is not _PENDING:
            raise IllegalStateError(f"StateFuture completed twice (first with {self._value!r}, then with {value!r})")
        self._value = value
        waiters, self._waiters = self._waiters, None
        for waiter in waiters:
            waiter(value)

    def complete(self, value=None) -> None:
        """Complete from outside the callback runner (an executor)."""
        self._set(value)
        self.post_complete(False)

    def complete_in_callback_runner(self, value=None) -> None:
        """Complete from inside a callback on the task thread."""
        self._set(value)
        self.post_complete(True)

    def __repr__(self) -> str:
        state = "pending" if self._value is _PENDING else f"done: {self._value!r}"
        return f"{type(self).__name__}({state})"


class ContextStateFuture(StateFutureImpl):
    """A future that counts references on its record ``context`` (Flink
    ``ContextStateFutureImpl``): +1 created, -1 completed, +1 callback
    registered, -1 callback finished."""

    __slots__ = ("context",)

    def __init__(self, callback_runner, context) -> None:
        super().__init__(callback_runner)
        self.context = context
        context.retain()

    def make_new_future(self) -> "ContextStateFuture":
        return type(self)(self.callback_runner, self.context)

    def callback_registered(self) -> None:
        self.context.retain()

    def callback_finished(self) -> None:
        self.context.release()

    def post_complete(self, in_callback_runner: bool) -> None:
        # From the executor, a disposal must still happen on the task thread.
        self.context.release(None if in_callback_runner else self.callback_runner)
