"""Hangs in seconds: the step time limit times the implementation's calls only; a paced
limit suspects a call at the run's pace and the suspicion is confirmed once under the full
limit (a call that is only slow is not a hang: the pace goes up and the work runs again);
shrinking a hang runs its candidates under a short per-call limit taken from the program's
own pace, and the result is confirmed under the full limit (a step that is only slow under
the short limit must not end up as the shrunk TIMEOUT)."""

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "zoo"))

from tiny import TinyMap  # noqa: E402

from cowcheck.core.failures import TIME_LIMIT, TIMEOUT  # noqa: E402
from cowcheck.core.limits import PACE_FLOOR, StepTimeLimit, current_limit  # noqa: E402
from cowcheck.core.program import Step  # noqa: E402
from cowcheck.core.shrink import replay, shrink, shrink_failure  # noqa: E402
from cowcheck.map.harness import Harness  # noqa: E402

LIMITS_SEEN: list = []


class HangsWithTwoSnapshots(TinyMap):
    """get never returns while two snapshots are live; every get also notes the active limit."""

    def get(self, key, namespace):
        LIMITS_SEEN.append(current_limit())
        while len(self.live) >= 2:
            pass
        return super().get(key, namespace)


class SlowWithOneSnapshot(HangsWithTwoSnapshots):
    """...and a get with one snapshot live over fewer than 3 entries takes 0.2 s: slow, not
    stuck, and in a state the failing program does not reach before its hang."""

    def get(self, key, namespace):
        if len(self.live) == 1 and len(self.data) < 3:
            time.sleep(0.2)
        return super().get(key, namespace)


def _program():
    puts = [Step("put", (k, 0, [k])) for k in range(6)]
    return [*puts, Step("snapshot", (0,)), Step("get", (1, 0)), *puts, Step("snapshot", (1,)), Step("get", (2, 0))]


def _shrunk(cls):
    make = lambda: cls()  # noqa: E731
    with StepTimeLimit(1.0):
        failure = replay(_program(), make, harness_class=Harness)
        assert (failure.kind, failure.code, failure.step_index) == (TIMEOUT, TIME_LIMIT, 15)
        LIMITS_SEEN.clear()
        steps, shrunk = shrink(_program(), failure, make, harness_class=Harness)
    return steps, shrunk


def test_a_hang_shrinks_under_a_per_step_limit_far_below_the_full_one_and_is_confirmed_under_it():
    steps, failure = _shrunk(HangsWithTwoSnapshots)
    assert [s.op for s in steps] == ["snapshot", "snapshot", "get"]
    assert (failure.kind, failure.code) == (TIMEOUT, TIME_LIMIT) and "1 s" in failure.message
    assert min(LIMITS_SEEN) < 0.5 and LIMITS_SEEN[-1] == 1.0  # candidates quick, the last replay full


def test_a_step_that_is_slow_under_the_short_limit_is_not_taken_for_the_hang():
    # Under the short limit, dropping the second snapshot still "times out" (the 0.2 s get);
    # under the full limit it does not: the shrunk program must still hang for real.
    steps, failure = _shrunk(SlowWithOneSnapshot)
    assert {0.5, 1.0} <= set(LIMITS_SEEN) and min(LIMITS_SEEN) < 0.5  # quick pass, refused, a tenth pass
    assert [s.op for s in steps].count("snapshot") == 2 and steps[-1].op == "get"
    assert (failure.kind, failure.code) == (TIMEOUT, TIME_LIMIT)
    with StepTimeLimit(1.0):
        assert replay(steps, SlowWithOneSnapshot, harness_class=Harness).step_index == len(steps) - 1


class SleepyPutsHangWithTwoSnapshots(HangsWithTwoSnapshots):
    """...and every put takes 3 ms: a long prefix of quick calls (as a map in its own process
    on a loaded machine has), not one slow call."""

    def put(self, key, namespace, state):
        time.sleep(0.003)
        return super().put(key, namespace, state)


def test_a_long_prefix_of_quick_calls_does_not_slow_every_hanging_candidate_down():
    # 60 puts of 3 ms: replaying the steps before the hang takes at least 0.18 s. Ten times
    # that would reach the cap (a tenth of the 1 s limit, 0.5 s) and each hanging candidate
    # would cost half a second; ten times the slowest call (3 ms) does not.
    puts = [Step("put", (k, 0, [k])) for k in range(60)]
    program = [*puts, Step("snapshot", (0,)), Step("snapshot", (1,)), Step("get", (2, 0))]
    make = SleepyPutsHangWithTwoSnapshots
    with StepTimeLimit(1.0):
        failure = replay(program, make, harness_class=Harness)
        assert (failure.kind, failure.code, failure.step_index) == (TIMEOUT, TIME_LIMIT, 62)
        LIMITS_SEEN.clear()
        steps, shrunk = shrink(program, failure, make, harness_class=Harness)
    ops = [s.op for s in steps]  # shrunk as far as the quick pass's time allowed (all of it, unloaded)
    assert ops.count("snapshot") == 2 and ops[-1] == "get" and len(ops) < len(program)
    assert (shrunk.kind, shrunk.code) == (TIMEOUT, TIME_LIMIT) and "1 s" in shrunk.message
    assert min(LIMITS_SEEN) < 0.5 and LIMITS_SEEN[-1] == 1.0


SLOW_BUILD_AFTER_A_HANG = [False]


class RestartsSlowlyAfterAHang(HangsWithTwoSnapshots):
    """Built in 0.1 s after one of its gets was interrupted, as a map's process restarted on a
    loaded machine may be: slower than the candidates' per-call limit, far within the full one."""

    def __init__(self, *args, **kwargs):
        if SLOW_BUILD_AFTER_A_HANG[0]:
            SLOW_BUILD_AFTER_A_HANG[0] = False
            time.sleep(0.1)
        super().__init__(*args, **kwargs)

    def get(self, key, namespace):
        try:
            return super().get(key, namespace)
        except BaseException:
            SLOW_BUILD_AFTER_A_HANG[0] = True
            raise


def test_a_candidate_whose_implementation_builds_slowly_is_not_taken_for_the_hang():
    # Candidates run under a per-call limit below 0.1 s; their implementation is built under
    # the full limit, so a slow build after a hang is not a (one-step) hang of its own.
    make = RestartsSlowlyAfterAHang
    SLOW_BUILD_AFTER_A_HANG[0] = False
    with StepTimeLimit(3.0):
        failure = replay(_program(), make, harness_class=Harness)
        LIMITS_SEEN.clear()
        shrunk = shrink_failure(_program(), failure, make, harness_class=Harness)
    ops = [s.op for s in shrunk.program]  # shrunk as far as the quick pass's time allowed
    assert shrunk.confirmed and ops.count("snapshot") == 2 and ops[-1] == "get" and len(ops) < len(_program())
    # the prefix timed (under a tenth of the limit), one quick pass, its result confirmed under
    # the full limit: no second pass at a tenth of it
    quick = min(LIMITS_SEEN)
    assert quick < 0.1 and set(LIMITS_SEEN[LIMITS_SEEN.index(quick):]) == {quick, 3.0}


class SlowContainsWhenSmall(HangsWithTwoSnapshots):
    """...and contains_key takes 0.2 s while the map holds fewer than 3 entries: slow, not stuck,
    in a state the failing program does not reach (candidates that drop its puts do)."""

    def contains_key(self, key, namespace):
        if len(self.data) < 3:
            time.sleep(0.2)
        return super().contains_key(key, namespace)


def test_the_second_pass_after_a_misled_first_is_bounded_as_the_first(monkeypatch):
    # The quick pass takes the slow contains_key for the hang and its result does not hang under
    # the full limit; the pass at a tenth of the limit (0.5 s) gets as long as the quick one had,
    # not the whole shrink budget (unbounded here): with 0.3 s, a get or so.
    from cowcheck.core import shrink as shrinking

    monkeypatch.setattr(shrinking, "_HANG_SHRINK_FLOOR", 0.3)
    monkeypatch.setattr(shrinking, "_HANG_SHRINK_SHARE", 0.0)
    puts = [Step("put", (k, 0, [k])) for k in range(6)]
    program = [*puts, Step("contains_key", (1, 0)), Step("snapshot", (0,)), Step("snapshot", (1,)),
               Step("get", (2, 0))]
    with StepTimeLimit(3.0):
        failure = replay(program, SlowContainsWhenSmall, harness_class=Harness)
        LIMITS_SEEN.clear()
        shrunk = shrink_failure(program, failure, SlowContainsWhenSmall, harness_class=Harness)
    assert shrunk.confirmed and shrunk.program[-1].op == "get"
    assert 0 < LIMITS_SEEN.count(0.5) <= 3, LIMITS_SEEN  # the second pass ran, briefly (unbounded: 8)


# ------------------------------------------------- the limit times the implementation only


class SleepyHarness(Harness):
    """The harness's own checking takes 0.3 s a step: cowcheck's time, not the map's."""

    def check_after_step(self, step):
        time.sleep(0.3)
        super().check_after_step(step)


class SleepsInGet(TinyMap):
    def get(self, key, namespace):
        time.sleep(0.3)
        return super().get(key, namespace)


def test_the_limit_times_the_calls_into_the_implementation_not_the_harnesss_checking():
    program = [Step("put", (1, 0, [1])), Step("get", (1, 0))]
    with StepTimeLimit(0.1):
        assert replay(program, TinyMap, harness_class=SleepyHarness) is None
        failure = replay(program, SleepsInGet, harness_class=Harness)
    assert (failure.kind, failure.code, failure.step_index) == (TIMEOUT, TIME_LIMIT, 1)


class EndlessHarness(Harness):
    def check_after_step(self, step):
        for _ in range(500):  # 5 s: far past the bound below
            time.sleep(0.01)


def test_a_step_whose_own_checking_runs_past_its_bound_is_cowchecks_error_not_a_timeout(monkeypatch):
    from cowcheck.core import limits
    from cowcheck.core.errors import InternalError

    monkeypatch.setattr(limits, "_HARNESS_FLOOR", 0.3)
    with StepTimeLimit(0.05), pytest.raises(InternalError):
        replay([Step("put", (1, 0, [1]))], TinyMap, harness_class=EndlessHarness)


# ----------------------------------------------------------- paced limits


def test_a_paced_limit_suspects_a_hang_at_its_pace_and_it_is_stored_as_confirmed_under_the_full_limit():
    make = HangsWithTwoSnapshots
    with StepTimeLimit(3.0, paced=True) as limit:
        assert limit.pace == PACE_FLOOR < 3.0
        failure = replay(_program(), make, harness_class=Harness)
        assert (failure.kind, failure.code) == (TIMEOUT, TIME_LIMIT)
        assert limit.last_timeout == PACE_FLOOR  # interrupted at the pace: a suspicion
        LIMITS_SEEN.clear()
        shrunk = shrink_failure(_program(), failure, make, harness_class=Harness)
    assert shrunk.confirmed and (shrunk.reproduced, shrunk.replays) == (1, 1)
    assert [s.op for s in shrunk.program] == ["snapshot", "snapshot", "get"]
    assert (shrunk.failure.kind, shrunk.failure.code) == (TIMEOUT, TIME_LIMIT)
    assert LIMITS_SEEN[-1] == 3.0 and min(LIMITS_SEEN) < PACE_FLOOR  # candidates quick, one replay in full


class SlowUnderASnapshot(TinyMap):
    """Correct, but its first get under a live snapshot takes 1.3 s: past the pace, within the limit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.slowed = False

    def get(self, key, namespace):
        if self.live and not self.slowed:
            self.slowed = True
            time.sleep(1.3)
        return super().get(key, namespace)


def test_a_call_past_the_pace_that_returns_under_the_full_limit_is_not_a_hang_and_takes_the_pace_up():
    with StepTimeLimit(3.0, paced=True) as limit:
        failure = replay(_program(), SlowUnderASnapshot, harness_class=Harness)
        assert (failure.kind, failure.code) == (TIMEOUT, TIME_LIMIT)
        shrunk = shrink_failure(_program(), failure, SlowUnderASnapshot, harness_class=Harness)
        assert not shrunk.confirmed
        assert limit.pace == 3.0  # 10x the suspected call's second, capped by the limit
        assert replay(_program(), SlowUnderASnapshot, harness_class=Harness) is None


SLOW_ONCE = [True]


class SlowOnceInTheProcess(TinyMap):
    def get(self, key, namespace):
        if self.live and SLOW_ONCE[0]:
            SLOW_ONCE[0] = False
            time.sleep(1.3)
        return super().get(key, namespace)


def test_hunt_runs_the_walk_a_slow_call_stopped_again_and_the_map_passes():
    from hypothesis import settings

    from cowcheck.core.hunt import hunt
    from cowcheck.core.machine import RunRecord, machine_kind
    from cowcheck.core.settle import Subject

    kind = machine_kind("map")
    config = kind.config(capacity=4, white_box=False)
    subject = Subject.of(kind, "test_shrink_hangs:SlowOnceInTheProcess", SlowOnceInTheProcess, config)
    SLOW_ONCE[0] = True
    with StepTimeLimit(3.0, paced=True):
        result = hunt(lambda record: kind.builder(SlowOnceInTheProcess, config, record), subject, base_seed=1,
                      profile=settings.get_profile("ci"), examples=2, record=RunRecord(), walker=kind.walker,
                      walks=8)
    assert result.failure is None and result.slow_calls == 1 and not SLOW_ONCE[0]


def test_no_spare_walks_are_run_after_a_hang():
    from cowcheck.core.walk_phase import run_walks
    from cowcheck.map import walk

    with StepTimeLimit(0.2):
        run = run_walks(walk, HangsWithTwoSnapshots, harness_class=Harness, harness_options={"white_box": False},
                        base_seed=1, walks=32, spares=4)
    assert (run.finding.failure.kind, run.finding.failure.code) == (TIMEOUT, TIME_LIMIT)
    assert run.more == [] and run.walks == run.finding.walk


def test_building_and_probing_run_under_the_full_limit_not_the_pace():
    from cowcheck.map import _introspection_problem
    from cowcheck.reference import CopyOnWriteStateMap

    class SlowView(CopyOnWriteStateMap):
        slow = True

        def introspect(self):
            if SlowView.slow:
                SlowView.slow = False
                time.sleep(1.3)
            return super().introspect()

    with StepTimeLimit(3.0, paced=True):
        assert _introspection_problem(SlowView(capacity=4)) is None


def test_a_shorter_nested_limit_keeps_the_outer_limits_dead_mans_switch():
    with StepTimeLimit(5.0) as outer:
        with StepTimeLimit(0.05) as inner:
            assert inner._dead_man == outer.seconds == 5.0
