"""Apply steps to an implementation and the model side by side; check every property.

The harness is the one place where the properties of docs/contract.md §9 (P1–P7) and the
invariants of docs/contract.md §8 are checked; the Hypothesis machines, ``cowcheck
check``, seeded walks and replay all drive it. A broken property raises
:class:`CheckFailure` carrying a :class:`Failure`.

The model decides what is checked (docs/contract.md §16): what the implementation
reports about itself (a snapshot's ``released`` flag or ``version``, its
sizes, the exceptions it raises) is compared with the model, never used to
skip or loosen a check. A snapshot the model holds live is read and
compared whatever the implementation says about it.

Identity (docs/contract.md §6, exact identity rule) is tracked apart from content: the
model keeps its own deep copies, and ``held`` remembers which object the
implementation should be holding for each key, so "returns the caller's own
object" and "returns a fresh copy" are both checked.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> h = Harness(CopyOnWriteStateMap(capacity=4), white_box=True)
>>> h.apply(Step("put", (1, 0, [5]))); h.apply(Step("snapshot", (0,)))
>>> h.apply(Step("get_mutate", (1, 0, 9))); h.apply(Step("read_snapshot", (0,)))
>>> sorted(h.coverage)
['mutate-returned-under-snapshot', 'put-empty-bucket', 'snapshot-not-rehashing']
"""

from __future__ import annotations

from collections import Counter
from itertools import islice

import attrs

from cowcheck.model import ModelMap
from cowcheck.core.api import StateMap
from cowcheck.core.errors import InternalError
from cowcheck.core.failures import (COMPARISON_RAISED, DIVERGENCE, INVARIANT, CheckFailure,
                                      safe_equal, safe_repr)
from cowcheck.core.harness import HarnessBase
from cowcheck.core.keys import FAMILIES, families_of, family_of, fresh, magnitude, nth_key
from cowcheck.core.program import Step
from cowcheck.core.remote import changed_in_place, expect_calls, take
from cowcheck.core.replay import show
from cowcheck.core.states import copy_state, entries, transform_append
from cowcheck.map.introspection import (adapt, deep_view_problem, introspection_problem, observe_flag,
                                          snapshot_problem)
from cowcheck.map.ops import (FAMILY, KEYED, MAP_OPS, NAMESPACE, NEW_SNAPSHOT, PAIR, render)
from cowcheck.map.scenarios import classify_keyed, classify_release, classify_snapshot
from cowcheck.map.space import SpaceCoverage
from cowcheck.map.whole_map import _ENTRIES, WholeMapSteps
from cowcheck.reference.hashing import composite_hash
from cowcheck.reference.invariants import SnapshotGuard, StructureTracker

__all__ = ["Harness", "has_introspection", "describe_state", "WHITE_BOX_EVERY_STEP", "CONTRACTS"]

_MISSING = object()
# White-box invariants (I1–I9) cost O(entries) per check: after every step while a map holds
# at most this many entries, and past that after every ceil(entries / this)-th step, so a step
# costs O(this) of structural checking however large the map (the model's P1–P7 still run after
# every step, and I4's rehash progress too; ``final_check`` closes a run).
WHITE_BOX_EVERY_STEP = 512
# Contract levels (docs/contract.md): ``flink`` holds a map to Flink's copy discipline (P6: a state
# handed out is a fresh copy exactly when a live snapshot may share it, otherwise the caller's own
# object) on top of ``isolation``, what any snapshot map owes: values, sizes and snapshot contents
# frozen at snapshot time whatever the caller does in place to the states it was handed.
CONTRACTS = ("flink", "isolation")
_MARK = -1  # what the harness appends to a handed-out state to see where the change lands


def has_introspection(impl) -> bool:
    """True if ``impl`` offers a white-box view that conforms to the introspection contract."""
    return introspection_problem(impl) is None


_COUNTED = frozenset({"put_range", "remove_range", "get_range", "rehash"})  # args[2]: calls made
_BULK = frozenset(op.name for op in MAP_OPS if op.bulk)  # args[2]: the keys of the step


class Harness(WholeMapSteps, HarnessBase):
    """Drives one implementation instance against a fresh model.

    ``white_box``: check I1–I9 after every step and classify scenarios (needs
    ``impl.introspect()``; None: if its view conforms to the contract of
    :mod:`cowcheck.map.introspection`). ``strict_live_iteration``: hold live
    iteration to the ideal contract (each entry exactly once, or an error)
    even when reads drive the rehash mid-iteration; Flink does not meet it
    (docs/contract.md §7), so by default a breach is only counted as the finding
    ``live-iteration-quirk``. ``state_copier``: how the model and the suite
    copy states (a deep copy; :func:`~cowcheck.core.states.copy_state` by
    default). ``symbolic``: values may be CrossHair's symbolic ones; results
    are compared through their ``repr`` (which makes them concrete) rather
    than sorted. ``capacity``: the map's initial capacity (state-space coverage
    counts the rehash generations Flink's growth rule implies from it).
    ``contract``: ``flink`` (P6, Flink's copy discipline, checked) or ``isolation``
    (no rule about when copies are made; instead every old state handed out is
    changed in place, as a caller may, and the snapshots must not show it).
    ``key_families``, ``namespace_families``: the families the run's programs draw
    keys and namespaces from (None: all); the space coverage names those left out.

    Keys and namespaces reach the implementation as fresh objects equal to the
    step's (:func:`~cowcheck.core.keys.fresh`), as deserialized keys reach
    Flink's map, until a ``hold_keys`` step: from then on equal keys are the
    same object, as a caller holding its keys passes them.
    """

    operations = MAP_OPS

    def __init__(self, impl: StateMap, *, white_box: bool | None = None, state_copier=copy_state,
                 strict_live_iteration: bool = False, symbolic: bool = False, capacity: int = 4,
                 contract: str = "flink", key_families: tuple | None = None,
                 namespace_families: tuple | None = None) -> None:
        super().__init__()
        if contract not in CONTRACTS:
            raise ValueError(f"contract must be one of {', '.join(CONTRACTS)}, got {contract!r}")
        self.contract = contract
        self.capacity = capacity
        self._key = fresh  # how a key or namespace is handed to the implementation (hold_keys changes it)
        self._interned: dict = {}
        self.space = SpaceCoverage()
        self.space.white_box = False
        for role, chosen in (("key", key_families), ("namespace", namespace_families)):
            if chosen is not None:
                self.space.leave_out(role, [f.name for f in families_of(role) if f.name not in chosen])
        self._unchecked = 0  # steps since I1–I9 were last checked
        self._sizes: tuple | None = None  # (model, map) entries after the latest step
        self.impl = impl
        self.model = ModelMap(state_copier=state_copier)
        self._copy = state_copier  # the suite's own copies of states (model, guard, expected values)
        self.symbolic = symbolic
        self.white_box = has_introspection(impl) if white_box is None else white_box
        self.strict_live_iteration = strict_live_iteration
        self.held: dict = {}  # (key, namespace) -> object the implementation should hold
        self.snapshots: dict = {}  # sid -> (impl snapshot, model snapshot)
        self.guard = SnapshotGuard(state_copier) if self.white_box else None
        self.tracker = StructureTracker() if self.white_box else None
        self.live_versions: dict = {}  # sid -> version of each snapshot taken and not released
        self._observed: tuple | None = None
        self._ops = {op.name: getattr(type(self), "_op_" + op.name) for op in MAP_OPS}  # functions, not bound
        # methods: a harness holds no reference to itself, so it (and the values it last saw) goes
        # the moment its run ends, not at the next full garbage collection
        self._hashes: dict = {}  # composite hashes of int keys and namespaces seen
        self._rehash_before: tuple | None = None  # (rehash_index, primary length) before a keyed step
        self.space.white_box = self.white_box

    @property
    def observed(self) -> tuple | None:
        """(model result, implementation result) of the latest step that returns
        a value; entry lists as :func:`~cowcheck.core.states.entries` strings,
        encoded on first read (so read it right after the step)."""
        seen = self._observed
        if seen is not None and seen[0] is _ENTRIES:
            seen = self._observed = (entries(seen[1]), entries(seen[2]))
        return seen

    # ---------------------------------------------------- programs as data

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        """Every snapshot a step names was taken by an earlier step, and no id is taken twice;
        keys are of one family and namespaces of one family (a map holds one type of each,
        as Flink's state does, and ``write_state`` is handed one serializer for each)."""
        return _families(steps) is not None and cls._snapshots_well_formed(steps)

    @classmethod
    def _snapshots_well_formed(cls, steps: list[Step]) -> bool:
        taken: set = set()
        for step in steps:
            role = MAP_OPS[step.op].snapshot_role
            if role is None:
                continue
            sid = step.args[0]
            if role is NEW_SNAPSHOT:
                if sid in taken:
                    return False
                taken.add(sid)
            elif sid not in taken:
                return False
        return True

    @classmethod
    def simpler_steps(cls, step: Step):
        """Plainer operations first (a ``put`` for a ``put_and_get_old``...), then simpler arguments."""
        plainer = MAP_OPS[step.op].plainer
        if plainer is not None:
            yield from plainer(step.args)
        yield from super().simpler_steps(step)

    @classmethod
    def simpler_programs(cls, steps: list[Step]):
        """Each key and namespace replaced by a simpler one of its family in every step
        (a program's steps share their keys: one step's key simplified alone is another key)."""
        seen: dict = {}
        for step in steps:
            for value in _values_of(step):
                seen.setdefault((type(value), value), value)
        used = set(seen)
        for value in seen.values():
            family = family_of(value)
            for simpler in (family.simpler(value) if family is not None else ()):
                if (type(simpler), simpler) not in used:
                    yield [_substituted(step, value, simpler) for step in steps]

    @classmethod
    def normalise(cls, steps: list[Step]) -> list[Step]:
        """Snapshots named s0, s1, … in the order they are taken (after shrinking)."""
        names: dict = {}
        out = []
        for step in steps:
            role = MAP_OPS[step.op].snapshot_role
            if role is None:
                out.append(step)
                continue
            if role is NEW_SNAPSHOT:
                names[step.args[0]] = len(names)
            out.append(Step(step.op, (names.get(step.args[0], step.args[0]),) + tuple(step.args[1:])))
        return out

    # ------------------------------------------------------------- helpers

    def _expect_equal(self, step: Step, expected, actual, code: str = "P1") -> None:
        self._observed = (expected, actual)  # read (or copy) right after the step
        try:
            if expected == actual:
                return
        except Exception:
            pass
        same = safe_equal(expected, actual)
        if same is True:
            return
        why = " (comparing it raised)" if same is COMPARISON_RAISED else ""
        self._fail(DIVERGENCE, code, f"{render(step)}: model returned {safe_repr(expected)}, map returned "
                                     f"{safe_repr(actual)}{why}", expected, actual)

    def _expect_identity(self, step: Step, slot, value, copy_expected: bool) -> None:
        """P6 under the flink contract, with the harm it leads to said; nothing under isolation
        (there the old states handed out are changed in place instead: :meth:`_change_handed_out`)."""
        if self.contract == "isolation":
            return
        try:
            super()._expect_identity(step, slot, value, copy_expected)
        except CheckFailure as exc:
            failure = exc.failure
            harm = self._harm(step, slot, value, copy_expected)
            self.failure = attrs.evolve(failure, message=f"{failure.message} [contract flink: Flink's copy "
                                                          f"discipline, P6; --contract isolation has no rule about "
                                                          f"when copies are made and checks only what snapshots "
                                                          f"read] {harm}")
            raise CheckFailure(self.failure) from None

    def _harm(self, step: Step, slot, value, copy_expected: bool) -> str:
        """What the P6 breach leads to: where an in-place change of ``value`` would land."""
        if not copy_expected:
            return ("Had the caller changed it in place, as Flink's heap list states do, the change would "
                    "reach a copy, not the map's state.")
        if type(value) is not list:
            return ""
        already = self._snapshot_reading(slot)
        if already:
            sid, now, was = already
            return f"The change already reached a snapshot: s{sid} reads {now} instead of {was} for {safe_repr(slot)}."
        value.append(_MARK)
        changed_in_place(self.impl, value)  # a map in its own process reads the snapshots there
        try:
            changed = self._snapshot_reading(slot)
        finally:
            if value and value[-1] == _MARK:
                value.pop()
                changed_in_place(self.impl, value)
        if changed:
            sid, now, was = changed
            return (f"Had the caller appended {_MARK} to it, snapshot s{sid} would read {now} instead of {was} "
                    f"for {safe_repr(slot)}.")
        return ("No live snapshot would read an in-place change of it (this map keeps the snapshot's copy "
                "elsewhere): --contract isolation checks snapshot isolation alone and would accept this.")

    def _snapshot_reading(self, slot) -> tuple | None:
        """``(sid, state it reads, state frozen)`` of the first live snapshot whose state of ``slot``
        differs from the model's frozen copy, or None (reading the snapshots; their errors ignored)."""
        for sid, (snap, msnap) in sorted(self.snapshots.items()):
            if msnap.released:
                continue
            try:
                now = {(k, n): st for k, n, st in islice(iter(snap), self._bound(len(msnap)))}
            except Exception:
                continue
            was = next((st for k, n, st in msnap.iterate() if (k, n) == slot), _MISSING)
            if slot in now and was is not _MISSING and not safe_equal(now[slot], was):
                return sid, safe_repr(now[slot]), safe_repr(was)
        return None

    def _change_handed_out(self, step: Step, state) -> None:
        """Isolation: the caller changes an old state it was handed in place; no snapshot may show it."""
        if self.contract == "isolation" and type(state) is list:
            self._call(step, state.append, _MARK)

    def _copy_expected(self, key, namespace) -> bool:
        slot = self.model.data.get((key, namespace))
        return slot is not None and slot[1] < self.model.required_version()

    def _take(self, step: Step, iterable, bound: int, what: str, code: str, expected: int | None = None) -> list:
        """The items of ``iterable`` (the implementation's), at most ``bound`` + 1 of them:
        an iteration that goes on past ``bound`` is a DIVERGENCE, not a hang."""
        got = self._call(step, take, iterable, bound + 1)
        if len(got) > bound:
            expected = len(self.model) if expected is None else expected
            self._fail(DIVERGENCE, code, f"{render(step)}: {what} gave more than {bound} entries "
                                         f"(the model has {expected}); it does not end",
                       f"at most {bound}", f"more than {bound}")
        return got

    def _bound(self, entries: int | None = None) -> int:
        """How many entries an iteration over ``entries`` (the live map's by default) may
        return before it is taken for one that does not end."""
        return 2 * (len(self.model) if entries is None else entries) + 64

    def _entry_tuples(self, step: Step, items: list, what: str, code: str) -> list:
        """``items`` as (key, namespace, state) tuples; anything else is a DIVERGENCE."""
        out = []
        for item in items:
            if type(item) is tuple and len(item) == 3:
                out.append(item)
                continue
            try:
                k, n, s = item
            except Exception:
                self._fail(DIVERGENCE, code, f"{render(step)}: {what} gave {safe_repr(item, 80)}, not a "
                                             f"(key, namespace, state) entry", "(key, namespace, state)",
                           safe_repr(item, 80))
            out.append((k, n, s))
        return out

    def _flag(self, step: Step, obj, name: str, code: str):
        """The implementation's ``obj.name`` (called if a method); missing is a DIVERGENCE."""
        if getattr(obj, name, _MISSING) is _MISSING:
            self._fail(DIVERGENCE, code, f"{render(step)}: the snapshot has no {name!r} (docs/contract.md §15)",
                       name, "missing")
        return self._call(step, observe_flag, obj, name)

    # ------------------------------------------------------- white-box view

    def _view(self, step: Step):
        """The implementation's introspection view (a call into it)."""
        view = self._call(step, self.impl.introspect)
        return view if view is self.impl else adapt(view)

    def _white(self, step: Step, fn, *args):
        """``fn(*args)``: suite code reading the implementation's view. If it
        raises, a view that breaks the introspection contract is the
        implementation's failure (INVARIANT I0); a conforming one means the
        error is cowcheck's own."""
        try:
            return fn(*args)
        except (CheckFailure, InternalError):
            raise
        except Exception as exc:
            problem = self._view_problem(step)
            if problem is None:
                raise
            self._fail(INVARIANT, "I0", f"after {render(step)}: introspection broke its contract: {problem} "
                                        f"({type(exc).__name__} while checking)")

    def _view_problem(self, step: Step) -> str | None:
        try:
            view = self.impl.introspect()
        except Exception as exc:
            return f"introspect() raised {type(exc).__name__}: {exc}"
        problem = deep_view_problem(adapt(view))
        if problem is None:
            for snap, _ in self.snapshots.values():
                problem = snapshot_problem(snap)
                if problem:
                    break
        return problem

    # ---------------------------------------------------------------- apply

    def _apply(self, step: Step) -> None:
        self._observed = None
        self._rehash_before = None
        self._count_scenarios(step)
        self._ops[step.op](self, step, *step.args)
        self.check_after_step(step)
        self._count_space(step)

    def _count_space(self, step: Step) -> None:
        """State-space coverage after ``step`` (what it handed the map, how large the map is)."""
        model = self.model
        space = self.space
        space.record_size(len(model.data), self.capacity, len(model.live))
        args = step.args
        kinds = _KEY_ARGS.get(step.op)
        if kinds is None:
            return
        if kinds == "pair":
            key, namespace, count = args[0], args[1], 1
        elif kinds == "bulk":
            key, namespace, count = nth_key(args[0], args[1]), args[3], args[2]
        else:  # iterate_modify: position, key, namespace, change
            key, namespace, count = args[1], args[2], 1
        space.keys[magnitude(key)] += count
        space.namespaces[magnitude(namespace)] += count
        if self._key is fresh:
            space.fresh += count
        else:
            space.held += count

    def check_after_step(self, step: Step) -> None:
        self.check_size(step)
        if self.white_box:
            self._unchecked += 1
            entries = len(self.model.data)
            if entries <= WHITE_BOX_EVERY_STEP or self._unchecked * WHITE_BOX_EVERY_STEP >= entries:
                self.check_invariants(step)
            else:
                self._check_rehash_step(step)

    def final_check(self) -> None:
        """I1–I9 now, if steps since the last check went unchecked (a large map's)."""
        if self.white_box and self._unchecked and self.steps:
            self.check_invariants(self.steps[-1])

    def trace_line(self) -> str:
        """What ``replay --trace`` shows of the latest step besides its result: the sizes after it."""
        sizes = self._sizes
        return f"size after: model {sizes[0]}, map {sizes[1]}" if sizes is not None else ""

    def check_size(self, step: Step) -> None:
        """P4 after ``step``: the implementation's size equals the model's."""
        n_impl = self._call(step, len, self.impl)
        self._sizes = (len(self.model), n_impl)
        if n_impl != len(self.model):
            self._fail(DIVERGENCE, "P4", f"after {render(step)}: model has {len(self.model)} entries, "
                                         f"map reports {n_impl}", len(self.model), n_impl)

    def check_invariants(self, step: Step) -> None:
        """I1–I9 after ``step`` (white-box): the verdict of a full check, at the
        cost of what changed (``StructureTracker``, ``SnapshotGuard``)."""
        self._unchecked = 0
        view = self._view(step)
        self.space.table_lengths.add(len(view.primary_table))
        violations = self._white(step, self._violations, view)
        if violations:
            v = violations[0]
            more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
            self._fail(INVARIANT, v.code, f"after {render(step)}: {v.message}{more}")
        self._check_rehash_step(step, view)

    def _check_rehash_step(self, step: Step, view=None) -> None:
        """I4's part that costs nothing: the keyed step moved the rehash on (after every step)."""
        before = self._rehash_before
        if before is not None:
            self._rehash_before = None
            self._white(step, self._check_rehash_advanced, step, view if view is not None else self._view(step),
                        before)

    def _violations(self, view):
        return self.tracker.check(view, self.live_versions.values()) + self.guard.check()

    def _check_rehash_advanced(self, step: Step, view, before: tuple) -> None:
        """I4, docs/contract.md §4: every keyed operation performs one incremental-rehash step
        if a rehash is running, which moves at least one bucket (or finishes it)."""
        index, length = before
        if view.is_rehashing and len(view.primary_table) == length and view.rehash_index <= index:
            self._fail(INVARIANT, "I4", f"after {render(step)}: a rehash is in progress but rehash_index stayed "
                                        f"at {view.rehash_index} (every keyed operation moves at least one bucket)",
                       f"> {index}", view.rehash_index)

    def _count_scenarios(self, step: Step) -> None:
        """Scenarios the model can see, and (white-box) those the structure shows."""
        self._count_model_scenarios(step)
        if self.white_box:
            self._count_structure_scenarios(step)

    def _count_model_scenarios(self, step: Step) -> None:
        op, args = step.op, step.args
        coverage = self.coverage
        if self.model.live:
            if op == "get_mutate" and (args[0], args[1]) in self.model.data:
                coverage["mutate-returned-under-snapshot"] += 1
            elif op == "transform":
                coverage["transform-under-snapshot"] += 1
        if op == "release" and args[0] in self.snapshots:
            snap = self.snapshots[args[0]][1]
            if not snap.released:
                _count(coverage, classify_release(sorted(self.model.live), snap.version))

    def _count_structure_scenarios(self, step: Step) -> None:
        """White-box: the scenarios the structure shows before ``step`` (and where a rehash stands)."""
        op, args = step.op, step.args
        coverage = self.coverage
        if op in KEYED:
            memo = type(args[0]) is int and type(args[1]) is int  # 1, 1.0 and True share a dict key
            h = self._hashes.get((args[0], args[1])) if memo else None
            if h is None:
                try:
                    h = composite_hash(args[0], args[1])
                except (TypeError, ValueError):
                    return
                if memo:
                    self._hashes[(args[0], args[1])] = h
            view = self._view(step)
            _count(coverage, self._white(step, classify_keyed, view, op, args[0], args[1], h))
            chain = self._white(step, _chain_length, view, h)
            if chain > self.space.longest_chain:
                self.space.longest_chain = chain
            if view.is_rehashing:
                self._rehash_before = (view.rehash_index, len(view.primary_table))
        elif op == "snapshot":
            _count(coverage, self._white(step, classify_snapshot, self._view(step)))
        elif op == "rehash":  # at least one read (step_from_json rejects fewer)
            view = self._view(step)
            if self._white(step, observe_flag, view, "is_rehashing"):
                self._rehash_before = (view.rehash_index, len(view.primary_table))

    # ------------------------------------------------------------ keyed ops

    def _op_put(self, step, key, namespace, state):
        obj = list(state)
        self._call(step, self.impl.put, self._key(key), self._key(namespace), obj)
        self.model.put(key, namespace, self._copy(obj))
        self.held[(key, namespace)] = obj

    def _op_put_and_get_old(self, step, key, namespace, state):
        obj = list(state)
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.put_and_get_old, self._key(key), self._key(namespace), obj)
        want = self.model.put_and_get_old(key, namespace, self._copy(obj))
        self._expect_equal(step, want, got)
        self._expect_identity(step, (key, namespace), got, copy_expected)
        self.held[(key, namespace)] = obj
        self._change_handed_out(step, got)

    def _op_get(self, step, key, namespace, mutate_with=_MISSING):
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.get, self._key(key), self._key(namespace))
        want = self.model.get(key, namespace)
        self._expect_equal(step, want, got)
        self._expect_identity(step, (key, namespace), got, copy_expected)
        if got is not None:
            self.held[(key, namespace)] = got
            if mutate_with is not _MISSING and isinstance(got, list):
                self._call(step, got.append, mutate_with)
                want.append(mutate_with)

    def _op_get_mutate(self, step, key, namespace, value):
        self._op_get(step, key, namespace, value)

    def _op_contains_key(self, step, key, namespace):
        got = self._call(step, self.impl.contains_key, self._key(key), self._key(namespace))
        self._expect_equal(step, self.model.contains_key(key, namespace), got)

    def _op_remove(self, step, key, namespace):
        self._call(step, self.impl.remove, self._key(key), self._key(namespace))
        self.model.remove(key, namespace)
        self.held.pop((key, namespace), None)

    def _op_remove_and_get_old(self, step, key, namespace):
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.remove_and_get_old, self._key(key), self._key(namespace))
        want = self.model.remove_and_get_old(key, namespace)
        self._expect_equal(step, want, got)
        self._expect_identity(step, (key, namespace), got, copy_expected)
        self.held.pop((key, namespace), None)
        self._change_handed_out(step, got)

    def _op_transform(self, step, key, namespace, value):
        copy_expected = self._copy_expected(key, namespace)
        seen = {}

        def fn(old, v):
            seen["old"], seen["old_content"] = old, self._copy(old)
            seen["new"] = transform_append(old, v)
            return seen["new"]

        self._call(step, self.impl.transform, self._key(key), self._key(namespace), value, fn)
        if "old" not in seen:
            self._fail(DIVERGENCE, "P1", f"{render(step)}: the transform function was never called")
        slot = self.model.data.get((key, namespace))
        self._expect_equal(step, self._copy(slot[0]) if slot else None, seen["old_content"])
        self._expect_identity(step, (key, namespace), seen["old"], copy_expected)
        self.model.transform(key, namespace, value, transform_append)
        self.held[(key, namespace)] = seen["new"]

    @staticmethod
    def calls_in(step: Step) -> int:
        """A bulk step makes a call per key, a rehash step one per read; any other step, a few."""
        if step.op in _COUNTED:
            count = step.args[2]
            return count if type(count) is int and count > 0 else 1
        return 1

    @staticmethod
    def operations_in(step: Step) -> int:
        """A bulk step applies an operation per key (``put_range`` of 1,000: 1,000); any other step, one."""
        return step.args[2] if step.op in _BULK else 1

    def _op_rehash(self, step, key, namespace, reads):
        want = self.model.contains_key(key, namespace)
        expect_calls(self.impl, "contains_key", [(self._key(key), self._key(namespace)) for _ in range(reads)])
        for _ in range(reads):
            got = self._call(step, self.impl.contains_key, self._key(key), self._key(namespace))
            if got is not want and got != want:
                self._expect_equal(step, want, got)

    # ------------------------------------------------------------ bulk ops

    def _op_put_range(self, step, family, first, count, namespace, state):
        """``count`` puts of the family's bulk keys (checked together: P4 after the step)."""
        put, key_of, model_put, copy, held = self.impl.put, self._key, self.model.put, self._copy, self.held
        for i in range(first, first + count):
            key = nth_key(family, i)
            obj = list(state)
            self._call(step, put, key_of(key), key_of(namespace), obj)
            model_put(key, namespace, copy(obj))
            held[(key, namespace)] = obj

    def _op_remove_range(self, step, family, first, count, namespace):
        remove, key_of, model_remove, held = self.impl.remove, self._key, self.model.remove, self.held
        for i in range(first, first + count):
            key = nth_key(family, i)
            self._call(step, remove, key_of(key), key_of(namespace))
            model_remove(key, namespace)
            held.pop((key, namespace), None)

    def _op_get_range(self, step, family, first, count, namespace):
        """``count`` gets, each compared with the model (P1) and its identity checked (P6)."""
        expect_calls(self.impl, "get", [(self._key(nth_key(family, i)), self._key(namespace))
                                        for i in range(first, first + count)])
        for i in range(first, first + count):
            self._op_get(step, nth_key(family, i), namespace)
        self._observed = None

    def _op_hold_keys(self, step):
        """From here on equal keys and namespaces reach the implementation as one object."""
        interned = self._interned
        self._key = lambda value: interned.setdefault(value, value)


# Where a step's key and namespace are in its arguments (state-space coverage).
_KEY_ARGS = {op.name: ("bulk" if op.bulk else "pair" if op.domains[:1] == (PAIR,) else
                       "position" if op.name == "iterate_modify" else None)
             for op in MAP_OPS}
_KEY_ARGS = {name: kind for name, kind in _KEY_ARGS.items() if kind is not None}


def _chain_length(view, h: int) -> int:
    """Entries in the chain hash ``h`` selects in the primary table (white-box)."""
    table = view.primary_table
    e = table[h & (len(table) - 1)]
    n = 0
    while e is not None and n < 1 << 16:
        n += 1
        e = e.next
    return n


def _values_of(step: Step):
    """The keys and namespaces a step names (not those a bulk step computes)."""
    op = MAP_OPS.operations.get(step.op)
    at = 0
    for domain in (op.domains if op is not None else ()):
        if domain is PAIR:
            yield step.args[at]
            yield step.args[at + 1]
        elif domain is NAMESPACE:
            yield step.args[at]
        at += domain.arity


def _substituted(step: Step, old, new) -> Step:
    """``step`` with key or namespace ``old`` (same type, equal) replaced by ``new``."""
    op = MAP_OPS.operations[step.op]
    args = list(step.args)
    at = 0
    for domain in op.domains:
        if domain is PAIR or domain is NAMESPACE:
            for i in range(at, at + domain.arity):
                if type(args[i]) is type(old) and args[i] == old:
                    args[i] = new
        at += domain.arity
    return Step(step.op, tuple(args))


def _families(steps: list[Step]) -> tuple | None:
    """``(key family, namespace family)`` of a program (None each if it has none), or
    None if it mixes families of keys or of namespaces."""
    keys, namespaces = set(), set()
    for step in steps:
        op = MAP_OPS.operations.get(step.op)
        if op is None:
            continue
        at = 0
        for domain in op.domains:
            if domain is PAIR:
                keys.add(family_of(step.args[at]))
                namespaces.add(family_of(step.args[at + 1]))
            elif domain is NAMESPACE:
                namespaces.add(family_of(step.args[at]))
            elif domain is FAMILY:
                keys.add(FAMILIES.get(step.args[at]))
            at += domain.arity
    if len(keys) > 1 or len(namespaces) > 1:
        return None
    return next(iter(keys), None), next(iter(namespaces), None)


def _count(counter: Counter, names) -> None:
    get = counter.get
    for name in names:
        counter[name] = get(name, 0) + 1


# ----------------------------------------------------------------- diagrams


def diagram(view) -> str:
    """The buckets and chains of a white-box view with entry/state versions."""

    def table(name: str, tab, size: int) -> list[str]:
        lines = [f"  {name} (length {len(tab)}, size {size})"]
        for i, head in enumerate(tab):
            chain = []
            e = head
            while e is not None and len(chain) < 64:
                chain.append(f"({e.key!r},{e.namespace!r})={show(e.state)} ev={e.entry_version} sv={e.state_version}")
                e = e.next
            if chain:
                lines.append(f"    [{i}] " + " -> ".join(chain))
        return lines

    live = sorted(view.snapshot_versions)
    lines = [f"  V={view.state_map_version} R={view.highest_required_snapshot_version} live snapshots={live} "
             f"rehashing={view.is_rehashing} rehash_index={view.rehash_index} threshold={view.threshold}"]
    lines += table("primary", view.primary_table, view.primary_table_size)
    if view.is_rehashing:
        lines += table("rehash", view.incremental_rehash_table, view.incremental_rehash_table_size)
    return "\n".join(lines)


def _snapshot_chains(harness: Harness) -> str:
    """What each live snapshot still reaches, chain by chain (white-box)."""
    lines = []
    for sid, (snap, model_snapshot) in sorted(harness.snapshots.items()):
        data = getattr(snap, "snapshot_data", None)
        if model_snapshot.released or data is None:
            continue
        lines.append(f"  snapshot s{sid} (version {snap.version}) reaches:")
        for i, head in enumerate(data):
            chain, e = [], head
            while e is not None and len(chain) < 64:
                chain.append(f"({e.key!r},{e.namespace!r})={show(e.state)} ev={e.entry_version}")
                e = e.next
            if chain:
                lines.append(f"    [{i}] " + " -> ".join(chain))
    return "".join(line + "\n" for line in lines)


def describe_state(harness: Harness, failed: bool = False) -> str:
    """``replay --diagram``: the map's buckets after a step (and, at the failing
    step, what each live snapshot reaches); nothing for a black-box map."""
    if not has_introspection(harness.impl):
        return ""
    view = adapt(harness.impl.introspect())
    return diagram(view) + "\n" + (_snapshot_chains(harness) if failed else "")
