"""The async machine against the reference controller, and that it bites (docs/contract.md §12, §13)."""

import json

import pytest
from hypothesis import seed, settings
from hypothesis.stateful import run_state_machine_as_test

from cowcheck.model.async_model import AsyncModel
from cowcheck.async_exec.harness import ASYNC_SCENARIOS, AsyncHarness, AsyncMachineConfig, render_async_program
from cowcheck.async_exec.machine import make_async_machine
from cowcheck.async_exec.ops import ASYNC_OPS
from cowcheck.core.failures import CheckFailure
from cowcheck.core.hunt import hunt
from cowcheck.core.machine import RunRecord, machine_kind
from cowcheck.core.mutants import catalogue
from cowcheck.core.program import Step, step_to_json
from cowcheck.core.settle import Subject
from cowcheck.core.shrink import replay, shrink
from cowcheck.reference.async_execution import AsyncExecutionController

SEED = 20240611
# docs/contract.md §13's async scenarios, as named by the harness.
REQUIRED_SCENARIOS = ("same-key-blocked-then-activated", "backpressure-drain", "forced-trigger", "timeout-trigger")
ASYNC_MUTANTS = sorted(name for name, m in catalogue().items() if m.machine == "async")


def _run_ci(factory, config=AsyncMachineConfig(), **overrides):
    record = RunRecord()
    machine = seed(SEED)(make_async_machine(factory, config, record))
    run_state_machine_as_test(machine, settings=settings(settings.get_profile("ci"), **overrides))
    return record


def test_reference_passes_the_ci_profile_and_reaches_every_spec_async_scenario():
    record = _run_ci(AsyncExecutionController)
    never = [name for name in REQUIRED_SCENARIOS if record.coverage[name] == 0]
    assert set(REQUIRED_SCENARIOS) <= set(ASYNC_SCENARIOS)
    assert record.steps >= 20_000
    assert never == []


def test_the_reference_also_passes_with_batches_on_a_worker_thread():
    record = _run_ci(AsyncExecutionController, AsyncMachineConfig(threaded=True), max_examples=40)
    assert record.examples >= 40


def test_the_black_box_machine_passes_on_the_reference():
    record = _run_ci(AsyncExecutionController, AsyncMachineConfig(white_box=False), max_examples=60)
    assert record.examples >= 60


def test_the_catalogue_holds_the_issue_seven_mutants_for_the_async_machine():
    required = {"async-key-not-released", "async-unblock-newest-first", "async-in-flight-off-by-one",
                "async-callback-ref-not-taken", "async-timeout-never-fires"}
    assert required <= set(ASYNC_MUTANTS)


@pytest.mark.parametrize("name", ASYNC_MUTANTS)
def test_each_async_mutant_is_killed_under_the_ci_profile_with_a_fixed_seed(name):
    mutant = catalogue()[name]
    with pytest.raises(CheckFailure) as caught:
        _run_ci(mutant.factory)
    assert caught.value.failure.code in mutant.expected.split(" / ")


def test_the_black_box_machine_catches_out_of_order_activation_through_the_model_alone():
    with pytest.raises(CheckFailure) as caught:
        _run_ci(catalogue()["async-unblock-newest-first"].factory, AsyncMachineConfig(white_box=False))
    assert (caught.value.failure.kind, caught.value.failure.code) in {("DIVERGENCE", "A1"), ("DIVERGENCE", "A7")}


def test_a_shrunk_failure_is_short_and_its_printed_program_reproduces_it():
    mutant = catalogue()["async-timeout-never-fires"]
    # a pinned program, not a seed: growing the operation table changes what a seed draws
    program = [Step("arrive", (2, [["add", "b", 2], ["read", "a"]])), Step("trigger", ()),
               Step("arrive", (0, [["add", "b", 2]])), Step("run_mail", (3,)), Step("advance_time", (30,)),
               Step("non_record", ([[2, [["read", "b"]]]],)), Step("drain", (0,))]
    failure = replay(program, lambda: mutant.factory, harness_class=AsyncHarness)
    program, failure = shrink(program, failure, lambda: mutant.factory, harness_class=AsyncHarness,
                              config=AsyncMachineConfig())
    assert (failure.code, len(program)) == ("A8", 2)
    assert replay(program, lambda: mutant.factory, harness_class=AsyncHarness) == failure
    namespace = {"TimeoutNeverFires": mutant.factory}
    exec(render_async_program(program, factory="TimeoutNeverFires"), namespace)
    deadline = namespace["aec"].buffer.seq_and_timeout[1]
    assert deadline <= namespace["clock"]()  # still armed, long past due


def test_the_machine_has_a_rule_per_operation_of_the_table_and_walks_draw_them_all():
    from cowcheck.async_exec.walks import walk_program

    machine = make_async_machine(AsyncExecutionController)
    rules = {name for name, value in vars(machine).items() if hasattr(value, "hypothesis_stateful_rule")}
    assert rules == {op.name for op in ASYNC_OPS} | {f"{op.name}_burst" for op in ASYNC_OPS if op.burst}
    drawn = {step.op for seed in range(20) for step in walk_program(seed, 60)}
    assert drawn == {op.name for op in ASYNC_OPS}
    for seed in range(20):  # every drawn step is one the table reads back
        for step in walk_program(seed, 60):
            assert ASYNC_OPS.parse(json.loads(json.dumps(step_to_json(step)))) == step


def test_timers_fire_on_keys_records_hold_and_at_the_in_flight_limit_and_the_reference_passes():
    # r0 holds key 0 while its disposal fires five timers of key 0 (max_in_flight 4): they wait for it
    # in the key's queue; the fourth fires at the limit, the fifth past it and overdraws; the model runs
    # each when it starts
    harness = AsyncHarness(AsyncExecutionController, AsyncMachineConfig())
    for step in [Step("arrive", (0, [["add", "a", 1]])),
                 Step("non_record", ([[0, [["add", "a", 10 ** i]]] for i in range(5)],)),
                 Step("arrive", (0, [["read", "a"]])), Step("drain", (0,))]:
        harness.apply(step)
    assert harness.coverage["timer-on-key-in-flight"] == 5 and harness.coverage["timer-at-in-flight-limit"] == 2
    assert sorted(harness.backend.items()) == [("a", 0, 0, 11112)]


def test_key_order_puts_a_timer_where_it_entered_its_keys_queue():
    from cowcheck.model.async_model import KeyOrder

    def order(starts, draining):
        o = KeyOrder()
        o.arrive(0, "k"); o.entered(0)  # before the watermark
        o.arrive(1, "k")  # after the watermark (parallel epochs)
        if not draining:
            o.entered(1)  # its arrival returned before the timer fired: it is in the queue first
        o.fire(2, "k")
        if draining:
            o.entered(1)  # it was draining for capacity when the timer fired: the timer is first
        o.arrive(3, "k"); o.entered(3)  # after the timer fired
        return [code for rid in starts for code, _ in o.start(rid, finished=lambda r: True)]

    assert order([0, 1, 2, 3], draining=False) == [] and order([0, 2, 1, 3], draining=True) == []
    assert order([0, 2, 1, 3], draining=False) == ["A1"] and order([0, 1, 2, 3], draining=True) == ["A1"]
    assert order([2, 0, 1, 3], draining=False) == ["A1"]  # before a record of an earlier epoch
    assert order([0, 1, 3, 2], draining=False) == ["A1"]  # after a record that came after it fired


def test_hunt_finds_and_shrinks_an_async_mutant_like_a_map_one():
    mutant = catalogue()["async-occupy-overwrites"]
    config = AsyncMachineConfig()
    result = hunt(lambda rec: make_async_machine(mutant.factory, config, rec),
                  Subject.of(machine_kind("async"), "mutant:async-occupy-overwrites", mutant.factory, config),
                  base_seed=SEED, profile=settings.get_profile("ci"))
    assert result.failure is not None and result.failure.code in mutant.expected.split(" / ")
    assert 0 < len(result.program) <= result.original_length


def test_the_harness_accepts_a_built_controller_as_its_class():
    harness = AsyncHarness(AsyncExecutionController(), AsyncMachineConfig(batch_size=2))
    harness.apply(Step("arrive", (1, [["put", "a", 4]])))
    harness.apply(Step("drain", (0,)))
    assert (harness.controller.batch_size, sorted(harness.backend.items())) == (2, [("a", 1, 0, 4)])


def test_async_steps_round_trip_through_json():
    steps = [Step("arrive", (2, [["sum", "a", "b", "a"], ["read", "b"]])), Step("advance_time", (10,)),
             Step("trigger", ()), Step("drain", (0,)), Step("run_mail", (3,))]
    assert [ASYNC_OPS.parse(json.loads(json.dumps(step_to_json(s)))) for s in steps] == steps


@pytest.mark.parametrize("data", [
    {"op": "snapshot", "args": [0]},
    {"op": "drain", "args": []},
    {"op": "arrive", "args": [1, [["add", "a"]]]},
    {"op": "arrive", "args": [1, [["fly", "a", 1]]]},
    ["arrive"],
])
def test_malformed_async_steps_are_rejected(data):
    with pytest.raises(ValueError):
        ASYNC_OPS.parse(data)


def test_the_model_runs_each_record_to_completion_in_arrival_order():
    model = AsyncModel()
    assert model.run_record("k", [["add", "a", 2], ["add_in_accept", "a", 3]]) == [None, 2]
    assert model.run_record("k", [["sum", "a", "b", "b"], ["read", "b"], ["clear", "a"]]) == [5, None, 5]
    assert model.run_record("j", [["put", "a", 1]]) == []
    assert model.data == {("k", "b"): 5, ("j", "a"): 1}
