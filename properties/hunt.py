"""Run a state machine until it fails or its budget is spent, then shrink.

Hypothesis generates and finds (no Hypothesis shrinking: see
``properties.profiles.FIND_ONLY``); the replay shrinker minimises. Used by
``cowcheck check`` and ``cowcheck mutants``.
"""

from __future__ import annotations

import time
from typing import Callable

import attrs
from hypothesis import Verbosity, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from properties.harness import CheckFailure, Failure
from properties.machines import RunRecord
from properties.profiles import FIND_ONLY
from properties.program import Step
from properties.shrink import shrink

__all__ = ["HuntResult", "hunt"]

_BATCH = 50  # examples per Hypothesis run when a deadline applies


@attrs.frozen
class HuntResult:
    """``failure`` and its shrunk ``program`` (None/[] if nothing was found);
    ``found_at``: (examples, steps) when the first failure showed."""

    failure: Failure | None
    program: list[Step]
    original_length: int
    found_at: tuple[int, int] | None
    seconds_to_find: float
    seconds_to_shrink: float
    examples: int
    steps: int
    elapsed: float


def hunt(machine_for: Callable[[RunRecord], type], make_impl: Callable[[], object], *, base_seed: int,
         profile: settings, examples: int | None = None, deadline: float | None = None,
         record: RunRecord | None = None, harness_options: dict | None = None,
         replay_harness=None) -> HuntResult:
    """Run ``machine_for(record)`` with seeds ``base_seed, base_seed + 1, …`` (one per
    batch) until a failure, ``examples`` examples, or ``deadline`` (monotonic)."""
    record = record if record is not None else RunRecord()
    machine = machine_for(record)
    started = time.monotonic()
    total = examples if examples is not None else (None if deadline else profile.max_examples)
    failure = None
    batch = 0
    while True:
        n = total if deadline is None else _BATCH
        if total is not None and deadline is not None:
            n = min(n, total - record.examples)
            if n <= 0:
                break
        run_settings = settings(profile, max_examples=n, derandomize=False, database=None,
                                verbosity=Verbosity.quiet, phases=FIND_ONLY)
        try:
            run_state_machine_as_test(seed(base_seed + batch)(machine), settings=run_settings)
        except CheckFailure as exc:
            failure = exc.failure
            break
        batch += 1
        if deadline is None or time.monotonic() >= deadline:
            break
    found = time.monotonic()
    if failure is None:
        return HuntResult(None, [], 0, None, found - started, 0.0, record.examples, record.steps, found - started)
    original = record.last.steps
    options = dict(harness_options or {})
    if replay_harness is not None:
        options["harness_class"] = replay_harness
    program, failure = shrink(original, failure, make_impl, **options)
    done = time.monotonic()
    return HuntResult(failure, program, len(original), record.first_failure_at, found - started, done - found,
                      record.examples, record.steps, done - started)


def store(result: HuntResult, *, impl_spec: str, capacity: int, found_by: dict, directory,
          machine: str = "map", harness_options: dict | None = None):
    """Save the shrunk failure of ``result`` as a counterexample; ``(path, written)``."""
    from properties.counterexample import Counterexample, save
    from properties.replay import expected_results

    options = dict(harness_options or {})
    expected = expected_results(result.program, machine)
    cx = Counterexample.build(result.program, result.failure, impl=impl_spec, capacity=capacity,
                              found_by=found_by, expected=expected, machine=machine,
                              white_box=options.get("white_box", True),
                              strict_live_iteration=options.get("strict_live_iteration", False))
    return save(cx, directory)
