"""Seeded swarm walks over the map's operations, and a harness that samples the invariants.

``walk_program(seed, steps)`` is the raw generator of map programs: each seed
draws its own weights for the operations of
:data:`~properties.map.ops.MAP_OPS` (some switched off), key and namespace
space sizes and how often key == namespace (hash 0: one long chain), then
emits steps one at a time (a generator: a walk costs no memory up front).
Rare interleavings that uniform generation misses in minutes show up in a
fraction of a second when whole walks are skewed. Campaigns
(``spark_fuzz.executor``) and ``cowcheck check``'s walk phase run them
through the harness.

Determinism: generation uses ``random.Random(seed)`` only (never ``hash()``,
never set or dict order of strings), so a seed gives the same program in
every process, executor and machine.

>>> [s.op for s in walk_program(3, 4)]
['visit', 'put_and_get_old', 'size_of_namespace', 'snapshot', 'read_snapshot']
"""

from __future__ import annotations

import bisect
import random
from typing import Iterator

from properties.core.program import Step
from properties.map.harness import Harness
from properties.map.ops import LIVE_SNAPSHOT, MAP_OPS, RELEASED_SNAPSHOT, TRANSFORMER_NAMES, draw_args

__all__ = ["walk_program", "WalkContext", "SampledHarness", "WALK_OPS"]

WALK_OPS = tuple(op.name for op in MAP_OPS)  # the walk draws operations in the table's order
_OPS = tuple(MAP_OPS)
_WRITES = tuple(i for i, op in enumerate(_OPS) if op.writes)
# Swarm testing: each op is switched off in a walk with this probability.
_SWARM_OFF = 0.3
_KEY_SPACES = (2, 3, 4, 6, 8, 12, 16, 32)
_NAMESPACE_SPACES = (1, 2, 3, 4)
_CHAIN_BIAS = (0.0, 0.1, 0.3, 0.5, 0.8)  # probability that namespace == key (hash 0)


class WalkContext:
    """A walk's random draws, one method per argument domain of the map's
    operations; it tracks the snapshots taken and not yet released."""

    def __init__(self, r: random.Random, keys: int, namespaces: int, chain_bias: float) -> None:
        self._randrange, self._random = r.randrange, r.random
        self.keys, self.namespaces, self.chain_bias = keys, namespaces, chain_bias
        self.live: list[int] = []  # sids of snapshots taken and not yet released, oldest first
        self.taken = 0

    def pair(self):
        k = self._randrange(self.keys)
        return (k, k) if self._random() < self.chain_bias else (k, self._randrange(self.namespaces))

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
        return self._randrange(self.namespaces)

    def max_empty(self):
        return self._randrange(1, 5)


def walk_program(seed: int, steps: int, visitor: bool = True) -> Iterator[Step]:
    """The swarm walk of ``seed``: ``steps`` steps, then a read of every snapshot
    still live (P2 at the end, as the machines' teardown does).

    ``visitor``: whether the implementation offers the incremental visitor
    (the machine's precondition); the random draws are the same either way, so
    a seed gives the same program on every implementation that offers it."""
    r = random.Random(seed)
    weights = [0.0 if r.random() < _SWARM_OFF else r.random() for _ in _OPS]
    if not any(weights[i] for i in _WRITES):
        weights[0] = 1.0  # a walk that never writes tests nothing
    if not visitor:
        for i, op in enumerate(_OPS):
            if op.needs is not None:
                weights[i] = 0.0
    cumulative = list(_accumulate(weights))
    total = cumulative[-1]
    context = WalkContext(r, r.choice(_KEY_SPACES), r.choice(_NAMESPACE_SPACES), r.choice(_CHAIN_BIAS))
    snapshot = MAP_OPS["snapshot"]
    rand, last = r.random, len(_OPS) - 1
    for _ in range(steps):
        op = _OPS[bisect.bisect(cumulative, rand() * total, 0, last)]
        if op.snapshot_role in (LIVE_SNAPSHOT, RELEASED_SNAPSHOT) and not context.live:
            op = snapshot
        yield Step(op.name, draw_args(op, context))
    for sid in context.live:
        yield Step("read_snapshot", (sid,))


def _accumulate(weights):
    total = 0.0
    for w in weights:
        total += w
        yield total


class SampledHarness(Harness):
    """The harness with the structural invariants I1–I9 checked after every
    ``every``-th step only (and on demand, :meth:`final_check`); the model
    properties P1–P7 still run after every step."""

    def __init__(self, impl, *, every: int, **options) -> None:
        super().__init__(impl, **options)
        self.every = every

    def check_after_step(self, step: Step) -> None:
        self.check_size(step)
        if self.white_box and len(self.steps) % self.every == 0:
            self.check_invariants(step)

    def final_check(self) -> None:
        if self.white_box and self.steps and len(self.steps) % self.every:
            self.check_invariants(self.steps[-1])
