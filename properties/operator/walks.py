"""Seeded swarm walks of the operator machine (the walk phase of ``check``, ``mutants`` and campaigns).

The same operations as the Hypothesis machine, drawn with ``random.Random(seed)``:
a walk opens a job of 1 to 4 instances, switches some kinds of step off and
keeps to a few states and codes (swarm testing: the same elements are added,
checkpointed, restored at other parallelisms and read again), and ends by
joining the asynchronous parts still running. Recoveries change the
parallelism of the steps after them (1 to 10 instances).

>>> list(walk_program(76, 4))[:2]
[Step(op='open', args=(3,)), Step(op='savepoint', args=(0, False, 'memory'))]
"""

from __future__ import annotations

import random
from typing import Iterator

from cowcheck.core.program import Step
from cowcheck.operator.ops import (ASYNC, BROADCAST_STATES, CHECKPOINTS, LIST_STATES, MAX_PARALLELISM,
                                   MUTABLE_STATES, OPERATOR_OPS, STATES, TARGETS)

__all__ = ["walk_program", "walk", "WEIGHTS"]

_SWARM_OFF = 0.25
WEIGHTS = {"add": 8, "add_all": 3, "update": 2, "get": 4, "clear": 1, "put": 6, "put_all": 2, "remove": 2,
           "lookup": 3, "contains": 2, "entries": 3, "mutate": 3, "checkpoint": 2, "checkpoint_async": 2.5,
           "savepoint": 1, "savepoint_async": 1, "join": 2, "restore": 3, "recover": 1.2}


class _Walk:
    def __init__(self, r: random.Random, compression: bool) -> None:
        self.r = r
        self.compression = compression
        self.parallelism = r.randint(1, 4)
        self.null_rate = r.choice((0.0, 0.05, 0.2))
        self.codes = r.randint(2, 10)
        used = [s.name for s in STATES if r.random() < 0.5] or [r.choice(STATES).name]
        self.names = {"list_state": tuple(n for n in LIST_STATES if n in used) or LIST_STATES[:1],
                      "broadcast_state": tuple(n for n in BROADCAST_STATES if n in used) or BROADCAST_STATES[:1],
                      "mutable_state": tuple(n for n in MUTABLE_STATES if n in used) or MUTABLE_STATES[:1],
                      "state": tuple(used)}
        self.next_cid = 0
        self.running: list[int] = []
        self.started: list[int] = []

    def code(self) -> int:
        r = self.r
        if r.random() < self.null_rate:
            return r.choice((-1, -2))
        return r.randrange(self.codes)

    def draw(self, domain: str):
        r = self.r
        if domain in self.names:
            return r.choice(self.names[domain])
        if domain == "instance":
            return r.randrange(self.parallelism)
        if domain == "code":
            return self.code()
        if domain == "codes":
            return None if r.random() < self.null_rate else [self.code() for _ in range(r.randint(0, 4))]
        if domain == "pairs":
            return None if r.random() < self.null_rate else [[self.code(), self.code()] for _ in range(r.randint(0, 3))]
        if domain == "where":
            return r.randrange(self.codes)
        if domain == "compressed":
            return self.compression and r.random() < 0.5
        if domain == "target":
            return TARGETS[1] if r.random() < 0.1 else TARGETS[0]  # files: fsync per instance, slow
        if domain == "seed":
            return r.getrandbits(31)
        if domain == "parallelism":
            return r.randint(1, MAX_PARALLELISM)
        if domain == "reregister":
            return r.choice(self.names["state"]) if r.random() < 0.15 else ""
        raise ValueError(f"no draw for domain {domain!r}")

    def step(self, name: str) -> Step | None:
        op = OPERATOR_OPS[name]
        if name in CHECKPOINTS:
            cid = self.next_cid
            self.next_cid += 1
            self.started.append(cid)
            if name in ASYNC:
                self.running.append(cid)
            return Step(name, (cid, *(self.draw(d) for d in op.domains[1:])))
        if name == "join":
            if not self.running:
                return None
            return Step(name, (self.running.pop(self.r.randrange(len(self.running))),))
        if name in ("restore", "recover"):
            if not self.started:
                return None
            cid = self.r.choice(self.started)
            if cid in self.running:
                self.running.remove(cid)
            args = [self.draw(d) for d in op.domains[1:]]
            if name == "recover":
                self.running = []
                self.parallelism = args[0]
            return Step(name, (cid, *args))
        return Step(name, tuple(self.draw(d) for d in op.domains))


def walk_program(seed: int, steps: int, compression: bool = True) -> Iterator[Step]:
    """A seeded swarm walk of about ``steps`` steps."""
    r = random.Random(seed)
    walk = _Walk(r, compression)
    yield Step("open", (walk.parallelism,))
    kinds = list(WEIGHTS)
    weights = [0.0 if r.random() < _SWARM_OFF else WEIGHTS[k] * r.random() for k in kinds]
    if not any(weights[:kinds.index("mutate")]):
        weights[0] = WEIGHTS["add"]
    made = 1
    while made < steps:
        step = walk.step(r.choices(kinds, weights)[0])
        if step is not None:
            yield step
        made += 1
    for cid in walk.running:
        yield Step("join", (cid,))


def walk(seed: int, steps: int, instance, config=None) -> Iterator[Step]:
    """The machine's walker (``MachineKind.walker``)."""
    return walk_program(seed, steps, config.compression if config is not None else True)
