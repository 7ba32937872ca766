"""``cowcheck prove``: CrossHair refutes seeded arithmetic bugs, never the real contracts.

The seeded bugs live in ``tests/crosshair_mutants.py``: copies of contracted
functions with one mistake each and the same docstring. The run on the real
contracts is the CI step: a bounded budget per condition, none refuted, the
per-contract times printed.
"""

import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import crosshair_mutants
from cowcheck.core.contracts import (
    CONFIRMED,
    DEFAULT_TARGETS,
    ERROR,
    NO_COUNTEREXAMPLE,
    REFUTED,
    find_contracts,
    parse_report,
    run_contracts,
)
from cowcheck.reference import hashing, layout

ROOT = Path(__file__).resolve().parent.parent
MUTANTS_FILE = str(Path(crosshair_mutants.__file__).resolve())
WORKERS = min(4, os.cpu_count() or 1)
# The CI budget: CPU seconds CrossHair may spend on each condition.
CI_PER_CONDITION_TIMEOUT = 2.0


def cowcheck(*args):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def _original_of(mutant_name: str):
    original = mutant_name.split("__")[0]
    return getattr(layout, original, None) or getattr(hashing, original)


# --------------------------------------------------------- seeded bugs

def test_every_mutant_carries_the_contract_of_the_function_it_copies():
    mutants = [c.function for c in find_contracts(MUTANTS_FILE)]
    assert len(mutants) >= 8
    for name in mutants:
        assert inspect.getdoc(_original_of(name)) == inspect.getdoc(getattr(crosshair_mutants, name)), name


@pytest.fixture(scope="module")
def mutant_results():
    return run_contracts(find_contracts(MUTANTS_FILE), per_condition_timeout=3.0, workers=WORKERS)


def test_crosshair_refutes_every_seeded_arithmetic_bug(mutant_results):
    assert {r.contract.function: REFUTED for r in mutant_results} == \
        {r.contract.function: r.verdict for r in mutant_results}


def test_each_refutation_is_a_counterexample_call_in_crosshairs_format(mutant_results):
    for result in mutant_results:
        name = result.contract.function
        assert result.counterexamples, name
        pattern = rf"crosshair_mutants\.py:\d+: error: false when calling {name}\(.*\)"
        assert all(re.search(pattern, line) for line in result.counterexamples), result.counterexamples


def test_greater_for_greater_or_equal_in_table_choice_is_refuted_at_bucket_rehash_index(mutant_results):
    (result,) = [r for r in mutant_results if r.contract.function == "uses_primary_table__strict"]
    call = re.search(r"when calling uses_primary_table__strict\((-?\d+), (\d+), (\d+)\)", result.counterexamples[0])
    h, primary_length, rehash_index = map(int, call.groups())
    assert layout.bucket_index(h, primary_length) == rehash_index  # the one bucket the mutant misplaces


def test_wrong_region_offset_in_the_snapshot_plan_is_refuted(mutant_results):
    refuted = {r.contract.function for r in mutant_results if r.verdict == REFUTED}
    assert {"snapshot_regions__upper_half_at_tail",
            "snapshot_regions__upper_half_from_old_length_plus_one"} <= refuted


def test_cli_prints_the_counterexample_and_exits_1_for_a_refuted_contract():
    run = cowcheck("prove", "tests/crosshair_mutants.py", "--only", "uses_primary_table__strict",
                   "--per-condition-timeout", "2")
    assert 1 == run.returncode, run.stdout + run.stderr
    assert re.search(r"^refuted +crosshair_mutants\.uses_primary_table__strict +\d+\.\d s$", run.stdout, re.M)
    assert re.search(r"tests/crosshair_mutants\.py:\d+: error: false when calling uses_primary_table__strict\(",
                     run.stdout)
    assert "1 contract: 0 confirmed, 0 no counterexample within budget, 1 refuted" in run.stdout


# ------------------------------------------------ the real contracts (CI)

def test_the_real_contracts_are_never_refuted_within_the_ci_budget(capsys):
    contracts = [c for target in DEFAULT_TARGETS for c in find_contracts(target)]
    start = time.monotonic()
    results = run_contracts(contracts, per_condition_timeout=CI_PER_CONDITION_TIMEOUT, workers=WORKERS)
    elapsed = time.monotonic() - start
    with capsys.disabled():
        print(f"\ncowcheck prove, {CI_PER_CONDITION_TIMEOUT:g} s per condition, {WORKERS} at a time: "
              f"{elapsed:.1f} s")
        for r in results:
            print(f"  {r.verdict:<31}  {r.contract.module}.{r.contract.function:<22} {r.seconds:5.1f} s")
    assert [] == [(r.contract.function, r.counterexamples or r.detail) for r in results
                  if r.verdict in (REFUTED, ERROR)]
    # Finite domains (every valid capacity) are explored to the end.
    verdicts = {r.contract.function: r.verdict for r in results}
    assert {CONFIRMED} == {verdicts[f] for f in ("threshold_for", "doubled_capacity", "split_targets")}


def test_contracts_are_found_in_source_order_with_their_def_lines():
    contracts = find_contracts("cowcheck.reference.layout")
    names = [c.function for c in contracts]
    assert names[:3] == ["is_valid_capacity", "bucket_index", "uses_primary_table"]
    assert "_fills_in_order" not in names  # helpers without conditions are not contracts
    for c in contracts:
        assert inspect.getsourcelines(getattr(layout, c.function))[1] == c.line


# ----------------------------------------------------- report parsing

def test_crosshair_lines_map_to_the_three_verdicts_and_errors():
    output = "\n".join([
        "/x/layout.py:90: info: Confirmed over all paths.",
        "/x/layout.py:91: info: Not confirmed.",
        "/x/layout.py:92: info: Unable to meet precondition.",
        "/x/layout.py:93: error: false when calling f(0, 4) (which returns False)",
        "/x/layout.py:94: error: IndexError: list index out of range when calling f(1, 4)",
        "/x/layout.py:95: error: SyntaxError: invalid syntax",
        "*** Begin Not Deterministic Debug ***",
    ])
    assert [CONFIRMED, NO_COUNTEREXAMPLE, NO_COUNTEREXAMPLE, REFUTED, REFUTED, ERROR] == \
        [c.verdict for c in parse_report(output)]


# ------------------------------------------------------------- usage

@pytest.mark.parametrize("args, message", [
    (["no.such.module"], "cannot import 'no.such.module'"),
    (["missing/file.py"], "no such file 'missing/file.py'"),
    (["cowcheck.reference.errors"], "no pre:/post: contracts in cowcheck.reference.errors"),
    (["--only", "nope"], "no contract named nope"),
    (["--per-condition-timeout", "0"], "expected a positive number"),
])
def test_bad_usage_is_one_line_and_exit_2(args, message):
    run = cowcheck("prove", *args)
    assert 2 == run.returncode
    assert 1 == len(run.stderr.splitlines()), run.stderr
    assert message in run.stderr


def test_list_shows_each_contract_with_its_place():
    run = cowcheck("prove", "--list")
    assert 0 == run.returncode, run.stderr
    assert re.search(r"^cowcheck\.reference\.layout\.snapshot_regions +reference/layout\.py:\d+$", run.stdout, re.M)
    assert 15 == len(run.stdout.splitlines())


def test_prove_on_the_shipped_contracts_is_deterministic_three_runs_in_a_row_exit_0():
    # Memo caches on a contract's call path made CrossHair report NotDeterministic (3 runs in 4
    # ended with exit 2); the contracted functions are pure now, the caches are on the hot path only.
    for attempt in range(3):
        run = cowcheck("prove", "--per-condition-timeout", "1")
        assert 0 == run.returncode, (attempt, run.stdout[-3000:], run.stderr[-3000:])
        assert "NotDeterministic" not in run.stdout + run.stderr
        assert re.search(r"15 contracts: \d+ confirmed, \d+ no counterexample within budget, 0 refuted",
                         run.stdout), run.stdout


def test_an_error_on_a_shipped_contract_is_an_internal_error_not_bad_usage(monkeypatch, tmp_path):
    # CrossHair failing on a contract cowcheck ships is cowcheck's own error: exit 3, the details in a file.
    from cowcheck.cli import main
    from cowcheck.core import contracts as contracts_module

    def crashing(contracts, *args, **kwargs):
        return [contracts_module.ContractResult(c, ERROR, (), 0.0, "NotDeterministic: simulated") for c in contracts]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cowcheck.cli.prove.run_contracts", crashing)
    import io
    out, err = io.StringIO(), io.StringIO()
    assert 3 == main(["prove", "--only", "key_group"], stdout=out, stderr=err)
    assert err.getvalue().startswith("internal error in cowcheck: prove: cowcheck.reference.hashing.key_group: NotDeterministic")
    assert list((tmp_path / ".cowcheck" / "internal-errors").glob("*.txt"))
