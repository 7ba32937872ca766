"""The map machine: CopyOnWriteStateMap and its snapshots (docs/contract.md §2–§9), registered as machine ``map``.

- ``ops``: the operations, declared once (:data:`~cowcheck.map.ops.MAP_OPS`);
- ``harness``: applies them to an implementation and the model, checks P1–P7 and I0–I9;
- ``machine``: the Hypothesis state machine (one rule per operation);
- ``walks``: seeded swarm walks (campaigns, ``check``'s walk phase);
- ``introspection``: the white-box view's contract; ``scenarios``: docs/contract.md §13 counts;
- ``mutants``: the map's seeded bugs; ``parity``: the same observations from any map;
- ``short_programs``: the property over short programs (CrossHair's backend).

Importing this package registers the machine (and its mutants) with
:mod:`cowcheck.core.machine`.

>>> from cowcheck.core.machine import machine_kind
>>> machine_kind("map").operations["put"].args
('key', 'namespace', 'state')
"""

from __future__ import annotations

import copy
import json

from cowcheck.model import ModelMap
from cowcheck.core.api import StateMapFactory
from cowcheck.core.counterexample import Counterexample
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import CheckFailure
from cowcheck.core.hunt import hunt
from cowcheck.core.impls import Implementation, Probed, UnknownImplementationError, construct
from cowcheck.core.limits import StepTimeout, implementation_call, unpaced
from cowcheck.core.machine import MachineKind, register_machine, spec_of
from cowcheck.core.regression import docstring_text, test_name_for
from cowcheck.core.remote import hidden_methods
from cowcheck.core.replay import show
from cowcheck.core.settle import Subject
from cowcheck.core.shrink import DEFAULT_REPLAYS
from cowcheck.core.states import transform_append
from cowcheck.core.walk_phase import DEFAULT_WALKS
from cowcheck.core.wire import Isolation
from cowcheck.map import mutants  # noqa: F401  (registers the map's seeded bugs)
from cowcheck.map.harness import Harness, describe_state, has_introspection
from cowcheck.map.introspection import introspection_problem, snapshot_problem
from cowcheck.map.machine import MachineConfig, make_map_machine, replay_setup
from cowcheck.map.ops import MAP_OPS, SNAPSHOT_TRANSFORMERS
from cowcheck.map.rendering import imports_for, program_lines
from cowcheck.map.scenarios import BLACK_BOX_SCENARIOS, MAP_SCENARIOS
from cowcheck.map.walks import SampledHarness, walk_program
from cowcheck.reference import CopyOnWriteStateMap

__all__ = ["MAP", "Harness", "MachineConfig", "make_map_machine", "probe", "expected_results", "REQUIRED_METHODS",
           "walk_test",
           "FINDINGS", "has_introspection"]

REQUIRED_METHODS = ("get", "contains_key", "put", "put_and_get_old", "remove", "remove_and_get_old",
                    "transform", "snapshot", "keys", "size_of_namespace", "__len__", "__iter__")

FINDINGS = {
    "live-iteration-quirk": "live iteration repeated or skipped entries after reads drove the incremental "
                            "rehash, without raising (Flink 2.3.0 does the same; docs/contract.md §7)",
}


def probe(kind, impl: Implementation, config, *, black_box: bool = False, white_box: bool = False) -> Probed:
    """Build one map of ``impl`` with the run's capacity and decide how it is checked.

    ConstructionError if the factory rejects the arguments; UnknownImplementationError
    if the map lacks docs/contract.md §15 methods; ``white_box=True`` (``--white-box``) makes
    an unusable introspection a UsageError instead of a black-box run."""
    capacity = config.capacity
    instance = construct(impl, lambda: impl.new(capacity=capacity, state_copier=copy.deepcopy),
                         {"capacity": capacity, "state_copier": copy.deepcopy}, "--capacity")
    missing = [name for name in REQUIRED_METHODS if not callable(getattr(instance, name, None))]
    if missing:
        raise UnknownImplementationError(
            impl.spec, f"{type(instance).__name__} lacks the docs/contract.md §15 methods {', '.join(missing)}")
    if black_box:
        return Probed(False)
    apart = hidden_methods(instance)
    if apart is not None:  # in a process of its own: white-box views are not read across processes
        why = ("it runs in a process of its own, where cowcheck does not read its introspect() view (--in-process "
               "checks it white-box)")
        if white_box:
            raise UsageError(f"--white-box: {impl.spec} cannot be checked white-box: {why}")
        return Probed(False, f"{impl.spec} is checked black-box (the model's properties only): {why}"
                      if "introspect" in apart else None)
    problem = _introspection_problem(instance)
    if problem is None:
        return Probed(True)
    if white_box:
        raise UsageError(f"--white-box: {impl.spec} cannot be checked white-box: {problem}")
    if not callable(getattr(instance, "introspect", None)):
        return Probed(False)
    return Probed(False, f"{impl.spec} is checked black-box (the model's properties only): {problem}")


def _introspection_problem(instance) -> str | None:
    def probe_view():  # calls into the implementation throughout
        problem = introspection_problem(instance)
        if problem is not None:
            return problem
        try:  # a snapshot's entries must conform too (I8/I9 read them)
            instance.put(0, 0, [0])
            snap = instance.snapshot()
        except Exception:
            return None  # not introspection's business: the checks will show what is wrong
        return snapshot_problem(snap)

    try:
        with unpaced():
            return implementation_call(probe_view)
    except StepTimeout:
        return "introspect() or a first put/snapshot did not return within the step time limit"


def expected_results(steps: list) -> list:
    """The model's result of every step as JSON data (None where a step returns
    nothing), from replaying the program on the model itself, which runs every
    step to its end."""
    harness = Harness(ModelMap(), white_box=False)
    results = []
    for step in steps:
        harness.apply(step)
        observed = harness.observed
        results.append(json.loads(show(observed[0])) if observed else None)
    return results


def walk_test(factory: StateMapFactory, *, capacity: int = 4, walks: int = DEFAULT_WALKS, seed: int = 0,
              white_box: bool | None = None, impl_spec: str | None = None, contract: str = "flink",
              replays: int = DEFAULT_REPLAYS):
    """A test function (for pytest) running the walk phase of ``cowcheck check`` on
    maps built by ``factory(capacity=, state_copier=)``: ``walks`` seeded walks
    through the harness. A failing walk takes the path of every failure to its
    counterexample (:func:`cowcheck.core.settle.settle`: shrunk, replayed ``replays``
    times before and after, so a map that fails at random is marked nondeterministic)
    and is raised as CheckFailure; under pytest the cowcheck plugin stores it
    (``--cowcheck-dir``) and shows the program and the replay command, as for a
    failing machine::

        test_my_map_walks = walk_test(mypkg.maps.make_map)
    """
    spec = impl_spec or spec_of("map", factory)

    def test_walks():
        # decided once, as the harness decides it, so the counterexample records how it was checked
        mode = has_introspection(factory(capacity=capacity, state_copier=copy.deepcopy)) if white_box is None \
            else white_box
        config = MachineConfig(capacity=capacity, white_box=mode, contract=contract)
        result = hunt(None, Subject.of(MAP, spec, factory, config), base_seed=seed, walker=MAP.walker_for(config),
                      walks=walks, replays=replays, found_by={"tool": "pytest", "seed": seed})
        test_walks.cowcheck_space = result.walks.space  # the pytest plugin reports what the walks explored
        if result.failure is None:
            return
        error = CheckFailure(result.failure)
        error.cowcheck_settled = result.settled  # stored and shown by the pytest plugin
        raise error

    test_walks.__name__ = f"test_walks_of_{getattr(factory, '__name__', 'map')}"
    return test_walks


def walk(seed: int, steps: int, instance, config: MachineConfig | None = None):
    """The swarm walk of ``seed`` (the campaign's raw walk), with the incremental
    visitor's operation only on maps that offer it, growing maps up to ``config``'s size class."""
    config = config or MachineConfig()
    return walk_program(seed, steps, callable(getattr(instance, "incremental_visitor", None)), sizes=config.sizes,
                        space=config.space)


def setup_lines(impl_spec: str, config) -> list[str]:
    return ["import cowcheck.map  # noqa: F401  (registers the map machine and its mutants)",
            "from cowcheck.core.impls import resolve",
            f"new_map = lambda: resolve({impl_spec!r}).new(capacity={config.capacity})",
            "m = new_map()"]


def program(steps: list, failure, impl_spec: str, config) -> list[str]:
    """The failing program as Python that fails by itself when pasted (:mod:`cowcheck.map.rendering`)."""
    body = program_lines(steps, failure, getattr(config, "contract", "flink"))
    setup = setup_lines(impl_spec, config)
    return setup[:2] + imports_for(body) + setup[2:] + body


def regression(cx: Counterexample, impl_spec: str, source_name: str) -> str:
    """A regression test: the program through the public API, failing on its own visible
    assertion while the map has the bug (:mod:`cowcheck.map.rendering`)."""
    body = program_lines(list(cx.steps), cx.failure, cx.settings.get("contract", "flink"))
    imports = ["import cowcheck.map  # noqa: F401  (registers the map machine and its mutants)",
               "from cowcheck.core.impls import resolve"] + imports_for(body)
    indented = "\n".join("    " + line for line in body)
    return f'''"""Regression from {docstring_text(source_name)}: {cx.failure.kind} {docstring_text(cx.failure.code)} on \
{docstring_text(cx.implementation)}.

{docstring_text(cx.failure.message[:300])}

Generated by `cowcheck replay --to-pytest`; replays on {docstring_text(impl_spec)}. The line marked
"fails here" asserts what the model says; it fails while the map has the bug.
"""

{chr(10).join(imports)}

IMPL = {impl_spec!r}
CAPACITY = {cx.capacity}


def {test_name_for(cx)}():
    new_map = lambda: resolve(IMPL).new(capacity=CAPACITY)  # noqa: E731
    m = new_map()
{indented}
'''


MAP = register_machine(MachineKind(
    name="map",
    summary="CopyOnWriteStateMap and its snapshots",
    operations=MAP_OPS,
    harness_class=Harness,
    builder=make_map_machine,
    config_class=MachineConfig,
    replay_setup=replay_setup,
    builtins={
        "reference": lambda: Implementation("reference", CopyOnWriteStateMap, True,
                                            "reference port of Flink 2.3.0 CopyOnWriteStateMap"),
        "model": lambda: Implementation("model", ModelMap, False, "the snapshot model (oracle)"),
    },
    probe=probe,
    scenarios=MAP_SCENARIOS,
    black_box_scenarios=BLACK_BOX_SCENARIOS,
    expected_results=expected_results,
    setup_lines=setup_lines,
    program=program,
    regression=regression,
    describe_state=describe_state,
    findings=FINDINGS,
    walker=walk,
    walker_takes_config=True,
    # A user's map in a process of its own: put, remove and release return None (their answers are not
    # awaited); the white-box view stays there; the harness's functions that both sides know.
    isolation=Isolation(deferred=frozenset({"put", "remove", "release"}),
                        hidden=frozenset({"introspect", "entry_objects", "snapshot_data"}),
                        functions={"transform_append": transform_append,
                                   **{f"snapshot:{name}": fn for name, fn in SNAPSHOT_TRANSFORMERS.items() if fn}},
                        followed={"has_next": "next_entries"}),  # the harness's visit loop
    recorded_settings=("contract",),
    api=("get", "put", "remove", "snapshot"),
    sample=lambda factory: factory(capacity=128, state_copier=copy.deepcopy),
    sampled_harness=SampledHarness,
    checks=("P1-P7", "I1-I9"),
))
