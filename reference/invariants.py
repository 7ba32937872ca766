"""Structural invariants of CopyOnWriteStateMap (SPEC §8), each written once.

Every check is a function ``(view, ...) -> list[Violation]``; the state
machines, the fuzzer and debug switches all call these, never restate them.
A *view* is anything with the white-box fields of the reference map
(``primary_table``, ``incremental_rehash_table``, sizes, ``rehash_index``,
versions, ``threshold``) and entries with ``key, namespace, state, hash, next,
entry_version, state_version`` — the reference map itself, or a mirror built
by a bridge.

I8/I9 need to know what each live snapshot saw: :class:`SnapshotGuard`
records it when the snapshot is taken and checks it later.

>>> from reference import CopyOnWriteStateMap
>>> m = CopyOnWriteStateMap(capacity=4); m.put(1, 2, [3])
>>> check_structure(m)
[]
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, NamedTuple

from reference.hashing import composite_hash
from reference.layout import bucket_index, threshold_for, uses_primary_table

__all__ = ["Violation", "check_structure", "SnapshotGuard", "INVARIANTS"]

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


class SnapshotGuard:
    """Remembers, per live snapshot, every entry object it can reach with the
    fields and a deep copy of the state at snapshot time; ``check()`` reports
    I8 (state content changed) and I9 (a shared entry written in place).

    ``record`` must run right after the snapshot is taken, before any other
    operation on the map.
    """

    def __init__(self, copier=copy.deepcopy) -> None:
        self._copier = copier
        self._records: dict[int, tuple[Any, list]] = {}

    def record(self, snapshot) -> None:
        saved = []
        for e in snapshot.entry_objects():
            saved.append((e, e.key, e.namespace, e.hash, e.next, e.state, e.entry_version,
                          e.state_version, self._copier(e.state)))
        self._records[snapshot.version] = (snapshot, saved)

    def forget(self, version: int) -> None:
        self._records.pop(version, None)

    @property
    def versions(self) -> list[int]:
        return sorted(self._records)

    def check(self) -> list[Violation]:
        out: list[Violation] = []
        for version, (_, saved) in sorted(self._records.items()):
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
