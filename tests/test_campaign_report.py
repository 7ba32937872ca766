"""Campaign rows to reports, the campaign directory, seed planning and dedupe: all without Spark."""

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cowcheck.core.contract import pointer
from cowcheck.spark_fuzz.driver import distinct_failures, missing_ranges, plan_ranges, prefer
from cowcheck.spark_fuzz.executor import CampaignConfig
from cowcheck.spark_fuzz.ranges import run_range
from cowcheck.spark_fuzz.report import (HEADLINE, HEADLINE_DEFINITION, PLOTS, busy_seconds, headline, program_of, render_html,
                               render_markdown, replay_command, saturation, summarise, throughput_segments, totals,
                               write_report)
from cowcheck.spark_fuzz.store import CampaignStore, CampaignStoreError

ROOT = Path(__file__).resolve().parent.parent
CONFIG = CampaignConfig(impl="mutant:skip-prefix-copy", steps=120, sizes="small")


def _run(start, stop, host="h", pid=1, started=100.0, finished=110.0, ops=1000, **kinds):
    row = {"range_start": start, "range_stop": stop, "seeds": stop - start, "ops": ops, "seconds": finished - started,
           "started": started, "finished": finished, "host": host, "pid": pid, "round": 1,
           "passed": stop - start, "divergence": 0, "invariant": 0, "crash": 0, "timeout": 0, "internal": 0,
           "coverage": {"put-empty-bucket": 3}, "op_mix": {"put": ops}, "findings": {}, "impl": "reference",
           "executor": "raw"}
    row.update(kinds)
    return row


def _failure(seed, signature="impl--INVARIANT-I9", steps=4, cx=True):
    return {"signature": signature, "kind": "INVARIANT", "code": "I9", "seed": seed, "range_start": 0,
            "range_stop": 10, "message": "m", "failing_op": "put", "ops": 50, "original_steps": 50,
            "shrunk_steps": steps if cx else None, "steps_json": "[]" if cx else None,
            "counterexample_json": json.dumps({"signature": signature}) if cx else None, "impl": "mutant:x",
            "executor": "raw"}


@pytest.fixture(scope="module")
def found():
    result = run_range(0, 6, CONFIG, isolate=False)
    return [result.runs_row(CONFIG, 1)], result.failure_rows(CONFIG)


# ----------------------------------------------------------------- planning


def test_missing_ranges_are_the_gaps_between_finished_ranges():
    assert missing_ranges(0, 10, []) == [(0, 10)]
    assert missing_ranges(0, 10, [(0, 10)]) == []
    assert missing_ranges(5, 20, [(0, 6), (8, 9), (18, 30)]) == [(6, 8), (9, 18)]


def test_plan_ranges_spreads_seeds_evenly_and_caps_the_range_size():
    assert plan_ranges([(0, 8)], 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert plan_ranges([(0, 3), (10, 12)], 2) == [(0, 3), (10, 12)]
    assert len(plan_ranges([(0, 10_000)], 4)) == 40
    assert plan_ranges([], 4) == []


# ------------------------------------------------------------------- dedupe


def test_prefer_keeps_the_shorter_program_then_the_lower_seed_and_adds_up_occurrences():
    assert prefer((_failure(5, steps=4), 2), (_failure(3, steps=6), 1)) == (_failure(5, steps=4), 3)
    assert prefer((_failure(5), 1), (_failure(3), 1))[0]["seed"] == 3
    assert prefer((_failure(1, cx=False), 1), (_failure(9), 1))[0]["seed"] == 9
    flaky = dict(_failure(9, steps=2), nondeterministic="reproduced 3 of 10 replays")
    assert prefer((_failure(1, cx=False), 1), (flaky, 1))[0]["seed"] == 9  # a known bug's repeat never wins


def test_distinct_failures_are_one_row_per_signature_with_occurrences():
    rows = [_failure(4), _failure(2, steps=7), _failure(8, signature="impl--CRASH-worker-exit", cx=False)]
    distinct = distinct_failures(rows)
    assert [(r["signature"], r["seed"], r["occurrences"]) for r in distinct] == \
        [("impl--CRASH-worker-exit", 8, 1), ("impl--INVARIANT-I9", 4, 2)]


# -------------------------------------------------------------------- store


def test_the_store_round_trips_runs_and_failures_through_parquet(tmp_path, found):
    runs, failures = found
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    store.append(runs, failures)
    assert store.runs() == runs
    assert store.failures() == failures
    assert store.completed_seeds() == [(0, 6)]
    assert pq.read_table(tmp_path / "c" / "runs").num_rows == 1


def test_failure_rows_without_a_runs_row_do_not_count(tmp_path, found):
    runs, failures = found
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    store.append([], failures)  # killed between the two renames
    assert (store.runs(), store.failures()) == ([], [])
    store.append(runs, failures)  # the range ran again on --resume
    assert store.failures() == failures


def test_leftovers_of_an_interrupted_write_are_ignored(tmp_path, found):
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    (store.runs_dir / ".part-x.parquet.1a2b.tmp").write_bytes(b"PAR1 torn")
    store.append(*found)
    assert len(store.runs()) == 1


def test_a_campaign_directory_is_neither_overwritten_nor_resumed_with_other_settings(tmp_path):
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    with pytest.raises(CampaignStoreError, match="already holds a campaign"):
        store.begin(CONFIG.to_json(), resume=False)
    with pytest.raises(CampaignStoreError, match=r"steps: 120 -> 99"):
        store.begin(CampaignConfig(impl=CONFIG.impl, steps=99, sizes="small").to_json(), resume=True)
    store.begin(CONFIG.to_json(), resume=True)


def test_counterexamples_are_stored_under_their_signature_as_the_text_their_row_carries(tmp_path, found):
    _, failures = found
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    row = next(r for r in failures if r["counterexample_json"])
    path = store.put_counterexample(row["signature"], row["counterexample_json"])
    assert (path.name, path.read_text()) == (f"{row['signature']}.json", row["counterexample_json"])
    written = path.stat().st_mtime_ns, path.stat().st_ino
    assert store.put_counterexample(row["signature"], row["counterexample_json"]) == path
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == written  # the same text: not written again


def test_a_version_3_campaign_resumes_its_rows_read_as_version_4_ones(tmp_path, found):
    """Version 3 parts carry steps_json and compact counterexample JSON: read, the counterexample
    is the text its file was written with; resumed, the manifest says version 4. A manifest written
    before a setting existed (machine) resumes with that setting's default."""
    import pyarrow as pa

    from cowcheck.spark_fuzz.store import FAILURES_SCHEMA

    runs, failures = found
    store = CampaignStore(tmp_path / "c")
    store.begin(CONFIG.to_json(), resume=False)
    old_schema = pa.schema(list(FAILURES_SCHEMA) + [pa.field("steps_json", pa.string())])
    old_rows = [dict(r, counterexample_json=json.dumps(json.loads(r["counterexample_json"]))
                     if r["counterexample_json"] else None,
                     steps_json=json.dumps(json.loads(r["counterexample_json"])["steps"])
                     if r["counterexample_json"] else None) for r in failures]
    store._write_part(store.failures_dir, "part-old.parquet", old_rows, old_schema)
    store.append(runs, [])
    manifest = json.loads(store.manifest_path.read_text())
    older = {k: v for k, v in manifest["config"].items() if k != "machine"}
    store.manifest_path.write_text(json.dumps(dict(manifest, format_version=3, config=older)))
    store.close()
    with pytest.raises(CampaignStoreError, match="machine: None -> 'map'"):
        CampaignStore(tmp_path / "c").begin(CONFIG.to_json(), resume=True)  # (without the defaults)
    resumed = CampaignStore(tmp_path / "c", defaults=CampaignConfig().to_json())
    resumed.begin(CONFIG.to_json(), resume=True)
    assert resumed.failures() == failures
    assert json.loads(resumed.manifest_path.read_text()) == dict(manifest, format_version=4)


# ------------------------------------------------------------------- report


def test_busy_seconds_counts_overlapping_ranges_once_and_pauses_not_at_all():
    assert busy_seconds([_run(0, 1, started=0, finished=10), _run(1, 2, started=5, finished=12),
                         _run(2, 3, started=100, finished=101)]) == 13.0
    assert busy_seconds([]) == 0.0


def test_throughput_segments_are_one_per_range_relative_to_the_first_start():
    segments = throughput_segments([_run(0, 5, pid=7, started=50, finished=52, ops=400),
                                    _run(5, 9, pid=8, started=51, finished=55, ops=400)])
    assert segments == [("h:7", 0.0, 2.0, 200.0), ("h:8", 1.0, 5.0, 100.0)]


def test_summary_adds_up_seeds_ops_and_outcome_kinds():
    s = summarise([_run(0, 5, ops=100), _run(5, 9, ops=50, passed=3, invariant=1)], [_failure(7)],
                  [_failure(7)], "reference", "raw")
    assert (s.seeds, s.ranges, s.ops, s.failures, s.distinct) == (9, 2, 150, 1, 1)
    assert s.kinds == {"passed": 8, "divergence": 0, "invariant": 1, "crash": 0, "timeout": 0, "internal": 0}
    assert s.ops_per_second == 15.0


def test_totals_sum_a_map_column():
    assert totals([_run(0, 1), _run(1, 2)], "coverage") == {"put-empty-bucket": 6}


def test_replay_command_is_cowcheck_replay_or_a_one_seed_campaign():
    assert replay_command("out", _failure(3)) == "cowcheck replay out/counterexamples/impl--INVARIANT-I9.json --trace"
    assert replay_command("out", _failure(3, cx=False)) == \
        "cowcheck campaign --impl mutant:x --executor raw --seeds 3:4 --out out/seed-3"
    assert replay_command("out", _failure(3, cx=False), "async") == \
        "cowcheck campaign --machine async --impl mutant:x --executor raw --seeds 3:4 --out out/seed-3"


def test_the_markdown_report_has_the_summary_failures_coverage_and_plots(found):
    runs, failures = found
    distinct = distinct_failures(failures)
    text = render_markdown("DIR", runs, failures, distinct, CONFIG.impl, "raw", {"master": "local[2]"})
    assert "| seeds | 6 in 1 ranges |" in text
    assert f"`cowcheck replay DIR/counterexamples/{distinct[0]['signature']}.json --trace`" in text
    assert "## Scenario coverage (docs/contract.md §13):" in text
    assert "![Throughput per partition over time](plots/throughput.png)" in text
    assert all(pointer(row["code"]) in text for row in distinct)


def test_the_html_report_escapes_what_it_shows():
    failure = dict(_failure(1), signature="<script>")
    text = render_html("DIR", [_run(0, 2)], [failure], [dict(failure, occurrences=1)], "a<b", "raw", {})
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "<img src='data:image/png;base64," not in text  # (no plots written: render_html alone)
    assert html.escape(pointer(failure["code"])) in text


def test_an_empty_campaign_reports_no_failures():
    text = render_markdown("DIR", [], [], [], "reference", "raw", {})
    assert "None: every seed passed." in text
    assert "0/26 reached" in text


def test_write_report_renders_both_reports_and_the_plots(tmp_path, found):
    runs, failures = found
    md, html = write_report(tmp_path, runs, failures, distinct_failures(failures), CONFIG,
                            {"master": "local[2]", "partitions": 4})
    assert md.read_text().startswith("# cowcheck campaign: mutant:skip-prefix-copy")
    assert "</html>" in html.read_text()
    for name in ("saturation", "throughput", "op_mix", "coverage"):
        assert (tmp_path / "plots" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_internal_errors_of_cowcheck_are_counted_apart_from_failures_in_the_report(tmp_path):
    md = render_markdown(tmp_path, [_run(0, 5, passed=4, internal=1)], [], [], "reference", "raw", {})
    assert "| internal errors of cowcheck | 1 seeds (tracebacks in internal-errors/) |" in md
    assert "None: every seed passed." in md  # no failure of the implementation


def test_the_driver_keeps_internal_rows_out_of_the_failures_and_writes_their_tracebacks(tmp_path):
    from cowcheck.spark_fuzz.driver import ProgressLine, _Campaign
    from cowcheck.spark_fuzz.store import CampaignStore

    store = CampaignStore(tmp_path)
    store.begin(CONFIG.to_json(), False)
    campaign = _Campaign(None, CONFIG, store, True, ProgressLine(None), None)
    internal = dict(_failure(3), kind="INTERNAL", code="internal", signature="reference--INTERNAL-internal",
                    counterexample_json=None, message="internal error in cowcheck: KeyError: 'x'",
                    details="Traceback (most recent call last): ...")
    campaign.receive([(_run(0, 5, passed=4, internal=1), [internal])])
    assert (campaign.failures, campaign.internal, campaign.best) == (0, 1, {})
    assert (tmp_path / "internal-errors" / "seed-3.txt").read_text().startswith("internal error in cowcheck")


def test_the_driver_writes_a_signatures_file_when_a_better_row_arrives_and_ends_with_the_choice_of_all(tmp_path):
    from cowcheck.spark_fuzz.driver import ProgressLine, _Campaign
    from cowcheck.spark_fuzz.store import CampaignStore

    store = CampaignStore(tmp_path)
    store.begin(CONFIG.to_json(), False)
    campaign = _Campaign(None, CONFIG, store, True, ProgressLine(None), None)
    written = []
    put = store.put_counterexample
    store.put_counterexample = lambda signature, text: written.append(text) or put(signature, text)

    def row(seed, steps, cx=True):
        return dict(_failure(seed, steps=steps, cx=cx), counterexample_json=f"seed {seed}\n" if cx else None)

    arriving = [row(7, 6), row(9, 6), row(5, 4), row(8, 4), row(2, 9), row(1, 0, cx=False)]
    campaign.receive([(_run(0, 10), arriving)])
    assert written == ["seed 7\n", "seed 5\n"]  # better rows only; a tie goes to the lower seed
    assert (tmp_path / "counterexamples" / "impl--INVARIANT-I9.json").read_text() == "seed 5\n"
    (chosen,) = distinct_failures(arriving)
    assert (chosen["seed"], chosen["occurrences"]) == (5, 6) and campaign.best["impl--INVARIANT-I9"][1] == 6


def test_each_distinct_failure_shows_its_message_program_and_json_in_both_reports(tmp_path, found):
    runs, failures = found
    distinct = distinct_failures(failures)
    md, page = write_report(tmp_path, runs, failures, distinct, CONFIG, {"master": "local[2]", "partitions": 4})
    md, page = md.read_text(), page.read_text()
    for row in distinct:
        assert f"### {row['signature']}" in md and row["message"] in md
        assert f"[counterexamples/{row['signature']}.json](counterexamples/{row['signature']}.json)" in md
        assert html.escape(row["message"]) in page
        assert f"<a href='counterexamples/{row['signature']}.json'>" in page
        program = program_of(row)
        assert program and any("# <-- fails here" in line for line in program)
        assert "\n".join(program) in md and html.escape("\n".join(program)) in page
    assert "## What next" in md and "--to-pytest" in md


def test_the_what_next_regression_test_command_runs_as_written(tmp_path, found):
    # The command the report suggests is pasted into a shell in the campaign's parent directory.
    import shlex

    runs, failures = found
    distinct = distinct_failures(failures)
    out = tmp_path / "camp"
    md, _ = write_report(out, runs, failures, distinct, CONFIG, {"master": "local[2]", "partitions": 4})
    (out / "counterexamples").mkdir()
    (out / "counterexamples" / f"{distinct[0]['signature']}.json").write_text(distinct[0]["counterexample_json"])
    line = next(line for line in md.read_text().splitlines() if "regression test" in line and "--to-pytest" in line)
    command = shlex.split(line.split(": ", 1)[1])
    assert command[0] == "cowcheck"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    run = subprocess.run([sys.executable, "-m", "cowcheck.cli", *command[1:]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert list((tmp_path / "tests" / "regressions").glob("test_*.py"))


def test_a_printed_program_from_the_report_fails_on_its_own_when_pasted(tmp_path, found):
    runs, failures = found
    row = distinct_failures(failures)[0]
    script = tmp_path / "pasted.py"
    script.write_text("\n".join(program_of(row)) + "\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 1 and "AssertionError" in run.stderr, run.stderr[-2000:]


def test_the_html_report_is_one_file_with_its_plots_inline(tmp_path, found):
    runs, failures = found
    _, page = write_report(tmp_path, runs, failures, distinct_failures(failures), CONFIG, {})
    text = page.read_text()
    assert "src='plots/" not in text
    assert text.count("<img src='data:image/png;base64,") == len(PLOTS)


def test_one_throughput_figure_defined_once_is_what_both_reports_show(found):
    runs, failures = found
    distinct = distinct_failures(failures)
    figure = headline(runs).split()[0]
    md = render_markdown("DIR", runs, failures, distinct, CONFIG.impl, "raw", {})
    page = render_html("DIR", runs, failures, distinct, CONFIG.impl, "raw", {})
    assert f"| {HEADLINE} * | {figure} |" in md and f"<td>{figure}</td>" in page
    assert md.count(HEADLINE_DEFINITION) == 1 and page.count(html.escape(HEADLINE_DEFINITION)) == 1
    assert "task-second" not in md + page


def test_saturation_counts_distinct_failures_and_scenarios_when_their_range_finished():
    runs = [_run(0, 10, started=0.0, finished=5.0), _run(10, 20, started=0.0, finished=9.0,
                                                             coverage={"put-empty-bucket": 1, "remove-head": 2})]
    failures = [_failure(3), dict(_failure(4), signature="other"), dict(_failure(12), range_start=10, range_stop=20)]
    assert saturation(runs, failures) == [(5.0, 2, 1), (9.0, 2, 2)]


def test_findings_are_explained_in_the_report():
    md = render_markdown("DIR", [_run(0, 2, findings={"live-iteration-quirk": 3})], [], [], "reference", "raw", {})
    assert "- live-iteration-quirk (3): live iteration repeated or skipped entries" in md
