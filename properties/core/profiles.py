"""Hypothesis settings profiles and process-independent generation.

Profiles: ``ci`` (fast, derandomized, no database), ``dev`` (the default at a
desk), ``nightly`` (long). Select with pytest's ``--hypothesis-profile`` or
``cowcheck check --profile``.

Hypothesis mixes literals found in *local* modules loaded in the process into
generation, so the same seed gives different programs in a Spark worker and in
the driver. :func:`stabilise_generation` turns that off (it replaces an
internal function, pinned and tested in ``tests/test_profiles.py``) and points
Hypothesis's storage at a private directory, which it writes to even with
``database=None``.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import InvalidArgument
from hypothesis.internal.conjecture import providers

__all__ = ["PROFILES", "FIND_ONLY", "register_profiles", "stabilise_generation", "tune_collector"]

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
# Hypothesis finds; the replay shrinker of cowcheck.core.shrink minimises in
# milliseconds what Hypothesis's stateful shrinker takes minutes over.
FIND_ONLY = [Phase.explicit, Phase.reuse, Phase.generate]

PROFILES = {
    "ci": dict(max_examples=300, stateful_step_count=80, derandomize=True, database=None,
               deadline=None, suppress_health_check=_SUPPRESS, print_blob=False, phases=FIND_ONLY),
    "dev": dict(max_examples=200, stateful_step_count=60, deadline=None, suppress_health_check=_SUPPRESS,
                phases=FIND_ONLY),
    "nightly": dict(max_examples=20_000, stateful_step_count=200, deadline=None, database=None,
                    suppress_health_check=_SUPPRESS, phases=FIND_ONLY),
    # CrossHair's symbolic backend (hypothesis-crosshair): ~10 examples a second, so for short
    # programs (cowcheck.map.short_programs), not the state machines; see docs/crosshair.md.
    "crosshair": dict(backend="crosshair", max_examples=200, stateful_step_count=10, deadline=None,
                      database=None, suppress_health_check=_SUPPRESS,
                      phases=FIND_ONLY + [Phase.shrink]),
}


def register_profiles() -> None:
    """Register every profile; the crosshair one only where its backend is
    installed (the ``test`` extra): Hypothesis validates a backend when the
    profile is registered, and the main install has no CrossHair."""
    for name, kwargs in PROFILES.items():
        try:
            settings.register_profile(name, **kwargs)
        except InvalidArgument:
            if kwargs.get("backend") is None:
                raise


def _no_local_constants():
    return providers.Constants()


def stabilise_generation(storage_dir: str | None = None) -> None:
    """Make a seed generate the same programs in every process (idempotent)."""
    if providers._get_local_constants is not _no_local_constants:
        providers._get_local_constants = _no_local_constants
        providers.CONSTANTS_CACHE.cache.clear()
    if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = storage_dir or os.path.join(
            tempfile.gettempdir(), "cowcheck-hypothesis")


register_profiles()


# CPython's cyclic collector runs a full collection about every 70,000 allocations with its
# default thresholds (700, 10, 10), walking the whole heap: with maps of 10^5 entries alive
# that costs as much as the steps themselves (measured: a bulk put of 10^5 entries 9.3 -> 4.9 us
# per put on the reference). Steps allocate many short-lived objects and few cycles.
_COLLECTOR_THRESHOLDS = (10_000, 20, 20)


def tune_collector() -> None:
    """Run the cyclic garbage collector less often (a process running many steps calls this once)."""
    import gc

    gc.set_threshold(*_COLLECTOR_THRESHOLDS)
