"""Replay step lists and shrink failing ones by delta debugging.

A candidate program reproduces when replaying it raises a failure with the
same signature (kind and property/invariant code) as the original. The
greedy passes drop chunks of steps (halving the chunk size), then single
steps, then simplify arguments (smaller keys, shorter states), until nothing
changes. Replays are cheap, so this takes milliseconds where Hypothesis's
stateful shrinker takes minutes.

>>> from reference import CopyOnWriteStateMap
>>> from properties.program import Step
>>> steps = [Step("put", (1, 0, [1])), Step("get", (1, 0))]
>>> replay(steps, lambda: CopyOnWriteStateMap(capacity=4)) is None
True
"""

from __future__ import annotations

import time
from typing import Callable

from properties.failures import TIME_LIMIT, TIMEOUT, CheckFailure, Failure
from properties.harness import Harness
from properties.limits import StepTimeLimit, current_limit
from properties.program import Step

__all__ = ["replay", "shrink", "signature_of", "renumber_snapshots"]


def signature_of(failure: Failure) -> tuple[str, str]:
    return failure.kind, failure.code


def replay(steps: list[Step], make_impl: Callable[[], object], harness_class=Harness,
           **harness_options) -> Failure | None:
    """Run ``steps`` on a fresh implementation (through ``harness_class``, the
    map harness by default); the failure, or None if all pass."""
    harness = harness_class(make_impl(), **harness_options)
    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        return exc.failure
    return None


def _valid(steps: list[Step]) -> bool:
    """Every snapshot step's sid is unique and every other snapshot op refers to a taken one."""
    taken: set = set()
    for step in steps:
        sid = step.uses_sid()
        if sid is None:
            continue
        if step.op == "snapshot":
            if sid in taken:
                return False
            taken.add(sid)
        elif sid not in taken:
            return False
    return True


def renumber_snapshots(steps: list[Step]) -> list[Step]:
    """Name snapshots s0, s1, … in the order they are taken (after shrinking)."""
    names: dict = {}
    out = []
    for step in steps:
        sid = step.uses_sid()
        if sid is None:
            out.append(step)
            continue
        if step.op == "snapshot":
            names[sid] = len(names)
        out.append(Step(step.op, (names.get(sid, sid),) + tuple(step.args[1:])))
    return out


def _simpler_args(step: Step):
    """Candidate replacements for one step, simplest first."""
    args = step.args
    if step.op in ("put", "put_and_get_old") and args[2]:
        yield Step(step.op, (args[0], args[1], []))
    if step.op == "rehash" and args[0] > 1:
        yield Step(step.op, (1,))
    if step.op == "iterate_modify" and args[0] > 0:
        yield Step(step.op, (0,) + args[1:])
    if step.op in ("get_mutate", "transform") and args[2] != 0:
        yield Step(step.op, (args[0], args[1], 0))


def shrink(steps: list[Step], failure: Failure, make_impl: Callable[[], object],
           max_replays: int = 20_000, deadline: float | None = None, **harness_options) -> tuple[list[Step], Failure]:
    """The shortest program found that fails with ``failure``'s signature, and its failure.
    A ``harness_class`` with a ``simpler_steps(step)`` supplies its own argument
    simplifications (the map harness's are the default). ``deadline``
    (``time.monotonic()``): stop improving then and return the best so far.

    A TIMEOUT under the active step time limit is shrunk with a tenth of that
    limit per step (a hang needs no ten seconds to show), and the result is
    confirmed under the full limit; if it does not time out there, the
    unshrunk program is returned."""
    limit = current_limit()
    if failure.kind == TIMEOUT and failure.code == TIME_LIMIT and limit and limit > _QUICK_TIMEOUT:
        with StepTimeLimit(max(_QUICK_TIMEOUT, limit / 10)):
            shorter, shorter_failure = _shrink(steps, failure, make_impl, max_replays, deadline, harness_options)
        confirmed = replay(shorter, make_impl, **harness_options)
        if confirmed is not None and signature_of(confirmed) == signature_of(failure):
            return shorter, confirmed
        return renumber_snapshots(list(steps[: failure.step_index + 1])), failure
    return _shrink(steps, failure, make_impl, max_replays, deadline, harness_options)


_QUICK_TIMEOUT = 0.5


def _shrink(steps, failure, make_impl, max_replays, deadline, harness_options):
    target = signature_of(failure)
    best, best_failure = list(steps[: failure.step_index + 1]), failure
    replays = 0
    simpler_args = getattr(harness_options.get("harness_class"), "simpler_steps", _simpler_args)

    def spent() -> bool:
        return replays >= max_replays or (deadline is not None and time.monotonic() >= deadline)

    def attempt(candidate: list[Step]):
        nonlocal replays
        if not _valid(candidate) or spent():
            return None
        replays += 1
        got = replay(candidate, make_impl, **harness_options)
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
            for simpler in simpler_args(best[i]):
                found = attempt(best[:i] + [simpler] + best[i + 1:])
                if found:
                    best, best_failure = found
                    improved = True
                    break
            i += 1
    return renumber_snapshots(best), best_failure
