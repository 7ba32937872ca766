"""`import cowcheck`: one name in site-packages, the public API at the top, the old names for old files."""

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import cowcheck
from cowcheck.core.counterexample import load
from cowcheck.reference import CopyOnWriteStateMap


def test_the_version_has_one_source():
    assert cowcheck.__version__ == metadata.version("cowcheck")
    from cowcheck.cli import version_text
    assert version_text().startswith(f"cowcheck {cowcheck.__version__} (")


def test_every_public_name_resolves_and_documents_itself():
    for name in cowcheck.__all__:
        value = getattr(cowcheck, name)
        assert name == "__version__" or (value.__doc__ or "").strip(), name


def test_importing_the_reference_does_not_import_the_suite():
    code = "import sys, cowcheck.reference; print(sorted(m for m in sys.modules if m.startswith(('cowcheck.core', 'hypothesis'))))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_check_of_a_factory_object_passes_a_correct_map_and_returns_the_verdict(tmp_path):
    verdict = cowcheck.check(CopyOnWriteStateMap, examples=5, walks=2, seed=3, save_dir=str(tmp_path))
    assert (verdict.exit_code, verdict.failed, verdict.failure, verdict.saved) == (0, False, None, None)
    assert "cowcheck check: map machine, reference" in verdict.output


def test_check_returns_the_failure_and_its_stored_counterexample(tmp_path):
    verdict = cowcheck.check("mutant:skip-prefix-copy", seed=1, save_dir=str(tmp_path))
    assert verdict.exit_code == 1 and verdict.failed
    assert (verdict.failure.kind, verdict.failure.code) == ("INVARIANT", "I9")
    assert verdict.saved is not None and verdict.saved.parent == tmp_path
    assert load(verdict.saved).failure == verdict.counterexample.failure
    again = cowcheck.replay(verdict.saved)
    assert again.exit_code == 1 and "reproduces" in again.output
    assert cowcheck.replay(verdict.saved, impl="reference").exit_code == 0


def test_bad_usage_is_exit_2_with_one_line():
    verdict = cowcheck.check("no_such_module:make", examples=1)
    assert verdict.exit_code == 2 and verdict.errors.count("\n") == 1


def test_old_module_names_resolve_to_the_same_modules_but_a_users_own_names_win(tmp_path):
    (tmp_path / "model.py").write_text("MINE = True\n")
    code = textwrap.dedent("""
        import warnings
        from cowcheck.core import legacy
        legacy.install()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import properties.core.impls, cowcheck.core.impls
            from reference.keys import Tuple2
        import model
        print(properties.core.impls is cowcheck.core.impls, Tuple2.__module__, model.MINE,
              any("import cowcheck.core.impls instead" in str(w.message) for w in caught))
    """)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert run.stdout.split() == ["True", "cowcheck.reference.keys", "True", "True"], run.stderr


def test_a_counterexample_naming_a_module_by_its_old_name_is_read_with_the_new_one(tmp_path):
    verdict = cowcheck.check("mutant:skip-prefix-copy", seed=1, save_dir=str(tmp_path))
    data = json.loads(verdict.saved.read_text())
    data["implementation"]["spec"] = "reference.cow_state_map:CopyOnWriteStateMap"
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert load(old).implementation == "cowcheck.reference.cow_state_map:CopyOnWriteStateMap"


def test_a_regression_test_written_before_the_rename_still_runs_under_pytest(tmp_path):
    old = textwrap.dedent('''
        import properties.map  # noqa: F401  (registers the map machine and its mutants)
        from properties.core.impls import resolve
        from reference.invariants import SnapshotGuard

        def test_old_style():
            m = resolve('reference').new(capacity=4)
            guard = SnapshotGuard()
            m.put(6, 6, [])
            s0 = m.snapshot()
            guard.record(s0)
            m.put(6, 6, [1])
            assert guard.check() == []
    ''')
    (tmp_path / "test_old_style.py").write_text(old)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_old_style.py"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "properties.map is cowcheck.map since cowcheck 0.2.0: import cowcheck.map instead" in run.stdout
