"""The two-phase heap snapshot (Flink ``HeapSnapshotStrategy`` and its async writer).

The synchronous part takes every table's snapshot (references only); the
asynchronous part writes the metadata, then one key group at a time, while
the tables keep changing, releasing each map snapshot as soon as its group
is written; a failure or cancel releases the rest (FLINK-13469).
"""

from __future__ import annotations

import io
import zlib
from typing import Any, Callable, Optional

import attrs

from cowcheck.reference.checkpoint.format import (
    END_MAGIC,
    I16,
    I32,
    I64,
    INDEX_ENTRY,
    INDEX_MAGIC,
    U32,
    CheckpointMetadata,
    StateMetadata,
)
from cowcheck.reference.checkpoint.handle import CheckpointHandle
from cowcheck.reference.checkpoint.streams import CheckpointOutputStream, CheckpointStreamFactory
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.serializers import duplicate
from cowcheck.reference.state_table import CopyOnWriteStateTable, CopyOnWriteStateTableSnapshot

__all__ = ["PendingCheckpoint", "RegisteredState"]


@attrs.frozen
class RegisteredState:
    """A state of a backend: its table, the serializers its checkpoint uses, the
    transformer its checkpoint applies to each state as it writes it (None: none; a
    state with time-to-live drops what has expired, Flink's snapshot transformer), and
    its kind (``value``, ``list``, ``map``, ``reducing``; None: not known, as for a state
    restored from the project's own format, which does not record it)."""

    name: str
    namespace_serializer: Any
    state_serializer: Any
    table: CopyOnWriteStateTable
    transformer: Optional[Callable[[Any], Any]] = None
    kind: Optional[str] = None

    def metadata(self) -> StateMetadata:
        return StateMetadata(self.name, self.namespace_serializer.serializer_id,
                             self.state_serializer.serializer_id)



class PendingCheckpoint:
    """A checkpoint whose synchronous part is done: it owns one snapshot per
    registered table of ``backend`` (a ``HeapKeyedStateBackend``) and writes
    them on ``advance()`` / ``complete()``.

    ``status`` is ``running`` until ``complete()`` (``completed``, ``handle``
    set), ``cancel()`` (``cancelled``) or an exception while writing
    (``failed``, ``error`` set, the exception re-raised). Leaving ``running``
    any way releases every map snapshot; cancel and failure also delete the
    partial file.
    """

    RUNNING, COMPLETED, FAILED, CANCELLED = "running", "completed", "failed", "cancelled"

    def __init__(self, backend, checkpoint_id: int,
                 stream_factory: CheckpointStreamFactory) -> None:
        self.checkpoint_id = checkpoint_id
        self.key_group_range = backend.key_group_range
        self.max_parallelism = backend.max_parallelism
        self.key_serializer = duplicate(backend.key_serializer)
        # The serializers the asynchronous part writes with, duplicated here as Flink's state
        # snapshots duplicate them: a serializer with state of its own is not shared with the task thread.
        self.states: tuple[RegisteredState, ...] = tuple(
            attrs.evolve(s, namespace_serializer=duplicate(s.namespace_serializer),
                         state_serializer=duplicate(s.state_serializer)) for s in backend.registered_states())
        self.metadata = CheckpointMetadata(checkpoint_id, backend.max_parallelism, backend.key_group_range,
                                           backend.key_serializer.serializer_id,
                                           [s.metadata() for s in self.states])
        self.stream_factory = stream_factory
        # The synchronous part: bucket-head references, nothing is copied.
        self.table_snapshots: dict[str, CopyOnWriteStateTableSnapshot] = {
            s.name: s.table.snapshot() for s in self.states
        }
        self.status = self.RUNNING
        self.handle: Optional[CheckpointHandle] = None
        self.error: Optional[BaseException] = None
        self.offsets: list[tuple[int, int]] = []
        self.stream: Optional[CheckpointOutputStream] = None
        self._key_groups = list(backend.key_group_range)
        self._next = 0
        self._crc = 0

    # ------------------------------------------------------- progress

    @property
    def written_key_groups(self) -> list[int]:
        return self._key_groups[: self._next]

    def advance(self) -> int:
        """Write the next key group (the metadata first, on the first call);
        returns how many key groups remain. Call ``complete()`` to finish."""
        self._check_running("advance")
        try:
            if self.stream is None:
                self._open()
            if self._next < len(self._key_groups):
                self._write_key_group(self._key_groups[self._next])
                self._next += 1
        except BaseException as exc:
            self._abort(self.FAILED, exc)
            raise
        return len(self._key_groups) - self._next

    def complete(self) -> CheckpointHandle:
        """Write every remaining key group and close the stream; the handle."""
        self._check_running("complete")
        try:
            if self.stream is None:
                self._open()
            while self._next < len(self._key_groups):
                self._write_key_group(self._key_groups[self._next])
                self._next += 1
            self.handle = self._finish()
        except BaseException as exc:
            self._abort(self.FAILED, exc)
            raise
        self.status = self.COMPLETED
        self._release_snapshots()  # Flink releases the resources in a finally as well
        return self.handle

    def cancel(self) -> None:
        """Stop writing: release every map snapshot, delete the partial file. No-op once ended."""
        if self.status == self.RUNNING:
            self._abort(self.CANCELLED, None)

    def _check_running(self, what: str) -> None:
        if self.status != self.RUNNING:
            raise IllegalStateError(f"{what}() on checkpoint {self.checkpoint_id}, which is {self.status}")

    # ------------------------------------------------------- writing

    def _open(self) -> None:
        self.stream = self.stream_factory.create_stream(self.checkpoint_id)
        self._write(self.metadata.encode())

    def _write(self, data: bytes) -> None:
        self.stream.write(data)
        self._crc = zlib.crc32(data, self._crc)

    def _write_key_group(self, group: int) -> None:
        block = self._encode_key_group(group)
        self.offsets.append((group, self.stream.tell()))
        self._write(block + U32.pack(zlib.crc32(block)))

    def _encode_key_group(self, group: int) -> bytes:
        out = io.BytesIO()
        out.write(I32.pack(group))
        for state_id, state in enumerate(self.states):
            out.write(I16.pack(state_id))
            self._write_state_in_key_group(state, self.table_snapshots[state.name], group, out)
        return out.getvalue()

    def _write_state_in_key_group(self, state: RegisteredState, snapshot: CopyOnWriteStateTableSnapshot,
                                  group: int, out) -> None:
        snapshot.write_key_group(out, group, self.key_serializer, state.namespace_serializer,
                                 state.state_serializer, state.transformer)

    def _finish(self) -> CheckpointHandle:
        index_offset = self.stream.tell()
        index = bytearray(INDEX_MAGIC + U32.pack(len(self.offsets)))
        for entry in self.offsets:
            index += INDEX_ENTRY.pack(*entry)
        self._write(bytes(index) + I64.pack(index_offset))
        checksum = self._crc
        self.stream.write(U32.pack(checksum) + END_MAGIC)
        path, inline, size = self.stream.close_and_get_result()
        return CheckpointHandle(self.checkpoint_id, self.key_group_range, self.max_parallelism, self.offsets,
                                size, checksum, path, inline)

    # ------------------------------------------------------- cleanup

    def _abort(self, status: str, error: Optional[BaseException]) -> None:
        self.status, self.error = status, error
        self._release_snapshots()
        self._discard_stream()

    def _release_snapshots(self) -> None:
        for snapshot in self.table_snapshots.values():
            snapshot.release()

    def _discard_stream(self) -> None:
        if self.stream is not None:
            self.stream.discard()

    def __repr__(self) -> str:
        return (f"PendingCheckpoint(id={self.checkpoint_id}, status={self.status}, "
                f"written={self._next}/{len(self._key_groups)} key groups)")
