"""Run a state machine until it fails or its budget is spent, then shrink.

First a walk phase (``properties.core.walk_phase``): a fixed number of seeded
swarm walks through the same harness, when the machine has a walker; most
bugs fall there within milliseconds. Then Hypothesis generates and finds (no
Hypothesis shrinking: see ``properties.core.profiles.FIND_ONLY``); the replay
shrinker minimises. Used by ``cowcheck check`` and ``cowcheck mutants``.

The failure is the one the harness raised first, with the program that
raised it (kept in the machine's ``RunRecord``), whatever Hypothesis does
afterwards: an implementation that fails once and not on Hypothesis's
replay is still reported. An error of cowcheck's own is raised as
:class:`~properties.core.errors.InternalError`, never reported as a failure.
"""

from __future__ import annotations

import time
import traceback
from typing import Callable

import attrs
from hypothesis import Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from properties.core.errors import InternalError, UsageError
from properties.core.failures import CheckFailure, Failure
from properties.core.limits import BudgetSpent
from properties.core.machine import RunRecord
from properties.core.profiles import FIND_ONLY
from properties.core.program import Step
from properties.core.shrink import confirm_replay, shrink
from properties.core.walk_phase import DEFAULT_WALK_STEPS, WalkRun, run_walks

__all__ = ["HuntResult", "hunt", "store"]

_BATCH = 50  # examples per Hypothesis run when a deadline applies
_SPARES = 4  # other failing walks collected after the first, for a shorter shrunk program
_GOOD_ENOUGH = 1  # a shrunk program this short is not worth shrinking spares for


@attrs.frozen
class HuntResult:
    """``failure`` and its shrunk ``program`` (None/[] if nothing was found);
    ``found_at``: (examples, steps) when the first failure showed (walks and
    walk steps if ``phase`` is ``walks``); ``walks``: what the walk phase did."""

    failure: Failure | None
    program: list[Step]
    original_length: int
    found_at: tuple[int, int] | None
    seconds_to_find: float
    seconds_to_shrink: float
    examples: int
    steps: int
    elapsed: float
    phase: str = "hypothesis"  # which phase found the failure: "walks" or "hypothesis"
    walks: WalkRun = attrs.Factory(WalkRun)


def hunt(machine_for: Callable[[RunRecord], type], make_impl: Callable[[], object], *, base_seed: int,
         profile: settings, replay_harness, examples: int | None = None, deadline: float | None = None,
         record: RunRecord | None = None, harness_options: dict | None = None,
         shrink_seconds: float | None = None, walker=None, walks: int = 0,
         walk_steps: int = DEFAULT_WALK_STEPS, walk_with: tuple | None = None) -> HuntResult:
    """The walk phase (``walks`` walks of ``walk_steps`` steps by ``walker``, if
    given), then ``machine_for(record)`` with seeds ``base_seed, base_seed + 1, …``
    (one per batch) until a failure, ``examples`` examples, or ``deadline``
    (monotonic; checked before every step); then shrink for at most ``shrink_seconds``.

    ``walk_with``: ``(make, harness_class)`` the walks run through instead (an
    implementation's batched walks); a failing walk is then replayed through
    ``make_impl`` and ``replay_harness`` first, and must fail there at the same
    step with the same kind and code (else InternalError: cowcheck's own)."""
    record = record if record is not None else RunRecord()
    record.deadline = deadline
    started = time.monotonic()
    options = dict(harness_options or {})
    walked = WalkRun()
    if walker is not None and walks > 0:
        walk_make, walk_harness = walk_with or (make_impl, replay_harness)
        walked = run_walks(walker, walk_make, harness_class=walk_harness, harness_options=options,
                           base_seed=base_seed, walks=walks, steps=walk_steps, deadline=deadline,
                           spares=_SPARES)
        if walk_with is not None and walked.finding is not None:
            for found_walk in [walked.finding, *walked.more]:
                confirm_replay(found_walk.program, found_walk.failure, make_impl, harness_class=replay_harness,
                               what=f"walk {found_walk.walk}", **options)
        record.coverage.update(walked.coverage)
        record.findings.update(walked.findings)
        if walked.finding is not None:
            found = time.monotonic()
            shrink_deadline = found + shrink_seconds if shrink_seconds else None
            original = list(walked.finding.program)
            program, failure = shrink(original, walked.finding.failure, make_impl, harness_class=replay_harness,
                                      deadline=shrink_deadline, **options)
            # The other failing walks of the same kind, shortest first: keep the shortest shrunk
            # program (ties: the first walk's).
            for spare in sorted(walked.more, key=lambda f: len(f.program)):
                if len(program) <= _GOOD_ENOUGH or (shrink_deadline and time.monotonic() >= shrink_deadline):
                    break
                other, other_failure = shrink(list(spare.program), spare.failure, make_impl,
                                              harness_class=replay_harness, deadline=shrink_deadline, **options)
                if len(other) < len(program):
                    program, failure, original = other, other_failure, list(spare.program)
            done = time.monotonic()
            # seconds_to_find: to the first failing walk (the spares were looked for afterwards).
            return HuntResult(failure, program, len(original), (walked.walks, walked.steps), walked.seconds,
                              done - found, 0, 0, done - started, phase="walks", walks=walked)
    machine = machine_for(record)
    total = examples if examples is not None else (None if deadline else profile.max_examples)
    batch = 0
    while True:
        n = total if deadline is None else _BATCH
        if total is not None and deadline is not None:
            n = min(n, total - record.examples)
            if n <= 0:
                break
        run_settings = settings(profile, max_examples=n, derandomize=False, database=None,
                                verbosity=Verbosity.quiet, phases=FIND_ONLY, report_multiple_bugs=False)
        try:
            run_state_machine_as_test(seed(base_seed + batch)(machine), settings=run_settings)
        except BudgetSpent:
            pass
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            if not _cut_by_budget(exc):
                _settle(record, exc)
        if record.internal is not None:
            raise record.internal
        if record.first_failure is not None:
            break
        batch += 1
        if deadline is None or time.monotonic() >= deadline:
            break
    found = time.monotonic()
    failure = record.first_failure
    if failure is None:
        return HuntResult(None, [], 0, None, found - started, 0.0, record.examples, record.steps, found - started,
                          walks=walked)
    original = list(record.first_failure_steps)
    shrink_deadline = found + shrink_seconds if shrink_seconds else None
    program, failure = shrink(original, failure, make_impl, harness_class=replay_harness, deadline=shrink_deadline,
                              **options)
    done = time.monotonic()
    return HuntResult(failure, program, len(original), record.first_failure_at, found - started, done - found,
                      record.examples, record.steps, done - started, walks=walked)


def _cut_by_budget(exc: BaseException) -> bool:
    """Hypothesis's complaint about an example the run's budget cut short (an example that
    stops drawing where an earlier one went on looks flaky to it): the budget's end, not an error."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BudgetSpent):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _settle(record: RunRecord, exc: BaseException) -> None:
    """What Hypothesis raised, when the record holds no failure of the harness:
    a CheckFailure raised outside ``HarnessMachine.apply`` is still one;
    anything else is cowcheck's own error (Hypothesis complaining about the
    machine, a bug in a rule)."""
    if record.internal is not None or record.first_failure is not None:
        return
    if isinstance(exc, CheckFailure) and record.last is not None:
        record.first_failure = exc.failure
        record.first_failure_steps = list(record.last.steps)
        record.first_failure_at = (record.examples, record.steps)
        return
    if isinstance(exc, (InternalError, UsageError)):  # UsageError: raised as it is (exit 2)
        record.internal = exc
        return
    record.internal = InternalError(f"the state machine stopped with {type(exc).__name__}: {exc}",
                                    "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def store(result: HuntResult, *, kind, impl_spec: str, config, found_by: dict, directory,
          harness_options: dict | None = None):
    """Save the shrunk failure of ``result`` (a program of machine ``kind``) as a
    counterexample; ``(path, written)``."""
    from properties.core.counterexample import Counterexample, save

    options = dict(harness_options or {})
    cx = Counterexample.build(result.program, result.failure, impl=impl_spec, capacity=kind.capacity(config),
                              found_by=found_by, expected=kind.expected_results(result.program), machine=kind.name,
                              white_box=bool(options.get("white_box", True)),
                              strict_live_iteration=options.get("strict_live_iteration", False),
                              settings=kind.settings(config))
    return save(cx, directory)
