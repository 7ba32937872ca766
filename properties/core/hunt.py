"""Run a state machine until it fails or its budget is spent, then shrink.

First a walk phase (``cowcheck.core.walk_phase``): a fixed number of seeded
swarm walks through the same harness, when the machine has a walker; most
bugs fall there within milliseconds. Then Hypothesis generates and finds (no
Hypothesis shrinking: see ``cowcheck.core.profiles.FIND_ONLY``); the failure
then takes the path every failure takes to its counterexample
(:func:`cowcheck.core.settle.settle`: confirmed, replayed before and after
the replay shrinker minimises it, one that does not fail every time reported as
nondeterministic with its count). Used by ``cowcheck check``, ``cowcheck
mutants``, the campaigns' Hypothesis executor and walk tests (the walk phase
alone).

The failure is the one the harness raised first, with the program that
raised it (kept in the machine's ``RunRecord``), whatever Hypothesis does
afterwards: an implementation that fails once and not on Hypothesis's
replay is still reported (exit 1). An error of cowcheck's own is raised as
:class:`~cowcheck.core.errors.InternalError`, never reported as a failure.
"""

from __future__ import annotations

import time
import traceback
from typing import Callable

import attrs
from hypothesis import Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from cowcheck.core.counterexample import Counterexample
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import CheckFailure, Failure
from cowcheck.core.limits import BudgetSpent
from cowcheck.core.machine import RunRecord, add_space
from cowcheck.core.profiles import FIND_ONLY
from cowcheck.core.program import Step
from cowcheck.core.settle import Settled, Subject, settle
from cowcheck.core.shrink import DEFAULT_REPLAYS
from cowcheck.core.walk_phase import DEFAULT_WALK_STEPS, WalkRun, run_walks

__all__ = ["HuntResult", "hunt"]

_BATCH = 50  # examples per Hypothesis run when a deadline applies
_SPARES = 4  # other failing walks collected after the first, for a shorter shrunk program


@attrs.frozen
class HuntResult:
    """``failure`` and its shrunk ``program`` (None/[] if nothing was found), its ``counterexample``
    (:func:`~cowcheck.core.settle.settle`); ``found_at``: (examples, steps) when the first failure
    showed (walks and walk steps if ``phase`` is ``walks``); ``walks``: what the walk phase did."""

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
    reproduced: int = 1  # of ``replays`` replays of ``program``, how many failed the same way
    replays: int = 1
    slow_calls: int = 0  # calls suspected of hanging at the run's pace that returned under the full limit
    settled: Settled | None = None

    @property
    def nondeterministic(self) -> bool:
        return self.failure is not None and self.reproduced < self.replays

    @property
    def counterexample(self) -> Counterexample | None:
        return self.settled.counterexample if self.settled is not None else None


def hunt(machine_for: Callable[[RunRecord], type] | None, subject: Subject, *, base_seed: int,
         profile: settings | None = None, found_by: dict | None = None, examples: int | None = None,
         deadline: float | None = None, record: RunRecord | None = None, shrink_seconds: float | None = None,
         walker=None, walks: int = 0, walk_steps: int = DEFAULT_WALK_STEPS, walk_with: tuple | None = None,
         replays: int = DEFAULT_REPLAYS, known=()) -> HuntResult:
    """The walk phase (``walks`` walks of ``walk_steps`` steps by ``walker``, if
    given), then ``machine_for(record)`` (None: the walk phase alone) with seeds
    ``base_seed, base_seed + 1, …`` (one per batch) until a failure, ``examples``
    examples, or ``deadline`` (monotonic; checked before every step); then
    :func:`~cowcheck.core.settle.settle` the failure on ``subject``, shrinking for at most
    ``shrink_seconds``, replaying the failing program ``replays`` times before and after (how
    reliably it fails); its counterexample records ``found_by`` with what found it (the
    generator, the walk or the examples and steps run). A failure whose signature is
    ``known`` is not shrunk again (``settle``: no counterexample).

    ``walk_with``: ``(make, harness_class)`` the walks run through instead (an
    implementation's batched walks: ``Implementation.batched_walks``); a failing walk is
    confirmed call by call (``settle``).

    A call suspected of hanging at a paced limit's pace that returns under the full
    limit was only slow: the walk or batch of examples it stopped runs again at the
    new pace (the same seed: the same run as under the full limit)."""
    record = record if record is not None else RunRecord()
    record.deadline = deadline
    found_by = dict(found_by or {})
    started = time.monotonic()
    walked = WalkRun()
    first_walk = 1
    slow_calls = 0  # calls suspected of hanging at the run's pace that returned under the full limit
    while walker is not None and walks > 0 and first_walk <= walks:
        walk_make, walk_harness = walk_with or (subject.make, subject.harness_class)
        part = run_walks(walker, walk_make, harness_class=walk_harness, harness_options=subject.options,
                         base_seed=base_seed, walks=walks, steps=walk_steps, deadline=deadline,
                         spares=_SPARES, first=first_walk)
        walked = _joined(walked, part)
        record.coverage.update(part.coverage)
        record.findings.update(part.findings)
        record.space = add_space(record.space, part.space)
        finding = part.finding
        if finding is None:
            break
        found = time.monotonic()
        settled = settle(finding.program, finding.failure, subject, through=walk_with,
                         spares=[(more.program, more.failure) for more in part.more], replays=replays, known=known,
                         deadline=found + shrink_seconds if shrink_seconds else None,
                         found_by=dict(found_by, generator="walk", walk=walked.walks, walk_seed=finding.seed,
                                       steps=walked.steps))
        if settled is None:  # not a hang, a slow call: that walk again, at the new pace
            first_walk = finding.walk
            walked.finding, walked.more = None, []
            slow_calls += 1
            continue
        done = time.monotonic()
        # seconds_to_find: to the first failing walk (the spares were looked for afterwards).
        return _result(settled, (walked.walks, walked.steps), walked.seconds, done - found, 0, 0, done - started,
                       phase="walks", walks=walked, slow_calls=slow_calls)
    if machine_for is None:
        return _nothing(walked, record, started, slow_calls)
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
                _record_failure(record, exc)
        if record.internal is not None:
            raise record.internal
        if record.first_failure is not None:
            found = time.monotonic()
            found_examples, found_steps = record.first_failure_at
            # (confirmed live as it ran; a map in its own process settles it apart, as a walk's failure)
            apart = walk_with if walk_with is not None and walk_with[1].shrink_apart is not None else None
            settled = settle(record.first_failure_steps, record.first_failure, subject, replays=replays, known=known,
                             through=apart, deadline=found + shrink_seconds if shrink_seconds else None,
                             found_by=dict(found_by, generator="hypothesis", examples=found_examples,
                                           steps=found_steps))
            if settled is not None:
                done = time.monotonic()
                return _result(settled, record.first_failure_at, found - started, done - found, record.examples,
                               record.steps, done - started, walks=walked, slow_calls=slow_calls)
            # not a hang, a slow call: the same batch again, at the new pace
            record.first_failure = record.first_failure_steps = record.first_failure_at = None
            slow_calls += 1
            continue
        batch += 1
        if deadline is None or time.monotonic() >= deadline:
            break
    return _nothing(walked, record, started, slow_calls)


def _nothing(walked: WalkRun, record: RunRecord, started: float, slow_calls: int) -> HuntResult:
    elapsed = time.monotonic() - started
    return HuntResult(None, [], 0, None, elapsed, 0.0, record.examples, record.steps, elapsed, walks=walked,
                      slow_calls=slow_calls)


def _result(settled: Settled, found_at, seconds_to_find: float, seconds_to_shrink: float, examples: int,
            steps: int, elapsed: float, **more) -> HuntResult:
    return HuntResult(settled.failure, settled.program, settled.original_length, found_at, seconds_to_find,
                      seconds_to_shrink, examples, steps, elapsed, reproduced=settled.reproduced,
                      replays=settled.replays, settled=settled, **more)


def _joined(before: WalkRun, part: WalkRun) -> WalkRun:
    """The walk phase so far and a part run after it (walks from where it resumed)."""
    if before.walks == 0:
        return part
    return WalkRun(walks=max(before.walks, part.walks), steps=before.steps + part.steps,
                   seconds=before.seconds + part.seconds, finding=part.finding,
                   coverage=before.coverage + part.coverage, findings=before.findings + part.findings,
                   space=add_space(add_space(None, before.space), part.space), more=part.more)


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


def _record_failure(record: RunRecord, exc: BaseException) -> None:
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

