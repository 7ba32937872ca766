"""Flink's own AsyncExecutionController under the async machine (cowcheck.flink.async_controller):
on 2.3.0 (the installed jar) the same verdicts as the reference, non-records and their timers included;
on 1.20.x and 2.0.0 (other processes: one release per JVM) the API generations, what the machine leaves
out, and the findings of docs/findings/ with their regression ranges."""

import os
import subprocess
import sys
import time

import pytest

import cowcheck.flink  # noqa: F401
import cowcheck.registry  # noqa: F401
from cowcheck.async_exec.harness import AsyncHarness, AsyncMachineConfig
from cowcheck.async_exec.walks import walk_program
from cowcheck.core.counterexample import load
from cowcheck.core.errors import UsageError
from cowcheck.core.impls import UnknownImplementationError, resolve
from cowcheck.core.replay import replay_setup
from cowcheck.core.shrink import replay
from cowcheck.core.machine import machine_kind
from cowcheck.flink.async_controller import FlinkAsyncController, FlinkDrainStalled, api_from
from cowcheck.flink.jars import class_index
from cowcheck.flink.jvm import flink_jars
from cowcheck.flink.async_parity import run_programs
from cowcheck.flink.versions import PASSES, REPRODUCES, run_release, spec_of
from cowcheck.reference.async_execution import DrainStalledError, ParallelMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDINGS = os.path.join(ROOT, "docs", "findings")
FINDING = os.path.join(FINDINGS, "epoch-parallel-trigger-stall.json")
STALE_CONTEXT = os.path.join(FINDINGS, "nonrecord-action-stale-context.json")
TIMER_STALL = os.path.join(FINDINGS, "timer-at-limit-waits-for-its-own-key.json")


def test_releases_without_an_async_controller_are_unknown_implementations():
    with pytest.raises(UnknownImplementationError) as caught:
        resolve("flink@1.13.6", "async")
    assert "exists from 1.20.0 on" in str(caught.value)


def test_each_release_has_its_api_generation_and_the_machine_leaves_out_what_it_lacks():
    api = api_from(class_index(flink_jars()[0]))  # read from 2.3.0's classes, not from its version
    assert (api.generation, api.final_actions, api.overdraft, api.parallel_epochs, api.executes_sync) == (
        "2.1+", True, True, True, True)
    assert api.controller.endswith("StateExecutionController") and api.buffer_field == "asyncRequestsBuffer"
    assert machine_kind("async").config_for(resolve("flink", "async")).final_actions
    probe = ("import cowcheck.flink, cowcheck.registry\n"
             "from cowcheck.core.impls import resolve\n"
             "from cowcheck.core.machine import machine_kind\n"
             "impl = resolve('flink@1.20.0', 'async')\n"  # selects 1.20.0 for that process
             "c = machine_kind('async').config_for(impl)\n"
             "print(c.final_actions, c.overdraft, c.buffer_timeout)\n"
             "print(impl.description)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    config, description = run.stdout.splitlines()[:2]
    assert config == "False False 0", run.stderr
    assert "no final actions" in description and "no parallel epochs" in description


def test_flinks_controller_needs_no_buffer_timeout_and_says_why():
    with pytest.raises(UsageError) as caught:
        FlinkAsyncController(buffer_timeout=10)
    assert "wall-clock" in str(caught.value)


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_flink_and_the_reference_give_the_same_verdicts_on_seeded_async_programs(mode):
    result = run_programs("2.3.0", 40, 60, mode)
    assert result["programs"] == 40 and result["differences"] == [], result["differences"]


def test_the_parallel_mode_stall_program_passes_on_flink_now_that_its_timer_overdraws():
    cx = load(FINDING)
    impl, make, options, kind = replay_setup(cx, "flink")
    assert options["config"].epoch_mode == "parallel" and options["config"].buffer_timeout == 0
    assert replay(list(cx.steps), make, harness_class=kind.harness_class, **options) is None


def test_a_stalled_flink_drain_is_the_references_drain_stalled_error():
    # docs/findings/epoch-parallel-trigger-stall.md: a trigger action that processes a record (no overdraft)
    # at the in-flight limit, inside the disposal of the last record of its epoch
    controller = FlinkAsyncController(batch_size=3, max_in_flight=4, buffer_timeout=0,
                                      epoch_parallel_mode=ParallelMode.PARALLEL_BETWEEN_EPOCH)
    read = controller.value_state("a")
    controller.process_record(0, 1, lambda: read.async_value())
    controller.process_non_record(lambda: controller.process_record(1, 2, lambda: read.async_value()), None)
    for rid in range(2, 6):
        controller.process_record(rid, 1, lambda: read.async_value())
    with pytest.raises(FlinkDrainStalled):
        controller.process_record(6, 0, lambda: read.async_value())
    assert issubclass(FlinkDrainStalled, DrainStalledError)


def test_the_1_20_findings_reproduce_up_to_1_20_5_and_pass_from_2_0_0():
    rows = {version: run_release(spec_of(version), [STALE_CONTEXT, TIMER_STALL]) for version in ("1.20.0", "2.0.0")}
    outcomes = {version: [rows[version][f]["outcome"] for f in (STALE_CONTEXT, TIMER_STALL)] for version in rows}
    assert outcomes == {"1.20.0": [REPRODUCES, REPRODUCES], "2.0.0": [PASSES, PASSES]}, rows


def test_check_runs_the_async_machine_on_flink_from_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "cowcheck", "check", "--machine", "async", "--impl", "flink",
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


def test_a_slow_moment_inside_flinks_controller_is_a_suspected_hang_never_a_stalled_drain(monkeypatch):
    # Issue 34: `check --machine async --impl flink@2.0.0` exited 1 with "TIMEOUT A10 ... drainInflightRecords
    # cannot make progress: 1 records in flight ... (nondeterministic: reproduced 0 of 10 replays)". The run's
    # pace interrupted a slow call by raising StepTimeout wherever Python ran: once, in the mailbox's
    # execute, which Flink calls inside a CompletableFuture stage (a callback registered on a pending future
    # posts its mail there) that kept the exception; the mail was never posted and the record stayed in
    # flight. Here that moment is made slow on purpose (the second mail posted: the first one whose post
    # runs in such a stage on this release): the step is a suspected hang, which replays do not confirm.
    from cowcheck.core.limits import StepTimeLimit
    from cowcheck.core.program import Step
    from cowcheck.core.settle import Subject, settle
    from cowcheck.flink import async_controller

    kind, impl = machine_kind("async"), resolve("flink", "async")
    subject = Subject.of(kind, "flink", impl.factory, kind.config_for(impl))
    program = [Step("arrive", (0, [["add", "a", 1], ["read", "a"]])), Step("arrive", (0, [["read", "a"]])),
               Step("drain", (0,))]
    assert replay(program, subject.make, **subject.replays()) is None  # (and Flink's classes are warm)
    mailbox = async_controller._classes()["Mailbox"]
    execute, posted = mailbox.execute, []

    def slow_second_post(self, *args):
        posted.append(1)
        if len(posted) == 2:
            time.sleep(2.0)  # past the pace (0.5 s at a warm start): its alarm arrives in Python Flink runs
        return execute(self, *args)

    monkeypatch.setattr(mailbox, "execute", slow_second_post)
    with StepTimeLimit(10.0, paced=True) as limit:
        failure = replay(program, subject.make, **subject.replays())
        assert (failure.kind, failure.code, failure.step_index) == ("TIMEOUT", "time-limit", 2)
        assert limit.timed_out == 1 and limit.last_timeout < limit.seconds  # suspected at the pace
        assert settle(program, failure, subject, found_by={"tool": "test"}) is None  # slow, not a hang
