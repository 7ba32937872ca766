"""Seeded bugs of the reference operator state backend (machine ``operator``): each a small subclass.

Each is a mistake someone writing Flink's operator state, its repartitioner or
its compressed checkpoints could make (one of them Flink made: FLINK-34063);
its catalogue entry says what it does and which property should catch it.
"""

from __future__ import annotations

import attrs

from cowcheck.core.mutants import register_mutant
from cowcheck.reference.checkpoint.flink_format.compression import CompressibleOutput
from cowcheck.reference.operator import (DefaultOperatorStateBackend, HeapBroadcastState, OperatorSnapshotFuture,
                                         OperatorStateBackends, PartitionableListState, RoundRobinRepartitioner)

__all__: list[str] = []


def _mutant(name: str, description: str, expected: str, source: str = "", *, backend_class=None,
            repartitioner=None):
    def factory():
        return OperatorStateBackends(backend_class=backend_class or DefaultOperatorStateBackend,
                                     repartitioner=repartitioner() if repartitioner else None)

    factory.__name__ = factory.__qualname__ = name.replace("-", "_")
    register_mutant(name, description, expected, machine="operator", source=source)(factory)


class _DropsRemainder(RoundRobinRepartitioner):
    def _split(self, states, parallelism, merge):
        for name, current in list(states.items()):
            total = sum(len(o.offsets) for _, o in current)
            keep = total - total % parallelism  # the remainder is never dealt out
            trimmed, left = [], keep
            for stream, offsets in current:
                take = offsets.offsets[:max(left, 0)]
                left -= len(take)
                trimmed.append((stream, attrs.evolve(offsets, offsets=take)))
            states[name] = trimmed
        super()._split(states, parallelism, merge)


_mutant("operator-split-drops-remainder", "the round-robin split of a list state deals out total // new elements "
        "to each instance and drops the remainder", "O4 / O5", repartitioner=_DropsRemainder)


class _UnionToOne(RoundRobinRepartitioner):
    @staticmethod
    def _union(states, merge):
        RoundRobinRepartitioner._union(states, merge[:1])


_mutant("operator-union-to-one-instance", "a union list state is given to the first instance only, not to every "
        "instance", "O3 / O4 / O5", repartitioner=_UnionToOne)


class _BroadcastFromOne(RoundRobinRepartitioner):
    @staticmethod
    def _broadcast(states, merge):
        RoundRobinRepartitioner._broadcast({name: entries[:1] for name, entries in states.items()}, merge)


_mutant("operator-broadcast-from-one-handle", "a broadcast state is restored on every instance from the first old "
        "instance's handle only, not instance i from old instance i % old", "O4 / O5",
        repartitioner=_BroadcastFromOne)


class _UnflushedOutput(CompressibleOutput):
    __slots__ = ()

    def __init__(self, stream, compressed, flush_on_tell=True):
        super().__init__(stream, compressed, flush_on_tell=False)


class _WrongOffsets(DefaultOperatorStateBackend):
    output_class = _UnflushedOutput


_mutant("operator-compressed-offset-not-flushed", "a compressed checkpoint records each element's offset without "
        "flushing the snappy stream first, so offsets point into a chunk and restore seeks to the wrong place",
        "O3 / O4 / O5", source="FLINK-34063 (Flink 1.18.0-1.18.1)", backend_class=_WrongOffsets)


class _WritesWhenJoined(OperatorSnapshotFuture):
    """An asynchronous part that writes only when joined (a legal schedule: every step in between races it)."""

    __slots__ = ()

    def start(self) -> None:
        self._begin()

    @property
    def done(self) -> bool:
        return self._started

    def get(self, timeout=None):
        if self._result is None and self._error is None:
            self._write()
        return super().get(timeout)


class _SharedElements(PartitionableListState):
    __slots__ = ()

    def deep_copy(self):
        return PartitionableListState(attrs.evolve(self.meta), list(self.elements))  # the elements shared


class _SharesMutable(DefaultOperatorStateBackend):
    list_state_class = _SharedElements
    future_class = _WritesWhenJoined


_mutant("operator-snapshot-shares-mutable-element", "a list state's snapshot copies the list but not its elements, "
        "so a mutable element changed in place after the synchronous part reaches the checkpoint (its asynchronous "
        "part writes when joined: every step in between races it)", "O5", backend_class=_SharesMutable)


class _LiveMap(HeapBroadcastState):
    __slots__ = ()

    def deep_copy(self):
        return HeapBroadcastState(attrs.evolve(self.meta), self.entries_map)  # the live map, not a copy


class _IteratesLiveMap(DefaultOperatorStateBackend):
    broadcast_state_class = _LiveMap
    future_class = _WritesWhenJoined


_mutant("operator-broadcast-snapshot-iterates-live-map", "a broadcast state's snapshot keeps the live map instead "
        "of a copy, so writes after the synchronous part reach the checkpoint (its asynchronous part writes when "
        "joined)", "O5", backend_class=_IteratesLiveMap)
