"""Flink's own heap checkpoint format, written and read by the reference (docs/checkpoint-format.md).

Contract: what Flink's ``HeapSnapshotStrategy`` writes for a keyed backend
— a ``KeyedBackendSerializationProxy`` (version 6: the key serializer's
snapshot, each state's meta info with its serializers' snapshots), then
every key group of the range (its id, then per state a short id and the
state's entries) — and a ``KeyGroupsStateHandle`` holding the key groups'
offsets, for the serializers of :mod:`cowcheck.reference.serializers` that Flink
has (int, long, string, byte arrays; lists, maps and TTL values of them;
void and time-window namespaces). Real Flink restores what this writes,
and this reads what Flink writes (``python -m cowcheck.flink.backend_releases
--pairs reference:2.3.0,2.3.0:reference`` holds both against the model, on any
release; docs/flink-bridge.md gives the figures for 1.13.6 and 2.3.0). The project's own
format (``cowcheck.reference.checkpoint``, with its checksums and index) stays the
default: a backend writes this one when built with ``checkpoint_format="flink"``.

Serializer snapshots name Java classes; the reader knows a fixed table of
them (:data:`~cowcheck.reference.checkpoint.flink_format.snapshots.SNAPSHOTS`) and
never loads a class a file names. Every read is bounded by the stream's
end, and bad input raises :class:`~cowcheck.reference.errors.CheckpointFormatError`.

Modules, by Flink's roles: ``datastream`` (Java's ``writeUTF``, bounded
reads), ``snapshots`` (serializer snapshots), ``proxy`` (the metadata),
``handle`` (``KeyGroupsStateHandle``), ``snapshot`` (the writer), ``restore``
(the reader).

>>> from cowcheck.reference.checkpoint import HeapKeyedStateBackend
>>> from cowcheck.reference.serializers import IntSerializer, ListSerializer
>>> from cowcheck.reference.state_table import KeyGroupRange
>>> b = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4, checkpoint_format="flink")
>>> b.register_state("clicks", IntSerializer(), ListSerializer(IntSerializer())).put(42, 0, [1])
>>> handle = b.checkpoint(1).complete()
>>> handle.offsets[0], handle.inline[:4].hex()
((0, 446), '00000006')
>>> list(HeapKeyedStateBackend.restore([handle], max_parallelism=8).state("clicks"))
[(42, 0, [1])]
"""

from cowcheck.reference.checkpoint.flink_format import pojo_snapshots  # noqa: F401  (POJO and Kryo snapshots)
from cowcheck.reference.checkpoint.flink_format.handle import FLINK_HANDLE_FORMAT, KeyGroupsStateHandle
from cowcheck.reference.checkpoint.flink_format.proxy import SerializationProxy, StateMetaInfo
from cowcheck.reference.checkpoint.flink_format.restore import FlinkCheckpointData, looks_like_flink_checkpoint
from cowcheck.reference.checkpoint.flink_format.snapshot import FlinkPendingCheckpoint
from cowcheck.reference.checkpoint.flink_format.snapshots import SNAPSHOTS, UnsupportedSerializerError, snapshot_class

__all__ = ["KeyGroupsStateHandle", "FlinkPendingCheckpoint", "FlinkCheckpointData", "SerializationProxy",
           "StateMetaInfo", "SNAPSHOTS", "UnsupportedSerializerError", "snapshot_class", "looks_like_flink_checkpoint",
           "FLINK_HANDLE_FORMAT"]
