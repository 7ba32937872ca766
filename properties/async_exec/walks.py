"""Seeded swarm walks of the async machine (the walk phase of ``check`` and ``mutants``).

The same operations as the Hypothesis machine (:mod:`cowcheck.async_exec.machine`), read
from the same table (:data:`~cowcheck.async_exec.ops.ASYNC_OPS`), their arguments drawn
per domain by :class:`WalkContext` with ``random.Random(seed)``: each walk switches some
operations off (swarm testing), and ends with a drain to 0, as every example does.

>>> [step.op for step in walk_program(3, 4)][-1]
'drain'
"""

from __future__ import annotations

import random
from typing import Iterator

from cowcheck.async_exec.harness import AsyncMachineConfig
from cowcheck.async_exec.ops import ASYNC_OPS
from cowcheck.core.program import Step

__all__ = ["statement_choices", "waits", "timer_sizes", "WalkContext", "walk_program"]

_SWARM_OFF = 0.3
BURST = (2, 5)  # records in one burst of arrivals


def statement_choices(config: AsyncMachineConfig) -> list:
    """Every statement a record program may hold (``cowcheck.model.async_model``), over the config's state names."""
    names = config.states
    return ([["add", s, d] for s in names for d in (1, 2, 5)]
            + [["add_in_accept", s, d] for s in names for d in (1, 3)]
            + [["sum", a, b, t] for a in names for b in names for t in names]
            + [["read", s] for s in names]
            + [["put", s, v] for s in names for v in (0, 7)]
            + [["clear", s] for s in names])


def waits(config: AsyncMachineConfig) -> list[int]:
    """Time steps (ms) around the buffer timeout."""
    timeout = config.buffer_timeout
    return sorted({1, max(1, timeout // 2), max(1, timeout), 3 * timeout or 20})


def timer_sizes(config: AsyncMachineConfig) -> tuple[int, int]:
    """How many timers one key gets in a non-record that fires several on one key: up to the
    in-flight limit and past it (with the record whose disposal fires them, they overflow it)."""
    return config.max_in_flight, config.max_in_flight + 2


class WalkContext:
    """Draws each argument domain of :data:`ASYNC_OPS` with a ``random.Random``."""

    def __init__(self, r: random.Random, config: AsyncMachineConfig) -> None:
        self.r, self.config = r, config
        self.statements, self.pauses = statement_choices(config), waits(config)

    def key(self):
        return self.r.randrange(self.config.keys)

    def program(self):
        return [self.r.choice(self.statements) for _ in range(self.r.randint(1, self.config.max_statements))]

    def millis(self):
        return self.r.choice(self.pauses)

    def target(self):
        return self.r.randint(0, self.config.max_in_flight)

    def limit(self):
        return self.r.randint(1, 6)

    def timers(self):
        r = self.r
        if r.random() < 0.3:  # several timers of one key (timestamps apart) fire on one watermark
            key = self.key()
            return [[key, self.program()] for _ in range(r.randint(*timer_sizes(self.config)))]
        return [[self.key(), self.program()] for _ in range(r.choice((0, 1, 1, 2, 3)))]


def walk_program(seed: int, steps: int, config: AsyncMachineConfig = AsyncMachineConfig()) -> Iterator[Step]:
    r = random.Random(seed)
    ops = list(ASYNC_OPS)
    kinds = [(op, False) for op in ops] + [(op, True) for op in ops if op.burst]
    weights = [0.0 if r.random() < _SWARM_OFF else r.random() * op.weight for op, _ in kinds]
    if not any(w for (op, _), w in zip(kinds, weights) if op.name == "arrive"):
        weights[0] = 1.0  # a walk without records tests nothing
    context = WalkContext(r, config)
    made = 0
    while made < steps:
        op, burst = r.choices(kinds, weights)[0]
        for _ in range(r.randint(*BURST) if burst else 1):
            yield Step(op.name, tuple(value for domain in op.domains for value in domain.draw(context)))
            made += 1
    yield Step("drain", (0,))  # everything finishes, and the state equals the serial model's


def walk(seed: int, steps: int, instance) -> Iterator[Step]:
    """The machine's walker (``MachineKind.walker``); the controller is built by the harness."""
    return walk_program(seed, steps)
