"""Seeded bugs of the checkpoint writer and restore: each a small subclass.

Every mutant is a mistake someone writing or maintaining Flink's heap
checkpoint path could make; the catalogue entry says what it does and which
property should catch it. The registered factory builds the mutated backend
sized for the checkpoint machine (``small_backend``).
"""

from __future__ import annotations

import struct
import zlib

from cowcheck.checkpoint.machine import small_backend
from cowcheck.core.mutants import register_mutant
from cowcheck.reference.checkpoint import HeapKeyedStateBackend, PendingCheckpoint
from cowcheck.reference.state_table import KeyGroupRange

__all__: list[str] = []


def _checkpoint_mutant(name: str, description: str, expected: str, source: str = ""):
    """Register a backend subclass as a machine="checkpoint" mutant."""

    def decorate(backend_class: type) -> type:
        register_mutant(name, description, expected, machine="checkpoint", source=source)(
            small_backend(backend_class))
        return backend_class

    return decorate


class _LeakOnAbort(PendingCheckpoint):
    def _abort(self, status, error):
        self.status, self.error = status, error
        self._discard_stream()  # the map snapshots are never released


@_checkpoint_mutant("checkpoint-leak-on-abort", "a cancelled or failed checkpoint deletes its file but never "
                    "releases its map snapshots, so copy-on-write stays on forever", "C3 / P6",
                    source="FLINK-13469")
class LeakOnAbort(HeapKeyedStateBackend):
    pending_class = _LeakOnAbort


class _ReleaseAtSyncPoint(PendingCheckpoint):
    def __init__(self, backend, checkpoint_id, stream_factory):
        super().__init__(backend, checkpoint_id, stream_factory)
        for snapshot in self.table_snapshots.values():
            snapshot.release()  # "the references are taken, the maps may go on"

    def _write_state_in_key_group(self, state, snapshot, group, out):
        snapshot.map_snapshot(group).write_state(out, self.key_serializer, state.namespace_serializer,
                                                 state.state_serializer)


@_checkpoint_mutant("checkpoint-release-before-write", "the map snapshots are released right after the "
                    "synchronous part, before their key groups are written", "C1 / C3 / P6")
class ReleaseBeforeWrite(HeapKeyedStateBackend):
    pending_class = _ReleaseAtSyncPoint


class _OffsetAfterId(PendingCheckpoint):
    def _write_key_group(self, group):
        block = self._encode_key_group(group)
        self._write(block[:4])  # the key-group id...
        self.offsets.append((group, self.stream.tell()))  # ...then the offset: 4 bytes late
        self._write(block[4:] + struct.pack(">I", zlib.crc32(block)))


@_checkpoint_mutant("checkpoint-wrong-offsets", "each key group's offset is taken after its key-group id is "
                    "written, so restore seeks 4 bytes too far", "C1")
class WrongOffsets(HeapKeyedStateBackend):
    pending_class = _OffsetAfterId


class _WritesLiveMap(PendingCheckpoint):
    def _write_state_in_key_group(self, state, snapshot, group, out):
        snapshot.map_snapshot(group).release()
        live = list(state.table.map_for_key_group(group))  # the table now, not at the synchronous point
        out.write(len(live).to_bytes(4, "big", signed=True))
        for key, namespace, value in live:
            state.namespace_serializer.serialize(namespace, out)
            self.key_serializer.serialize(key, out)
            state.state_serializer.serialize(value, out)


@_checkpoint_mutant("checkpoint-writes-live-state", "the asynchronous part serializes the live map of each key "
                    "group instead of its snapshot", "C1 / C2")
class WritesLiveState(HeapKeyedStateBackend):
    pending_class = _WritesLiveMap


@_checkpoint_mutant("checkpoint-restore-range-end-exclusive", "restore treats the end of a key-group range as "
                    "exclusive when intersecting a handle with the target range, dropping its last key group",
                    "C1 / C4")
class RestoreRangeEndExclusive(HeapKeyedStateBackend):
    @staticmethod
    def _restore_range(handle_range, target):
        start, end = max(handle_range.start, target.start), min(handle_range.end, target.end) - 1
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY


class _KeepsPartialFile(PendingCheckpoint):
    def _discard_stream(self):
        if self.stream is not None:
            self.stream.closed = True  # closed, but the temporary file stays on disk


@_checkpoint_mutant("checkpoint-keeps-partial-file", "a cancelled or failed checkpoint stops writing but leaves "
                    "its partial temporary file in the checkpoint directory", "C5")
class KeepsPartialFile(HeapKeyedStateBackend):
    pending_class = _KeepsPartialFile
