"""The backend machine: keyed states, TTL, checkpoints whose asynchronous part races the task thread."""

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import cowcheck.registry  # noqa: F401
from cowcheck.backend import (BackendHarness, BackendMachineConfig, make_backend_machine, reference_state_backend,
                                reference_flink_format_backend)
from cowcheck.backend.harness import BACKEND_SCENARIOS
from cowcheck.core.machine import RunRecord, machine_kind
from cowcheck.core.mutants import catalogue
from cowcheck.core.program import Step
from cowcheck.core.shrink import replay
from cowcheck.core.walk_phase import run_walks

ROOT = Path(__file__).resolve().parent.parent
OPEN = Step("open", ("int", 8))
# A write racing the asynchronous part of c0: a backend that stops copying on write at the
# synchronous part lets it reach the checkpoint.
RACE = [OPEN, Step("list_add", ("list", 0, 0, 1)), Step("checkpoint_async", (0, "memory", 0)),
        Step("list_add", ("list", 0, 0, 2)), Step("join", (0,))]


# The reference migrates a state whose time-to-live is switched across a restore (as Flink from 2.2):
# only a release that refuses it (ttl_migration=False) reaches a refused switch.
ONLY_ON_OLDER_RELEASES = {"ttl-switch-refused"}


def cowcheck(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=900)


def test_the_reference_passes_the_walks_and_reaches_every_scenario():
    kind = machine_kind("backend")
    run = run_walks(kind.walker, reference_state_backend, harness_class=BackendHarness, base_seed=0, walks=24)
    assert run.finding is None
    assert {name for name in BACKEND_SCENARIOS if not run.coverage[name]} == ONLY_ON_OLDER_RELEASES


def test_the_reference_writing_flinks_format_passes_the_walks_and_reaches_every_scenario():
    kind = machine_kind("backend")
    run = run_walks(kind.walker, reference_flink_format_backend, harness_class=BackendHarness, base_seed=0, walks=24)
    assert run.finding is None
    assert {name for name in BACKEND_SCENARIOS if not run.coverage[name]} == ONLY_ON_OLDER_RELEASES


def test_the_reference_passes_the_hypothesis_machine():
    record = RunRecord()
    run_state_machine_as_test(make_backend_machine(reference_state_backend, record=record),
                              settings=settings(settings.get_profile("ci"), max_examples=25))
    assert record.examples >= 25 and record.coverage["value-state"] > 0


def test_a_write_racing_the_asynchronous_part_is_caught_only_when_it_runs_on_its_own_thread():
    release_early = catalogue()["backend-release-at-sync-point"].factory
    assert replay(RACE, reference_state_backend, harness_class=BackendHarness) is None
    failure = replay(RACE, release_early, harness_class=BackendHarness)
    assert (failure.kind, failure.code, failure.step_index) == ("DIVERGENCE", "K5", 4)
    assert replay(RACE, release_early, harness_class=BackendHarness, async_part="inline") is None


def test_programs_open_once_first_and_name_checkpoints_they_started():
    valid = BackendHarness.valid_program
    assert valid(RACE) and valid([])
    assert not valid(RACE[1:])
    assert not valid([OPEN, OPEN])
    assert not valid([OPEN, Step("join", (0,))])
    assert not valid([OPEN, Step("checkpoint", (0, "file")), Step("join", (0,))])  # not an asynchronous one
    assert not valid([OPEN, Step("value", ("value", "a string key", 0))])
    assert not valid([OPEN, Step("checkpoint", (0, "file")), Step("rescale", (0, 7))])


def test_checkpoint_ids_are_renumbered_in_order_of_appearance():
    program = [OPEN, Step("checkpoint", (7, "memory")), Step("checkpoint_async", (3, "file", 1)),
               Step("join", (3,)), Step("restore", (7, 0, 3))]
    assert [s.args[0] for s in BackendHarness.normalise(program)[1:]] == [0, 1, 1, 0]


def test_async_part_is_a_setting_counterexamples_record():
    kind = machine_kind("backend")
    assert kind.settings(BackendMachineConfig(async_part="inline")) == {"async_part": "inline"}
    assert kind.settings(BackendMachineConfig()) == {}


def test_check_runs_the_backend_machine_and_async_part_is_its_option_only(tmp_path):
    run = cowcheck("check", "--machine", "backend", "--examples", "5", "--walks", "4", "--seed", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "backend machine" in run.stdout and "restored into a smaller key-group range" in run.stdout
    wrong = cowcheck("check", "--machine", "map", "--async-part", "inline", cwd=tmp_path)
    assert wrong.returncode == 2 and "--async-part applies to the backend machine" in wrong.stderr
