"""Steps run ahead in the process of a user's map (cowcheck.core.ahead), as Hypothesis's examples give them.

The map runs in a process of its own (cowcheck.core.remote); a Hypothesis
example's steps are sent there one by one as they are given, run there by the
checker's harness over the map, and checked here by the same harness from the
records, a few steps later. The verdicts must be the ones a live harness gives,
at the step that caused them, with the harness's steps ending there; the
check's whole verdict the one ``--in-process`` gives, program for program.
"""

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "tests" / "zoo"
sys.path.insert(0, str(ZOO_DIR))  # the maps' module (imported in their own process only)

from cowcheck.core.ahead import example_harness  # noqa: E402
from cowcheck.core.failures import CheckFailure  # noqa: E402
from cowcheck.core.limits import StepTimeLimit  # noqa: E402
from cowcheck.core.machine import machine_kind  # noqa: E402
from cowcheck.core.program import Step  # noqa: E402
from cowcheck.core.remote import remote_factory, shutdown_workers  # noqa: E402
from cowcheck.map.harness import Harness  # noqa: E402

OPTIONS = {"white_box": False, "strict_live_iteration": False, "capacity": 4, "contract": "flink"}
PROGRAM = [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("put", (2, 0, [2])), Step("get", (1, 0)),
           Step("remove", (2, 0)), Step("release", (0,)), Step("get", (2, 0))]


def stepwise(factory_name: str):
    """``(harness class, make)`` of a Hypothesis example over ``adversaries:factory_name`` in its process."""
    factory = remote_factory("adversaries", factory_name, machine_kind("map").isolation)

    def make():
        return factory(capacity=4, state_copier=copy.deepcopy)

    return example_harness(Harness, "map", factory, make), make


@pytest.fixture(autouse=True)
def _no_process_left():
    yield
    shutdown_workers()


def test_a_stepwise_example_is_checked_step_by_step_and_its_walk_ends_with_the_example():
    harness_class, make = stepwise("slow")
    assert harness_class is not Harness and harness_class.stepwise
    harness = harness_class(make(), **OPTIONS)
    for step in PROGRAM:
        harness.apply(step)
    harness.settle()
    assert harness.steps == PROGRAM
    assert harness.replay is not None  # checked from the records all along, never live
    worker = harness.replay.worker
    harness.final_check()
    assert not worker.streaming and worker.owed == 1  # its end is read with the next request
    started = worker.started
    again = harness_class(make(), **OPTIONS)  # the next example, in the same process
    assert worker.owed == 0 and worker.started == started
    again.apply(PROGRAM[0])
    again.final_check()
    assert again.steps == PROGRAM[:1]


def test_a_failure_found_from_the_records_is_raised_at_its_step_with_the_steps_ending_there():
    # len() counts a phantom entry while a snapshot is live: P4 after the snapshot (step 1),
    # though later steps were given before the harness checked it
    harness_class, make = stepwise("lies_length")
    harness = harness_class(make(), **OPTIONS)
    with pytest.raises(CheckFailure) as raised:
        for step in PROGRAM:
            harness.apply(step)
        harness.settle()
    failure = raised.value.failure
    assert (failure.kind, failure.code, failure.step_index) == ("DIVERGENCE", "P4", 1)
    assert harness.steps == PROGRAM[:2]


def test_a_map_whose_process_ends_in_a_step_run_ahead_crashes_at_that_step():
    harness_class, make = stepwise("os_exit_in_method")  # remove() calls os._exit(0)
    harness = harness_class(make(), **OPTIONS)
    with pytest.raises(CheckFailure) as raised:
        for step in PROGRAM:
            harness.apply(step)
        harness.settle()
    failure = raised.value.failure
    assert (failure.kind, failure.code, failure.step_index) == ("CRASH", "worker-exit", 4)
    assert harness.steps == PROGRAM[:5]


def test_a_process_that_ends_after_its_walk_is_started_again_and_the_next_program_is_not_blamed():
    harness_class, make = stepwise("slow")
    harness = harness_class(make(), **OPTIONS)
    for step in PROGRAM:
        harness.apply(step)
    harness.final_check()  # every step passed; the walk's end is read before the next request
    worker = harness.replay.worker
    os.kill(worker.pid, signal.SIGKILL)  # the process ends before that end is read
    started = worker.started
    again = harness_class(make(), **OPTIONS)  # another process builds the next program's map
    assert worker.started == started + 1 and worker.owed == 0
    again.apply(PROGRAM[0])
    again.final_check()
    assert again.steps == PROGRAM[:1]



def test_a_hang_in_a_bulk_step_run_ahead_is_found_at_that_step_within_a_few_limits():
    # A bulk step's record is waited for as long as a few of its calls may take, not all 200 of
    # them: then the step goes live, where its first get (which never returns with two snapshots
    # live) is timed alone. Waiting for every call's limit would take 200 s here.
    harness_class, make = stepwise("hangs_in_get")
    program = PROGRAM[:2] + [Step("snapshot", (1,)), Step("get_range", ("int", 0, 200, 0))]
    harness = harness_class(make(), **OPTIONS)
    started = time.monotonic()
    with StepTimeLimit(1.0), pytest.raises(CheckFailure) as raised:
        for step in program:
            harness.apply(step)
        harness.settle()
    took = time.monotonic() - started
    failure = raised.value.failure
    assert (failure.kind, failure.code, failure.step_index) == ("TIMEOUT", "time-limit", 3)
    assert harness.steps == program
    assert took < 30, took


def cowcheck(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ZOO_DIR), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


@pytest.mark.parametrize("spec, kind, code, args, comparable", [
    ("adversaries:lies_length", "DIVERGENCE", "P4", (), True),
    ("adversaries:hangs_in_get", "TIMEOUT", "time-limit", ("--step-time-limit", "1"), False),
    ("adversaries:os_exit_in_method", "CRASH", "worker-exit", (), False),
    ("adversaries:writes_to_pipes", "CRASH", "worker-protocol", (), False),
    ("patches_cowcheck:make_map", "DIVERGENCE", "P1", (), False),
])
def test_hypothesis_on_a_map_in_its_own_process_finds_what_it_finds_in_process(spec, kind, code, args, comparable,
                                                                                 tmp_path):
    # No walks: Hypothesis's examples find it, run ahead in the map's process. In cowcheck's process
    # the same seed finds the same program after as many examples and steps (for the maps that
    # can run there: one ending the process or patching the suite cannot; a hang's shrinking
    # has a budget of time, so how far it gets depends on the machine's load).
    found = {}
    for mode in ("isolated", "in-process") if comparable else ("isolated",):
        saved = tmp_path / mode
        run = cowcheck("check", "--impl", spec, "--walks", "0", "--seed", "3", "--save-dir", str(saved), *args,
                       *(["--in-process"] if mode == "in-process" else []), cwd=tmp_path)
        assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
        assert "first failure found by Hypothesis" in run.stdout, run.stdout[-3000:]
        stored = json.loads(next(saved.glob("*.json")).read_text())
        assert (stored["failure"]["kind"], stored["failure"]["code"]) == (kind, code), stored["failure"]["message"]
        found[mode] = (stored["steps"], stored["found_by"]["examples"], stored["found_by"]["steps"])
    if comparable:
        assert found["isolated"] == found["in-process"]


def test_a_list_too_long_to_cross_reaches_the_checker_as_its_length_and_beginning():
    """A list of over a million items the map hands back is neither copied nor marshalled in its
    process: the checker reads its type, length and beginning, which equal nothing the model
    holds and show as the whole list shows in one process."""
    from cowcheck.core.failures import safe_repr
    from cowcheck.core.wire import Oversized

    factory = remote_factory("adversaries", "huge_state", machine_kind("map").isolation)
    m = factory(capacity=4, state_copier=copy.deepcopy)
    m.put(1, 0, [1])
    m.snapshot()
    got = m.get(1, 0)  # under a snapshot: 14 million zeros
    assert type(got) is Oversized and len(got) == 14_000_000
    assert got != [1] and not got == [0] * 6 and got == got
    assert repr(got) == safe_repr([0] * 14_000_000) == "[0, 0, 0, 0, 0, 0, ...] (list of 14,000,000 items)"
    assert copy.deepcopy(got) is got  # the harness copies what it is handed: it changes no more than a str
    with pytest.raises(AttributeError, match="reached cowcheck as its length and beginning only"):
        got.append(1)  # a function of the checker's handed one (by a map that passes it to transform's)
    assert m.get(2, 0) is None  # the map's process goes on answering
