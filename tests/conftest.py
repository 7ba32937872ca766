"""Shared test setup: the suite's Hypothesis profiles (pick one with
``--hypothesis-profile``; ``ci`` is what CI runs) and process-independent
generation."""

import os

from hypothesis import settings

import properties.flink  # noqa: F401  (registers --impl flink)
import properties.machines  # noqa: F401  (each machine package registers its machine and mutants)
from properties.core.profiles import register_profiles, stabilise_generation

register_profiles()
stabilise_generation()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# The desk tier, ``python -m pytest -n auto -m "not slow"`` (README), leaves out what starts a JVM
# (Flink's jars, Spark), asks CrossHair's solver, or runs whole campaigns; CI runs everything.
SLOW_MODULES = frozenset({
    "test_campaign_spark", "test_campaign_session", "test_flink_async", "test_flink_bridge", "test_flink_parity",
    "test_flink_releases", "test_flink_serializers", "test_flink_walk", "test_prove", "test_short_programs",
    "test_packaging",
})


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if item.module is not None and item.module.__name__.rpartition(".")[2] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
