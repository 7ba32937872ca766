"""Flink's own HeapKeyedStateBackend under the backend machine (properties/flink/backend.py, BackendHandle.java)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cowcheck.flink  # noqa: F401  (registers --impl flink)
import cowcheck.registry  # noqa: F401
from cowcheck.backend import BackendHarness, reference_state_backend
from cowcheck.backend.harness import BACKEND_SCENARIOS
from cowcheck.core.impls import resolve
from cowcheck.core.machine import machine_kind
from cowcheck.core.walk_phase import run_walks
from cowcheck.flink.backend import LEFT_OUT_OF_COMPARISONS
from cowcheck.flink.corruptions import BACKEND_CORRUPTIONS

ROOT = Path(__file__).resolve().parent.parent
FINDING = ROOT / "docs" / "findings" / "ttl-value-update-null.json"


def cowcheck(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)


def walks(spec, walks=12, **options):
    """Seeded walks on ``spec``, null map values left out (a finding of every release:
    docs/findings/canonical-savepoint-null-map-value.md)."""
    kind = machine_kind("backend")
    factory = resolve(spec, "backend").factory

    def walker(seed, steps, instance):
        return (s for s in kind.walker(seed, steps, instance) if s.op not in LEFT_OUT_OF_COMPARISONS)

    return run_walks(walker, factory, harness_class=BackendHarness, base_seed=0, walks=walks,
                     harness_options=options)


def test_flink_2_3_0_passes_the_walks_and_reaches_every_scenario_but_a_refused_ttl_switch():
    run = walks("flink", walks=24)
    assert run.finding is None, run.finding
    assert {name for name in BACKEND_SCENARIOS if not run.coverage[name]} == {"ttl-switch-refused", "map-null-value"}


@pytest.mark.parametrize("name", sorted(BACKEND_CORRUPTIONS))
def test_a_corruption_of_copy_on_write_is_caught_by_racing_steps_only(name):
    corruption = BACKEND_CORRUPTIONS[name]
    raced = walks(f"flink:corrupt={name}")
    assert raced.finding is not None and raced.finding.failure.code in corruption.racing
    inline = walks(f"flink:corrupt={name}", async_part="inline")
    assert inline.finding is None and inline.coverage["checkpoint-memory"] > 0
    assert corruption.inline == ()


def test_the_reference_and_flink_2_3_0_answer_alike_on_seeded_programs():
    run = subprocess.run([sys.executable, "-m", "cowcheck.flink.backend_parity", "--versions", "2.3.0",
                          "--programs", "12", "--steps", "150"], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "12 same" in run.stdout and "0 different" in run.stdout


def test_the_ttl_null_update_finding_reproduces_on_1_13_6_and_not_on_2_3_0():
    run = cowcheck("versions", str(FINDING), "--versions", "1.13.6,2.3.0", "--format", "json")
    assert run.returncode == 0, run.stderr
    (row,) = json.loads(run.stdout)["counterexamples"]
    assert {v: o["outcome"] for v, o in row["outcomes"].items()} == {"1.13.6": "reproduces", "2.3.0": "passes"}
    assert replay_on_reference() is None


def replay_on_reference():
    from cowcheck.core.counterexample import load
    from cowcheck.core.shrink import replay

    return replay(list(load(FINDING).steps), reference_state_backend, harness_class=BackendHarness)


@pytest.mark.parametrize("release", ["1.13.6", "2.3.0"])
def test_the_builder_builds_flinks_backend_of_the_release_and_restores_rescaled(release):
    script = ("import sys; from cowcheck.flink.releases import select_release; select_release(sys.argv[1]); "
              "from cowcheck.backend.walks import walk_program; from cowcheck.backend import BackendHarness; "
              "from cowcheck.core.program import Step; from cowcheck.flink.backend import FlinkStateBackend; "
              "h = BackendHarness(FlinkStateBackend()); "
              "[h.apply(s) for s in [Step('open', ('long', 8)), Step('map_put', ('map', 12884901888, 1, 2, 3)), "
              "Step('checkpoint', (0, 'file')), Step('rescale', (0, 3)), Step('recover', (0,)), "
              "Step('map_entries', ('map', 12884901888, 1))]]; h.close(); print(dict(h.coverage))")
    run = subprocess.run([sys.executable, "-c", script, release], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'restore-rescaled': 1" in run.stdout and "'recover-and-continue': 1" in run.stdout


def test_checkpoints_written_by_one_release_restore_in_another_and_a_wrong_expectation_is_seen(tmp_path):
    def module(*args):
        run = subprocess.run([sys.executable, "-m", "cowcheck.flink.backend_releases", *args], capture_output=True,
                             text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
        assert run.returncode == 0, run.stdout + run.stderr
        return json.loads(run.stdout.strip().splitlines()[-1])

    written = module("--write", "1.13.6", "--programs", "3", "--steps", "80", "--out", str(tmp_path / "w"))
    assert written["checkpoints"] > 0
    restored = module("--read", "2.3.0", str(tmp_path / "w"))["forms"]
    assert sum(f["same"] for f in restored.values()) == sum(f["checkpoints"] for f in restored.values()) \
        == written["checkpoints"]
    records = json.loads((tmp_path / "w" / "records.json").read_text())
    shown = next(w for r in records["records"] for w in r["expected"].values() if w["shows"])
    shown["shows"][0][1] = "not what it holds"
    (tmp_path / "w" / "records.json").write_text(json.dumps(records))
    assert any(f["different"] for f in module("--read", "2.3.0", str(tmp_path / "w"))["forms"].values())


def test_flink_restores_what_the_reference_wrote_in_flinks_format_and_the_reference_what_flink_wrote(tmp_path):
    run = subprocess.run([sys.executable, "-m", "cowcheck.flink.backend_releases", "--pairs",
                          "reference:2.3.0,2.3.0:reference", "--programs", "3", "--steps", "80", "--out",
                          str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line.split() for line in run.stdout.splitlines() if line.split()[:1] in (["reference"], ["2.3.0"])]
    for pair in (["reference", "2.3.0"], ["2.3.0", "reference"]):
        forms = {row[2]: row[3:] for row in rows if row[:2] == pair}  # per form: snapshots, same, differ, cannot
        assert "checkpoint" in forms, run.stdout
        for snapshots, same, differ, cannot in forms.values():
            assert int(snapshots) > 0 and same == snapshots and differ == cannot == "0", run.stdout
