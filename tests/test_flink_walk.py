"""Batched walks on Flink's map (properties.flink.walk, Walk.java, Checker.java): the same verdicts as
the call-by-call bridge, seeded Java-side corruptions caught both ways, and campaign isolation that
costs a hanging or dying seed only that seed. Every test here runs the real jar."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from properties.core.impls import UnknownImplementationError, resolve
from properties.core.program import Step
from properties.core.shrink import replay
from properties.flink import FlinkStateMap, jvm
from properties.flink.corruptions import CORRUPTIONS
from properties.flink.jvm import Java
from properties.flink.walk import OutOfStep, WalkHarness, WalkMap
from properties.map.harness import Harness
from properties.map.ops import MAP_OPS
from properties.map.walks import walk_program
from spark_fuzz.executor import CampaignConfig, run_seed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(harness, program):
    """``properties.core.shrink.replay`` on an already built harness (kept for its coverage)."""
    return replay(program, lambda: None, harness_class=lambda _: harness)


def _verdict(failure):
    return None if failure is None else (failure.kind, failure.code, failure.step_index)


def test_walk_numbers_operations_as_the_maps_table():
    jvm()
    assert list(Java.Walk.operations()) == [op.name for op in MAP_OPS]


@pytest.mark.parametrize("white_box", [False, True], ids=["black-box", "white-box"])
@pytest.mark.parametrize("corruption", ["", "mark-fresh", "misplace", "lose-size", "stale-required"])
def test_batched_walks_judge_every_program_as_the_call_by_call_bridge(corruption, white_box):
    """Same programs, same map (Flink's own, corrupted or not): kind, code and step of the first
    failure are identical, white-box invariants computed in Java against the Python checks over
    the bridge's mirrors."""
    verdicts = []
    for seed in range(24):
        program = list(walk_program(seed, 150))
        batched = _run(WalkHarness(WalkMap(corruption=corruption), white_box=white_box), program)
        per_call = _run(Harness(FlinkStateMap(corruption=corruption), white_box=white_box), program)
        assert _verdict(batched) == _verdict(per_call), (seed, batched and batched.message,
                                                         per_call and per_call.message)
        verdicts.append(_verdict(batched))
    if corruption:
        expected = CORRUPTIONS[corruption].white_box if white_box else CORRUPTIONS[corruption].black_box
        failed = [v for v in verdicts if v is not None]
        assert len(failed) >= 4, verdicts
        assert {code for _, code, _ in failed} <= set(expected), verdicts
    else:
        assert verdicts == [None] * len(verdicts)


def test_white_box_batched_walks_count_the_scenarios_the_python_classification_counts():
    for seed in (1, 5, 9):
        program = list(walk_program(seed, 200))
        batched, per_call = WalkHarness(WalkMap(), white_box=True), Harness(FlinkStateMap(), white_box=True)
        assert _run(batched, program) is None and _run(per_call, program) is None
        assert batched.coverage == per_call.coverage


def test_a_harness_call_the_walk_did_not_record_is_cowchecks_error():
    harness = WalkHarness(WalkMap(), white_box=False)
    harness.apply(Step("put", (1, 0, [2])))
    with pytest.raises(OutOfStep):
        harness.impl.get(1, 0)  # no step of the harness began: nothing was recorded for it


def test_steps_applied_without_expect_run_one_java_call_each_and_agree():
    program = list(walk_program(4, 60))
    assert _run(WalkHarness(WalkMap(), white_box=True), program) is None
    harness = WalkHarness(WalkMap(), white_box=True)
    for step in program:
        harness.apply(step)
    assert len(harness.steps) == len(program)


@pytest.mark.parametrize("spec,error", [("flink:corrupt=nope", "unknown option"), ("flink:fast", ":corrupt=NAME")])
def test_unknown_corruptions_are_unknown_implementations(spec, error):
    with pytest.raises(UnknownImplementationError) as caught:
        resolve(spec)
    assert error in str(caught.value)


@pytest.mark.parametrize("white_box", [False, True], ids=["black-box", "white-box"])
@pytest.mark.parametrize("corruption", ["mark-fresh", "misplace"])
def test_campaign_seeds_find_the_same_shrunk_counterexamples_batched_and_call_by_call(corruption, white_box):
    spec = f"flink:corrupt={corruption}"
    found = 0
    for seed in range(5):
        outcomes = [run_seed(seed, CampaignConfig(impl=spec, capacity=128, white_box=white_box, steps=120,
                                                  batched=batched)) for batched in (True, False)]
        batched, per_call = outcomes
        assert batched == per_call  # kind, code, message, ops, coverage, counterexample (timing aside)
        found += batched.failed
        assert batched.kind != "INTERNAL", batched.details
    assert found >= 3


def _python(script: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """In a fresh interpreter: a campaign's children fork before any JVM starts."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_a_seed_that_kills_the_jvm_costs_that_seed_and_one_new_worker():
    result = _python("""
        import json
        from spark_fuzz.executor import CampaignConfig
        from spark_fuzz.ranges import run_range, shutdown_worker
        config = CampaignConfig(impl="flink:corrupt=halt", capacity=128, white_box=False, steps=120)
        first = run_range(0, 40, config)
        second = run_range(40, 60, config)
        shutdown_worker()
        print(json.dumps([[(o.seed, o.kind, o.code) for o in r.outcomes] + [r.startups] for r in (first, second)]))
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = json.loads(result.stdout)
    rows = first[:-1] + second[:-1]
    died = [seed for seed, kind, code in rows if kind != "PASS"]
    assert died and len(died) < len(rows) // 2, rows
    assert all(kind == "CRASH" and code == "worker-exit" for seed, kind, code in rows if seed in died)
    # one worker per death, plus the first; none for the second range if its first seed did not need one
    assert first[-1] + second[-1] == 1 + len(died) - (rows[-1][1] != "PASS")


def test_a_seed_that_hangs_inside_java_is_a_timeout_and_the_campaign_goes_on():
    result = _python("""
        import json
        from spark_fuzz.executor import CampaignConfig
        from spark_fuzz.ranges import run_range, shutdown_worker
        config = CampaignConfig(impl="flink:corrupt=cycle", capacity=128, white_box=False, steps=120,
                                step_time_limit=1.0, seed_time_limit=3.0)
        result = run_range(0, 40, config)
        shutdown_worker()
        print(json.dumps([(o.seed, o.kind, o.code) for o in result.outcomes]))
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert len(rows) == 40
    kinds = {kind for _, kind, _ in rows}
    assert "PASS" in kinds and "TIMEOUT" in kinds, rows


def test_check_finds_a_corruption_of_flinks_map_in_its_batched_walks_and_the_file_replays(tmp_path):
    def cowcheck(*args):
        return subprocess.run([sys.executable, "-m", "properties", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))

    found = cowcheck("check", "--impl", "flink:corrupt=mark-fresh", "--examples", "20", "--seed", "3")
    assert found.returncode == 1, found.stdout + found.stderr
    assert "found by the walk phase" in found.stdout
    saved = next((tmp_path / ".cowcheck" / "counterexamples").glob("flink-corrupt-mark-fresh*.json"))
    again = cowcheck("replay", str(saved))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reproduces" in again.stdout
