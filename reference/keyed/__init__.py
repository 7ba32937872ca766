"""Keyed state at the state level: descriptors, value/list/map/reducing states, TTL, checkpoints.

What an operator sees of Flink's heap keyed backend (``HeapKeyedStateBackend``
with its ``HeapValueState``, ``HeapListState``, ``HeapMapState``,
``HeapReducingState`` and the TTL decorators over them), built on the
reference's tables and checkpoints (:mod:`cowcheck.reference.checkpoint`):

- ``ttl``: ``StateTtlConfig``, the controllable clock, expiry, the TTL read logic
  and the snapshot transformer of cleanup in full snapshots;
- ``descriptors``: how a state is named and typed;
- ``states``: the states over a ``CopyOnWriteStateTable`` and their TTL decorators;
- ``backend``: ``KeyedStateBackend`` (the key context, states, key iteration,
  snapshots whose asynchronous part runs here or on a thread of its own) and
  ``HashMapStateBackend``, which builds them fresh or restored (rescaling).

The contract the suite holds this to is docs/contract.md §20.
"""

from cowcheck.reference.keyed.backend import HashMapStateBackend, KeyedStateBackend, SnapshotFuture, StateMigrationError
from cowcheck.reference.keyed.descriptors import (KINDS, LIST, MAP, REDUCING, VALUE, ListStateDescriptor, MapStateDescriptor,
                                         ReducingStateDescriptor, StateDescriptor, ValueStateDescriptor)
from cowcheck.reference.keyed.ttl import ON_CREATE_AND_WRITE, ON_READ_AND_WRITE, ManualClock, StateTtlConfig

__all__ = [
    "HashMapStateBackend",
    "KeyedStateBackend",
    "SnapshotFuture",
    "StateMigrationError",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "StateTtlConfig",
    "ManualClock",
    "ON_CREATE_AND_WRITE",
    "ON_READ_AND_WRITE",
    "KINDS",
    "VALUE",
    "LIST",
    "MAP",
    "REDUCING",
]
