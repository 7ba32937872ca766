"""Replay step lists, shrink failing ones by delta debugging, and settle how reliably they fail.

A candidate program reproduces when replaying it raises a failure with the
same signature (kind and property/invariant code) as the original. The
greedy passes drop chunks of steps (halving the chunk size), then single
steps, then simplify arguments (the harness's ``simpler_steps``, from its
machine's table of operations), until nothing changes; candidates the
harness calls ill-formed (``valid_program``) are skipped and the result is
put in canonical form (``normalise``). Replays are cheap, so this takes
milliseconds where Hypothesis's stateful shrinker takes minutes.

Every failure the tool stores goes through :func:`shrink_failure`: the found
program is replayed ``replays`` times (10 by default) before shrinking and
the shrunk one again after. An implementation that fails at random (a race,
a salted hash) shows there: its program reproduces ``k`` of ``n`` times and
is stored as nondeterministic with that count; the shrinker then keeps only
programs that reproduce at least as often as the found one (it shrinks as
usual, and only if the result reproduces less often, shrinks again accepting
a candidate once it has reproduced ``k`` times, rejecting it once it no
longer can). A hang (TIMEOUT ``time-limit``) is replayed once, under the full
limit, not ten times: each replay of it costs the limit.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> from cowcheck.core.program import Step
>>> from cowcheck.map.harness import Harness
>>> steps = [Step("put", (1, 0, [1])), Step("get", (1, 0))]
>>> replay(steps, lambda: CopyOnWriteStateMap(capacity=4), harness_class=Harness) is None
True
"""

from __future__ import annotations

import time
from typing import Callable

import attrs

from cowcheck.core.boundary import build
from cowcheck.core.errors import InternalError
from cowcheck.core.failures import TIME_LIMIT, TIMEOUT, CheckFailure, Failure
from cowcheck.core.limits import StepTimeLimit, active_limit
from cowcheck.core.program import Step
from cowcheck.core.timing import timed_as

__all__ = ["replay", "shrink", "signature_of", "confirm_replay", "shrink_failure", "reproductions", "remeasured",
           "Shrunk", "DEFAULT_REPLAYS", "is_hang"]

DEFAULT_REPLAYS = 10


def signature_of(failure: Failure) -> tuple[str, str]:
    return failure.kind, failure.code


def is_hang(failure: Failure) -> bool:
    """A call that did not return within a time limit (replaying it costs the limit)."""
    return failure.kind == TIMEOUT and failure.code == TIME_LIMIT


def replay(steps: list[Step], make_impl: Callable[[], object], *, harness_class, **harness_options) -> Failure | None:
    """Run ``steps`` on a fresh implementation through ``harness_class``; the
    failure, or None if all pass (building the implementation may fail too)."""
    try:
        harness = harness_class(build(make_impl), **harness_options)
    except CheckFailure as exc:
        return exc.failure
    if harness.runs_ahead:  # it runs the program ahead
        harness.expect(steps)
    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        return exc.failure
    return None


@timed_as("confirming")
def confirm_replay(steps: list[Step], failure: Failure, make_impl: Callable[[], object], *, harness_class,
                   what: str = "the program", **harness_options) -> Failure:
    """Replay ``steps`` through ``harness_class`` (another path than the one that found
    ``failure``, e.g. call by call after a batched walk); its failure, which must be at the
    same step with the same kind and code, else InternalError (the paths disagree: cowcheck's error)."""
    again = replay(steps, make_impl, harness_class=harness_class, **harness_options)
    if again is None or (again.kind, again.code, again.step_index) != (failure.kind, failure.code,
                                                                       failure.step_index):
        theirs = "passes" if again is None else f"fails with {again.kind} {again.code} at step {again.step_index}"
        raise InternalError(f"{what} fails batched with {failure.kind} {failure.code} at step "
                            f"{failure.step_index}; replayed call by call it {theirs}",
                            "program:\n" + "\n".join(repr(s) for s in steps[: failure.step_index + 1]))
    return again


@attrs.frozen
class Shrunk:
    """A failure ready to be stored: the shrunk ``program``, its ``failure``, and how many of
    ``replays`` fresh replays of the program reproduced it (fewer than all: the
    implementation is nondeterministic). ``confirmed`` False: a call suspected of hanging at
    a paced limit's pace returned under the full limit; nothing is to be stored, the work is
    to be done again (the pace has been taken up)."""

    program: list
    failure: Failure
    reproduced: int
    replays: int
    confirmed: bool = True

    @property
    def nondeterministic(self) -> bool:
        return self.reproduced < self.replays

    @property
    def rate(self) -> float:
        return self.reproduced / self.replays if self.replays else 0.0


def remeasured(shrunk: Shrunk, make_impl: Callable[[], object], *, harness_class, **harness_options) -> Shrunk:
    """``shrunk`` with a fresh count of reproductions, if it did not reproduce every time (its
    count chose it among others: reporting that count would report the luckiest)."""
    if not shrunk.nondeterministic or is_hang(shrunk.failure):
        return shrunk
    count, _ = reproductions(shrunk.program, shrunk.failure, make_impl, harness_class=harness_class,
                             replays=shrunk.replays, **harness_options)
    return attrs.evolve(shrunk, reproduced=count)


@timed_as("replays")
def reproductions(steps: list[Step], failure: Failure, make_impl: Callable[[], object], *, harness_class,
                  replays: int = DEFAULT_REPLAYS, **harness_options) -> tuple[int, Failure | None]:
    """How many of ``replays`` fresh replays of ``steps`` fail with ``failure``'s signature,
    and the first such failure."""
    target, count, first = signature_of(failure), 0, None
    for _ in range(replays):
        got = replay(steps, make_impl, harness_class=harness_class, **harness_options)
        if got is not None and signature_of(got) == target:
            count += 1
            first = first or got
    return count, first


def shrink_failure(steps: list[Step], failure: Failure, make_impl: Callable[[], object], *, harness_class,
                   replays: int = DEFAULT_REPLAYS, deadline: float | None = None, max_replays: int = 20_000,
                   shrink: bool = True, **harness_options) -> Shrunk:
    """The program to store for ``failure`` (found by running ``steps``), shrunk unless
    ``shrink`` is False, with how reliably it reproduces (see the module docstring).
    ``deadline`` (``time.monotonic()``) bounds the shrinking, not the replays that measure."""
    options = dict(harness_options, harness_class=harness_class)
    program = list(steps[: failure.step_index + 1])
    if is_hang(failure) and active_limit() is not None:
        return _settle_hang(program, failure, make_impl, shrink, max_replays, deadline, options)
    n = max(1, replays)
    if harness_class.shrink_apart is not None:  # its own way (a map in a process of its own), if it can
        apart = harness_class.shrink_apart(program, failure, make_impl, replays=n, deadline=deadline,
                                           max_replays=max_replays, shrink=shrink, **harness_options)
        if apart is not None:
            return apart
    found, _ = reproductions(program, failure, make_impl, replays=n, **options)
    if not shrink or found == 0:
        return Shrunk(program, failure, found, n)
    shorter, got = _shrink(program, failure, make_impl, max_replays, deadline, **options)
    count, _ = reproductions(shorter, got, make_impl, replays=n, **options)
    if count < found:
        # Less reliable than the program found: shrink again, accepting only candidates that
        # reproduce in at least as many replays as it did (none accepted: the found program).
        shorter, got = _shrink(program, failure, make_impl, max_replays, deadline, need=(found, n), **options)
    if count < n:  # a count chose the program: a fresh one to report (no winner's luck)
        count, _ = reproductions(shorter, got, make_impl, replays=n, **options)
    if count == 0:  # chosen on its luck, it failed in none of its own replays: the found program did
        return Shrunk(program, failure, found, n)
    return Shrunk(shorter, got, count, n)


def shrink(steps: list[Step], failure: Failure, make_impl: Callable[[], object], *, harness_class,
           max_replays: int = 20_000, deadline: float | None = None, **harness_options) -> tuple[list[Step], Failure]:
    """The shortest program found that fails with ``failure``'s signature, and its
    failure, replaying through ``harness_class`` (one replay per candidate: see
    :func:`shrink_failure` for the reliability of the result). ``deadline``
    (``time.monotonic()``): stop improving then and return the best so far.

    A hang (TIMEOUT ``time-limit`` under an active limit) is shrunk as
    :func:`shrink_failure` does it; if the result does not hang under the full
    limit, the unshrunk program is returned."""
    if is_hang(failure) and active_limit() is not None:
        settled = _settle_hang(list(steps[: failure.step_index + 1]), failure, make_impl, True, max_replays,
                               deadline, dict(harness_options, harness_class=harness_class))
        return settled.program, settled.failure
    return _shrink(steps, failure, make_impl, max_replays, deadline, harness_class=harness_class, **harness_options)


_QUICK_FLOOR = 0.02  # seconds: the shortest per-call limit while shrinking a hang
_QUICK_RESOLUTION = 0.005  # seconds between the watchdog's samples while timing a hang's prefix
_HANG_SHRINK_SHARE = 0.2  # of the full limit: the time shrinking a hang under the quick limit may take
_HANG_SHRINK_FLOOR = 1.0  # seconds: ... at least


def _settle_hang(program, failure, make_impl, shrink, max_replays, deadline, options) -> Shrunk:
    """Shrink a hang under a per-call limit far below the full one, then confirm the result
    under the full limit (one replay: it costs the limit). The candidates' limit is ten times
    the slowest call of a fresh replay of the steps before the hang, at least 20 ms, at most a
    tenth of the limit (or 0.5 s; when it comes to that, the steps are slow, and the found
    program is replayed under the full limit first); that shrinking takes at most a fifth of
    the full limit (at least a second) and the shortest program by then is confirmed, so the
    confirmation is most of a hang's verdict time.

    If the result does not hang under the full limit, the found program is replayed under it.
    If that does not hang either, the hang was suspected at a paced limit's pace and was a
    slow call (the pace goes up and the result is not ``confirmed``), or it was seen once
    under the full limit (stored as reproduced 0 of 1). If it does hang, a call that is slow,
    not stuck, misled the shrinking: it runs again with a tenth of the limit (at least 0.5 s),
    for as long as the first pass could take, and the found program is stored if that result
    is not confirmed either."""
    limit = active_limit()
    full = limit.seconds
    harness_class = options["harness_class"]
    shrinking = shrink and full > _QUICK_FLOOR
    if shrinking:
        tenth = min(full, max(0.5, full / 10))
        quick = _quick_limit(program[: failure.step_index], make_impl, options, tenth)
        if quick < tenth:  # (if not, the steps are slow: every candidate would cost a tenth of the limit)
            # The confirmation costs the full limit: shrinking gets a share of it (the shortest
            # program found by then is stored; `cowcheck shrink` can take it further).
            soon = time.monotonic() + max(_HANG_SHRINK_FLOOR, _HANG_SHRINK_SHARE * full)
            found = _hang_shrunk(program, failure, make_impl, quick, full, max_replays,
                                 soon if deadline is None else min(deadline, soon), options)
            if found is not None:
                return found
    hang = _replay_hang(program, make_impl, full, options)
    if hang is None:
        if limit.missed():
            return Shrunk(program, failure, 0, 1, confirmed=False)
        return Shrunk(program, failure, 0, 1)
    if shrinking:  # as long as the quick pass could take: a call slow now and then (a loaded machine)
        soon = time.monotonic() + max(_HANG_SHRINK_FLOOR, _HANG_SHRINK_SHARE * full)  # misled that pass
        found = _hang_shrunk(program, failure, make_impl, tenth, full, max_replays,
                             soon if deadline is None else min(deadline, soon), options)
        if found is not None:
            return found
    return Shrunk(harness_class.normalise(program), hang, 1, 1)


def _hang_shrunk(program, failure, make_impl, per_call: float, full: float, max_replays, deadline,
                 options) -> Shrunk | None:
    """``program`` shrunk with candidates under ``per_call``, if the result hangs under ``full``.
    Each candidate's implementation is built under the full limit: a process that starts slowly
    (a loaded machine) is not the hang being shrunk."""
    def make_under_full_limit():
        with StepTimeLimit(full):
            return make_impl()

    with StepTimeLimit(per_call):
        shorter, _ = _shrink(program, failure, make_under_full_limit, max_replays, deadline, **options)
    confirmed = _replay_hang(shorter, make_impl, full, options)
    return Shrunk(shorter, confirmed, 1, 1) if confirmed is not None else None


def _replay_hang(steps, make_impl, full: float, options) -> Failure | None:
    """The hang of ``steps`` replayed under the full limit, or None if they do not hang; call by
    call (``live_harness``), so that a hanging call costs the limit once."""
    options = dict(options, harness_class=options["harness_class"].live_harness or options["harness_class"])
    with StepTimeLimit(full):
        got = replay(steps, make_impl, **options)
    return got if got is not None and is_hang(got) else None


def _quick_limit(prefix: list[Step], make_impl, options, cap: float) -> float:
    """The per-call limit for shrinking a hang: ten times the slowest call of a fresh replay
    of the steps before it (the second of two: the first may start the map's process), timed
    by the watchdog every few milliseconds, within [_QUICK_FLOOR, cap]; ``cap`` if that replay
    does not pass (then its times say nothing about a call's). The slowest call, not the whole
    replay: a long prefix of quick calls (bulk steps, a map in its own process) must not make
    every hanging candidate cost a tenth of the full limit."""
    for _ in range(2):
        with StepTimeLimit(cap, resolution=_QUICK_RESOLUTION) as timing:
            if replay(prefix, make_impl, **options) is not None:
                return cap
    slowest = timing.slowest + _QUICK_RESOLUTION  # a sampled call ran up to one interval longer than seen
    return min(cap, max(_QUICK_FLOOR, 10 * slowest))


def _shrink(steps, failure, make_impl, max_replays, deadline, *, harness_class, need=None, **harness_options):
    """Delta debugging; ``need=(k, n)``: a candidate must reproduce in ``k`` of ``n`` replays
    (each candidate stops replaying as soon as the answer is known)."""
    target = signature_of(failure)
    best, best_failure = list(steps[: failure.step_index + 1]), failure
    replays = 0
    valid, simpler_steps = harness_class.valid_program, harness_class.simpler_steps

    def spent() -> bool:
        return replays >= max_replays or (deadline is not None and time.monotonic() >= deadline)

    def once(candidate: list[Step]):
        nonlocal replays
        replays += 1
        got = replay(candidate, make_impl, harness_class=harness_class, **harness_options)
        return got if got is not None and signature_of(got) == target else None

    def attempt(candidate: list[Step]):
        if not valid(candidate) or spent():
            return None
        if need is None:
            got = once(candidate)
            return (candidate[: got.step_index + 1], got) if got is not None else None
        wanted, of = need
        hits, first, last = 0, None, -1
        for done in range(1, of + 1):
            got = once(candidate)
            if got is not None:
                hits += 1
                first, last = first or got, max(last, got.step_index)
                if hits >= wanted:
                    return candidate[: last + 1], first
            if hits + of - done < wanted or spent():
                return None
        return None

    improved = True
    while improved and not spent():
        improved = False
        chunk = max(len(best) // 2, 1)
        while chunk >= 1:
            i = 0
            while i < len(best):
                found = attempt(best[:i] + best[i + chunk:])
                if found:
                    best, best_failure = found
                    improved = True
                else:
                    i += chunk
            chunk //= 2
        i = 0
        while i < len(best):  # best may get shorter while simplifying
            for simpler in simpler_steps(best[i]):
                found = attempt(best[:i] + [simpler] + best[i + 1:])
                if found:
                    best, best_failure = found
                    improved = True
                    break
            i += 1
        for candidate in harness_class.simpler_programs(best):  # e.g. a key simplified in every step
            found = attempt(candidate)
            if found:
                best, best_failure = found
                improved = True
                break
    normal = harness_class.normalise(best)
    if normal != best:
        # The failure's message names ids (snapshots...) as the program had them: take it from
        # the canonical program, which fails the same way (normalising only renames).
        again = replay(normal, make_impl, harness_class=harness_class, **harness_options)
        if again is not None and signature_of(again) == target:
            return normal[: again.step_index + 1], again
    return normal, best_failure
