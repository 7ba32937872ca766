"""Reference implementation: a faithful Python port of Flink 2.3.0's heap state structures.

Nothing here imports the verification suite.
"""

from cowcheck.reference.cow_state_map import CopyOnWriteStateMap, StateMapEntry
from cowcheck.reference.errors import (
    ConcurrentModificationError,
    ForeignSnapshotError,
    CheckpointFormatError,
    IllegalStateError,
    KeyGroupOutOfRangeError,
    RehashInProgressError,
    UnknownSnapshotVersionError,
)
from cowcheck.reference.hashing import bit_mix, java_hash_code, key_group, murmur_hash
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2
from cowcheck.reference.snapshot import CopyOnWriteStateMapSnapshot
from cowcheck.reference.state_table import CopyOnWriteStateTable, CopyOnWriteStateTableSnapshot, KeyGroupRange

__all__ = [
    "CopyOnWriteStateMap",
    "CopyOnWriteStateMapSnapshot",
    "StateMapEntry",
    "CopyOnWriteStateTable",
    "CopyOnWriteStateTableSnapshot",
    "KeyGroupRange",
    "ConcurrentModificationError",
    "ForeignSnapshotError",
    "CheckpointFormatError",
    "KeyGroupOutOfRangeError",
    "IllegalStateError",
    "RehashInProgressError",
    "UnknownSnapshotVersionError",
    "bit_mix",
    "java_hash_code",
    "key_group",
    "murmur_hash",
    "Tuple2",
    "TimeWindow",
    "VOID_NAMESPACE",
]
