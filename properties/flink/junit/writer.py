"""What every machine's JUnit writer shares: the test class's shape, Java literals, the failing step's frame.

A writer turns a counterexample into one self-contained JUnit 5 class: a
``@Test void replay()`` with one commented block per step (``// step 3:``
and the step as the Python program prints it, ``<-- fails here`` on the
failing one), the failing step's check as a Jupiter assertion, preceded by
the rule it checks (``docs/contract.md`` code and title) and the model's
expected value, and nested classes for whatever the steps need. A machine's
writer is a :class:`Writer` subclass with a method ``step_<op>`` per operation
of the machine's table it can express (the Java of a step that is not the
failing one) and ``fails_<op>`` per operation whose failing check it can
express (the Java of the step and its assertion); what it cannot express yet
is listed in ``cannot`` with the reason. :meth:`Writer.missing` names the
operations of the table that are neither (a new operation of the machine:
``tests/test_junit.py`` fails until its writer says which).

>>> java_string("a\\"b\\ud800é")
'"a\\\\"b\\\\ud800\\\\u00e9"'
>>> class_name("flink-26853-stale-copier.json")
'Flink26853StaleCopierTest'
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import attrs

from cowcheck.core.contract import entries
from cowcheck.core.counterexample import Counterexample
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import CRASH, TIMEOUT
from cowcheck.core.program import OperationTable, Step

__all__ = ["JUnitUnsupported", "JUnitTest", "Writer", "java_string", "java_comment", "class_name", "ints"]


class JUnitUnsupported(UsageError):
    """A counterexample the JUnit writer cannot express yet (a usage error: exit 2, one line)."""


@attrs.frozen
class JUnitTest:
    """One written test class: ``package``, class ``name``, Java ``source``; ``finding``: the file it
    replays, ``written_for``: the Flink it was written for."""

    package: str
    name: str
    source: str
    finding: str = ""
    written_for: str = ""

    @property
    def qualified(self) -> str:
        return f"{self.package}.{self.name}"

    @property
    def path(self) -> Path:
        """Where it goes under a test source root (``src/test/java/``): its package's directories."""
        return Path(*self.package.split("."), f"{self.name}.java")


def java_string(text: str) -> str:
    """A Java string literal of ``text``: by UTF-16 code units, everything beyond printable ASCII escaped."""
    out = []
    for unit in _utf16_units(text):
        char = chr(unit)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= unit < 0x7F:
            out.append(char)
        elif unit in (0x0A, 0x0D):  # javac reads \u000a as a line break even inside a literal
            out.append("\\n" if unit == 0x0A else "\\r")
        else:
            out.append(f"\\u{unit:04x}")
    return '"' + "".join(out) + '"'


def _utf16_units(text: str) -> list[int]:
    units = []
    for char in text:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            units += [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
        else:
            units.append(point)
    return units


def java_comment(text: str) -> str:
    """``text`` made safe inside a ``//`` comment: one line, no backslash that would begin a Unicode
    escape (javac reads those even in comments)."""
    return re.sub(r"\s+", " ", text).replace("\\", "\\\\")


def class_name(file_name: str) -> str:
    """The test class of a counterexample file: its name in CamelCase, ``Test`` appended."""
    stem = Path(file_name).name.removesuffix(".json")
    words = [w for w in re.split(r"[^0-9A-Za-z]+", stem) if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Counterexample"
    if not name[0].isalpha():
        name = "Cowcheck" + name
    return name + "Test"


def ints(values) -> str:
    """``[1, 2]`` -> ``1, 2`` (Java ints; the caller wraps them)."""
    return ", ".join(str(int(v)) for v in values)


def rule_lines(code: str) -> list[str]:
    """The contract's entry for ``code`` as comment lines (its code, title and anchor)."""
    entry = entries().get(code)
    if entry is None:
        return [f"// {code} (docs/contract.md)"]
    return [f"// {code}: {java_comment(entry.title)} (docs/contract.md#{entry.anchor})"]


@attrs.define
class Writer:
    """A machine's JUnit writer (see the module docstring). Subclasses set ``operations``,
    ``package``, ``imports`` (single-type), ``cannot`` and write ``setup``, ``step_<op>``,
    ``fails_<op>`` and ``nested`` (the helper classes' source)."""

    operations: ClassVar[OperationTable]
    package: ClassVar[str]
    imports: ClassVar[tuple] = ()
    cannot: ClassVar[dict] = {}
    crash_code: ClassVar[str] = ""
    needs_model: ClassVar[bool] = True  # the failing checks read the model (the program replayed on the reference)

    cx: Counterexample
    file_name: str
    written_for: str
    model: Any = None  # what the writer reads of the model before the failing step (machine-specific)
    failing: int = 0
    index: Any = None  # the classes of the Flink the test is written for (a ClassIndex), if known
    # What the test uses beyond the skeleton (imports added by steps).
    used: set = attrs.Factory(set)

    @classmethod
    def missing(cls) -> list[str]:
        """Operations of the machine's table with neither a ``step_``/``fails_`` method nor a reason in ``cannot``."""
        return [op.name for op in cls.operations
                if op.name not in cls.cannot and not hasattr(cls, f"step_{op.name}")]

    # ------------------------------------------------------------ what a subclass writes

    def setup(self) -> list[str]:
        return []

    def nested(self) -> str:
        return ""

    def expected(self) -> str:
        """The model's expected value at the failing step, in words (for the comment)."""
        return ""

    # ------------------------------------------------------------ the class

    def check_expressible(self) -> None:
        """JUnitUnsupported (exit 2, one line) unless every step and the failing check can be written."""
        name = self.file_name
        for i, step in enumerate(self.cx.steps[:self.failing + 1]):
            if step.op in self.cannot:
                raise JUnitUnsupported(f"{name}: step {i} ({step.op}) cannot be written as JUnit yet: "
                                       f"{self.cannot[step.op]}")
            if not hasattr(self, f"step_{step.op}"):
                raise JUnitUnsupported(f"{name}: step {i} ({step.op}) is an operation the {self.operations.machine} "
                                       f"machine's JUnit writer has no case for (cowcheck.flink.junit)")
        failure = self.cx.failure
        step = self.cx.steps[self.failing] if self.cx.steps else None
        if step is None:
            raise JUnitUnsupported(f"{name}: fails before its first step; a JUnit test needs a step to check")
        if not self._crash(failure) and not hasattr(self, f"fails_{step.op}"):
            raise JUnitUnsupported(f"{name}: the check of step {self.failing} ({step.op}: {failure.kind} "
                                   f"{failure.code}) cannot be written as JUnit yet")

    def _crash(self, failure) -> bool:
        return failure.kind == CRASH and failure.code == self.crash_code

    def step_lines(self, i: int, step: Step) -> list[str]:
        head = f"// step {i}: {java_comment(self.operations.render(step))}"
        if i != self.failing:
            return [head, *getattr(self, f"step_{step.op}")(*step.args)]
        failure = self.cx.failure
        lines = [head + "   <-- fails here", *rule_lines(failure.code)]
        expected = self.expected()
        if expected:
            lines.append(f"// the model expects: {java_comment(expected)}")
        if self._crash(failure) and not hasattr(self, f"fails_{step.op}"):
            lines += self.no_exception(failure.code, getattr(self, f"step_{step.op}")(*step.args),
                                       self.operations.render(step))
        else:
            lines += getattr(self, f"fails_{step.op}")(*step.args)
        return lines

    def no_exception(self, code: str, body: list[str], what: str) -> list[str]:
        """``body`` in a try block whose exception fails the test: the implementation raised (a CRASH)."""
        message = java_string(f"{code}: {what} raised ")
        return ["try {", *("    " + line for line in body), "} catch (Exception e) {",
                f"    fail({message} + e, e);", "}"]

    def write(self) -> JUnitTest:
        self.check_expressible()
        name = class_name(self.file_name)
        failure = self.cx.failure
        body = [*self.setup()]
        for i, step in enumerate(self.cx.steps[:self.failing + 1]):
            body += ["", *self.step_lines(i, step)]
        imports = sorted(set(self.imports) | self.used | {"org.junit.jupiter.api.Test",
                                                          "static org.junit.jupiter.api.Assertions.*"})
        kind = "timeout" if failure.kind == TIMEOUT else failure.kind.lower()
        source = [
            f"package {self.package};",
            "",
            *(f"import {i};" for i in sorted(imports, key=lambda i: (not i.startswith("static"), i))),
            *self.extra_imports(),
            "",
            "/**",
            f" * Replays cowcheck's counterexample {java_comment(Path(self.file_name).name)} "
            f"({self.operations.machine} machine) on Flink's own classes,",
            f" * written for {java_comment(self.written_for)}: it fails where the bug is ({kind} {failure.code} "
            f"at step {self.failing}) and passes where it is fixed.",
            " * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.",
            " */",
            f"class {name} {{",
            "    @Test",
            "    void replay() throws Exception {",
            *(("        " + line) if line else "" for line in body),
            "    }",
        ]
        nested = self.nested()
        if nested:
            source += ["", *(("    " + line) if line else "" for line in nested.strip("\n").splitlines())]
        source.append("}")
        return JUnitTest(self.package, name, "\n".join(source) + "\n", Path(self.file_name).name, self.written_for)

    def extra_imports(self) -> list[str]:
        """Import lines beyond the sorted single-type ones (an on-demand import, with why)."""
        return []
