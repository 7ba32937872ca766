"""Implementations under test, named by a spec string.

``reference`` (the Flink port), ``model`` (the oracle itself), ``mutant:NAME``
(a seeded bug from the catalogue), ``flink`` (Flink 2.3.0's own map through
JPype, capacity 128 only: ``properties.flink_bridge``), or
``MODULE:FACTORY``: any importable callable that accepts the keyword arguments
``capacity`` and ``state_copier`` and returns a map speaking SPEC §15.

Resolving a spec imports the factory and builds nothing. :func:`probe` then
builds one instance with the arguments the tool chose: a factory that rejects
them is a usage error (:class:`~properties.errors.ConstructionError`, exit 2,
naming the option that changes them), and the instance's introspection
decides between white-box and black-box checks (an ``introspect()`` whose view
breaks the contract of :mod:`properties.introspection` is checked black-box,
with a notice saying why).

Only the built-in specs (:func:`is_builtin`) are resolved from a stored
counterexample: a file is data, and a module it names is imported only when
the user names it on the command line (SPEC §16).

>>> resolve("reference").white_box
True
>>> resolve("nope")
Traceback (most recent call last):
...
properties.impls.UnknownImplementationError: unknown implementation 'nope': expected reference, model, mutant:NAME or MODULE:FACTORY (e.g. mypkg.maps:make_map)
"""

from __future__ import annotations

import copy
import importlib
from typing import Callable

import attrs

from properties.errors import ConstructionError, UsageError
from properties.introspection import introspection_problem, snapshot_problem
from properties.limits import StepTimeout, step_begins, step_ends

__all__ = ["Implementation", "UnknownImplementationError", "Probed", "resolve", "resolve_for", "probe",
           "probe_machine", "construct", "is_builtin", "REQUIRED_METHODS"]

REQUIRED_METHODS = ("get", "contains_key", "put", "put_and_get_old", "remove", "remove_and_get_old",
                    "transform", "snapshot", "keys", "size_of_namespace", "__len__", "__iter__")

# Further spec prefixes register a resolver here; the modules named below are
# imported on first use of their prefix.
_RESOLVERS: dict[str, Callable[[str], "Implementation"]] = {}
_RESOLVER_MODULES = {"mutant": "properties.mutants", "flink": "properties.flink_bridge"}
_BUILTIN_NAMES = ("reference", "model")


class UnknownImplementationError(ValueError):
    """The spec names no usable implementation; ``.spec`` and ``.reason`` say why."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"unknown implementation {spec!r}: {reason}")
        self.spec = spec
        self.reason = reason


@attrs.frozen
class Implementation:
    """A named factory ``factory(capacity=, state_copier=) -> map``.

    ``white_box``: whether its instances offer the introspection view (None:
    unknown until :func:`probe` looks)."""

    spec: str
    factory: Callable
    white_box: bool | None
    description: str = ""
    default_capacity: int = 4  # what the machines use unless told otherwise

    def new(self, capacity: int = 4, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)


@attrs.frozen
class Probed:
    """What :func:`probe` found: whether to check white-box, and a one-line
    ``notice`` for the user when an offered introspection cannot be used."""

    white_box: bool
    notice: str | None = None


def register_resolver(prefix: str, resolver: Callable[[str], Implementation]) -> None:
    _RESOLVERS[prefix] = resolver


def is_builtin(spec: str) -> bool:
    """Whether ``spec`` names an implementation that ships with cowcheck (and so
    may be resolved from a counterexample file without the user naming it)."""
    prefix = spec.partition(":")[0].partition("@")[0]
    return spec in _BUILTIN_NAMES or prefix in _RESOLVER_MODULES


def _import_factory(spec: str, module_name: str, attribute: str) -> Callable:
    """``MODULE:FACTORY``: the callable, or UnknownImplementationError naming what is missing."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UnknownImplementationError(
            spec, f"cannot import module {module_name!r} ({type(exc).__name__}: {exc})") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UnknownImplementationError(spec, f"module {module_name!r} has no callable {attribute!r}")
    return factory


def resolve(spec: str) -> Implementation:
    """The implementation named by ``spec`` (nothing is built); UnknownImplementationError otherwise."""
    if spec == "reference":
        from reference import CopyOnWriteStateMap
        return Implementation(spec, CopyOnWriteStateMap, True, "reference port of Flink 2.3.0 CopyOnWriteStateMap")
    if spec == "model":
        from model import ModelMap
        return Implementation(spec, ModelMap, False, "the snapshot model (oracle)")
    prefix, sep, rest = spec.partition(":")
    # A registered prefix names an implementation with or without ":REST" ("flink").
    base = prefix.partition("@")[0]
    if base in _RESOLVER_MODULES and base not in _RESOLVERS:
        importlib.import_module(_RESOLVER_MODULES[base])
    if base in _RESOLVERS:
        return _RESOLVERS[base](spec[len(base):].lstrip(":"))
    if not sep or not prefix or not rest:
        raise UnknownImplementationError(
            spec, "expected reference, model, mutant:NAME or MODULE:FACTORY (e.g. mypkg.maps:make_map)")
    return Implementation(spec, _import_factory(spec, prefix, rest), None, f"{prefix}.{rest}")


def resolve_for(spec: str, machine: str = "map") -> Implementation:
    """The implementation ``spec`` for the state machine ``machine``: ``reference``,
    ``mutant:NAME`` (a mutant of that machine) or ``MODULE:FACTORY``."""
    if machine == "map":
        return resolve(spec)
    from properties.machines import machine_kind

    kind = machine_kind(machine)
    if spec == "reference":
        return Implementation(spec, kind.load("reference")(), True, f"reference {machine} implementation")
    prefix, sep, rest = spec.partition(":")
    if prefix == "mutant" and sep:
        from properties.mutants import catalogue

        mutant = catalogue().get(rest)
        if mutant is None:
            raise UnknownImplementationError(spec, f"no such mutant; known: {', '.join(sorted(catalogue()))}")
        if mutant.machine != machine:
            raise UnknownImplementationError(spec, f"a {mutant.machine} mutant; use --machine {mutant.machine}")
        return mutant.implementation()
    if not sep or not prefix or not rest:
        raise UnknownImplementationError(spec, f"expected reference, mutant:NAME or MODULE:FACTORY for the "
                                               f"{machine} machine")
    return Implementation(spec, _import_factory(spec, prefix, rest), True, f"{prefix}.{rest}")


def construct(impl: Implementation, capacity: int, option: str = "--capacity"):
    """One map built with the tool's arguments (under the active step time
    limit); ConstructionError if the factory raises or does not return."""
    arguments = {"capacity": capacity, "state_copier": copy.deepcopy}
    step_begins()
    try:
        return impl.new(capacity=capacity, state_copier=copy.deepcopy)
    except StepTimeout:
        raise ConstructionError(impl.spec, arguments, TimeoutError("did not return within the step time limit"),
                                option) from None
    except Exception as exc:
        raise ConstructionError(impl.spec, arguments, exc, option) from None
    finally:
        step_ends()


def probe(impl: Implementation, capacity: int, *, black_box: bool = False,
          white_box: bool = False) -> Probed:
    """Build one map of ``impl`` with ``capacity`` and decide how it is checked.

    ConstructionError if the factory rejects the arguments; UnknownImplementationError
    if the map lacks SPEC §15 methods; ``white_box=True`` (``--white-box``) makes
    an unusable introspection a UsageError instead of a black-box run."""
    instance = construct(impl, capacity)
    missing = [name for name in REQUIRED_METHODS if not callable(getattr(instance, name, None))]
    if missing:
        raise UnknownImplementationError(
            impl.spec, f"{type(instance).__name__} lacks the SPEC §15 methods {', '.join(missing)}")
    if black_box:
        return Probed(False)
    problem = _introspection_problem(instance)
    if problem is None:
        return Probed(True)
    if white_box:
        raise UsageError(f"--white-box: {impl.spec} cannot be checked white-box: {problem}")
    if not callable(getattr(instance, "introspect", None)):
        return Probed(False)
    return Probed(False, f"{impl.spec} is checked black-box (the model's properties only): {problem}")


def probe_machine(kind, impl: Implementation, *, black_box: bool = False) -> Probed:
    """:func:`probe` for the machines whose harness builds the structure (async,
    checkpoint): one harness is built and closed; a factory that raises is a
    ConstructionError."""
    config = kind.config(white_box=False if black_box else None)
    make_impl, options = kind.load("replay_setup")(impl.factory, config)
    harness_class = kind.load("harness_class")
    step_begins()
    try:
        harness = harness_class(make_impl(), **options)
    except StepTimeout:
        raise ConstructionError(impl.spec, {}, TimeoutError("did not return within the step time limit"),
                                "another --impl") from None
    except Exception as exc:
        raise ConstructionError(impl.spec, {}, exc, "another --impl") from None
    finally:
        step_ends()
    close = getattr(harness, "close", None)
    if callable(close):
        close()
    return Probed(bool(getattr(harness, "white_box", False)) and not black_box)


def _introspection_problem(instance) -> str | None:
    step_begins()
    try:
        problem = introspection_problem(instance)
        if problem is not None:
            return problem
        try:  # a snapshot's entries must conform too (I8/I9 read them)
            instance.put(0, 0, [0])
            snap = instance.snapshot()
        except Exception:
            return None  # not introspection's business: the checks will show what is wrong
        return snapshot_problem(snap)
    except StepTimeout:
        return "introspect() or a first put/snapshot did not return within the step time limit"
    finally:
        step_ends()
