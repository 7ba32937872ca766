"""Replay step lists and shrink failing ones by delta debugging.

A candidate program reproduces when replaying it raises a failure with the
same signature (kind and property/invariant code) as the original. The
greedy passes drop chunks of steps (halving the chunk size), then single
steps, then simplify arguments (the harness's ``simpler_steps``, from its
machine's table of operations), until nothing changes; candidates the
harness calls ill-formed (``valid_program``) are skipped and the result is
put in canonical form (``normalise``). Replays are cheap, so this takes
milliseconds where Hypothesis's stateful shrinker takes minutes.

>>> from reference import CopyOnWriteStateMap
>>> from properties.core.program import Step
>>> from properties.map.harness import Harness
>>> steps = [Step("put", (1, 0, [1])), Step("get", (1, 0))]
>>> replay(steps, lambda: CopyOnWriteStateMap(capacity=4), harness_class=Harness) is None
True
"""

from __future__ import annotations

import time
from typing import Callable

from properties.core.boundary import build
from properties.core.errors import InternalError
from properties.core.failures import TIME_LIMIT, TIMEOUT, CheckFailure, Failure
from properties.core.limits import StepTimeLimit, current_limit
from properties.core.program import Step

__all__ = ["replay", "shrink", "signature_of", "confirm_replay"]


def signature_of(failure: Failure) -> tuple[str, str]:
    return failure.kind, failure.code


def replay(steps: list[Step], make_impl: Callable[[], object], *, harness_class, **harness_options) -> Failure | None:
    """Run ``steps`` on a fresh implementation through ``harness_class``; the
    failure, or None if all pass (building the implementation may fail too)."""
    try:
        harness = harness_class(build(make_impl), **harness_options)
    except CheckFailure as exc:
        return exc.failure
    expect = getattr(harness, "expect", None)
    if expect is not None:  # a batched harness runs the program ahead
        expect(steps)
    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        return exc.failure
    return None


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


def shrink(steps: list[Step], failure: Failure, make_impl: Callable[[], object], *, harness_class,
           max_replays: int = 20_000, deadline: float | None = None, **harness_options) -> tuple[list[Step], Failure]:
    """The shortest program found that fails with ``failure``'s signature, and its
    failure, replaying through ``harness_class``. ``deadline``
    (``time.monotonic()``): stop improving then and return the best so far.

    A TIMEOUT under the active step time limit is shrunk with a shorter limit per
    step (a hang needs no ten seconds to show, and every candidate that still hangs
    costs that limit): ten times what the whole program before the hanging step took
    on a fresh replay (no step of it took longer), at least 50 ms, at most a tenth of
    the limit (or 0.5 s). The result is confirmed under the full limit; if it does not time out
    there (a step that is slow, not stuck), shrinking runs again with a tenth of the
    limit (at least 0.5 s), and if that is not confirmed either the unshrunk program is returned."""
    limit = current_limit()
    if failure.kind == TIMEOUT and failure.code == TIME_LIMIT and limit and limit > _QUICK_FLOOR:
        tenth = min(limit, max(0.5, limit / 10))
        quick = _quick_limit(steps[: failure.step_index], make_impl, harness_class, harness_options, tenth)
        for per_step in dict.fromkeys((quick, tenth)):
            with StepTimeLimit(per_step):
                shorter, _ = _shrink(steps, failure, make_impl, max_replays, deadline, harness_class,
                                     harness_options)
            confirmed = replay(shorter, make_impl, harness_class=harness_class, **harness_options)
            if confirmed is not None and signature_of(confirmed) == signature_of(failure):
                return shorter, confirmed
        return harness_class.normalise(list(steps[: failure.step_index + 1])), failure
    return _shrink(steps, failure, make_impl, max_replays, deadline, harness_class, harness_options)


_QUICK_FLOOR = 0.05  # seconds: the shortest per-step limit while shrinking a hang


def _quick_limit(prefix: list[Step], make_impl, harness_class, harness_options, cap: float) -> float:
    """The per-step limit for shrinking a hang: ten times the time of a fresh replay of
    the steps before it (under the full limit), within [_QUICK_FLOOR, cap]; ``cap`` if
    that replay does not pass (then its time says nothing about a step's)."""
    began = time.perf_counter()
    if replay(prefix, make_impl, harness_class=harness_class, **harness_options) is not None:
        return cap
    return min(cap, max(_QUICK_FLOOR, 10 * (time.perf_counter() - began)))


def _shrink(steps, failure, make_impl, max_replays, deadline, harness_class, harness_options):
    target = signature_of(failure)
    best, best_failure = list(steps[: failure.step_index + 1]), failure
    replays = 0
    valid, simpler_steps = harness_class.valid_program, harness_class.simpler_steps

    def spent() -> bool:
        return replays >= max_replays or (deadline is not None and time.monotonic() >= deadline)

    def attempt(candidate: list[Step]):
        nonlocal replays
        if not valid(candidate) or spent():
            return None
        replays += 1
        got = replay(candidate, make_impl, harness_class=harness_class, **harness_options)
        if got is not None and signature_of(got) == target:
            return candidate[: got.step_index + 1], got
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
