"""Seeded swarm walks of the backend machine (the walk phase of ``check``, ``mutants`` and campaigns).

The same operations as the Hypothesis machine, drawn from the table's
domains (:data:`~cowcheck.backend.ops.BACKEND_OPS`) with
``random.Random(seed)``: a walk opens a backend of a random key type and
max parallelism, switches some kinds of step off and keeps to a few of the
states, keys and namespaces (swarm testing: the same entry is written,
read, checkpointed and read again, at times that straddle its expiry), and
ends by joining the asynchronous parts still running, as every example does.

>>> list(walk_program(3, 4))[:2]
[Step(op='open', args=('int', 8)), Step(op='advance', args=(5,))]
"""

from __future__ import annotations

import random
from typing import Iterator

from cowcheck.backend.ops import (BACKEND_OPS, CHECKPOINTS, FORMS, KEY_TYPES, MAX_PARALLELISMS, NAMESPACES,
                                  NULLABLE_MAPS, RELATIONS, SNAPSHOTS, STATES, TARGETS, THREADED, TTL_CHANGES,
                                  USER_KEYS, key_pool, states_of_kind)
from cowcheck.backend.values import SCHEMAS
from cowcheck.core.program import Step

__all__ = ["walk_program", "walk", "WEIGHTS", "MAX_WALK_STEPS"]

_SWARM_OFF = 0.25
# How often each kind of step comes, before the swarm switches some off.
WEIGHTS = {"update": 6, "value": 4, "list_add": 5, "list_update": 2, "list_get": 4, "map_put": 5, "map_remove": 2,
           "map_get": 3, "map_contains": 2, "map_entries": 3, "reduce_add": 5, "reduce_get": 3, "clear": 2,
           "keys": 2, "advance": 4, "checkpoint": 1.5, "checkpoint_async": 2, "join": 2, "restore": 1,
           "rescale": 0.7, "recover": 0.4, "compress": 0.5, "map_put_null": 1.5, "savepoint": 1.2,
           "savepoint_async": 1.2, "forms": 0.3, "checkpoint_threshold": 2, "pojo_mutate": 1.5, "upgrade": 2.5,
           "tail_checkpoint": 0.4}
_MILLIS = (1, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20)
_COSTLY = frozenset({"upgrade", "checkpoint_threshold", "forms", "tail_checkpoint"})
_KINDS = ("value", "list", "map", "reducing")


class _Walk:
    """What a walk has opened and started, and how it draws each domain."""

    def __init__(self, r: random.Random, keys: int, native_savepoints: bool = True) -> None:
        self.r = r
        self.forms = FORMS if native_savepoints else ("canonical",)
        self.snapshots = SNAPSHOTS if native_savepoints else ("checkpoint", "canonical")
        self.key_type = r.choice(KEY_TYPES)
        # 128 key groups cost ten times 4 or 8 per snapshot and restore: one walk in seven has them.
        self.max_parallelism = r.choices(MAX_PARALLELISMS, weights=(3, 3, 1))[0]
        pool = key_pool(self.key_type, keys)
        self.pool = r.sample(pool, r.randint(1, len(pool)))
        self.namespaces = r.randint(1, NAMESPACES)
        used = [s.name for s in STATES if r.random() < 0.4] or [r.choice(STATES).name]
        self.names = {f"state:{kind}": tuple(n for n in states_of_kind(kind) if n in used) for kind in _KINDS}
        self.names["state"] = tuple(used)
        self.names["state:nullable_map"] = tuple(n for n in NULLABLE_MAPS if n in used)
        self.names["state:pojo_value"] = ("value_pojo",) if "value_pojo" in used else ()
        self.next_cid = 0
        self.running: list[int] = []
        self.started: list[int] = []

    def draw(self, domain: str):
        r = self.r
        if domain in self.names:
            return r.choice(self.names[domain]) if self.names[domain] else None
        if domain == "key":
            return r.choice(self.pool)
        if domain == "namespace":
            return r.randrange(self.namespaces)
        if domain == "value":
            return r.randrange(10)
        if domain == "nullable_value":
            return None if r.random() < 0.2 else r.randrange(10)
        if domain == "values":
            return [r.randrange(10) for _ in range(r.randint(0, 3))]
        if domain == "user_key":
            return r.randrange(USER_KEYS)
        if domain == "millis":
            return r.choice(_MILLIS)
        if domain == "target":
            return r.choice(TARGETS)
        if domain == "seed":
            return r.getrandbits(31)
        if domain == "group":
            return r.randrange(self.max_parallelism)
        if domain == "split":
            return r.randrange(self.max_parallelism - 1)
        if domain == "compressed":
            return r.random() < 0.5
        if domain == "form":
            return r.choice(self.forms)
        if domain == "relation":
            return r.choice(RELATIONS)
        if domain == "snapshot":
            return r.choice(self.snapshots)
        if domain == "schema":
            return r.choice(SCHEMAS)
        if domain == "ttl_change":
            return r.choice(TTL_CHANGES)
        raise ValueError(f"no draw for domain {domain!r}")

    def step(self, name: str) -> Step | None:
        """A step of kind ``name``, or None if nothing it needs exists yet (or, for a step that
        snapshots and restores several times, three times in four with 128 key groups: such a
        step costs ten times as much there, and the smaller jobs reach the same scenarios)."""
        op = BACKEND_OPS[name]
        if name in _COSTLY and self.max_parallelism > 8 and self.r.random() < 0.75:
            return None
        if name in CHECKPOINTS:
            cid = self.next_cid
            self.next_cid += 1
            self.started.append(cid)
            if name in THREADED:
                self.running.append(cid)
            return Step(name, (cid, *(self.draw(d) for d in op.domains[1:])))
        if name == "join":
            if not self.running:
                return None
            return Step(name, (self.running.pop(self.r.randrange(len(self.running))),))
        if name in ("restore", "rescale", "recover"):
            if not self.started:
                return None
            cid = self.r.choice(self.started)
            if cid in self.running:
                self.running.remove(cid)  # the restore waits for it
            args = [self.draw(d) for d in op.domains[1:]]
            if name == "restore":
                args = sorted(args)
            if name == "recover":
                self.running = []  # recovering waits for every running asynchronous part
            return Step(name, (cid, *args))
        if op.domains and op.domains[0].startswith("state") and not self.names[op.domains[0]]:
            return None  # the walk uses no state of that kind
        return Step(name, tuple(self.draw(d) for d in op.domains))


def walk_program(seed: int, steps: int, keys: int = 6, native_savepoints: bool = True) -> Iterator[Step]:
    """A seeded swarm walk of about ``steps`` steps (savepoints canonical only without ``native_savepoints``)."""
    r = random.Random(seed)
    walk = _Walk(r, keys, native_savepoints)
    yield Step("open", (walk.key_type, walk.max_parallelism))
    kinds = list(WEIGHTS)
    weights = [0.0 if r.random() < _SWARM_OFF else WEIGHTS[k] * r.random() for k in kinds]
    if not any(weights[: kinds.index("keys")]):
        weights[0] = WEIGHTS["update"]  # a walk that never touches a state tests little
    made = 1
    while made < steps:
        step = walk.step(r.choices(kinds, weights)[0])
        if step is not None:
            yield step
        made += 1
    for cid in walk.running:
        yield Step("join", (cid,))


# A walk of this machine is at most this long, whatever the walk phase asks: its snapshots, restores
# and upgrades cost a hundred times a map step, so a failure found in a long walk costs minutes to
# shrink; more, shorter walks reach the same scenarios.
MAX_WALK_STEPS = 120


def walk(seed: int, steps: int, instance, config=None) -> Iterator[Step]:
    """The machine's walker (``MachineKind.walker``): at most :data:`MAX_WALK_STEPS` steps."""
    steps = min(steps, MAX_WALK_STEPS)
    if config is None:
        return walk_program(seed, steps)
    return walk_program(seed, steps, config.keys, config.native_savepoints)
