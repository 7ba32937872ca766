"""Seeded swarm walks over the map's operations, and a harness that samples the invariants.

``walk_program(seed, steps)`` is the raw generator of map programs: each seed
draws its own weights for the operations of
:data:`~cowcheck.map.ops.MAP_OPS` (some switched off), then its world: a key
family and a namespace family (:mod:`cowcheck.core.keys`: ints over the
whole int32 range, longs, strings of every kind, Tuple2 keys; ints,
VoidNamespace, TimeWindow namespaces), pools of keys and namespaces, how often
two keys collide (for ints key == namespace: hash 0, one long chain), a size
class (tiny <= 8 entries, small <= 128, medium <= 4,000, large <= 100,000,
reached through bulk steps), and whether the caller holds its key objects
(``hold_keys``) or hands fresh ones, as Flink does. Then it emits steps one at
a time (a generator: a walk costs no memory up front). Rare interleavings that
uniform generation misses in minutes show up in a fraction of a second when
whole walks are skewed. Campaigns (``cowcheck.spark_fuzz.executor``) and ``cowcheck
check``'s walk phase run them through the harness.

Operations that cost O(entries) (iteration, snapshot reads: ``whole_map``) are
drawn as often as any while a map is small; past 512 entries only while what
they read stays within twice the operations the walk has run (plus 20,000), so a
walk to 10^5 entries costs O(operations) to check.

Determinism: generation uses ``random.Random(seed)`` only (never ``hash()``,
never set or dict order of strings), so a seed gives the same program in
every process, executor and machine.

>>> walk = list(walk_program(3, 40))
>>> walk == list(walk_program(3, 40)) and all(step.op in WALK_OPS for step in walk)
True
"""

from __future__ import annotations

import bisect
import math
import random
from typing import Iterator

from cowcheck.core.keys import FAMILIES
from cowcheck.core.program import Step
from cowcheck.map.harness import Harness
from cowcheck.map.ops import LIVE_SNAPSHOT, MAP_OPS, RELEASED_SNAPSHOT, SIZE_CLASSES, TRANSFORMER_NAMES, draw_args, pick_weighted

__all__ = ["walk_program", "WalkContext", "SampledHarness", "WALK_OPS", "SPACES"]

WALK_OPS = tuple(op.name for op in MAP_OPS)  # the walk draws operations in the table's order
_OPS = tuple(MAP_OPS)
_WRITES = tuple(i for i, op in enumerate(_OPS) if op.writes)
# Swarm testing: each op is switched off in a walk with this probability.
_SWARM_OFF = 0.3
_KEY_SPACES = (2, 3, 4, 6, 8, 12, 16, 32)
_NAMESPACE_SPACES = (1, 2, 3, 4)
_CHAIN_BIAS = (0.0, 0.1, 0.3, 0.5, 0.8)  # probability that two keys collide (int namespace == key: hash 0)
_KEY_FAMILIES = (("int", 0.5), ("string", 0.2), ("tuple", 0.15), ("long", 0.15))
_NAMESPACE_FAMILIES = (("int", 0.55), ("void", 0.25), ("window", 0.2))
_SIZES = (("tiny", 0.3), ("small", 0.35), ("medium", 0.25), ("large", 0.1))
_HOLD_KEYS = 0.15  # walks whose caller holds its key objects
_BULK_PER_STEP = {"tiny": 4, "small": 32, "medium": 1_000, "large": 25_000}
_WHOLE_MAP_CHEAP = 512  # entries below which whole-map operations are drawn as often as any
_READ_PER_OP = 0.25  # past that, whole-map operations read at most this many entries per operation run
_READ_ALLOWANCE = 20_000  # ... plus this
_LARGE_LIVE = 3  # snapshots a large map holds at most at once (checkpoints overlap a few at a time)
# The worlds a walk can draw: "full" (every family, fresh keys, every size class up to
# the walk's ``sizes``) and "classic" (ints 0..31, namespaces 0..3, small maps, no bulk
# steps: what walks drew before the families; benchmarks compare the two).
SPACES = ("full", "classic")


class WalkContext:
    """A walk's random draws, one method per argument domain of the map's
    operations; it tracks the snapshots taken and not yet released, the bulk
    ranges written and the map's size as far as bulk steps make it."""

    def __init__(self, r: random.Random, keys: list, namespaces: list, chain_bias: float, *,
                 family: str = "int", size_class: str = "small", bulk: bool = True) -> None:
        self._r = r
        self._randrange, self._random = r.randrange, r.random
        self.keys, self.namespaces, self.chain_bias = keys, namespaces, chain_bias
        self.family = FAMILIES[family]
        self.same = family == "int" and all(type(n) is int for n in namespaces)  # key == namespace collides
        self.size_class = size_class
        self.bound = SIZE_CLASSES[size_class]
        self.per_step = _BULK_PER_STEP[size_class] if bulk else 0
        self.ranges: list = []  # (first, count, namespace) of bulk puts
        self.bulk_entries = 0  # entries the bulk puts may have added (an upper bound)
        self.live: list[int] = []  # sids of snapshots taken and not yet released, oldest first
        self.taken = 0
        self.ops = 0  # keyed operations drawn so far (a bulk step counts its keys)
        self.read = 0  # entries the O(entries) operations drawn so far read (as far as the estimate knows)

    def affords(self, op) -> bool:
        """Whether the walk may draw ``op``: any operation while the map is small; past that an
        O(entries) one only while the entries such operations read stay within a quarter of the
        operations the walk has run (and a start-up allowance), so checking stays linear."""
        if not op.whole_map or self.estimate <= _WHOLE_MAP_CHEAP:
            return True
        return self.read + self.estimate <= _READ_PER_OP * self.ops + _READ_ALLOWANCE

    @property
    def estimate(self) -> int:
        """An upper bound of the map's size: the pool's pairs and the bulk entries."""
        return len(self.keys) * len(self.namespaces) + self.bulk_entries

    def pair(self):
        randrange = self._randrange
        if self.ranges and self._random() < 0.3:  # a key a bulk step wrote
            first, count, namespace = self.ranges[randrange(len(self.ranges))]
            return self.family.nth(first + randrange(count)), namespace
        k = self.keys[randrange(len(self.keys))]
        if self.same and self._random() < self.chain_bias:
            return k, k
        return k, self.namespaces[randrange(len(self.namespaces))]

    def state(self):
        randrange = self._randrange
        return [randrange(10) for _ in range(randrange(4))]

    def value(self):
        return self._randrange(10)

    def reads(self):
        return self._randrange(1, 9)

    def new_snapshot(self):
        self.live.append(self.taken)
        self.taken += 1
        return self.live[-1]

    def live_snapshot(self):
        return self.live[self._randrange(len(self.live))]

    def released_snapshot(self):
        return self.live.pop(self._randrange(len(self.live)))

    def transformer(self):
        return TRANSFORMER_NAMES[self._randrange(len(TRANSFORMER_NAMES))]

    def position(self):
        return self._randrange(9)

    def change(self):
        return "put" if self._random() < 0.5 else "remove"

    def namespace(self):
        return self.namespaces[self._randrange(len(self.namespaces))]

    def max_empty(self):
        return self._randrange(1, 5)

    # bulk steps: family, first, count (a range of the family's bulk keys)

    def key_family(self):
        return self.family.name

    def first(self):
        r = self._random()
        if self.ranges and r < 0.5:  # inside a range written before: update, read or remove it
            first, count, _ = self.ranges[self._randrange(len(self.ranges))]
            self._within = count
            return first + self._randrange(count)
        self._within = 0
        if r < 0.7 and self.ranges:  # right after the last range: one growing block
            first, count, _ = self.ranges[-1]
            return first + count
        return 0 if r < 0.85 else self._randrange(1 << 20)

    def count(self):
        room = max(1, min(self.per_step, self.bound - self.estimate))
        if self._within:
            room = max(1, min(room, self._within))
        return max(1, int(math.exp(self._random() * math.log(room + 1))))  # log-uniform: small and large


def _draw_world(r: random.Random, sizes: str, space: str, key_families: tuple | None = None,
                namespace_families: tuple | None = None):
    """The keys, namespaces and size class of one walk, keys and namespaces of the families
    named (None: any; the draws are the same as any's when every family is named)."""
    if space == "classic":
        keys = list(range(r.choice(_KEY_SPACES)))
        namespaces = list(range(r.choice(_NAMESPACE_SPACES)))
        return WalkContext(r, keys, namespaces, r.choice(_CHAIN_BIAS), size_class="small", bulk=False), False
    allowed = [(name, w) for name, w in _SIZES if SIZE_CLASSES[name] <= SIZE_CLASSES[sizes]]
    size_class = pick_weighted(r, tuple(allowed))
    family = FAMILIES[pick_weighted(r, _among(_KEY_FAMILIES, key_families))]
    namespace_family = FAMILIES[pick_weighted(r, _among(_NAMESPACE_FAMILIES, namespace_families))]
    pool = r.choice(_KEY_SPACES)
    n_pool = r.choice(_NAMESPACE_SPACES) if namespace_family.name != "void" else 1
    while pool * n_pool > SIZE_CLASSES[size_class] and pool > 1:
        pool //= 2
    keys = _distinct(r, family, pool)
    namespaces = (list(range(n_pool)) if namespace_family.name == "int" and r.random() < 0.6
                  else _distinct(r, namespace_family, n_pool))
    hold = r.random() < _HOLD_KEYS
    return WalkContext(r, keys, namespaces, r.choice(_CHAIN_BIAS), family=family.name, size_class=size_class), hold


def _among(weighted: tuple, names: tuple | None) -> tuple:
    return weighted if names is None else tuple((name, w) for name, w in weighted if name in names)


def _distinct(r: random.Random, family, n: int) -> list:
    out: list = []
    for _ in range(4 * n):
        value = family.draw(r)
        if value not in out:
            out.append(value)
            if len(out) == n:
                break
    return out


def walk_program(seed: int, steps: int, visitor: bool = True, *, sizes: str = "medium",
                 space: str = "full", key_families: tuple | None = None,
                 namespace_families: tuple | None = None) -> Iterator[Step]:
    """The swarm walk of ``seed``: ``steps`` steps, then a read of every snapshot
    still live (P2 at the end, as the machines' teardown does).

    ``visitor``: whether the implementation offers the incremental visitor
    (the machine's precondition); the random draws are the same either way, so
    a seed gives the same program on every implementation that offers it.
    ``sizes``: the largest size class a walk may draw (``large`` in campaigns and
    the nightly profile); ``space``: ``full`` or ``classic`` (:data:`SPACES`);
    ``key_families``, ``namespace_families``: the families a walk's keys and
    namespaces come from (None: any, docs/contract.md §17)."""
    if sizes not in SIZE_CLASSES:
        raise ValueError(f"sizes must be one of {', '.join(SIZE_CLASSES)}, got {sizes!r}")
    if space not in SPACES:
        raise ValueError(f"space must be one of {', '.join(SPACES)}, got {space!r}")
    r = random.Random(seed)
    weights = [0.0 if r.random() < _SWARM_OFF else r.random() for _ in _OPS]
    if not any(weights[i] for i in _WRITES):
        weights[0] = 1.0  # a walk that never writes tests nothing
    for i, op in enumerate(_OPS):
        if (op.needs is not None and not visitor) or op.name == "hold_keys" or (op.bulk and space == "classic"):
            weights[i] = 0.0
    cumulative = list(_accumulate(weights))
    total = cumulative[-1]
    context, hold = _draw_world(r, sizes, space, key_families, namespace_families)
    snapshot, release = MAP_OPS["snapshot"], MAP_OPS["release"]
    rand, last = r.random, len(_OPS) - 1
    if hold:
        yield Step("hold_keys", ())
    for _ in range(steps):
        op = _OPS[bisect.bisect(cumulative, rand() * total, 0, last)]
        while op.whole_map and not context.affords(op):  # O(entries) operations: within the walk's budget
            op = _OPS[bisect.bisect(cumulative, rand() * total, 0, last)]
        if op.snapshot_role in (LIVE_SNAPSHOT, RELEASED_SNAPSHOT) and not context.live:
            op = snapshot
        elif op is snapshot and len(context.live) >= _LARGE_LIVE and context.estimate > _WHOLE_MAP_CHEAP:
            op = release  # each live snapshot of a large map is read in full at the end
        args = draw_args(op, context)
        if op.bulk:
            _bulk_written(context, op.name, args)
        context.ops += args[2] if op.bulk else 1
        if op.whole_map:
            context.read += context.estimate
        yield Step(op.name, args)
    for sid in context.live:
        yield Step("read_snapshot", (sid,))


def _bulk_written(context: WalkContext, name: str, args: tuple) -> None:
    """Keep the walk's ranges and size bound up to date after a bulk step."""
    _, first, count, namespace = args[:4]
    if name == "put_range":
        context.ranges.append((first, count, namespace))
        context.bulk_entries += count
    elif name == "remove_range":
        context.bulk_entries = max(0, context.bulk_entries - count)


def _accumulate(weights):
    total = 0.0
    for w in weights:
        total += w
        yield total


class SampledHarness(Harness):
    """The harness with the structural invariants I1–I9 checked after every
    ``every``-th step only (and on demand, :meth:`final_check`); the model
    properties P1–P7 still run after every step."""

    sampled = True

    def __init__(self, impl, *, every: int, **options) -> None:
        super().__init__(impl, **options)
        self.every = every

    def check_after_step(self, step: Step) -> None:
        self.check_size(step)
        if not self.white_box:
            return
        self._unchecked += 1
        if len(self.steps) % self.every == 0:
            self.check_invariants(step)
        else:
            self._check_rehash_step(step)

