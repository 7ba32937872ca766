"""``cowcheck explain``: every code's entry from the installed contract; exit 2 for anything else."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cowcheck.cli import main
from cowcheck.core.contract import entries

ROOT = Path(__file__).resolve().parent.parent


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(["explain", *argv], stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("code", sorted(entries()))
def test_explain_prints_the_entry_of_every_code_with_its_example(code):
    status, out, err = run(code)
    entry = entries()[code]
    assert (status, err) == (0, "")
    assert out.startswith(f"{code}: ") and entry.link in out
    assert all(line in out for line in entry.example.splitlines())


def test_explain_matches_codes_in_any_case_and_after_their_kind():
    assert run("p6")[:2] == run("P6")[:2] == run("DIVERGENCE", "P6")[:2]
    assert run("Time-Limit")[1] == run("time-limit")[1]


def test_explain_without_a_code_lists_every_code():
    status, out, _ = run()
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert (status, listed) == (0, list(entries()))


@pytest.mark.parametrize("argv, suggested", [(("P66",), "P6"), (("I-9",), "I9"), (("timelimit",), "time-limit"),
                                             (("DIVERGENCE",), None), (("P6", "P7"), None), (("nonsense",), None)])
def test_anything_else_is_bad_usage_in_one_line(argv, suggested):
    status, out, err = run(*argv)
    assert (status, out, err.count("\n")) == (2, "", 1)
    if suggested is not None:
        assert f"did you mean {suggested}" in err


def test_explain_reads_the_installed_contract_from_any_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "cowcheck.cli", "explain", "I9"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert entries()["I9"].example.splitlines()[-1] in done.stdout
