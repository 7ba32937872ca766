"""The walk phase: seeded swarm walks through the harness before Hypothesis.

A raw walk (a machine's ``walker(seed, steps, instance)``, for the map
:func:`cowcheck.map.walks.walk_program`) runs a few hundred steps through
the very harness Hypothesis's machine uses, without Hypothesis's per-step
overhead; most bugs fall to one of the first few walks within milliseconds.
``cowcheck check`` and ``cowcheck mutants`` run this phase first and hand a
failing walk to the replay shrinker, as they do a failing Hypothesis example.

Deterministic: the walks' seeds are drawn from ``random.Random(base_seed)``
and their number is fixed (not a time budget), so the same ``--seed`` finds
the same first failure in any process on any machine.
"""

from __future__ import annotations

import random
import time
from collections import Counter
import traceback
from typing import Callable, Iterable

import attrs

from cowcheck.core.boundary import build
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import CheckFailure, Failure
from cowcheck.core.machine import add_space
from cowcheck.core.program import Step
from cowcheck.core.shrink import is_hang

__all__ = ["WalkFinding", "WalkRun", "run_walks", "walk_seeds", "walk_length", "DEFAULT_WALKS", "DEFAULT_WALK_STEPS"]

DEFAULT_WALKS = 32
DEFAULT_WALK_STEPS = 300


@attrs.frozen
class WalkFinding:
    """A failing walk: its failure, the program up to the failing step, which walk it was."""

    failure: Failure
    program: list
    walk: int  # 1-based
    seed: int


@attrs.define
class WalkRun:
    """What the walk phase did: walks and steps run, seconds, and the finding if any."""

    walks: int = 0
    steps: int = 0
    seconds: float = 0.0  # to the first failure, or to the end of the phase
    finding: WalkFinding | None = None
    coverage: Counter = attrs.Factory(Counter)  # the harnesses' scenario counts (docs/contract.md §13), summed
    findings: Counter = attrs.Factory(Counter)
    space: object = None  # the harnesses' state-space coverage, summed (if they keep one)
    more: list = attrs.Factory(list)  # later walks failing with the same kind (candidates for a shorter program)


def _close(harness, run: "WalkRun") -> None:
    run.coverage.update(harness.coverage)
    run.findings.update(harness.findings)
    run.space = add_space(run.space, harness.space)
    harness.close()  # (the async harness stops its controller's threads)


def walk_length(number: int, steps: int) -> int:
    """Steps of walk ``number`` (1-based): the first walks are short (8, 16, 32, …), so a
    bug a short program shows is found by one and shrinks as far as a short program
    can; from the sixth on, ``steps``."""
    return min(steps, 8 << (number - 1)) if number <= 6 else steps


def walk_seeds(base_seed: int, walks: int) -> list[int]:
    """The seeds of the walks of ``base_seed`` (the same in every process)."""
    r = random.Random(base_seed)
    return [r.getrandbits(32) for _ in range(walks)]


def run_walks(walker: Callable[[int, int, object], Iterable[Step]], make_impl: Callable[[], object], *,
              harness_class, harness_options: dict | None = None, base_seed: int, walks: int,
              steps: int = DEFAULT_WALK_STEPS, deadline: float | None = None, spares: int = 0,
              first: int = 1) -> WalkRun:
    """Run up to ``walks`` walks of ``steps`` steps each, each on a fresh
    implementation through ``harness_class``, until one fails or ``deadline``
    (monotonic) passes; ``first``: begin with that walk (1-based; the walks
    before it are not run). With ``spares``, the walks go on after the first failure
    (at most ``walks`` more) to collect up to ``spares`` other failing programs
    of the same kind (DIVERGENCE, INVARIANT...; the code may differ where it
    depends on context, e.g. one checkpoint running or two): the shrinker may
    get a shorter program from one of them (those walks run through the harness
    class's ``spare_harness`` if it has one: settling confirms what it keeps). Not
    after a hang (a TIMEOUT of the step time limit): every spare that hangs too
    would cost the limit. An exception that is not the
    harness's CheckFailure is cowcheck's own error: raised as InternalError, never blamed on the map."""
    run = WalkRun()
    started = time.monotonic()
    options = dict(harness_options or {})
    seeds = walk_seeds(base_seed, 2 * walks) if spares else walk_seeds(base_seed, walks)
    stop_at = walks
    spare_class = harness_class.spare_harness or harness_class  # the walks after the first failure
    try:
        for number, seed in enumerate(seeds, start=1):
            if number < first:
                continue
            if number > stop_at or (deadline is not None and time.monotonic() >= deadline):
                break
            program: list[Step] = []
            if run.finding is None:
                run.walks = number
            try:
                instance = build(make_impl)  # the factory may fail after the probe built one
            except CheckFailure as exc:
                if run.finding is None:
                    run.finding = WalkFinding(exc.failure, [], number, seed)
                    run.seconds = time.monotonic() - started
                elif exc.failure.kind == run.finding.failure.kind:
                    run.more.append(WalkFinding(exc.failure, [], number, seed))
                break
            harness = (harness_class if run.finding is None else spare_class)(instance, **options)
            steps_of_walk = walker(seed, walk_length(number, steps), instance)
            if harness.runs_ahead:  # it runs the walk ahead, a segment per call
                steps_of_walk = list(steps_of_walk)
                harness.expect(steps_of_walk)
            try:
                for step in steps_of_walk:
                    if deadline is not None and not len(program) & 15 and time.monotonic() >= deadline:
                        break  # the run's budget (--minutes) is spent: within a walk too
                    program.append(step)
                    if run.finding is None:
                        run.steps += 1
                    harness.apply(step)
                else:  # the walk ran to its end: the checks a large map's last steps skipped (if any)
                    harness.final_check()
            except CheckFailure as exc:
                _close(harness, run)
                found = WalkFinding(exc.failure, program[: exc.failure.step_index + 1], number, seed)
                if run.finding is None:
                    run.finding = found
                    run.seconds = time.monotonic() - started
                    if not spares or is_hang(found.failure):
                        break
                    stop_at = number + walks
                elif found.failure.kind == run.finding.failure.kind:
                    run.more.append(found)
                    if len(run.more) >= spares:
                        break
            else:
                _close(harness, run)
    except (InternalError, UsageError):  # UsageError: a driver refused its input (exit 2)
        raise
    except Exception as exc:
        raise InternalError(f"the walk phase stopped with {type(exc).__name__}: {exc}",
                            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))) from exc
    finally:
        if run.finding is None:
            run.seconds = time.monotonic() - started
    return run
