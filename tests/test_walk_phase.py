"""The walk phase of ``check`` and ``mutants``: seeded swarm walks through the
harness before Hypothesis — fast, deterministic, stored like any failure."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cowcheck.registry  # noqa: F401
from cowcheck.core.errors import InternalError
from cowcheck.core.machine import machine_kind
from cowcheck.core.mutants import catalogue
from cowcheck.core.walk_phase import run_walks, walk_length, walk_seeds
from cowcheck.map.harness import Harness
from cowcheck.reference import CopyOnWriteStateMap

ROOT = Path(__file__).resolve().parent.parent


def cowcheck(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("machine, impl", [("map", "reference"), ("async", "reference"), ("checkpoint", "reference")])
def test_every_machine_has_walks_and_its_reference_passes_them(machine, impl, tmp_path):
    run = cowcheck("check", "--machine", machine, "--impl", impl, "--examples", "3", "--walks", "16", "--seed", "2",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "walk phase: 16 walks, " in run.stdout and "no failure" in run.stdout


def test_walk_seeds_depend_on_the_base_seed_only():
    assert walk_seeds(7, 4) == walk_seeds(7, 4) and walk_seeds(7, 4) != walk_seeds(8, 4)
    assert walk_seeds(7, 8)[:4] == walk_seeds(7, 4)


def test_the_reference_passes_the_walk_phase():
    kind = machine_kind("map")
    run = run_walks(kind.walker, lambda: CopyOnWriteStateMap(4), harness_class=Harness, base_seed=1, walks=8)
    # 8, 16, 32, 64, 128, 256, then 300 steps a walk, plus a read of each snapshot left live
    assert [walk_length(n, 300) for n in range(1, 9)] == [8, 16, 32, 64, 128, 256, 300, 300]
    assert run.finding is None and run.walks == 8 and run.steps >= 1104


def test_a_mutant_fails_a_walk_and_the_program_ends_at_the_failing_step():
    kind = machine_kind("map")
    factory = catalogue()["skip-prefix-copy"].factory
    run = run_walks(kind.walker, lambda: factory(capacity=4), harness_class=Harness, base_seed=0, walks=32, spares=2)
    assert run.finding is not None and run.finding.failure.code == "I9"
    assert len(run.finding.program) == run.finding.failure.step_index + 1
    assert all(f.failure.kind == "INVARIANT" for f in run.more) and len(run.more) == 2


def test_an_error_of_cowcheck_in_a_walk_is_an_internal_error_not_a_failure(monkeypatch):
    def broken(self, step):
        raise KeyError("a bug in cowcheck")

    monkeypatch.setattr(Harness, "check_size", broken)
    with pytest.raises(InternalError, match="KeyError"):
        run_walks(machine_kind("map").walker, lambda: CopyOnWriteStateMap(4), harness_class=Harness, base_seed=0,
                  walks=2)


def test_check_finds_a_bug_in_the_walk_phase_and_says_so_the_same_in_two_processes(tmp_path):
    stored = []
    for run_dir in ("a", "b"):
        (tmp_path / run_dir).mkdir()
        run = cowcheck("check", "--impl", "mutant:snapshot-missing-region", "--seed", "3", cwd=tmp_path / run_dir)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "first failure found by the walk phase" in run.stdout
        (path,) = (tmp_path / run_dir / ".cowcheck" / "counterexamples").glob("*.json")
        data = json.loads(path.read_text())
        assert data["found_by"]["generator"] == "walk"
        data.pop("created", None)
        stored.append((data["steps"], data["failure"], data["found_by"]))
    assert stored[0] == stored[1]


def test_walks_0_leaves_the_bug_to_hypothesis(tmp_path):
    run = cowcheck("check", "--impl", "mutant:skip-prefix-copy", "--seed", "3", "--walks", "0", "--no-save",
                   cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "first failure found by Hypothesis" in run.stdout and "walk phase:" not in run.stdout


def test_a_passing_check_reports_its_walk_phase(tmp_path):
    run = cowcheck("check", "--examples", "5", "--seed", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "walk phase: 5 walks, " in run.stdout and "no failure" in run.stdout


def test_walk_test_passes_on_the_reference_and_raises_the_shrunk_failure_of_a_mutant():
    from cowcheck.core.failures import CheckFailure
    from cowcheck.map import walk_test

    walk_test(CopyOnWriteStateMap, walks=8)()
    with pytest.raises(CheckFailure) as caught:
        walk_test(catalogue()["skip-prefix-copy"].factory, impl_spec="mutant:skip-prefix-copy")()
    settled = caught.value.cowcheck_settled
    assert caught.value.failure.code == "I9" and settled.counterexample.found_by["generator"] == "walk"
    assert len(settled.program) <= 8 and settled.counterexample.implementation == "mutant:skip-prefix-copy"


def test_under_pytest_a_failing_walk_test_is_stored_and_shown_with_its_replay_command(tmp_path):
    (tmp_path / "test_my_map.py").write_text(
        "from cowcheck.core.mutants import catalogue\n"
        "from cowcheck.map import walk_test\n"
        "test_walks = walk_test(catalogue()['skip-prefix-copy'].factory, impl_spec='mutant:skip-prefix-copy')\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_map.py",
                          "--cowcheck-dir", str(tmp_path / "found")], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "cowcheck counterexample" in run.stdout and "replay: cowcheck replay" in run.stdout
    (path,) = (tmp_path / "found").glob("*.json")
    data = json.loads(path.read_text())
    assert data["found_by"]["generator"] == "walk" and data["found_by"]["test"].endswith("test_walks")


@pytest.mark.parametrize("machine, module, builder, mutant", [
    ("async", "cowcheck.async_exec.machine", "make_async_machine", "async-key-not-released"),
    ("checkpoint", "cowcheck.checkpoint.machine", "make_checkpoint_machine", "checkpoint-wrong-offsets"),
    ("table", "cowcheck.table.machine", "make_table_machine", "table-set-meta-info-keeps-copier"),
])
def test_under_pytest_a_failing_machine_of_any_kind_is_stored_and_replays(tmp_path, machine, module, builder, mutant):
    (tmp_path / "test_mine.py").write_text(
        "from cowcheck.core.mutants import catalogue\n"
        f"from {module} import {builder}\n"
        f"TestBroken = {builder}(catalogue()[{mutant!r}].implementation().factory).TestCase\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py",
                          "--cowcheck-dir", str(tmp_path / "found"), "--hypothesis-profile=ci"],
                         capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "cowcheck counterexample" in run.stdout and "replay: cowcheck replay" in run.stdout, run.stdout[-3000:]
    (path,) = (tmp_path / "found").glob("*.json")
    data = json.loads(path.read_text())
    assert data["machine"] == machine and data["found_by"]["tool"] == "pytest"
    replay_line = next(line for line in run.stdout.splitlines() if line.startswith("replay: cowcheck replay"))
    replayed = subprocess.run([sys.executable, "-m", "cowcheck.cli", *replay_line.split()[2:]], capture_output=True,
                              text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert replayed.returncode == 1 and "reproduces" in replayed.stdout, replayed.stdout[-2000:]
