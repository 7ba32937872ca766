"""Parity between two implementations: same program, same observations, step by step.

:func:`observe` runs a program (steps of ``properties.map.ops``) on any map of the
docs/contract.md §15 API and records, per step, what it returned, its size and, for white-box
maps, a summary of the structure; :func:`digest` is the whole structure. States
and entries are numbered by identity in order of first appearance, so two maps
observe the same only if they copy (and share) the same objects at the same
steps. ``properties.flink.batch.run_batch`` computes the very same
observations inside the JVM, so for Flink a whole program costs one call.

>>> from reference import CopyOnWriteStateMap
>>> from properties.core.program import Step
>>> obs = observe(CopyOnWriteStateMap(capacity=4), [Step("put", (1, 0, [5])), Step("get", (1, 0))], "results")
>>> obs[0][1][0]   # get: content [5], the first object seen (the one put)
[[5], 1]

:func:`random_program` generates seeded programs for Flink's capacity of 128
(enough keys to double it, rehash mid-program, under live snapshots), and
:func:`first_difference` names the first step where two observations differ.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import attrs

from properties.core.keys import FAMILIES, VOID_NAMESPACE, fresh, nth_key
from properties.core.program import Step
from properties.core.states import transform_append
from properties.map.ops import MAP_OPS, NEW_SNAPSHOT, SNAPSHOT_TRANSFORMERS, TRANSFORMER_NAMES, draw_args, pick_weighted

__all__ = ["Raised", "observe", "digest", "summary", "random_program", "first_difference", "Difference"]


@attrs.frozen
class Raised:
    """An operation raised ``name`` (the exception's class name)."""

    name: str


def _raised_name(exc: BaseException) -> str:
    return type(exc).__name__


class _Numbers:
    """Numbers objects by identity in order of first appearance (keeping them alive)."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.alive: list = []

    def __call__(self, obj) -> int | None:
        if obj is None:
            return None
        n = self.numbers.get(id(obj))
        if n is None:
            n = self.numbers[id(obj)] = len(self.numbers) + 1
            self.alive.append(obj)
        return n


def summary(view) -> list[int]:
    """Table lengths, sizes, rehash index, threshold, mod count, V and R."""
    return [len(view.primary_table), len(view.incremental_rehash_table), view.primary_table_size,
            view.incremental_rehash_table_size, view.rehash_index, view.threshold, view.mod_count,
            view.state_map_version, view.highest_required_snapshot_version]


def digest(view, snapshots: list, entries: Callable[[Any], int], states: Callable[[Any], int | None]) -> list:
    """The structure as data: summary, rehashing, live versions, every chain of
    both tables as ``[entry, key, namespace, entry_version, state_version, state,
    hash]`` (entries and states numbered by identity) and, per unreleased snapshot
    in creation order, ``[version, its entries in order]``."""

    def chains(table) -> list:
        out = []
        for i, head in enumerate(table):
            if head is None:
                continue
            chain = []
            e = head
            while e is not None:
                chain.append([entries(e), e.key, e.namespace, e.entry_version, e.state_version, states(e.state),
                              e.hash])
                e = e.next
            out.append([i, chain])
        return out

    # Numbering goes primary, rehash table, snapshots (as Batch.java's digest does).
    primary = chains(view.primary_table)
    rehash = chains(view.incremental_rehash_table) if view.is_rehashing else None
    live = [[s.version, [entries(e) for e in s.entry_objects()]] for s in snapshots if not s.released]
    return [summary(view), bool(view.is_rehashing), sorted(view.snapshot_versions), primary, rehash, live]


class _Observer:
    """Runs steps on ``m`` as the map harness does: a key or namespace is handed over as a new
    object equal to the step's (``fresh``) until a ``hold_keys`` step, then one object per value."""

    def __init__(self, m) -> None:
        self.m = m
        self.key = fresh
        self.states = _Numbers()
        self.entries = _Numbers()
        self.snapshots: dict = {}  # sid -> snapshot
        self.taken: list = []  # snapshots in creation order
        self.white_box = callable(getattr(m, "introspect", None))

    def state(self, s):
        return None if s is None else [list(s), self.states(s)]

    def rows(self, rows) -> list:
        return [[k, n, None if s is None else list(s), self.states(s)] for k, n, s in rows]

    def digest(self) -> list:
        return digest(self.m.introspect(), self.taken, self.entries, self.states)

    def step(self, step: Step):
        try:
            return getattr(self, "_" + step.op)(*step.args)
        except Exception as exc:
            return Raised(_raised_name(exc))

    def _put(self, key, namespace, state):
        obj = list(state)
        self.states(obj)
        self.m.put(self.key(key), self.key(namespace), obj)

    def _put_and_get_old(self, key, namespace, state):
        obj = list(state)
        self.states(obj)
        return self.state(self.m.put_and_get_old(self.key(key), self.key(namespace), obj))

    def _get(self, key, namespace):
        return self.state(self.m.get(self.key(key), self.key(namespace)))

    def _get_mutate(self, key, namespace, value):
        got = self.m.get(self.key(key), self.key(namespace))
        result = self.state(got)
        if isinstance(got, list):
            got.append(value)
        return result

    def _contains_key(self, key, namespace):
        return bool(self.m.contains_key(self.key(key), self.key(namespace)))

    def _remove(self, key, namespace):
        self.m.remove(self.key(key), self.key(namespace))

    def _remove_and_get_old(self, key, namespace):
        return self.state(self.m.remove_and_get_old(self.key(key), self.key(namespace)))

    def _transform(self, key, namespace, value):
        seen = [None, None]

        def fn(old, v):
            seen[0] = self.state(old)
            new = transform_append(old, v)
            seen[1] = self.states(new)
            return new

        self.m.transform(self.key(key), self.key(namespace), value, fn)
        return seen

    def _rehash(self, key, namespace, reads):
        for _ in range(reads):
            self.m.contains_key(self.key(key), self.key(namespace))

    def _put_range(self, family, first, count, namespace, state):
        for i in range(first, first + count):
            self._put(nth_key(family, i), namespace, state)

    def _remove_range(self, family, first, count, namespace):
        for i in range(first, first + count):
            self._remove(nth_key(family, i), namespace)

    def _get_range(self, family, first, count, namespace):
        return [self._get(nth_key(family, i), namespace) for i in range(first, first + count)]

    def _hold_keys(self):
        """From here on equal keys and namespaces reach the map as one object (a caller holding them)."""
        interned: dict = {}
        self.key = lambda value: interned.setdefault(value, value)

    def _snapshot(self, sid):
        if sid in self.snapshots:
            raise ValueError(f"snapshot id s{sid} used twice")
        s = self.m.snapshot()
        self.snapshots[sid] = s
        self.taken.append(s)
        return [s.version, len(s)]

    def _snap(self, sid):
        if sid not in self.snapshots:
            raise ValueError(f"snapshot s{sid} was never taken")
        return self.snapshots[sid]

    def _read_snapshot(self, sid):
        s = self._snap(sid)
        return None if s.released else self.rows(list(s))

    def _read_snapshot_transformed(self, sid, transformer):
        s = self._snap(sid)
        if s.released:
            return None
        view = s.iterate(SNAPSHOT_TRANSFORMERS[transformer])
        items = list(view)
        result = [len(view), self.rows(items)]
        s.release()
        return result

    def _release(self, sid):
        self._snap(sid).release()

    def _iterate(self):
        return self.rows(list(self.m))

    def _iterate_modify(self, position, key, namespace, change):
        position = min(position, len(self.m))
        it = iter(self.m)
        seen = [next(it) for _ in range(position)]
        if change == "put":
            self._put(key, namespace, [0])
        else:
            self._remove(key, namespace)
        error = None
        try:
            seen.extend(it)
        except RuntimeError as exc:
            error = _raised_name(exc)
        return [self.rows(seen), error]

    def _keys(self, namespace):
        return list(self.m.keys(self.key(namespace)))

    def _size_of_namespace(self, namespace):
        return self.m.size_of_namespace(self.key(namespace))

    def _visit(self, max_empty):
        visitor = self.m.incremental_visitor(max_empty)
        limit = 4 * (len(self.m) + 64) + 1024
        chains = []
        calls = 0
        while visitor.has_next():
            calls += 1
            if calls > limit:
                chains.append(Raised("Timeout"))
                break
            chain = visitor.next_entries()
            chains.append(self.rows(chain))
            for entry in chain:
                if isinstance(entry[2], list) and len(entry[2]) % 2 == 0:
                    visitor.remove(entry)
        return chains


def observe(m, steps: list[Step], detail: str = "final") -> list:
    """``[per step [result, size, summary(, digest)], final digest or None]``.

    ``detail``: ``results`` (no summaries), ``summary`` (the structure summary
    after every step), ``final`` (summaries, and the digest after the last
    step) or ``every_step`` (summaries and digests after every step).
    Summaries and digests need ``m.introspect()`` (None otherwise)."""
    if detail not in ("results", "summary", "final", "every_step"):
        raise ValueError(f"observe: detail must be results, summary, final or every_step, got {detail!r}")
    obs = _Observer(m)
    white_box = obs.white_box and detail != "results"
    out = []
    for step in steps:
        result = obs.step(step)
        row = [result, _caught(len, m), _caught(lambda: summary(m.introspect())) if white_box else None]
        if detail == "every_step":
            row.append(_caught(obs.digest) if white_box else None)
        out.append(row)
    final = _caught(obs.digest) if detail == "final" and white_box else None
    return [out, final]


def _caught(fn, *args):
    """``fn(*args)``, or Raised if it raised (a broken map may fail even its size)."""
    try:
        return fn(*args)
    except Exception as exc:
        return Raised(_raised_name(exc))


@attrs.frozen
class Difference:
    """Where two observations part: ``step`` (None: the final digest), ``what``
    (result, size, summary, digest) and both sides."""

    step: int | None
    what: str
    left: Any
    right: Any

    def describe(self, steps: list[Step], left_name: str = "left", right_name: str = "right") -> str:
        where = "at the end" if self.step is None else f"after step {self.step} ({MAP_OPS.render(steps[self.step])})"
        return f"{self.what} differs {where}:\n  {left_name}: {self.left!r}\n  {right_name}: {self.right!r}"


_FIELDS = ("result", "size", "summary", "digest")


def first_difference(left: list, right: list) -> Difference | None:
    """The first step (and field) at which two observations differ, or None."""
    left_steps, left_final = left
    right_steps, right_final = right
    for i, (a, b) in enumerate(zip(left_steps, right_steps)):
        for field, x, y in zip(_FIELDS, a, b):
            if x != y:
                return Difference(i, field, x, y)
    if len(left_steps) != len(right_steps):
        return Difference(min(len(left_steps), len(right_steps)), "length", len(left_steps), len(right_steps))
    if left_final != right_final:
        return Difference(None, "digest", left_final, right_final)
    return None


# ------------------------------------------------------------------ programs

_MAX_LIVE = 4
# One key family and one namespace family per program (a map holds one type of each, as Flink's state does).
_KEY_FAMILIES = (("int", 0.4), ("string", 0.25), ("tuple", 0.2), ("long", 0.15))
_NAMESPACE_FAMILIES = (("int", 0.5), ("void", 0.2), ("window", 0.3))


def _pool(r: random.Random, family, n: int) -> list:
    """``n`` distinct values of ``family``: drawn ones (its special values often), then its bulk
    sequence from a random offset (process-independent: no set or dict order of values)."""
    out: list = []
    seen: set = set()
    for _ in range(2 * min(n, 32)):
        value = family.draw(r)
        if value not in seen:
            seen.add(value)
            out.append(value)
            if len(out) == n:
                return out
    offset = r.randrange(1 << 20)
    i = 0
    while len(out) < n:
        value = family.nth(offset + i)
        i += 1
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out


class ParityContext:
    """A parity program's draws, one method per argument domain of the map's
    operations: one key family and one namespace family (:mod:`properties.core.keys`),
    key spaces large enough for capacity 128, at most four live snapshots.

    ``keys`` and ``namespaces``: the program's pools; ``same``: how often an int key
    is its own int namespace (hash 0: one long chain); ``odd``: whether keys and
    namespaces are sometimes drawn afresh from the whole family rather than the pool."""

    def __init__(self, r: random.Random, keys: list, namespaces: list, same: float, odd: bool,
                 family: str = "int", namespace_family: str = "int") -> None:
        self.r, self.keys, self.namespaces, self.odd = r, keys, namespaces, odd
        self.family, self.namespace_family = FAMILIES[family], FAMILIES[namespace_family]
        self.same = same if family == namespace_family == "int" else 0.0
        self.live: list[int] = []
        self.next_sid = 0

    def allows(self, op) -> bool:
        role = op.snapshot_role
        if role is NEW_SNAPSHOT:
            return len(self.live) < _MAX_LIVE
        return role is None or bool(self.live)

    def key(self):
        r = self.r
        if self.odd and r.random() < 0.2:
            return self.family.draw(r)
        return self.keys[r.randrange(len(self.keys))]

    def pair(self):
        r = self.r
        k = self.key()
        if self.same and r.random() < self.same:
            return k, k
        return k, self.namespace()

    def state(self) -> list:
        r = self.r
        return [r.randrange(10) for _ in range(r.randrange(4))]

    def value(self):
        return self.r.randrange(10)

    def reads(self):
        return self.r.randint(1, 8)

    def key_family(self):
        return self.family.name

    def first(self):
        return self.r.choice((0, self.r.randrange(1 << 16), self.r.randrange(1 << 31)))

    def count(self):
        r = self.r
        return r.randint(1, 64) if r.random() < 0.85 else r.randint(65, 300)

    def new_snapshot(self):
        self.live.append(self.next_sid)
        self.next_sid += 1
        return self.live[-1]

    def live_snapshot(self):
        return self.r.choice(self.live)

    def released_snapshot(self):
        sid = self.r.choice(self.live)
        self.live.remove(sid)
        return sid

    def transformer(self):
        return self.r.choice(TRANSFORMER_NAMES)

    def position(self):
        return self.r.randrange(12)

    def change(self):
        return self.r.choice(("put", "remove"))

    def namespace(self):
        r = self.r
        if self.odd and r.random() < 0.1:
            return self.namespace_family.draw(r)
        return self.namespaces[r.randrange(len(self.namespaces))]

    def max_empty(self):
        return self.r.randint(1, 4)


def random_program(seed: int, steps: int = 300) -> list[Step]:
    """A seeded program over every batch operation of the map's table, bulk steps and
    ``hold_keys`` included, for a map of capacity 128 (process-independent).

    Each program draws one key family (int over the whole int32 range, long,
    string of every kind, Tuple2) and one namespace family (int,
    VoidNamespace, TimeWindow), and pools of keys and namespaces from them.
    Most programs first fill the map with distinct pairs to just below, at or
    past Flink's threshold of 96, so the rest of the program doubles the table
    and runs (and finishes) the incremental rehash under every other
    operation, snapshots included. Programs also vary the key space,
    namespaces, int keys equal to their namespaces (hash 0: long chains), keys
    drawn outside the pool and the weight of every operation; about one in six
    never snapshots."""
    r = random.Random(seed)
    ops = [op for op in MAP_OPS if op.batch]  # parity programs run as Flink batches too
    weights = [r.random() for _ in ops]
    weights[ops.index(MAP_OPS["put"])] += r.choice((0.5, 1.0, 2.0))
    weights[ops.index(MAP_OPS["hold_keys"])] *= 0.05  # once it holds, it holds: rarely, and anywhere
    if r.random() < 0.15:
        for i, op in enumerate(ops):
            if op.snapshot_role is not None:
                weights[i] = 0.0
    n_keys = r.choice((8, 40, 120, 200, 400, 800))
    family = pick_weighted(r, _KEY_FAMILIES)
    namespace_family = pick_weighted(r, _NAMESPACE_FAMILIES)
    n_ns = 1 if namespace_family == "void" else r.choice((1, 2, 3))
    if family == "int" and r.random() < 0.5:
        keys = list(range(n_keys))  # small ints: neighbouring buckets, collisions with int namespaces
    else:
        keys = _pool(r, FAMILIES[family], n_keys)
    if namespace_family == "int" and r.random() < 0.7:
        namespaces = list(range(n_ns))
    elif namespace_family == "void":
        namespaces = [VOID_NAMESPACE]
    else:
        namespaces = _pool(r, FAMILIES[namespace_family], n_ns)
    context = ParityContext(r, keys, namespaces, r.choice((0.0, 0.1, 0.5)), r.random() < 0.3, family,
                            namespace_family)
    fill = min(r.choice((0, 60, 94, 96, 97, 97, 150, 191, 192, 383)), n_keys * n_ns)
    filled = sorted(r.sample(range(n_keys * n_ns), fill))
    program = [Step("put", (keys[i // n_ns], namespaces[i % n_ns], context.state())) for i in filled]
    snapshot = MAP_OPS["snapshot"]
    if fill and weights[ops.index(snapshot)] and r.random() < 0.5:
        # A snapshot right before the table doubles: the rehash then copies shared entries.
        program.append(Step("snapshot", draw_args(snapshot, context)))
    while len(program) < steps:
        op = r.choices(ops, weights)[0]
        if context.allows(op):
            program.append(Step(op.name, draw_args(op, context)))
    return program[:steps]
