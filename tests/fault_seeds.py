"""Which campaign seeds make the fault maps' (``tests/zoo/faults.py``) misbehave, computed from the walks.

The fault maps misbehave on the first put of the state ``[7, 7]``; which seeds'
walks do that depends on the walk generator, so the tests ask here instead of
pinning seed numbers that change whenever the generator grows.
"""

from cowcheck.map.walks import walk_program
from faults import TRIGGER  # tests/zoo/faults.py

_PUTS = {"put": -1, "put_and_get_old": -1, "put_range": -1}


SIZES = "small"  # the size class the fault tests' campaigns use (CampaignConfig(sizes=SIZES)): quick walks


def triggers(seed: int, steps: int = 300, sizes: str = SIZES) -> bool:
    """Whether the campaign walk of ``seed`` stores ``TRIGGER`` (through ``put`` or ``put_and_get_old``)."""
    return any(step.op in _PUTS and list(step.args[-1]) == TRIGGER
               for step in walk_program(seed, steps, sizes=sizes))


def triggering(seeds, steps: int = 300, sizes: str = SIZES) -> list[int]:
    return [seed for seed in seeds if triggers(seed, steps, sizes)]


def lone_trigger(steps: int = 300, width: int = 4, sizes: str = SIZES) -> tuple[int, int, int]:
    """``(start, stop, seed)``: ``width`` consecutive seeds of which only ``seed`` (not the first) triggers."""
    for seed in range(1, 2000):
        start = max(0, seed - width // 2)
        if triggering(range(start, start + width), steps, sizes) == [seed] and seed != start:
            return start, start + width, seed
    raise AssertionError("no lone triggering seed in the first 2,000")


def window(width: int = 40, at_least: int = 2, sizes: str = SIZES) -> tuple[int, int, list[int]]:
    """``(start, stop, triggering seeds)``: the first ``width`` consecutive seeds (from a multiple of
    ``width``) holding at least ``at_least`` triggering seeds."""
    for start in range(0, 4000, width):
        found = triggering(range(start, start + width), sizes=sizes)
        if len(found) >= at_least:
            return start, start + width, found
    raise AssertionError(f"no {width} seeds with {at_least} triggering seeds in the first 4,000")
