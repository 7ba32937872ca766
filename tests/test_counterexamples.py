"""Counterexample files: format, storage by signature, replay and its bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cowcheck.core.counterexample import Counterexample, CounterexampleError, load, save
from cowcheck.core.failures import Failure
from cowcheck.core.impls import resolve
from cowcheck.core.program import Step
from cowcheck.core.replay import replay_setup
from cowcheck.core.shrink import replay, shrink, signature_of
from cowcheck.map import expected_results
from cowcheck.map.harness import Harness

ROOT = Path(__file__).resolve().parent.parent

# A program that breaks the skip-prefix-copy mutant (found by cowcheck check, shrunk).
PROGRAM = [Step("put_and_get_old", (3, 3, [])), Step("transform", (0, 0, 0)), Step("snapshot", (0,)),
           Step("put_and_get_old", (3, 3, []))]


def _stored(tmp_path, steps=PROGRAM, impl="mutant:skip-prefix-copy"):
    make = lambda: resolve(impl).new(capacity=4)
    failure = replay(steps, make, harness_class=Harness)
    cx = Counterexample.build(steps, failure, impl=impl, machine="map", capacity=4,
                              found_by={"tool": "test", "seed": 0},
                              expected=expected_results(steps))
    return save(cx, tmp_path)[0]


def cowcheck(*args, cwd=ROOT, hashseed=None):
    env = dict(os.environ)
    if hashseed is not None:
        env["PYTHONHASHSEED"] = hashseed
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_a_stored_counterexample_loads_back_identically(tmp_path):
    path = _stored(tmp_path)
    cx = load(path)
    assert list(cx.steps) == PROGRAM
    assert (cx.failure.kind, cx.failure.code, cx.failing_step) == ("INVARIANT", "I9", 3)
    assert cx.expected[3] == []
    assert path.name == "mutant-skip-prefix-copy--INVARIANT-I9.json"


def test_same_bug_found_twice_is_stored_once_and_the_shorter_program_wins(tmp_path):
    longer = [Step("contains_key", (9, 9))] + PROGRAM
    longer_path = _stored(tmp_path, longer)
    path = _stored(tmp_path)
    assert path == longer_path
    assert len(load(path).steps) == len(PROGRAM)
    make = lambda: resolve("mutant:skip-prefix-copy").new(capacity=4)
    cx = Counterexample.build(longer, replay(longer, make, harness_class=Harness), impl="mutant:skip-prefix-copy",
                              machine="map", capacity=4, found_by={})
    assert save(cx, tmp_path) == (path, False)
    assert list(tmp_path.iterdir()) == [path]


def test_replay_reproduces_and_exits_1_then_passes_on_the_reference_and_exits_0(tmp_path):
    path = _stored(tmp_path)
    assert cowcheck("replay", str(path)).returncode == 1
    fixed = cowcheck("replay", str(path), "--impl", "reference")
    assert fixed.returncode == 0
    assert "no longer reproduces" in fixed.stdout


def test_replay_trace_is_byte_identical_across_hash_seeds(tmp_path):
    path = _stored(tmp_path)
    first = cowcheck("replay", str(path), "--trace", "--diagram", hashseed="0")
    second = cowcheck("replay", str(path), "--trace", "--diagram", hashseed="12345")
    strip = lambda out: [line.rsplit(" (", 1)[0] for line in out.splitlines()]  # drop the timing
    assert first.returncode == second.returncode == 1
    assert strip(first.stdout) == strip(second.stdout)
    assert "FAILS: INVARIANT I9" in first.stdout
    assert "snapshot s0 (version 1) reaches:" in first.stdout


def test_to_pytest_writes_a_regression_that_passes_on_the_reference(tmp_path):
    path = _stored(tmp_path)
    out = tmp_path / "regressions"
    run = cowcheck("replay", str(path), "--to-pytest", "--impl", "reference", "--out-dir", str(out))
    assert run.returncode == 0, run.stderr
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert test.returncode == 0, test.stdout


def test_shrink_rewrites_only_when_shorter(tmp_path):
    longer = [Step("contains_key", (9, 9)), Step("rehash", (-1, -1, 3))] + PROGRAM
    path = _stored(tmp_path, longer)
    # _stored saved the long version; shrinking makes it the minimal one.
    run = cowcheck("shrink", str(path))
    assert run.returncode == 0, run.stderr
    assert len(load(path).steps) <= len(PROGRAM)
    before = path.read_bytes()
    again = cowcheck("shrink", str(path))
    assert "already minimal" in again.stdout
    assert path.read_bytes() == before


def test_shrink_finds_the_minimum_fast():
    make = lambda: resolve("mutant:skip-prefix-copy").new(capacity=4)
    noise = [Step("contains_key", (k, 1)) for k in range(5)] + [Step("size_of_namespace", (2,))]
    noisy = [step for original in PROGRAM for step in noise + [original]]
    steps, failure = shrink(noisy, replay(noisy, make, harness_class=Harness), make, harness_class=Harness)
    assert (failure.kind, failure.code) == ("INVARIANT", "I9")
    assert len(steps) <= 4


@pytest.mark.parametrize("content, problem", [
    ("{not json", "malformed JSON"),
    ('{"format": "cowcheck-counterexample", "format_version": 1, "steps": [', "truncated JSON"),
    ('{"format": "cowcheck-counterexample", "format_version": 99}', "unknown format version 99"),
    ('{"hello": "world"}', "not a counterexample"),
    ('[1, 2, 3]', "not a counterexample"),
])
def test_bad_files_are_one_line_errors_with_exit_2_and_untouched(tmp_path, content, problem):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    for command in ("replay", "shrink"):
        run = cowcheck(command, str(bad))
        assert run.returncode == 2
        assert "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
        assert problem in run.stderr and "bad.json" in run.stderr
        assert bad.read_text() == content


def test_unknown_operation_and_unknown_implementation_are_named(tmp_path):
    data = json.loads(_stored(tmp_path).read_text())
    data["steps"][1]["op"] = "explode"
    bad_op = tmp_path / "op.json"
    bad_op.write_text(json.dumps(data))
    assert "unknown operation 'explode'" in cowcheck("replay", str(bad_op)).stderr
    data = json.loads(_stored(tmp_path).read_text())
    data["implementation"]["spec"] = "mutant:no-such-bug"
    bad_impl = tmp_path / "impl.json"
    bad_impl.write_text(json.dumps(data))
    run = cowcheck("replay", str(bad_impl))
    assert run.returncode == 2 and "no such mutant" in run.stderr


def test_a_missing_file_is_named(tmp_path):
    run = cowcheck("replay", str(tmp_path / "nope.json"))
    assert run.returncode == 2 and "no such file" in run.stderr


def test_load_rejects_a_failing_step_outside_the_program(tmp_path):
    data = json.loads(_stored(tmp_path).read_text())
    data["failing_step"] = 17
    with pytest.raises(CounterexampleError, match="failing_step 17"):
        Counterexample.from_json(data)


def test_failure_values_survive_the_round_trip(tmp_path):
    cx = Counterexample.build([Step("get", (1, 0))], Failure("DIVERGENCE", "P1", "m", 0, [1], [2]),
                              impl="reference", machine="map", capacity=4, found_by={})
    path, _ = save(cx, tmp_path)
    assert (load(path).failure.expected, load(path).failure.actual) == ([1], [2])


STORED = sorted((ROOT / "tests" / "regressions" / "counterexamples").glob("*.json"))


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_stored_counterexamples_reproduce_on_their_mutant_and_pass_on_the_reference(path):
    cx = load(path)
    _, make, options, kind = replay_setup(cx, cx.implementation)
    assert signature_of(replay(list(cx.steps), make, harness_class=kind.harness_class, **options)) == \
        signature_of(cx.failure)
    _, make, options, kind = replay_setup(cx, "reference")
    assert replay(list(cx.steps), make, harness_class=kind.harness_class, **options) is None


def test_the_repository_keeps_regressions_from_real_mutant_finds():
    assert len(STORED) >= 5
    assert len(list((ROOT / "tests" / "regressions").glob("test_*.py"))) == len(STORED)


EVIL = '''import copy, pathlib
pathlib.Path("IMPORTED").write_text("evil.py ran")

def make(capacity=4, state_copier=copy.deepcopy):
    from cowcheck.reference import CopyOnWriteStateMap
    return CopyOnWriteStateMap(capacity, state_copier)
'''


def _received(tmp_path) -> Path:
    """A counterexample received from elsewhere, naming a module that lies beside it."""
    (tmp_path / "evil.py").write_text(EVIL)
    path = _stored(tmp_path)
    data = json.loads(path.read_text())
    data["implementation"]["spec"] = "evil:make"
    target = tmp_path / "evil.json"
    target.write_text(json.dumps(data))
    return target


@pytest.mark.parametrize("command", [["-m", "cowcheck.cli", "replay"], ["-m", "cowcheck", "replay"],
                                     ["-m", "cowcheck", "replay", "--to-pytest", "--out-dir", "t"],
                                     ["-m", "cowcheck", "shrink"]])
def test_a_counterexample_file_never_imports_the_module_it_names(tmp_path, command):
    path = _received(tmp_path)
    run = subprocess.run([sys.executable, *command, path.name], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--impl evil:make" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "IMPORTED").exists()


def test_a_module_named_on_the_command_line_is_imported_and_replayed(tmp_path):
    path = _received(tmp_path)
    run = subprocess.run([sys.executable, "-m", "cowcheck", "replay", path.name, "--impl", "evil:make"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr  # evil:make is the reference: the mutant's bug is gone
    assert (tmp_path / "IMPORTED").exists()
