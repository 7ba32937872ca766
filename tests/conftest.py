"""Shared test setup: the suite's Hypothesis profiles (pick one with
``--hypothesis-profile``; ``ci`` is what CI runs) and process-independent
generation."""

import importlib.abc
import importlib.util
import os
import sys

from hypothesis import settings


class _ThisCheckout(importlib.abc.MetaPathFinder):
    """``cowcheck`` from the folders beside these tests, whatever the installed one is: mutmut runs
    the tests from its copy of the repository (mutants/), whose mutated reference they must import."""

    FOLDERS = {"cowcheck": "properties", "cowcheck.reference": "reference", "cowcheck.model": "model",
               "cowcheck.spark_fuzz": "spark_fuzz"}

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = self.FOLDERS.get(fullname)
        if folder is None:
            return None  # submodules follow their package's __path__
        folder = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])


if "MUTANT_UNDER_TEST" in os.environ:  # set by mutmut (docs/mutmut.md)
    sys.meta_path.insert(0, _ThisCheckout(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import cowcheck.flink  # noqa: F401  (registers --impl flink)
import cowcheck.registry  # noqa: F401  (each machine package registers its machine and mutants)
from cowcheck.core.profiles import register_profiles, stabilise_generation

register_profiles()
stabilise_generation()

# tests/zoo/faults.py's maps (exit, hang, raise on purpose) are imported by name in this process,
# in the maps' own processes and in Spark's workers: the zoo is on the path of all of them.
ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")
sys.path.insert(0, ZOO)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ZOO, os.environ.get("PYTHONPATH")) if p)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# The desk tier, ``python -m pytest -n auto -m "not slow"`` (README), leaves out what starts a JVM
# (Flink's jars, Spark), asks CrossHair's solver, or runs whole campaigns; CI runs everything.
SLOW_MODULES = frozenset({
    "test_campaign_spark", "test_campaign_session", "test_flink_async", "test_flink_backend", "test_flink_bridge",
    "test_flink_parity",
    "test_flink_releases", "test_flink_serializers", "test_flink_walk", "test_prove", "test_short_programs",
    "test_packaging",
})


# And the tests that took 2 s or more in the desk tier's own run (tests/slow_tests.txt, measured): every
# module keeps its fast tests there.
SLOW_TESTS = frozenset(line.strip() for line in open(os.path.join(os.path.dirname(__file__), "slow_tests.txt"),
                                                     encoding="utf-8") if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module is not None else ""
        if module in SLOW_MODULES or f"tests/{item.nodeid.partition('tests/')[2] or item.nodeid}" in SLOW_TESTS \
                or item.nodeid in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
