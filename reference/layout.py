"""Index arithmetic of the map, kept pure so it can be checked on its own.

Tables are lists whose length is a power of two; a hash picks bucket
``h & (length - 1)``. While a rehash runs, buckets ``< rehash_index`` of the
primary table have moved to the table twice its size.

Each function states its contract in PEP 316 docstring lines (``pre:`` what
callers guarantee, ``post:`` what the function promises; ``__return__`` is
the result). ``cowcheck prove`` hands them to CrossHair, which searches for
inputs meeting every ``pre`` and breaking a ``post``. Hashes are int32, as in
Java, and table lengths range over ``VALID_CAPACITIES``, so CrossHair can
try every capacity; one precondition (``snapshot_regions``) bounds the table
further only so that CrossHair covers every case (the arithmetic is the same
at every power of two). The map
inlines ``bucket_index`` and ``uses_primary_table`` on its hot paths;
``tests/test_contracts.py`` checks that every entry sits where these say.

>>> bucket_index(-1, 8), uses_primary_table(5, 8, 5), new_bucket(13, 8)
(7, True, 13)
"""

from __future__ import annotations

from cowcheck.reference.hashing import INT_MAX, INT_MIN  # noqa: F401  (the contracts' pre: lines use them)

__all__ = [
    "MINIMUM_CAPACITY",
    "DEFAULT_CAPACITY",
    "MAXIMUM_CAPACITY",
    "MIN_TRANSFERRED_PER_INCREMENTAL_REHASH",
    "NEVER_GROW_THRESHOLD",
    "VALID_CAPACITIES",
    "is_valid_capacity",
    "bucket_index",
    "uses_primary_table",
    "threshold_for",
    "doubled_capacity",
    "split_targets",
    "new_bucket",
    "snapshot_array_length",
    "snapshot_regions",
]

MINIMUM_CAPACITY = 4
DEFAULT_CAPACITY = 128
MAXIMUM_CAPACITY = 1 << 30
MIN_TRANSFERRED_PER_INCREMENTAL_REHASH = 4
# Flink: Integer.MAX_VALUE - 8 (MAX_ARRAY_SIZE) once the table cannot grow.
NEVER_GROW_THRESHOLD = (1 << 31) - 1 - 8
# Every table length the map may use: 4, 8, ..., MAXIMUM_CAPACITY.
VALID_CAPACITIES = tuple(1 << k for k in range(2, 31))


def is_valid_capacity(capacity: int) -> bool:
    """A power of two between MINIMUM_CAPACITY and MAXIMUM_CAPACITY.

    post: __return__ == (isinstance(capacity, int) and capacity in VALID_CAPACITIES)
    """
    return (
        isinstance(capacity, int)
        and MINIMUM_CAPACITY <= capacity <= MAXIMUM_CAPACITY
        and capacity & (capacity - 1) == 0
    )


def bucket_index(h: int, length: int) -> int:
    """Bucket of hash ``h`` in a table of ``length`` (a power of two).

    pre: INT_MIN <= h <= INT_MAX
    pre: length in VALID_CAPACITIES
    post: 0 <= __return__ < length
    post: __return__ == h % length  # the mask is the (non-negative) remainder
    """
    return h & (length - 1)


def uses_primary_table(h: int, primary_length: int, rehash_index: int) -> bool:
    """``select_active_table``: the primary table holds buckets ``>= rehash_index``.

    pre: INT_MIN <= h <= INT_MAX
    pre: primary_length in VALID_CAPACITIES
    pre: 0 <= rehash_index < primary_length
    post: __return__ == (h % primary_length >= rehash_index)  # buckets below rehash_index have moved
    post: __return__ or rehash_index > 0  # not rehashing (index 0): everything is in the primary table
    """
    return (h & (primary_length - 1)) >= rehash_index


def threshold_for(capacity: int) -> int:
    """Grow when size exceeds 3/4 of capacity; never at MAXIMUM_CAPACITY.

    pre: capacity in VALID_CAPACITIES
    post: __return__ == (NEVER_GROW_THRESHOLD if capacity == MAXIMUM_CAPACITY else capacity * 3 // 4)
    post: capacity == MAXIMUM_CAPACITY or 0 < __return__ < capacity
    """
    if capacity >= MAXIMUM_CAPACITY:
        return NEVER_GROW_THRESHOLD
    return (capacity >> 1) + (capacity >> 2)


def doubled_capacity(capacity: int) -> int | None:
    """Capacity of the table a rehash moves to; None at MAXIMUM_CAPACITY (the table stops growing).

    pre: capacity in VALID_CAPACITIES
    post: __return__ == (None if capacity == MAXIMUM_CAPACITY else 2 * capacity)
    post: __return__ is None or is_valid_capacity(__return__)
    """
    if capacity == MAXIMUM_CAPACITY:
        return None
    return capacity * 2


def split_targets(old_index: int, old_length: int) -> tuple[int, int]:
    """Buckets of the doubled table that old bucket ``old_index`` may move to.

    pre: old_length in VALID_CAPACITIES and old_length < MAXIMUM_CAPACITY
    pre: 0 <= old_index < old_length
    post: __return__[0] != __return__[1]
    post: all(0 <= t < 2 * old_length and t % old_length == old_index for t in __return__)
    """
    return old_index, old_index + old_length


def new_bucket(h: int, old_length: int) -> int:
    """Bucket of the doubled table that the rehash moves an entry of hash ``h`` to.

    Old bucket ``i`` splits into ``i`` and ``i + old_length``, never elsewhere,
    and the entry lands where a lookup in the doubled table looks for it.

    pre: INT_MIN <= h <= INT_MAX
    pre: old_length in VALID_CAPACITIES and old_length < MAXIMUM_CAPACITY
    post: __return__ in split_targets(bucket_index(h, old_length), old_length)
    post: __return__ == h % (2 * old_length)  # where bucket_index looks in the doubled table
    """
    return h & (2 * old_length - 1)


def snapshot_array_length(primary_length: int, rehash_index: int, size: int) -> int:
    """Length of a snapshot's bucket array; the ``size`` term is FLINK-9601.

    pre: primary_length in VALID_CAPACITIES
    pre: 0 <= rehash_index < primary_length
    pre: 0 <= size <= INT_MAX
    post: __return__ >= size  # FLINK-9601: flattening every entry into the array never overflows it
    post: __return__ >= primary_length + rehash_index  # room for every bucket of the logical table
    """
    return max(rehash_index + primary_length, size)


def snapshot_regions(primary_length: int, rehash_index: int, rehashing: bool):
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
        ("rehash", primary_length, rehash_index, tail + rehash_index),
    ]


# Helpers of the snapshot_regions contract (not used by the map).

def _fills_in_order(rows, length: int) -> bool:
    """Destination ranges of ``rows`` are non-negative and end to end, from 0 to ``length``."""
    end = 0
    for _, _, count, dest in rows:
        if count < 0 or dest != end:
            return False
        end += count
    return end == length


def _copied_buckets(rows) -> list:
    """Every ``(source, bucket)`` the rows copy, with repeats, sorted."""
    return sorted((source, start + i) for source, start, count, _ in rows for i in range(count))


def _reachable_buckets(primary_length: int, rehash_index: int, rehashing: bool) -> list:
    """Every ``(table, bucket)`` that may hold entries, i.e. that ``uses_primary_table`` can pick, sorted."""
    buckets = [("primary", b) for b in range(primary_length) if uses_primary_table(b, primary_length, rehash_index)]
    if rehashing:
        buckets += [("rehash", b) for b in range(2 * primary_length)
                    if not uses_primary_table(b, primary_length, rehash_index)]
    return sorted(buckets)
