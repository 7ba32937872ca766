"""Shrinking a hang: candidates run under a short per-step limit taken from the
program's own pace, and the result is confirmed under the full limit (a step that
is only slow under the short limit must not end up as the shrunk TIMEOUT)."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "zoo"))

from tiny import TinyMap  # noqa: E402

from properties.core.failures import TIME_LIMIT, TIMEOUT  # noqa: E402
from properties.core.limits import StepTimeLimit, current_limit  # noqa: E402
from properties.core.program import Step  # noqa: E402
from properties.core.shrink import replay, shrink  # noqa: E402
from properties.map.harness import Harness  # noqa: E402

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
