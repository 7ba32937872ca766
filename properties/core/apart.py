"""A failure of an implementation in a process of its own, settled apart: the search there, the verdicts here.

Shrinking replays a failing program hundreds of times (a first failure and
its spares: a thousand and more), and with the implementation in another
process (:mod:`cowcheck.core.remote`) each replay is a fresh implementation
built over the pipe and a walk run ahead there (:mod:`cowcheck.core.ahead`);
each one that fails was, in addition, replayed live, a round trip per call,
so that no failure rests on records alone. On a machine whose cores are
busy every round trip waits to be scheduled: a shallow bug's verdict took
seconds where the same run in one process took a fraction of one.

So the search runs where the implementation runs. :func:`shrink_apart`
(the ``shrink_apart`` of an :class:`~cowcheck.core.ahead.AheadHarness`, as
:func:`~cowcheck.core.shrink.shrink_failure` asks it) settles a program in
three steps, each verdict the checker's own:

1. the implementation's process shrinks it (:func:`run_search`: the replay
   shrinker of :mod:`cowcheck.core.shrink`, over implementations it builds
   itself with the program's arguments, each step under the step time
   limit), and proposes the program it found;
2. the checker replays the proposal live, call by call (its verdict is the
   stored failure); it must fail with the same kind and code;
3. and counts it: ``replays`` replays, run ahead together in one request, each
   on an implementation of its own, checked here from their records one after
   another (:attr:`AheadHarness.trusting`: a failure on the records is not
   replayed live a second time), each of which must fail.

Anything else (a proposal that is not a program of the machine, longer
than the one found, failing otherwise or not at all, or not every time: a
racy map; a process that ends, hangs or breaks the protocol) leaves the
failure to the usual way, which settles it as it did before, every failing
replay confirmed live. A module that patches cowcheck in its own process can
therefore mislead the search, never the verdict: what is stored was seen to
fail here.

The search is the one an implementation in the checker's process gets
(the same shrinker over the same calls), so a deterministic map's shrunk
program is the same either way. A hang (confirmed once under the full limit)
and the end of the implementation's process (which that process cannot search
for) are settled the usual way.
"""

from __future__ import annotations

import math
import signal
import time

from cowcheck.core.boundary import WORKER_EXIT, WORKER_PROTOCOL, WorkerFailure, build, is_interruption
from cowcheck.core.child import _Server, register_apart
from cowcheck.core.failures import CheckFailure, Failure
from cowcheck.core.limits import BudgetSpent, StepTimeout, current_limit, implementation_calls, unpaced
from cowcheck.core.machine import machine_kind
from cowcheck.core.program import Step
from cowcheck.core.recorder import _plain, _unplain, run_ahead
from cowcheck.core.session import RemoteObject
from cowcheck.core.shrink import Shrunk, is_hang, replay, signature_of
from cowcheck.core.shrink import shrink as shrunk_program
from cowcheck.core.timing import charged, timed_as
from cowcheck.core.wire import _ANSWER, _BATCH, _OK, _SEARCH, _WALKS

__all__ = ["shrink_apart", "run_search", "run_walks"]

_SEARCH_MOST = 60.0  # seconds a search may take when the run sets no shrinking deadline


def shrink_apart(harness_class, program: list[Step], failure: Failure, make_impl, *, replays: int,
                 deadline: float | None, max_replays: int, shrink: bool = True, **options) -> Shrunk | None:
    """``program`` (found failing with ``failure`` through ``harness_class``, an
    :class:`~cowcheck.core.ahead.AheadHarness`) shrunk and counted as the module docstring
    says; None: it is the usual way's to settle."""
    if is_hang(failure) or not shrink or failure.code in (WORKER_EXIT, WORKER_PROTOCOL):
        return None  # a hang is confirmed under the full limit, once; a program kept whole is counted as it is;
        # the process's end cannot be searched for in that process
    with charged("shrinking"):
        proposal = _search(harness_class, program, failure, make_impl, deadline, max_replays, options)
    if proposal is None:
        return None
    with charged("confirming"):
        live = replay(proposal, make_impl, harness_class=harness_class.live_harness, **options)
    if live is None or signature_of(live) != signature_of(failure):
        return None
    proposal = proposal[: live.step_index + 1]
    count = _count(harness_class, proposal, live, make_impl, replays, options)
    if count < replays:
        return None
    return Shrunk(proposal, live, count, replays)


@timed_as("replays")
def _count(harness_class, program: list[Step], failure: Failure, make_impl, replays: int, options: dict) -> int:
    """How many of ``replays`` replays of ``program`` fail with ``failure``'s kind and code, each on
    an implementation of its own: run ahead together in one request and checked here from the
    records, one after another. Once one cannot be read so (its records out of step with the
    checker's calls: it went live), the rest are replayed live, call by call."""
    target, count, done = signature_of(failure), 0, 0
    try:
        impl = build(make_impl)  # a program of the run's arguments: the replays build theirs with them
    except CheckFailure:
        impl = None
    session = getattr(impl, "_s", None) if isinstance(impl, RemoteObject) else None
    worker = session.worker if session is not None else None
    if worker is not None and worker.alive:
        codes = [(step.op, [_plain(a) for a in step.args]) for step in program]
        pid = worker.pid
        try:
            worker.send_ahead((_BATCH, [], (_WALKS, harness_class.machine, dict(options), [codes] * replays)))
        except WorkerFailure:
            pid = None
        while done < replays and pid is not None and worker.pid == pid:
            harness = harness_class.trusting.following(worker, session.isolation, type(impl), program, **options)
            done += 1
            try:
                for step in program:
                    harness.apply(step)
            except CheckFailure as exc:
                count += signature_of(exc.failure) == target
            if worker.pid != pid:  # it went live (the records out of step): so do the others
                break
            if worker.streaming:  # the walk was not read to its end: the others cannot be read
                worker.kill()
                break
            worker.collect()  # the end of this program's walk, then the next one's records
    for _ in range(replays - done):
        got = replay(program, make_impl, harness_class=harness_class.live_harness, **options)
        count += got is not None and signature_of(got) == target
    return count


def _search(harness_class, program: list[Step], failure: Failure, make_impl, deadline: float | None,
            max_replays: int, options: dict) -> list[Step] | None:
    """The program the implementation's process proposes (no longer than ``program`` and well
    formed), or None."""
    try:
        impl = build(make_impl)  # a program of the run's arguments: the search builds its own with them
    except CheckFailure:
        return None
    session = getattr(impl, "_s", None) if isinstance(impl, RemoteObject) else None
    if session is None:
        return None
    limit = current_limit()
    seconds = _SEARCH_MOST if deadline is None else max(0.0, min(_SEARCH_MOST, deadline - time.monotonic()))
    codes = [(step.op, [_plain(a) for a in step.args]) for step in program]
    request = (_SEARCH, harness_class.machine, dict(options), codes, list(signature_of(failure)), seconds,
               max_replays, limit)
    try:
        with unpaced():  # the search's own bound: its seconds, and a few limits for the step running then
            answer = implementation_calls(math.ceil(seconds / limit) + 3 if limit else 1, session.exchange,
                                          request, decode=False)
    except BaseException as exc:  # its process ended, hung past the bound, broke the protocol, raised
        if is_interruption(exc) or isinstance(exc, BudgetSpent):
            raise
        return None
    return _proposal(answer, harness_class, len(program))


def _proposal(answer, harness_class, most: int) -> list[Step] | None:
    """The steps of a search's answer, if it is a well-formed program of the machine of at most
    ``most`` steps (what the other process says is data to check, nothing more)."""
    if type(answer) is not list or not 0 < len(answer) <= most:
        return None
    operations = harness_class.operations
    steps = []
    for code in answer:
        if not (type(code) is tuple and len(code) == 2 and type(code[0]) is str and type(code[1]) is list
                and code[0] in operations.operations):
            return None
        try:
            steps.append(Step(code[0], tuple(_unplain(a) for a in code[1])))
        except Exception:
            return None
    return steps if harness_class.valid_program(steps) else None


# ------------------------------------------------------------------ the implementation's side


def run_search(server: _Server, machine: str, options: dict, codes: list, target: list, seconds: float,
               max_replays: int, limit: float | None) -> list:
    """In the implementation's process: ``codes`` (a program failing with ``target``, its kind and
    code) shrunk by the replay shrinker for at most ``seconds``, over implementations built with
    the arguments of the program built last; each step under ``limit`` seconds (a step past it
    is a TIMEOUT, which is not the failure shrunk). The shrunk program's codes."""
    kind = machine_kind(machine)
    steps = [Step(op, tuple(_unplain(a) for a in args)) for op, args in codes]
    failure = Failure(target[0], target[1], "", len(steps) - 1)
    args, kwargs = server.made_with
    harness_class = _bounded(kind.harness_class, limit) if limit else kind.harness_class
    previous = signal.signal(signal.SIGALRM, _alarm(limit)) if limit else None
    try:
        shorter, _ = shrunk_program(steps, failure, lambda: server.factory(*args, **kwargs),
                                    harness_class=harness_class, max_replays=max_replays,
                                    deadline=time.monotonic() + seconds, **options)
    finally:
        if limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return [(step.op, [_plain(a) for a in step.args]) for step in shorter]


def run_walks(server: _Server, machine: str, options: dict, programs: list) -> None:
    """In the implementation's process: each program of ``programs`` run ahead on an implementation
    of its own (built with the arguments of the one built last), its records streamed as a walk's
    are; each walk but the last ends with an answer of its own (the request's answer ends the last)."""
    args, kwargs = server.made_with
    for number, codes in enumerate(programs, start=1):
        server.reset()
        impl = server.factory(*args, **kwargs)
        run_ahead(server, server.enc(impl)[1], machine, options, codes)
        if number < len(programs):
            server.send((_ANSWER, _OK, None, None, ()))


def _alarm(limit: float):
    def on_alarm(signum, frame):
        raise StepTimeout(limit, limit)
    return on_alarm


def _bounded(harness_class: type, limit: float) -> type:
    """``harness_class`` whose every step runs under an alarm of ``limit`` seconds."""

    class Bounded(harness_class):
        def apply(self, step: Step) -> None:
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                super().apply(step)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)

    return Bounded


register_apart(_SEARCH, run_search)
register_apart(_WALKS, run_walks)
