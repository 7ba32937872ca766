"""The seeded-bug catalogue: named mutants of the reference structures.

A mutant is a realistic mistake expressed as a small deviation from the
reference: a subclass that overrides one method (or a few lines of one).
Each has a one-line description, the property or invariant expected to catch
it, and the machine that should kill it. Mutants are implementations like any
other: ``cowcheck check --impl mutant:NAME``, ``resolve("mutant:NAME")``, and
``cowcheck mutants`` runs the suite against all of them.

>>> catalogue()["skip-prefix-copy"].expected
'I9 / P2'
"""

from __future__ import annotations

from typing import Callable

import attrs

from properties.impls import Implementation, UnknownImplementationError, register_resolver

__all__ = ["Mutant", "register_mutant", "catalogue", "resolve_mutant"]


@attrs.frozen
class Mutant:
    """``factory(capacity=, state_copier=)`` builds the mutated structure;
    ``machine`` names the state machine that should kill it (``map``, …);
    ``expected`` the property/invariant codes expected to catch it."""

    name: str
    description: str
    expected: str
    factory: Callable
    machine: str = "map"
    source: str = ""  # e.g. "FLINK-9601" for a real bug

    def implementation(self, white_box: bool = True) -> Implementation:
        return Implementation(f"mutant:{self.name}", self.factory, white_box, self.description)


_CATALOGUE: dict[str, Mutant] = {}
# Modules that register mutants when imported (one per structure).
_MUTANT_MODULES = ["properties.map_mutants", "properties.async_mutants", "properties.checkpoint_mutants"]


def register_mutant(name: str, description: str, expected: str, machine: str = "map", source: str = ""):
    """Class/function decorator adding a mutant factory to the catalogue."""

    def decorate(factory):
        if name in _CATALOGUE:
            raise ValueError(f"mutant {name!r} registered twice")
        _CATALOGUE[name] = Mutant(name, description, expected, factory, machine, source)
        return factory

    return decorate


def catalogue() -> dict[str, Mutant]:
    """All mutants by name, in registration order."""
    import importlib

    for module in _MUTANT_MODULES:
        importlib.import_module(module)
    return dict(_CATALOGUE)


def resolve_mutant(name: str) -> Implementation:
    mutants = catalogue()
    if name not in mutants:
        raise UnknownImplementationError(
            f"mutant:{name}", f"no such mutant; known: {', '.join(sorted(mutants))}")
    if mutants[name].machine != "map":
        raise UnknownImplementationError(
            f"mutant:{name}", f"a {mutants[name].machine} mutant; use --machine {mutants[name].machine}")
    return mutants[name].implementation()


register_resolver("mutant", resolve_mutant)
