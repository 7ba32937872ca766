"""Counterexamples as JUnit 5 tests on Flink's own classes (``cowcheck replay FILE --to-junit``).

One writer per machine (``table``, ``map``, ``backend``, ``async_exec``, ``operator``: a
:class:`~cowcheck.flink.junit.writer.Writer` each, its cases named after the
operations of the machine's table) turns a stored counterexample into one
self-contained JUnit 5 class that performs the program's steps on Flink's
classes and asserts, at the failing step, what the contract expects there.
It compiles with ``javac`` against Flink's jars and JUnit 5 alone, and the
console launcher runs it (:mod:`cowcheck.flink.junit.runner`): it fails on a
release with the bug and passes on one without.

The failing step's expected value is the model's: the program up to that step
is replayed on the reference (:func:`model_before`) and the writer reads what
the machine's harness holds then (the table's frozen snapshot, the map's
entries, the backend's state).
"""

from __future__ import annotations

from cowcheck.core.boundary import build
from cowcheck.core.counterexample import Counterexample
from cowcheck.core.failures import CheckFailure
from cowcheck.core.replay import replay_setup
from cowcheck.flink.jars import ClassIndex
from cowcheck.flink.junit.async_exec import AsyncWriter
from cowcheck.flink.junit.backend import BackendWriter
from cowcheck.flink.junit.map import MapWriter
from cowcheck.flink.junit.operator import OperatorWriter
from cowcheck.flink.junit.table import TableWriter
from cowcheck.flink.junit.writer import JUnitTest, JUnitUnsupported, Writer

__all__ = ["WRITERS", "JUnitTest", "JUnitUnsupported", "write_test", "model_before"]

# The machines whose counterexamples the writer expresses, and how.
WRITERS: dict[str, type[Writer]] = {"table": TableWriter, "map": MapWriter, "backend": BackendWriter,
                                    "async": AsyncWriter, "operator": OperatorWriter}


def model_before(cx: Counterexample, failing: int, file_name: str):
    """The machine's harness on the reference after the steps before ``failing`` (what the model
    holds when the failing step runs); JUnitUnsupported if the reference fails before it."""
    _, make, options, kind = replay_setup(cx, "reference")
    harness = kind.harness_class(build(make), **options)
    for i, step in enumerate(cx.steps[:failing]):
        try:
            harness.apply(step)
        except CheckFailure as exc:
            raise JUnitUnsupported(f"{file_name}: the reference fails at step {i} ({exc.failure.kind} "
                                   f"{exc.failure.code}), before the failing step {failing}: the model's "
                                   f"expectation there is not known") from None
    return harness


def write_test(cx: Counterexample, file_name: str, written_for: str, index: ClassIndex | None = None) -> JUnitTest:
    """The JUnit 5 test of ``cx`` (a file named ``file_name``), written for the Flink described by
    ``written_for`` whose classes ``index`` lists (what the program needs is checked there: the
    async controller, parallel epochs); JUnitUnsupported (exit 2, one line) for what no writer
    expresses yet, or what that Flink does not have."""
    writer_class = WRITERS.get(cx.machine)
    if writer_class is None:
        raise JUnitUnsupported(f"{file_name}: a {cx.machine} program; the JUnit writer covers the "
                               f"{', '.join(WRITERS)} machines")
    failing = min(cx.failing_step, len(cx.steps) - 1)
    writer = writer_class(cx, file_name, written_for, failing=failing, index=index)
    writer.check_expressible()
    if writer_class.needs_model:
        writer.model = model_before(cx, failing, file_name)
    return writer.write()
