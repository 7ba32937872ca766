"""Which key and namespace families a map takes (docs/contract.md §17), probed before a run.

A Flink map holds keys of one type and namespaces of one type, and a map
written for some types only (one that hashes ``int`` and ``str`` itself, say)
rightly raises for the others. Drawing every family at such a map makes the
first step that hands it a ``Tuple2`` a CRASH, in every run, whatever else is
wrong with it. So before a run the map machine asks the map: for each key
family and each namespace family the run may draw (those chosen, or all), a
throwaway map built with the run's arguments gets one ``put``, ``get``,
``remove`` and ``contains_key`` of a fresh key of the family in a namespace of
the other. A pair whose calls raise an exception is one the map does not take;
the families left out are the fewest that leave only pairs it takes (a family
no pair of which it takes goes first). Anything else a call does (a hang, its
process ending, a wrong answer) is not a refusal: the family stays, and the
run reports what it does.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> from cowcheck.core.impls import Implementation
>>> impl = Implementation("reference", CopyOnWriteStateMap, True)
>>> probe_families(impl, capacity=4, key_families=None, namespace_families=None).left_out
{}
"""

from __future__ import annotations

import copy
from collections import Counter

import attrs

from cowcheck.core.boundary import LateError, is_interruption
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import safe_repr
from cowcheck.core.keys import families_of, fresh
from cowcheck.core.limits import BudgetSpent, implementation_call, unpaced

__all__ = ["FamiliesProbed", "probe_families"]

_ROLES = ("key", "namespace")


@attrs.frozen
class FamiliesProbed:
    """What the probe found: the families the run draws, per role (None: the role's families
    were chosen, not probed, or it takes them all), and ``left_out``: ``{(role, family): why}``."""

    key_families: tuple | None
    namespace_families: tuple | None
    left_out: dict

    @property
    def settings(self) -> dict:
        """The config fields of the families probed (none if nothing was left out)."""
        return {f"{role}_families": getattr(self, f"{role}_families") for role in _ROLES
                if getattr(self, f"{role}_families") is not None}

    def notice(self, spec: str) -> str | None:
        """One line naming each family left out and why, or None."""
        if not self.left_out:
            return None
        parts = []
        for role in _ROLES:
            names = [(name, why) for (r, name), why in self.left_out.items() if r == role]
            if names:
                parts.append(f"{role} famil{'ies' if len(names) > 1 else 'y'} "
                             + ", ".join(f"{name} ({why})" for name, why in names))
        return (f"{spec} does not take {'; '.join(parts)}: left out of this run (--key-families and "
                f"--namespace-families choose; docs/contract.md §17)")


def probe_families(impl, *, capacity: int, key_families: tuple | None,
                   namespace_families: tuple | None) -> FamiliesProbed:
    """The families a run of ``impl`` (maps of ``capacity``) draws: those chosen (a role's
    families named), else those the map takes (see the module docstring). UsageError if it
    takes no family of a role probed."""
    chosen = {"key": key_families, "namespace": namespace_families}
    if all(names is not None for names in chosen.values()):
        return FamiliesProbed(key_families, namespace_families, {})
    kept = {role: [f.name for f in families_of(role, chosen[role])] for role in _ROLES}
    refused = {}
    with unpaced():  # (each call under the full limit: a refusal is not done again)
        for key_family in families_of("key", key_families):
            for namespace_family in families_of("namespace", namespace_families):
                why = _refusal(impl, capacity, key_family, namespace_family)
                if why is not None:
                    refused[(key_family.name, namespace_family.name)] = why
    every_pair = len(families_of("key", key_families)) * len(families_of("namespace", namespace_families))
    if refused and len(refused) == every_pair:
        raise UsageError(f"{impl.spec} takes no key or namespace family that cowcheck draws: it refused each pair of "
                         f"them, e.g. {next(iter(refused.values()))} (docs/contract.md §17)")
    for role in _ROLES:  # a family the user named that the map refuses with every other one: bad usage
        if chosen[role] is None:
            continue
        other = _ROLES[1 - _ROLES.index(role)]
        for name in kept[role]:
            whys = [why for pair, why in refused.items() if pair[_ROLES.index(role)] == name]
            if whys and len(whys) == len(kept[other]):
                raise UsageError(f"{impl.spec} does not take the {role} family {name} that --{role}-families "
                                 f"names: {whys[0]} (docs/contract.md §17)")
    left_out: dict = {}
    while True:
        pairs = [(k, n) for k in kept["key"] for n in kept["namespace"] if (k, n) in refused]
        if not pairs:
            break
        counts: Counter = Counter()
        for pair in pairs:
            for role, name in zip(_ROLES, pair):
                if chosen[role] is None:
                    counts[(role, name)] += 1
        if not counts:
            break  # both roles chosen: the run hands the map what it was told it takes
        most = max(counts.values())
        role, name = min((c for c, n in counts.items() if n == most),
                         key=lambda c: (-len(kept[c[0]]), kept[c[0]].index(c[1])))
        kept[role].remove(name)
        left_out[(role, name)] = next(refused[p] for p in pairs if p[_ROLES.index(role)] == name)
        if not kept[role]:
            every = "; ".join(f"{name} ({why})" for (r, name), why in left_out.items() if r == role)
            raise UsageError(f"{impl.spec} takes no {role} family that cowcheck draws: {every} (docs/contract.md "
                             f"§17)")
    found = {role: tuple(kept[role]) if chosen[role] is None and any(r == role for r, _ in left_out) else
             chosen[role] for role in _ROLES}
    return FamiliesProbed(found["key"], found["namespace"], left_out)


def _refusal(impl, capacity: int, key_family, namespace_family) -> str | None:
    """Why a throwaway map refuses a fresh key of ``key_family`` in a namespace of
    ``namespace_family`` (the call and its exception), or None if it takes them."""
    key, namespace = fresh(key_family.nth(3)), fresh(namespace_family.nth(3))
    calls = (("put", (key, namespace, [1])), ("get", (key, namespace)), ("remove", (key, namespace)),
             ("contains_key", (key, namespace)))

    def attempt():
        m = impl.new(capacity=capacity, state_copier=copy.deepcopy)
        for i, (name, args) in enumerate(calls):
            try:
                getattr(m, name)(*args)
            except BaseException as exc:
                if isinstance(exc, LateError):  # the call before it (a put or a remove sent ahead) raised
                    exc, (name, args) = exc.error, calls[i - 1]
                if isinstance(exc, Exception) and not getattr(exc, "base_exception", False):
                    shown = ", ".join(safe_repr(a) for a in args)
                    return f"m.{name}({shown}) raised {type(exc).__name__}: {str(exc)[:80]}"
                raise
        return None

    try:
        return implementation_call(attempt)
    except BaseException as exc:
        if is_interruption(exc) or isinstance(exc, BudgetSpent):
            raise
        return None  # not a refusal (a hang, its process ending, a crash): the run shows what it is
