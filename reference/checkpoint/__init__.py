"""Checkpoint write and restore of key-grouped heap state (docs/contract.md §11).

Contract: a :class:`HeapKeyedStateBackend` holds named states, each a
:class:`~cowcheck.reference.state_table.CopyOnWriteStateTable` over the backend's key
groups. ``checkpoint(id)`` is Flink's two-phase heap snapshot:

1. synchronous part (in ``checkpoint()``): snapshot every table, references
   only; the returned :class:`PendingCheckpoint` owns those snapshots;
2. asynchronous part (``advance()`` one key group at a time, or
   ``complete()``), while the tables keep changing: write the metadata, then
   per key group its id and, per state, a short state id and the table
   snapshot's bytes for that group, releasing each map snapshot as soon as its
   group is written. ``complete()`` returns a :class:`CheckpointHandle`.

A failed or cancelled write releases every map snapshot not yet released
(FLINK-13469) and deletes its partial file. Restore (``restore(handles,
key_group_range)``) reads one or more handles into fresh tables for any
key-group range (a subset, or several handles merged: rescaling); it is all
or nothing, and bad input raises :class:`~cowcheck.reference.errors.CheckpointFormatError`
naming the file, the offset and the problem. The byte layout is documented
in ``docs/checkpoint-format.md``.

Costs: the synchronous part is O(total map capacity) (bucket-head copies);
the asynchronous part holds one key group's bytes at a time plus the output
stream (in memory up to the threshold, a file beyond it).

Maintenance notes:

1. The offset of a key group is taken *before* its id is written; restore
   seeks there and checks the id (Flink's "Unexpected key-group in restore").
2. State ids are positions in registration order, written as int16 (Flink
   ``writeShort``), so at most 32767 states.
3. The data file is written under a temporary name and renamed into place
   only after fsync: a reader never sees a partial checkpoint file.

The one usage rule: every pending checkpoint must end in ``complete()`` or
``cancel()``; until then its key groups' maps keep copying on write.

The package mirrors Flink's roles: ``format`` (the byte layout), ``streams``
(where bytes go), ``handle`` (where a completed checkpoint is), ``snapshot``
(the two-phase write), ``backend`` (named states), ``restore`` (reading
back, rescaling); everything public is re-exported here (what a checkpoint holds, checked
byte by byte, is :mod:`cowcheck.checkpoint.inspect`, the suite's).

>>> from cowcheck.reference.serializers import IntSerializer, ListSerializer
>>> from cowcheck.reference.state_table import KeyGroupRange
>>> b = HeapKeyedStateBackend(KeyGroupRange(0, 7), max_parallelism=8, capacity=4)
>>> t = b.register_state("clicks", IntSerializer(), ListSerializer(IntSerializer()))
>>> t.put(42, 0, [1])
>>> pending = b.checkpoint(1)          # synchronous part: references only
>>> t.get(42, 0).append(2)             # the live state moves on...
>>> handle = pending.complete()        # ...the checkpoint keeps the old one
>>> list(HeapKeyedStateBackend.restore([handle]).state("clicks"))
[(42, 0, [1])]
"""

from __future__ import annotations

from cowcheck.reference.checkpoint.backend import HeapKeyedStateBackend, RegisteredState
from cowcheck.reference.checkpoint.format import (
    DEFAULT_MEMORY_THRESHOLD,
    FORMAT_VERSION,
    MAX_MEMORY_THRESHOLD,
    CheckpointMetadata,
    StateMetadata,
)
from cowcheck.reference.checkpoint.handle import CheckpointHandle
from cowcheck.reference.checkpoint.snapshot import PendingCheckpoint
from cowcheck.reference.checkpoint.streams import CheckpointOutputStream, CheckpointStreamFactory

__all__ = [
    "HeapKeyedStateBackend",
    "PendingCheckpoint",
    "CheckpointHandle",
    "CheckpointStreamFactory",
    "CheckpointOutputStream",
    "CheckpointMetadata",
    "StateMetadata",
    "RegisteredState",
    "DEFAULT_MEMORY_THRESHOLD",
    "MAX_MEMORY_THRESHOLD",
    "FORMAT_VERSION",
]
