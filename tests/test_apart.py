"""A failure of a map in its own process is settled apart (cowcheck.core.apart): the search there, the verdicts here.

The map's process proposes the shrunk program; the checker replays it live and
counts it from records run ahead together. The program stored must be the one
the same map gets in cowcheck's own process, every verdict the checker's: a
process that proposes anything else (a module that patches the search there)
changes nothing but the time.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zoo"))

from cowcheck.core import child, timing  # noqa: E402
from cowcheck.core.ahead import ahead_harness  # noqa: E402
from cowcheck.core.apart import _proposal  # noqa: E402
from cowcheck.core.impls import resolve  # noqa: E402
from cowcheck.core.limits import StepTimeLimit  # noqa: E402
from cowcheck.core.machine import machine_kind  # noqa: E402
from cowcheck.core.remote import shutdown_workers  # noqa: E402
from cowcheck.core.settle import Subject, settle  # noqa: E402
from cowcheck.core.walk_phase import run_walks  # noqa: E402
from cowcheck.core.wire import _SEARCH  # noqa: E402
from cowcheck.map.harness import Harness  # noqa: E402

SPEC = "primitive:copies_target_only"  # copy-on-write of the written entry only: P2, a few steps


@pytest.fixture(autouse=True)
def _fresh_processes():
    shutdown_workers()  # (a test that patches what the map's process runs needs a process forked after it)
    yield
    shutdown_workers()


def _settled_both_ways(replays: int = 3):
    kind = machine_kind("map")
    config = kind.config(capacity=4, white_box=False, key_families=("int", "string"), namespace_families=("int",))
    apart, here = resolve(SPEC, isolated=True), resolve(SPEC, isolated=False)
    make, ahead = apart.batched_walks(kind, config)
    _, options = kind.replay_setup(apart.factory, config)
    with StepTimeLimit(10):
        walked = run_walks(kind.walker_for(config), make, harness_class=ahead, harness_options=options, base_seed=1,
                           walks=32)
        found = walked.finding
        timing.reset()
        settled = settle(found.program, found.failure, Subject.of(kind, SPEC, apart.factory, config),
                         through=(make, ahead), found_by={}, replays=replays)
        taken = timing.taken()
        expected = settle(found.program, found.failure, Subject.of(kind, SPEC, here.factory, config), found_by={},
                          replays=replays)
    return settled, expected, taken


def test_a_failure_settled_apart_is_the_program_the_map_gets_in_process_confirmed_and_counted_here():
    settled, expected, taken = _settled_both_ways()
    assert (settled.failure.kind, settled.failure.code) == ("DIVERGENCE", "P2")
    assert settled.program == expected.program and len(settled.program) < settled.original_length
    assert (settled.reproduced, settled.replays) == (3, 3)
    assert settled.failure.message == expected.failure.message  # the checker's own harness judged it
    assert taken["shrinking"] > 0 and taken["confirming"] > 0 and taken["replays"] > 0


@pytest.mark.slow  # (the usual way, to which it falls back, shrinks call by call: seconds)
def test_a_search_that_proposes_another_program_changes_nothing_but_the_time(monkeypatch):
    def lying(server, machine, options, codes, *rest):
        return [("get", [0, 0])]  # a program of the machine that passes

    monkeypatch.setitem(child._APART, _SEARCH, lying)
    settled, expected, _ = _settled_both_ways()
    assert settled.program == expected.program and (settled.reproduced, settled.replays) == (3, 3)


@pytest.mark.parametrize("answer", [None, [], "get", [("get",)], [("no_such_op", [])], [("get", [0, 0])] * 50,
                                    [("release", [0])]])
def test_what_the_other_process_proposes_is_data_to_check(answer):
    # not a list, empty, malformed, of an unknown operation, too long, ill-formed (a snapshot never taken)
    assert _proposal(answer, ahead_harness(Harness, "map", None), 40) is None
