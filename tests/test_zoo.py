"""The adversary zoo (tests/zoo/adversaries.py) gets the verdict it must get.

Each map is run as a user runs it — ``cowcheck check --impl
adversaries:NAME`` (the map in a process of its own) in a fresh process,
outside the checkout, tests/zoo on PYTHONPATH — and must give its exit code and, for a failure, the kind and
code stored in the counterexample. Stored failures replay to the same
verdict (naming the map with --impl: a file alone does not import it), and
the campaign executor reaches the same verdicts seed by seed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "tests" / "zoo"
sys.path.insert(0, str(ZOO_DIR))

from adversaries import ZOO  # noqa: E402

from cowcheck.core.errors import UsageError  # noqa: E402
from cowcheck.core.impls import probe_isolated, resolve  # noqa: E402
from cowcheck.core.machine import machine_kind  # noqa: E402
from cowcheck.spark_fuzz.executor import CampaignConfig, run_seed  # noqa: E402
from cowcheck.spark_fuzz.ranges import run_range  # noqa: E402


def cowcheck(*args, cwd, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ZOO_DIR), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def _stored(directory: Path) -> dict:
    files = sorted(directory.glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


@pytest.mark.parametrize("name", sorted(ZOO))
def test_check_gives_the_zoo_verdict(name, tmp_path):
    verdict = ZOO[name]
    budget = ("--examples", "40") if verdict.exit == 0 else ()
    run = cowcheck("check", "--impl", verdict.spec, "--seed", "1", "--save-dir", "saved",
                   *budget, *verdict.args, cwd=tmp_path)
    assert run.returncode == verdict.exit, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    if verdict.says:
        assert verdict.says in run.stderr
    if verdict.prints:
        assert verdict.prints in run.stdout, run.stdout[-2000:]
    if verdict.exit == 2:
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert not (tmp_path / "saved").exists()
    if verdict.exit == 1:
        stored = _stored(tmp_path / "saved")
        failure = stored["failure"]
        assert (failure["kind"], failure["code"]) == (verdict.kind, verdict.code), failure["message"]
        if verdict.steps is not None:
            assert len(stored["steps"]) == verdict.steps
        assert f"--impl {verdict.spec}" in run.stdout  # the printed replay command
        # A map that fails at random is stored with the mark and the count; any other without.
        assert ("nondeterministic" in stored) == verdict.nondeterministic, stored.get("nondeterministic")
        if verdict.nondeterministic:
            marked = stored["nondeterministic"]
            assert 0 <= marked["reproduced"] < marked["replays"] == 10
            assert f"reproduced {marked['reproduced']} of 10 replays" in run.stdout


FAILING = sorted(name for name, v in ZOO.items() if v.exit == 1)

# Replay and the campaign executor drive the same harness as check: the maps whose verdict depends on
# the driver (the map's process ending or exiting, building it failing, a module patching the suite,
# time limits, failing at random, contract levels, a stream written) go through both; the others' verdicts
# are the harness's, checked above with check, and one plain failure and the passing maps stand for them.
THROUGH_EVERY_DRIVER = frozenset({
    "exits-in-method", "os-exit-in-method", "exits-in-factory", "os-exit-in-factory", "raises-keyboard-interrupt",
    "raises-generator-exit", "writes-to-pipes", "patches-cowcheck", "hangs-in-get", "slow", "racy-snapshot",
    "eager-copy", "eager-copy-isolation", "writes-key-first", "lies-length", "eq-raises-state",
    "keys-as-list", "flags-as-methods", "tuple-introspection",
})


@pytest.mark.parametrize("name", [n for n in FAILING if n in THROUGH_EVERY_DRIVER])
def test_a_stored_zoo_failure_replays_to_the_same_verdict_only_when_named_on_the_command_line(name, tmp_path):
    verdict = ZOO[name]
    found = cowcheck("check", "--impl", verdict.spec, "--seed", "1", "--save-dir", ".", *verdict.args, cwd=tmp_path)
    assert found.returncode == 1, found.stdout[-2000:] + found.stderr[-2000:]
    path = next(tmp_path.glob("*.json"))
    alone = cowcheck("replay", path.name, cwd=tmp_path)
    assert alone.returncode == 2 and f"--impl {verdict.spec}" in alone.stderr, alone.stderr
    limit = [a for a in verdict.args if a != "--capacity"][:2] if "--step-time-limit" in verdict.args else []
    # A map that fails in one replay of three: 60 replays (all passing: one chance in 10^10).
    times = ["--replays", "60"] if verdict.nondeterministic else []
    replayed = cowcheck("replay", path.name, "--impl", verdict.spec, *limit, *times,
                        cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "reproduces at step" in replayed.stdout or "of 60 replays at step" in replayed.stdout
    assert f"{verdict.kind} {verdict.code}" in replayed.stdout
    assert "Traceback" not in replayed.stderr


CAMPAIGN = {name: v for name, v in ZOO.items() if v.exit in (0, 1) and "--capacity" not in v.args
            and "--white-box" not in v.args}


@pytest.mark.parametrize("name", sorted(n for n in CAMPAIGN if n in THROUGH_EVERY_DRIVER))
def test_the_campaign_executor_gives_the_zoo_verdict(name):
    verdict = ZOO[name]
    contract = verdict.args[verdict.args.index("--contract") + 1] if "--contract" in verdict.args else "flink"
    # a failing map's verdict is its kind and code: its seeds' programs are not shrunk here (shrinking
    # is tested on its own), but a map failing at random is, as its mark comes from the replays
    # (a short step limit for the maps that hang and for the one that is only slow, which must
    # pass it; the others get the default: a correct map whose snapshot deep-copies a medium
    # map may take over a second on a loaded machine)
    limit = 1.0 if verdict.kind == "TIMEOUT" or name == "slow" else 10.0
    config = CampaignConfig(impl=verdict.spec, steps=200, step_time_limit=limit, sizes="medium",
                            seed_time_limit=20.0, contract=contract,
                            shrink=verdict.exit == 0 or verdict.nondeterministic)
    # A map that fails in one run of three: 40 seeds (none failing: one chance in 10^7).
    result = run_range(0, 40 if verdict.nondeterministic else 12, config, isolate=True)
    kinds = {(o.kind, o.code) for o in result.outcomes}
    if verdict.exit == 0:
        assert kinds == {("PASS", "")}, [o.message for o in result.outcomes if o.kind != "PASS"]
        return
    assert (verdict.kind, verdict.code) in kinds, [(o.kind, o.code, o.message[:120]) for o in result.outcomes]
    assert not result.internal
    failed = next(o for o in result.outcomes if (o.kind, o.code) == (verdict.kind, verdict.code))
    assert failed.counterexample is not None and json.loads(failed.counterexample)["failure"]["code"] == verdict.code
    if verdict.nondeterministic:  # the shrunk seed's row carries the mark, as its counterexample does;
        # later seeds of the range with the same failure are counted, not shrunk again (no counterexample)
        rows = [r for r in result.failure_rows(config) if r["code"] == verdict.code]
        shrunk = [r for r in rows if r["counterexample_json"] is not None]
        assert len(shrunk) == 1 and shrunk[0]["nondeterministic"], rows
        assert "nondeterministic" in json.loads(shrunk[0]["counterexample_json"])


def test_a_map_the_factory_cannot_build_is_bad_usage_for_the_campaign_before_spark_starts(tmp_path):
    run = cowcheck("campaign", "--impl", "adversaries:only_capacity_128", "--seeds", "0:4", "--out", "camp",
                   cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--capacity" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert "spark:" not in run.stdout  # nothing started


def test_a_native_hang_holding_the_interpreter_ends_the_run_with_exit_1_instead_of_hanging(tmp_path):
    run = cowcheck("check", "--impl", "adversaries:hangs_in_native_code", "--seed", "1", "--step-time-limit", "1",
                   cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Timeout" in run.stderr or "did not return" in run.stdout


def test_check_with_minutes_returns_within_its_budget_whatever_the_map_costs_per_step(tmp_path):
    import time

    started = time.monotonic()
    run = cowcheck("check", "--impl", "adversaries:slow", "--minutes", "0.05", "--seed", "1", cwd=tmp_path)
    took = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert took < 3 + 10, took  # the budget (3 s) plus interpreter start-up; a batch of examples costs ~20 s


def test_run_seed_never_blames_the_implementation_for_a_usage_error_in_the_campaign_probe():
    kind = machine_kind("map")
    impl = resolve("adversaries:only_capacity_128")
    with pytest.raises(UsageError, match="--capacity"):
        probe_isolated(kind, impl, kind.config(capacity=4), black_box=False, step_time_limit=5)
    assert probe_isolated(kind, impl, kind.config(capacity=128), black_box=False, step_time_limit=5).white_box is False
    assert run_seed(0, CampaignConfig(impl="adversaries:only_capacity_128", capacity=128, steps=50)).kind == "PASS"


def test_a_hang_is_suspected_at_the_runs_pace_and_stored_as_confirmed_under_the_full_limit(tmp_path):
    # With a limit above the pace's floor (0.5 s), the hang is first interrupted at the pace, then
    # confirmed once under the full limit: the stored failure names the full limit.
    run = cowcheck("check", "--impl", "adversaries:hangs_in_get", "--seed", "1", "--step-time-limit", "3",
                   "--save-dir", "saved", cwd=tmp_path)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    failure = _stored(tmp_path / "saved")["failure"]
    assert (failure["kind"], failure["code"]) == ("TIMEOUT", "time-limit")
    assert "step time limit of 3 s" in failure["message"] and "pace" not in failure["message"]
    assert "slow calls" not in run.stdout


def test_the_p6_harm_of_a_shallow_snapshot_is_the_same_with_the_map_in_its_own_process():
    # The harness appends a mark to the state a P6 breach handed out and reads the snapshots: a
    # map in its own process must get that change (and its undoing) as one in cowcheck's does.
    from cowcheck.core.boundary import build
    from cowcheck.core.failures import CheckFailure
    from cowcheck.core.program import Step

    kind = machine_kind("map")
    program = [Step("put", (1000, 0, [])), Step("snapshot", (0,)), Step("get", (1000, 0))]
    said = {}
    for isolated in (False, True):
        impl = resolve("adversaries:shallow_snapshot", isolated=isolated)
        make, options = kind.replay_setup(impl.factory, kind.config(capacity=4, white_box=False))
        harness = kind.harness_class(build(make), **options)
        with pytest.raises(CheckFailure) as raised:
            for step in program:
                harness.apply(step)
        said[isolated] = raised.value.failure.message
        assert list(harness.snapshots[0][0]) == [(1000, 0, [])]  # the mark was taken back there too
    assert "snapshot s0 would read [-1] instead of []" in said[False]
    assert said[True] == said[False]
