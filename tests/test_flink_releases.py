"""``--impl flink@VERSION`` (a Flink release fetched on first use, one per process)
and ``cowcheck versions`` (counterexamples replayed on releases, as a matrix).

The releases run here are real: 1.13.6's jar is fetched from the package index
into the per-user cache on first use (about 11 s here), then reused.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cowcheck.core.impls import UnknownImplementationError, resolve
from cowcheck.flink import releases
from cowcheck.flink.versions import NOT_APPLICABLE, PASSES, REPRODUCES, regression_range

ROOT = Path(__file__).resolve().parent.parent


def cowcheck(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})), timeout=900)


@pytest.mark.parametrize("spec, message", [
    ("flink@1.12.0", "outside the releases the bridge supports (1.13.6 to 2.3.0)"),
    ("flink@latest", "a Flink release is MAJOR.MINOR.PATCH"),
    ("flink:fast", "use 'flink' or 'flink@VERSION'"),
])
def test_a_release_the_bridge_cannot_run_is_named_in_one_line(spec, message):
    with pytest.raises(UnknownImplementationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(spec)


def test_one_process_runs_one_release(monkeypatch):
    monkeypatch.setattr(releases, "_SELECTED", None)
    releases.select_release("1.13.6")
    releases.select_release("1.13.6")  # the same again is fine
    with pytest.raises(ValueError, match="one JVM per process, so Flink 1.15.4 needs another process"):
        releases.select_release("1.15.4")


def test_check_runs_on_flink_1_13_6_fetched_on_first_use(tmp_path):
    run = cowcheck("check", "--impl", "flink@1.13.6", "--examples", "5", "--walks", "3", "--seed", "1",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "flink@1.13.6 (Apache Flink 1.13.6 CopyOnWriteStateMap" in run.stdout
    assert (releases.cache_root() / "flink" / "1.13.6" / "flink-dist_2.12-1.13.6.jar").is_file()


def test_a_release_the_index_does_not_have_is_bad_usage_and_leaves_nothing_in_the_cache(tmp_path):
    run = cowcheck("check", "--impl", "flink@1.99.0", "--examples", "1", cwd=tmp_path,
                   env={"COWCHECK_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 2, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("cowcheck: error")]
    assert len(errors) == 1 and "No matching distribution found for apache-flink-libraries==1.99.0" in errors[0]
    assert "fetching Flink 1.99.0" in run.stderr  # the progress line came first
    assert not (tmp_path / "cache" / "flink" / "1.99.0").exists()


def test_versions_prints_the_matrix_of_findings_and_stored_files(tmp_path):
    # A counterexample of the reference machine at capacity 4 does not apply to Flink's 128.
    stored = cowcheck("check", "--impl", "mutant:snapshot-version-not-bumped", "--seed", "0",
                      "--save-dir", str(tmp_path), cwd=tmp_path)
    assert stored.returncode == 1
    (mutant_file,) = tmp_path.glob("*.json")
    run = cowcheck("versions", "--findings", str(mutant_file), "--versions", "2.3.0,1.13.6", "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["releases"] == ["1.13.6", "2.3.0"]
    rows = {Path(r["file"]).name: r for r in report["counterexamples"]}
    for finding in ("live-iteration-rehash.json", "live-iteration-rehash-skip.json"):
        assert {v: o["outcome"] for v, o in rows[finding]["outcomes"].items()} == \
            {"1.13.6": REPRODUCES, "2.3.0": REPRODUCES}
    assert {o["outcome"] for o in rows[mutant_file.name]["outcomes"].values()} == {NOT_APPLICABLE}
    assert "capacity 4" in rows[mutant_file.name]["outcomes"]["2.3.0"]["detail"]


def test_versions_without_files_is_bad_usage():
    run = cowcheck("versions")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "name counterexample files" in run.stderr


def test_regression_range_names_the_last_bad_and_first_good_release():
    row = {"1.13.6": REPRODUCES, "1.15.4": REPRODUCES, "1.17.2": PASSES, "2.3.0": PASSES}
    assert regression_range(row) == "last reproduces on 1.15.4, first passes on 1.17.2"
    assert regression_range({"1.13.6": PASSES, "2.3.0": PASSES}) == "passes on every release run (1.13.6–2.3.0)"
    assert regression_range({"1.13.6": NOT_APPLICABLE}) == "-"


def test_flink_1_13_6_takes_every_key_family_and_operation_batched_and_call_by_call():
    """The oldest release: no key type missing, parity programs of every family identical to the
    reference, batched walks judged as the call-by-call bridge judges them (the real map passes;
    keys compared with == fail the same way on both paths unless the caller holds them)."""
    script = textwrap.dedent("""
        import json
        from cowcheck.flink.releases import select_release
        select_release("1.13.6")
        from cowcheck.core.keys import family_of
        from cowcheck.core.program import Step
        from cowcheck.core.shrink import replay
        from cowcheck.flink import FlinkStateMap, jvm
        from cowcheck.flink.jvm import Java
        from cowcheck.flink.parity import run_parity
        from cowcheck.flink.segments import WalkHarness, WalkMap
        from cowcheck.map.harness import Harness
        from cowcheck.map.walks import walk_program

        def verdict(f):
            return None if f is None else [f.kind, f.code, f.step_index]

        out = {"release": jvm().flink_version, "missing": [str(c) for c in Java.Keys.missing()]}
        parity = run_parity(40, [13], 300, 1, 10)
        out["differences"] = parity["counts"]["differences"]
        out["families"] = sorted(parity["families"])
        verdicts, families = [], set()
        for corruption in ("", "identity-keys"):
            for seed in range(10):
                program = list(walk_program(seed, 150))
                families |= {family_of(s.args[0]).name for s in program if s.op == "put"}
                pair = [verdict(replay(program, lambda: None, harness_class=lambda _: h))
                        for h in (WalkHarness(WalkMap(corruption=corruption), white_box=True),
                                  Harness(FlinkStateMap(corruption=corruption), white_box=True))]
                verdicts.append([corruption, seed] + pair)
        out["verdicts"], out["walk_families"] = verdicts, sorted(families)
        print(json.dumps(out))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["release"] == "1.13.6" and out["missing"] == []
    assert out["differences"] == 0
    assert {f.split("/")[0] for f in out["families"]} == {"int", "long", "string", "tuple"}, out["families"]
    assert {f.split("/")[1] for f in out["families"]} == {"int", "void", "window"}, out["families"]
    assert all(batched == per_call for _, _, batched, per_call in out["verdicts"]), out["verdicts"]
    assert all(batched is None for corruption, _, batched, _ in out["verdicts"] if not corruption)
    assert any(batched is not None for corruption, _, batched, _ in out["verdicts"] if corruption)
