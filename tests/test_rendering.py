"""A printed failing program is literal Python that fails by itself, on its marked line.

For every deterministic map mutant the walk phase finds and shrinks a failure;
the program ``cowcheck check`` prints for it (``MachineKind.program``) is run as
pasted into a file: it must raise on the line marked ``# <-- fails here``, and
the same program run on the reference port must pass (the assertion is about
the bug, not one that fails whatever the map does).
"""

import traceback

import pytest
from hypothesis import settings

import cowcheck.map  # noqa: F401  (registers the map machine and its mutants)
from cowcheck.core.hunt import hunt
from cowcheck.core.machine import machine_kind
from cowcheck.core.settle import Subject
from cowcheck.core.mutants import catalogue
from cowcheck.map.rendering import MARKER

MAP = machine_kind("map")
MUTANTS = sorted(name for name, m in catalogue().items() if m.machine == "map" and "random" not in name)
# Killed white-box only (docs/catalogue.md): their bugs show only through introspection.
NEEDS_INTROSPECTION = {"remove-counts-primary-table", "visitor-skips-after-empty-run"}


def _found(name: str, white_box: bool, contract: str = "flink"):
    mutant = catalogue()[name]
    config = MAP.config(white_box=white_box, contract=contract)
    result = hunt(lambda rec: MAP.builder(mutant.factory, config, rec),
                  Subject.of(MAP, f"mutant:{name}", mutant.factory, config), base_seed=0,
                  profile=settings.get_profile("ci"), examples=50, walker=MAP.walker, walks=32, replays=1)
    return result, config


def _run(lines: list[str]):
    """Run the program as a pasted file; the 1-based line an exception came from, or None."""
    try:
        exec(compile("\n".join(lines), "pasted.py", "exec"), {"__name__": "pasted"})
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "pasted.py"]
        return frames[-1].lineno, exc
    return None


@pytest.mark.parametrize("name, white_box", [(name, True) for name in MUTANTS] +
                         [(name, False) for name in MUTANTS if name not in NEEDS_INTROSPECTION])
def test_the_printed_program_of_a_mutant_fails_on_its_marked_line_and_passes_on_the_reference(name, white_box):
    result, config = _found(name, white_box)
    if result.failure is None:
        pytest.fail(f"{name} survived the walk phase and 50 examples")  # the kill table holds it elsewhere
    if result.failure.kind == "TIMEOUT":
        return  # a hang is its own failure: running it would hang
    lines = MAP.program(result.program, result.failure, f"mutant:{name}", config)
    marked = [i + 1 for i, line in enumerate(lines) if line.endswith(MARKER) or MARKER + "  #" in line]
    assert len(marked) == 1, lines
    raised = _run(lines)
    assert raised is not None, "\n".join(lines)
    assert raised[0] == marked[0], ("\n".join(lines), raised)
    on_reference = [line.replace(f"'mutant:{name}'", "'reference'") for line in lines]
    assert _run(on_reference) is None, "\n".join(on_reference)


def test_a_shallow_snapshot_under_isolation_prints_the_change_of_the_old_state_it_was_handed():
    # The isolation contract changes handed-out old states in place; the program must too.
    result, config = _found("put-and-get-old-returns-live-state", white_box=False, contract="isolation")
    assert (result.failure.kind, result.failure.code) == ("DIVERGENCE", "P2")
    lines = MAP.program(result.program, result.failure, "mutant:put-and-get-old-returns-live-state", config)
    assert any("old.append(-1)" in line for line in lines)
    assert _run(lines) is not None
