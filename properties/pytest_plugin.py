"""pytest plugin (entry point ``cowcheck``): shrink and store machine failures.

When a cowcheck state machine of any kind (map, async, checkpoint, table: the
class its builder returns, e.g. ``make_async_machine(factory).TestCase``) fails
under pytest, the failing program takes the path of every failure
(``cowcheck.core.settle``: replayed, shrunk and replayed again, so a map that
fails at random is stored as nondeterministic, with the count) and is saved as a
counterexample (``--cowcheck-dir``, default ``.cowcheck/counterexamples``; a walk
test, ``cowcheck.map.walk_test(factory)``, raises its failure settled
already); the report shows the shrunk program and the replay command.
Importing the plugin also registers the ``ci``/``dev``/``nightly`` Hypothesis
profiles, so ``--hypothesis-profile=ci`` works, and lets regression tests written
before 0.2.0 import cowcheck's old module names ("properties.map": see
:mod:`cowcheck.core.legacy`).

At the end of the session the plugin says what state space each machine test
explored (largest map, rehash generations, key kinds, what it never reached;
``cowcheck.map.space``), so a pass says how much it covered
(``--cowcheck-no-space`` turns it off).
"""

from __future__ import annotations

import attrs
import pytest

import cowcheck.registry  # noqa: F401  (registers every machine)
from cowcheck.core.counterexample import replay_command, save
from cowcheck.core.failures import CheckFailure
from cowcheck.core.legacy import install as resolve_old_names
from cowcheck.core.machine import machine_kind
from cowcheck.core.profiles import register_profiles
from cowcheck.core.report import format_failure
from cowcheck.core.settle import Settled, Subject, settle

register_profiles()
resolve_old_names()


def pytest_addoption(parser):
    parser.addoption("--cowcheck-dir", default=".cowcheck/counterexamples",
                     help="where cowcheck stores shrunk counterexamples of failing machines")
    parser.addoption("--cowcheck-no-space", action="store_true",
                     help="do not print the state space each cowcheck machine test explored")


_SPACES = pytest.StashKey[list]()


def _space_of(item):
    """The state-space coverage a machine test or a walk test kept, if any."""
    obj = getattr(item, "obj", None)
    machine = getattr(obj, "_hypothesis_state_machine_class", None)
    record = getattr(machine, "record", None)
    return getattr(record, "space", None) or getattr(obj, "cowcheck_space", None)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    spaces = config.stash.get(_SPACES, [])
    if not spaces or config.getoption("--cowcheck-no-space"):
        return
    terminalreporter.section("cowcheck: state space explored")
    for nodeid, lines in spaces:
        terminalreporter.write_line(nodeid)
        for line in lines:
            terminalreporter.write_line(line)


def _store(item, report, settled: Settled) -> None:
    """Store a settled failure of ``item`` and show it under the test's report."""
    cx = attrs.evolve(settled.counterexample, found_by=dict(settled.counterexample.found_by, test=item.nodeid))
    path, _ = save(cx, item.config.getoption("--cowcheck-dir"))
    subject = settled.subject
    report.sections.append(("cowcheck counterexample",
                            format_failure(settled.failure, settled.program, subject.spec, subject.kind,
                                           subject.config, (settled.reproduced, settled.replays))
                            # the test ran the factory in its own process (white-box if it could): so does the replay
                            + f"saved: {path}\nreplay: {replay_command(path, subject.spec, in_process=True)}\n"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "call":
        space = _space_of(item)
        if space is not None and space.lines():
            item.config.stash.setdefault(_SPACES, []).append((item.nodeid, space.lines()))
    if call.when != "call" or call.excinfo is None:
        return
    error = call.excinfo.value
    settled = getattr(error, "cowcheck_settled", None) if isinstance(error, CheckFailure) else None
    if settled is not None:  # a walk test (cowcheck.map.walk_test): settled already
        _store(item, report, settled)
        return
    machine = getattr(getattr(item, "obj", None), "_hypothesis_state_machine_class", None)
    record = getattr(machine, "record", None)
    if record is None or record.last is None or not hasattr(machine, "kind_name"):
        return
    # A failure Hypothesis could not reproduce (a map failing at random) reaches pytest as
    # Hypothesis's FlakyFailure, not as the CheckFailure the harness raised: the record has it.
    if not isinstance(error, CheckFailure) and record.first_failure is None:
        return
    kind = machine_kind(machine.kind_name)
    subject = Subject.of(kind, machine.impl_spec, machine.factory, machine.config)
    if "white_box" in subject.options:  # as the run decided it (a map without introspection is checked black-box)
        subject = attrs.evolve(subject, options=dict(subject.options, white_box=record.last.white_box))
    # The failure as the harness first raised it (Hypothesis replays it before reporting).
    steps = record.first_failure_steps or record.last.steps
    settled = settle(steps, record.first_failure or error.failure, subject,
                     found_by={"tool": "pytest", "generator": "hypothesis"})
    if settled is not None:
        _store(item, report, settled)
