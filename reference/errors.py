"""Exceptions raised by the reference structures.

Each sits on the builtin it refines, so ``except RuntimeError`` keeps working,
and carries the pieces of its message as attributes.
"""

from __future__ import annotations

__all__ = [
    "ConcurrentModificationError",
    "IllegalStateError",
    "UnknownSnapshotVersionError",
    "ForeignSnapshotError",
    "RehashInProgressError",
    "KeyGroupOutOfRangeError",
    "CheckpointFormatError",
]


class ConcurrentModificationError(RuntimeError):
    """A live iterator saw a structural change (insert of a new key, remove) since it started."""

    def __init__(self, expected_mod_count: int, actual_mod_count: int) -> None:
        super().__init__(
            f"map was structurally modified during iteration "
            f"(mod_count {expected_mod_count} -> {actual_mod_count})"
        )
        self.expected_mod_count = expected_mod_count
        self.actual_mod_count = actual_mod_count


class IllegalStateError(RuntimeError):
    """Flink's ``IllegalStateException``: an operation that the current state forbids."""


class RehashInProgressError(IllegalStateError):
    """``double_capacity`` while a rehash is already running (Flink's precondition)."""

    def __init__(self) -> None:
        super().__init__("There is already a rehash in progress.")


class UnknownSnapshotVersionError(IllegalStateError):
    """Release of a snapshot version the map does not hold."""

    def __init__(self, version: int, live_versions: list[int]) -> None:
        super().__init__(
            f"Attempt to release unknown snapshot version {version} (live versions: {live_versions})"
        )
        self.version = version
        self.live_versions = live_versions


class ForeignSnapshotError(ValueError):
    """Release of a snapshot through a map that did not create it."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"Cannot release snapshot version {version}: it is owned by a different state map."
        )
        self.version = version


class KeyGroupOutOfRangeError(ValueError):
    """A key group (of ``key``, if given) outside a table's key-group range
    (Flink: ``KeyGroupRangeOffsets.newIllegalKeyGroupException``)."""

    def __init__(self, key_group: int, key_group_range, max_parallelism: int, key=None) -> None:
        subject = f"key group {key_group}" if key is None else f"key {key!r} (key group {key_group})"
        super().__init__(
            f"{subject} is outside this table's key-group range {key_group_range} "
            f"(max_parallelism {max_parallelism})"
        )
        self.key = key
        self.key_group = key_group
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism


class CheckpointFormatError(ValueError):
    """Checkpoint bytes that cannot be restored: not a checkpoint, truncated,
    corrupted (checksum), or inconsistent with its handle. ``path`` names the
    file (or the inline handle), ``offset`` the byte where the problem is,
    ``problem`` what is wrong; the message is one line with all three."""

    def __init__(self, path: str, offset: int, problem: str) -> None:
        super().__init__(f"{path}: offset {offset}: {problem}")
        self.path = path
        self.offset = offset
        self.problem = problem
