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
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
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
    from cowcheck.core.machine import MACHINES

    run = cowcheck("check", "--help")
    assert run.returncode == 0
    text = " ".join(run.stdout.split())
    for kind in MACHINES.values():
        assert kind.summary and " ".join(kind.summary.split()) in text, kind.name


# --------------------------------------------------------------- names a user gets wrong


def test_a_misspelt_implementation_is_offered_the_close_name():
    assert "did you mean 'reference'?" in _one_line_error(cowcheck("check", "--impl", "referense"))
    assert "did you mean 'flink@2.0.0'?" in _one_line_error(cowcheck("check", "--impl", "flnk@2.0.0"))
    assert "did you mean 'mutant:skip-prefix-copy'?" in _one_line_error(
        cowcheck("check", "--impl", "mutant:skip-prefix-cpy"))


def test_module_dot_factory_is_offered_module_colon_factory():
    err = _one_line_error(cowcheck("check", "--impl", "plain_dict_map.make_map", pythonpath=EXAMPLES))
    assert "did you mean 'plain_dict_map:make_map'?" in err


def test_a_misspelt_factory_is_offered_the_close_name_in_and_out_of_process():
    for mode in ([], ["--in-process"]):
        err = _one_line_error(cowcheck("check", "--impl", "plain_dict_map:make_mop", *mode, pythonpath=EXAMPLES))
        assert "has no callable 'make_mop'; did you mean 'make_map'?" in err, mode


def test_a_module_in_the_current_directory_is_pointed_at_pythonpath(tmp_path):
    # The installed command (``python -m`` would put the current directory on the path itself).
    (tmp_path / "mymaps.py").write_text("def make_map(capacity=4, state_copier=None):\n    return {}\n")
    command = Path(sys.executable).parent / "cowcheck"
    assert command.exists(), "the test extra installs the package, and with it the cowcheck command"
    for mode in ([], ["--in-process"]):
        run = subprocess.run([str(command), "check", "--impl", "mymaps:make_map", *mode],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        err = _one_line_error(run)
        assert "mymaps.py is in the current directory" in err and "PYTHONPATH=." in err, mode


def test_a_map_factory_given_to_another_machine_names_the_map_machine():
    for machine in ("async", "checkpoint", "table"):
        err = _one_line_error(cowcheck("check", "--machine", machine, "--impl", "plain_dict_map:make_map",
                                       "--minutes", "0.05", pythonpath=EXAMPLES))
        assert "use --machine map" in err, (machine, err)


def test_a_table_factory_given_to_the_map_machine_names_the_table_machine(tmp_path):
    (tmp_path / "mytables.py").write_text("from cowcheck.reference.state_table import CopyOnWriteStateTable\n\n\n"
                                          "def make_table():\n    return CopyOnWriteStateTable(max_parallelism=128)\n")
    err = _one_line_error(cowcheck("check", "--impl", "mytables:make_table", pythonpath=tmp_path))
    assert "use --machine table" in err


# --------------------------------------------------------------- stored counterexamples first


def _check_in(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", "check", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)])))


def test_a_stored_counterexample_of_the_implementation_is_replayed_first_and_fixed_ones_pass(tmp_path):
    (tmp_path / "mymap.py").write_text("from plain_dict_map import make_map\n")
    (tmp_path / "plain_dict_map.py").write_text((EXAMPLES / "plain_dict_map.py").read_text())
    first = _check_in(tmp_path, "--impl", "mymap:make_map", "--seed", "1")
    assert first.returncode == 1 and "saved:" in first.stdout, first.stdout[-2000:] + first.stderr[-2000:]
    stored = sorted((tmp_path / ".cowcheck" / "counterexamples").glob("*.json"))
    assert len(stored) == 1
    (tmp_path / "notes.json").write_text("{}")  # another file there: not one of ours, nothing happens
    again = _check_in(tmp_path, "--impl", "mymap:make_map", "--seed", "2")
    assert again.returncode == 1
    assert f"1 of 1 replayed; .cowcheck/counterexamples/{stored[0].name} fails again" in again.stdout
    assert "walk phase" not in again.stdout and "# <-- fails here" in again.stdout
    skipped = _check_in(tmp_path, "--impl", "mymap:make_map", "--seed", "2", "--no-replay-stored")
    assert skipped.returncode == 1 and "walk phase" in skipped.stdout and "replayed" not in skipped.stdout
    (tmp_path / "mymap.py").write_text("from reference import CopyOnWriteStateMap as make_map\n")  # fixed
    (stored[0].parent / "damaged.json").write_text("{not json")
    fixed = _check_in(tmp_path, "--impl", "mymap:make_map", "--seed", "2", "--examples", "20")
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
    assert "stored counterexamples of mymap:make_map: 1 replayed, none fails now" in fixed.stdout
    assert "stored counterexample skipped:" in fixed.stderr and "damaged.json" in fixed.stderr
    other = _check_in(tmp_path, "--impl", "reference", "--seed", "2", "--examples", "20")
    assert other.returncode == 0 and "stored counterexamples" not in other.stdout  # another implementation's
