"""The campaign executor without Spark: run_seed, swarm walks, seed ranges under a guard."""

import inspect
import io
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import attrs
import pytest
from fault_seeds import SIZES, lone_trigger, window

from cowcheck.cli import main
from cowcheck.core.counterexample import Counterexample, save
from cowcheck.core.mutants import catalogue
from cowcheck.map.ops import MAP_OPS
from cowcheck.map.scenarios import MAP_SCENARIOS
from cowcheck.map.walks import WALK_OPS, walk_program
from cowcheck.spark_fuzz import CampaignConfig, Outcome, run_range, run_seed
from cowcheck.spark_fuzz.ranges import guarded_run_seed

ROOT = Path(__file__).resolve().parent.parent


def _first_failure(config: CampaignConfig, seeds=range(200)) -> Outcome:
    for seed in seeds:
        outcome = run_seed(seed, config)
        if outcome.failed:
            return outcome
    raise AssertionError(f"no seed of {seeds} fails on {config.impl}")


def test_a_walk_is_generated_lazily_one_step_at_a_time():
    program = walk_program(1, 10**12)
    assert inspect.isgenerator(program)
    assert [step.op in WALK_OPS for step in (next(program), next(program))] == [True, True]


def test_a_walk_ends_by_reading_every_snapshot_still_live():
    for seed in range(50):
        steps = [s for s in walk_program(seed, 100) if s.op != "hold_keys"]  # a switch, not one of the 100
        live = set()
        for step in steps[:100]:
            if step.op == "snapshot":
                live.add(step.args[0])
            elif step.op in ("release", "read_snapshot_transformed"):
                live.discard(step.args[0])
        assert [s.args[0] for s in steps[100:]] == sorted(live)
        assert {s.op for s in steps[100:]} <= {"read_snapshot"}


def test_walks_are_swarms_each_seed_has_its_own_op_mix():
    mixes = [Counter(step.op for step in walk_program(seed, 300)) for seed in range(20)]
    switched_off = [set(WALK_OPS) - set(mix) for mix in mixes]
    assert len({frozenset(s) for s in switched_off}) > 10
    writes = [op.name for op in MAP_OPS if op.writes]  # every walk writes (whichever writes it drew)
    assert all(sum(mix[name] for name in writes) > 0 for mix in mixes)


def test_reference_passes_every_seed_and_reaches_every_map_scenario():
    coverage = Counter()
    for seed in range(150):
        outcome = run_seed(seed, CampaignConfig(impl="reference", steps=200, sizes="medium"))
        assert (seed, outcome.kind) == (seed, "PASS")
        coverage.update(outcome.coverage)
    assert [name for name in MAP_SCENARIOS if not coverage[name]] == []


def test_a_seeded_bug_is_found_shrunk_and_returned_as_a_counterexample():
    outcome = _first_failure(CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy"))
    cx = Counterexample.from_json(json.loads(outcome.counterexample))
    assert (outcome.kind, outcome.code) == ("INVARIANT", "I9")
    assert cx.signature == outcome.signature == "mutant-skip-prefix-copy--INVARIANT-I9"
    assert len(cx.steps) < outcome.original_steps
    assert cx.found_by["seed"] == outcome.seed
    assert cx.found_by["generator"] == "walk"


def test_a_failure_whose_signature_is_known_already_is_counted_not_shrunk_again():
    config = CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy")
    first = _first_failure(config)
    again = run_seed(first.seed, attrs.evolve(config, known=[first.signature]))
    assert (again.kind, again.code, again.signature) == (first.kind, first.code, first.signature)
    assert again.counterexample is None and again.original_steps == first.original_steps
    other = run_seed(first.seed, attrs.evolve(config, known=["mutant-skip-prefix-copy--DIVERGENCE-P1"]))
    assert other == first  # another signature known: this one is shrunk as ever
    assert "known" not in config.to_json()  # the manifest holds settings, not findings


def test_the_returned_counterexample_is_its_files_text_and_replays_with_cowcheck_replay(tmp_path):
    outcome = _first_failure(CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy"))
    path, _ = save(Counterexample.from_json(json.loads(outcome.counterexample)), tmp_path)
    assert path.read_text() == outcome.counterexample  # one rendering, carried as it is to the file
    assert outcome.shrunk_steps == len(json.loads(outcome.counterexample)["steps"])
    out = io.StringIO()
    assert main(["replay", str(path)], out, io.StringIO()) == 1
    assert "reproduces" in out.getvalue()


def test_sampled_invariants_store_the_failure_full_checks_would_store():
    full = _first_failure(CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy", invariants_every=1))
    sampled = run_seed(full.seed, CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy", invariants_every=25))
    sampled_cx, full_cx = json.loads(sampled.counterexample), json.loads(full.counterexample)
    assert sampled_cx["checks"] == {"white_box": True, "strict_live_iteration": False}
    assert (sampled.signature, sampled_cx["steps"]) == (full.signature, full_cx["steps"])


def test_black_box_config_checks_the_model_properties_only():
    outcome = _first_failure(CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy", white_box=False))
    assert outcome.kind == "DIVERGENCE"
    assert json.loads(outcome.counterexample)["checks"]["white_box"] is False
    assert outcome.coverage.keys() <= {"release-oldest-of-2", "release-newest-of-2", "release-oldest-of-3",
                                       "release-middle-of-3", "release-newest-of-3",
                                       "mutate-returned-under-snapshot", "transform-under-snapshot"}


def test_the_hypothesis_executor_runs_the_map_machine_from_the_seed():
    config = CampaignConfig(impl="mutant:skip-prefix-copy", executor="hypothesis", steps=60, examples=20)
    outcome = _first_failure(config, range(10))
    assert json.loads(outcome.counterexample)["found_by"]["generator"] == "hypothesis"
    assert run_seed(outcome.seed, config) == outcome
    passed = run_seed(0, attrs.evolve(config, impl="reference", examples=3))
    assert (passed.kind, passed.ops > 0, sum(passed.op_mix.values())) == ("PASS", True, passed.ops)


def test_the_hypothesis_executor_runs_any_machines_state_machine():
    config = CampaignConfig(impl="mutant:checkpoint-wrong-offsets", machine="checkpoint", executor="hypothesis",
                            steps=40, examples=10, capacity=0)
    outcome = run_seed(0, config)
    cx = json.loads(outcome.counterexample)
    assert (outcome.kind, cx["machine"], cx["found_by"]["generator"]) == ("DIVERGENCE", "checkpoint", "hypothesis")
    assert outcome.code in catalogue()["checkpoint-wrong-offsets"].expected_codes
    assert run_seed(0, config) == outcome


def test_outcomes_round_trip_through_json():
    outcome = _first_failure(CampaignConfig(sizes="medium", impl="mutant:get-versions-lte"))
    assert Outcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome


def test_a_walk_over_its_time_limit_is_a_timeout_outcome():
    outcome = run_seed(3, CampaignConfig(steps=10**9, seed_time_limit=0.2))
    assert (outcome.kind, outcome.code, outcome.counterexample) == ("TIMEOUT", "time-limit", None)
    assert outcome.ops > 64


_OUTCOMES = textwrap.dedent("""
    import json, sys
    from cowcheck.spark_fuzz import CampaignConfig, run_seed
    out = []
    for impl, executor, seed in [("reference", "raw", 11), ("mutant:skip-prefix-copy", "raw", 0),
                                 ("mutant:remove-without-prev-copy", "raw", 4),
                                 ("mutant:skip-prefix-copy", "hypothesis", 1)]:
        o = run_seed(seed, CampaignConfig(impl=impl, executor=executor, steps=60, examples=5))
        d = o.to_json(); d.pop("seconds")
        out.append(d)
    print(json.dumps(out, sort_keys=True))
""")


def test_same_seed_same_outcome_in_two_processes_with_different_hash_seeds(tmp_path):
    runs = []
    for hashseed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed, HYPOTHESIS_STORAGE_DIRECTORY=str(tmp_path / hashseed))
        done = subprocess.run([sys.executable, "-c", _OUTCOMES], env=env, capture_output=True, text=True,
                              check=True, cwd=tmp_path)
        runs.append(done.stdout)
    first = json.loads(runs[0])
    assert runs[0] == runs[1]
    assert first[0]["kind"] == "PASS"
    assert all(o["counterexample"] for o in first[1:] if o["kind"] != "PASS")


# ---------------------------------------------------------------- ranges


def test_a_range_runs_each_seed_once_in_order():
    result = run_range(5, 9, CampaignConfig(steps=30))
    assert [o.seed for o in result.outcomes] == [5, 6, 7, 8]
    assert result.ops == sum(o.ops for o in result.outcomes)
    assert result.started <= result.finished


def test_a_seed_that_kills_its_process_is_a_crash_outcome_and_the_range_goes_on():
    start, stop, expected = window()  # several crashing seeds, and passing seeds between them
    result = run_range(start, stop, CampaignConfig(impl="faults:exits_on_77", sizes=SIZES))
    crashed = [(o.seed, o.kind, o.code) for o in result.failures]
    assert [o.seed for o in result.outcomes] == list(range(start, stop))
    assert crashed == [(seed, "CRASH", "worker-exit") for seed in expected]
    assert "exit code 3" in result.failures[0].message
    assert result.kinds()["PASS"] == 40 - len(expected)


def test_a_seeds_time_limit_charges_the_implementations_own_time_never_cowchecks_checking(monkeypatch):
    # Issue 34: on a loaded machine a walk's wall time, the suite's own checking most of it, ran past the
    # seed's time limit and was the implementation's TIMEOUT. Here the checking is slow on purpose: 130 steps
    # of 5 ms each are 0.65 s, three times the limit, and the reference's own calls a small part of it.
    import time

    from cowcheck.core.limits import limited
    from cowcheck.map.harness import Harness

    check = Harness.check_size

    def slow_check(self, step):
        time.sleep(0.005)
        return check(self, step)

    monkeypatch.setattr(Harness, "check_size", slow_check)
    config = CampaignConfig(sizes="tiny", steps=130, seed_time_limit=0.2)
    with limited(config.step_time_limit, paced=True):
        outcome = run_seed(3, config)
    assert (outcome.kind, outcome.seconds > 0.65) == ("PASS", True)


def test_a_seed_that_hangs_inside_an_operation_is_killed_and_is_a_timeout_outcome():
    # The hang is the step time limit's to find (the seeds around it pass, on a loaded machine too: a
    # seed's wall time is not charged to the map, and its process is killed only without progress).
    start, stop, seed = lone_trigger()
    result = run_range(start, stop, CampaignConfig(impl="faults:hangs_on_77", sizes=SIZES, step_time_limit=1.0))
    assert [(o.seed, o.kind, o.code) for o in result.failures] == [(seed, "TIMEOUT", "time-limit")]
    assert [o.kind for o in result.outcomes] == ["TIMEOUT" if s == seed else "PASS" for s in range(start, stop)]


def test_an_introspection_that_raises_is_a_crash_of_its_step_with_a_replayable_counterexample():
    start, stop, seed = lone_trigger(width=2)
    result = run_range(start, stop, CampaignConfig(impl="faults:introspection_raises_on_77", sizes=SIZES,
                                                   in_process=True),  # white-box: its view is read in-process
                       isolate=False)
    assert [(o.seed, o.kind, o.code) for o in result.outcomes] == [(start, "PASS", ""), (seed, "CRASH", "P7")]
    assert "RuntimeError: white-box view lost" in result.outcomes[1].message
    assert json.loads(result.outcomes[1].counterexample)["failure"]["code"] == "P7"


def test_an_exception_escaping_run_seed_is_cowchecks_internal_outcome_not_a_failure():
    outcome = guarded_run_seed(4, CampaignConfig(impl="no_such_module:factory"))
    assert (outcome.seed, outcome.kind, outcome.code) == (4, "INTERNAL", "internal")
    assert not outcome.failed and outcome.internal
    assert "UnknownImplementationError" in outcome.message and "Traceback" in outcome.details


def test_an_error_of_cowchecks_own_code_in_a_walk_is_an_internal_outcome_counted_apart(monkeypatch):
    from cowcheck.map.harness import Harness

    def broken(self, step):
        raise KeyError("a bug in cowcheck")

    monkeypatch.setattr(Harness, "check_size", broken)
    result = run_range(0, 2, CampaignConfig(steps=5), isolate=False)
    assert [(o.kind, o.code) for o in result.outcomes] == [("INTERNAL", "internal")] * 2
    assert result.failures == [] and len(result.internal) == 2
    assert result.runs_row(CampaignConfig())["internal"] == 2
    assert "KeyError" in result.outcomes[0].message and "a bug in cowcheck" in result.outcomes[0].details


def test_config_rejects_unknown_executors_and_non_positive_settings():
    with pytest.raises(ValueError):
        CampaignConfig(executor="quickcheck")
    with pytest.raises(ValueError, match="invariants_every must be > 0"):
        CampaignConfig(invariants_every=0)


def test_a_worker_process_resolves_flink_without_the_command_line_having_imported_it():
    # Spark's Python workers import only spark_fuzz: the executor itself must register --impl flink.
    script = textwrap.dedent("""
        import sys
        from cowcheck.spark_fuzz import CampaignConfig, run_seed
        assert "cowcheck.cli" not in sys.modules
        outcome = run_seed(0, CampaignConfig(impl="flink", capacity=128, steps=50))
        print(outcome.kind, outcome.code, outcome.message)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("PASS"), done.stdout


def test_a_range_shrinks_a_signature_once_and_counts_its_later_seeds():
    config = CampaignConfig(impl="mutant:skip-prefix-copy", steps=150, sizes="small")
    for isolate in (False, True):
        result = run_range(0, 12, config, isolate=isolate)
        failing = [o for o in result.outcomes if o.failed]
        assert len({o.signature for o in failing}) < len(failing), "the test needs a signature found twice"
        for signature in {o.signature for o in failing}:
            same = [o for o in failing if o.signature == signature]
            assert same[0].counterexample is not None, isolate
            assert all(o.counterexample is None for o in same[1:]), isolate


def test_a_campaign_deadline_cuts_shrinking_short_but_keeps_the_failure():
    import time

    config = CampaignConfig(sizes="medium", impl="mutant:skip-prefix-copy")
    first = _first_failure(config)
    late = run_seed(first.seed, attrs.evolve(config, deadline=time.time() - 60))
    assert (late.kind, late.code) == (first.kind, first.code) and late.counterexample is not None
    assert "deadline" not in config.to_json()
