import io
from collections import Counter

import pytest

from cowcheck.reference import CopyOnWriteStateMap
from cowcheck.reference.errors import (
    ConcurrentModificationError,
    ForeignSnapshotError,
    RehashInProgressError,
    UnknownSnapshotVersionError,
)
from cowcheck.reference.hashing import composite_hash
from cowcheck.reference.serializers import IntSerializer, ListSerializer


# ------------------------------------------------------------------ helpers

def chain(head) -> list:
    out = []
    while head is not None:
        out.append(head)
        head = head.next
    return out


def same_objects(left, right) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right))


def collided_map():
    """capacity-4 map whose bucket 0 holds the chain 3 -> 2 -> 1 (key == namespace hashes to 0)."""
    m = CopyOnWriteStateMap(capacity=4)
    for k in (1, 2, 3):
        m.put(k, k, [k])
    e3, e2, e1 = chain(m.primary_table[0])
    return m, e3, e2, e1


def keys_in_bucket(bucket: int, length: int, namespace, count: int) -> list:
    """``count`` int keys that ``namespace`` sends to ``bucket`` of a table of ``length``."""
    out = []
    k = 0
    while len(out) < count:
        k += 1
        if k != namespace and composite_hash(k, namespace) & (length - 1) == bucket:
            out.append(k)
    return out


def rehash_started_map():
    """capacity-128 map holding keys 0..97 of namespace 1000: the 98th insert started a rehash."""
    m = CopyOnWriteStateMap(capacity=128)
    for k in range(98):
        m.put(k, 1000, [k])
    return m


# ----------------------------------------------------- collision scenarios

def test_chain_built_from_key_equal_namespace_is_newest_first_in_bucket_0():
    m, e3, e2, e1 = collided_map()
    assert [3, 2, 1] == [e.key for e in chain(m.primary_table[0])]
    assert [0, 0, 0] == [e.hash for e in (e3, e2, e1)]


def test_modify_head_under_snapshot_copies_head_and_shares_rest_of_chain():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.put(3, 3, [30])
    head = m.primary_table[0]
    assert head is not e3
    assert head.next is e2
    assert e3 is s.snapshot_data[0]
    assert [3] == e3.state
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)


def test_modify_middle_under_snapshot_copies_prefix_and_shares_tail():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.put(2, 2, [20])
    new3, new2, tail = chain(m.primary_table[0])
    assert new3 is not e3
    assert new2 is not e2
    assert tail is e1
    assert s.snapshot_data[0].next.next is m.primary_table[0].next.next
    assert [1, 1] == [new3.entry_version, new2.entry_version]
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)
    assert [20] == m.get(2, 2)


def test_insert_new_key_under_snapshot_goes_to_head_without_copying_existing_nodes():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.put(4, 4, [4])
    new_head, *rest = chain(m.primary_table[0])
    assert 4 == new_head.key
    assert same_objects([e3, e2, e1], rest)
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)


def test_new_head_then_modify_middle_reuses_new_head_and_copies_only_older_prefix():
    m, e3, e2, e1 = collided_map()
    m.snapshot()
    m.put(4, 4, [4])
    e4 = m.primary_table[0]
    m.put(2, 2, [20])
    after = chain(m.primary_table[0])
    assert [4, 3, 2, 1] == [e.key for e in after]
    assert after[0] is e4
    assert after[1] is not e3
    assert after[2] is not e2
    assert after[3] is e1


def test_get_of_middle_entry_under_snapshot_copies_prefix_and_state():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    original_state = e2.state
    got = m.get(2, 2)
    new3, new2, tail = chain(m.primary_table[0])
    assert new3 is not e3
    assert new2 is not e2
    assert tail is e1
    assert original_state == got
    assert got is not original_state
    assert new2.state is got
    assert e2.state is original_state
    assert m.get(2, 2) is got
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)


def test_get_of_entry_copied_before_but_with_old_state_copies_state_only():
    m, e3, e2, e1 = collided_map()
    m.snapshot()
    m.put(2, 2, [20])  # copies entries 3 and 2; entry 3 keeps its old state reference
    head = m.primary_table[0]
    assert head.state is e3.state
    got = m.get(3, 3)
    assert m.primary_table[0] is head
    assert [3] == got
    assert got is not e3.state


def test_contains_key_under_snapshot_copies_nothing():
    m, e3, e2, e1 = collided_map()
    m.snapshot()
    assert m.contains_key(1, 1)
    assert not m.contains_key(1, 2)
    assert same_objects([e3, e2, e1], chain(m.primary_table[0]))


def test_remove_head_under_snapshot_needs_no_copy():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.remove(3, 3)
    assert same_objects([e2, e1], chain(m.primary_table[0]))
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)
    assert 2 == len(m)
    assert 3 == len(s)


def test_remove_middle_under_snapshot_copies_prev_and_snapshot_still_sees_removed_entry():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.remove(2, 2)
    new3, tail = chain(m.primary_table[0])
    assert new3 is not e3
    assert tail is e1
    assert e3.next is e2
    assert same_objects([e3, e2, e1], list(s.entry_objects()))


def test_remove_tail_under_snapshot_copies_whole_prefix():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    m.remove(1, 1)
    new3, new2 = chain(m.primary_table[0])
    assert new3 is not e3
    assert new2 is not e2
    assert e2.next is e1
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)


def test_remove_with_prev_newer_than_snapshot_rewrites_prev_in_place():
    m, e3, e2, e1 = collided_map()
    m.snapshot()
    m.put(4, 4, [4])
    e4 = m.primary_table[0]
    m.remove(3, 3)
    assert same_objects([e4, e2, e1], chain(m.primary_table[0]))


def test_remove_of_absent_key_changes_nothing():
    m, e3, e2, e1 = collided_map()
    mod_count = m.mod_count
    assert m.remove_and_get_old(9, 9) is None
    assert mod_count == m.mod_count
    assert 3 == len(m)


# ------------------------------------------- identity contracts (docs/contract.md §6)

def test_copy_on_write_contracts_of_flink():
    # Port of Flink's CopyOnWriteStateMapTest.testCopyOnWriteContracts.
    m = CopyOnWriteStateMap()
    original = {k: [k] for k in (1, 2, 3, 4, 5)}
    for k in (1, 2, 4, 5):
        m.put(k, 1, original[k])
    assert m.get(1, 1) is original[1]

    s1 = m.snapshot()
    copy_state = m.get(1, 1)
    assert copy_state is not original[1]
    assert original[1] == copy_state

    m.put(3, 1, original[3])
    assert m.get(1, 1) is copy_state

    s2 = m.snapshot()
    assert m.get(1, 1) is not copy_state
    assert copy_state == m.get(1, 1)

    s2.release()
    assert m.get(3, 1) is original[3]
    assert m.get(4, 1) is not original[4]

    s1.release()
    assert m.get(5, 1) is original[5]


def test_entry_inserted_after_first_snapshot_is_copied_for_second_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    s1 = m.snapshot()
    late = [3]
    m.put(3, 1, late)
    assert m.get(3, 1) is late
    m.snapshot()
    got = m.get(3, 1)
    assert got is not late
    assert late == got
    assert not s1.released


def test_entry_inserted_after_first_snapshot_is_not_copied_once_second_is_released():
    m = CopyOnWriteStateMap(capacity=4)
    m.snapshot()
    late = [3]
    m.put(3, 1, late)
    m.snapshot().release()
    assert m.get(3, 1) is late


def test_in_place_mutation_of_value_returned_by_get_does_not_reach_snapshot():
    m, *_ = collided_map()
    s = m.snapshot()
    m.get(2, 2).append(99)
    assert [2, 99] == m.get(2, 2)
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)


# ------------------------------------------------ copy rules of docs/contract.md §4

def test_put_never_copies_the_given_state_even_under_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    m.snapshot()
    new = [2]
    m.put(1, 0, new)
    assert m.get(1, 0) is new


def test_put_and_get_old_returns_the_old_object_without_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    new = [2]
    assert m.put_and_get_old(1, 0, new) is old
    assert m.get(1, 0) is new


def test_put_and_get_old_returns_a_copy_of_old_state_under_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    s = m.snapshot()
    new = [2]
    got = m.put_and_get_old(1, 0, new)
    assert got is not old
    assert old == got
    assert m.get(1, 0) is new
    assert [(1, 0, [1])] == list(s)


def test_put_and_get_old_of_new_key_returns_none():
    m = CopyOnWriteStateMap(capacity=4)
    m.snapshot()
    assert m.put_and_get_old(1, 0, [1]) is None


def test_remove_and_get_old_returns_the_old_object_without_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    assert m.remove_and_get_old(1, 0) is old
    assert m.get(1, 0) is None


def test_remove_and_get_old_returns_a_copy_under_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    s = m.snapshot()
    got = m.remove_and_get_old(1, 0)
    assert got is not old
    assert old == got
    assert [(1, 0, [1])] == list(s)


def test_remove_and_get_old_of_state_written_after_snapshot_returns_that_object():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    m.snapshot()
    new = [2]
    m.put(1, 0, new)
    assert m.remove_and_get_old(1, 0) is new


def test_transform_hands_the_original_state_to_the_function_without_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    seen = []
    m.transform(1, 0, 5, lambda state, value: seen.append(state) or state + [value])
    assert seen[0] is old
    assert [1, 5] == m.get(1, 0)


def test_transform_hands_a_copy_to_the_function_under_snapshot():
    m = CopyOnWriteStateMap(capacity=4)
    old = [1]
    m.put(1, 0, old)
    s = m.snapshot()
    seen = []

    def append_in_place(state, value):
        seen.append(state)
        state.append(value)
        return state

    m.transform(1, 0, 5, append_in_place)
    assert seen[0] is not old
    assert [1, 5] == m.get(1, 0)
    assert [(1, 0, [1])] == list(s)


def test_transform_of_absent_key_passes_none():
    m = CopyOnWriteStateMap(capacity=4)
    m.transform(1, 0, 5, lambda state, value: [state, value])
    assert [None, 5] == m.get(1, 0)


def test_custom_state_copier_is_used_for_copy_on_write():
    calls = []

    def copier(state):
        calls.append(state)
        return list(state)

    m = CopyOnWriteStateMap(capacity=4, state_copier=copier)
    m.put(1, 0, [1])
    m.snapshot()
    m.get(1, 0)
    assert [[1]] == calls


def test_no_copying_happens_after_all_snapshots_are_released():
    m, e3, e2, e1 = collided_map()
    s1 = m.snapshot()
    s2 = m.snapshot()
    s1.release()
    s2.release()
    state2 = e2.state
    assert m.get(2, 2) is state2
    m.put(1, 1, [10])
    m.remove(2, 2)
    assert same_objects([e3, e1], chain(m.primary_table[0]))
    assert 0 == m.highest_required_snapshot_version


# ------------------------------------------------------------- versions

def test_snapshot_versions_are_numbered_1_2_3_and_never_repeat():
    m = CopyOnWriteStateMap(capacity=4)
    s1, s2, s3 = m.snapshot(), m.snapshot(), m.snapshot()
    assert [1, 2, 3] == [s1.version, s2.version, s3.version]
    for s in (s1, s2, s3):
        s.release()
    assert 4 == m.snapshot().version


def test_entries_carry_the_map_version_at_creation():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    m.snapshot()
    m.put(2, 0, [2])
    versions = {e.key: (e.entry_version, e.state_version) for e in m.entries()}
    assert {1: (0, 0), 2: (1, 1)} == versions


def test_releasing_the_newest_snapshot_keeps_copy_on_write_for_older_one():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    s1 = m.snapshot()
    s2 = m.snapshot()
    s2.release()
    assert 1 == m.highest_required_snapshot_version
    m.get(1, 0).append(2)
    assert [(1, 0, [1])] == list(s1)


def test_release_twice_is_a_no_op():
    m = CopyOnWriteStateMap(capacity=4)
    s1 = m.snapshot()
    s2 = m.snapshot()
    s2.release()
    s2.release()
    assert s2.released
    assert {1} == m.snapshot_versions
    assert 1 == m.highest_required_snapshot_version
    s1.release()
    assert 0 == m.highest_required_snapshot_version


def test_release_of_unknown_version_raises():
    m = CopyOnWriteStateMap(capacity=4)
    m.snapshot()
    with pytest.raises(UnknownSnapshotVersionError) as info:
        m.release_snapshot_version(7)
    assert "Attempt to release unknown snapshot version" in str(info.value)
    assert 7 == info.value.version
    assert [1] == info.value.live_versions


def test_release_of_a_version_already_released_through_the_map_raises():
    m = CopyOnWriteStateMap(capacity=4)
    s = m.snapshot()
    m.release_snapshot_version(s.version)
    with pytest.raises(UnknownSnapshotVersionError):
        m.release_snapshot_version(s.version)


def test_releasing_a_snapshot_through_another_map_raises():
    m = CopyOnWriteStateMap(capacity=4)
    other = CopyOnWriteStateMap(capacity=4)
    other.snapshot()
    s = m.snapshot()
    with pytest.raises(ForeignSnapshotError):
        other.release_snapshot(s)
    assert {1} == other.snapshot_versions
    assert {1} == m.snapshot_versions


# -------------------------------------------------------------- capacity

@pytest.mark.parametrize("capacity", [0, 1, 2, 3, 6, 100, -4, 2**31, 4.0])
def test_capacity_that_is_not_a_power_of_two_of_at_least_4_is_rejected(capacity):
    with pytest.raises(ValueError):
        CopyOnWriteStateMap(capacity=capacity)


@pytest.mark.parametrize("capacity", [4, 128])
def test_power_of_two_capacity_is_accepted(capacity):
    m = CopyOnWriteStateMap(capacity=capacity)
    assert capacity == len(m.primary_table)
    assert (capacity >> 1) + (capacity >> 2) == m.threshold


def test_default_capacity_is_128():
    assert 128 == len(CopyOnWriteStateMap().primary_table)


def test_not_rehashing_shows_the_length_2_empty_sentinel():
    m = CopyOnWriteStateMap(capacity=4)
    assert not m.is_rehashing
    assert 2 == len(m.incremental_rehash_table)


def test_null_key_or_namespace_is_rejected():
    m = CopyOnWriteStateMap(capacity=4)
    with pytest.raises(TypeError):
        m.put(None, 0, [1])
    with pytest.raises(TypeError):
        m.get(1, None)


# ---------------------------------------------------------------- rehash

def test_rehash_starts_on_98th_distinct_insert_at_capacity_128():
    m = CopyOnWriteStateMap(capacity=128)
    for k in range(97):
        m.put(k, 1000, [k])
    assert not m.is_rehashing
    m.put(97, 1000, [97])
    assert m.is_rehashing
    assert 256 == len(m.incremental_rehash_table)
    assert 0 == m.rehash_index


def test_entry_that_triggers_the_rehash_goes_into_the_old_primary_table():
    m = rehash_started_map()
    bucket = m.primary_table[composite_hash(97, 1000) & 127]
    assert 97 in [e.key for e in chain(bucket)]
    assert (98, 0) == (m.primary_table_size, m.incremental_rehash_table_size)
    assert [None] * 256 == m.incremental_rehash_table


def test_threshold_follows_the_new_capacity_while_rehashing():
    m = rehash_started_map()
    assert 192 == m.threshold


def test_reads_advance_the_rehash_until_it_finishes_with_table_length_256():
    m = rehash_started_map()
    indexes = [m.rehash_index]
    while m.is_rehashing:
        m.contains_key(-1, -1)
        indexes.append(m.rehash_index)
        assert len(indexes) <= 128 // 4 + 1
    assert 256 == len(m.primary_table)
    assert 0 == m.rehash_index
    assert 98 == len(m) == m.primary_table_size
    # Every read before the swap moved at least one bucket.
    assert indexes[:-1] == sorted(set(indexes[:-1]))
    assert sorted((k, 1000, [k]) for k in range(98)) == sorted(m)


@pytest.mark.parametrize(
    "operation",
    [
        lambda m: m.get(5, 1000),
        lambda m: m.contains_key(5, 1000),
        lambda m: m.put(5, 1000, [5]),
        lambda m: m.put_and_get_old(5, 1000, [5]),
        lambda m: m.remove(5, 1000),
        lambda m: m.remove_and_get_old(5, 1000),
        lambda m: m.transform(5, 1000, 1, lambda s, v: s),
        lambda m: m.get(-1, -1),
    ],
)
def test_every_keyed_operation_advances_the_rehash(operation):
    m = rehash_started_map()
    operation(m)
    assert m.rehash_index > 0


def test_size_iteration_keys_and_snapshots_do_not_advance_the_rehash():
    m = rehash_started_map()
    m.contains_key(-1, -1)
    index = m.rehash_index
    len(m)
    list(m)
    list(m.keys(1000))
    m.size_of_namespace(1000)
    s = m.snapshot()
    list(s)
    s.release()
    assert m.is_rehashing
    assert index == m.rehash_index


def test_double_capacity_while_rehashing_raises():
    m = rehash_started_map()
    with pytest.raises(RehashInProgressError) as info:
        m._double_capacity()
    assert "There is already a rehash in progress." == str(info.value)


def test_rehash_splits_old_bucket_i_into_buckets_i_and_i_plus_old_length():
    m = rehash_started_map()
    old_buckets = {e.key: i for i, head in enumerate(m.primary_table) for e in chain(head)}
    while m.is_rehashing:
        m.contains_key(-1, -1)
    new_buckets = {e.key: i for i, head in enumerate(m.primary_table) for e in chain(head)}
    assert {} == {k: b for k, b in new_buckets.items() if b not in (old_buckets[k], old_buckets[k] + 128)}


def test_rehash_step_under_snapshot_moves_copies_and_leaves_snapshot_entries_untouched():
    m = rehash_started_map()
    s = m.snapshot()
    before = list(s.entry_objects())
    m.contains_key(-1, -1)
    moved = [e for head in m.incremental_rehash_table for e in chain(head)]
    assert [] != moved
    assert [] == [e for e in moved if any(e is old for old in before)]
    assert {1} == {e.entry_version for e in moved}
    assert same_objects(before, list(s.entry_objects()))
    assert sorted((k, 1000, [k]) for k in range(98)) == sorted(s)


def test_rehash_finishing_under_snapshot_keeps_snapshot_content():
    m = rehash_started_map()
    s = m.snapshot()
    while m.is_rehashing:
        m.get(-1, -1)
    m.get(0, 1000).append(-1)
    assert sorted((k, 1000, [k]) for k in range(98)) == sorted(s)
    assert [0, -1] == m.get(0, 1000)


# --------------------------------------------------- snapshot array layout

def test_snapshot_array_while_rehashing_holds_the_three_regions_in_order():
    m = rehash_started_map()
    for _ in range(3):
        m.contains_key(-1, -1)
    ri, primary, rehash = m.rehash_index, m.primary_table, m.incremental_rehash_table
    plen = len(primary)
    s = m.snapshot()
    data = s.snapshot_data
    tail = plen - ri
    assert 0 < ri < plen
    assert max(ri + plen, len(m)) == len(data)
    assert same_objects(primary[ri:], data[:tail])
    assert same_objects(rehash[0:ri], data[tail:tail + ri])
    assert same_objects(rehash[plen:plen + ri], data[tail + ri:tail + 2 * ri])
    assert all(any(region) for region in (primary[ri:], rehash[0:ri], rehash[plen:plen + ri]))


def test_snapshot_while_rehashing_contains_every_entry_exactly_once():
    m = rehash_started_map()
    for _ in range(5):
        m.contains_key(-1, -1)
    s = m.snapshot()
    assert len(m) == len(s)
    assert Counter({(k, 1000): 1 for k in range(98)}) == Counter((k, n) for k, n, _ in s)


def test_snapshot_array_is_sized_by_entry_count_when_it_exceeds_the_table_span():
    # FLINK-9601: with rehash_index + len(primary) < size the array must still fit every chain.
    m = CopyOnWriteStateMap(capacity=4)
    for k in (1, 2, 3, 4):
        m.put(k, k, [k])
    trigger, late = keys_in_bucket(1, 4, 0, 1)[0], keys_in_bucket(2, 4, 0, 1)[0]
    m.put(trigger, 0, [trigger])
    assert m.is_rehashing
    m.put(late, 0, [late])
    assert (1, 6) == (m.rehash_index, len(m))
    s = m.snapshot()
    assert 6 == len(s.snapshot_data)
    assert 6 == len(s)
    assert Counter({(k, k): 1 for k in (1, 2, 3, 4)} | {(trigger, 0): 1, (late, 0): 1}) == Counter(
        (k, n) for k, n, _ in s
    )


def test_snapshot_array_without_rehash_is_a_shallow_copy_of_primary():
    m, e3, e2, e1 = collided_map()
    s = m.snapshot()
    assert same_objects(m.primary_table, s.snapshot_data)
    assert s.snapshot_data is not m.primary_table


# --------------------------------------------------------- live iteration

def small_map(n=6):
    m = CopyOnWriteStateMap(capacity=128)
    for k in range(n):
        m.put(k, 0, [k])
    return m


def test_live_iteration_yields_every_entry_as_key_namespace_state():
    m = small_map()
    assert sorted((k, 0, [k]) for k in range(6)) == sorted(m)


def test_live_iteration_fails_fast_after_put_of_new_key():
    m = small_map()
    it = iter(m)
    next(it)
    m.put(100, 0, [100])
    with pytest.raises(ConcurrentModificationError):
        next(it)


def test_live_iteration_fails_fast_after_remove():
    m = small_map()
    it = iter(m)
    next(it)
    m.remove(5, 0)
    with pytest.raises(ConcurrentModificationError):
        next(it)


def test_concurrent_modification_error_is_a_runtime_error():
    assert issubclass(ConcurrentModificationError, RuntimeError)


def test_live_iteration_continues_after_value_update_when_not_rehashing():
    m = small_map()
    it = iter(m)
    first = next(it)
    m.put(first[0], 0, ["updated"])
    m.put(5, 0, ["updated"])
    rest = list(it)
    assert 6 == len(rest) + 1
    assert {k for k in range(6)} == {first[0]} | {k for k, _, _ in rest}


def test_live_iteration_continues_after_copy_on_write_under_snapshot():
    m = small_map()
    m.snapshot()
    it = iter(m)
    next(it)
    for k in range(6):
        m.get(k, 0)
    assert 5 == len(list(it))


def test_structural_change_after_last_element_raises_nothing():
    m = small_map()
    it = iter(m)
    seen = [next(it) for _ in range(6)]
    m.put(100, 0, [100])
    m.remove(0, 0)
    assert [] == list(it)
    assert 6 == len(seen)


def test_keys_returns_an_iterator_over_keys_of_that_namespace():
    m = small_map()
    m.put(1, 7, [1])
    m.put(9, 7, [9])
    keys = m.keys(7)
    assert iter(keys) is keys
    assert [1, 9] == sorted(keys)
    assert [] == list(m.keys(8))


def test_size_of_namespace_counts_entries_of_that_namespace():
    m = small_map()
    m.put(1, 7, [1])
    m.put(9, 7, [9])
    assert (6, 2, 0) == (m.size_of_namespace(0), m.size_of_namespace(7), m.size_of_namespace(8))


def test_entries_yields_the_live_entry_objects():
    m, e3, e2, e1 = collided_map()
    assert same_objects([e3, e2, e1], list(m.entries()))


# ------------------------------------------------------ incremental visitor

def visit_all(visitor) -> list:
    seen = []
    while visitor.has_next():
        seen.extend(visitor.next_entries())
    return seen


@pytest.mark.parametrize("max_records", [1, 2, 1000])
def test_incremental_visitor_covers_every_entry_exactly_once(max_records):
    m = CopyOnWriteStateMap(capacity=64)
    for k in range(40):
        m.put(k, k % 3, [k])
    seen = visit_all(m.incremental_visitor(max_records))
    assert Counter({(k, k % 3): 1 for k in range(40)}) == Counter((k, n) for k, n, _ in seen)


def test_incremental_visitor_covers_every_entry_once_while_rehashing():
    m = rehash_started_map()
    for _ in range(4):
        m.contains_key(-1, -1)
    assert m.is_rehashing
    seen = visit_all(m.incremental_visitor(3))
    assert Counter({(k, 1000): 1 for k in range(98)}) == Counter((k, n) for k, n, _ in seen)


def test_incremental_visitor_returns_a_whole_chain_per_call():
    m, *_ = collided_map()
    visitor = m.incremental_visitor(10)
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == visitor.next_entries()


def test_incremental_visitor_on_empty_map_has_nothing():
    m = CopyOnWriteStateMap(capacity=4)
    visitor = m.incremental_visitor(4)
    assert not visitor.has_next()
    assert [] == visitor.next_entries()


def test_incremental_visitor_remove_and_update_go_through_the_map():
    m = CopyOnWriteStateMap(capacity=64)
    for k in range(20):
        m.put(k, 0, [k])
    visitor = m.incremental_visitor(5)
    while visitor.has_next():
        for entry in visitor.next_entries():
            if entry[0] % 2:
                visitor.update(entry, [entry[0], "kept"])
            else:
                visitor.remove(entry)
    assert sorted((k, 0, [k, "kept"]) for k in range(1, 20, 2)) == sorted(m)


# ------------------------------------------------------- snapshot iteration

def test_snapshot_length_is_the_entry_count_at_snapshot_time():
    m, *_ = collided_map()
    s = m.snapshot()
    m.put(4, 4, [4])
    m.remove(1, 1)
    assert 3 == len(s)
    assert 3 == len(s.iterate())


def test_snapshot_iteration_without_transformer_walks_chains_in_array_order():
    m, *_ = collided_map()
    s = m.snapshot()
    view = s.iterate()
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(view)


def test_snapshot_iteration_with_transformer_drops_none_and_replaces_changed_states():
    m = CopyOnWriteStateMap(capacity=4)
    kept = [1]
    m.put(1, 0, kept)
    m.put(2, 0, [1, 2])
    m.put(3, 0, [3])
    s = m.snapshot()

    def ttl(state):
        if len(state) % 2 == 0:
            return None
        return state if state[0] == 1 else state + ["renewed"]

    view = s.iterate(ttl)
    items = list(view)
    s.release()
    assert 2 == len(view)
    assert [(1, 0, [1]), (3, 0, [3, "renewed"])] == sorted(items)
    assert [s_ for k, _, s_ in items if k == 1][0] is kept


def test_snapshot_transformer_does_not_change_the_live_map():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1, 2])
    m.put(2, 0, [3])
    s = m.snapshot()
    list(s.iterate(lambda state: None))
    s.release()
    assert [(1, 0, [1, 2]), (2, 0, [3])] == sorted(m)


def test_snapshot_release_flag_and_is_owner():
    m = CopyOnWriteStateMap(capacity=4)
    s = m.snapshot()
    assert not s.released
    assert s.is_owner(m)
    assert not s.is_owner(CopyOnWriteStateMap(capacity=4))
    s.release()
    assert s.released


# ------------------------------------------------------------ write_state

def test_write_state_of_one_entry_is_count_namespace_key_state_big_endian():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(7, 3, [1, 2])
    s = m.snapshot()
    out = io.BytesIO()
    s.write_state(out, IntSerializer(), IntSerializer(), ListSerializer(IntSerializer()))
    expected = (
        "00000001"  # entry count
        "00000003"  # namespace
        "00000007"  # key
        "00000002" "00000001" "00000002"  # list: size, elements
    )
    assert expected == out.getvalue().hex()


def test_write_state_entries_read_back_in_snapshot_order():
    m = CopyOnWriteStateMap(capacity=8)
    for k in range(5):
        m.put(k, -k, list(range(k)))
    s = m.snapshot()
    m.put(9, 9, [9])
    out = io.BytesIO()
    int_ser, list_ser = IntSerializer(), ListSerializer(IntSerializer())
    s.write_state(out, int_ser, int_ser, list_ser)
    inp = io.BytesIO(out.getvalue())
    count = int_ser.deserialize(inp)
    read = []
    for _ in range(count):
        namespace = int_ser.deserialize(inp)
        key = int_ser.deserialize(inp)
        read.append((key, namespace, list_ser.deserialize(inp)))
    assert list(s) == read
    assert b"" == inp.read()


def test_write_state_with_transformer_writes_the_filtered_count():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    m.put(2, 0, [1, 2])
    s = m.snapshot()
    out = io.BytesIO()
    s.write_state(out, IntSerializer(), IntSerializer(), ListSerializer(IntSerializer()),
                  transformer=lambda state: None if len(state) == 2 else state)
    s.release()
    assert "00000001" "00000000" "00000001" "00000001" "00000001" == out.getvalue().hex()


def test_write_state_of_a_none_state_is_an_error():
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, None)
    s = m.snapshot()
    with pytest.raises(ValueError):
        s.write_state(io.BytesIO(), IntSerializer(), IntSerializer(), ListSerializer(IntSerializer()))
