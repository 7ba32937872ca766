"""Structural invariants of CopyOnWriteStateMap (docs/contract.md §8), each written once.

Every check is a function ``(view, ...) -> list[Violation]``; the state
machines, the fuzzer and debug switches all call these, never restate them.
A *view* is anything with the white-box fields of the reference map
(``primary_table``, ``incremental_rehash_table``, sizes, ``rehash_index``,
versions, ``threshold``) and entries with ``key, namespace, state, hash, next,
entry_version, state_version`` — the reference map itself, or a mirror built
by a bridge.

I8/I9 need to know what each live snapshot saw: :class:`SnapshotGuard`
records it when the snapshot is taken and checks it later.

Checking after every step: :class:`StructureTracker` gives the verdict of
:func:`check_structure` at the cost of what the step changed (it remembers
the structure it last verified and re-walks only changed buckets), and
``SnapshotGuard.check`` compares all recorded entries in bulk before looking
at any one. Both fall back to the plain per-entry checks above whenever
anything differs, so every reported violation comes from those.

>>> from cowcheck.reference import CopyOnWriteStateMap
>>> m = CopyOnWriteStateMap(capacity=4); m.put(1, 2, [3])
>>> check_structure(m)
[]
"""

from __future__ import annotations

import copy
from itertools import compress, count, repeat
from operator import attrgetter, is_, is_not, ne
from typing import Any, Iterable, NamedTuple

from cowcheck.reference.hashing import composite_hash
from cowcheck.reference.layout import bucket_index, threshold_for, uses_primary_table

__all__ = ["Violation", "check_structure", "StructureTracker", "SnapshotGuard", "INVARIANTS"]

INVARIANTS = {
    "I1": "every entry sits in the bucket its hash selects, in the table select_active_table picks",
    "I2": "table sizes equal the entries reachable from each table",
    "I3": "no (key, namespace) appears twice",
    "I4": "0 <= rehash_index < len(primary); moved primary buckets are empty while rehashing",
    "I5": "R == max(live snapshot versions) or 0, every version <= V",
    "I6": "entry_version <= V and state_version <= V",
    "I7": "table lengths are powers of two, rehash table 2x primary, threshold matches",
    "I8": "no state reachable from a live snapshot changed since the snapshot",
    "I9": "no entry shared with a live snapshot was written in place (writes go to copies)",
}

_CHAIN_LIMIT = 1 << 22  # a chain longer than this is a cycle


class Violation(NamedTuple):
    """One broken invariant: ``code`` (I1..I9) and a message naming what and where."""

    code: str
    message: str

    def __repr__(self) -> str:
        return f"{self.code}: {self.message}"


def _chain(head) -> Iterable:
    e = head
    n = 0
    while e is not None:
        yield e
        n += 1
        if n > _CHAIN_LIMIT:
            raise RuntimeError("chain does not end (cycle)")
        e = e.next


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def check_structure(view, live_versions: Iterable[int] | None = None) -> list[Violation]:
    """I1–I7 on the live tables. ``live_versions``: the snapshot versions the
    caller still holds (checked against the map's own registry when given)."""
    out: list[Violation] = []
    primary = view.primary_table
    rehash = view.incremental_rehash_table
    rehashing = view.is_rehashing
    plen = len(primary)
    version = view.state_map_version
    required = view.highest_required_snapshot_version

    # I7
    if not _is_power_of_two(plen) or plen < 4:
        out.append(Violation("I7", f"primary table length {plen} is not a power of two >= 4"))
    if rehashing:
        if len(rehash) != 2 * plen:
            out.append(Violation("I7", f"rehash table length {len(rehash)} != 2 x primary {plen}"))
        expected_threshold = threshold_for(len(rehash))
    else:
        expected_threshold = threshold_for(plen)
    if view.threshold != expected_threshold:
        out.append(Violation("I7", f"threshold {view.threshold} != {expected_threshold} for the current capacity"))

    # I4
    ri = view.rehash_index
    if rehashing:
        if not 0 <= ri < plen:
            out.append(Violation("I4", f"rehash_index {ri} outside [0, {plen})"))
        for i in range(min(ri, plen)):
            if primary[i] is not None:
                out.append(Violation("I4", f"primary bucket {i} < rehash_index {ri} still holds {primary[i].key!r}"))
    elif ri != 0:
        out.append(Violation("I4", f"rehash_index {ri} != 0 while not rehashing"))

    # I1, I2, I3, I6
    seen: dict = {}
    tables = [("primary", primary)] + ([("rehash", rehash)] if rehashing else [])
    for name, table in tables:
        count = 0
        tlen = len(table)
        for idx, head in enumerate(table):
            try:
                entries = list(_chain(head))
            except RuntimeError:
                out.append(Violation("I1", f"{name}[{idx}]: chain does not end (cycle)"))
                continue
            for e in entries:
                count += 1
                where = f"({e.key!r}, {e.namespace!r}) in {name}[{idx}]"
                try:
                    h = composite_hash(e.key, e.namespace)
                except (TypeError, ValueError):
                    h = e.hash
                if e.hash != h:
                    out.append(Violation("I1", f"{where}: stored hash {e.hash} != composite hash {h}"))
                if bucket_index(e.hash, tlen) != idx:
                    out.append(Violation("I1", f"{where}: hash selects bucket {bucket_index(e.hash, tlen)}"))
                in_primary = uses_primary_table(e.hash, plen, ri) if rehashing else True
                if in_primary != (name == "primary"):
                    want = "primary" if in_primary else "rehash"
                    out.append(Violation("I1", f"{where}: select_active_table picks the {want} table"))
                ident = (e.key, e.namespace)
                if ident in seen:
                    out.append(Violation("I3", f"({e.key!r}, {e.namespace!r}) appears in {seen[ident]} and {name}[{idx}]"))
                else:
                    seen[ident] = f"{name}[{idx}]"
                if e.entry_version > version or e.state_version > version:
                    out.append(Violation(
                        "I6", f"{where}: entry_version {e.entry_version} / state_version {e.state_version} > V={version}"))
        size = view.primary_table_size if name == "primary" else view.incremental_rehash_table_size
        if size != count:
            out.append(Violation("I2", f"{name}_table_size {size} != {count} reachable entries"))
    if not rehashing and view.incremental_rehash_table_size != 0:
        out.append(Violation("I2", f"incremental_rehash_table_size {view.incremental_rehash_table_size} != 0 while not rehashing"))

    # I5
    registered = sorted(view.snapshot_versions)
    expected_r = registered[-1] if registered else 0
    if required != expected_r:
        out.append(Violation("I5", f"highest_required_snapshot_version {required} != max{registered} or 0"))
    if any(v > version or v <= 0 for v in registered):
        out.append(Violation("I5", f"snapshot versions {registered} not in [1, V={version}]"))
    if live_versions is not None and sorted(live_versions) != registered:
        out.append(Violation("I5", f"map registers snapshot versions {registered}, live snapshots are {sorted(live_versions)}"))
    return out


# The fields of an entry the structural invariants depend on (its state is I8/I9's business).
_LINKS = attrgetter("key", "namespace", "hash", "next", "entry_version", "state_version")
_STATE = attrgetter("state")
_HASH_MEMO_LIMIT = 1 << 14
_MEMO_TYPES = (int, str)
_NO_TABLE: list = []  # the rehash table while not rehashing (never written)


def _non_empty(table: list, start: int = 0, stop: int | None = None) -> Iterable[int]:
    """Indices of the occupied buckets of ``table[start:stop]`` (C speed)."""
    part = table if start == 0 and stop is None else table[start:stop]
    return compress(count(start), map(is_not, part, repeat(None)))


class _Verified:
    """What StructureTracker last verified: every bucket head, and per reachable
    entry its bucket and :data:`_LINKS` fields."""

    __slots__ = ("shape", "rehashing", "rehash_index", "version", "heads", "buckets",
                 "owner", "counts", "entries", "where", "links")

    def flatten(self) -> None:
        self.entries = [e for chain, _ in self.buckets.values() for e in chain]
        self.where = [b for b, (chain, _) in self.buckets.items() for _ in chain]
        self.links = list(map(_LINKS, self.entries))


class StructureTracker:
    """:func:`check_structure` after every step, paying for what the step changed.

    It remembers the structure it last verified: every bucket head, and for
    every reachable entry its key, namespace, hash, ``next`` and versions.
    After a step, bulk comparisons (C loops, no Python per entry) find the
    buckets whose head changed or that hold an entry whose fields changed;
    only those chains are walked again (I1, I3, I6, chain counts for I2), and
    I4, I5, I7 and the sizes are checked from the scalars. Everything the
    invariants depend on is either compared or re-walked, so the verdict is
    the full check's; a key must not change its hash in place (keys are
    immutable by the map's contract), and a key replaced by an equal one of
    another type (``1`` by ``True``) goes unnoticed until its bucket changes.

    Whenever it cannot be sure (a table changed length, rehashing started or
    ended, the rehash index or version went backwards) or finds anything
    wrong, it runs :func:`check_structure`, which stays the authority: every
    reported violation comes from it.

    >>> from cowcheck.reference import CopyOnWriteStateMap
    >>> m = CopyOnWriteStateMap(capacity=4); tracker = StructureTracker()
    >>> m.put(1, 2, [3]); tracker.check(m), tracker.check(m)
    ([], [])
    >>> t = m.primary_table; i = next(i for i, e in enumerate(t) if e)
    >>> t[i], t[i ^ 1] = t[i ^ 1], t[i]  # move the entry to the wrong bucket
    >>> [v.code for v in tracker.check(m)]
    ['I1']
    """

    def __init__(self) -> None:
        self._last: _Verified | None = None
        self._hashes: dict = {}
        self.full_checks = 0  # how often the full check ran (for tests and benchmarks)

    def check(self, view, live_versions: Iterable[int] | None = None) -> list[Violation]:
        if self._last is not None and self._verified(view, live_versions):
            return []
        self.full_checks += 1
        out = check_structure(view, live_versions)
        self._last = None if out else self._remember(view)
        return out

    def forget(self) -> None:
        """Verify from scratch next time."""
        self._last = None

    # ------------------------------------------------------------ remember

    def _remember(self, view) -> _Verified:
        last = _Verified()
        primary = view.primary_table
        last.rehashing = rehashing = view.is_rehashing
        rehash = view.incremental_rehash_table if rehashing else _NO_TABLE
        last.shape = (len(primary), rehashing, len(rehash), view.threshold)
        last.rehash_index = view.rehash_index
        last.version = view.state_map_version
        last.heads = (list(primary), list(rehash))
        last.buckets = {}
        last.owner = {}
        for t, table in enumerate(last.heads):
            for idx in _non_empty(table):
                chain = list(_chain(table[idx]))
                idents = [(e.key, e.namespace) for e in chain]
                last.buckets[(t, idx)] = (chain, idents)
                last.owner.update(dict.fromkeys(idents, (t, idx)))
        last.counts = [view.primary_table_size, view.incremental_rehash_table_size]  # == chain lengths
        last.flatten()
        return last

    # -------------------------------------------------------------- verify

    def _verified(self, view, live_versions) -> bool:
        """True if the structure provably still satisfies I1–I7 (updating what
        is remembered); False if the full check must decide."""
        last = self._last
        primary = view.primary_table
        rehashing = view.is_rehashing
        rehash = view.incremental_rehash_table if rehashing else _NO_TABLE
        if (len(primary), rehashing, len(rehash), view.threshold) != last.shape:
            return False  # I7 holds while lengths and threshold stay as verified
        version = view.state_map_version
        ri = view.rehash_index
        was = last.rehash_index
        if version < last.version or ri < was or (ri >= last.shape[0] if rehashing else ri):
            return False
        # I5
        registered = view.snapshot_versions
        required = view.highest_required_snapshot_version
        if registered:
            if required != max(registered) or required > version or min(registered) <= 0:
                return False
        elif required:
            return False
        if live_versions is not None and (len(live_versions) != len(registered)
                                          or sorted(live_versions) != sorted(registered)):
            return False
        # I4: the buckets the rehash index passed since last time are empty
        if ri != was and any(_non_empty(primary, was, ri)):
            return False
        # What changed: bucket heads, and the fields of any entry reachable before.
        heads_p, heads_r = last.heads
        links = list(map(_LINKS, last.entries))
        if any(map(is_not, primary, heads_p)) or (rehashing and any(map(is_not, rehash, heads_r))) \
                or links != last.links:
            dirty = {(0, i) for i in compress(count(), map(is_not, primary, heads_p))}
            if rehashing:
                dirty.update((1, i) for i in compress(count(), map(is_not, rehash, heads_r)))
            where = last.where
            dirty.update(where[i] for i in compress(count(), map(ne, links, last.links)))
            if not self._rewalk(last, dirty, primary, rehash, ri, version):
                return False
        # I2
        counts = last.counts
        if view.primary_table_size != counts[0] or view.incremental_rehash_table_size != counts[1]:
            return False
        last.rehash_index, last.version = ri, version
        return True

    def _rewalk(self, last: _Verified, dirty: set, primary: list, rehash: list, ri: int, version: int) -> bool:
        buckets, owner, counts = last.buckets, last.owner, last.counts
        plen = len(primary)
        hashes = self._hashes
        if len(hashes) > _HASH_MEMO_LIMIT:
            hashes.clear()
        for b in dirty:  # first forget what the changed buckets held, so moves are no duplicates
            chain, idents = buckets.pop(b, ((), ()))
            counts[b[0]] -= len(chain)
            for ident in idents:
                if owner.get(ident) == b:
                    del owner[ident]
        limit = len(last.entries) + 16  # longer: a cycle, or many inserts at once; the full check decides
        for b in dirty:
            t, idx = b
            table = rehash if t else primary
            mask = len(table) - 1
            e = table[idx]
            if e is None:
                continue
            if not t and idx < ri and last.rehashing:
                return False  # I4 / I1: a moved primary bucket holds entries
            chain, idents = [], []
            while e is not None:
                if len(chain) > limit:
                    return False
                h = e.hash
                if h & mask != idx or (t and h & (plen - 1) >= ri) or e.entry_version > version \
                        or e.state_version > version:
                    return False
                ident = (e.key, e.namespace)
                if ident in owner:
                    return False
                # memoised only for int and str: 1, 1.0 and True are one dict key but hash apart in Java
                memo = type(ident[0]) in _MEMO_TYPES and type(ident[1]) in _MEMO_TYPES
                expected = hashes.get(ident) if memo else None
                if expected is None:
                    try:
                        expected = composite_hash(*ident)
                    except (TypeError, ValueError):
                        expected = h  # not a value type with a Java hash: the full check skips it too
                    if memo:
                        hashes[ident] = expected
                if expected != h:
                    return False
                owner[ident] = b
                chain.append(e)
                idents.append(ident)
                e = e.next
            buckets[b] = (chain, idents)
            counts[t] += len(chain)
        last.heads = (list(primary), list(rehash))
        last.flatten()
        return True


class SnapshotGuard:
    """Remembers, per live snapshot, every entry object it can reach with the
    fields and a deep copy of the state at snapshot time; ``check()`` reports
    I8 (state content changed) and I9 (a shared entry written in place).

    ``check()`` first compares every recorded entry at once (each distinct
    record once, though overlapping snapshots share most entries) and only on
    a difference walks the records one by one to name what changed.

    ``record`` must run right after the snapshot is taken, before any other
    operation on the map.
    """

    def __init__(self, copier=copy.deepcopy) -> None:
        self._copier = copier
        self._records: dict[int, tuple[Any, list, list]] = {}  # version -> (snapshot, records, distinct keys)
        # Each distinct record once: key -> [entry, links, state, content, snapshots sharing it]
        self._distinct: dict[Any, list] = {}
        self._bulk: tuple | None = None  # (entries, links, states, contents) of self._distinct

    def record(self, snapshot) -> None:
        version = snapshot.version
        saved, keys = [], []
        distinct = self._distinct
        for e in snapshot.entry_objects():
            state = e.state
            content = self._copier(state)
            saved.append((e, e.key, e.namespace, e.hash, e.next, state, e.entry_version, e.state_version, content))
            links = _LINKS(e)
            key = id(e)
            same = distinct.get(key)
            if same is not None and not (same[1] == links and same[2] is state and same[3] == content):
                key, same = (key, version), None  # recorded differently before: check both
            if same is None:
                distinct[key] = [e, links, state, content, 1]
            else:
                same[4] += 1
            keys.append(key)
        self._records[version] = (snapshot, saved, keys)
        self._bulk = None

    def forget(self, version: int) -> None:
        record = self._records.pop(version, None)
        if record is None:
            return
        distinct = self._distinct
        for key in record[2]:
            same = distinct[key]
            same[4] -= 1
            if not same[4]:
                del distinct[key]
        self._bulk = None

    @property
    def versions(self) -> list[int]:
        return sorted(self._records)

    def check(self) -> list[Violation]:
        if self._bulk is None:
            records = self._distinct.values()
            self._bulk = ([r[0] for r in records], [r[1] for r in records], [r[2] for r in records],
                          [r[3] for r in records])
        entries, links, states, contents = self._bulk
        now = list(map(_STATE, entries))
        if list(map(_LINKS, entries)) == links and all(map(is_, now, states)) and now == contents:
            return []
        return self._explain()

    def _explain(self) -> list[Violation]:
        out: list[Violation] = []
        for version, (_, saved, _) in sorted(self._records.items()):
            for e, key, ns, h, nxt, state, ev, sv, content in saved:
                where = f"snapshot {version}, entry ({key!r}, {ns!r})"
                if (e.key, e.namespace, e.hash) != (key, ns, h) or e.next is not nxt or e.state is not state \
                        or e.entry_version != ev or e.state_version != sv:
                    out.append(Violation("I9", f"{where}: shared entry was written in place "
                                               f"({_diff_fields(e, key, ns, h, nxt, state, ev, sv)})"))
                if e.state != content:
                    out.append(Violation("I8", f"{where}: state changed from {content!r} to {e.state!r}"))
        return out


def _diff_fields(e, key, ns, h, nxt, state, ev, sv) -> str:
    changed = []
    if e.next is not nxt:
        changed.append("next")
    if e.state is not state:
        changed.append(f"state {state!r} -> {e.state!r}")
    if e.entry_version != ev:
        changed.append(f"entry_version {ev} -> {e.entry_version}")
    if e.state_version != sv:
        changed.append(f"state_version {sv} -> {e.state_version}")
    if (e.key, e.namespace, e.hash) != (key, ns, h):
        changed.append("key/namespace/hash")
    return ", ".join(changed)
