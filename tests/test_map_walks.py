"""Seeded random walks through the harness against the reference map.

A fast, deterministic complement to the Hypothesis machines (and the test
selection mutmut runs against ``reference/cow_state_map.py``, see
docs/mutmut.md): each walk is a plain list of :class:`Step` driven through
:class:`Harness` in white-box mode, so every step checks P1–P7 against the
model and I1–I9 on the structure. Walks vary per seed: capacity, key and
namespace spaces, how often key == namespace (hash 0, long chains), boundary
int keys (int32 edges, beyond int32) and str keys (the non-int hash path),
and the weight of every operation (some walks are snapshot-heavy, some
remove-heavy, some never snapshot).

A failing walk prints as a runnable program (``render_program``).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from cowcheck.core.failures import CheckFailure
from cowcheck.map.harness import Harness
from cowcheck.map.ops import SNAPSHOT_TRANSFORMERS, render_program
from cowcheck.core.program import Step
from cowcheck.map.scenarios import MAP_SCENARIOS
from cowcheck.reference import CopyOnWriteStateMap

OPS = (
    "put", "put_and_get_old", "get", "get_mutate", "contains_key", "remove", "remove_and_get_old",
    "transform", "rehash", "snapshot", "read_snapshot", "read_snapshot_transformed", "release",
    "iterate", "iterate_modify", "keys", "size_of_namespace", "visit",
)
# Ints at and beyond the int32 edges (Integer vs Long hashCode) and str keys.
BOUNDARY_KEYS = (-(1 << 31) - 1, -(1 << 31), (1 << 31) - 1, 1 << 31, -(1 << 63), (1 << 63) - 1)
STR_KEYS = ("", "a", "b", "ab", "ba", "Aa", "BB", "k\u00e9y", "\U0001f600")

WALKS = 320
BATCHES = 8
STEPS = 250


def walk_steps(seed: int, steps: int = STEPS) -> tuple[int, list[Step]]:
    """(capacity, program) of walk ``seed``: deterministic, process-independent."""
    r = random.Random(seed)
    capacity = r.choice((4, 4, 8, 16))
    weights = [r.random() for _ in OPS]
    if r.random() < 0.15:
        weights[OPS.index("snapshot")] = 0.0  # some walks never snapshot
    n_keys = r.choice((3, 6, 12, 24, 48))
    n_ns = r.choice((1, 2, 3))
    key_eq_ns = r.choice((0.0, 0.2, 0.5))
    keys: list = list(range(n_keys))
    namespaces: list = list(range(n_ns))
    if r.random() < 0.3:
        keys += list(BOUNDARY_KEYS)
        namespaces += [-1, 1 << 20] + list(BOUNDARY_KEYS[:4])
    if r.random() < 0.3:
        keys += list(STR_KEYS)
        namespaces += ["ns", "NS"]
    program: list[Step] = []
    sid = 0
    while len(program) < steps:
        op = r.choices(OPS, weights)[0]
        k = r.choice(keys)
        ns = k if r.random() < key_eq_ns else r.choice(namespaces)
        if op in ("put", "put_and_get_old"):
            step = Step(op, (k, ns, [r.randrange(10) for _ in range(r.randrange(3))]))
        elif op in ("get", "contains_key", "remove", "remove_and_get_old"):
            step = Step(op, (k, ns))
        elif op in ("get_mutate", "transform"):
            step = Step(op, (k, ns, r.randrange(10)))
        elif op == "rehash":
            step = Step(op, (k, ns, r.randrange(1, 8)))
        elif op == "snapshot":
            step = Step(op, (sid,))
            sid += 1
        elif op in ("read_snapshot", "release"):
            if not sid:
                continue
            step = Step(op, (r.randrange(sid),))
        elif op == "read_snapshot_transformed":
            if not sid:
                continue
            step = Step(op, (r.randrange(sid), r.choice(sorted(SNAPSHOT_TRANSFORMERS))))
        elif op == "iterate":
            step = Step(op, ())
        elif op == "iterate_modify":
            step = Step(op, (r.randrange(10), k, ns, r.choice(("put", "remove"))))
        elif op in ("keys", "size_of_namespace"):
            step = Step(op, (r.choice(namespaces),))
        else:  # visit
            step = Step(op, (r.randrange(1, 5),))
        program.append(step)
    return capacity, program


def run_walk(seed: int) -> Harness:
    capacity, program = walk_steps(seed)
    harness = Harness(CopyOnWriteStateMap(capacity=capacity), white_box=True)
    try:
        for step in program:
            harness.apply(step)
    except CheckFailure as exc:
        done = harness.steps
        pytest.fail(f"walk {seed}: {exc.failure.headline()} at step {exc.failure.step_index}\n"
                    + render_program(done, f"m = CopyOnWriteStateMap(capacity={capacity})"), pytrace=False)
    return harness


@pytest.mark.parametrize("batch", range(BATCHES))
def test_seeded_walks_keep_every_property_and_invariant(batch):
    for seed in range(batch, WALKS, BATCHES):
        run_walk(seed)


def test_walks_are_deterministic():
    assert walk_steps(11) == walk_steps(11)
    assert walk_steps(11) != walk_steps(12)


def test_walks_reach_every_map_scenario():
    coverage: Counter = Counter()
    for seed in range(0, WALKS, 4):
        coverage.update(run_walk(seed).coverage)
    assert [name for name in MAP_SCENARIOS if coverage[name] == 0] == []
