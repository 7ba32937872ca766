"""Seeded corruptions of Flink's real map and keyed backend (``Corruption.java``): bugs the suite must catch in Flink.

``--impl flink:corrupt=NAME`` (or ``flink@VERSION:corrupt=NAME``) runs Flink's
own ``CopyOnWriteStateMap`` with one of them: the helper breaks the map
through its private fields at a chosen point of an operation, on the
per-operation bridge and in batched walks alike (the same hooks around the
same Flink calls). They exist to test the suite on the real map, not the
reference: a corrupted map must fail, for the reason listed.
"""

from __future__ import annotations

import attrs

__all__ = ["Corruption", "CORRUPTIONS", "BackendCorruption", "BACKEND_CORRUPTIONS"]


@attrs.frozen
class Corruption:
    """``expected``: the codes a run may fail with (black-box, then white-box)."""

    name: str
    description: str
    black_box: tuple
    white_box: tuple


CORRUPTIONS = {c.name: c for c in (
    Corruption("mark-fresh", "copy-on-write skipped: before a get, put or transform under a live snapshot, the "
                             "entry is marked as written after it (entry and state version set to the map's)",
               ("P6", "P2", "P1"), ("P6", "I9", "I8", "P2")),
    Corruption("misplace", "a written entry is moved to the head of the next bucket of its table",
               ("P1", "P2", "P4", "P7"), ("I1",)),
    Corruption("lose-size", "a remove that found its entry leaves the primary table's size as it was",
               ("P4",), ("P4",)),
    Corruption("stale-required", "a release sets the highest required snapshot version to 0 (the other live "
                                 "snapshots are forgotten)", ("P6", "P2"), ("I5",)),
    Corruption("cycle", "a put of a key whose hashCode ends in the ten bits of 31 (key 31, about one key in a "
                        "thousand of any type) links its entry to itself: the next walk of that chain never ends",
               ("time-limit", "P1", "P2", "P7"), ("I1",)),
    Corruption("halt", "a put of a key whose hashCode ends in the ten bits of 31 (key 31...) ends the JVM and its "
                       "process on the spot", (), ()),
    Corruption("identity-keys", "keys and namespaces compared with == (as a map written with identity comparison "
                                "would): during a keyed call, entries whose key and namespace equal the call's but "
                                "are other objects are hidden from the lookup, so a get misses them and a put "
                                "inserts the key twice (and a remove or put across a live iteration changes the "
                                "structure when the model's does not, or the other way round); harmless while the "
                                "caller hands the same objects (hold_keys, small ints)",
               ("P1", "P4", "P2", "P6", "P7"), ("P1", "P4", "I3", "P7")),
)}


@attrs.frozen
class BackendCorruption:
    """A corruption of Flink's keyed backend: the codes a run may fail with when asynchronous parts
    run on a thread of their own (``racing``: K5 for a checkpoint's, K7 for a savepoint's) and with
    ``--async-part inline`` (``inline``)."""

    name: str
    description: str
    racing: tuple
    inline: tuple


# Corruptions of Flink's keyed backend (``--machine backend --impl flink:corrupt=NAME``): hooks of
# Corruption.java called before every write of the task thread, on the map of the current key group.
BACKEND_CORRUPTIONS = {c.name: c for c in (
    BackendCorruption("mark-fresh", "an in-place write to a shared entry: before a write of the task thread while a "
                                    "checkpoint's snapshot is live, the entry is marked as written after it, so the "
                                    "write lands in the entry (or the list or map) the snapshot shares instead of a "
                                    "copy", ("K5", "K7"), ()),
    BackendCorruption("forget-snapshots", "before a write of the task thread while a checkpoint's snapshot is live, "
                                          "the map of its key group forgets its live snapshots (highest required "
                                          "version 0), so copy-on-write stops in that map until the next snapshot",
                      ("K5", "K7"), ()),
)}
