"""CopyOnWriteStateTable: key-group routing, errors, snapshots written and released per key group."""

import copy
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from cowcheck.map.machine import MachineConfig, make_map_machine
from cowcheck.reference import CopyOnWriteStateTable
from cowcheck.reference.errors import ConcurrentModificationError, IllegalStateError, KeyGroupOutOfRangeError
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import IntSerializer, ListSerializer
from cowcheck.reference.state_table import KeyGroupRange, key_group_range_for_operator

INTS = IntSerializer()
LISTS = ListSerializer(IntSerializer())


def full_table(max_parallelism=8, capacity=4):
    return CopyOnWriteStateTable(KeyGroupRange(0, max_parallelism - 1), max_parallelism, capacity=capacity)


def keys_in_group(group, max_parallelism=8, count=3):
    return [k for k in range(10_000) if key_group(k, max_parallelism) == group][:count]


# ------------------------------------------------------------ routing


def test_entries_go_to_the_map_of_their_flink_key_group():
    table = CopyOnWriteStateTable(KeyGroupRange(0, 127), 128, capacity=4)
    for key, group in [(0, 94), (1, 86), (42, 29), ("abc", 115)]:  # docs/contract.md §2 vectors
        table.put(key, 0, [key])
        assert table.key_group_of(key) == group
        assert list(table.map_for_key_group(group)) == [(key, 0, [key])]


def test_a_key_outside_the_range_is_an_error_naming_key_group_and_range():
    table = CopyOnWriteStateTable(KeyGroupRange(0, 9), 128)
    with pytest.raises(KeyGroupOutOfRangeError) as caught:
        table.put(0, 0, [1])  # key 0 is in key group 94
    err = caught.value
    assert (err.key, err.key_group, err.key_group_range, err.max_parallelism) == (0, 94, KeyGroupRange(0, 9), 128)
    assert "key 0" in str(err) and "[0, 9]" in str(err)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("op", ["get", "contains_key", "remove", "remove_and_get_old"])
def test_reads_and_removes_of_an_out_of_range_key_are_errors_too(op):
    with pytest.raises(KeyGroupOutOfRangeError):
        getattr(CopyOnWriteStateTable(KeyGroupRange(0, 9), 128), op)(0, 0)


@pytest.mark.parametrize("key, namespace", [(None, 0), (1, None)])
def test_none_key_or_namespace_is_a_type_error(key, namespace):
    with pytest.raises(TypeError):
        full_table().put(key, namespace, [1])


def test_map_for_key_group_outside_the_range_is_an_error():
    with pytest.raises(KeyGroupOutOfRangeError) as caught:
        CopyOnWriteStateTable(KeyGroupRange(2, 3), 8).map_for_key_group(5)
    assert caught.value.key is None and caught.value.key_group == 5


@pytest.mark.parametrize("kwargs", [
    dict(key_group_range=KeyGroupRange(0, 8), max_parallelism=8),   # past max_parallelism
    dict(key_group_range=KeyGroupRange.EMPTY, max_parallelism=8),   # empty
    dict(max_parallelism=0),
    dict(max_parallelism=(1 << 15) + 1),
])
def test_bad_ranges_and_max_parallelism_are_rejected(kwargs):
    with pytest.raises(ValueError):
        CopyOnWriteStateTable(**kwargs)


# ------------------------------------------------------------ whole-table API


def test_size_sums_the_maps_and_iteration_goes_in_key_group_order():
    table = full_table()
    for k in range(40):
        table.put(k, k % 2, [k])
    assert len(table) == 40 == sum(len(m) for m in table.maps)
    groups = [key_group(k, 8) for k, _, _ in table]
    assert groups == sorted(groups)
    assert sorted(table) == sorted((k, k % 2, [k]) for k in range(40))


def test_keys_and_size_of_namespace_span_all_key_groups():
    table = full_table()
    for k in range(20):
        table.put(k, k % 3, [k])
    assert sorted(table.keys(1)) == [k for k in range(20) if k % 3 == 1]
    assert table.size_of_namespace(1) == 7


def test_keyed_operations_delegate_to_the_map_with_its_semantics():
    table = full_table()
    assert table.put_and_get_old(5, 0, [1]) is None
    assert table.put_and_get_old(5, 0, [2]) == [1]
    table.transform(5, 0, 3, lambda old, v: old + [v])
    assert table.get(5, 0) == [2, 3] and table.contains_key(5, 0)
    assert table.remove_and_get_old(5, 0) == [2, 3]
    assert not table.contains_key(5, 0) and table.is_empty()


def test_live_iteration_is_fail_fast_within_the_key_group_being_iterated():
    table = full_table()
    a, b = keys_in_group(3, count=2)
    table.put(a, 0, [1])
    table.put(b, 0, [2])
    it = iter(table)
    next(it)
    table.put(keys_in_group(3, count=3)[2], 0, [3])  # structural change in the same key group
    with pytest.raises(ConcurrentModificationError):
        list(it)


def test_live_iteration_sees_a_structural_change_in_a_key_group_not_reached_yet():
    table = full_table()
    table.put(keys_in_group(1)[0], 0, [1])
    later = keys_in_group(6, count=2)
    table.put(later[0], 0, [2])
    it = iter(table)
    next(it)
    table.put(later[1], 0, [3])
    with pytest.raises(ConcurrentModificationError):
        list(it)


def test_iterating_an_empty_table_stays_empty_after_inserts():
    table = full_table()
    it = iter(table)
    table.put(1, 0, [1])
    assert list(it) == []


# ------------------------------------------------------------ snapshots


def test_snapshot_takes_every_map_at_once_with_one_version():
    table = full_table()
    for k in range(30):
        table.put(k, 0, [k])
    first, second = table.snapshot(), table.snapshot()
    assert {s.version for s in first.map_snapshots} == {1} and second.version == 2
    assert len(first) == 30 and sorted(first) == sorted(table)


def test_snapshot_keeps_the_old_state_while_the_table_moves_on():
    table = full_table()
    table.put(1, 0, [1])
    snap = table.snapshot()
    table.get(1, 0).append(2)
    table.remove(1, 0)
    assert list(snap) == [(1, 0, [1])]


def test_writing_a_key_group_writes_its_map_snapshot_and_releases_only_that_group():
    table = full_table()
    for k in range(30):
        table.put(k, 0, [k])
    snap = table.snapshot()
    expected = io.BytesIO()
    snap.map_snapshot(3).write_state(expected, INTS, INTS, LISTS)
    out = io.BytesIO()
    snap.write_key_group(out, 3, INTS, INTS, LISTS)
    assert out.getvalue() == expected.getvalue()
    assert table.map_for_key_group(3).snapshot_versions == set()
    assert all(table.map_for_key_group(g).snapshot_versions == {1} for g in range(8) if g != 3)
    assert snap.unreleased_key_groups() == [0, 1, 2, 4, 5, 6, 7]


def test_a_written_key_group_cannot_be_written_again():
    snap = full_table().snapshot()
    snap.write_key_group(io.BytesIO(), 0, INTS, INTS, LISTS)
    with pytest.raises(IllegalStateError):
        snap.write_key_group(io.BytesIO(), 0, INTS, INTS, LISTS)


def test_copy_on_write_stops_in_a_key_group_once_it_is_written():
    table = full_table()
    written, pending = keys_in_group(2, count=1)[0], keys_in_group(5, count=1)[0]
    table.put(written, 0, [1])
    table.put(pending, 0, [1])
    snap = table.snapshot()
    snap.write_key_group(io.BytesIO(), 2, INTS, INTS, LISTS)
    first, again = table.get(written, 0), table.get(written, 0)
    assert first is again  # own object: no copy once group 2 is released
    copied = table.get(pending, 0)
    assert copied == [1] and list(snap.map_snapshot(5))[0][2] is not copied  # group 5 still protected


def test_table_snapshot_release_frees_every_unwritten_group_and_is_idempotent():
    # FLINK-13469: a write that stops half way must not leave copy-on-write on.
    table = full_table()
    table.put(1, 0, [1])
    snap = table.snapshot()
    snap.write_key_group(io.BytesIO(), 0, INTS, INTS, LISTS)
    snap.release()
    snap.release()
    assert snap.released and all(m.snapshot_versions == set() for m in table.maps)
    assert table.get(1, 0) is table.get(1, 0)


def test_transformed_iteration_of_a_table_snapshot_filters_every_group():
    table = full_table()
    for k in range(10):
        table.put(k, 0, [k] * (k % 2 + 1))
    view = table.snapshot().iterate(lambda s: None if len(s) == 2 else s)
    assert len(view) == 5 and sorted(k for k, _, _ in view) == [0, 2, 4, 6, 8]


# ------------------------------------------------------------ key-group ranges


def test_key_group_range_basics():
    r = KeyGroupRange(3, 6)
    assert (len(r), list(r), 3 in r, 7 in r) == (4, [3, 4, 5, 6], True, False)
    assert r.intersection(KeyGroupRange(5, 9)) == KeyGroupRange(5, 6)
    assert r.intersection(KeyGroupRange(8, 9)) == KeyGroupRange.EMPTY
    assert (str(r), str(KeyGroupRange.EMPTY), len(KeyGroupRange.EMPTY)) == ("[3, 6]", "[]", 0)
    with pytest.raises(ValueError):
        KeyGroupRange(-1, 3)
    with pytest.raises(ValueError):
        KeyGroupRange(5, 3)


@given(st.integers(1, 300).flatmap(lambda mp: st.tuples(st.just(mp), st.integers(1, mp))))
def test_operator_ranges_partition_all_key_groups_in_order(mp_and_parallelism):
    max_parallelism, parallelism = mp_and_parallelism
    ranges = [key_group_range_for_operator(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert [g for r in ranges for g in r] == list(range(max_parallelism))
    assert all(not r.is_empty() for r in ranges)


# ------------------------------------------------------------ driven like a map


def test_a_single_key_group_table_passes_the_black_box_map_machine():
    # One group: the table is then exactly a map. With several groups live
    # iteration is fail-fast per group only (as Flink's StateTable.iterator()),
    # which the map machine's strict "each entry once or an error" would flag.
    def one_group_table(capacity, state_copier):
        return CopyOnWriteStateTable(KeyGroupRange(0, 0), 1, capacity=capacity, state_copier=state_copier)

    machine = make_map_machine(one_group_table, MachineConfig(white_box=False))
    run_state_machine_as_test(machine, settings=settings(settings.get_profile("ci"), max_examples=40))


def test_state_copier_is_used_for_copy_on_write():
    copies = []

    def copier(state):
        copies.append(state)
        return copy.deepcopy(state)

    table = CopyOnWriteStateTable(KeyGroupRange(0, 7), 8, capacity=4, state_copier=copier)
    table.put(1, 0, [1])
    table.snapshot()
    table.get(1, 0)
    assert copies == [[1]]
