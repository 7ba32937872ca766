"""Run a state machine until it fails or its budget is spent, then shrink.

First a walk phase (``properties.core.walk_phase``): a fixed number of seeded
swarm walks through the same harness, when the machine has a walker; most
bugs fall there within milliseconds. Then Hypothesis generates and finds (no
Hypothesis shrinking: see ``properties.core.profiles.FIND_ONLY``); the replay
shrinker minimises (``shrink_failure``: the program is replayed before and
after, and one that does not fail every time is reported as nondeterministic
with its count). Used by ``cowcheck check`` and ``cowcheck mutants``.

The failure is the one the harness raised first, with the program that
raised it (kept in the machine's ``RunRecord``), whatever Hypothesis does
afterwards: an implementation that fails once and not on Hypothesis's
replay is still reported (exit 1). An error of cowcheck's own is raised as
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
from properties.core.machine import RunRecord, add_space
from properties.core.profiles import FIND_ONLY
from properties.core.program import Step
from properties.core.shrink import DEFAULT_REPLAYS, confirm_replay, is_hang, remeasured, shrink_failure
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
    reproduced: int = 1  # of ``replays`` replays of ``program``, how many failed the same way
    replays: int = 1
    slow_calls: int = 0  # calls suspected of hanging at the run's pace that returned under the full limit

    @property
    def nondeterministic(self) -> bool:
        return self.failure is not None and self.reproduced < self.replays


def hunt(machine_for: Callable[[RunRecord], type], make_impl: Callable[[], object], *, base_seed: int,
         profile: settings, replay_harness, examples: int | None = None, deadline: float | None = None,
         record: RunRecord | None = None, harness_options: dict | None = None,
         shrink_seconds: float | None = None, walker=None, walks: int = 0,
         walk_steps: int = DEFAULT_WALK_STEPS, walk_with: tuple | None = None,
         replays: int = DEFAULT_REPLAYS) -> HuntResult:
    """The walk phase (``walks`` walks of ``walk_steps`` steps by ``walker``, if
    given), then ``machine_for(record)`` with seeds ``base_seed, base_seed + 1, …``
    (one per batch) until a failure, ``examples`` examples, or ``deadline``
    (monotonic; checked before every step); then shrink for at most ``shrink_seconds``,
    replaying the failing program ``replays`` times before and after
    (:func:`~properties.core.shrink.shrink_failure`: how reliably it fails).

    ``walk_with``: ``(make, harness_class)`` the walks run through instead (an
    implementation's batched walks); a failing walk is then replayed through
    ``make_impl`` and ``replay_harness`` first, and must fail there at the same
    step with the same kind and code (else InternalError: cowcheck's own).

    A call suspected of hanging at a paced limit's pace that returns under the full
    limit was only slow: the walk or batch of examples it stopped runs again at the
    new pace (the same seed: the same run as under the full limit)."""
    record = record if record is not None else RunRecord()
    record.deadline = deadline
    started = time.monotonic()
    options = dict(harness_options or {})
    settle = dict(options, harness_class=replay_harness, replays=replays)
    walked = WalkRun()
    first_walk = 1
    slow_calls = 0  # calls suspected of hanging at the run's pace that returned under the full limit
    while walker is not None and walks > 0 and first_walk <= walks:
        walk_make, walk_harness = walk_with or (make_impl, replay_harness)
        part = run_walks(walker, walk_make, harness_class=walk_harness, harness_options=options,
                         base_seed=base_seed, walks=walks, steps=walk_steps, deadline=deadline,
                         spares=_SPARES, first=first_walk)
        walked = _joined(walked, part)
        record.coverage.update(part.coverage)
        record.findings.update(part.findings)
        record.space = add_space(record.space, part.space)
        if part.finding is None:
            break
        if walk_with is not None and not getattr(walk_harness, "confirmed_on_replay", False):
            for found_walk in [part.finding, *part.more]:
                if not is_hang(found_walk.failure):  # a hang is replayed under the full limit below
                    confirm_replay(found_walk.program, found_walk.failure, make_impl,
                                   harness_class=replay_harness, what=f"walk {found_walk.walk}", **options)
        found = time.monotonic()
        shrink_deadline = found + shrink_seconds if shrink_seconds else None
        original = list(part.finding.program)
        best = shrink_failure(original, part.finding.failure, make_impl, deadline=shrink_deadline, **settle)
        if not best.confirmed:  # not a hang, a slow call: that walk again, at the new pace
            first_walk = part.finding.walk
            walked.finding, walked.more = None, []
            slow_calls += 1
            continue
        chosen = False
        # The other failing walks of the same kind, shortest first: keep the shortest shrunk program
        # (ties: the first walk's) of those that reproduce at least as often as the one kept.
        for spare in sorted(part.more, key=lambda f: len(f.program)):
            if len(best.program) <= _GOOD_ENOUGH or (shrink_deadline and time.monotonic() >= shrink_deadline):
                break
            if best.nondeterministic:
                break  # each of its candidates would be replayed up to n times: the first one will do
            other = shrink_failure(list(spare.program), spare.failure, make_impl, deadline=shrink_deadline,
                                   **settle)
            if len(other.program) < len(best.program) and other.rate >= best.rate:
                best, original, chosen = other, list(spare.program), True
        if chosen:  # its count helped choose it: its own count, afresh
            best = remeasured(best, make_impl, **options, harness_class=replay_harness)
        done = time.monotonic()
        # seconds_to_find: to the first failing walk (the spares were looked for afterwards).
        return _result(best, len(original), (walked.walks, walked.steps), walked.seconds, done - found, 0, 0,
                       done - started, phase="walks", walks=walked, slow_calls=slow_calls)
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
            found = time.monotonic()
            original = list(record.first_failure_steps)
            shrink_deadline = found + shrink_seconds if shrink_seconds else None
            best = shrink_failure(original, record.first_failure, make_impl, deadline=shrink_deadline, **settle)
            if best.confirmed:
                done = time.monotonic()
                return _result(best, len(original), record.first_failure_at, found - started, done - found,
                               record.examples, record.steps, done - started, walks=walked, slow_calls=slow_calls)
            # not a hang, a slow call: the same batch again, at the new pace
            record.first_failure = record.first_failure_steps = record.first_failure_at = None
            slow_calls += 1
            continue
        batch += 1
        if deadline is None or time.monotonic() >= deadline:
            break
    found = time.monotonic()
    return HuntResult(None, [], 0, None, found - started, 0.0, record.examples, record.steps, found - started,
                      walks=walked, slow_calls=slow_calls)


def _result(best, original_length: int, found_at, seconds_to_find: float, seconds_to_shrink: float, examples: int,
            steps: int, elapsed: float, **more) -> HuntResult:
    return HuntResult(best.failure, best.program, original_length, found_at, seconds_to_find, seconds_to_shrink,
                      examples, steps, elapsed, reproduced=best.reproduced, replays=best.replays, **more)


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
                              settings=kind.settings(config), reproduced=(result.reproduced, result.replays))
    return save(cx, directory)
