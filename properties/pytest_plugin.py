"""pytest plugin (entry point ``cowcheck``): shrink and store machine failures.

When a cowcheck state machine of any kind (map, async, checkpoint, table: the
class its builder returns, e.g. ``make_async_machine(factory).TestCase``) fails
under pytest, the failing program is
replayed, shrunk and replayed again (how reliably it fails: a map that fails
at random is stored as nondeterministic, with the count) and saved as a
counterexample (a walk test, ``properties.map.walk_test(factory)``, raises its
failure already shrunk) (``--cowcheck-dir``, default
``.cowcheck/counterexamples``); the report shows the shrunk program and the
replay command. Importing the plugin also registers the ``ci``/``dev``/
``nightly`` Hypothesis profiles, so ``--hypothesis-profile=ci`` works.

At the end of the session the plugin says what state space each machine test
explored (largest map, rehash generations, key kinds, what it never reached;
``properties.map.space``), so a pass says how much it covered
(``--cowcheck-no-space`` turns it off).
"""

from __future__ import annotations

import pytest

import properties.machines  # noqa: F401  (registers every machine)
from properties.core.counterexample import replay_command
from properties.core.failures import CheckFailure
from properties.core.hunt import HuntResult, store
from properties.core.machine import machine_kind
from properties.core.profiles import register_profiles
from properties.core.report import format_failure
from properties.core.shrink import shrink_failure

register_profiles()


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


def _store_walk_failure(item, report, found: dict) -> None:
    kind = machine_kind("map")
    result = found["result"]
    found_by = dict(found["found_by"], test=item.nodeid)
    path, _ = store(result, kind=kind, impl_spec=found["impl_spec"], config=found["config"], found_by=found_by,
                    directory=item.config.getoption("--cowcheck-dir"), harness_options=found["options"])
    report.sections.append(("cowcheck counterexample",
                            format_failure(result.failure, result.program, found["impl_spec"], kind, found["config"],
                                           (result.reproduced, result.replays))
                            + f"saved: {path}\nreplay: {replay_command(path, found['impl_spec'])}\n"))


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
    found = getattr(error, "cowcheck_found", None) if isinstance(error, CheckFailure) else None
    if found is not None:  # a walk test (properties.map.walk_test): already shrunk
        _store_walk_failure(item, report, found)
        return
    machine = getattr(getattr(item, "obj", None), "_hypothesis_state_machine_class", None)
    record = getattr(machine, "record", None)
    if record is None or record.last is None or not hasattr(machine, "impl_spec"):
        return
    # A failure Hypothesis could not reproduce (a map failing at random) reaches pytest as
    # Hypothesis's FlakyFailure, not as the CheckFailure the harness raised: the record has it.
    if not isinstance(error, CheckFailure) and record.first_failure is None:
        return
    kind = machine_kind(getattr(machine, "kind_name", "map"))
    config = machine.config
    make, options = kind.replay_setup(machine.factory, config)
    options = dict(options)
    if "white_box" in options:  # as the run decided it (a map without introspection is checked black-box)
        options["white_box"] = getattr(record.last, "white_box", options["white_box"])
    # The failure as the harness first raised it (Hypothesis replays it before reporting).
    original = record.first_failure_steps or record.last.steps
    first = record.first_failure or error.failure
    shrunk = shrink_failure(original, first, make, harness_class=kind.harness_class, **options)
    steps, failure = shrunk.program, shrunk.failure
    result = HuntResult(failure, steps, len(original), record.first_failure_at, 0.0, 0.0,
                        record.examples, record.steps, 0.0, reproduced=shrunk.reproduced, replays=shrunk.replays)
    found_by = {"tool": "pytest", "test": item.nodeid, "generator": "hypothesis"}
    path, _ = store(result, kind=kind, impl_spec=machine.impl_spec, config=config, found_by=found_by,
                    directory=item.config.getoption("--cowcheck-dir"), harness_options=options)
    report.sections.append(("cowcheck counterexample",
                            format_failure(failure, steps, machine.impl_spec, kind, config,
                                           (shrunk.reproduced, shrunk.replays))
                            + f"saved: {path}\nreplay: {replay_command(path, machine.impl_spec)}\n"))
