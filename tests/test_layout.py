import pytest

from cowcheck.reference.layout import (
    MAXIMUM_CAPACITY,
    NEVER_GROW_THRESHOLD,
    bucket_index,
    is_valid_capacity,
    snapshot_array_length,
    snapshot_regions,
    split_targets,
    threshold_for,
    uses_primary_table,
)


@pytest.mark.parametrize("capacity", [4, 8, 128, 2**20, MAXIMUM_CAPACITY])
def test_powers_of_two_from_4_to_maximum_capacity_are_valid(capacity):
    assert is_valid_capacity(capacity)


@pytest.mark.parametrize("capacity", [0, 2, 3, 6, 100, -4, 2 * MAXIMUM_CAPACITY, 2**31, 4.0, "4", None])
def test_other_capacities_are_invalid(capacity):
    assert not is_valid_capacity(capacity)


@pytest.mark.parametrize("capacity, expected", [(4, 3), (8, 6), (128, 96), (256, 192), (2**29, 3 * 2**27)])
def test_threshold_is_three_quarters_of_capacity(capacity, expected):
    assert expected == threshold_for(capacity)


def test_threshold_at_maximum_capacity_means_never_grow():
    assert NEVER_GROW_THRESHOLD == threshold_for(MAXIMUM_CAPACITY)
    assert 2**31 - 1 - 8 == NEVER_GROW_THRESHOLD


def test_bucket_index_masks_the_hash_including_negative_hashes():
    assert (0, 3, 127, 3) == (bucket_index(0, 4), bucket_index(-1, 4), bucket_index(-1, 128), bucket_index(-2047822809, 4))


def test_primary_table_holds_buckets_at_or_after_rehash_index():
    assert uses_primary_table(5, 8, 5)
    assert not uses_primary_table(4, 8, 5)
    assert uses_primary_table(4, 8, 0)


def test_old_bucket_splits_into_same_index_and_index_plus_old_length():
    assert (3, 131) == split_targets(3, 128)


def test_snapshot_array_length_takes_the_larger_of_table_span_and_size():
    assert 133 == snapshot_array_length(128, 5, 100)
    assert 6 == snapshot_array_length(4, 1, 6)


def test_snapshot_regions_without_rehash_copy_the_whole_primary():
    assert [("primary", 0, 128, 0)] == snapshot_regions(128, 0, False)


def test_snapshot_regions_while_rehashing_are_primary_tail_then_two_halves_of_rehash_table():
    expected = [("primary", 5, 123, 0), ("rehash", 0, 5, 123), ("rehash", 128, 5, 128)]
    assert expected == snapshot_regions(128, 5, True)
