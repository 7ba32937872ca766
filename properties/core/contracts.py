"""CrossHair on the contracts of the pure layout and hashing functions (``cowcheck prove``).

The index arithmetic of the map (``reference/layout.py``) and the int32
hashing (``reference/hashing.py``) state their contracts as PEP 316
docstring lines (``pre:``/``post:``). This command runs ``crosshair check``
on each contract (one subprocess per function, a few in parallel, a bounded
time per condition) and reports a verdict per function:

- ``confirmed``: CrossHair explored every execution path, so no input that
  meets the preconditions breaks a postcondition;
- ``no counterexample within budget``: the search ran out of time without
  finding one (CrossHair seldom exhausts bitwise arithmetic over int32);
- ``refuted``: a counterexample, printed as CrossHair prints it
  (``file:line: error: ... when calling f(...)``).

>>> contracts = find_contracts("cowcheck.reference.layout")
>>> [c.function for c in contracts][:3]
['is_valid_capacity', 'bucket_index', 'uses_primary_table']
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

import attrs

from cowcheck.core.errors import UsageError

__all__ = [
    "Contract",
    "ConditionResult",
    "ContractResult",
    "find_contracts",
    "check_contract",
    "run_contracts",
    "format_result",
    "parse_report",
    "count_label",
    "label",
    "shown",
    "CONFIRMED",
    "NO_COUNTEREXAMPLE",
    "REFUTED",
    "ERROR",
    "DEFAULT_TARGETS",
    "DEFAULT_PER_CONDITION_TIMEOUT",
]

CONFIRMED = "confirmed"
NO_COUNTEREXAMPLE = "no counterexample within budget"
REFUTED = "refuted"
ERROR = "error"  # CrossHair could not check the contract (import error, bad condition, crash)

DEFAULT_TARGETS = ("cowcheck.reference.layout", "cowcheck.reference.hashing")
DEFAULT_PER_CONDITION_TIMEOUT = 4.0

# A PEP 316 section header, as CrossHair parses it.
_SECTION = re.compile(r"^\s*(pre|post)(\[[\w\s,.]*\])?:")
# CrossHair's messages: "path:line: level: message".
_MESSAGE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<level>error|warning|info): (?P<text>.*)$")


@attrs.frozen
class Contract:
    """A function with PEP 316 conditions: where it is and how CrossHair names it."""

    module: str  # importable module name, or the file's stem for a file target
    function: str
    path: str
    line: int  # line of the ``def``

    @property
    def target(self) -> str:
        """CrossHair's target for this function alone: ``file.py:line``."""
        return f"{self.path}:{self.line}"


@attrs.frozen
class ConditionResult:
    """One line of CrossHair's report: the condition's ``line``, its verdict and CrossHair's message."""

    path: str
    line: int
    verdict: str
    message: str

    def crosshair_line(self) -> str:
        level = "error" if self.verdict in (REFUTED, ERROR) else "info"
        return f"{shown(self.path)}:{self.line}: {level}: {self.message}"


@attrs.frozen
class ContractResult:
    """The verdict on one contract, its conditions, and the wall time CrossHair took."""

    contract: Contract
    verdict: str
    conditions: tuple
    seconds: float
    detail: str = ""  # for ERROR: what went wrong

    @property
    def counterexamples(self) -> list[str]:
        """CrossHair's lines for the refuted conditions: ``file:line: error: ... when calling f(...)``."""
        return [c.crosshair_line() for c in self.conditions if c.verdict == REFUTED]


# ---------------------------------------------------------------- discovery

def _source_path(target: str) -> tuple[str, Path]:
    """``(module name, file)`` of a dotted module name or a ``.py`` file; UsageError if neither."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"prove: no such file {target!r}")
        return path.stem, path.resolve()
    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"prove: cannot import {target!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise UsageError(f"prove: no Python module named {target!r}")
    return target, Path(spec.origin).resolve()


def _has_conditions(node: ast.FunctionDef) -> bool:
    doc = ast.get_docstring(node, clean=False) or ""
    return any(_SECTION.match(line) for line in doc.splitlines())


def find_contracts(target: str) -> list[Contract]:
    """Top-level functions of ``target`` (module name or ``.py`` file) whose
    docstrings carry ``pre:``/``post:`` lines, in source order. Reads the
    source; imports nothing but the parent packages."""
    module, path = _source_path(target)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [Contract(module, node.name, str(path), node.lineno)
            for node in tree.body if isinstance(node, ast.FunctionDef) and _has_conditions(node)]


# ------------------------------------------------------------------ running

def _verdict_of(level: str, text: str) -> str:
    if level == "error":
        # A counterexample always names the call that broke the contract.
        return REFUTED if " when calling " in text else ERROR
    if text.startswith("Confirmed over all paths"):
        return CONFIRMED
    return NO_COUNTEREXAMPLE  # "Not confirmed.", "Unable to meet precondition.", ...


def parse_report(output: str) -> list[ConditionResult]:
    """CrossHair's ``check --report_all`` lines as ConditionResults (other lines are ignored)."""
    results = []
    for raw in output.splitlines():
        m = _MESSAGE.match(raw.strip())
        if m:
            results.append(ConditionResult(m["path"], int(m["line"]), _verdict_of(m["level"], m["text"]),
                                           m["text"]))
    return results


def _overall(conditions: list[ConditionResult]) -> str:
    verdicts = {c.verdict for c in conditions}
    for verdict in (REFUTED, ERROR, NO_COUNTEREXAMPLE):
        if verdict in verdicts:
            return verdict
    return CONFIRMED


def check_contract(contract: Contract, per_condition_timeout: float = DEFAULT_PER_CONDITION_TIMEOUT,
                   python: str = sys.executable) -> ContractResult:
    """Run ``crosshair check`` on one function; its verdict and wall time.

    CrossHair gives each condition up to ``per_condition_timeout`` CPU
    seconds; a stuck process is stopped after a generous wall-clock margin.
    """
    command = [python, "-m", "crosshair", "check", "--report_all", "--analysis_kind", "PEP316",
               "--per_condition_timeout", f"{per_condition_timeout:g}", contract.target]
    limit = 60 + 20 * per_condition_timeout
    start = time.monotonic()
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return ContractResult(contract, ERROR, (), time.monotonic() - start,
                              f"crosshair did not finish within {limit:.0f} s")
    seconds = time.monotonic() - start
    conditions = parse_report(run.stdout)
    if run.returncode not in (0, 1) or not conditions:
        tail = (run.stderr.strip() or run.stdout.strip() or "no output").splitlines()[-1]
        return ContractResult(contract, ERROR, tuple(conditions), seconds,
                              f"crosshair exited with {run.returncode}: {tail}")
    return ContractResult(contract, _overall(conditions), tuple(conditions), seconds)


def run_contracts(contracts: Iterable[Contract], per_condition_timeout: float = DEFAULT_PER_CONDITION_TIMEOUT,
                  workers: int = 2, on_result: Callable[[ContractResult], None] | None = None
                  ) -> list[ContractResult]:
    """Check every contract, ``workers`` CrossHair processes at a time; results in input order."""
    contracts = list(contracts)
    results = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for result in pool.map(lambda c: check_contract(c, per_condition_timeout), contracts):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def format_result(result: ContractResult, width: int = 0, verbose: bool = False) -> str:
    """One row per contract (verdict, function, seconds), then CrossHair's lines for
    counterexamples (all conditions if ``verbose``)."""
    row = f"{result.verdict:<31}  {label(result.contract):<{width}}  {result.seconds:6.1f} s\n"
    shown = result.conditions if verbose else [c for c in result.conditions if c.verdict in (REFUTED, ERROR)]
    return row + "".join(f"    {c.crosshair_line()}\n" for c in shown)


def count_label(n: int) -> str:
    return f"{n} contract" if n == 1 else f"{n} contracts"


def label(contract: Contract) -> str:
    return f"{contract.module}.{contract.function}"


def shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path
