"""Parity between two implementations: same program, same observations, step by step.

:func:`observe` runs a program (steps of ``cowcheck.map.ops``) through the map
harness on any map of the docs/contract.md §15 API and records, per step, every
answer the map gave the harness's calls (in call order), its size and, for
white-box maps, a summary of the structure; :func:`digest` is the whole
structure. States and entries are numbered by identity in order of first
appearance, so two maps observe the same only if they return, copy and share
the same objects at the same steps. The harness drives both maps (a map that
breaks a property fails its step, :class:`Failed`), so parity needs no
application of its own of any operation: Flink's side
(``cowcheck.flink.segments.run_batch``) is the harness over a batched walk,
a whole program in one Java call.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> from cowcheck.core.program import Step
>>> obs = observe(CopyOnWriteStateMap(capacity=4), [Step("put", (1, 0, [5])), Step("get", (1, 0))], "results")
>>> obs[0][1][0]   # get's answers: content [5], the first object seen (the one put)
[[[5], 1]]

:func:`random_program` generates seeded programs for Flink's capacity of 128
(enough keys to double it, rehash mid-program, under live snapshots), and
:func:`first_difference` names the first step where two observations differ.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import attrs

from cowcheck.core.failures import CheckFailure
from cowcheck.core.keys import FAMILIES, VOID_NAMESPACE
from cowcheck.core.program import Step
from cowcheck.map.harness import Harness
from cowcheck.map.introspection import observe_flag
from cowcheck.map.ops import MAP_OPS, NEW_SNAPSHOT, TRANSFORMER_NAMES, draw_args, pick_weighted

__all__ = ["Raised", "Failed", "observe", "digest", "summary", "random_program", "first_difference", "Difference"]


@attrs.frozen
class Raised:
    """A call raised ``name`` (the exception's class name)."""

    name: str


@attrs.frozen
class Failed:
    """The harness failed the step: the map broke property ``code`` (a failure of ``kind``)."""

    kind: str
    code: str


_END = "end"  # an iterator's answer when it ends


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
    in creation order (``snapshots``: their ``(version, entry objects in order)``),
    ``[version, its entries in order]``."""

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

    # Numbering goes primary, rehash table, snapshots.
    primary = chains(view.primary_table)
    rehash = chains(view.incremental_rehash_table) if view.is_rehashing else None
    live = [[version, [entries(e) for e in objects]] for version, objects in snapshots]
    return [summary(view), bool(view.is_rehashing), sorted(view.snapshot_versions), primary, rehash, live]


# ------------------------------------------------------------- the tap


class _Tap:
    """The answers of a map's calls in the step being applied, as data: states as
    ``[content, number]``, entries as ``[key, namespace, state]``, an exception as
    :class:`Raised`, an iterator's end as ``"end"``. The harness calls the map
    through :class:`_TapMap` and the proxies it hands out."""

    def __init__(self) -> None:
        self.states = _Numbers()
        self.answers: list = []
        self.taken: list = []  # the map's snapshots in creation order

    def call(self, convert, fn, *args):
        """``fn(*args)``, its answer recorded as ``convert`` gives it."""
        try:
            value = fn(*args)
        except StopIteration:
            self.answers.append(_END)
            raise
        except Exception as exc:
            self.answers.append(Raised(type(exc).__name__))
            raise
        self.answers.append(convert(value))
        return value

    def made(self, wrap, fn, *args):
        """``fn(*args)``, an object the harness goes on calling (an iterator, a snapshot...), wrapped
        by ``wrap``; only an exception is an answer."""
        try:
            value = fn(*args)
        except Exception as exc:
            self.answers.append(Raised(type(exc).__name__))
            raise
        return wrap(value)

    def state(self, s):
        return None if s is None else [list(s), self.states(s)] if type(s) is list else s

    def entry(self, e):
        return [e[0], e[1], self.state(e[2])] if type(e) is tuple and len(e) == 3 else e

    def entries(self, chain):
        return [self.entry(e) for e in chain] if type(chain) is list else chain


def _plain(value):
    return value


class _TapMap:
    """The docs/contract.md §15 map API over ``m``, every answer recorded in ``tap`` (the map's size
    is not: each step's row carries it)."""

    def __init__(self, m, tap: _Tap) -> None:
        self._m, self._tap = m, tap

    def put(self, key, namespace, state):
        return self._tap.call(_plain, self._m.put, key, namespace, state)

    def put_and_get_old(self, key, namespace, state):
        return self._tap.call(self._tap.state, self._m.put_and_get_old, key, namespace, state)

    def get(self, key, namespace):
        return self._tap.call(self._tap.state, self._m.get, key, namespace)

    def contains_key(self, key, namespace):
        return self._tap.call(_plain, self._m.contains_key, key, namespace)

    def remove(self, key, namespace):
        return self._tap.call(_plain, self._m.remove, key, namespace)

    def remove_and_get_old(self, key, namespace):
        return self._tap.call(self._tap.state, self._m.remove_and_get_old, key, namespace)

    def transform(self, key, namespace, value, fn):
        return self._tap.call(_plain, self._m.transform, key, namespace, value, fn)

    def size_of_namespace(self, namespace):
        return self._tap.call(_plain, self._m.size_of_namespace, namespace)

    def __len__(self) -> int:
        return len(self._m)

    def is_empty(self) -> bool:
        return self._m.is_empty()

    def __iter__(self):
        return self._tap.made(lambda it: _TapIterator(it, self._tap, self._tap.entry), iter, self._m)

    def keys(self, namespace):
        return self._tap.made(lambda it: _TapIterator(iter(it), self._tap, _plain), self._m.keys, namespace)

    def incremental_visitor(self, recommended_max_records: int):
        return self._tap.made(lambda v: _TapVisitor(v, self._tap), self._m.incremental_visitor,
                              recommended_max_records)

    def snapshot(self):
        return self._tap.made(self._snapshot, self._m.snapshot)

    def _snapshot(self, s):
        self._tap.taken.append(s)
        return _TapSnapshot(s, self._tap)


class _TapIterator:
    __slots__ = ("_it", "_tap", "_convert")

    def __init__(self, it, tap: _Tap, convert) -> None:
        self._it, self._tap, self._convert = it, tap, convert

    def __iter__(self):
        return self

    def __next__(self):
        return self._tap.call(self._convert, next, self._it)


class _TapVisitor:
    __slots__ = ("_v", "_tap")

    def __init__(self, v, tap: _Tap) -> None:
        self._v, self._tap = v, tap

    def has_next(self) -> bool:
        return self._tap.call(_plain, self._v.has_next)

    def next_entries(self):
        return self._tap.call(self._tap.entries, lambda: list(self._v.next_entries()))

    def remove(self, entry) -> None:
        return self._tap.call(_plain, self._v.remove, entry)


class _TapView:
    """``snapshot.iterate(fn)``'s view."""

    __slots__ = ("_view", "_tap")

    def __init__(self, view, tap: _Tap) -> None:
        self._view, self._tap = view, tap

    def __len__(self) -> int:
        return self._tap.call(_plain, len, self._view)

    def __iter__(self):
        return self._tap.made(lambda it: _TapIterator(it, self._tap, self._tap.entry), iter, self._view)


class _TapSnapshot:
    """A snapshot; ``version`` and ``released`` as methods whatever the snapshot has (so each
    read is one answer, whether the map offers an attribute or a method)."""

    __slots__ = ("_s", "_tap")

    def __init__(self, s, tap: _Tap) -> None:
        self._s, self._tap = s, tap

    def version(self):
        return self._tap.call(_plain, observe_flag, self._s, "version")

    def released(self):
        return self._tap.call(_plain, observe_flag, self._s, "released")

    def release(self) -> None:
        return self._tap.call(_plain, self._s.release)

    def __len__(self) -> int:
        return self._tap.call(_plain, len, self._s)

    def __iter__(self):
        return self._tap.made(lambda it: _TapIterator(it, self._tap, self._tap.entry), iter, self._s)

    def iterate(self, transformer=None):
        return self._tap.made(lambda view: _TapView(view, self._tap), self._s.iterate, transformer)

    def write_state(self, out, *serializers):
        """Flink's ``writeState``: its answer is the bytes it wrote."""
        start = out.tell()
        return self._tap.call(lambda _: out.getvalue()[start:], self._s.write_state, out, *serializers)


def _live_snapshots(view, taken: list) -> list:
    """``(version, entry objects)`` of the unreleased snapshots in creation order: from the view
    when it carries them (a batched walk's record), else from the snapshots themselves."""
    live = getattr(view, "live_snapshots", None)
    if live is not None:
        return live
    return [(s.version, s.entry_objects()) for s in taken if not s.released]


def observe(m, steps: list[Step], detail: str = "final", harness_class=Harness) -> list:
    """``[per step [answers, size, summary(, digest)], final digest or None]``.

    The steps run through ``harness_class(m)`` (black-box: the model's checks only), its
    calls into ``m`` tapped; a step the harness fails ends the observation with its answers
    and :class:`Failed`. ``detail``: ``results`` (no summaries), ``summary`` (the structure
    summary after every step), ``final`` (summaries, and the digest after the last step)
    or ``every_step`` (summaries and digests after every step). Summaries and digests
    need ``m.introspect()`` (None otherwise)."""
    if detail not in ("results", "summary", "final", "every_step"):
        raise ValueError(f"observe: detail must be results, summary, final or every_step, got {detail!r}")
    tap = _Tap()
    harness = harness_class(m, white_box=False)
    harness.impl = _TapMap(m, tap)  # the harness's calls go through the tap (a batched walk still runs on m)
    expect = getattr(harness, "expect", None)
    if expect is not None:
        expect(steps)
    entries = _Numbers()
    white_box = detail != "results" and callable(getattr(m, "introspect", None))

    def structure():
        view = m.introspect()
        return digest(view, _live_snapshots(view, tap.taken), entries, tap.states)

    out = []
    for step in steps:
        tap.answers = []
        try:
            harness.apply(step)
        except CheckFailure as exc:
            out.append([tap.answers + [Failed(exc.failure.kind, exc.failure.code)], _caught(len, m), None])
            break
        row = [tap.answers, _caught(len, m), _caught(lambda: summary(m.introspect())) if white_box else None]
        if detail == "every_step":
            row.append(_caught(structure) if white_box else None)
        out.append(row)
    final = _caught(structure) if detail == "final" and white_box else None
    return [out, final]


def _caught(fn, *args):
    """``fn(*args)``, or Raised if it raised (a broken map may fail even its size)."""
    try:
        return fn(*args)
    except Exception as exc:
        return Raised(type(exc).__name__)


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
    operations: one key family and one namespace family (:mod:`cowcheck.core.keys`),
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
    """A seeded program over every operation of the map's table, bulk steps and
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
    ops = list(MAP_OPS)
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
