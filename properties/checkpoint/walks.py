"""Seeded swarm walks of the checkpoint machine (the walk phase of ``check`` and ``mutants``).

The same operations as the Hypothesis machine (:mod:`cowcheck.checkpoint.machine`)
drawn with ``random.Random(seed)``, over the keys of the backend's own key
groups; each walk switches some kinds of step off (swarm testing) and ends by
cancelling the checkpoints still running, as every example does.
"""

from __future__ import annotations

import random
from typing import Iterator

from cowcheck.checkpoint.harness import STATES, key_pool
from cowcheck.core.program import Step

__all__ = ["walk_program", "key_pool"]

_SWARM_OFF = 0.3
_KINDS = ("kv_put", "kv_get", "kv_get_mutate", "kv_remove", "kv_transform", "checkpoint", "write_key_groups",
          "complete", "cancel", "fail", "restore", "rescale", "recover")


def walk_program(seed: int, steps: int, backend, keys: int = 6, namespaces: int = 2) -> Iterator[Step]:
    from cowcheck.checkpoint.machine import THRESHOLDS

    r = random.Random(seed)
    weights = [0.0 if r.random() < _SWARM_OFF else r.random() for _ in _KINDS]
    weights[0] = weights[0] or 1.0  # a walk that never writes tests little
    pool = key_pool(backend, keys)
    owned = backend.key_group_range
    names = [name for name, _, _ in STATES]
    running: list[int] = []
    completed: list[int] = []
    next_cid = 0
    made = 0
    while made < steps:
        kind = r.choices(_KINDS, weights)[0]
        at = (r.choice(names), r.choice(pool), r.randrange(namespaces))
        batch: list[Step] = []
        if kind == "kv_put":
            batch = [Step("kv_put", (*at, [r.randrange(10) for _ in range(r.randint(0, 3))]))]
        elif kind in ("kv_get", "kv_remove"):
            batch = [Step(kind, at)]
        elif kind in ("kv_get_mutate", "kv_transform"):
            batch = [Step(kind, (*at, r.randrange(10)))]
        elif kind == "checkpoint":
            batch = [Step("checkpoint", (next_cid, r.choice(THRESHOLDS)))]
            running.append(next_cid)
            next_cid += 1
        elif kind == "write_key_groups" and running:
            cid = r.choice(running)
            batch = [Step("write_key_group", (cid,)) for _ in range(r.randint(1, 4))]
        elif kind in ("complete", "cancel", "fail") and running:
            cid = running.pop(r.randrange(len(running)))
            batch = [Step(kind, (cid,))]
            if kind == "complete":
                completed.append(cid)
        elif kind == "restore" and completed:
            lo, hi = sorted((r.randint(owned.start, owned.end), r.randint(owned.start, owned.end)))
            batch = [Step("restore", (r.choice(completed), lo, hi))]
        elif kind == "rescale" and completed:
            batch = [Step("rescale", (r.choice(completed), r.randint(2, 4)))]
        elif kind == "recover" and completed:
            batch = [Step("recover", (r.choice(completed),))]
        for step in batch:
            yield step
        made += len(batch) or 1  # a kind with nothing to act on still counts, so walks end
    for cid in running:
        yield Step("cancel", (cid,))


def walk(seed: int, steps: int, instance) -> Iterator[Step]:
    """The machine's walker (``MachineKind.walker``): ``instance`` is the backend under test."""
    return walk_program(seed, steps, instance)
