"""Index arithmetic of the map, kept pure so it can be checked on its own.

Tables are lists whose length is a power of two; a hash picks bucket
``h & (length - 1)``. While a rehash runs, buckets ``< rehash_index`` of the
primary table have moved to the table twice its size.
"""

from __future__ import annotations

__all__ = [
    "MINIMUM_CAPACITY",
    "DEFAULT_CAPACITY",
    "MAXIMUM_CAPACITY",
    "MIN_TRANSFERRED_PER_INCREMENTAL_REHASH",
    "NEVER_GROW_THRESHOLD",
    "is_valid_capacity",
    "bucket_index",
    "uses_primary_table",
    "threshold_for",
    "split_targets",
    "snapshot_array_length",
    "snapshot_regions",
]

MINIMUM_CAPACITY = 4
DEFAULT_CAPACITY = 128
MAXIMUM_CAPACITY = 1 << 30
MIN_TRANSFERRED_PER_INCREMENTAL_REHASH = 4
# Flink: Integer.MAX_VALUE - 8 (MAX_ARRAY_SIZE) once the table cannot grow.
NEVER_GROW_THRESHOLD = (1 << 31) - 1 - 8


def is_valid_capacity(capacity: int) -> bool:
    """A power of two between MINIMUM_CAPACITY and MAXIMUM_CAPACITY."""
    return (
        isinstance(capacity, int)
        and MINIMUM_CAPACITY <= capacity <= MAXIMUM_CAPACITY
        and capacity & (capacity - 1) == 0
    )


def bucket_index(h: int, length: int) -> int:
    """Bucket of hash ``h`` in a table of ``length`` (a power of two)."""
    return h & (length - 1)


def uses_primary_table(h: int, primary_length: int, rehash_index: int) -> bool:
    """``select_active_table``: the primary table holds buckets ``>= rehash_index``."""
    return (h & (primary_length - 1)) >= rehash_index


def threshold_for(capacity: int) -> int:
    """Grow when size exceeds 3/4 of capacity; never at MAXIMUM_CAPACITY."""
    if capacity >= MAXIMUM_CAPACITY:
        return NEVER_GROW_THRESHOLD
    return (capacity >> 1) + (capacity >> 2)


def split_targets(old_index: int, old_length: int) -> tuple[int, int]:
    """Buckets of the doubled table that old bucket ``old_index`` may move to."""
    return old_index, old_index + old_length


def snapshot_array_length(primary_length: int, rehash_index: int, size: int) -> int:
    """Length of a snapshot's bucket array; the ``size`` term is FLINK-9601."""
    return max(rehash_index + primary_length, size)


def snapshot_regions(primary_length: int, rehash_index: int, rehashing: bool):
    """Copy plan of a snapshot: ``(source, source_start, length, dest_start)`` rows.

    ``source`` is ``"primary"`` or ``"rehash"``. While rehashing, the logical
    table is ``primary[rehash_index:]``, then the two halves of the rehash
    table that hold the moved buckets.
    """
    if not rehashing:
        return [("primary", 0, primary_length, 0)]
    tail = primary_length - rehash_index
    return [
        ("primary", rehash_index, tail, 0),
        ("rehash", 0, rehash_index, tail),
        ("rehash", primary_length, rehash_index, tail + rehash_index),
    ]
