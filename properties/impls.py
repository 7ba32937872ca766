"""Implementations under test, named by a spec string.

``reference`` (the Flink port), ``model`` (the oracle itself), ``mutant:NAME``
(a seeded bug from the catalogue), ``flink`` (Flink 2.3.0's own map through
JPype, capacity 128 only: ``properties.flink_bridge``), or
``MODULE:FACTORY``: any importable callable that accepts the keyword arguments
``capacity`` and ``state_copier`` and returns a map speaking SPEC §15. An
implementation with ``introspect()`` gets the white-box invariants too.

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

__all__ = ["Implementation", "UnknownImplementationError", "resolve", "resolve_for", "REQUIRED_METHODS"]

REQUIRED_METHODS = ("get", "contains_key", "put", "put_and_get_old", "remove", "remove_and_get_old",
                    "transform", "snapshot", "keys", "size_of_namespace", "__len__", "__iter__")

# Further spec prefixes register a resolver here; the modules named below are
# imported on first use of their prefix.
_RESOLVERS: dict[str, Callable[[str], "Implementation"]] = {}
_RESOLVER_MODULES = {"mutant": "properties.mutants", "flink": "properties.flink_bridge"}


class UnknownImplementationError(ValueError):
    """The spec names no usable implementation; ``.spec`` and ``.reason`` say why."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"unknown implementation {spec!r}: {reason}")
        self.spec = spec
        self.reason = reason


@attrs.frozen
class Implementation:
    """A named factory ``factory(capacity=, state_copier=) -> map``."""

    spec: str
    factory: Callable
    white_box: bool
    description: str = ""
    default_capacity: int = 4  # what the machines use unless told otherwise

    def new(self, capacity: int = 4, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)


def register_resolver(prefix: str, resolver: Callable[[str], Implementation]) -> None:
    _RESOLVERS[prefix] = resolver


def _probe(spec: str, factory: Callable, description: str) -> Implementation:
    try:
        instance = factory(capacity=4, state_copier=copy.deepcopy)
    except Exception as exc:
        raise UnknownImplementationError(
            spec, f"factory(capacity=4, state_copier=copy.deepcopy) raised {type(exc).__name__}: {exc}") from None
    missing = [name for name in REQUIRED_METHODS if not callable(getattr(instance, name, None))]
    if missing:
        raise UnknownImplementationError(
            spec, f"{type(instance).__name__} lacks the SPEC §15 methods {', '.join(missing)}")
    return Implementation(spec, factory, callable(getattr(instance, "introspect", None)), description)


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
    """The implementation named by ``spec``; UnknownImplementationError otherwise."""
    if spec == "reference":
        from reference import CopyOnWriteStateMap
        return _probe(spec, CopyOnWriteStateMap, "reference port of Flink 2.3.0 CopyOnWriteStateMap")
    if spec == "model":
        from model import ModelMap
        return _probe(spec, ModelMap, "the snapshot model (oracle)")
    prefix, sep, rest = spec.partition(":")
    # A registered prefix names an implementation with or without ":REST" ("flink").
    if prefix in _RESOLVER_MODULES and prefix not in _RESOLVERS:
        importlib.import_module(_RESOLVER_MODULES[prefix])
    if prefix in _RESOLVERS:
        return _RESOLVERS[prefix](rest)
    if not sep or not prefix or not rest:
        raise UnknownImplementationError(
            spec, "expected reference, model, mutant:NAME or MODULE:FACTORY (e.g. mypkg.maps:make_map)")
    return _probe(spec, _import_factory(spec, prefix, rest), f"{prefix}.{rest}")


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
