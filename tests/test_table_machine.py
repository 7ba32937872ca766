"""The table machine: a CopyOnWriteStateTable whose state serializer is re-registered
(``set_meta_info``) mid-program — and FLINK-26853 found in Flink's released jars."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import cowcheck.registry  # noqa: F401
from cowcheck.core.machine import RunRecord, machine_kind
from cowcheck.core.program import Step
from cowcheck.core.shrink import replay
from cowcheck.core.walk_phase import run_walks
from cowcheck.table import TableHarness, make_table_machine, reference_table
from cowcheck.table.mutants import StaleCopierTable

ROOT = Path(__file__).resolve().parent.parent
# FLINK-26853 as the suite shrank it on Flink 1.13.6 in an earlier run (the stored finding,
# docs/findings/flink-26853-stale-copier.json, ends with the checkpoint write instead).
PROGRAM = [Step("set_meta_info", ()), Step("put", (5, 0, [])), Step("snapshot", (0,)),
           Step("get_mutate", (5, 0, 4)), Step("read_snapshot", (0,))]


def cowcheck(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=900)


def test_the_reference_table_passes_the_machine_and_the_walks():
    record = RunRecord()
    run_state_machine_as_test(make_table_machine(reference_table, record=record), settings=settings(
        settings.get_profile("ci"), max_examples=60))
    assert record.coverage["mutate-after-reregistration-under-snapshot"] > 0
    kind = machine_kind("table")
    run = run_walks(kind.walker, reference_table, harness_class=TableHarness, base_seed=0, walks=16)
    assert run.finding is None and run.coverage["mutate-after-reregistration-under-snapshot"] > 0


def test_the_program_passes_on_the_reference_and_fails_where_set_meta_info_keeps_the_copier():
    assert replay(PROGRAM, reference_table, harness_class=TableHarness) is None
    failure = replay(PROGRAM, StaleCopierTable, harness_class=TableHarness)
    assert (failure.kind, failure.code, failure.step_index) == ("DIVERGENCE", "T2", 4)


def test_the_checkpoint_write_of_a_key_group_holds_what_the_snapshot_froze():
    program = [Step("put", (1, 0, [])), Step("snapshot", (0,)), Step("set_meta_info", ()),
               Step("get_mutate", (1, 0, 6)), Step("write_snapshot", (0,))]
    assert replay(program, reference_table, harness_class=TableHarness) is None
    failure = replay(program, StaleCopierTable, harness_class=TableHarness)
    assert (failure.kind, failure.code, failure.step_index) == ("DIVERGENCE", "T2", 4)
    assert "key group 86" in failure.message


def test_writestateinkeygroup_bytes_of_flink_2_3_0_equal_the_references():
    from cowcheck.core.states import write_serializers
    from cowcheck.flink.table import FlinkStateTable

    tables = [reference_table(), FlinkStateTable()]
    snapshots = []
    for t in tables:
        for k in range(40):
            t.put(k, k % 2, [k, k + 1])
        snapshots.append(t.snapshot())
    for group in range(128):
        written = []
        for s in snapshots:
            out = io.BytesIO()
            s.write_key_group(out, group, *write_serializers())
            written.append(out.getvalue())
        assert written[0] == written[1], group


def test_mutating_in_place_before_re_registration_is_not_a_valid_program():
    assert not TableHarness.valid_program([Step("put", (1, 0, [])), Step("get_mutate", (1, 0, 2))])
    assert TableHarness.valid_program(PROGRAM)


def test_check_finds_flink_26853_in_the_real_1_13_6_jar_and_2_3_0_passes(tmp_path):
    found = cowcheck("check", "--machine", "table", "--impl", "flink@1.13.6", "--seed", "1", cwd=tmp_path)
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-2000:]
    (path,) = (tmp_path / ".cowcheck" / "counterexamples").glob("*.json")
    data = json.loads(path.read_text())
    assert data["machine"] == "table" and (data["failure"]["kind"], data["failure"]["code"]) == ("DIVERGENCE", "T2")
    fixed = cowcheck("check", "--machine", "table", "--impl", "flink", "--seed", "1", "--examples", "60",
                     cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-2000:]


def test_versions_gives_the_regression_range_of_the_finding(tmp_path):
    run = cowcheck("versions", str(ROOT / "docs" / "findings" / "flink-26853-stale-copier.json"),
                   "--versions", "1.13.6,2.3.0", "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (row,) = json.loads(run.stdout)["counterexamples"]
    assert {v: o["outcome"] for v, o in row["outcomes"].items()} == {"1.13.6": "reproduces", "2.3.0": "passes"}
    assert row["range"] == "last reproduces on 1.13.6, first passes on 2.3.0"


@pytest.mark.parametrize("release", ["1.13.6", "2.3.0"])
def test_per_key_group_checkpoint_bytes_of_a_release_equal_the_references(release):
    run = subprocess.run([sys.executable, "-m", "cowcheck.flink.table_parity", release, "5"], capture_output=True,
                         text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["release"] == release and result["key_groups"] > 1000 and result["bytes"] > 10_000
    assert result["mismatches"] == []
