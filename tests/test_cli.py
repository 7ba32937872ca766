"""The cowcheck command line as a user runs it: exit codes, output, bad input."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def cowcheck(*args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "properties.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def test_check_on_the_reference_finds_nothing_and_reports_coverage():
    run = cowcheck("check", "--examples", "30", "--seed", "1")
    assert run.returncode == 0, run.stderr
    assert "white-box" in run.stdout
    assert "Scenario coverage (docs/contract.md §13)" in run.stdout


def test_check_black_box_on_the_model_finds_nothing():
    run = cowcheck("check", "--impl", "model", "--examples", "20", "--seed", "1")
    assert run.returncode == 0, run.stderr
    assert "black-box" in run.stdout


def test_check_of_a_users_map_reports_the_shrunk_failure_and_exits_1():
    run = cowcheck("check", "--impl", "plain_dict_map:make_map", "--seed", "1", "--no-save", pythonpath=EXAMPLES)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILURE DIVERGENCE" in run.stdout
    assert "# <-- fails here" in run.stdout


def test_same_seed_gives_the_same_report():
    first = cowcheck("check", "--impl", "plain_dict_map:make_map", "--seed", "7", "--no-save", pythonpath=EXAMPLES)
    second = cowcheck("check", "--impl", "plain_dict_map:make_map", "--seed", "7", "--no-save", pythonpath=EXAMPLES)
    strip = lambda out: [l for l in out.splitlines() if " s (" not in l and " ms" not in l]
    assert strip(first.stdout) == strip(second.stdout)


def _one_line_error(run):
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    return run.stderr


def test_unknown_implementation_is_a_one_line_error_with_exit_2():
    assert "unknown implementation 'nope'" in _one_line_error(cowcheck("check", "--impl", "nope"))


def test_module_factory_that_cannot_be_imported_is_named():
    err = _one_line_error(cowcheck("check", "--impl", "no_such_module_xyz:make"))
    assert "no_such_module_xyz" in err


def test_factory_missing_the_api_is_named():
    err = _one_line_error(cowcheck("check", "--impl", "collections:OrderedDict"))
    assert "lacks the docs/contract.md §15 methods" in err


def test_examples_and_minutes_together_are_rejected():
    _one_line_error(cowcheck("check", "--examples", "3", "--minutes", "1"))


def test_bad_capacity_is_rejected():
    assert "power of two" in _one_line_error(cowcheck("check", "--capacity", "6"))


def test_check_runs_the_async_and_checkpoint_machines_on_the_reference():
    for machine in ("async", "checkpoint"):
        run = cowcheck("check", "--machine", machine, "--examples", "20", "--seed", "1")
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"{machine} machine" in run.stdout


def test_check_of_an_async_mutant_fails_and_stores_a_replayable_counterexample(tmp_path):
    run = cowcheck("check", "--machine", "async", "--impl", "mutant:async-timeout-never-fires", "--seed", "1",
                   "--save-dir", str(tmp_path))
    assert run.returncode == 1
    [stored] = list(tmp_path.iterdir())
    assert cowcheck("replay", str(stored)).returncode == 1
    assert cowcheck("replay", str(stored), "--impl", "reference").returncode == 0


def test_a_mutant_of_another_machine_names_the_right_machine():
    run = cowcheck("check", "--impl", "mutant:async-timeout-never-fires")
    assert run.returncode == 2 and "--machine async" in run.stderr


def test_version_names_cowcheck_and_the_packages_a_bug_report_needs():
    run = cowcheck("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("cowcheck ") and "hypothesis" in run.stdout


def test_a_mistyped_machine_is_bad_usage_with_the_close_name_offered():
    run = cowcheck("check", "--machine", "mapp")
    assert run.returncode == 2
    assert "did you mean 'map'?" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_check_help_names_every_machine():
    from properties.core.machine import MACHINES

    run = cowcheck("check", "--help")
    assert run.returncode == 0
    text = " ".join(run.stdout.split())
    for kind in MACHINES.values():
        assert kind.summary and " ".join(kind.summary.split()) in text, kind.name
