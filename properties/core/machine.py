"""State machines: the Hypothesis driver base, the run record, and the registry of machine kinds.

A *machine kind* (:class:`MachineKind`) is everything the tools need to run,
replay, shrink, store and render programs of one structure: its table of
operations, its harness, the builder of its Hypothesis machine, its
configuration, its built-in implementations, its scenarios. Each machine
package (``cowcheck.map``, ``cowcheck.async_exec``,
``cowcheck.checkpoint``) registers its kind when imported; the commands
look kinds up by name (:func:`machine_kind`) and hold no structure-specific
branches.

:class:`HarnessMachine` is the base of every machine: each rule builds a
:class:`~cowcheck.core.program.Step` and applies it through the harness;
the shared :class:`RunRecord` counts examples and steps and keeps the first
failure exactly as the harness raised it.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import Counter
from typing import Any, Callable

import attrs
from hypothesis import event
from hypothesis.stateful import RuleBasedStateMachine

from cowcheck.core.boundary import build
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import CheckFailure, Failure
from cowcheck.core.limits import BudgetSpent, unpaced
from cowcheck.core.program import OperationTable, Step

__all__ = ["RunRecord", "HarnessMachine", "MachineKind", "MACHINES", "register_machine", "machine_kind", "add_space",
           "identify", "spec_of", "unimportable"]


def add_space(total, space):
    """``total`` (None at first) with a harness's state-space coverage ``space`` added; harnesses
    that keep one give it an ``update`` method and a no-argument constructor."""
    if space is None:
        return total
    if total is None:
        total = type(space)()
    total.update(space)
    return total


@attrs.define
class RunRecord:
    """Shared by every example a machine class runs: counts, coverage, and the
    harness of the latest example (on failure: the shrunk one)."""

    examples: int = 0
    steps: int = 0
    coverage: Counter = attrs.Factory(Counter)
    findings: Counter = attrs.Factory(Counter)
    space: Any = None  # state-space coverage of the machine's harnesses, if they keep one (``update``)
    last: Any = None  # the harness of the latest example
    first_failure_at: tuple[int, int] | None = None  # (examples, steps) when the first failure showed
    on_example: Callable[["RunRecord"], None] | None = None
    # The first failure as it happened (Hypothesis may replay it afterwards, or
    # an unreliable implementation may not fail again): its failure and program.
    first_failure: Failure | None = None
    first_failure_steps: list | None = None
    internal: Exception | None = None  # cowcheck's own error (InternalError), or a UsageError a driver raised
    deadline: float | None = None  # time.monotonic() after which no step starts (BudgetSpent)


class HarnessMachine(RuleBasedStateMachine):
    """Base of the suite's machines: each rule becomes a Step applied through
    ``self.harness``; examples and steps are counted in the class's
    ``record`` (a RunRecord) and each scenario reached is a Hypothesis event."""

    record: RunRecord
    _finishing = False  # in teardown: the example ends anyway, so the run's budget does not cut it short

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("teardown")
        if own is not None:
            # An example cut short inside teardown (its final drain, its last reads) looks to
            # Hypothesis like one that drew less data than before: a FlakyStrategyDefinition.
            def teardown(self, _own=own):
                self._finishing = True
                try:
                    _own(self)
                finally:
                    self._finishing = False
                    # Hypothesis keeps the machine in a cycle of its own after the example:
                    # without its harness (the implementation, the values read last), it is small.
                    self.__dict__.pop("harness", None)

            cls.teardown = teardown

    def construct(self, make: Callable[[], Any]):
        """``make()``, the implementation of this example (``cowcheck.core.boundary.build``):
        if building it fails, the example fails before its first step and the record keeps
        that failure with its empty program."""
        try:
            return build(make)
        except CheckFailure as exc:
            record = self.record
            if record.first_failure is None:
                record.first_failure = exc.failure
                record.first_failure_steps = []
                record.first_failure_at = (record.examples, record.steps)
            raise

    def attach(self, harness) -> None:
        self.harness = harness
        self.seen: set = set()
        self.applied = 0  # steps of this example given to the harness
        record = self.record
        record.last = harness
        record.examples += 1
        if record.on_example is not None:
            record.on_example(record)

    def apply(self, op: str, *args) -> None:
        record = self.record
        if record.deadline is not None and not self._finishing and time.monotonic() > record.deadline:
            raise BudgetSpent()
        record.steps += 1
        self.applied += 1
        self._through_harness(self.harness.apply, Step(op, args))

    def settle(self) -> None:
        """Every step given so far checked: a harness that checks a step at the next one
        (``cowcheck.core.ahead``, an implementation in a process of its own) checks the
        last now. Call it before reading the harness's state (in ``teardown``)."""
        settle = getattr(self.harness, "settle", None)
        if settle is not None:
            self._through_harness(settle)

    def _through_harness(self, fn, *args) -> None:
        record = self.record
        try:
            fn(*args)
        except CheckFailure as exc:
            if record.first_failure is None:
                steps = list(self.harness.steps)  # up to the failing step (later ones may have been given)
                record.first_failure_at = (record.examples, record.steps - (self.applied - len(steps)))
                record.first_failure = exc.failure
                record.first_failure_steps = steps
            raise
        except (InternalError, UsageError) as exc:  # cowcheck's error, or a driver refusing its input
            if record.internal is None:
                record.internal = exc
            raise
        for name in self.harness.coverage.keys() - self.seen:
            self.seen.add(name)
            event(name)


def _nothing_expected(steps: list[Step]) -> list:
    return [None] * len(steps)


@attrs.frozen(kw_only=True)
class MachineKind:
    """A state machine and everything needed to run, replay, shrink, store and
    render its programs.

    - ``operations``: its table; ``harness_class`` applies it;
    - ``builder(factory, config, record)`` -> the Hypothesis machine class;
    - ``config_class`` (attrs; ``white_box`` and ``capacity`` fields if it has those);
    - ``replay_setup(factory, config)`` -> ``(make_impl, harness options)``;
    - ``builtins``: implementation name -> ``() -> Implementation`` (``reference``, ...);
    - ``probe(kind, impl, config, black_box=, white_box=)`` -> ``Probed``: builds
      one with the run's arguments (ConstructionError if it cannot); call it as
      :meth:`probe_implementation`;
    - ``scenarios``: docs/contract.md §13 scenario ids -> descriptions (``black_box_scenarios``:
      the ids a black-box run can see; None: all; ``out_of_reach(config)``: the ids a run of this
      config cannot reach, as what the implementation takes decides: left out of its coverage);
    - ``expected_results(steps)`` -> the model's result per step, stored in counterexamples;
    - ``setup_lines(impl_spec, config)`` -> Python lines that build the
      implementation (printed above a failing program);
    - ``program(steps, failure, impl_spec, config)`` -> the failing program as lines of Python
      that fail by themselves when pasted (setup included), or None for the steps rendered one
      by one under ``setup_lines``;
    - ``regression(cx, impl_spec, source_name)`` -> a pytest module, or None
      for the generic replay-only rendering;
    - ``describe_state(harness, failed=)`` -> text shown by ``replay --diagram`` after each step;
    - ``findings``: finding ids -> descriptions (reported, not failures);
    - ``walker(seed, steps, instance)`` -> the steps of a seeded swarm walk (the
      walk phase of ``check`` and ``mutants``, ``cowcheck.core.walk_phase``), or
      None for a machine without walks;
    - ``summary``: what the machine drives, in a few words (``cowcheck check --help``);
    - ``walker_takes_config``: the walker also takes ``config=`` (the run's config, e.g. the
      map's largest size class); :meth:`walker_for` passes it;
    - ``recorded_settings``: config fields beyond capacity and checks that a
      counterexample records when they are not the default (the async
      machine's ``epoch_mode``), so a replay builds the same config;
    - ``isolation``: how a user's ``MODULE:FACTORY`` implementation runs in a
      process of its own (:class:`~cowcheck.core.wire.Isolation`), or None
      for a machine whose user implementations run in the checker's process;
    - ``api``, ``sample``: the methods the object a user's factory builds must have, and
      how to build one from a factory with default arguments; a factory meant for
      another machine is then named as such in one line (:meth:`probe_implementation`);
    - ``sampled_harness``: a subclass of its harness that checks the structural invariants
      at every ``every``-th step only (``every=`` keyword; a campaign's ``--invariants-every``),
      or None for a machine that checks everything after every step;
    - ``checks``: ``(properties, structural invariants)`` as a run's header names them
      (``("P1-P7", "I1-I9")``), or () to say "the machine's properties";
    - ``deterministic(config)``: whether the harness drives an implementation deterministically
      under ``config`` (no thread of the implementation's own races its steps): then a built-in
      implementation's failure replays every time, or the nondeterminism is cowcheck's
      (:attr:`cowcheck.core.settle.Subject.deterministic`).
    """

    name: str
    operations: OperationTable
    harness_class: type
    builder: Callable
    config_class: type
    replay_setup: Callable
    builtins: dict
    probe: Callable
    scenarios: dict
    black_box_scenarios: tuple | None = None
    out_of_reach: Callable[[Any], frozenset] = lambda config: frozenset()
    expected_results: Callable[[list], list] = _nothing_expected
    setup_lines: Callable[[str, Any], list] = lambda impl_spec, config: [f"# implementation: {impl_spec}"]
    regression: Callable | None = None
    program: Callable | None = None
    describe_state: Callable[..., str] = lambda harness, failed=False: ""
    findings: dict = attrs.Factory(dict)
    walker: Callable | None = None
    walker_takes_config: bool = False
    recorded_settings: tuple = ()
    isolation: Any = None
    summary: str = ""  # what the machine drives, in a few words (``check --help``)
    api: tuple = ()
    sample: Callable | None = None
    sampled_harness: type | None = None
    checks: tuple = ()
    deterministic: Callable[[Any], bool] = lambda config: True

    def config(self, **settings):
        """The machine's config with those of ``settings`` it has (None values skipped)."""
        fields = attrs.fields_dict(self.config_class)
        return self.config_class(**{k: v for k, v in settings.items() if k in fields and v is not None})

    def probe_implementation(self, impl, config, *, black_box: bool = False, white_box: bool = False):
        """Build one ``impl`` with ``config``'s arguments and decide how it is checked (``Probed``).

        A user's factory (``impl.user``) that builds an object without this machine's
        :attr:`api`, or fails to build here while it builds another machine's, is bad
        usage (UsageError naming the machine it was probably meant for)."""
        user = getattr(impl, "user", False)
        try:
            probed = self.probe(self, impl, config, black_box=black_box, white_box=white_box)
        except (UsageError, InternalError):
            other = self._meant_for(impl) if user else None
            if other is None:
                raise
            raise UsageError(f"{impl.spec} fits the {other.name} machine ({other.summary}), not the {self.name} "
                             f"machine ({self.summary}): use --machine {other.name}") from None
        if user and self.api and self.sample is not None:  # built, but is it this machine's?
            try:
                with unpaced():  # (a probe is not done again when a suspicion does not confirm)
                    built = build(lambda: self.sample(impl.factory))
            except Exception:  # (with other arguments than the probe's: the run will say)
                return probed
            missing = [name for name in self.api if not callable(getattr(built, name, None))]
            if missing:
                raise UsageError(self._not_ours(impl, built, missing))
        return probed

    def _not_ours(self, impl, built, missing: list) -> str:
        other = self._meant_for(impl)
        what = (f"{impl.spec} builds a {type(built).__name__} without {', '.join(missing)}, which the {self.name} "
                f"machine ({self.summary}) calls")
        if other is not None:
            return f"{what}; it fits the {other.name} machine ({other.summary}): use --machine {other.name}"
        return what

    def _meant_for(self, impl):
        """The other machine whose API the object ``impl``'s factory builds has, if any."""
        for other in MACHINES.values():
            if other is self or not other.api or other.sample is None:
                continue
            try:
                with unpaced():  # (a process that starts slowly on a loaded machine is not a hang here)
                    built = build(lambda other=other: other.sample(impl.factory))
            except Exception:
                continue
            if all(callable(getattr(built, name, None)) for name in other.api):
                return other
        return None

    def config_for(self, impl, **settings):
        """:meth:`config` for ``impl``: its ``config_defaults`` first, then ``settings`` (None skipped)."""
        merged = dict(getattr(impl, "config_defaults", None) or {})
        merged.update({k: v for k, v in settings.items() if v is not None})
        return self.config(**merged)

    def walker_for(self, config):
        """The walker of runs with ``config`` (None for a machine without walks)."""
        if self.walker is None or not self.walker_takes_config:
            return self.walker
        return functools.partial(self.walker, config=config)

    def settings(self, config) -> dict:
        """The ``recorded_settings`` of ``config`` that differ from the default."""
        default = self.config_class()
        return {name: getattr(config, name) for name in self.recorded_settings
                if getattr(config, name) != getattr(default, name)}

    def capacity(self, config) -> int:
        """The map capacity a counterexample records (0 for machines without one)."""
        return getattr(config, "capacity", 0) or 0

    def render(self, step: Step) -> str:
        return self.operations.render(step)

    def parse(self, data) -> Step:
        return self.operations.parse(data)


MACHINES: dict[str, MachineKind] = {}


def register_machine(kind: MachineKind) -> MachineKind:
    """Make ``kind`` known by its name (a machine package does this when imported)."""
    if kind.name in MACHINES and MACHINES[kind.name] is not kind:
        raise ValueError(f"machine {kind.name!r} registered twice")
    MACHINES[kind.name] = kind
    return kind


def machine_kind(name: str) -> MachineKind:
    """The machine called ``name``; ValueError naming the known ones otherwise."""
    if name not in MACHINES:
        known = ", ".join(sorted(MACHINES)) or "none (import cowcheck.map, cowcheck.async_exec, ...)"
        raise ValueError(f"unknown machine {name!r}; known: {known}")
    return MACHINES[name]


def identify(machine_class: type, kind_name: str, factory, config, impl_spec: str | None = None) -> type:
    """Mark a machine class a builder made with what the pytest plugin needs to shrink, store
    and replay its failures, whatever the machine: its kind, factory, config and the
    implementation spec that names the factory (a built-in's name, else ``module:qualname``)."""
    machine_class.kind_name = kind_name
    machine_class.factory = factory
    machine_class.config = config
    machine_class.impl_spec = impl_spec or spec_of(kind_name, factory)
    return machine_class


def spec_of(kind_name: str, factory) -> str:
    """The implementation spec that names ``factory``: a mutant's (``mutant:NAME``), a built-in's
    name, else ``MODULE:NAME`` that imports it again in another process — its own qualified name
    when that resolves to it, else a module-level name it is bound to (a factory made by a closure,
    ``functools.partial`` or a lambda and bound as ``make_x = ...``); a factory with no such name
    keeps its qualified name, which :func:`unimportable` describes.

    >>> import functools, collections
    >>> spec_of("map", collections.OrderedDict)
    'collections:OrderedDict'
    """
    own = getattr(factory, "__dict__", {}).get("cowcheck_spec")  # its own (a mutant's), not a base class's
    if isinstance(own, str):
        return own
    kind = MACHINES.get(kind_name)
    for name, builtin in (kind.builtins.items() if kind is not None else ()):
        if builtin().factory is factory:
            return name
    module = getattr(factory, "__module__", None) or type(factory).__module__
    name = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    if _names(module, name, factory):
        return f"{module}:{name}"
    return _bound_name(factory, module) or f"{module}:{name}"


def _names(module: str, qualname: str, factory) -> bool:
    """Whether ``module:qualname`` leads to ``factory`` itself among the modules imported here."""
    value = sys.modules.get(module)
    for part in qualname.split("."):
        value = getattr(value, part, None) if value is not None else None
    return value is factory and module != "__main__"


def _bound_name(factory, home: str) -> str | None:
    """``MODULE:NAME`` of a module-level binding of ``factory`` in an imported module (its own module
    first, then the others in name order); None if it has none."""
    found = []
    for module_name, module in list(sys.modules.items()):
        if module_name == "__main__" or module is None:
            continue
        try:
            names = [key for key, value in list(vars(module).items()) if value is factory and key.isidentifier()]
        except TypeError:  # a module object without a __dict__
            continue
        found += [(module_name != home, module_name, key) for key in sorted(names)]
    if not found:
        return None
    _, module_name, key = min(found)
    return f"{module_name}:{key}"


def unimportable(spec: str) -> str | None:
    """Why ``spec`` (``MODULE:NAME``) cannot be imported by another process, in one line with what to do,
    or None when it can."""
    module, sep, name = spec.partition(":")
    if not sep or (all(part.isidentifier() for part in name.split(".")) and module != "__main__"):
        return None
    return (f"{spec} is not a name another process can import (a closure, lambda or functools.partial "
            f"made in a function): bind the factory to a module-level name of an importable module "
            f"(make_map = ...), or pass impl_spec='MODULE:NAME' to walk_test/make_map_machine")
