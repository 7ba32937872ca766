"""Seeded arithmetic bugs for ``cowcheck prove``: each function is a copy of a
contracted function of ``cowcheck.reference.layout`` or ``cowcheck.reference.hashing`` with one
realistic mistake, and the very same docstring (``tests/test_prove.py``
checks that), so CrossHair must refute it. ``ORIGINAL__what`` names the
function copied and the mistake.
"""

from cowcheck.reference.hashing import (  # noqa: F401  (names the copied contracts use)
    INT_MAX,
    INT_MIN,
    MAX_PARALLELISM_UPPER_BOUND,
    murmur_hash,
)
from cowcheck.reference.layout import (  # noqa: F401
    MAXIMUM_CAPACITY,
    NEVER_GROW_THRESHOLD,
    VALID_CAPACITIES,
    _copied_buckets,
    _fills_in_order,
    _reachable_buckets,
    bucket_index,
    split_targets,
)


def uses_primary_table__strict(h: int, primary_length: int, rehash_index: int) -> bool:
    """``select_active_table``: the primary table holds buckets ``>= rehash_index``.

    pre: INT_MIN <= h <= INT_MAX
    pre: primary_length in VALID_CAPACITIES
    pre: 0 <= rehash_index < primary_length
    post: __return__ == (h % primary_length >= rehash_index)  # buckets below rehash_index have moved
    post: __return__ or rehash_index > 0  # not rehashing (index 0): everything is in the primary table
    """
    return (h & (primary_length - 1)) > rehash_index  # > for >=: bucket rehash_index has not moved yet


def snapshot_regions__upper_half_at_tail(primary_length: int, rehash_index: int, rehashing: bool):
    """Copy plan of a snapshot: ``(source, source_start, length, dest_start)`` rows.

    ``source`` is ``"primary"`` or ``"rehash"``. While rehashing, the logical
    table is ``primary[rehash_index:]``, then the two halves of the rehash
    table that hold the moved buckets. The contract: the rows fill the
    array's first ``primary_length + rehash_index`` slots in order, without
    overlap, and copy every bucket that ``uses_primary_table`` can pick
    exactly once. (The first precondition only narrows what CrossHair
    explores, to tables small enough to cover every case; the map calls this
    with every capacity.)

    pre: primary_length in (4, 8, 16)
    pre: 0 <= rehash_index < primary_length
    pre: rehashing or rehash_index == 0
    post: _fills_in_order(__return__, primary_length + rehash_index)
    post: _copied_buckets(__return__) == _reachable_buckets(primary_length, rehash_index, rehashing)
    """
    if not rehashing:
        return [("primary", 0, primary_length, 0)]
    tail = primary_length - rehash_index
    return [
        ("primary", rehash_index, tail, 0),
        ("rehash", 0, rehash_index, tail),
        ("rehash", primary_length, rehash_index, tail),  # overwrites the lower half
    ]


def snapshot_regions__upper_half_from_old_length_plus_one(primary_length: int, rehash_index: int,
                                                          rehashing: bool):
    """Copy plan of a snapshot: ``(source, source_start, length, dest_start)`` rows.

    ``source`` is ``"primary"`` or ``"rehash"``. While rehashing, the logical
    table is ``primary[rehash_index:]``, then the two halves of the rehash
    table that hold the moved buckets. The contract: the rows fill the
    array's first ``primary_length + rehash_index`` slots in order, without
    overlap, and copy every bucket that ``uses_primary_table`` can pick
    exactly once. (The first precondition only narrows what CrossHair
    explores, to tables small enough to cover every case; the map calls this
    with every capacity.)

    pre: primary_length in (4, 8, 16)
    pre: 0 <= rehash_index < primary_length
    pre: rehashing or rehash_index == 0
    post: _fills_in_order(__return__, primary_length + rehash_index)
    post: _copied_buckets(__return__) == _reachable_buckets(primary_length, rehash_index, rehashing)
    """
    if not rehashing:
        return [("primary", 0, primary_length, 0)]
    tail = primary_length - rehash_index
    return [
        ("primary", rehash_index, tail, 0),
        ("rehash", 0, rehash_index, tail),
        ("rehash", primary_length + 1, rehash_index, tail + rehash_index),  # off by one
    ]


def snapshot_array_length__table_only(primary_length: int, rehash_index: int, size: int) -> int:
    """Length of a snapshot's bucket array; the ``size`` term is FLINK-9601.

    pre: primary_length in VALID_CAPACITIES
    pre: 0 <= rehash_index < primary_length
    pre: 0 <= size <= INT_MAX
    post: __return__ >= size  # FLINK-9601: flattening every entry into the array never overflows it
    post: __return__ >= primary_length + rehash_index  # room for every bucket of the logical table
    """
    return rehash_index + primary_length  # FLINK-9601 itself


def new_bucket__old_mask(h: int, old_length: int) -> int:
    """Bucket of the doubled table that the rehash moves an entry of hash ``h`` to.

    Old bucket ``i`` splits into ``i`` and ``i + old_length``, never elsewhere,
    and the entry lands where a lookup in the doubled table looks for it.

    pre: INT_MIN <= h <= INT_MAX
    pre: old_length in VALID_CAPACITIES and old_length < MAXIMUM_CAPACITY
    post: __return__ in split_targets(bucket_index(h, old_length), old_length)
    post: __return__ == h % (2 * old_length)  # where bucket_index looks in the doubled table
    """
    return h & (old_length - 1)  # the old table's mask: the upper half never fills


def threshold_for__half(capacity: int) -> int:
    """Grow when size exceeds 3/4 of capacity; never at MAXIMUM_CAPACITY.

    pre: capacity in VALID_CAPACITIES
    post: __return__ == (NEVER_GROW_THRESHOLD if capacity == MAXIMUM_CAPACITY else capacity * 3 // 4)
    post: capacity == MAXIMUM_CAPACITY or 0 < __return__ < capacity
    """
    if capacity >= MAXIMUM_CAPACITY:
        return NEVER_GROW_THRESHOLD
    return (capacity >> 1) + (capacity >> 3)  # >> 3 for >> 2


def to_int32__drops_sign(value: int) -> int:
    """Wrap an int to Java int32 (two's complement), like a Java ``(int)`` cast.

    >>> to_int32(2**31), to_int32(-1)
    (-2147483648, -1)

    post: INT_MIN <= __return__ <= INT_MAX
    post: (__return__ - value) % 2**32 == 0  # same value modulo 2**32: only the high bits are dropped
    """
    return value & 0x7FFFFFFF  # masks the sign bit away instead of wrapping


def key_group_for_hash__upper_bound(key_hash: int, max_parallelism: int) -> int:
    """Flink ``computeKeyGroupForKeyHash``: ``murmur_hash(key_hash) % max_parallelism``.

    pre: INT_MIN <= key_hash <= INT_MAX
    pre: 0 < max_parallelism <= MAX_PARALLELISM_UPPER_BOUND
    post: 0 <= __return__ < max_parallelism
    """
    return murmur_hash(key_hash) % MAX_PARALLELISM_UPPER_BOUND  # the bound, not the job's max parallelism
