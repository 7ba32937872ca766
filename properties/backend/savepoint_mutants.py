"""Seeded bugs of the reference keyed backend's savepoints, upgrades and streams (machine ``backend``).

Each is a mistake someone writing Flink's savepoint writer, its serializer
upgrades or its checkpoint streams could make, killed by the steps of
savepoints.py and upgrades.py (``cowcheck mutants --machine backend``):

- ``backend-savepoint-skips-last-state``: the canonical savepoint writer drops
  the last state of each key group (the entries of the highest state id
  there), as an off-by-one over the states of a group would (K7);
- ``backend-migration-reads-with-old-serializer``: a restored state
  registered with a serializer that is compatible after migration keeps
  the serializer it was read with and its values as they were (K8, or K6
  when a TTL wrapper is missing, or K10 when a later restore of a stream's
  last value is what reads them);
- ``backend-kryo-duplicate-shares-state``: the Kryo serializer's
  ``duplicate()`` returns itself, so an asynchronous part writes through the
  scratch buffer the task thread copies values through (K5 / K7);
- ``backend-stream-eof-on-empty-read``: the byte stream a restore reads
  answers -1 to a zero-length read at its end, as Flink's
  ``ByteStateHandleInputStream`` did up to 1.16 and ``DataInputDeserializer``
  up to 1.15 (K10, K7 or K8: a Kryo value whose last array is empty).
"""

from __future__ import annotations

import copy
import threading
import time

import attrs

from cowcheck.backend.mutants import _backend_mutant
from cowcheck.reference.checkpoint.flink_format.savepoint import CanonicalSavepoint
from cowcheck.reference.checkpoint.streams import ByteStreamInput
from cowcheck.reference.keyed import KeyedStateBackend
from cowcheck.reference.kryo import KryoSerializer
from cowcheck.reference.serializers import ListSerializer, MapSerializer

__all__: list[str] = []


class _SkipsLastState(CanonicalSavepoint):
    def _key_group_pairs(self, group: int):
        pairs = super()._key_group_pairs(group)
        last = max((state_id for state_id, _, _ in pairs), default=None)
        return [p for p in pairs if p[0] != last]  # the group's last state is left out


@_backend_mutant("backend-savepoint-skips-last-state", "the canonical savepoint writer leaves out the entries of "
                 "the last state of each key group (its highest state id there)", "K7 / K8 / K10")
class SavepointSkipsLastState(KeyedStateBackend):
    savepoint_class = _SkipsLastState


@_backend_mutant("backend-migration-reads-with-old-serializer", "a restored state registered with a serializer "
                 "that needs a migration (a POJO's field added or removed, TTL switched) keeps the serializer it "
                 "was read with, and its values unconverted", "K6 / K8 / K10")
class MigrationReadsWithOldSerializer(KeyedStateBackend):
    def _migrate(self, registered, state_serializer) -> None:
        return None  # no value converted (and below: the old serializer kept)

    def get_or_create_keyed_state(self, namespace_serializer, descriptor):
        restored = self._states.get(descriptor.name)
        state = super().get_or_create_keyed_state(namespace_serializer, descriptor)
        if restored is not None:
            self._states[descriptor.name] = attrs.evolve(self._states[descriptor.name],
                                                         state_serializer=restored.state_serializer)
        return state


# ------------------------------------------------------------------ duplicate() sharing state


class _SharedKryo(KryoSerializer):
    """A Kryo serializer writing through its scratch buffer, whose ``duplicate()`` is itself. The
    first value the asynchronous part of a snapshot writes stops between being encoded into the
    buffer and being written out until the task thread next copies a value through the same
    serializer (or for at most 0.1 s: the next steps come within milliseconds): a legal interleaving of the
    two threads, made to happen."""

    def __init__(self, class_name, fields) -> None:
        super().__init__(class_name, fields)
        self._paused = threading.Event()
        self._resume = threading.Event()
        self._stopped_once = False

    def duplicate(self) -> "_SharedKryo":
        return self

    def serialize(self, value, out) -> None:
        scratch = self._scratch
        scratch.clear()
        self.encode(value, scratch)
        if threading.current_thread() is not threading.main_thread() and not self._stopped_once:
            self._stopped_once = True
            self._paused.set()
            self._resume.wait(0.1)
        out.write(bytes(scratch))

    def copy(self, value):
        copied = super().copy(value)  # through the same scratch buffer
        if self._paused.is_set():
            self._paused.clear()
            self._resume.set()
        return copied


def _shared(serializer):
    """``serializer`` with its Kryo serializers replaced by :class:`_SharedKryo` ones."""
    if isinstance(serializer, KryoSerializer):
        return _SharedKryo(serializer.class_name, serializer.fields)
    if isinstance(serializer, ListSerializer):
        return ListSerializer(_shared(serializer.element_serializer))
    if isinstance(serializer, MapSerializer):
        return MapSerializer(serializer.key_serializer, _shared(serializer.value_serializer))
    return serializer


@_backend_mutant("backend-kryo-duplicate-shares-state", "the Kryo serializer's duplicate() returns itself, so a "
                 "snapshot's asynchronous part writes through the scratch buffer the task thread copies values "
                 "through (the two threads interleaved: the first value written stops until the task thread next "
                 "copies one)", "K5 / K6 / K7")
class KryoDuplicateSharesState(KeyedStateBackend):
    def get_or_create_keyed_state(self, namespace_serializer, descriptor):
        for field in ("serializer", "element_serializer", "user_value_serializer"):
            if isinstance(getattr(descriptor, field, None), KryoSerializer):
                descriptor = copy.copy(descriptor)
                setattr(descriptor, field, _shared(getattr(descriptor, field)))
        return super().get_or_create_keyed_state(namespace_serializer, descriptor)

    def snapshot(self, checkpoint_id, stream_factory=None, **compression):
        return _StartsPaused(super().snapshot(checkpoint_id, stream_factory, **compression))

    def savepoint(self, checkpoint_id, stream_factory=None, canonical=True, **compression):
        return _StartsPaused(super().savepoint(checkpoint_id, stream_factory, canonical, **compression))


class _StartsPaused:
    """An asynchronous part whose ``start`` returns once its thread stopped at its first Kryo value
    (or finished): the task thread's next steps then run while it is stopped there. Joining it
    (``get``) lets it go on at once; while it is stopped it says it is done, so that a join does
    not wait for the stop to time out."""

    def __init__(self, future) -> None:
        self.future = future
        self.kryos = [k for state in future.pending.states for k in _kryos(state.state_serializer)]

    def start(self) -> None:
        for kryo in self.kryos:
            kryo._stopped_once = False  # each snapshot's asynchronous part stops at its first Kryo value
        self.future.start()
        for _ in range(2000):
            if self.future.done or self._stopped():
                return
            time.sleep(0.001)

    def _stopped(self) -> bool:
        return any(k._paused.is_set() for k in self.kryos)

    @property
    def done(self) -> bool:
        return self._stopped() or self.future.done

    def get(self, timeout=None):
        for kryo in self.kryos:
            if kryo._paused.is_set():
                kryo._paused.clear()
                kryo._resume.set()
        return self.future.get(timeout)

    def __getattr__(self, name):
        return getattr(self.future, name)


def _kryos(serializer):
    if isinstance(serializer, _SharedKryo):
        return [serializer]
    if isinstance(serializer, ListSerializer):
        return _kryos(serializer.element_serializer)
    if isinstance(serializer, MapSerializer):
        return _kryos(serializer.value_serializer)
    return []


# ------------------------------------------------------------------ -1 for a zero-length read


class _MinusOneAtEnd(ByteStreamInput):
    def java_read(self, n: int):
        if n == 0 and self.at_stream_end and self.tell() == len(self.getbuffer()):
            return None  # -1: Flink's ByteStateHandleInputStream before 1.17
        return super().java_read(n)


@_backend_mutant("backend-stream-eof-on-empty-read", "the byte stream a restore reads answers -1 to a zero-length "
                 "read at its end (Flink's ByteStateHandleInputStream up to 1.16, DataInputDeserializer up to 1.15): "
                 "a Kryo value whose last array is empty cannot be read there", "K7 / K8 / K10")
class StreamEofOnEmptyRead(KeyedStateBackend):
    stream_input = _MinusOneAtEnd
