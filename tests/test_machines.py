"""The state machines against the reference and the model, and that they bite."""


import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from cowcheck.model import ModelMap
from cowcheck.core.failures import CheckFailure
from cowcheck.map.machine import MachineConfig, make_map_machine
from cowcheck.core.machine import RunRecord
from cowcheck.map.mutants import SkipPrefixCopy  # copies the entry to change, not the chain prefix
from cowcheck.map.scenarios import BLACK_BOX_SCENARIOS, MAP_SCENARIOS
from cowcheck.reference import CopyOnWriteStateMap

# Runs under whatever --hypothesis-profile selects (ci in CI).
TestReferenceMachine = make_map_machine(CopyOnWriteStateMap).TestCase
TestModelMachine = make_map_machine(ModelMap).TestCase


def _run_ci(factory, config=MachineConfig(), **overrides):
    record = RunRecord()
    run_state_machine_as_test(make_map_machine(factory, config, record),
                              settings=settings(settings.get_profile("ci"), **overrides))
    return record


def test_reference_passes_20k_ci_steps_and_reaches_every_map_scenario():
    # A snapshot mid-rehash with all three array regions non-empty needs programs longer than the
    # ci profile's 80 steps (at 80 it hangs on the luck of the draw: 0 hits with 19 operations).
    record = _run_ci(CopyOnWriteStateMap, stateful_step_count=120)
    never = [name for name in MAP_SCENARIOS if record.coverage[name] == 0]
    assert record.steps >= 20_000
    assert never == []


def test_model_passes_the_black_box_machine_and_reaches_its_scenarios():
    record = _run_ci(ModelMap)
    never = [name for name in BLACK_BOX_SCENARIOS if record.coverage[name] == 0]
    assert record.steps >= 15_000
    assert record.space.fresh + record.space.held >= 100_000  # keyed calls, bulk steps' included
    assert never == []


def test_reference_shows_flinks_live_iteration_quirk_as_a_finding_not_a_failure():
    assert _run_ci(CopyOnWriteStateMap).findings["live-iteration-quirk"] > 0


def test_strict_live_iteration_contract_fails_on_the_faithful_port():
    # docs/contract.md §7: reads that drive the rehash mid-iteration repeat or skip entries.
    with pytest.raises(CheckFailure) as caught:
        _run_ci(CopyOnWriteStateMap, MachineConfig(strict_live_iteration=True))
    assert (caught.value.failure.kind, caught.value.failure.code) == ("DIVERGENCE", "P7")


def test_machine_catches_a_map_that_skips_copying_the_chain_prefix():
    with pytest.raises(CheckFailure) as caught:
        _run_ci(SkipPrefixCopy)
    assert caught.value.failure.kind in ("INVARIANT", "DIVERGENCE")


def test_black_box_machine_catches_the_prefix_mutant_through_the_model_alone():
    with pytest.raises(CheckFailure) as caught:
        _run_ci(SkipPrefixCopy, MachineConfig(white_box=False))
    assert caught.value.failure.kind == "DIVERGENCE"


def test_the_runs_budget_cuts_rules_short_but_not_an_examples_teardown():
    import time

    from cowcheck.async_exec.machine import make_async_machine
    from cowcheck.core.limits import BudgetSpent
    from cowcheck.core.machine import RunRecord
    from cowcheck.reference.async_execution import AsyncExecutionController

    record = RunRecord()
    machine = make_async_machine(AsyncExecutionController, record=record)()
    record.deadline = time.monotonic() - 1
    with pytest.raises(BudgetSpent):
        machine.apply("arrive", 0, [["add", "a", 1]])
    harness = machine.harness
    machine.teardown()  # its final drain runs to the end: Hypothesis must see the example finish
    assert harness.steps[-1].op == "drain"
    assert record.last is harness and not hasattr(machine, "harness")  # let go of once the example ends


def test_an_example_ends_without_a_cycle_holding_the_implementation_or_what_it_handed_back():
    """Hypothesis keeps its machines in reference cycles after their examples; the harness
    (with the implementation and the values it read last) is not held there, and a harness
    holds no cycle of its own, so both go the moment the example ends, without waiting for
    the cycle collector (a map handing back a list of 10^8 items would otherwise pile them up)."""
    import gc
    import weakref

    from cowcheck.core.program import Step
    from cowcheck.map.harness import Harness

    class Handout(CopyOnWriteStateMap):
        def get(self, key, namespace):
            got = super().get(key, namespace)
            return [0] * 5 if got is not None and len(self) > 2 else got  # kept as what the harness read last

    def alive_after(factory, examples: int) -> tuple[int, int]:
        refs = []
        record = RunRecord(on_example=lambda r: refs.append((weakref.ref(r.last), weakref.ref(r.last.impl))))
        try:
            run_state_machine_as_test(make_map_machine(factory, record=record), settings=settings(
                max_examples=examples, stateful_step_count=10, database=None, deadline=None))
        except CheckFailure:
            pass
        record.last = None
        return len(refs), sum(1 for pair in refs if pair[0]() is not None or pair[1]() is not None)

    gc.collect()
    gc.disable()
    try:
        examples, alive = alive_after(CopyOnWriteStateMap, 30)
        assert examples >= 30 and alive == 0, (examples, alive)
        examples, alive = alive_after(Handout, 60)
        assert examples > 3 and alive <= 2, (examples, alive)  # the failing one, in its traceback
        lone = Harness(Handout(capacity=4), white_box=True)  # a harness alone, through live iteration's error
        kept = weakref.ref(lone)
        for step in (Step("put", (1, 2, [3])), Step("put", (2, 2, [3])), Step("iterate_modify", (1, 3, 2, "put"))):
            lone.apply(step)
        del lone
        assert kept() is None
    finally:
        gc.enable()


def test_hypothesis_complaining_about_an_example_the_budget_cut_short_is_the_budgets_end():
    from cowcheck.core.hunt import _cut_by_budget
    from cowcheck.core.limits import BudgetSpent

    try:
        try:
            raise BudgetSpent()
        except BudgetSpent:
            raise ValueError("Inconsistent data generation!")
    except ValueError as exc:
        assert _cut_by_budget(exc)
    assert not _cut_by_budget(ValueError("a real error"))


def test_cyclic_garbage_holding_much_memory_goes_as_the_next_program_starts(monkeypatch):
    """A cycle that holds a few large values makes few objects and many bytes, so the cycle
    collector's own count never calls for it: the drivers collect once the process has grown."""
    import gc
    import weakref

    from cowcheck.core import garbage

    class Holder:
        pass

    monkeypatch.setattr(garbage, "GROWTH", 32 << 20)
    gc.collect()
    gc.disable()
    try:
        garbage._BASE[0] = None
        assert garbage.collect_if_grown() is False  # where the process stands now
        held = Holder()
        held.itself, held.data = held, b"x" * (96 << 20)
        kept = weakref.ref(held)
        del held
        assert kept() is not None  # only the cycle collector frees it
        assert garbage.collect_if_grown() is True and kept() is None
        assert garbage.collect_if_grown() is False  # and not again until the process grows again
    finally:
        gc.enable()
