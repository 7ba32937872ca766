"""StructureTracker and SnapshotGuard's bulk check give the verdict of the plain
per-entry checks, step after step, on healthy maps and after every kind of
corruption, whichever bucket it hits and whatever the tracker remembered."""

import random

import pytest

from cowcheck.reference import CopyOnWriteStateMap, StateMapEntry
from cowcheck.reference.invariants import SnapshotGuard, StructureTracker, check_structure


def reachable(m):
    tables = [m.primary_table] + ([m.incremental_rehash_table] if m.is_rehashing else [])
    out = []
    for table in tables:
        for head in table:
            e = head
            while e is not None:
                out.append(e)
                e = e.next
    return out


def chain_of(table, h):
    out, e = [], table[h & (len(table) - 1)]
    while e is not None:
        out.append(e)
        e = e.next
    return out


def step(m, rng, live):
    """One random operation of a workload that keeps the map rehashing often."""
    r = rng.random()
    key, namespace = rng.randrange(40), rng.randrange(3)
    if rng.random() < 0.2:
        namespace = key  # hash 0: long chains
    if r < 0.4:
        m.put(key, namespace, [key])
    elif r < 0.55:
        m.remove(key, namespace)
    elif r < 0.7:
        state = m.get(key, namespace)
        if state is not None:
            state.append(1)
    elif r < 0.8:
        m.contains_key(-1, -1)
    elif r < 0.9:
        live.append(m.snapshot())
        return live[-1]
    elif live:
        live.pop(rng.randrange(len(live))).release()
    return None


def corrupt(m, rng) -> str:
    """Break (or, sometimes, harmlessly touch) one thing the invariants look at."""
    entries = reachable(m)
    table = m.primary_table
    kinds = ["size", "threshold", "rehash-index", "version", "required", "register", "clear-bucket",
             "swap-buckets", "duplicate", "same-value"]
    if entries:
        kinds += ["hash", "next", "key", "entry-version", "state-version", "old-version", "cycle", "move",
                  "duplicate-counted"]
    movable = [e for e in entries if m.is_rehashing and e in chain_of(table, e.hash)]
    if movable:
        kinds.append("to-rehash-table")
    kind = rng.choice(kinds)
    e = rng.choice(entries) if entries else None
    if kind == "hash":
        e.hash ^= 1 << rng.randrange(31)
    elif kind == "next":
        e.next = rng.choice(entries + [None])
    elif kind == "key":
        e.key = 1000 + rng.randrange(5)
    elif kind == "entry-version":
        e.entry_version = m.state_map_version + 1
    elif kind == "state-version":
        e.state_version = m.state_map_version + rng.randrange(1, 3)
    elif kind == "old-version":
        e.entry_version = 0  # allowed: not a violation
    elif kind == "cycle":
        last = e
        while last.next is not None:
            last = last.next
        last.next = e
    elif kind == "move":
        idx = rng.randrange(len(table))
        e.next, table[idx] = table[idx], e
    elif kind == "size":
        m.primary_table_size += rng.choice((-1, 1))
    elif kind == "threshold":
        m.threshold += 1
    elif kind == "rehash-index":
        m.rehash_index += rng.choice((-1, 1))
    elif kind == "version":
        m.state_map_version -= 1
    elif kind == "required":
        m.highest_required_snapshot_version += 1
    elif kind == "register":
        m.snapshot_versions.add(m.state_map_version + 3)
    elif kind == "clear-bucket":
        table[rng.randrange(len(table))] = None
    elif kind == "swap-buckets":
        i, j = rng.randrange(len(table)), rng.randrange(len(table))
        table[i], table[j] = table[j], table[i]
    elif kind == "duplicate":
        source = rng.choice(entries) if entries else None
        if source is not None:
            idx = rng.randrange(len(table))
            table[idx] = StateMapEntry(source.key, source.namespace, [0], source.hash, table[idx],
                                       source.entry_version, source.state_version)
    elif kind == "duplicate-counted":  # a second entry for a key, in its own bucket, sizes adjusted: I3 only
        idx = e.hash & (len(table) - 1)
        if m.is_rehashing and idx < m.rehash_index:
            table = m.incremental_rehash_table
            idx = e.hash & (len(table) - 1)
            m.incremental_rehash_table_size += 1
        else:
            m.primary_table_size += 1
        table[idx] = StateMapEntry(e.key, e.namespace, [0], e.hash, table[idx], e.entry_version, e.state_version)
    elif kind == "to-rehash-table":  # a primary entry moved ahead of the rehash index, sizes adjusted: I1 only
        e = rng.choice(movable)
        idx = e.hash & (len(table) - 1)
        if table[idx] is e:
            table[idx] = e.next
        else:
            prev = table[idx]
            while prev.next is not e:
                prev = prev.next
            prev.next = e.next
        rehash = m.incremental_rehash_table
        j = e.hash & (len(rehash) - 1)
        e.next, rehash[j] = rehash[j], e
        m.primary_table_size -= 1
        m.incremental_rehash_table_size += 1
    else:  # same-value: write a field with the value it has
        if e is not None:
            e.hash = e.hash
    return kind


@pytest.mark.parametrize("seed", range(12))
def test_tracker_agrees_with_the_full_check_on_healthy_and_corrupted_maps(seed):
    rng = random.Random(seed)
    kinds = set()
    broken = 0
    for trial in range(40):
        m = CopyOnWriteStateMap(capacity=4)
        tracker = StructureTracker()
        live = []
        for _ in range(rng.randrange(1, 120)):
            step(m, rng, live)
            versions = [s.version for s in live]
            assert [] == check_structure(m, versions) == tracker.check(m, versions)
        kinds.add(corrupt(m, rng))
        versions = [s.version for s in live]
        want = check_structure(m, versions)
        assert want == tracker.check(m, versions)
        broken += bool(want)
    assert broken >= 20
    assert len(kinds) >= 14


def test_the_tracker_mostly_works_incrementally():
    rng = random.Random(5)
    m = CopyOnWriteStateMap(capacity=4)
    tracker = StructureTracker()
    live = []
    for _ in range(3000):
        step(m, rng, live)
        assert [] == tracker.check(m, [s.version for s in live])
    assert tracker.full_checks < 300  # table growth and rehash start/end only


def test_the_tracker_re_verifies_after_forget_and_after_a_violation():
    m = CopyOnWriteStateMap(capacity=4)
    tracker = StructureTracker()
    for k in range(3):
        m.put(k, k, [k])
    assert [] == tracker.check(m)
    m.primary_table_size += 1
    assert ["I2"] == [v.code for v in tracker.check(m)]
    assert ["I2"] == [v.code for v in tracker.check(m)]  # still broken: still reported
    m.primary_table_size -= 1
    assert [] == tracker.check(m)
    checks = tracker.full_checks
    tracker.forget()
    assert [] == tracker.check(m)
    assert tracker.full_checks == checks + 1


def corrupt_snapshot(m, snapshot, rng) -> str:
    entries = list(snapshot.entry_objects())
    e = rng.choice(entries)
    kind = rng.choice(["append", "replace-equal", "replace", "next", "version", "key", "hash", "same"])
    if kind == "append":
        if isinstance(e.state, list):
            e.state.append(7)
    elif kind == "replace-equal":
        e.state = list(e.state) if isinstance(e.state, list) else e.state
    elif kind == "replace":
        e.state = [99]
    elif kind == "next":
        e.next = None if e.next is not None else rng.choice(entries)
    elif kind == "version":
        e.state_version += 1
    elif kind == "key":
        e.key = -5
    elif kind == "hash":
        e.hash += 1
    return kind


def explained(guard):
    return guard._explain()


@pytest.mark.parametrize("seed", range(8))
def test_guard_bulk_check_agrees_with_the_per_entry_check(seed):
    rng = random.Random(seed)
    caught = 0
    for trial in range(40):
        m = CopyOnWriteStateMap(capacity=4)
        guard = SnapshotGuard()
        live = []
        for _ in range(rng.randrange(5, 80)):
            taken = step(m, rng, live)
            if taken is not None:
                guard.record(taken)
            for version in set(guard.versions) - {s.version for s in live}:
                guard.forget(version)
            assert [] == guard.check() == explained(guard)
        snapshots = [s for s in live if len(s)]
        if not snapshots:
            continue
        corrupt_snapshot(m, rng.choice(snapshots), rng)
        assert explained(guard) == guard.check()
        caught += bool(guard.check())
    assert caught >= 12


def test_guard_checks_an_entry_once_however_many_snapshots_share_it():
    m = CopyOnWriteStateMap(capacity=4)
    for k in range(6):
        m.put(k, 0, [k])
    guard = SnapshotGuard()
    snapshots = [m.snapshot() for _ in range(3)]
    for s in snapshots:
        guard.record(s)
    guard.check()
    assert 6 == len(guard._bulk[0])
    m.get(0, 0).append(5)  # copy-on-write: the snapshots keep the old entry
    assert [] == guard.check()
    guard.forget(snapshots[0].version)
    snapshots[0].release()
    assert [] == guard.check()
    assert 6 == len(guard._bulk[0])
