"""Upper bounds on the numbers a user or a file gives cowcheck, each with its reason.

A number past its bound is bad usage (exit 2, one line with the reason), so
an absurd argument (``--seeds 0:2**70``, ``--minutes inf``) or file
(``"capacity": 2**40``) never turns into memory, time or work lists
proportional to it. The command line's argument types
(``cowcheck.cli.common``) and the counterexample reader use these.

>>> MAX_REPLAYS.limit
1000
"""

from __future__ import annotations

import attrs

__all__ = ["Bound", "MAX_CAPACITY", "MAX_KEYS", "MAX_EXAMPLES", "MAX_WALKS", "MAX_MINUTES", "MAX_STEP_SECONDS",
           "MIN_STEP_SECONDS", "MIN_SEED_SECONDS",
           "MAX_SECONDS", "MAX_SEEDS", "MAX_SEED", "MAX_STEPS", "MAX_PARTITIONS", "MAX_WORKERS", "MAX_EVERY",
           "MAX_HYPOTHESIS_SEED", "MAX_REPLAYS"]


@attrs.frozen
class Bound:
    """The largest (or, for the ``MIN_`` bounds, smallest) accepted value and why nothing beyond it makes sense."""

    limit: int | float
    reason: str


MAX_CAPACITY = Bound(1 << 16, "a map's white-box checks and incremental visits cost time in proportion to its "
                               "table: a default check takes 5 minutes at 65,536 and over 2 hours at 262,144, "
                               "while the machines' largest maps (10^5 entries) grow their tables by rehashing")
MAX_KEYS = Bound(100_000, "the machines draw keys from a pool built up front")
MAX_EXAMPLES = Bound(10_000_000, "more than a run of days gets through; use --minutes for long runs")
MAX_WALKS = Bound(100_000, "the walk phase is the quick first look; Hypothesis and campaigns do the long runs")
MAX_MINUTES = Bound(7 * 24 * 60, "a week; longer runs are campaigns continued with --resume")
MAX_STEP_SECONDS = Bound(3600, "a step that has not returned in an hour is a hang")
# Lower bounds: a time limit below these times the machine (scheduling, garbage collection, a
# process starting), not the implementation, and every correct map would fail it.
MIN_STEP_SECONDS = Bound(0.1, "a shorter limit times the machine's scheduling and garbage collection, not the "
                              "implementation")
MIN_SEED_SECONDS = Bound(1, "a seed's walk takes longer than this on any map")
MAX_SECONDS = Bound(24 * 3600, "a day")
MAX_SEEDS = Bound(10_000_000, "one Spark job of this many seeds; longer campaigns run --minutes, or --resume")
MAX_SEED = Bound((1 << 63) - 1, "seeds are stored as 64-bit integers (Parquet int64)")
MAX_HYPOTHESIS_SEED = Bound((1 << 64) - 1, "seeds are 64-bit")
MAX_STEPS = Bound(100_000, "a program longer than this shrinks for hours; failures show in far fewer steps")
MAX_PARTITIONS = Bound(100_000, "Spark schedules a task per partition")
MAX_WORKERS = Bound(256, "one process each")
MAX_EVERY = Bound(100_000, "at most --steps steps per walk")
MAX_REPLAYS = Bound(1000, "each replay runs the whole program; a thousand measure a rate to a tenth of a percent")
