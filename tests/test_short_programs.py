"""Short programs: the model-vs-implementation property from primitive strategies,
on Hypothesis's backend and on CrossHair's (the ``crosshair`` profile).

Run the property under CrossHair's backend with
``pytest --hypothesis-profile=crosshair tests/test_short_programs.py``;
measurements are in docs/crosshair.md.
"""

import pytest
from hypothesis import given, settings

from cowcheck.core.failures import CheckFailure
from cowcheck.core.mutants import catalogue
from cowcheck.core.program import Step
from cowcheck.map.short_programs import decode, run_program, short_programs
from cowcheck.reference import CopyOnWriteStateMap


@given(ops=short_programs())
def test_reference_matches_the_model_on_short_programs(ops):
    run_program(CopyOnWriteStateMap, ops)


def test_decode_names_snapshots_in_order_releases_a_live_one_and_reads_the_rest_at_the_end():
    ops = [(7, 0, 0, 0), (8, 0, 0, 0), (7, 0, 0, 0), (7, 0, 0, 0), (8, 0, 0, 1), (9, 0, 0, 6)]
    assert [Step("snapshot", (0,)), Step("release", (0,)), Step("snapshot", (1,)), Step("snapshot", (2,)),
            Step("release", (2,)), Step("rehash", (-1, -1, 3)), Step("read_snapshot", (1,))] == decode(ops)


def test_decode_skips_a_release_when_no_snapshot_is_live():
    assert [Step("get", (1, 2))] == decode([(8, 0, 0, 3), (1, 1, 2, 0)])


def test_the_crosshair_profile_runs_on_crosshairs_backend():
    profile = settings.get_profile("crosshair")
    assert ("crosshair", None) == (profile.backend, profile.database)


def _run(factory, profile: str, examples: int) -> tuple[int, CheckFailure | None]:
    """Examples run until the first failure (or the budget), and that failure."""
    count, failures = [0], []

    @settings(parent=settings.get_profile(profile), max_examples=examples, phases=settings.get_profile("ci").phases)
    @given(ops=short_programs())
    def prop(ops):
        count[0] += 1
        try:
            run_program(factory, ops)
        except CheckFailure as exc:
            failures.append(exc)
            raise

    try:
        prop()
    except CheckFailure:
        pass
    return count[0], (failures[0] if failures else None)


def test_the_crosshair_backend_runs_short_programs_on_the_reference():
    examples, failure = _run(CopyOnWriteStateMap, "crosshair", 20)
    # On CrossHair's backend Hypothesis may call the test more often than max_examples
    # (21 calls for 20 seen once in a full-suite run on a loaded machine; 20 when run alone).
    assert failure is None and examples >= 20, (examples, failure)


# One seeded bug (CrossHair found flink-26853-stale-copier too, in 61 to 147 s of CI's time from run to run:
# a solver's search time, which CI's budget cannot carry beside this one's 32 s).
@pytest.mark.parametrize("mutant, code", [("get-versions-lte", "P6")])
def test_the_crosshair_backend_finds_a_seeded_copy_on_write_bug(mutant, code):
    _, failure = _run(catalogue()[mutant].factory, "crosshair", 200)
    assert failure is not None and code == failure.failure.code
