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
