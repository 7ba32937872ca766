"""The async machine's operations, declared once (:data:`ASYNC_OPS`).

Record arrivals (each record runs a small program of chained async state
calls on its key, see ``cowcheck.model.async_model``), time passing, forced triggers,
drains, partial mailbox runs and non-records (a watermark whose trigger action
fires timers on keys of the records' own key space, each running a program of
its own, ``timers``). Each argument has a :class:`~cowcheck.core.program.Domain`;
the Hypothesis rules (``cowcheck.async_exec.machine``) and the seeded walks
(``cowcheck.async_exec.walks``) draw every operation's arguments per domain
from this table, so an operation added here is drawn by both. The harness
applies operation ``NAME`` with its method ``_op_NAME``; rendering, reading
from files (every argument has a check, within what the machine generates:
small ints that no sum of a program overflows in Java, short programs, time
steps of at most a minute) and the shrinker's simplifications come from here.

>>> from cowcheck.core.program import Step
>>> ASYNC_OPS.render(Step("drain", (0,)))
'aec.drain_inflight_records(0)'
"""

from __future__ import annotations

import attrs

from cowcheck.model.async_model import STATEMENT_ARITY
from cowcheck.core.checks import INT32, int_in, name_like
from cowcheck.core.program import Domain, Operation, OperationTable, domains_checker, domains_simplifier

__all__ = ["ASYNC_OPS", "AsyncOperation", "KEY", "PROGRAM", "MILLIS", "TARGET", "LIMIT", "TIMERS"]

_KEY = int_in(*INT32)
_SMALL = int_in(-(1 << 31) + 1, (1 << 31) - 1)  # deltas and values: no program's sums overflow a long
MAX_STATEMENTS = 64  # per record program (the machine draws at most a handful)
MAX_TIMERS = 64  # timers a non-record's trigger fires
# Which statement arguments are state names; the others are ints.
_NAMED = {"add": (True, False), "add_in_accept": (True, False), "sum": (True, True, True), "read": (True,),
          "put": (True, False), "clear": (True,)}


def _check_statement(statement) -> str | None:
    if (not isinstance(statement, list) or not statement or not isinstance(statement[0], str)
            or statement[0] not in STATEMENT_ARITY or len(statement) != 1 + STATEMENT_ARITY[statement[0]]):
        return f"malformed statement {statement!r:.80}"
    for named, value in zip(_NAMED[statement[0]], statement[1:]):
        problem = name_like(value) if named else _SMALL(value)
        if problem:
            return f"statement {statement!r:.80}: {problem}"
    return None


def _check_key(values: tuple) -> str | None:
    problem = _KEY(values[0])
    return f"key: {problem}" if problem else None


def _check_program(values: tuple) -> str | None:
    program = values[0]
    if not isinstance(program, list) or not 1 <= len(program) <= MAX_STATEMENTS:
        return f"a record program is a list of 1 to {MAX_STATEMENTS} statements, got {program!r:.80}"
    for statement in program:
        problem = _check_statement(statement)
        if problem:
            return problem
    return None


def _check_timers(values: tuple) -> str | None:
    timers = values[0]
    if not isinstance(timers, list) or len(timers) > MAX_TIMERS:
        return f"a non-record's timers are a list of at most {MAX_TIMERS} [key, program], got {timers!r:.80}"
    for timer in timers:
        if not isinstance(timer, list) or len(timer) != 2:
            return f"a timer is [key, program], got {timer!r:.80}"
        problem = _check_key(timer[:1]) or _check_program(timer[1:])
        if problem:
            return problem
    return None


def _simpler_program(values: tuple):
    program = values[0]
    if len(program) > 1:
        for i in range(len(program)):
            yield (program[:i] + program[i + 1:],)


def _simpler_timers(values: tuple):
    timers = values[0]
    for i in range(len(timers)):
        yield (timers[:i] + timers[i + 1:],)
    for i, (key, program) in enumerate(timers):
        for (simpler,) in _simpler_program((program,)):
            yield (timers[:i] + [[key, simpler]] + timers[i + 1:],)


def _down_to(target: int):
    def simpler(values: tuple):
        if values[0] > target:
            yield (target,)
    return simpler


def _int_check(lo: int, hi: int):
    check = int_in(lo, hi)
    return lambda values: check(values[0])


KEY = Domain("key", check=_check_key, simpler=_down_to(0))
PROGRAM = Domain("program", check=_check_program, simpler=_simpler_program)
MILLIS = Domain("millis", check=_int_check(1, 60_000), simpler=_down_to(1))
TARGET = Domain("target", check=_int_check(0, 10_000), simpler=_down_to(0))
LIMIT = Domain("limit", check=_int_check(1, 10_000), simpler=_down_to(1))
TIMERS = Domain("timers", check=_check_timers, simpler=_simpler_timers)


@attrs.frozen(kw_only=True)
class AsyncOperation(Operation):
    """An async operation. ``domains``: its arguments' domains, in order; ``burst``: the machine
    also draws runs of 2 to 5 of it in one rule (``arrive_burst``); ``weight``: how often a seeded
    walk draws it, relative to the others (swarm walks switch some off)."""

    domains: tuple = ()
    burst: bool = False
    weight: float = 1.0


def _op(name: str, domains: tuple, template: str, **kw) -> AsyncOperation:
    args = tuple(domain.kind for domain in domains)
    return AsyncOperation(name=name, args=args, template=template, domains=domains, check=domains_checker(domains),
                          simplify=domains_simplifier(domains), **kw)




ASYNC_OPS = OperationTable("async", [
    _op("arrive", (KEY, PROGRAM), "arrive(aec, {0!r}, {1!r})", burst=True, weight=2.0),
    _op("advance_time", (MILLIS,), "clock.advance({0!r}); aec.run_mailbox(timers=True)"),
    _op("trigger", (), "aec.trigger_if_needed(True)"),
    _op("drain", (TARGET,), "aec.drain_inflight_records({0!r})"),
    _op("run_mail", (LIMIT,), "aec.run_mailbox({0!r})"),
    _op("non_record", (TIMERS,), "non_record(aec, {0!r})"),
])
