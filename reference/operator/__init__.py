"""Operator state (Flink ``DefaultOperatorStateBackend``): list, union list and broadcast states, checkpoints, rescaling.

What every source and sink keeps beside (or instead of) keyed state, as Flink
2.3.0 has it (contract: docs/contract.md, section "Operator state"):

- ``states``: ``PartitionableListState`` (SPLIT_DISTRIBUTE and UNION lists) and
  ``HeapBroadcastState`` (BROADCAST maps), their deep copies and their writers;
- ``format``: ``OperatorBackendSerializationProxy`` and ``OperatorStreamStateHandle``
  (Flink's bytes: real Flink restores what this writes, and the other way);
- ``backend``: ``DefaultOperatorStateBackend`` (registration through descriptors,
  snapshots whose asynchronous part runs here or on a thread of its own, restore)
  and ``OperatorStateBackends``, which builds them and repartitions handles;
- ``repartition``: ``RoundRobinOperatorStateRepartitioner``;
- ``javamap``: the iteration order of Java's ``HashMap``, on which Flink's choices rest.

Snapshot compression (snappy) is :mod:`cowcheck.reference.checkpoint.flink_format.compression`'s.
"""

from cowcheck.reference.operator.backend import (DefaultOperatorStateBackend, OperatorSnapshotFuture,
                                                 OperatorStateBackends, StateMigrationError)
from cowcheck.reference.operator.format import OperatorProxy, OperatorStreamStateHandle, StateOffsets, StreamData
from cowcheck.reference.operator.repartition import RoundRobinRepartitioner, repartition
from cowcheck.reference.operator.states import (BROADCAST, MODES, SPLIT_DISTRIBUTE, UNION, HeapBroadcastState,
                                                OperatorStateMetaInfo, PartitionableListState)

__all__ = ["DefaultOperatorStateBackend", "OperatorSnapshotFuture", "OperatorStateBackends", "StateMigrationError",
           "OperatorProxy", "OperatorStreamStateHandle", "StateOffsets", "StreamData", "RoundRobinRepartitioner",
           "repartition", "BROADCAST", "MODES", "SPLIT_DISTRIBUTE", "UNION", "HeapBroadcastState",
           "OperatorStateMetaInfo", "PartitionableListState"]
