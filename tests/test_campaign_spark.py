"""Campaigns on a real local Spark (local[2]), one SparkContext for the whole test session.

The verdicts are the pure executor's (tests/test_campaign_executor.py); these
tests check what Spark adds: spreading and gathering, Parquet output,
deduplication, faults, interruption and resume, the command line.
"""

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from fault_seeds import SIZES, lone_trigger, window

from cowcheck.cli import main
from cowcheck.spark_fuzz.driver import run_campaign
from cowcheck.spark_fuzz.executor import CampaignConfig
from cowcheck.spark_fuzz.store import CampaignStore

ROOT = Path(__file__).resolve().parent.parent
MUTANT = CampaignConfig(impl="mutant:skip-prefix-copy", steps=150, sizes="small")
SEEDS = (0, 24)


@pytest.fixture(scope="session")
def spark():
    from cowcheck.spark_fuzz.session import start

    sc, _ = start("local[2]")
    yield sc
    sc.stop()


@pytest.fixture(scope="module")
def mutant_campaign(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("mutant") / "campaign"
    return run_campaign(spark, MUTANT, out, seeds=SEEDS, partitions=6, meta={"master": spark.master})


def _seeds_covered(runs):
    return sorted(seed for row in runs for seed in range(row["range_start"], row["range_stop"]))


def test_a_campaign_against_a_seeded_bug_finds_it_and_writes_a_replayable_counterexample(mutant_campaign):
    out = Path(mutant_campaign.out)
    files = sorted(out.glob("counterexamples/*.json"))
    assert mutant_campaign.distinct
    assert {row["signature"].split("--")[1] for row in mutant_campaign.distinct} == {"INVARIANT-I9"}
    assert [p.stem for p in files] == [row["signature"] for row in mutant_campaign.distinct]
    cowcheck = Path(sys.executable).with_name("cowcheck")  # the console script next to this interpreter
    command = [str(cowcheck)] if cowcheck.exists() else [sys.executable, "-m", "cowcheck"]
    replayed = subprocess.run(command + ["replay", str(files[0])], capture_output=True, text=True, check=False)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "reproduces" in replayed.stdout


def test_every_seed_gets_exactly_one_runs_row_and_the_tables_read_as_parquet(mutant_campaign):
    runs = pd.read_parquet(Path(mutant_campaign.out) / "runs")
    failures = pd.read_parquet(Path(mutant_campaign.out) / "failures")
    assert _seeds_covered(mutant_campaign.runs) == list(range(*SEEDS))
    assert int(runs["seeds"].sum()) == SEEDS[1] - SEEDS[0]
    assert int(runs[["passed", "divergence", "invariant", "crash", "timeout", "internal"]].sum().sum()) == \
        SEEDS[1] - SEEDS[0]
    assert len(failures) == int(runs["invariant"].sum()) == len(mutant_campaign.failures)
    assert set(failures["kind"]) == {"INVARIANT"}
    assert list(Path(mutant_campaign.out).rglob(".*.tmp")) == []  # no temporary file left behind


def test_failures_are_deduplicated_by_signature_keeping_the_shortest_program(mutant_campaign):
    for row in mutant_campaign.distinct:
        same = [f for f in mutant_campaign.failures if f["signature"] == row["signature"]]
        shortest = min(f["shrunk_steps"] for f in same if f["shrunk_steps"] is not None)
        assert (row["occurrences"], row["shrunk_steps"]) == (len(same), shortest)


def test_the_report_lists_the_failures_with_replay_commands_and_the_coverage(mutant_campaign):
    out = Path(mutant_campaign.out)
    markdown = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for row in mutant_campaign.distinct:
        assert f"cowcheck replay {out / 'counterexamples' / row['signature']}.json --trace" in markdown
        assert row["signature"] in html
    assert "Scenario coverage (docs/contract.md §13)" in markdown
    assert all((out / "plots" / name).stat().st_size > 1000 for name in ("throughput.png", "op_mix.png",
                                                                        "coverage.png"))


def test_the_reference_passes_a_campaign(spark, tmp_path):
    result = run_campaign(spark, CampaignConfig(steps=150, sizes="small"), tmp_path / "ref", seeds=(0, 40), partitions=4)
    assert (result.failures, result.distinct, result.seeds) == ([], [], 40)
    assert list((tmp_path / "ref" / "counterexamples").iterdir()) == []
    assert "None: every seed passed." in (tmp_path / "ref" / "report.md").read_text()


def test_resume_after_an_interrupted_run_loses_nothing(spark, tmp_path, mutant_campaign):
    out = tmp_path / "interrupted"
    batches = []

    def interrupt(state):
        batches.append(state.seeds)
        if len(batches) == 1:
            raise KeyboardInterrupt  # as Ctrl-C would, while the job runs

    with pytest.raises(KeyboardInterrupt):
        run_campaign(spark, MUTANT, out, seeds=SEEDS, partitions=6, on_batch=interrupt)
    store = CampaignStore(out)
    kept = {p.name: p.read_text() for p in (out / "counterexamples").glob("*.json")}
    half_done = _seeds_covered(store.runs())
    assert 0 < len(half_done) < SEEDS[1] - SEEDS[0] and kept
    (out / "runs" / ".part-torn.parquet.1a2b.tmp").write_bytes(b"PAR1 half a file")  # a write cut short

    resumed = run_campaign(spark, MUTANT, out, seeds=SEEDS, partitions=6, resume=True)
    assert _seeds_covered(resumed.runs) == list(range(*SEEDS))
    assert set(kept) <= {p.name for p in (out / "counterexamples").glob("*.json")}
    assert sorted((f["seed"], f["signature"]) for f in resumed.failures) == \
        sorted((f["seed"], f["signature"]) for f in mutant_campaign.failures)
    assert [(r["signature"], r["shrunk_steps"]) for r in resumed.distinct] == \
        [(r["signature"], r["shrunk_steps"]) for r in mutant_campaign.distinct]


def test_an_implementation_that_raises_is_reported_not_fatal(spark, tmp_path):
    config = CampaignConfig(impl="faults:introspection_raises_on_77", sizes=SIZES, steps=300,
                            in_process=True)  # white-box: its view is read in-process
    start, stop, expected = window()
    result = run_campaign(spark, config, tmp_path / "raises", seeds=(start, stop), partitions=4)
    assert [(f["seed"], f["kind"], f["code"]) for f in sorted(result.failures, key=lambda f: f["seed"])] == \
        [(seed, "CRASH", "P7") for seed in expected]
    assert result.seeds == 40 and sum(r["passed"] for r in result.runs) == 40 - len(expected)
    assert [r["signature"] for r in result.distinct] == ["faults-introspection_raises_on_77--CRASH-P7"]
    assert result.internal == []


def test_a_seed_that_kills_its_process_is_a_crash_row_and_the_campaign_goes_on(spark, tmp_path):
    config = CampaignConfig(impl="faults:exits_on_77", sizes=SIZES, steps=300)
    start, stop, seed = lone_trigger(width=16)
    result = run_campaign(spark, config, tmp_path / "exits", seeds=(start, stop), partitions=4)
    assert sorted((f["seed"], f["code"]) for f in result.failures) == [(seed, "worker-exit")]
    assert _seeds_covered(result.runs) == list(range(start, stop))


def test_without_isolation_a_dying_python_worker_costs_a_retry_not_the_campaign(spark, tmp_path):
    # neither the map in a process of its own nor the seed range in a child: Spark's worker dies
    config = CampaignConfig(impl="faults:exits_on_77", sizes=SIZES, steps=300, in_process=True)
    start, stop, seed = lone_trigger()
    result = run_campaign(spark, config, tmp_path / "no-isolation", seeds=(start, stop), partitions=2,
                          isolate=False)
    assert [(f["seed"], f["code"]) for f in result.failures] == [(seed, "spark-task-failed")]
    assert "Python worker exited unexpectedly" in result.failures[0]["message"]
    assert _seeds_covered(result.runs) == list(range(start, stop))


def test_a_seed_that_hangs_is_killed_and_is_a_timeout_row(spark, tmp_path):
    config = CampaignConfig(impl="faults:hangs_on_77", sizes=SIZES, steps=300, seed_time_limit=1.0, step_time_limit=1.0)
    start, stop, seed = lone_trigger()
    result = run_campaign(spark, config, tmp_path / "hangs", seeds=(start, stop), partitions=2)
    assert [(f["seed"], f["kind"], f["code"]) for f in result.failures] == [(seed, "TIMEOUT", "time-limit")]


def test_a_campaign_by_minutes_runs_rounds_of_consecutive_seeds(spark, tmp_path):
    result = run_campaign(spark, CampaignConfig(steps=100, sizes="small"), tmp_path / "minutes", minutes=0.12, partitions=2)
    rounds = {row["round"] for row in result.runs}
    assert len(rounds) >= 2
    assert _seeds_covered(result.runs) == list(range(result.seeds))


def test_the_hypothesis_executor_runs_on_spark_too(spark, tmp_path):
    config = CampaignConfig(impl="mutant:skip-prefix-copy", executor="hypothesis", steps=60, examples=20)
    result = run_campaign(spark, config, tmp_path / "hypothesis", seeds=(0, 4), partitions=2)
    assert result.distinct
    assert {r["executor"] for r in result.runs} == {"hypothesis"}


def test_the_cli_runs_resumes_and_refuses_to_overwrite_a_campaign(spark, tmp_path):
    out = tmp_path / "cli"
    args = ["campaign", "--impl", "mutant:skip-prefix-copy", "--master", "local[2]", "--seeds", "0:8", "--sizes",
            "small", "--partitions", "2", "--steps", "150", "--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(args, stdout, stderr) == 1
    assert "cowcheck replay" in stdout.getvalue() and "report:" in stdout.getvalue()
    assert "tasks 2/2" in stderr.getvalue()
    again = io.StringIO()
    assert main(args, again, io.StringIO()) == 2
    assert main(args + ["--resume"], io.StringIO(), io.StringIO()) == 1
    assert _seeds_covered(CampaignStore(out).runs()) == list(range(8))
    changed = io.StringIO()
    assert main(args[:-4] + ["--steps", "99", "--out", str(out), "--resume"], io.StringIO(), changed) == 2
    assert "steps: 150 -> 99" in changed.getvalue()


def _figure(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    assert found, text[-2000:]
    return found.group(1)


def test_stdout_and_the_reports_print_one_throughput_figure_and_a_resumed_run_its_own(spark, tmp_path):
    out = tmp_path / "figures"
    args = ["campaign", "--impl", "reference", "--master", "local[2]", "--sizes", "small", "--partitions", "2",
            "--steps", "150", "--out", str(out)]
    first = io.StringIO()
    assert main(args + ["--seeds", "0:6"], first, io.StringIO()) == 0
    shown = _figure(first.getvalue(), r"running: ([\d,]+) checked ops/s \(as in report.md\)")
    assert f"| checked ops/s * | {shown} |" in (out / "report.md").read_text()
    assert f"<td>{shown}</td>" in (out / "report.html").read_text()
    resumed = io.StringIO()
    assert main(args + ["--seeds", "0:10", "--resume"], resumed, io.StringIO()) == 0
    text = resumed.getvalue()
    assert re.search(r"this run: 4 seeds, [\d,]+ checked ops in [\d.]+ s of ranges running", text), text
    campaign = _figure(text, r"the campaign: 10 seeds, .*: ([\d,]+) checked ops/s \(as in report.md\)")
    assert f"| checked ops/s * | {campaign} |" in (out / "report.md").read_text()


def test_stop_after_n_distinct_failures_stops_and_resume_does_the_rest(spark, tmp_path):
    out = tmp_path / "stop"
    args = ["campaign", "--impl", "mutant:skip-prefix-copy", "--master", "local[2]", "--sizes", "small",
            "--steps", "150", "--seeds", "0:40", "--partitions", "8", "--out", str(out)]
    stdout = io.StringIO()
    assert main(args + ["--stop-after", "1"], stdout, io.StringIO()) == 1
    assert "(--stop-after 1); continue with --resume" in stdout.getvalue()
    assert CampaignStore(out).failures()
    assert main(args + ["--resume"], io.StringIO(), io.StringIO()) == 1
    assert _seeds_covered(CampaignStore(out).runs()) == list(range(40))


def test_ctrl_c_ends_a_campaign_with_the_resume_line_and_no_traceback(tmp_path):
    out = tmp_path / "interrupted"
    command = [sys.executable, "-m", "cowcheck.cli", "campaign", "--impl", "reference", "--master", "local[2]",
               "--minutes", "2", "--out", str(out)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    began = time.monotonic()
    while time.monotonic() - began < 60 and not list(out.glob("runs/*.parquet")):
        time.sleep(0.5)  # until a range has finished: Spark is running tasks
    os.killpg(child.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert "continue with --resume" in stdout
    assert "Traceback" not in stderr and "WARN" not in stderr, stderr[-3000:]


def test_a_counterexample_replays_to_the_same_trace_byte_for_byte_on_a_spark_executor(spark):
    from cowcheck.registry import trace

    stored = sorted(str(p) for p in (Path(__file__).parent / "regressions" / "counterexamples").glob("*.json"))
    on_driver = [trace(path) for path in stored]
    on_executors = spark.parallelize(stored, 2).map(trace).collect()
    assert on_executors == on_driver
    assert all("FAILS:" in trace for trace in on_driver)


def test_the_jvms_stderr_reaches_ours_without_the_incubator_module_notice(tmp_path):
    """In a fresh process (one JVM per process): what the JVM writes to stderr
    is passed on, the start-up notice about jdk.incubator.vector is not."""
    script = (
        "from cowcheck.spark_fuzz.session import start\n"
        "sc, _ = start('local[1]')\n"
        "sc._jvm.System.err.println('a line from the JVM')\n"
        "assert sc.parallelize([1, 2], 1).map(lambda x: x * 2).collect() == [2, 4]\n"
        "sc.stop()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "a line from the JVM" in done.stderr
    assert "incubator" not in done.stderr and "WARNING" not in done.stderr, done.stderr


@pytest.mark.parametrize("machine, mutant", [("async", "mutant:async-key-not-released"),
                                             ("checkpoint", "mutant:checkpoint-wrong-offsets"),
                                             ("table", "mutant:table-set-meta-info-keeps-copier"),
                                             ("backend", "mutant:backend-list-update-empty-keeps-entry")])
def test_every_machine_runs_in_campaigns_passing_its_reference_and_storing_its_mutants_failures(
        spark, tmp_path, machine, mutant):
    base = ["campaign", "--machine", machine, "--master", "local[2]", "--seeds", "0:24", "--partitions", "4"]
    passed = io.StringIO()
    assert main(base + ["--out", str(tmp_path / "reference")], passed, io.StringIO()) == 0, passed.getvalue()
    assert f"{machine} machine" in passed.getvalue() and "no failures" in passed.getvalue()
    failed = io.StringIO()
    assert main(base + ["--impl", mutant, "--out", str(tmp_path / "mutant")], failed, io.StringIO()) == 1
    stored = sorted((tmp_path / "mutant" / "counterexamples").glob("*.json"))
    assert stored, failed.getvalue()
    for path in stored:  # each replays on its own, to the failure it was stored for
        cx = json.loads(path.read_text())
        assert cx["machine"] == machine
        replayed = io.StringIO()
        assert main(["replay", str(path)], replayed, io.StringIO()) == 1, replayed.getvalue()
    report = (tmp_path / "mutant" / "report.md").read_text()
    assert "## Distinct failures" in report and "```python" in report


@pytest.mark.parametrize("machine, impl, verdict", [("table", "flink@1.13.6", 1), ("async", "flink@2.0.0", 0)])
def test_a_campaign_of_another_machine_on_a_flink_release_runs_under_spark_submit(tmp_path, machine, impl, verdict):
    """As on a cluster: spark-submit runs the campaign's entry point (its master and settings stand);
    each worker starts its own JVM of that release. Flink 1.13.6's table breaks T2 (FLINK-26853)."""
    run = subprocess.run(["spark-submit", "--master", "local[2]", str(ROOT / "spark_fuzz" / "__main__.py"),
                          "--machine", machine, "--impl", impl, "--seeds", "0:4", "--out", str(tmp_path / "c")],
                         capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=1200)
    assert run.returncode == verdict, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"{machine} machine" in run.stdout and f"Apache Flink {impl.partition('@')[2]}" in run.stdout
    runs = CampaignStore(tmp_path / "c").runs()
    assert sum(r["seeds"] for r in runs) == 4 and all(r["ops"] for r in runs) and not any(r["internal"] for r in runs)
    stored = sorted((tmp_path / "c" / "counterexamples").glob("*.json"))
    assert bool(stored) == bool(verdict)
    for path in stored:  # each replays on that release (a JVM of its own), to the failure it was stored for
        assert json.loads(path.read_text())["failure"]["code"] == "T2"
        replayed = subprocess.run([sys.executable, "-m", "cowcheck.cli", "replay", str(path)], capture_output=True,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
        assert replayed.returncode == 1 and "reproduces" in replayed.stdout, replayed.stdout + replayed.stderr


def test_map_options_given_to_another_machines_campaign_are_bad_usage(tmp_path):
    stderr = io.StringIO()
    assert main(["campaign", "--machine", "async", "--capacity", "8", "--seeds", "0:4", "--out",
                 str(tmp_path / "x")], io.StringIO(), stderr) == 2
    assert "--capacity applies to campaigns of the map machine" in stderr.getvalue()
    assert not (tmp_path / "x").exists()
