"""Counterexamples as JUnit 5 tests (cowcheck.flink.junit, ``replay --to-junit``, ``versions --to-junit``).

Fast: every operation of every machine the writer covers is written or declared not yet; every
finding writes a test that marks its failing step and names its rule; a program the writer
cannot express is one line, exit 2. Slow (javac and JUnit's console launcher, one call each for
all the tests): the JUnit tests kept in docs/findings/ and one program per machine using every
operation its writer expresses compile against the installed release (2.3.0) and pass there,
except the findings that reproduce on it; ``cowcheck versions --to-junit`` on a Flink given by
path agrees with the Python replay. The tests that must fail on older releases are run where
those releases are cached: ``python -m cowcheck.flink.junit.kept`` (docs/flink-bridge.md).
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cowcheck.flink  # noqa: F401  (registers flink)
import cowcheck.registry  # noqa: F401
from cowcheck.cli import main
from cowcheck.core.counterexample import Counterexample, load
from cowcheck.core.failures import CRASH, DIVERGENCE, TIMEOUT, Failure
from cowcheck.core.program import Step
from cowcheck.flink.junit import WRITERS, JUnitUnsupported, write_test
from cowcheck.flink.junit.kept import expected_results, kept_tests
from cowcheck.flink.junit.runner import FAILED, PASSED, junit_jars, run_tests
from cowcheck.flink.jvm import flink_jars

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = ROOT / "docs" / "findings"


def test_every_operation_of_every_machine_is_written_or_declared_not_yet():
    assert {machine: writer.missing() for machine, writer in WRITERS.items()} == {m: [] for m in WRITERS}


@pytest.mark.parametrize("path", sorted(FINDINGS.glob("*.json")), ids=lambda p: p.stem)
def test_every_finding_writes_a_test_that_marks_its_failing_step_and_names_its_rule(path):
    cx = load(path)
    test = write_test(cx, path.name, "flink")
    assert test.path.name == f"{test.name}.java" and test.source.startswith(f"package {test.package};")
    failing = [line.strip() for line in test.source.splitlines() if "<-- fails here" in line]
    assert failing == [f"// step {cx.failing_step}: " + failing[0].partition(": ")[2]]
    assert f"// {cx.failure.code}: " in test.source and ("assert" in test.source or "fail(" in test.source)


def _cx(machine: str, steps: list, failure: Failure, **kw) -> Counterexample:
    return Counterexample.build(steps, failure, impl="flink", machine=machine, capacity=kw.pop("capacity", 0),
                                found_by={"tool": "test"}, **kw)


def _restoring() -> Counterexample:
    steps = [Step("open", ("int", 4)), Step("checkpoint", (0, "memory")), Step("restore", (0, 0, 3))]
    return _cx("backend", steps, Failure(DIVERGENCE, "K3", "restored", 2))


def _racing() -> Counterexample:
    steps = [Step("open", (1,)), Step("checkpoint_async", (0, False, "memory", 3)), Step("join", (0,))]
    return _cx("operator", steps, Failure(DIVERGENCE, "O5", "restored", 2))


def _upgrading() -> Counterexample:
    steps = [Step("open", ("int", 4)), Step("update", ("value_pojo", 0, 0, 7)), Step("upgrade", ("canonical", 2, "same"))]
    return _cx("backend", steps, Failure(DIVERGENCE, "K8", "migrated", 2))


@pytest.mark.parametrize("program, step", [(_restoring, "restore"), (_upgrading, "upgrade"), (_racing, "checkpoint_async")],
                         ids=["backend-restore", "backend-upgrade", "operator"])
def test_a_program_the_writer_cannot_express_is_refused_naming_the_step(program, step):
    with pytest.raises(JUnitUnsupported, match=rf"\({step}\)"):
        write_test(program(), "x.json", "flink")


@pytest.mark.slow  # resolves flink: compiles the bridge's helper on first use
def test_a_program_the_writer_cannot_express_is_one_line_and_bad_usage(tmp_path):
    cx = _restoring()
    path = tmp_path / "restore.json"
    path.write_text(cx.text())
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(path), "--to-junit", "--out-dir", str(tmp_path / "j")], out, err) == 2
    assert err.getvalue().count("\n") == 1 and not (tmp_path / "j").exists()


def _programs() -> list[Counterexample]:
    """One program per machine using every operation its writer expresses, each checked at its last
    step with a check Flink 2.3.0 meets (so the test written from it passes there)."""
    table = [Step("put", (1, 0, [1])), Step("put", (2, 1, [])), Step("get", (1, 0)), Step("snapshot", (0,)),
             Step("set_meta_info", ()), Step("get_mutate", (1, 0, 5)), Step("snapshot", (1,)),
             Step("write_snapshot", (0,)), Step("release", (1,)), Step("snapshot", (2,)), Step("read_snapshot", (2,))]
    backend = [Step("open", ("string", 8)), Step("update", ("value_ttl", "k\u00e9", 1, 3)),
               Step("list_add", ("list", "a", 0, 1)), Step("list_update", ("list_ttl_read", "a", 2, [4, 5])),
               Step("map_put", ("map", "b", 0, 1, 2)), Step("map_remove", ("map_ttl", "b", 0, 1)),
               Step("reduce_add", ("reducing", "a", 0, 7)), Step("reduce_add", ("reducing", "a", 0, 8)),
               Step("value", ("value_ttl", "k\u00e9", 1)), Step("list_get", ("list", "a", 0)),
               Step("map_get", ("map", "b", 0, 1)), Step("map_contains", ("map", "b", 0, 3)),
               Step("map_entries", ("map", "b", 0)), Step("reduce_get", ("reducing", "a", 0)),
               Step("clear", ("list", "a", 0)), Step("keys", ("map", 0)), Step("advance", (20,)),
               Step("update", ("value_kryo", "a", 0, 5)), Step("list_update", ("list_pojo", "b", 1, [4, 5])),
               Step("map_put", ("map_kryo", "a", 2, 1, 6)), Step("savepoint", (3, "canonical", "memory")),
               Step("savepoint", (4, "native", "memory")), Step("tail_checkpoint", ("c", 1, "checkpoint")),
               Step("map_put_null", ("map", "b", 0, 2)), Step("compress", (True,)),
               Step("checkpoint", (0, "memory")), Step("value", ("value_ttl", "k\u00e9", 1))]
    program = [["add", "a", 1], ["add_in_accept", "b", 2], ["sum", "a", "b", "a"], ["read", "a"], ["put", "b", 3],
               ["clear", "b"]]
    async_steps = [Step("arrive", (0, program)), Step("arrive", (1, [["add", "a", 2]])), Step("trigger", ()),
                   Step("run_mail", (2,)), Step("advance_time", (5,)), Step("non_record", ([[0, [["read", "a"]]]],)),
                   Step("arrive", (0, [["put", "a", 1]])), Step("drain", (0,))]
    pairs = [Step("put", (k, 0, [k])) for k in range(5)]
    map_steps = [*pairs, Step("put_and_get_old", (1, 0, [9])), Step("get", (1, 0)), Step("get_mutate", (2, 0, 3)),
                 Step("contains_key", (3, 0)), Step("remove", (3, 0)), Step("remove_and_get_old", (4, 0)),
                 Step("rehash", (-1, -1, 3)), Step("snapshot", (0,)), Step("release", (0,)), Step("iterate", ()),
                 Step("size_of_namespace", (0,)), Step("hold_keys", ()), Step("put_range", ("long", 0, 3, 1, [])),
                 Step("get_range", ("long", 0, 3, 1)), Step("remove_range", ("long", 1, 2, 1)),
                 Step("get", (0, 0)), Step("iterate_modify", (2, 0, 0, "put"))]
    operator = [Step("open", (2,)), Step("add", (0, "split_int", 3)), Step("add_all", (1, "split_long", [1, 2])),
                Step("update", (0, "split_list", [4, 5])), Step("mutate", (0, "split_list", 1, 7)),
                Step("put", (1, "bcast_long_list", 2, 4)),
                Step("put_all", (0, "bcast_string_string", [[1, 6], [2, -1]])),
                Step("mutate", (1, "bcast_long_list", 2, 8)), Step("add", (1, "union_string", 6)),
                Step("add_all", (0, "split_string", [-1])), Step("remove", (0, "bcast_string_string", 2)),
                Step("get", (1, "split_long")), Step("lookup", (1, "bcast_long_list", 2)),
                Step("contains", (0, "bcast_string_string", 1)), Step("entries", (0, "bcast_string_string")),
                Step("clear", (1, "split_int")), Step("checkpoint", (0, True, "memory")), Step("restore", (0, 3)),
                Step("checkpoint", (1, False, "memory")), Step("recover", (1, 3, "")), Step("add", (2, "union_int", 5)),
                Step("checkpoint", (2, False, "memory")), Step("recover", (2, 2, "union_int"))]
    return [
        _cx("operator", operator, Failure(DIVERGENCE, "O4", "", len(operator) - 1)),
        _cx("table", table, Failure(DIVERGENCE, "T2", "", len(table) - 1)),
        _cx("backend", backend, Failure(DIVERGENCE, "K1", "", len(backend) - 1)),
        _cx("async", async_steps, Failure(TIMEOUT, "A10", "", len(async_steps) - 1)),
        _cx("map", map_steps, Failure(DIVERGENCE, "P7", "", len(map_steps) - 1), capacity=128,
            strict_live_iteration=True),
    ]


@pytest.mark.slow
def test_kept_tests_and_every_written_operation_compile_on_the_installed_release_and_pass_unless_it_has_the_bug():
    flink, logging = flink_jars()
    written = [write_test(cx, f"every-{cx.machine}-operation.json", "flink") for cx in _programs()]
    kept = kept_tests(FINDINGS)
    assert len(kept) == len(list(FINDINGS.glob("*.json")))  # one kept test per finding
    outcomes = run_tests(written + kept, flink + logging, junit_jars())
    measured = expected_results(FINDINGS)  # what each kept test did on each release when it was written
    want = {t.qualified: measured.get(t.name, {}).get("2.3.0", PASSED) for t in written + kept}
    assert {measured[t.name]["2.3.0"] for t in kept} == {PASSED, FAILED}
    assert {name: o.result for name, o in outcomes.items()} == want, outcomes


@pytest.mark.slow
def test_versions_on_a_flink_given_by_path_says_where_junit_and_python_agree(tmp_path):
    dist = flink_jars()[0][0]  # the installed 2.3.0, named by path
    finding = str(FINDINGS / "flink-26853-stale-copier.json")
    run = subprocess.run([sys.executable, "-m", "cowcheck.cli", "versions", finding, "--versions", dist, "--to-junit",
                          "--format", "json"], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr[-2000:]
    (row,) = json.loads(run.stdout)["counterexamples"]
    cell = row["outcomes"][dist]
    assert (cell["outcome"], cell["junit"]["result"]) == ("passes", PASSED)


def test_a_line_break_in_a_string_is_an_escape_javac_reads_inside_a_literal():
    # javac turns \u000a into a real line break before it reads literals: a literal holding one does not compile.
    from cowcheck.flink.junit.writer import java_string
    assert java_string("a\nb\rc") == '"a\\nb\\rc"'
