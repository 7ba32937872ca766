"""Every seeded bug in the catalogue is killed by the suite (ci profile, fixed seed)."""

import re

import pytest
from hypothesis import settings

from cowcheck.core.impls import resolve
from cowcheck.core.mutants import catalogue
from cowcheck.core.mutants import run_mutant
from cowcheck.core.shrink import DEFAULT_REPLAYS

CATALOGUE = catalogue()
SEED = 0


def expected_codes(mutant) -> set[str]:
    """The codes a mutant's ``expected`` names (``"I9 / P2"``, ``"P7 (crash)"``, ...)."""
    return set(re.findall(r"\b[A-Z]\d+\b", mutant.expected))


# Replays that count how reliably a kill reproduces: the operator and backend machines' programs restore
# (at up to ten instances, savepoints and upgrades) and write file streams, so their default ten replays
# (of the found program and of each spare the walk phase collected) cost most of their rows' time; two
# still tell a deterministic kill (a reference mutant's) from a nondeterministic one, which settle refuses
# for a deterministic subject.
REPLAYS = {"operator": 2, "backend": 2}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_mutant_is_killed_with_white_box_checks_by_a_property_it_names(name):
    mutant = CATALOGUE[name]
    row = run_mutant(mutant, white_box=True, seed=SEED, examples=2000, max_seconds=120,
                     profile=settings.get_profile("ci"), replays=REPLAYS.get(mutant.machine, DEFAULT_REPLAYS))
    assert row.killed, f"{name} survived {row.examples} examples"
    assert row.shrunk_length >= 1
    code = row.caught_by.split()[-1]
    assert code in expected_codes(CATALOGUE[name]), f"{name} caught by {row.caught_by}, expected {CATALOGUE[name].expected}"


def test_catalogue_has_at_least_15_map_mutants_each_described_with_its_catching_property():
    map_mutants = [m for m in CATALOGUE.values() if m.machine == "map"]
    assert len(map_mutants) >= 15
    assert all(m.description and m.expected for m in CATALOGUE.values())


def test_catalogue_includes_the_real_flink_bugs_that_apply_to_the_map():
    sources = {m.source for m in CATALOGUE.values()}
    assert {"FLINK-9601", "FLINK-7683", "FLINK-26853"} <= sources
    assert "release-resets-required-version" in CATALOGUE


def test_map_mutants_resolve_as_implementations_and_are_not_the_reference():
    reference = resolve("reference").factory
    for mutant in (m for m in CATALOGUE.values() if m.machine == "map"):
        impl = resolve(f"mutant:{mutant.name}")
        assert impl.factory is not reference
        assert issubclass(impl.factory, reference)


@pytest.mark.parametrize("name", [n for n, m in CATALOGUE.items() if m.machine == "map"])
def test_map_mutant_is_killed_by_hypothesis_alone_too(name):
    # The walk phase kills every map mutant first; the Hypothesis phase must not depend on it.
    row = run_mutant(CATALOGUE[name], white_box=True, seed=SEED, examples=2000, max_seconds=120,
                     profile=settings.get_profile("ci"), walks=0)
    assert row.killed and row.phase == "hypothesis", f"{name} survived {row.examples} examples"
    assert row.caught_by.split()[-1] in expected_codes(CATALOGUE[name])
