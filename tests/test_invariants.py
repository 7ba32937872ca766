import random

from cowcheck.reference import CopyOnWriteStateMap, StateMapEntry
from cowcheck.reference.invariants import INVARIANTS, SnapshotGuard, Violation, check_structure


def codes(violations) -> set:
    return {v.code for v in violations}


def collided_map():
    """capacity-4 map whose bucket 0 holds the chain 3 -> 2 -> 1 (key == namespace hashes to 0)."""
    m = CopyOnWriteStateMap(capacity=4)
    for k in (1, 2, 3):
        m.put(k, k, [k])
    return m


def rehashing_map():
    """capacity-128 map in the middle of a rehash (rehash_index > 0)."""
    m = CopyOnWriteStateMap(capacity=128)
    for k in range(98):
        m.put(k, 1000, [k])
    for _ in range(3):
        m.contains_key(-1, -1)
    assert m.is_rehashing and m.rehash_index > 0
    return m


# ------------------------------------------------------- healthy maps

def test_empty_map_is_healthy():
    assert [] == check_structure(CopyOnWriteStateMap(capacity=4))


def test_map_with_collisions_is_healthy():
    assert [] == check_structure(collided_map())


def test_rehashing_map_is_healthy():
    assert [] == check_structure(rehashing_map())


def test_map_with_live_snapshots_and_copies_is_healthy():
    m = rehashing_map()
    s1 = m.snapshot()
    m.get(5, 1000)
    s2 = m.snapshot()
    m.put(200, 1000, [200])
    m.remove(7, 1000)
    assert [] == check_structure(m, [s1.version, s2.version])


def test_map_after_many_random_operations_is_healthy():
    rng = random.Random(7)
    m = CopyOnWriteStateMap(capacity=4)
    live = []
    rehashing_steps = 0
    for _ in range(2000):
        r = rng.random()
        key, namespace = rng.randrange(60), rng.randrange(3)
        if r < 0.45:
            m.put(key, namespace, [key])
        elif r < 0.6:
            m.remove(key, namespace)
        elif r < 0.85:
            m.get(key, namespace)
        elif r < 0.93:
            live.append(m.snapshot())
        elif live:
            live.pop(rng.randrange(len(live))).release()
        rehashing_steps += m.is_rehashing
        assert [] == check_structure(m, [s.version for s in live])
    assert rehashing_steps > 0


def test_every_invariant_code_is_documented():
    assert [f"I{i}" for i in range(1, 10)] == sorted(INVARIANTS)


# ---------------------------------------------- each invariant fires

def test_entry_in_a_bucket_its_hash_does_not_select_breaks_i1():
    m = collided_map()
    m.primary_table[1], m.primary_table[0] = m.primary_table[0], None
    assert {"I1"} == codes(check_structure(m))


def test_entry_with_a_stored_hash_that_is_not_its_composite_hash_breaks_i1():
    m = collided_map()
    m.primary_table[0].hash = 4  # still bucket 0 of a 4-table, but not hash(3 ^ 3)
    assert {"I1"} == codes(check_structure(m))


def test_entry_in_the_table_select_active_table_does_not_pick_breaks_i1():
    m = rehashing_map()
    ri = m.rehash_index
    plen = len(m.primary_table)
    bucket = next(i for i in range(ri, plen) if m.primary_table[i] is not None)
    head = m.primary_table[bucket]
    m.primary_table[bucket] = head.next
    head.next = m.incremental_rehash_table[bucket]
    m.incremental_rehash_table[bucket] = head
    m.primary_table_size -= 1
    m.incremental_rehash_table_size += 1
    assert {"I1"} == codes(check_structure(m))


def test_size_that_does_not_match_reachable_entries_breaks_i2():
    m = collided_map()
    m.primary_table_size += 1
    assert {"I2"} == codes(check_structure(m))


def test_rehash_table_size_while_not_rehashing_breaks_i2():
    m = collided_map()
    m.incremental_rehash_table_size = 1
    assert "I2" in codes(check_structure(m))


def test_duplicated_key_breaks_i3():
    m = collided_map()
    head = m.primary_table[0]
    head.next = StateMapEntry(head.key, head.namespace, [0], head.hash, head.next, 0, 0)
    m.primary_table_size += 1
    assert {"I3"} == codes(check_structure(m))


def test_entry_in_a_moved_primary_bucket_while_rehashing_breaks_i4():
    m = rehashing_map()
    moved = next(head for head in m.incremental_rehash_table if head is not None)
    m.primary_table[moved.hash & (len(m.primary_table) - 1)] = StateMapEntry(-5, -5, [0], moved.hash, None, 0, 0)
    assert "I4" in codes(check_structure(m))


def test_rehash_index_out_of_range_breaks_i4():
    m = rehashing_map()
    m.rehash_index = len(m.primary_table)
    assert "I4" in codes(check_structure(m))


def test_nonzero_rehash_index_while_not_rehashing_breaks_i4():
    m = collided_map()
    m.rehash_index = 1
    assert "I4" in codes(check_structure(m))


def test_wrong_highest_required_snapshot_version_breaks_i5():
    m = collided_map()
    m.snapshot()
    m.snapshot()
    m.highest_required_snapshot_version = 1
    assert {"I5"} == codes(check_structure(m))


def test_registered_versions_that_differ_from_live_snapshots_break_i5():
    m = collided_map()
    s = m.snapshot()
    assert [] == check_structure(m, [s.version])
    assert {"I5"} == codes(check_structure(m, []))


def test_entry_version_newer_than_the_map_version_breaks_i6():
    m = collided_map()
    m.primary_table[0].entry_version = m.state_map_version + 1
    assert {"I6"} == codes(check_structure(m))


def test_state_version_newer_than_the_map_version_breaks_i6():
    m = collided_map()
    m.primary_table[0].next.state_version = m.state_map_version + 1
    assert {"I6"} == codes(check_structure(m))


def test_wrong_threshold_breaks_i7():
    m = collided_map()
    m.threshold = 4
    assert {"I7"} == codes(check_structure(m))


def test_threshold_of_the_old_capacity_while_rehashing_breaks_i7():
    m = rehashing_map()
    m.threshold = 96
    assert {"I7"} == codes(check_structure(m))


def test_violation_names_code_and_place():
    m = collided_map()
    m.primary_table_size = 9
    [violation] = check_structure(m)
    assert Violation("I2", "primary_table_size 9 != 3 reachable entries") == violation


# ------------------------------------------------------ SnapshotGuard

def guarded_snapshot(m):
    guard = SnapshotGuard()
    s = m.snapshot()
    guard.record(s)
    return guard, s


def test_guard_is_quiet_right_after_recording():
    guard, _ = guarded_snapshot(collided_map())
    assert [] == guard.check()


def test_in_place_mutation_of_a_shared_state_breaks_i8():
    m = collided_map()
    guard, _ = guarded_snapshot(m)
    m.primary_table[0].next.state.append(99)
    assert {"I8"} == codes(guard.check())


def test_rewiring_next_of_a_shared_entry_breaks_i9():
    m = collided_map()
    guard, _ = guarded_snapshot(m)
    m.primary_table[0].next = None
    assert {"I9"} == codes(guard.check())


def test_replacing_the_state_reference_of_a_shared_entry_breaks_i9():
    m = collided_map()
    guard, _ = guarded_snapshot(m)
    m.primary_table[0].state = [3]
    assert {"I9"} == codes(guard.check())


def test_forgotten_snapshot_is_no_longer_guarded():
    m = collided_map()
    guard, s = guarded_snapshot(m)
    s.release()
    guard.forget(s.version)
    m.primary_table[0].state.append(99)
    assert [] == guard.check()
    assert [] == guard.versions


def test_guard_stays_quiet_on_a_correct_map_after_many_operations():
    rng = random.Random(11)
    m = CopyOnWriteStateMap(capacity=4)
    guard = SnapshotGuard()
    live = []
    for _ in range(1500):
        r = rng.random()
        key, namespace = rng.randrange(40), rng.randrange(2)
        if r < 0.3:
            m.put(key, namespace, [key])
        elif r < 0.45:
            state = m.get(key, namespace)
            if state is not None:
                state.append(r)
        elif r < 0.55:
            m.transform(key, namespace, r, lambda old, v: (old or []) + [v])
        elif r < 0.65:
            m.remove(key, namespace)
        elif r < 0.72:
            m.put_and_get_old(key, namespace, [namespace])
        elif r < 0.8:
            m.remove_and_get_old(key, namespace)
        elif r < 0.9:
            s = m.snapshot()
            guard.record(s)
            live.append(s)
        elif live:
            s = live.pop(rng.randrange(len(live)))
            s.release()
            guard.forget(s.version)
        assert [] == guard.check()
    assert m.state_map_version > 10
