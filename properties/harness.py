"""Apply steps to an implementation and the model side by side; check every property.

The harness is the one place where the properties of SPEC §9 (P1–P7) and the
invariants of SPEC §8 are checked; the Hypothesis machines, ``cowcheck
check``, seeded walks and replay all drive it. A broken property raises
:class:`CheckFailure` carrying a :class:`Failure`.

Identity (SPEC §6, exact identity rule) is tracked apart from content: the
model keeps its own deep copies, and ``held`` remembers which object the
implementation should be holding for each key, so "returns the caller's own
object" and "returns a fresh copy" are both checked.

>>> from reference import CopyOnWriteStateMap
>>> h = Harness(CopyOnWriteStateMap(capacity=4), white_box=True)
>>> h.apply(Step("put", (1, 0, [5]))); h.apply(Step("snapshot", (0,)))
>>> h.apply(Step("get_mutate", (1, 0, 9))); h.apply(Step("read_snapshot", (0,)))
>>> sorted(h.coverage)
['mutate-returned-under-snapshot', 'put-empty-bucket', 'snapshot-not-rehashing']
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from model import ModelMap
from properties.program import (OPS, SNAPSHOT_TRANSFORMERS, Step, copy_state, entries, render, same_entries,
                                transform_append)
from properties.scenarios import classify_keyed, classify_release, classify_snapshot
from reference.hashing import composite_hash
from reference.invariants import SnapshotGuard, StructureTracker

__all__ = ["Failure", "CheckFailure", "Harness", "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT", "has_introspection"]

DIVERGENCE = "DIVERGENCE"
INVARIANT = "INVARIANT"
CRASH = "CRASH"
TIMEOUT = "TIMEOUT"

_KEYED = {"put", "put_and_get_old", "get", "get_mutate", "contains_key", "remove", "remove_and_get_old", "transform"}
_MISSING = object()
_ENTRIES = object()  # marks an observed pair of entry lists not yet turned into entries() strings


@attrs.frozen
class Failure:
    """What went wrong: a stable ``kind``, the property or invariant ``code``
    (P1..P7, I1..I9), a message naming op, key, namespace, expected and actual,
    and the index of the failing step."""

    kind: str
    code: str
    message: str
    step_index: int
    expected: Any = None
    actual: Any = None

    def headline(self) -> str:
        return f"{self.kind} {self.code}: {self.message}"


class CheckFailure(AssertionError):
    """A property or invariant broke; ``.failure`` says which and where."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.headline())
        self.failure = failure


def has_introspection(impl) -> bool:
    """True if ``impl`` offers the white-box view that ``reference.invariants`` reads."""
    return callable(getattr(impl, "introspect", None))


class Harness:
    """Drives one implementation instance against a fresh model.

    ``white_box``: check I1–I9 after every step and classify scenarios (needs
    ``impl.introspect()``). ``strict_live_iteration``: hold live iteration to
    the ideal contract (each entry exactly once, or an error) even when reads
    drive the rehash mid-iteration; Flink does not meet it (SPEC §7), so by
    default a breach is only counted as the finding ``live-iteration-quirk``.
    ``state_copier``: how the model and the suite copy states (a deep copy;
    :func:`~properties.program.copy_state` by default). ``symbolic``: values
    may be CrossHair's symbolic ones; results are compared through their
    ``repr`` (which makes them concrete) rather than sorted.
    """

    def __init__(self, impl, *, white_box: bool | None = None, state_copier=copy_state,
                 strict_live_iteration: bool = False, symbolic: bool = False) -> None:
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
        self.steps: list[Step] = []
        self.coverage: Counter = Counter()
        self.findings: Counter = Counter()
        self.failure: Failure | None = None
        self.live_versions: dict = {}  # sid -> version of each snapshot taken and not released
        self._observed: tuple | None = None
        self._ops = {op: getattr(self, "_op_" + op) for op in OPS}
        self._hashes: dict = {}  # composite hashes of int keys and namespaces seen

    @property
    def observed(self) -> tuple | None:
        """(model result, implementation result) of the latest step that returns
        a value; entry lists as :func:`~properties.program.entries` strings,
        encoded on first read (so read it right after the step)."""
        seen = self._observed
        if seen is not None and seen[0] is _ENTRIES:
            seen = self._observed = (entries(seen[1]), entries(seen[2]))
        return seen

    # ------------------------------------------------------------- helpers

    def _fail(self, kind: str, code: str, message: str, expected=None, actual=None):
        self.failure = Failure(kind, code, message, len(self.steps) - 1, expected, actual)
        raise CheckFailure(self.failure)

    def _call(self, step: Step, fn, *args):
        try:
            return fn(*args)
        except CheckFailure:
            raise
        except Exception as exc:  # the implementation crashed where the model did not
            self._fail(CRASH, "P7", f"{render(step)}: raised {type(exc).__name__}: {exc}",
                       expected="no error", actual=f"{type(exc).__name__}: {exc}")

    def _expect_equal(self, step: Step, expected, actual, code: str = "P1") -> None:
        self._observed = (expected, actual)  # read (or copy) right after the step
        if expected != actual:
            self._fail(DIVERGENCE, code, f"{_describe(step)}: model returned {expected!r}, map returned {actual!r}",
                       expected, actual)

    def _expect_identity(self, step: Step, key, namespace, value, copy_expected: bool) -> None:
        held = self.held.get((key, namespace), _MISSING)
        if held is _MISSING or value is None:
            return
        if copy_expected and value is held:
            self._fail(DIVERGENCE, "P6", f"{_describe(step)}: returned the live state object although a live "
                                         f"snapshot may share it (expected a fresh copy)",
                       "fresh copy", "same object")
        if not copy_expected and value is not held:
            self._fail(DIVERGENCE, "P6", f"{_describe(step)}: returned a copy although no live snapshot is newer "
                                         f"than the state (expected the caller's own object)",
                       "same object", "copy")

    def _copy_expected(self, key, namespace) -> bool:
        slot = self.model.data.get((key, namespace))
        return slot is not None and slot[1] < self.model.required_version()

    # ---------------------------------------------------------------- apply

    def apply(self, step: Step) -> None:
        """Run one step on both sides and check everything; raises CheckFailure."""
        self.steps.append(step)
        self._observed = None
        self._count_scenarios(step)
        self._ops[step.op](step, *step.args)
        self.check_after_step(step)

    def check_after_step(self, step: Step) -> None:
        self.check_size(step)
        if self.white_box:
            self.check_invariants(step)

    def check_size(self, step: Step) -> None:
        """P4 after ``step``: the implementation's size equals the model's."""
        n_impl = self._call(step, len, self.impl)
        if n_impl != len(self.model):
            self._fail(DIVERGENCE, "P4", f"after {_describe(step)}: model has {len(self.model)} entries, "
                                         f"map reports {n_impl}", len(self.model), n_impl)

    def check_invariants(self, step: Step) -> None:
        """I1–I9 after ``step`` (white-box): the verdict of a full check, at the
        cost of what changed (``StructureTracker``, ``SnapshotGuard``)."""
        view = self.impl.introspect()
        violations = self.tracker.check(view, self.live_versions.values()) + self.guard.check()
        if violations:
            v = violations[0]
            more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
            self._fail(INVARIANT, v.code, f"after {_describe(step)}: {v.message}{more}")

    def _count_scenarios(self, step: Step) -> None:
        """Scenarios the model can see, and (white-box) those the structure shows."""
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
        if not self.white_box:
            return
        if op in _KEYED:
            memo = type(args[0]) is int and type(args[1]) is int  # 1, 1.0 and True share a dict key
            h = self._hashes.get((args[0], args[1])) if memo else None
            if h is None:
                try:
                    h = composite_hash(args[0], args[1])
                except (TypeError, ValueError):
                    return
                if memo:
                    self._hashes[(args[0], args[1])] = h
            _count(coverage, classify_keyed(self.impl.introspect(), op, args[0], args[1], h))
        elif op == "snapshot":
            _count(coverage, classify_snapshot(self.impl.introspect()))

    # ------------------------------------------------------------ keyed ops

    def _op_put(self, step, key, namespace, state):
        obj = list(state)
        self._call(step, self.impl.put, key, namespace, obj)
        self.model.put(key, namespace, self._copy(obj))
        self.held[(key, namespace)] = obj

    def _op_put_and_get_old(self, step, key, namespace, state):
        obj = list(state)
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.put_and_get_old, key, namespace, obj)
        want = self.model.put_and_get_old(key, namespace, self._copy(obj))
        self._expect_equal(step, want, got)
        self._expect_identity(step, key, namespace, got, copy_expected)
        self.held[(key, namespace)] = obj

    def _op_get(self, step, key, namespace, mutate_with=_MISSING):
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.get, key, namespace)
        want = self.model.get(key, namespace)
        self._expect_equal(step, want, got)
        self._expect_identity(step, key, namespace, got, copy_expected)
        if got is not None:
            self.held[(key, namespace)] = got
            if mutate_with is not _MISSING and isinstance(got, list):
                got.append(mutate_with)
                want.append(mutate_with)

    def _op_get_mutate(self, step, key, namespace, value):
        self._op_get(step, key, namespace, value)

    def _op_contains_key(self, step, key, namespace):
        got = self._call(step, self.impl.contains_key, key, namespace)
        self._expect_equal(step, self.model.contains_key(key, namespace), got)

    def _op_remove(self, step, key, namespace):
        self._call(step, self.impl.remove, key, namespace)
        self.model.remove(key, namespace)
        self.held.pop((key, namespace), None)

    def _op_remove_and_get_old(self, step, key, namespace):
        copy_expected = self._copy_expected(key, namespace)
        got = self._call(step, self.impl.remove_and_get_old, key, namespace)
        want = self.model.remove_and_get_old(key, namespace)
        self._expect_equal(step, want, got)
        self._expect_identity(step, key, namespace, got, copy_expected)
        self.held.pop((key, namespace), None)

    def _op_transform(self, step, key, namespace, value):
        copy_expected = self._copy_expected(key, namespace)
        seen = {}

        def fn(old, v):
            seen["old"], seen["old_content"] = old, self._copy(old)
            seen["new"] = transform_append(old, v)
            return seen["new"]

        self._call(step, self.impl.transform, key, namespace, value, fn)
        if "old" not in seen:
            self._fail(DIVERGENCE, "P1", f"{_describe(step)}: the transform function was never called")
        slot = self.model.data.get((key, namespace))
        self._expect_equal(step, self._copy(slot[0]) if slot else None, seen["old_content"])
        self._expect_identity(step, key, namespace, seen["old"], copy_expected)
        self.model.transform(key, namespace, value, transform_append)
        self.held[(key, namespace)] = seen["new"]

    def _op_rehash(self, step, reads):
        for _ in range(reads):
            self._call(step, self.impl.contains_key, -1, -1)

    # ------------------------------------------------------------ snapshots

    def _op_snapshot(self, step, sid):
        if sid in self.snapshots:
            self._fail(CRASH, "program", f"snapshot id s{sid} used twice in one program")
        snap = self._call(step, self.impl.snapshot)
        msnap = self.model.snapshot()
        self.snapshots[sid] = (snap, msnap)
        if self.guard is not None:
            self.guard.record(snap)
        version = getattr(snap, "version", msnap.version)
        self.live_versions[sid] = version
        if version != msnap.version:
            self._fail(DIVERGENCE, "P5", f"{_describe(step)}: snapshot version {version}, expected {msnap.version}",
                       msnap.version, version)
        if len(snap) != len(msnap):
            self._fail(DIVERGENCE, "P4", f"{_describe(step)}: snapshot reports {len(snap)} entries, "
                                         f"model {len(msnap)}", len(msnap), len(snap))

    def _snapshot_pair(self, step, sid):
        pair = self.snapshots.get(sid)
        if pair is None:
            self._fail(CRASH, "program", f"{render(step)}: snapshot s{sid} was never taken in this program")
        return pair

    def _op_read_snapshot(self, step, sid):
        snap, msnap = self._snapshot_pair(step, sid)
        if snap.released:
            return
        got = self._call(step, list, snap)
        self._expect_snapshot(step, sid, msnap.iterate(), got, len(msnap), len(snap))

    def _expect_snapshot(self, step, sid, want, got, want_size, got_size):
        self._observed = (_ENTRIES, want, got)
        if want_size != got_size or not same_entries(want, got, self.symbolic):
            want, got = self.observed
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            self._fail(DIVERGENCE, "P2", f"{_describe(step)}: snapshot s{sid} differs from its frozen copy: "
                                         f"missing {missing[:3]}, unexpected {extra[:3]}, "
                                         f"size {got_size} (expected {want_size})",
                       want, got)

    def _op_read_snapshot_transformed(self, step, sid, transformer):
        snap, msnap = self._snapshot_pair(step, sid)
        if snap.released:
            return
        fn = SNAPSHOT_TRANSFORMERS[transformer]
        view = self._call(step, snap.iterate, fn)
        got = self._call(step, list, view)
        want = msnap.iterate(fn)
        self._expect_snapshot(step, sid, want, got, len(want), len(view))
        self._release(step, sid)

    def _op_release(self, step, sid):
        self._release(step, sid)

    def _release(self, step, sid):
        snap, msnap = self._snapshot_pair(step, sid)
        self._call(step, snap.release)
        msnap.release()
        self.live_versions.pop(sid, None)
        if not snap.released:
            self._fail(DIVERGENCE, "P3", f"{_describe(step)}: snapshot s{sid} does not report released")
        if self.guard is not None:
            self.guard.forget(snap.version)

    # ------------------------------------------------------------ iteration

    def _op_iterate(self, step):
        got = self._call(step, list, self.impl)
        self._expect_live(step, got)

    def _expect_live(self, step, got):
        want = list(self.model)
        self._observed = (_ENTRIES, want, got)
        if not same_entries(want, got, self.symbolic):
            want, got = self.observed
            self._fail(DIVERGENCE, "P1", f"{_describe(step)}: live iteration gave {got[:4]}…, "
                                         f"model {want[:4]}…", want, got)

    def _op_iterate_modify(self, step, position, key, namespace, change):
        total = len(self.model)
        position = min(position, total)
        it = self._call(step, iter, self.impl)
        seen = [self._call(step, next, it) for _ in range(position)]
        before = set(self.model.data)
        structural = (change == "put") != ((key, namespace) in before)
        if change == "put":
            self._op_put(step, key, namespace, [0])
        else:
            self._op_remove(step, key, namespace)
        after = set(self.model.data)
        error = None
        try:
            seen.extend(it)
        except RuntimeError as exc:
            error = exc
        if structural and position < total:
            if error is None:
                self._fail(DIVERGENCE, "P7", f"{_describe(step)}: iteration went on after a structural change "
                                             f"(expected ConcurrentModificationError)", "error", "no error")
            return
        if error is not None:
            self._fail(CRASH, "P7", f"{_describe(step)}: iteration raised {type(error).__name__} "
                                    f"without a structural change", "no error", repr(error))
        idents = [(k, n) for k, n, _ in seen]
        visited = set(idents)
        if len(visited) == len(idents) and before & after <= visited <= before | after:
            return
        if self.strict_live_iteration:
            counts = Counter(idents)
            dups = sorted((k for k, c in counts.items() if c > 1), key=repr)
            skipped = sorted((before & after) - visited, key=repr)
            self._fail(DIVERGENCE, "P7", f"{_describe(step)}: live iteration across a rehash step repeated "
                                         f"{dups[:3]} and skipped {skipped[:3]} without raising")
        self.findings["live-iteration-quirk"] += 1

    def _op_keys(self, step, namespace):
        got = self._call(step, lambda: list(self.impl.keys(namespace)))
        want = list(self.model.keys(namespace))
        self._expect_equal(step, *_sort_both(want, got, self.symbolic))

    def _op_size_of_namespace(self, step, namespace):
        got = self._call(step, self.impl.size_of_namespace, namespace)
        self._expect_equal(step, self.model.size_of_namespace(namespace), got)

    def _op_visit(self, step, max_empty):
        if not hasattr(self.impl, "incremental_visitor"):
            return  # optional API (SPEC §7); nothing to check
        visitor = self._call(step, self.impl.incremental_visitor, max_empty)
        self._call(step, self._visit_all, step, visitor)

    def _visit_all(self, step, visitor):
        """Drive ``visitor`` to its end, pruning states of even length on both
        sides (TTL-style); an exception from the visitor is a CRASH (``_call``).

        White-box, when no rehash is in progress as the visit starts (pruning
        only removes, which starts none), the visit is a read of the whole live
        map (P1): every entry once, none twice. During a rehash Flink's visitor
        may return an entry twice (it moves to a bucket not yet visited), so
        then repeats are skipped and nothing is required."""
        data = self.model.data
        limit = 4 * (len(data) + 64) + 1024
        exact = self.white_box and not self.impl.introspect().is_rehashing
        present = set(data) if exact else None
        visited: list = []
        calls = 0
        while visitor.has_next():
            calls += 1
            if calls > limit:
                self._fail(TIMEOUT, "P7", f"{_describe(step)}: incremental visitor does not end")
            for key, namespace, state in visitor.next_entries():
                if exact:
                    visited.append((key, namespace))
                slot = data.get((key, namespace))
                if slot is None:
                    continue  # visited twice after a rehash step, already pruned
                self._expect_equal(step, slot[0], state)
                if isinstance(state, list) and len(state) % 2 == 0:
                    visitor.remove((key, namespace, state))
                    self.model.remove(key, namespace)
                    self.held.pop((key, namespace), None)
        if exact and (len(visited) != len(present) or set(visited) != present):
            missing = sorted(present - set(visited), key=repr)
            twice = sorted({e for e in visited if visited.count(e) > 1}, key=repr)
            self._fail(DIVERGENCE, "P1", f"{_describe(step)}: the incremental visitor (no rehash in progress) "
                                         f"returned {len(visited)} entries for {len(present)}: missing "
                                         f"{missing[:3]}, twice {twice[:3]}", len(present), len(visited))


def _sort_both(a: list, b: list, symbolic: bool) -> tuple[list, list]:
    """Both lists sorted the same way: by value, or by ``repr`` for values that
    do not sort together or are symbolic."""
    if not symbolic:
        try:
            return sorted(a), sorted(b)
        except TypeError:
            pass
    return sorted(a, key=repr), sorted(b, key=repr)


def _count(counter: Counter, names) -> None:
    get = counter.get
    for name in names:
        counter[name] = get(name, 0) + 1


def _describe(step: Step) -> str:
    return render(step)
