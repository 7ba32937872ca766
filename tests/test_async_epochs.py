"""Epochs and non-records (cowcheck.reference.epochs, AsyncExecutionController.process_non_record) and the async
machine's A11: a non-record's actions run after the records before it, once, in epoch order."""

from pathlib import Path

import pytest

from cowcheck.async_exec.harness import AsyncHarness, AsyncMachineConfig
from cowcheck.core.failures import CheckFailure
from cowcheck.core.program import Step
from cowcheck.async_exec.walks import walk_program
from cowcheck.reference.async_execution import AsyncExecutionController, DrainStalledError, ManualClock, ParallelMode
from cowcheck.reference.epochs import EpochManager, EpochStatus


FINDING = Path(__file__).resolve().parent.parent / "docs" / "findings" / "epoch-parallel-trigger-stall.json"


def _controller(mode=ParallelMode.PARALLEL_BETWEEN_EPOCH, **options):
    return AsyncExecutionController(batch_size=2, max_in_flight=10, buffer_timeout=0, clock=ManualClock(),
                                    epoch_parallel_mode=mode, **options)


def _bump(aec, log, name):
    count = aec.value_state("count")

    def processing():
        log.append(f"start {name}")
        count.async_value().then_accept(lambda v: log.append(f"done {name}"))

    return processing


def test_a_non_record_waits_for_the_records_before_it_and_not_for_those_after_it():
    aec, log = _controller(), []
    aec.process_record("r1", "k", _bump(aec, log, "r1"))
    aec.process_non_record(lambda: log.append("trigger"), lambda: log.append("final"))
    aec.process_record("r2", "j", _bump(aec, log, "r2"))
    assert "trigger" not in log  # r1's read is still buffered
    aec.drain_inflight_records(0)
    assert log.index("done r1") < log.index("trigger") < log.index("final")
    assert aec.epoch_manager.output_queue == type(aec.epoch_manager.output_queue)()


def test_records_started_by_the_trigger_join_its_epoch_and_delay_the_final_action():
    aec, log = _controller(), []
    aec.process_record("r1", "k", _bump(aec, log, "r1"))

    def trigger():
        log.append("trigger")
        aec.process_record("timer", "k", _bump(aec, log, "timer"))

    aec.process_non_record(trigger, lambda: log.append("final"))
    aec.drain_inflight_records(0)
    assert log.index("trigger") < log.index("done timer") < log.index("final")


def test_serial_mode_finishes_the_epoch_before_process_non_record_returns():
    aec, log = _controller(ParallelMode.SERIAL_BETWEEN_EPOCH), []
    aec.process_record("r1", "k", _bump(aec, log, "r1"))
    aec.process_non_record(lambda: log.append("trigger"), lambda: log.append("final"))
    assert log[-2:] == ["trigger", "final"] and aec.in_flight == 0


def test_epochs_finish_in_arrival_order_even_when_a_later_one_empties_first():
    aec, log = _controller(), []
    aec.process_record("r1", "k", _bump(aec, log, "r1"))
    aec.process_non_record(lambda: log.append("n0"), None)
    aec.process_non_record(lambda: log.append("n1"), None)  # its epoch is empty: it waits for n0 anyway
    assert log == ["start r1"]
    aec.drain_inflight_records(0)
    assert log[-2:] == ["n0", "n1"]


def test_actions_run_without_a_record_context_and_the_context_is_restored():
    aec, seen = _controller(), []
    aec.process_non_record(lambda: seen.append(aec.current_context), None)
    assert seen == [None]


def test_the_epoch_manager_statuses_follow_flinks():
    m = EpochManager(drain=None)
    first = m.on_record()
    m.on_non_record(None, None, ParallelMode.PARALLEL_BETWEEN_EPOCH)
    assert first.status is EpochStatus.CLOSED and m.active is not first
    m.complete_one_record(first)
    assert first.status is EpochStatus.FINISHED and not m.output_queue


def test_epoch_parallel_mode_must_be_a_parallel_mode():
    with pytest.raises(ValueError):
        AsyncExecutionController(epoch_parallel_mode="serial")


def _walk(seed, steps, mode, spawns=True):
    for step in walk_program(seed, steps):
        if step.op == "non_record" and not spawns:
            step = Step("non_record", ([],))
        yield step


@pytest.mark.parametrize("mode,spawns", [("serial", True), ("parallel", True), ("parallel", False)])
def test_walks_with_non_records_pass_on_the_reference_and_reach_the_epoch_scenarios(mode, spawns):
    coverage = {}
    for seed in range(40):
        harness = AsyncHarness(AsyncExecutionController, AsyncMachineConfig(epoch_mode=mode))
        try:
            for step in _walk(seed, 80, mode, spawns):
                harness.apply(step)
        except CheckFailure as exc:
            raise AssertionError(f"seed {seed}: {exc.failure}") from None
        for name, n in harness.coverage.items():
            coverage[name] = coverage.get(name, 0) + n
    assert coverage.get("epoch-waited-for-records")
    assert bool(coverage.get("epoch-final-waited-for-spawned")) == spawns
    assert bool(coverage.get("epochs-overlapped")) == (mode == "parallel")
    assert bool(coverage.get("timer-on-key-in-flight")) == spawns
    assert bool(coverage.get("timer-at-in-flight-limit")) == spawns


# docs/findings/epoch-parallel-trigger-stall.md: in parallel mode a trigger action that starts a record
# while in-flight is at its limit runs inside the last record's disposal, before that record gives back
# its key and its in-flight slot; a record's backpressure drain can then never make progress. A timer
# (Flink's timer service) overdraws instead, so the same program with a timer runs through.
STALL = [Step("arrive", (1, [["add", "b", 1]])),
         Step("non_record", ([[2, [["read", "a"]]]],)),
         *[Step("arrive", (1, [["read", "a"]])) for _ in range(4)],
         Step("arrive", (0, [["read", "b"]])),
         Step("drain", (0,))]


def test_a_timer_fired_at_the_in_flight_limit_inside_a_disposal_overdraws_in_parallel_mode():
    harness = AsyncHarness(AsyncExecutionController, AsyncMachineConfig(epoch_mode="parallel"))
    for step in STALL:
        harness.apply(step)
    assert harness.coverage["timer-at-in-flight-limit"] == 1


def test_a_trigger_that_processes_a_record_at_the_in_flight_limit_stalls_in_parallel_mode():
    aec = AsyncExecutionController(batch_size=3, max_in_flight=4, buffer_timeout=0, clock=ManualClock(),
                                   epoch_parallel_mode=ParallelMode.PARALLEL_BETWEEN_EPOCH)
    read = aec.value_state("a")
    aec.process_record("r0", 1, lambda: read.async_value())
    aec.process_non_record(lambda: aec.process_record("spawned", 2, lambda: read.async_value()), None)
    for i in range(4):
        aec.process_record(f"r{i + 1}", 1, lambda: read.async_value())
    with pytest.raises(DrainStalledError, match="4 blocked"):
        aec.process_record("r5", 0, lambda: read.async_value())


def test_the_same_program_runs_through_in_serial_mode():
    harness = AsyncHarness(AsyncExecutionController, AsyncMachineConfig(epoch_mode="serial"))
    for step in STALL + [Step("drain", (0,))]:
        harness.apply(step)


def test_a_non_record_step_renders_as_runnable_python():
    from cowcheck.async_exec.harness import render_async_program

    steps = [Step("arrive", (0, [["add", "a", 1]])), Step("non_record", ([[0, [["read", "a"]]]],)),
             Step("drain", (0,))]
    namespace = {}
    exec(render_async_program(steps, AsyncMachineConfig(epoch_mode="parallel")), namespace)
    assert namespace["aec"].in_flight == 0


def test_a_regression_written_when_its_helpers_were_in_the_harness_still_runs():
    from cowcheck.async_exec.harness import render_async_program

    steps = [Step("arrive", (0, [["add", "a", 1]])), Step("non_record", ([[0, [["read", "a"]]]],)),
             Step("drain", (0,))]
    program = render_async_program(steps, AsyncMachineConfig(epoch_mode="parallel"))
    older = program.replace("from cowcheck.async_exec.records import", "from cowcheck.async_exec.harness import")
    assert older != program
    namespace = {}
    exec(older, namespace)
    assert namespace["aec"].in_flight == 0


def test_the_stored_finding_replays_in_parallel_mode_from_its_file_and_passes_now_that_timers_overdraw():
    from cowcheck.core.counterexample import load
    from cowcheck.core.replay import replay_setup
    from cowcheck.core.shrink import replay

    cx = load(FINDING)
    assert cx.settings == {"epoch_mode": "parallel"}
    impl, make, options, kind = replay_setup(cx, cx.implementation)
    assert options["config"].epoch_mode == "parallel"
    assert replay(list(cx.steps), make, harness_class=kind.harness_class, **options) is None


def test_counterexample_settings_of_another_machine_are_bad_input():
    import json

    from cowcheck.core.counterexample import Counterexample, CounterexampleError

    data = json.loads(FINDING.read_text())
    data["settings"] = {"epoch_mode": "sideways"}
    with pytest.raises(CounterexampleError):
        Counterexample.from_json(data)
    data["settings"] = {"capacity_of_doom": 1}
    with pytest.raises(CounterexampleError):
        Counterexample.from_json(data)
