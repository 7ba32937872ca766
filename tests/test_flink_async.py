"""Flink's own AsyncExecutionController (2.3.0, the installed jar) under the async machine
(properties.flink.async_controller): the same verdicts as the reference, non-records included, and the
parallel-mode stall found on the reference reproduced on Flink itself."""

import os
import subprocess
import sys

import pytest

import properties.flink  # noqa: F401
import properties.machines  # noqa: F401
from properties.async_exec.harness import AsyncHarness, AsyncMachineConfig
from properties.async_exec.walks import walk_program
from properties.core.counterexample import load
from properties.core.errors import UsageError
from properties.core.failures import CheckFailure
from properties.core.impls import UnknownImplementationError, resolve
from properties.core.replay import replay_setup
from properties.core.shrink import replay
from properties.flink.async_controller import FlinkAsyncController, FlinkDrainStalled
from properties.flink.async_parity import run_programs
from reference.async_execution import DrainStalledError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDING = os.path.join(ROOT, "docs", "findings", "epoch-parallel-trigger-stall.json")


def test_releases_without_an_async_controller_are_unknown_implementations():
    with pytest.raises(UnknownImplementationError) as caught:
        resolve("flink@1.13.6", "async")
    assert "no async controller" in str(caught.value)


def test_flinks_controller_needs_no_buffer_timeout_and_says_why():
    with pytest.raises(UsageError) as caught:
        FlinkAsyncController(buffer_timeout=10)
    assert "wall-clock" in str(caught.value)


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_flink_and_the_reference_give_the_same_verdicts_on_seeded_async_programs(mode):
    result = run_programs("2.3.0", 40, 60, mode)
    assert result["programs"] == 40 and result["differences"] == [], result["differences"]


def test_the_parallel_mode_stall_reproduces_on_flinks_controller():
    cx = load(FINDING)
    impl, make, options, kind = replay_setup(cx, "flink")
    assert options["config"].epoch_mode == "parallel" and options["config"].buffer_timeout == 0
    failure = replay(list(cx.steps), make, harness_class=kind.harness_class, **options)
    assert (failure.kind, failure.code, failure.step_index) == ("TIMEOUT", "A10", cx.failing_step)
    assert "Flink's drainInflightRecords cannot make progress" in failure.message


def test_a_stalled_flink_drain_is_the_references_drain_stalled_error():
    harness = AsyncHarness(resolve("flink", "async").factory, AsyncMachineConfig(buffer_timeout=0,
                                                                               epoch_mode="parallel"))
    cx = load(FINDING)
    with pytest.raises(CheckFailure) as caught:
        for step in cx.steps:
            harness.apply(step)
    assert (caught.value.failure.kind, caught.value.failure.code) == ("TIMEOUT", "A10")
    assert issubclass(FlinkDrainStalled, DrainStalledError)


def test_check_runs_the_async_machine_on_flink_from_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "properties", "check", "--machine", "async", "--impl", "flink",
                          "--examples", "5", "--walks", "3", "--seed", "2"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "AsyncExecutionController through JPype" in run.stdout


def test_flinks_controller_is_checked_white_box_through_reflection():
    harness = AsyncHarness(resolve("flink", "async").factory, AsyncMachineConfig(buffer_timeout=0))
    assert harness.white_box
    for step in walk_program(3, 60):
        harness.apply(step)
    controller = harness.controller
    assert controller.key_accounting.occupied == {} and controller.buffer.blocking_queue_size == 0
    assert harness.coverage["batch-full-trigger"] + harness.coverage["forced-trigger"] > 0
