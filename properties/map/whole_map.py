"""The map harness's steps over the whole map: snapshots (taken, read, written, released) and iteration.

:class:`WholeMapSteps` is a mixin of :class:`~cowcheck.map.harness.Harness`
(which holds the model, the implementation and the checking helpers these
steps call): the keyed and bulk steps are there, these here.
"""

from __future__ import annotations

import io
from collections import Counter

from cowcheck.core.failures import CRASH, DIVERGENCE, TIMEOUT, safe_equal, safe_repr
from cowcheck.core.remote import take
from cowcheck.core.states import same_entries
from cowcheck.map.introspection import observe_flag
from cowcheck.map.ops import SNAPSHOT_TRANSFORMERS, decode_written, render, write_serializers
from cowcheck.reference.serializers import SerializationError

_ENTRIES = object()  # marks an observed pair of entry lists not yet turned into entries() strings


class WholeMapSteps:
    """The ``snapshot``, ``read_snapshot``..., ``release``, ``iterate``..., ``keys``, ``visit`` steps
    of a map harness."""

    # ------------------------------------------------------------ snapshots

    def _op_snapshot(self, step, sid):
        if sid in self.snapshots:
            self._fail(CRASH, "program", f"snapshot id s{sid} used twice in one program")
        snap = self._call(step, self.impl.snapshot)
        msnap = self.model.snapshot()
        self.snapshots[sid] = (snap, msnap)
        if self.guard is not None:
            self._white(step, self.guard.record, snap)
        version = self._flag(step, snap, "version", "P5")
        self.live_versions[sid] = version
        if not safe_equal(version, msnap.version) is True:
            self._fail(DIVERGENCE, "P5", f"{render(step)}: snapshot version {safe_repr(version)}, expected "
                                         f"{msnap.version}", msnap.version, version)
        size = self._call(step, len, snap)
        if size != len(msnap):
            self._fail(DIVERGENCE, "P4", f"{render(step)}: snapshot reports {size} entries, "
                                         f"model {len(msnap)}", len(msnap), size)

    def _snapshot_pair(self, step, sid):
        pair = self.snapshots.get(sid)
        if pair is None:
            self._fail(CRASH, "program", f"{render(step)}: snapshot s{sid} was never taken in this program")
        return pair

    def _expect_live_snapshot(self, step, sid, snap) -> None:
        """The model holds s<sid> live: the implementation must not say it is released (P3)."""
        if self._flag(step, snap, "released", "P3"):
            self._fail(DIVERGENCE, "P3", f"{render(step)}: snapshot s{sid} reports released, but it was never "
                                         f"released", "released=False", "released=True")

    def _op_read_snapshot(self, step, sid):
        snap, msnap = self._snapshot_pair(step, sid)
        if msnap.released:
            return  # read after its release (a program the shrinker made): nothing is promised
        self._expect_live_snapshot(step, sid, snap)
        got = self._take(step, self._call(step, iter, snap), self._bound(len(msnap)), f"iterating snapshot s{sid}",
                         "P2", len(msnap))
        size = self._call(step, len, snap)
        self._expect_snapshot(step, sid, msnap.iterate(), got, len(msnap), size)

    def _expect_snapshot(self, step, sid, want, got, want_size, got_size):
        self._observed = (_ENTRIES, want, got)
        if want_size != got_size or not same_entries(want, got, self.symbolic):
            want, got = self.observed
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            self._fail(DIVERGENCE, "P2", f"{render(step)}: snapshot s{sid} differs from its frozen copy: "
                                         f"missing {missing[:3]}, unexpected {extra[:3]}, "
                                         f"size {safe_repr(got_size)} (expected {want_size})",
                       want, got)

    def _op_read_snapshot_transformed(self, step, sid, transformer):
        snap, msnap = self._snapshot_pair(step, sid)
        if msnap.released:
            return
        self._expect_live_snapshot(step, sid, snap)
        fn = SNAPSHOT_TRANSFORMERS[transformer]
        view = self._call(step, snap.iterate, fn)
        got = self._take(step, self._call(step, iter, view), self._bound(len(msnap)),
                         f"iterating snapshot s{sid} with a transformer", "P2")
        want = msnap.iterate(fn)
        self._expect_snapshot(step, sid, want, got, len(want), self._call(step, len, view))
        self._release(step, sid)

    def _op_write_snapshot(self, step, sid):
        """``write_state`` (docs/contract.md §15) with Flink's serializers, the bytes decoded and
        compared with the model's frozen copy, the written count included (P2)."""
        snap, msnap = self._snapshot_pair(step, sid)
        if msnap.released:
            return
        self._expect_live_snapshot(step, sid, snap)
        write = getattr(snap, "write_state", None)
        if write is None:
            return  # this implementation does not offer write_state (optional beyond docs/contract.md §15's list)
        want = msnap.iterate()
        serializers = write_serializers(*(want[0][:2] if want else ()))
        out = io.BytesIO()
        self._call(step, write, out, *serializers)
        data = out.getvalue()
        try:
            count, got = decode_written(data, serializers)
        except SerializationError as exc:
            self._observed = (_ENTRIES, want, [])
            self._fail(DIVERGENCE, "P2", f"{render(step)}: write_state wrote {len(data)} bytes that do not decode "
                                         f"as {len(msnap)} entries (int32 count, then namespace, key, state): {exc}",
                       f"{len(msnap)} entries", data[:64].hex())
        self._expect_snapshot(step, sid, want, got, len(msnap), count)

    def _op_release(self, step, sid):
        self._release(step, sid)
        # docs/contract.md §15: release() is idempotent. Released again, the snapshot stays released and
        # nothing else changes (the next steps compare every other snapshot with the model).
        snap, _ = self._snapshot_pair(step, sid)
        self._call(step, snap.release)
        if not self._flag(step, snap, "released", "P3"):
            self._fail(DIVERGENCE, "P3", f"{render(step)}: snapshot s{sid} released twice does not report released",
                       "released=True", "released=False")

    def _release(self, step, sid):
        snap, msnap = self._snapshot_pair(step, sid)
        self._call(step, snap.release)
        msnap.release()
        version = self.live_versions.pop(sid, None)
        if not self._flag(step, snap, "released", "P3"):
            self._fail(DIVERGENCE, "P3", f"{render(step)}: snapshot s{sid} does not report released",
                       "released=True", "released=False")
        if self.guard is not None and version is not None:
            self.guard.forget(version)

    # ------------------------------------------------------------ iteration

    def _op_iterate(self, step):
        got = self._take(step, self._call(step, iter, self.impl), self._bound(), "live iteration", "P1")
        self._expect_live(step, got)

    def _expect_live(self, step, got):
        want = list(self.model)
        self._observed = (_ENTRIES, want, got)
        if not same_entries(want, got, self.symbolic):
            want, got = self.observed
            self._fail(DIVERGENCE, "P1", f"{render(step)}: live iteration gave {got[:4]}…, "
                                         f"model {want[:4]}…", want, got)

    def _op_iterate_modify(self, step, position, key, namespace, change):
        total = len(self.model)
        position = min(position, total)
        it = self._call(step, iter, self.impl)
        seen = self._call(step, take, it, position)  # position next() calls
        if len(seen) < position:
            self._fail(DIVERGENCE, "P1", f"{render(step)}: live iteration ended after {len(seen)} entries, the "
                                         f"model has {total}", total, len(seen))
        before = set(self.model.data)
        structural = (change == "put") != ((key, namespace) in before)
        if change == "put":
            self._op_put(step, key, namespace, [0])
        else:
            self._op_remove(step, key, namespace)
        after = set(self.model.data)
        error = None
        bound = self._bound()
        try:
            take(it, bound + 1, into=seen)
        except RuntimeError as exc:  # ConcurrentModificationError is a RuntimeError (docs/contract.md §7)
            error = exc.with_traceback(None)  # kept without its frames (this one among them): no cycle holds
            # the harness and what it last read after the program
        except Exception as exc:
            self._fail(CRASH, "P7", f"{render(step)}: live iteration raised {type(exc).__name__}: {exc} "
                                    f"(a concurrent modification raises ConcurrentModificationError, a "
                                    f"RuntimeError)", "ConcurrentModificationError or no error",
                       f"{type(exc).__name__}: {exc}")
        if len(seen) > bound:
            self._fail(DIVERGENCE, "P1", f"{render(step)}: live iteration gave more than {bound} entries; it "
                                         f"does not end", f"at most {bound}", f"more than {bound}")
        if structural and position < total:
            if error is None:
                self._fail(DIVERGENCE, "P7", f"{render(step)}: iteration went on after a structural change "
                                             f"(expected ConcurrentModificationError: an iterator that has not "
                                             f"returned every entry raises on next() after a key is inserted or "
                                             f"removed)", "error", "no error")
            return
        if error is not None:
            rule = ("after it had returned every entry: an iterator that has returned every entry ends without "
                    "raising, whatever changed after" if structural else
                    "without a structural change: only inserting a new key or removing one makes it raise")
            self._fail(CRASH, "P7", f"{render(step)}: iteration raised {type(error).__name__} {rule}",
                       "no error", safe_repr(error))
        idents = [(k, n) for k, n, _ in self._entry_tuples(step, seen, "live iteration", "P1")]
        visited = set(idents)
        if len(visited) == len(idents) and before & after <= visited <= before | after:
            return
        if self.strict_live_iteration:
            counts = Counter(idents)
            dups = sorted((k for k, c in counts.items() if c > 1), key=safe_repr)
            skipped = sorted((before & after) - visited, key=safe_repr)
            self._fail(DIVERGENCE, "P7", f"{render(step)}: live iteration across a rehash step repeated "
                                         f"{dups[:3]} and skipped {skipped[:3]} without raising")
        phantom = visited - (before | after)
        if phantom:
            self._fail(DIVERGENCE, "P1", f"{render(step)}: live iteration gave entries the map never held: "
                                         f"{sorted(phantom, key=safe_repr)[:3]}")
        self.findings["live-iteration-quirk"] += 1

    def _op_keys(self, step, namespace):
        got = self._take(step, self._call(step, lambda: iter(self.impl.keys(self._key(namespace)))), self._bound(),
                         f"keys({namespace!r})", "P1")
        want = list(self.model.keys(namespace))
        self._expect_equal(step, *_sort_both(want, got, self.symbolic))

    def _op_size_of_namespace(self, step, namespace):
        got = self._call(step, self.impl.size_of_namespace, self._key(namespace))
        self._expect_equal(step, self.model.size_of_namespace(namespace), got)

    def _op_visit(self, step, max_empty):
        if not callable(getattr(self.impl, "incremental_visitor", None)):
            return  # optional API (docs/contract.md §7); nothing to check
        exact = self.white_box and not observe_flag(self._view(step), "is_rehashing")
        visitor = self._call(step, self.impl.incremental_visitor, max_empty)
        self._visit_all(step, visitor, exact, max_empty)

    def _visit_all(self, step, visitor, exact: bool, visitor_max_empty: int = 1):
        """Drive ``visitor`` to its end, pruning states of even length on both
        sides (TTL-style); an exception from the visitor is a CRASH (``_call``).

        Every entry it returns must be one the map held when the visit began,
        with the model's state. White-box, when no rehash is in progress as
        the visit starts (pruning only removes, which starts none; I4 holds the
        view's rehash state to the structure after every step), the visit is a
        read of the whole live map (P1): every entry once, none twice. During a
        rehash Flink's visitor may return an entry twice (it moves to a bucket
        not yet visited) or skip one, so then only the first rule applies."""
        data = self.model.data
        # Each call returns a chain or scans at most max_empty empty buckets, and a table never
        # shrinks: its length is below 8x the most entries the map held (3/4 load, doubled while
        # rehashing), or its capacity.
        most = max(self.space.largest_here, len(data))
        limit = (8 * (most + self.capacity + 64)) // max(visitor_max_empty, 1) + 4 * len(data) + 1024
        present = set(data)
        visited: list = []
        calls = 0
        while self._call(step, visitor.has_next):
            calls += 1
            if calls > limit:
                self._fail(TIMEOUT, "P7", f"{render(step)}: incremental visitor does not end")
            chain = self._take(step, self._call(step, lambda: iter(visitor.next_entries())), self._bound(),
                               "one call of the incremental visitor", "P1")
            for key, namespace, state in self._entry_tuples(step, chain, "the incremental visitor", "P1"):
                ident = (key, namespace)
                visited.append(ident)
                if ident not in present:
                    self._fail(DIVERGENCE, "P1", f"{render(step)}: the incremental visitor returned "
                                                 f"({safe_repr(key)}, {safe_repr(namespace)}), which the map did "
                                                 f"not hold", "an entry of the map", safe_repr(ident))
                slot = data.get(ident)
                if slot is None:
                    continue  # visited twice after a rehash step, already pruned
                self._expect_equal(step, slot[0], state)
                if isinstance(state, list) and len(state) % 2 == 0:
                    self._call(step, visitor.remove, (key, namespace, state))
                    self.model.remove(key, namespace)
                    self.held.pop(ident, None)
        if exact and (len(visited) != len(present) or set(visited) != present):
            missing = sorted(present - set(visited), key=safe_repr)
            twice = sorted({e for e in visited if visited.count(e) > 1}, key=safe_repr)
            self._fail(DIVERGENCE, "P1", f"{render(step)}: the incremental visitor (no rehash in progress) "
                                         f"returned {len(visited)} entries for {len(present)}: missing "
                                         f"{missing[:3]}, twice {twice[:3]}", len(present), len(visited))


def _sort_both(a: list, b: list, symbolic: bool) -> tuple[list, list]:
    """Both lists sorted the same way: by value, or by ``repr`` for values that
    do not sort together or are symbolic."""
    if not symbolic:
        try:
            return sorted(a), sorted(b)
        except Exception:
            pass
    return sorted(a, key=safe_repr), sorted(b, key=safe_repr)

