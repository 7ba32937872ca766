"""docs/contract.md is the contract: one entry for every code the suite can print, and nothing else.

The codes a failure or a campaign outcome can carry are found in the sources
themselves (every ``_fail``/``_violate``/``Failure``/``Violation``/``Outcome``
call and every code-shaped literal), in the mutants' expected codes and in the
Flink corruptions' expected codes; each must have its entry, with all its
parts, and each entry must name a code the suite can print. The package
carries a copy of the document (``cowcheck explain`` reads it), which must be
the document itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import cowcheck.registry  # noqa: F401  (registers every machine and mutant)
from cowcheck.core.contract import CONTRACT, FIELDS, entries, parse, pointer
from cowcheck.core.machine import MACHINES
from cowcheck.core.mutants import catalogue
from cowcheck.flink.corruptions import BACKEND_CORRUPTIONS, CORRUPTIONS

ROOT = Path(__file__).resolve().parent.parent
# Where failures are made (every code-shaped literal counts), and the campaign code above them (only
# the codes its calls carry: its report names matplotlib colours "C0".."C3").
HARNESSES = sorted([*ROOT.glob("properties/**/*.py"), ROOT / "reference/invariants.py"])
CAMPAIGNS = sorted(ROOT.glob("spark_fuzz/**/*.py"))

# Calls that carry a code, and the position of their code argument (or ``code=``).
CODE_ARGUMENT = {"_fail": 1, "_violate": 1, "Failure": 1, "Violation": 0, "Outcome": None, "WorkerFailure": 1}
CODE_LITERAL = re.compile(r"[PIACTKO]\d{1,2}")


def codes_raised(files, literals: bool = True) -> set[str]:
    """Every code the given Python files can put in a failure or an outcome; with ``literals``, also
    every string that looks like a property's code (a default, a ``crash_code``, a code chosen by
    an expression)."""
    trees = [ast.parse(Path(f).read_text(encoding="utf-8")) for f in files]
    constants = {node.targets[0].id: node.value.value
                 for tree in trees for node in tree.body
                 if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        return constants.get(name)

    found = set()
    for tree in trees:
        for node in ast.walk(tree):
            if literals and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and CODE_LITERAL.fullmatch(node.value):
                found.add(node.value)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name not in CODE_ARGUMENT:
                continue
            at = CODE_ARGUMENT[name]
            carried = [node.args[at]] if at is not None and len(node.args) > at else []
            carried += [kw.value for kw in node.keywords if kw.arg == "code"]
            found.update(v for v in map(value, carried) if v)
    return found


def test_the_package_carries_the_contract_itself():
    assert (ROOT / "properties/core/contract.md").read_bytes() == (ROOT / CONTRACT).read_bytes(), \
        "copy docs/contract.md to properties/core/contract.md"


def test_every_code_the_sources_can_raise_has_an_entry_and_every_entry_is_raised():
    assert codes_raised(HARNESSES) | codes_raised(CAMPAIGNS, literals=False) == set(entries())


def test_the_scan_finds_a_code_in_a_new_harness(tmp_path):
    harness = tmp_path / "harness.py"
    harness.write_text('NEW = "stalled"\n'
                       'class H:\n'
                       '    def _op_x(self, step):\n'
                       '        self._fail(DIVERGENCE, "P99", "m")\n'
                       '        self._fail(TIMEOUT, NEW, "m")\n'
                       '        return Outcome(kind=CRASH, code="gone")\n')
    assert codes_raised([harness]) == {"P99", "stalled", "gone"}


def test_every_code_a_mutant_or_a_flink_corruption_expects_has_an_entry():
    expected = set().union(*(m.expected_codes for m in catalogue().values()))
    expected |= {code for c in CORRUPTIONS.values() for codes in (c.black_box, c.white_box) for code in codes}
    expected |= {code for c in BACKEND_CORRUPTIONS.values() for codes in (c.racing, c.inline) for code in codes}
    assert expected and expected <= set(entries())


@pytest.mark.parametrize("code", sorted(entries()))
def test_every_entry_has_a_title_and_every_part(code):
    entry = entries()[code]
    assert entry.title
    assert [name for name in FIELDS if not entry.fields.get(name)] == []
    assert re.match(r"\d+\. ", entry.section)


def test_every_entry_is_linked_from_the_index_by_the_anchor_failures_point_to():
    text = (ROOT / CONTRACT).read_text(encoding="utf-8")
    index = text.split("\n## ", 1)[0]
    for code, entry in entries().items():
        assert f"]({'#' + entry.anchor})" in index, code
        assert pointer(code).endswith(f"({entry.link})")


def test_an_entry_is_a_code_heading_with_labelled_parts():
    text = ("## 9. Semantics\n\n### P6\n\nCopies when needed.\n\n**Rule.** The rule\ngoes on.\n\n"
            "**Breaks it.** A map:\n\n```text\nm.put(0, 0, [])\n```\n\n## 10. Next\n\n### T1\n\nReads.\n")
    parsed = parse(text)
    assert list(parsed) == ["P6", "T1"]
    assert (parsed["P6"].title, parsed["P6"].section) == ("Copies when needed.", "9. Semantics")
    assert parsed["P6"].fields == {"Rule": "The rule goes on.", "Breaks it": "A map:"}
    assert parsed["P6"].example == "m.put(0, 0, [])"


def test_the_scenarios_section_names_every_scenario_of_every_machine():
    text = (ROOT / CONTRACT).read_text(encoding="utf-8")
    section = text.split("\n## 13. ", 1)[1].split("\n## ", 1)[0]
    missing = [f"{name}: {scenario}" for name, kind in MACHINES.items() for scenario in kind.scenarios
               if f"`{scenario}`" not in section]
    assert missing == []


# ------------------------------------------------- every printed failure points here


def test_a_failure_printed_as_a_program_points_to_its_entry():
    from cowcheck.core.failures import Failure
    from cowcheck.core.machine import machine_kind
    from cowcheck.core.program import Step
    from cowcheck.core.report import format_failure

    kind = machine_kind("map")
    failure = Failure("DIVERGENCE", "P6", "m.get(0, 0): returned the live state object", 0, "copy", "same")
    text = format_failure(failure, [Step("get", (0, 0))], "reference", kind, kind.config())
    assert pointer("P6") in [line.strip() for line in text.splitlines()]


def test_a_replayed_failure_points_to_its_entry():
    import io

    from cowcheck.cli import main

    out, err = io.StringIO(), io.StringIO()
    path = ROOT / "tests/regressions/counterexamples/mutant-skip-prefix-copy--INVARIANT-I9.json"
    assert main(["replay", str(path)], stdout=out, stderr=err) == 1
    assert pointer("I9") in [line.strip() for line in out.getvalue().splitlines()]
