"""From a failing program to its counterexample: the one path every driver takes.

Whatever found a failure — the walk phase or Hypothesis (``cowcheck check``,
``cowcheck mutants``, :mod:`cowcheck.core.hunt`), a campaign's seed, a walk
test or a machine test under pytest — the program it failed on goes through
:func:`settle`, which returns the :class:`Settled` failure, its
:class:`~cowcheck.core.counterexample.Counterexample` built:

1. *confirmed* on the machine's own harness, call by call, when the path that
   found it was another (``through``): a harness that runs walks ahead
   (:attr:`~cowcheck.core.harness.HarnessBase.runs_ahead`: Flink's batched
   walks) must fail there at the same step with the same kind and code, else
   the two paths disagree and that is cowcheck's error (InternalError); one that
   checks the structural invariants at some steps only
   (:attr:`~cowcheck.core.harness.HarnessBase.sampled`) is replayed with all of
   them, and the failure that replay shows (perhaps earlier, or another code) is
   the one stored, as ``cowcheck replay`` shows it. A harness that
   :attr:`~cowcheck.core.harness.HarnessBase.confirmed_on_replay` (a walk run
   ahead in a map's own process) confirmed it already;
2. *counted and shrunk* (:func:`~cowcheck.core.shrink.shrink_failure`: replayed
   ``replays`` times before and after, so a program that does not fail every
   time is stored as nondeterministic with its count; a hang once, under the full
   step time limit), through the path that found it when that path replays
   faster (it runs ahead), then confirmed call by call again; other failing
   programs of the same kind (``spares``) may give a shorter program. A hang
   found by a walk run ahead in batches (Flink's segments) is settled call by
   call: the suspicious step replayed under the full limit on the machine's
   own harness, where each call is timed alone;
3. *built* into the counterexample of the run's machine, implementation and
   configuration (:class:`Subject`), with the model's result of every step.

An implementation the harness drives deterministically
(:attr:`Subject.deterministic`: the reference, the model, the seeded mutants,
Flink's classes through the bridge) answers a program the same way every
time: if its failure does not reproduce in every replay, what failed was
cowcheck (its time, load, garbage collection, a race of its own), and
:class:`UnreproducibleFailure` (an InternalError: exit 3, or a campaign's
INTERNAL row) is raised instead of a verdict. A user's implementation that
fails in ``k`` of ``n`` replays is stored as nondeterministic with that count.

A failure whose signature is ``known`` (a campaign shrank it before) is
confirmed and returned without a counterexample: counted, not shrunk again.

>>> from cowcheck.core.machine import machine_kind
>>> from cowcheck.core.program import Step
>>> from cowcheck.core.shrink import replay
>>> from cowcheck.map.mutants import SkipPrefixCopy
>>> kind = machine_kind("map")
>>> subject = Subject.of(kind, "mutant:skip-prefix-copy", SkipPrefixCopy, kind.config(capacity=4))
>>> found = [Step("put", ("", 0, [])), Step("put", ("aaZbØ", 86072576, [])), Step("get", ("", 0)),
...          Step("snapshot", (0,)), Step("put", ("", 0, []))]
>>> failure = replay(found, subject.make, **subject.replays())
>>> failure.code, failure.step_index
('I9', 4)
>>> settled = settle(found, failure, subject, found_by={"tool": "doctest"}, replays=1)
>>> settled.counterexample.signature, len(settled.program), settled.original_length
('mutant-skip-prefix-copy--INVARIANT-I9', 4, 5)
"""

from __future__ import annotations

import time
from typing import Any, Callable

import attrs

from cowcheck.core.contract import pointer
from cowcheck.core.counterexample import Counterexample, signature
from cowcheck.core.errors import InternalError
from cowcheck.core.failures import Failure
from cowcheck.core.impls import drives_deterministically
from cowcheck.core.machine import MachineKind
from cowcheck.core.program import Step
from cowcheck.core.shrink import DEFAULT_REPLAYS, confirm_replay, is_hang, remeasured, replay, shrink_failure

__all__ = ["Subject", "Settled", "settle", "counterexample_of", "UnreproducibleFailure"]

GOOD_ENOUGH = 1  # a shrunk program this short is not worth shrinking spares for


@attrs.frozen
class Subject:
    """What a run checks, as its counterexamples record it and a replay rebuilds it: the machine
    ``kind``, the implementation's ``spec``, the machine's ``config``; ``make()`` builds one
    implementation and ``options`` are the harness's (as the run decided them: a map without a
    usable introspection is checked black-box)."""

    kind: MachineKind
    spec: str
    config: Any
    make: Callable[[], object]
    options: dict

    @classmethod
    def of(cls, kind: MachineKind, spec: str, factory: Callable, config, **options) -> "Subject":
        """The subject of ``factory``'s implementations of ``kind`` with ``config`` (the
        machine's ``replay_setup``); ``options`` override the harness options it gives."""
        make, given = kind.replay_setup(factory, config)
        return cls(kind, spec, config, make, dict(given, **options))

    @property
    def harness_class(self) -> type:
        return self.kind.harness_class

    def replays(self) -> dict:
        """The keyword arguments of a replay call by call (``shrink``'s functions)."""
        return dict(self.options, harness_class=self.kind.harness_class)

    @property
    def deterministic(self) -> bool:
        """Whether the harness drives this implementation deterministically: a built-in one
        (:func:`~cowcheck.core.impls.drives_deterministically`) with a configuration whose steps no
        thread of the implementation's own races (``MachineKind.deterministic``)."""
        return drives_deterministically(self.spec) and bool(self.kind.deterministic(self.config))


class UnreproducibleFailure(InternalError):
    """A deterministically driven implementation failed, and some replays of the same program did
    not: cowcheck's own nondeterminism (its time, load, a race of its own), never the
    implementation's failure (docs/contract.md, ``unreproducible``). ``failure`` and ``program``:
    what was seen; ``reproduced``: ``(k, n)``."""

    code = "unreproducible"

    def __init__(self, subject: Subject, program: list, failure: Failure, reproduced: tuple[int, int]) -> None:
        k, n = reproduced
        super().__init__(
            f"{subject.spec} is driven deterministically, yet its {failure.kind} {failure.code} at step "
            f"{failure.step_index} reproduced in {k} of {n} replays: cowcheck's own nondeterminism (time, load, "
            f"a race of its own), not a verdict on {subject.spec} ({pointer(self.code)})",
            f"failure seen: {failure.kind} {failure.code} at step {failure.step_index}: {failure.message}\n"
            f"program ({subject.kind.name} machine, {subject.spec}):\n"
            + "\n".join(subject.kind.render(step) for step in program) + "\n")
        self.failure, self.program, self.reproduced = failure, list(program), reproduced


@attrs.frozen
class Settled:
    """A failure ready to be stored: the ``program`` (shrunk) and its ``failure``, how many of
    ``replays`` fresh replays reproduced it, ``original_length`` (the steps of the program found, to
    its failing step) and its ``counterexample`` (None: a ``known`` signature, not shrunk again)."""

    failure: Failure
    program: list
    original_length: int
    reproduced: int
    replays: int
    counterexample: Counterexample | None
    subject: Subject

    @property
    def nondeterministic(self) -> bool:
        return self.reproduced < self.replays


def counterexample_of(program: list[Step], failure: Failure, subject: Subject, *, found_by: dict,
                      reproduced: tuple[int, int] | None = None) -> Counterexample:
    """The counterexample of ``program`` failing with ``failure`` (as it is: nothing is replayed;
    :func:`settle` confirms and shrinks first). ``reproduced``: ``(k, n)`` replays that failed."""
    kind, options = subject.kind, subject.options
    return Counterexample.build(program, failure, impl=subject.spec, capacity=kind.capacity(subject.config),
                                found_by=found_by, expected=kind.expected_results(program), machine=kind.name,
                                white_box=bool(options.get("white_box", True)),
                                strict_live_iteration=options.get("strict_live_iteration", False),
                                settings=kind.settings(subject.config), reproduced=reproduced)


def settle(program: list[Step], failure: Failure, subject: Subject, *, found_by: dict,
           through: tuple[Callable[[], object], type] | None = None, spares: list = (), known=(),
           replays: int = DEFAULT_REPLAYS, deadline: float | None = None, shrink: bool = True) -> Settled | None:
    """The failure of ``program`` (its ``failure``, found on ``subject``) confirmed, shrunk, counted and
    built into its counterexample (see the module docstring).

    ``through``: ``(make, harness_class)`` of the path that found it, if not the machine's own
    harness; ``spares``: other ``(program, failure)`` found the same way and failing with the same kind
    (the shortest shrunk program that reproduces as reliably is kept); ``known``: signatures not to
    shrink again; ``deadline`` (``time.monotonic()``) bounds the shrinking, not the replays that
    count; ``shrink``: False stores the found program as it is (still counted).

    None: the failure was a call suspected of hanging at the run's pace that returned under the full
    limit (the pace has been taken up): nothing is to be stored, the work that found it is to be
    done again."""
    found_class = through[1] if through is not None else subject.harness_class
    program, failure = _confirmed(program, failure, subject, found_class)
    if not is_hang(failure) and signature(subject.spec, failure.kind, failure.code) in set(known):
        return Settled(failure, program, len(program), 1, 1, None, subject)
    # Shrunk through the path that found it when that replays faster (it runs ahead); then a
    # failure the machine's harness has not confirmed yet is confirmed again, shrunk. A hang such a
    # path found is settled call by call (its confirmation times each call alone, under the full limit).
    fast = through is not None and found_class.runs_ahead and (found_class.confirmed_on_replay or not is_hang(failure))
    make, replaying = (through[0], dict(subject.options, harness_class=found_class)) if fast else (
        subject.make, subject.replays())
    shrinking = dict(replaying, replays=replays, deadline=deadline, shrink=shrink)
    best = shrink_failure(program, failure, make, **shrinking)
    if not best.confirmed:
        return None
    original, chosen = program, False
    for spare, spare_failure in sorted(spares, key=lambda c: len(c[0])):
        if (not shrink or len(best.program) <= GOOD_ENOUGH or best.nondeterministic
                or (deadline is not None and time.monotonic() >= deadline)):
            break  # (a nondeterministic one: each of its candidates would be replayed up to n times)
        if is_hang(spare_failure):
            continue
        spare, spare_failure = _confirmed(spare, spare_failure, subject, found_class)
        other = shrink_failure(spare, spare_failure, make, **shrinking)
        if other.confirmed and len(other.program) < len(best.program) and other.rate >= best.rate:
            best, original, chosen = other, spare, True
    if chosen:  # its count helped choose it: its own count, afresh
        best = remeasured(best, make, **replaying)
    if best.nondeterministic and subject.deterministic:
        raise UnreproducibleFailure(subject, best.program, best.failure, (best.reproduced, best.replays))
    failure = best.failure
    if fast and not found_class.confirmed_on_replay and shrink and not is_hang(failure):
        # the stored failure is the one `cowcheck replay` shows, call by call
        failure = confirm_replay(best.program, failure, subject.make, what="the shrunk program",
                                 **subject.replays())
    cx = counterexample_of(best.program, failure, subject, found_by=found_by,
                           reproduced=(best.reproduced, best.replays))
    return Settled(failure, best.program, len(original), best.reproduced, best.replays, cx, subject)


def _confirmed(program: list[Step], failure: Failure, subject: Subject, found_class: type) -> tuple[list, Failure]:
    """``(program, failure)`` as the machine's harness judges it, call by call (see the module docstring)."""
    program = list(program[: failure.step_index + 1])
    if found_class is subject.harness_class or found_class.confirmed_on_replay or is_hang(failure):
        return program, failure  # (a hang: replayed under the full limit by shrink_failure)
    if found_class.runs_ahead:
        failure = confirm_replay(program, failure, subject.make, what="the walk", **subject.replays())
    elif found_class.sampled:  # checked after every step it may fail earlier, or with another code
        failure = replay(program, subject.make, **subject.replays()) or failure
    return program[: failure.step_index + 1], failure

