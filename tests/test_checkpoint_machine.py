"""The checkpoint machine against the reference, and that it kills every checkpoint mutant."""

import json

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from cowcheck.checkpoint.harness import (
    CHECKPOINT_SCENARIOS,
    REQUIRED_CHECKPOINT_SCENARIOS,
    CheckpointHarness,
    render_checkpoint_program,
)
from cowcheck.checkpoint.machine import CheckpointMachineConfig, make_checkpoint_machine, small_backend
from cowcheck.checkpoint.ops import CHECKPOINT_OPS
from cowcheck.core.failures import CheckFailure
from cowcheck.core.hunt import hunt
from cowcheck.core.machine import RunRecord, machine_kind
from cowcheck.core.mutants import catalogue
from cowcheck.core.program import Step, step_to_json
from cowcheck.core.settle import Subject
from cowcheck.core.shrink import replay, signature_of

CHECKPOINT_MUTANTS = {name: m for name, m in catalogue().items() if m.machine == "checkpoint"}


def _run_ci(factory=None, config=CheckpointMachineConfig()):
    record = RunRecord()
    run_state_machine_as_test(make_checkpoint_machine(factory, config, record), settings=settings.get_profile("ci"))
    return record


def test_reference_passes_20k_ci_steps_and_reaches_every_checkpoint_scenario():
    record = _run_ci()
    assert record.steps >= 20_000
    assert [name for name in REQUIRED_CHECKPOINT_SCENARIOS if record.coverage[name] == 0] == []
    assert [name for name in CHECKPOINT_SCENARIOS if record.coverage[name] == 0] == []


def _hunt(mutant, config=CheckpointMachineConfig()):
    return hunt(lambda rec: make_checkpoint_machine(mutant.factory, config, rec),
                Subject.of(machine_kind("checkpoint"), f"mutant:{mutant.name}", mutant.factory, config), base_seed=0,
                profile=settings.get_profile("ci"), examples=300)


@pytest.mark.parametrize("name", sorted(CHECKPOINT_MUTANTS))
def test_each_checkpoint_mutant_is_killed_under_ci_with_a_fixed_seed(name):
    mutant = CHECKPOINT_MUTANTS[name]
    result = _hunt(mutant)
    assert result.failure is not None, f"{name} survived {result.examples} examples"
    assert result.failure.code in mutant.expected.split(" / ")
    assert len(result.program) <= 12
    assert signature_of(replay(result.program, mutant.factory, harness_class=CheckpointHarness)) == \
        signature_of(result.failure)


def test_the_flink_13469_leak_is_killed_black_box_too():
    result = _hunt(CHECKPOINT_MUTANTS["checkpoint-leak-on-abort"], CheckpointMachineConfig(white_box=False))
    assert result.failure is not None and result.failure.code in ("C3", "P6")


def test_a_shrunk_failure_replays_from_json():
    mutant = CHECKPOINT_MUTANTS["checkpoint-writes-live-state"]
    result = _hunt(mutant)
    stored = json.dumps([step_to_json(s) for s in result.program])
    steps = [CHECKPOINT_OPS.parse(d) for d in json.loads(stored)]
    assert signature_of(replay(steps, mutant.factory, harness_class=CheckpointHarness)) == \
        signature_of(result.failure)
    assert "backend.checkpoint(" in render_checkpoint_program(steps)


def test_the_checkpoint_machine_is_registered_for_cowcheck_mutants():
    kind = machine_kind("checkpoint")
    loaded = (kind.builder, kind.config_class, kind.harness_class)
    assert loaded == (make_checkpoint_machine, CheckpointMachineConfig, CheckpointHarness)
    assert len(CHECKPOINT_MUTANTS) >= 4


# ------------------------------------------------------------ the harness by hand


def _apply_all(backend, steps):
    harness = CheckpointHarness(backend)
    for step in steps:
        harness.apply(Step(*step))
    return harness


def test_restore_equals_the_synchronous_point_while_the_state_keeps_changing():
    harness = _apply_all(small_backend()(), [
        ("kv_put", ("a", 1, 0, [1])), ("kv_put", ("b", 2, 1, [2])),
        ("checkpoint", (0, 0)),
        ("write_key_group", (0,)), ("kv_get_mutate", ("a", 1, 0, 5)), ("kv_remove", ("b", 2, 1)),
        ("checkpoint", (1, 256)), ("kv_transform", ("a", 1, 0, 6)), ("write_key_group", (1,)),
        ("complete", (1,)), ("complete", (0,)),
        ("restore", (0, 2, 5)), ("rescale", (1, 3)), ("recover", (0,)), ("kv_get", ("b", 2, 1)),
    ])
    assert {"concurrent-checkpoints", "write-while-mutated", "restore-smaller-range", "merge-handles",
            "recover-and-continue"} <= set(harness.coverage)
    assert harness.backend.state("b").get(2, 1) == [2]


def test_steps_on_checkpoints_that_are_not_running_do_nothing():
    harness = _apply_all(small_backend()(), [
        ("write_key_group", (3,)), ("complete", (3,)), ("cancel", (3,)), ("fail", (3,)),
        ("restore", (3, 0, 7)), ("rescale", (3, 2)), ("recover", (3,)),
    ])
    assert harness.model.checkpoints == {}


def test_a_malformed_step_is_a_program_error():
    with pytest.raises(CheckFailure) as caught:
        _apply_all(small_backend()(), [("kv_put", ("a", 1, 0))])
    assert caught.value.failure.code == "program"
    with pytest.raises(ValueError, match="unknown operation 'put' of the checkpoint machine"):
        CHECKPOINT_OPS.parse({"op": "put", "args": [1, 0, []]})


def test_the_shrinker_gets_simpler_checkpoint_steps_from_the_harness():
    simpler = list(CheckpointHarness.simpler_steps(Step("kv_put", ("a", 5, 1, [3, 4]))))
    assert simpler == [Step("kv_put", ("a", 5, 0, [3, 4])), Step("kv_put", ("a", 5, 1, []))]
    assert list(CheckpointHarness.simpler_steps(Step("rescale", (0, 4)))) == [Step("rescale", (0, 2))]
    assert list(CheckpointHarness.simpler_steps(Step("complete", (0,)))) == []
