"""Seeded swarm walks of the async machine (the walk phase of ``check`` and ``mutants``).

The same operations as the Hypothesis machine (:mod:`properties.async_exec.machine`),
drawn with ``random.Random(seed)``: each walk switches some kinds of step off
(swarm testing), and ends with a drain to 0, as every example does.
"""

from __future__ import annotations

import random
from typing import Iterator

from properties.async_exec.harness import AsyncMachineConfig
from properties.core.program import Step

__all__ = ["statement_choices", "walk_program"]

_SWARM_OFF = 0.3
_KINDS = ("arrive", "arrive_burst", "advance_time", "trigger", "drain", "run_mail", "non_record")


def statement_choices(config: AsyncMachineConfig) -> list:
    """Every statement a record program may hold (``model.async_model``), over the config's state names."""
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


def walk_program(seed: int, steps: int, config: AsyncMachineConfig = AsyncMachineConfig()) -> Iterator[Step]:
    r = random.Random(seed)
    weights = [0.0 if r.random() < _SWARM_OFF else r.random() for _ in _KINDS]
    if not weights[0] and not weights[1]:
        weights[0] = 1.0  # a walk without records tests nothing
    statements, pauses = statement_choices(config), waits(config)

    def arrival() -> Step:
        program = [r.choice(statements) for _ in range(r.randint(1, config.max_statements))]
        return Step("arrive", (r.randrange(config.keys), program))

    made = 0
    while made < steps:
        kind = r.choices(_KINDS, weights)[0]
        if kind == "arrive":
            batch = [arrival()]
        elif kind == "arrive_burst":
            batch = [arrival() for _ in range(r.randint(2, 5))]
        elif kind == "advance_time":
            batch = [Step("advance_time", (r.choice(pauses),))]
        elif kind == "trigger":
            batch = [Step("trigger", ())]
        elif kind == "drain":
            batch = [Step("drain", (r.randint(0, config.max_in_flight),))]
        elif kind == "run_mail":
            batch = [Step("run_mail", (r.randint(1, 6),))]
        else:
            batch = [Step("non_record", ([list(arrival().args) for _ in range(r.choice((0, 0, 1, 2)))],))]
        for step in batch:
            yield step
        made += len(batch)
    yield Step("drain", (0,))  # everything finishes, and the state equals the serial model's


def walk(seed: int, steps: int, instance) -> Iterator[Step]:
    """The machine's walker (``MachineKind.walker``); the controller is built by the harness."""
    return walk_program(seed, steps)
