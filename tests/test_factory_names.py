"""Factories as users write them: made by a closure, functools.partial or a lambda and bound to a
module-level name, they get a printed program and a replay command that work; one with no such name
gets a line saying how to give it one (issue 35.5)."""

import subprocess
import sys
import textwrap

import pytest

ACC = textwrap.dedent('''
    import copy, functools
    from cowcheck.core.impls import resolve

    Buggy = resolve("mutant:skip-prefix-copy").factory

    def _factory():
        def make(capacity=4, state_copier=copy.deepcopy):
            return Buggy(capacity=capacity, state_copier=state_copier)
        return make

    make_closure = _factory()
    make_partial = functools.partial(Buggy)
    make_lambda = lambda capacity=4, state_copier=copy.deepcopy: Buggy(capacity=capacity, state_copier=state_copier)
''')

TESTS = textwrap.dedent('''
    import acc
    import cowcheck

    test_closure = cowcheck.walk_test(acc.make_closure, seed=1, replays=1)
    test_partial = cowcheck.walk_test(acc.make_partial, seed=1, replays=1)
    test_lambda = cowcheck.walk_test(acc.make_lambda, seed=1, replays=1)
    test_unbound = cowcheck.walk_test(acc._factory(), seed=1, replays=1)
''')


@pytest.mark.slow
def test_bound_factories_get_their_module_level_names_and_unbound_ones_say_how_to_get_one(tmp_path):
    (tmp_path / "acc.py").write_text(ACC)
    (tmp_path / "test_acc.py").write_text(TESTS)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_acc.py"],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert "4 failed" in run.stdout, run.stdout[-3000:]
    for name in ("make_closure", "make_partial", "make_lambda"):
        assert f"new_map = lambda: resolve('acc:{name}').new(capacity=4)" in run.stdout
        assert f"--impl acc:{name} --in-process --trace" in run.stdout
    assert "(no replay command: acc:_factory.<locals>.make is not a name another process can import" in run.stdout
    replay = subprocess.run([sys.executable, "-m", "cowcheck", "replay",
                             ".cowcheck/counterexamples/acc-make_partial--INVARIANT-I9.json", "--impl", "acc:make_partial",
                             "--in-process"],
                            cwd=tmp_path, capture_output=True, text=True, env=env)
    assert replay.returncode == 1, replay.stdout + replay.stderr
