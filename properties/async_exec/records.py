"""What a record does on an async execution controller: its program of chained async state calls.

A record (or a timer's callback) runs a small program of ``cowcheck.model.async_model``'s
statements on its key, issued as chained async calls (:func:`issue_program`,
observed through :class:`ProgramHooks`); :func:`arrive`, :func:`fire_timer` and
:func:`non_record` are what the async machine's steps do, and what the Python
programs of its regressions call (:func:`~cowcheck.async_exec.harness.render_async_program`).
"""

from __future__ import annotations

from typing import Callable

from cowcheck.reference.state_future import CompletedStateFuture

__all__ = ["ProgramHooks", "issue_program", "arrive", "fire_timer", "non_record"]


class ProgramHooks:
    """What an observer sees of a running record program; no-ops by default.
    ``callback(fn)`` wraps every callback before it is registered,
    ``request(f)`` sees the future of every state request as it is issued,
    ``future(f)`` every other future, ``read(value)`` every value read."""

    def callback(self, fn: Callable) -> Callable:
        return fn

    def request(self, future):
        return future

    def future(self, future):
        return future

    def read(self, value) -> None:
        pass


_NO_HOOKS = ProgramHooks()


def issue_program(states: dict, program: list, hooks: ProgramHooks = _NO_HOOKS):
    """Issue a record program (``cowcheck.model.async_model``'s statements) as chained
    async calls for the current record; the future of its last statement.
    Statement i+1 starts in a ``then_compose`` callback of statement i."""
    cb, req, fut, read = hooks.callback, hooks.request, hooks.future, hooks.read

    def write(state):
        return cb(lambda value: req(state.async_update(value)))

    def statement(op, *args):
        if op in ("add", "add_in_accept"):
            state, delta = states[args[0]], args[1]

            def plus(value):
                read(value)
                return (value or 0) + delta

            got = req(state.async_value())
            if op == "add":
                return fut(fut(got.then_apply(cb(plus))).then_compose(write(state)))
            # The write is fired from inside the callback and not chained: the
            # next statement starts before it has run.
            return fut(got.then_accept(cb(lambda value: req(state.async_update(plus(value))))))
        if op == "sum":
            first, second, target = (states[name] for name in args)

            def total(x, y):
                read(x)
                read(y)
                return (x or 0) + (y or 0)

            x, y = req(first.async_value()), req(second.async_value())
            return fut(fut(x.then_combine(y, cb(total))).then_compose(write(target)))
        if op == "read":
            return fut(req(states[args[0]].async_value()).then_accept(cb(read)))
        if op == "put":
            return req(states[args[0]].async_update(args[1]))
        if op == "clear":
            return req(states[args[0]].async_clear())
        raise ValueError(f"unknown statement {op!r}")

    def run_from(i: int):
        done = statement(*program[i])
        if i + 1 == len(program):
            return done
        return fut(done.then_compose(cb(lambda _: run_from(i + 1))))

    return run_from(0) if program else CompletedStateFuture(None)


def _state_names(program: list) -> set:
    return {arg for _, *args in program for arg in args if isinstance(arg, str)}


def arrive(aec, key, program: list, record=None):
    """Process one record running ``program`` on ``key`` (what an ``arrive`` step does)."""
    states = {name: aec.value_state(name) for name in _state_names(program)}
    return aec.process_record(record if record is not None else object(), key,
                              lambda: issue_program(states, program))


def fire_timer(aec, key, program: list, timer=None):
    """A timer fires on ``key`` and its callback runs ``program`` (``process_timer``)."""
    states = {name: aec.value_state(name) for name in _state_names(program)}
    return aec.process_timer(timer if timer is not None else object(), key, lambda: issue_program(states, program))


def non_record(aec, timers: list, on_trigger=None, on_final=None, final: bool = True):
    """What a ``non_record`` step does: ``process_non_record`` whose trigger action
    fires ``timers`` (``[key, program]`` each, keys of the records' own key space, as
    a watermark fires event-time timers) and whose final action does nothing more
    (``final=False``: no final action, as releases without them)."""

    def trigger():
        if on_trigger is not None and on_trigger() is False:
            return
        for key, program in timers:
            fire_timer(aec, key, program)

    if not final:
        return aec.process_non_record(trigger)
    return aec.process_non_record(trigger, on_final or (lambda: None))
