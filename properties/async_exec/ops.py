"""The async machine's operations, declared once (:data:`ASYNC_OPS`).

Record arrivals (each record runs a small program of chained async state
calls on its key, see ``model.async_model``), time passing, forced triggers,
drains, partial mailbox runs and non-records (a watermark or timer whose
trigger action may start records of its own, ``spawn``). The harness applies operation ``NAME`` with
its method ``_op_NAME``; rendering, reading from files (every argument has a
check, within what the machine generates: small ints that no sum of a
program overflows in Java, short programs, time steps of at most a minute)
and the shrinker's simplifications come from here.

>>> from properties.core.program import Step
>>> ASYNC_OPS.render(Step("drain", (0,)))
'aec.drain_inflight_records(0)'
"""

from __future__ import annotations

from model.async_model import STATEMENT_ARITY
from properties.core.checks import INT32, arguments, int_in, name_like
from properties.core.program import Operation, OperationTable

__all__ = ["ASYNC_OPS"]

_KEY = int_in(*INT32)
_SMALL = int_in(-(1 << 31) + 1, (1 << 31) - 1)  # deltas and values: no program's sums overflow a long
MAX_STATEMENTS = 64  # per record program (the machine draws at most a handful)
MAX_SPAWNED = 64  # records a non-record's trigger starts
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


def _check_arrive(args: tuple) -> str | None:
    problem = _KEY(args[0])
    if problem:
        return f"key: {problem}"
    if not isinstance(args[1], list) or not 1 <= len(args[1]) <= MAX_STATEMENTS:
        return f"a record program is a list of 1 to {MAX_STATEMENTS} statements, got {args[1]!r:.80}"
    for statement in args[1]:
        problem = _check_statement(statement)
        if problem:
            return problem
    return None


def _check_non_record(args: tuple) -> str | None:
    spawn = args[0]
    if not isinstance(spawn, list) or len(spawn) > MAX_SPAWNED:
        return f"a non-record's spawn is a list of at most {MAX_SPAWNED} [key, program] records, got {spawn!r:.80}"
    for record in spawn:
        if not isinstance(record, list) or len(record) != 2:
            return f"a spawned record is [key, program], got {record!r:.80}"
        problem = _check_arrive(tuple(record))
        if problem:
            return problem
    return None


def _simpler_non_record(args: tuple):
    spawn = args[0]
    for i in range(len(spawn)):
        yield (spawn[:i] + spawn[i + 1:],)


def _simpler_arrival(args: tuple):
    key, program = args
    if key != 0:
        yield (0, program)
    for i in range(len(program)):
        if len(program) > 1:
            yield (key, program[:i] + program[i + 1:])


def _down_to(target: int):
    def simplify(args: tuple):
        if args[0] > target:
            yield (target,)
    return simplify


ASYNC_OPS = OperationTable("async", [
    Operation(name="arrive", args=("key", "program"), template="arrive(aec, {0!r}, {1!r})", check=_check_arrive,
              simplify=_simpler_arrival),
    Operation(name="advance_time", args=("millis",), template="clock.advance({0!r}); aec.run_mailbox(timers=True)",
              simplify=_down_to(1), check=arguments(int_in(1, 60_000))),
    Operation(name="trigger", args=(), template="aec.trigger_if_needed(True)"),
    Operation(name="drain", args=("target",), template="aec.drain_inflight_records({0!r})", simplify=_down_to(0),
              check=arguments(int_in(0, 10_000))),
    Operation(name="run_mail", args=("limit",), template="aec.run_mailbox({0!r})", simplify=_down_to(1),
              check=arguments(int_in(1, 10_000))),
    Operation(name="non_record", args=("spawn",), template="non_record(aec, {0!r})", check=_check_non_record,
              simplify=_simpler_non_record),
])
