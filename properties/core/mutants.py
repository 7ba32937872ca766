"""The seeded-bug catalogue: named mutants of the reference structures, and how one is hunted.

A mutant is a realistic mistake expressed as a small deviation from the
reference: a subclass that overrides one method (or a few lines of one).
Each has a one-line description, the properties or invariants expected to
catch it, and the machine that should kill it. Each machine package
registers its mutants when imported. Mutants are implementations like any
other: ``cowcheck check --impl mutant:NAME``, ``resolve("mutant:NAME")``, and
``cowcheck mutants`` runs the suite against all of them (:func:`run_mutant`).
"""

from __future__ import annotations

import re
import statistics
import time
from typing import Callable

import attrs

from cowcheck.core.errors import did_you_mean
from cowcheck.core.hunt import hunt
from cowcheck.core.impls import Implementation, UnknownImplementationError, register_resolver
from cowcheck.core.machine import MachineKind, machine_kind
from cowcheck.core.settle import Subject
from cowcheck.core.shrink import DEFAULT_REPLAYS
from cowcheck.core.walk_phase import DEFAULT_WALKS

__all__ = ["Mutant", "MutantResult", "register_mutant", "catalogue", "run_mutant", "format_table"]


@attrs.frozen
class Mutant:
    """``factory`` builds the mutated structure (as the machine's reference
    factory does); ``machine`` names the state machine that should kill it;
    ``expected`` the property/invariant codes expected to catch it."""

    name: str
    description: str
    expected: str
    factory: Callable
    machine: str
    source: str = ""  # e.g. "FLINK-9601" for a real bug
    racy: bool = False  # fails at random by design (its own unseeded randomness): not deterministic

    @property
    def expected_codes(self) -> set[str]:
        """The codes ``expected`` names (``"I9 / P2"``, ``"P7 (crash)"``, ...)."""
        return set(re.findall(r"\b[A-Z]\d+\b", self.expected))

    def implementation(self, white_box: bool = True) -> Implementation:
        return Implementation(f"mutant:{self.name}", self.factory, white_box, self.description)


_CATALOGUE: dict[str, Mutant] = {}


def register_mutant(name: str, description: str, expected: str, *, machine: str, source: str = "",
                    racy: bool = False):
    """Class/function decorator adding a mutant factory to the catalogue (``racy``: it fails at random
    by design, so a failure of it may not replay every time)."""

    def decorate(factory):
        if name in _CATALOGUE:
            raise ValueError(f"mutant {name!r} registered twice")
        _CATALOGUE[name] = Mutant(name, description, expected, factory, machine, source, racy)
        try:  # the spec that resolves back to it (a stored counterexample's implementation)
            factory.cowcheck_spec = f"mutant:{name}"
        except (AttributeError, TypeError):
            pass
        return factory

    return decorate


def catalogue() -> dict[str, Mutant]:
    """All mutants of the machine packages imported so far, by name, in registration order."""
    return dict(_CATALOGUE)


def _resolve_mutant(name: str, kind: MachineKind) -> Implementation:
    mutant = _CATALOGUE.get(name)
    if mutant is None:
        close = did_you_mean(f"mutant:{name}", [f"mutant:{known}" for known in _CATALOGUE])
        raise UnknownImplementationError(f"mutant:{name}", f"no such mutant{close}" if close else
                                         f"no such mutant; known: {', '.join(sorted(_CATALOGUE))}")
    if mutant.machine != kind.name:
        raise UnknownImplementationError(f"mutant:{name}", f"a {mutant.machine} mutant; use --machine {mutant.machine}")
    return mutant.implementation()


def _deterministic_mutant(name: str) -> bool:
    mutant = _CATALOGUE.get(name)
    return mutant is not None and not mutant.racy


register_resolver("mutant", _resolve_mutant, deterministic=_deterministic_mutant)


@attrs.frozen
class MutantResult:
    """One row of the kill table."""

    name: str
    machine: str
    killed: bool
    seconds: float
    examples: int
    steps: int
    shrunk_length: int
    caught_by: str
    white_box: bool
    walks: int = 0  # walks the walk phase ran
    walk_steps: int = 0
    phase: str = "-"  # which phase killed it: "walks" or "hypothesis"
    reproduced: int = 1  # replays of the kill's shrunk program that failed the same way, of ``replays``
    replays: int = 1

    @property
    def nondeterministic(self) -> bool:
        return self.killed and self.reproduced < self.replays


def run_mutant(mutant: Mutant, *, white_box: bool, seed: int, examples: int, max_seconds: float,
               profile, walks: int = DEFAULT_WALKS, replays: int = DEFAULT_REPLAYS) -> MutantResult:
    """Hunt one mutant with its machine (the walk phase first, where the machine
    has walks, then Hypothesis); the row of the kill table."""
    kind = machine_kind(mutant.machine)
    config = kind.config(white_box=white_box)
    subject = Subject.of(kind, f"mutant:{mutant.name}", mutant.factory, config)
    result = hunt(lambda rec: kind.builder(mutant.factory, config, rec), subject, base_seed=seed, profile=profile,
                  examples=examples, deadline=time.monotonic() + max_seconds, walker=kind.walker,
                  walks=walks if kind.walker else 0, replays=replays,
                  found_by={"tool": "cowcheck mutants", "seed": seed})
    if result.failure is None:
        return MutantResult(mutant.name, mutant.machine, False, result.elapsed, result.examples, result.steps,
                            0, "-", white_box, result.walks.walks, result.walks.steps)
    found_examples, found_steps = result.found_at or (result.examples, result.steps)
    if result.phase == "walks":
        found_examples = 0
    return MutantResult(mutant.name, mutant.machine, True, result.seconds_to_find, found_examples, found_steps,
                        len(result.program), f"{result.failure.kind} {result.failure.code}", white_box,
                        result.walks.walks, result.walks.steps, result.phase, result.reproduced, result.replays)


def format_table(rows: list[MutantResult]) -> str:
    """The kill table (markdown) and its summary line."""
    header = ("mutant", "killed", "time-to-kill", "found by", "walks", "examples", "steps", "shrunk", "caught by",
              "mode")
    body = [(r.name, "yes" if r.killed else "NO", f"{r.seconds:.3f} s", r.phase if r.killed else "-",
             f"{r.walks:,}", f"{r.examples:,}", f"{r.steps:,}", str(r.shrunk_length) if r.killed else "-",
             r.caught_by + (f", nondeterministic {r.reproduced}/{r.replays}" if r.nondeterministic else ""),
             "white-box" if r.white_box else "black-box")
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(b) for b in body]
    killed = [r for r in rows if r.killed]
    summary = f"\n{len(killed)}/{len(rows)} killed"
    if killed:
        times = [r.seconds for r in killed]
        lengths = [r.shrunk_length for r in killed]
        summary += (f"; time-to-kill median {statistics.median(times):.3f} s, max {max(times):.3f} s; "
                    f"shrunk length median {statistics.median(lengths):g}, max {max(lengths)}")
        unsteady = sum(r.nondeterministic for r in killed)
        if unsteady:
            summary += f"; {unsteady} nondeterministic (the kill's program did not fail in every replay)"
    return "\n".join(out) + summary + "\n"
