"""pytest plugin (entry point ``cowcheck``): shrink and store machine failures.

When a cowcheck state machine fails under pytest, the failing program is
shrunk by replay and saved as a counterexample (``--cowcheck-dir``, default
``.cowcheck/counterexamples``); the report shows the shrunk program and the
replay command. Importing the plugin also registers the ``ci``/``dev``/
``nightly`` Hypothesis profiles, so ``--hypothesis-profile=ci`` works.
"""

from __future__ import annotations

import pytest

from properties.harness import CheckFailure
from properties.profiles import register_profiles

register_profiles()


def pytest_addoption(parser):
    parser.addoption("--cowcheck-dir", default=".cowcheck/counterexamples",
                     help="where cowcheck stores shrunk counterexamples of failing machines")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or call.excinfo is None or not isinstance(call.excinfo.value, CheckFailure):
        return
    machine = getattr(getattr(item, "obj", None), "_hypothesis_state_machine_class", None)
    record = getattr(machine, "record", None)
    if record is None or record.last is None or not hasattr(machine, "impl_spec"):
        return
    from properties.counterexample import replay_command
    from properties.hunt import HuntResult, store
    from properties.impls import resolve
    from properties.report import format_failure
    from properties.shrink import shrink

    config = machine.config
    impl = resolve(machine.impl_spec)
    make = lambda: impl.new(capacity=config.capacity)
    options = dict(white_box=record.last.white_box, strict_live_iteration=config.strict_live_iteration)
    # The failure as the harness first raised it (Hypothesis replays it before reporting).
    original = record.first_failure_steps or record.last.steps
    first = record.first_failure or call.excinfo.value.failure
    steps, failure = shrink(original, first, make, **options)
    result = HuntResult(failure, steps, len(original), record.first_failure_at, 0.0, 0.0,
                        record.examples, record.steps, 0.0)
    path, _ = store(result, impl_spec=impl.spec, capacity=config.capacity, found_by={"tool": "pytest", "test": item.nodeid, "generator": "hypothesis"},
                    directory=item.config.getoption("--cowcheck-dir"), harness_options=options)
    report.sections.append(("cowcheck counterexample",
                            format_failure(failure, steps, impl.spec, config.capacity)
                            + f"saved: {path}\nreplay: {replay_command(path, impl.spec)}\n"))
