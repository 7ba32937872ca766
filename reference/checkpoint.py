"""Checkpoint write and restore of key-grouped heap state (SPEC §11, seed 004).

Contract: a :class:`HeapKeyedStateBackend` holds named states, each a
:class:`~reference.state_table.CopyOnWriteStateTable` over the backend's key
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
or nothing, and bad input raises :class:`~reference.errors.CheckpointFormatError`
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

>>> import tempfile
>>> from reference.serializers import IntSerializer, ListSerializer
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

import base64
import io
import json
import os
import struct
import uuid
import zlib
from typing import Any, Callable, Iterable, Optional

import attrs

from reference.errors import CheckpointFormatError, IllegalStateError
from reference.hashing import key_group
from reference.layout import DEFAULT_CAPACITY
from reference.serializers import IntSerializer, SerializationError, UnknownSerializerError, serializer_from_id
from reference.state_table import (
    DEFAULT_MAX_PARALLELISM,
    CopyOnWriteStateTable,
    CopyOnWriteStateTableSnapshot,
    KeyGroupRange,
)

__all__ = [
    "HeapKeyedStateBackend",
    "PendingCheckpoint",
    "CheckpointHandle",
    "CheckpointStreamFactory",
    "CheckpointOutputStream",
    "CheckpointMetadata",
    "StateMetadata",
    "RegisteredState",
    "CheckpointInfo",
    "KeyGroupInfo",
    "inspect_checkpoint",
    "DEFAULT_MEMORY_THRESHOLD",
    "MAX_MEMORY_THRESHOLD",
    "FORMAT_VERSION",
]

# Flink: CheckpointingOptions.FS_SMALL_FILE_THRESHOLD default 20 KB,
# FsCheckpointStreamFactory.MAX_FILE_STATE_THRESHOLD 1 MB.
DEFAULT_MEMORY_THRESHOLD = 20 * 1024
MAX_MEMORY_THRESHOLD = 1024 * 1024

FORMAT_VERSION = 1
MAGIC = b"CWCK"
INDEX_MAGIC = b"CWIX"
END_MAGIC = b"CWCE"
DATA_SUFFIX = ".cwck"
HANDLE_SUFFIX = ".handle.json"
HANDLE_FORMAT = "cowcheck-checkpoint-handle"

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_INDEX_ENTRY = struct.Struct(">iq")
_HEADER_SIZE = 10  # magic, format version (u16), metadata length (u32)
_TRAILER_SIZE = 16  # index offset (i64), file crc32 (u32), end magic
_CHECKSUM = "crc32"


# --------------------------------------------------------------------- metadata


@attrs.frozen
class StateMetadata:
    """One state as the checkpoint records it; its state id is its position."""

    name: str
    namespace_serializer_id: str
    state_serializer_id: str


@attrs.frozen
class CheckpointMetadata:
    """What a reader needs before the first key group: ids, range, serializers."""

    checkpoint_id: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    key_serializer_id: str
    states: tuple[StateMetadata, ...] = attrs.field(converter=tuple)
    format_version: int = FORMAT_VERSION

    def encode(self) -> bytes:
        """Header, body and the metadata checksum (docs/checkpoint-format.md)."""
        body = bytearray()
        body += _I64.pack(self.checkpoint_id)
        body += _I32.pack(self.max_parallelism)
        body += _I32.pack(self.key_group_range.start)
        body += _I32.pack(self.key_group_range.end)
        body += _utf(self.key_serializer_id)
        body += _U16.pack(len(self.states))
        for state in self.states:
            body += _utf(state.name) + _utf(state.namespace_serializer_id) + _utf(state.state_serializer_id)
        head = MAGIC + _U16.pack(self.format_version) + _U32.pack(len(body)) + bytes(body)
        return head + _U32.pack(zlib.crc32(head))


def _utf(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ValueError(f"checkpoint metadata strings are at most 65535 UTF-8 bytes, got {len(data)}")
    return _U16.pack(len(data)) + data


@attrs.frozen
class RegisteredState:
    """A state of a backend: its table and the serializers its checkpoint uses."""

    name: str
    namespace_serializer: Any
    state_serializer: Any
    table: CopyOnWriteStateTable

    def metadata(self) -> StateMetadata:
        return StateMetadata(self.name, self.namespace_serializer.serializer_id,
                             self.state_serializer.serializer_id)


# --------------------------------------------------------------------- streams


def _check_threshold(instance, attribute, value) -> None:
    if not isinstance(value, int) or not 0 <= value <= MAX_MEMORY_THRESHOLD:
        raise ValueError(f"memory threshold must be an int in [0, {MAX_MEMORY_THRESHOLD}] (Flink's maximum), "
                         f"got {value!r}")


@attrs.frozen
class CheckpointStreamFactory:
    """Where checkpoint bytes go (Flink ``FsCheckpointStreamFactory``): a
    checkpoint of at most ``threshold`` bytes stays in memory and travels
    inline in its handle; a larger one spills to a file in ``directory``.
    Without a directory everything stays in memory."""

    directory: Optional[str] = None
    threshold: int = attrs.field(default=DEFAULT_MEMORY_THRESHOLD, validator=_check_threshold)

    def create_stream(self, checkpoint_id: int) -> "CheckpointOutputStream":
        return CheckpointOutputStream(self.directory, self.threshold, checkpoint_id)


class CheckpointOutputStream:
    """Bytes of one checkpoint: a buffer until they exceed ``threshold``, then
    a temporary file in ``directory`` that ``close_and_get_result()`` fsyncs
    and renames into place; ``discard()`` deletes it. Flink spills when its
    write buffer (max(4 KB, threshold)) fills; either way a stream of at most
    ``threshold`` bytes ends inline and a larger one in a file."""

    __slots__ = ("directory", "threshold", "checkpoint_id", "_buffer", "_file", "temp_path", "_pos", "closed")

    def __init__(self, directory: Optional[str], threshold: int, checkpoint_id: int) -> None:
        self.directory = directory
        self.threshold = threshold
        self.checkpoint_id = checkpoint_id
        self._buffer = bytearray()
        self._file = None
        self.temp_path: Optional[str] = None
        self._pos = 0
        self.closed = False

    def tell(self) -> int:
        return self._pos

    @property
    def spilled(self) -> bool:
        return self.temp_path is not None

    def write(self, data: bytes) -> None:
        if self.closed:
            raise IllegalStateError("write to a closed checkpoint stream")
        if self._file is not None:
            self._file.write(data)
        else:
            self._buffer += data
            if len(self._buffer) > self.threshold and self.directory is not None:
                self._spill()
        self._pos += len(data)

    def _spill(self) -> None:
        name = f"chk-{self.checkpoint_id}-{uuid.uuid4().hex[:16]}{DATA_SUFFIX}"
        self.temp_path = os.path.join(self.directory, f".{name}.tmp")
        self._file = open(self.temp_path, "xb")
        self._file.write(self._buffer)
        self._buffer = bytearray()

    def close_and_get_result(self) -> tuple[Optional[str], Optional[bytes], int]:
        """``(path, None, size)`` for a file, ``(None, bytes, size)`` inline."""
        if self.closed:
            raise IllegalStateError("checkpoint stream already closed")
        self.closed = True
        if self._file is None:
            data, self._buffer = bytes(self._buffer), bytearray()
            return None, data, len(data)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        directory, temp_name = os.path.split(self.temp_path)
        final = os.path.join(directory, temp_name[1:-len(".tmp")])
        os.replace(self.temp_path, final)
        _fsync_directory(directory)
        self.temp_path = None
        return final, None, self._pos

    def discard(self) -> None:
        """Drop everything written; deletes the temporary file (idempotent)."""
        self.closed = True
        self._buffer = bytearray()
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.temp_path is not None:
            try:
                os.unlink(self.temp_path)
            except FileNotFoundError:
                pass
            self.temp_path = None


def _fsync_directory(directory: str) -> None:
    """Make a rename durable (POSIX); platforms without directory fds skip it."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: str, data: bytes) -> None:
    directory, name = os.path.split(os.path.abspath(path))
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    _fsync_directory(directory)


# --------------------------------------------------------------------- handles


def _offsets(value) -> tuple:
    return tuple((int(g), int(o)) for g, o in value)


@attrs.frozen
class CheckpointHandle:
    """Where a completed checkpoint is (Flink ``KeyGroupsStateHandle``): the
    stream offset of every key group, the data file ``path`` *or* the
    ``inline`` bytes, the ``size`` and the whole-file ``checksum`` (crc32).
    ``origin`` is the handle file it was loaded from (for messages only).

    On disk a handle is a small JSON file, by convention next to its data
    file (``chk-7-<hex>.cwck`` -> ``chk-7-<hex>.handle.json``); inline bytes
    are stored in it as base64. See docs/checkpoint-format.md.
    """

    checkpoint_id: int
    key_group_range: KeyGroupRange
    max_parallelism: int
    offsets: tuple = attrs.field(converter=_offsets)
    size: int
    checksum: int
    path: Optional[str] = None
    inline: Optional[bytes] = attrs.field(default=None, repr=False)
    origin: Optional[str] = attrs.field(default=None, eq=False, repr=False)

    @property
    def storage(self) -> str:
        return "inline" if self.path is None else "file"

    @property
    def source_name(self) -> str:
        """How error messages name the data: the file, or the handle holding it inline."""
        if self.path is not None:
            return self.path
        if self.origin is not None:
            return f"{self.origin} (inline data)"
        return f"<inline checkpoint {self.checkpoint_id} {self.key_group_range}>"

    def offset_of(self, group: int) -> int:
        for g, offset in self.offsets:
            if g == group:
                return offset
        raise KeyError(f"key group {group} is not in this handle (range {self.key_group_range})")

    def intersection(self, key_group_range: KeyGroupRange) -> "CheckpointHandle":
        """The part of this handle a subtask owning ``key_group_range`` reads (Flink ``getIntersection``)."""
        part = self.key_group_range.intersection(key_group_range)
        return attrs.evolve(self, key_group_range=part, offsets=[(g, o) for g, o in self.offsets if g in part])

    def read_bytes(self) -> bytes:
        if self.path is None:
            if self.inline is None:
                raise CheckpointFormatError(self.source_name, 0, "the handle has neither a path nor inline data")
            return self.inline
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise CheckpointFormatError(self.path, 0, f"cannot read: {exc.strerror or exc}") from None

    # ----------------------------------------------------------- JSON

    def to_json(self, relative_to: Optional[str] = None) -> dict:
        path = self.path
        if path is not None and relative_to is not None and \
                os.path.dirname(os.path.abspath(path)) == os.path.abspath(relative_to):
            path = os.path.basename(path)
        return {
            "format": HANDLE_FORMAT,
            "version": FORMAT_VERSION,
            "checkpoint_id": self.checkpoint_id,
            "max_parallelism": self.max_parallelism,
            "key_group_range": [self.key_group_range.start, self.key_group_range.end],
            "offsets": [list(p) for p in self.offsets],
            "size": self.size,
            _CHECKSUM: f"{self.checksum:08x}",
            "path": path,
            "inline": None if self.inline is None else base64.b64encode(self.inline).decode("ascii"),
        }

    def save(self, path: Optional[str] = None) -> str:
        """Write the handle as JSON (atomically); by default next to its data file."""
        if path is None:
            if self.path is None:
                raise ValueError("an inline handle has no data file to sit next to: give save() a path")
            path = self.path[: -len(DATA_SUFFIX)] + HANDLE_SUFFIX if self.path.endswith(DATA_SUFFIX) \
                else self.path + HANDLE_SUFFIX
        doc = self.to_json(relative_to=os.path.dirname(os.path.abspath(path)))
        _atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
        return path

    @classmethod
    def load(cls, path: str) -> "CheckpointHandle":
        """Read a handle file; CheckpointFormatError (file, offset, problem) if it is not one."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise CheckpointFormatError(path, 0, f"cannot read: {exc.strerror or exc}") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CheckpointFormatError(path, exc.start, "not a handle file (not UTF-8 JSON)") from None
        except json.JSONDecodeError as exc:
            raise CheckpointFormatError(path, exc.pos, f"not a handle file (bad JSON: {exc.msg})") from None
        return cls.from_json(doc, path)

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> "CheckpointHandle":
        if not isinstance(doc, dict) or doc.get("format") != HANDLE_FORMAT:
            raise CheckpointFormatError(origin, 0, f"not a handle file (no \"format\": \"{HANDLE_FORMAT}\")")
        if doc.get("version") != FORMAT_VERSION:
            raise CheckpointFormatError(origin, 0, f"unsupported handle version {doc.get('version')!r}")
        try:
            path = doc["path"]
            if path is not None and not os.path.isabs(path):
                path = os.path.join(os.path.dirname(os.path.abspath(origin)), path)
            inline = doc["inline"]
            return cls(
                checkpoint_id=_json_int(doc["checkpoint_id"]),
                key_group_range=KeyGroupRange(*(_json_int(x) for x in doc["key_group_range"])),
                max_parallelism=_json_int(doc["max_parallelism"]),
                offsets=[(_json_int(g), _json_int(o)) for g, o in doc["offsets"]],
                size=_json_int(doc["size"]),
                checksum=int(doc[_CHECKSUM], 16),
                path=path,
                inline=None if inline is None else base64.b64decode(inline, validate=True),
                origin=origin,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointFormatError(origin, 0, f"malformed handle: {type(exc).__name__}: {exc}") from None


def _json_int(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _load_handle_or_file(path: str) -> CheckpointHandle | "_CheckpointData":
    """A handle file as a CheckpointHandle, or a data file as its parsed data."""
    try:
        with open(path, "rb") as f:
            start = f.read(len(MAGIC))
    except OSError as exc:
        raise CheckpointFormatError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    if start == MAGIC:
        with open(path, "rb") as f:
            return _CheckpointData(f.read(), path)
    return CheckpointHandle.load(path)


# --------------------------------------------------------------------- writing


class PendingCheckpoint:
    """A checkpoint whose synchronous part is done: it owns one snapshot per
    registered table and writes them on ``advance()`` / ``complete()``.

    ``status`` is ``running`` until ``complete()`` (``completed``, ``handle``
    set), ``cancel()`` (``cancelled``) or an exception while writing
    (``failed``, ``error`` set, the exception re-raised). Leaving ``running``
    any way releases every map snapshot; cancel and failure also delete the
    partial file.
    """

    RUNNING, COMPLETED, FAILED, CANCELLED = "running", "completed", "failed", "cancelled"

    def __init__(self, backend: "HeapKeyedStateBackend", checkpoint_id: int,
                 stream_factory: CheckpointStreamFactory) -> None:
        self.checkpoint_id = checkpoint_id
        self.key_group_range = backend.key_group_range
        self.max_parallelism = backend.max_parallelism
        self.key_serializer = backend.key_serializer
        self.states: tuple[RegisteredState, ...] = tuple(backend.registered_states())
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

    @property
    def remaining_key_groups(self) -> list[int]:
        return self._key_groups[self._next:]

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
        self._write(block + _U32.pack(zlib.crc32(block)))

    def _encode_key_group(self, group: int) -> bytes:
        out = io.BytesIO()
        out.write(_I32.pack(group))
        for state_id, state in enumerate(self.states):
            out.write(_I16.pack(state_id))
            self._write_state_in_key_group(state, self.table_snapshots[state.name], group, out)
        return out.getvalue()

    def _write_state_in_key_group(self, state: RegisteredState, snapshot: CopyOnWriteStateTableSnapshot,
                                  group: int, out) -> None:
        snapshot.write_key_group(out, group, self.key_serializer, state.namespace_serializer,
                                 state.state_serializer)

    def _finish(self) -> CheckpointHandle:
        index_offset = self.stream.tell()
        index = bytearray(INDEX_MAGIC + _U32.pack(len(self.offsets)))
        for entry in self.offsets:
            index += _INDEX_ENTRY.pack(*entry)
        self._write(bytes(index) + _I64.pack(index_offset))
        checksum = self._crc
        self.stream.write(_U32.pack(checksum) + END_MAGIC)
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


class HeapKeyedStateBackend:
    """Named states over one key-group range, checkpointed together (Flink
    ``HeapKeyedStateBackend``). One key serializer for all states; each state
    has its namespace and state serializers, recorded by id in checkpoints.

    ``pending_class`` builds the pending checkpoints (a seam for seeded bugs).
    """

    pending_class = PendingCheckpoint

    def __init__(self, key_group_range: Optional[KeyGroupRange] = None,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, key_serializer=None,
                 capacity: int = DEFAULT_CAPACITY, stream_factory: Optional[CheckpointStreamFactory] = None) -> None:
        # A throwaway table validates the range and max_parallelism with the table's own messages.
        probe = CopyOnWriteStateTable(key_group_range, max_parallelism, capacity=capacity)
        self.key_group_range = probe.key_group_range
        self.max_parallelism = max_parallelism
        self.key_serializer = key_serializer if key_serializer is not None else IntSerializer()
        self.capacity = capacity
        self.stream_factory = stream_factory if stream_factory is not None else CheckpointStreamFactory()
        self._states: dict[str, RegisteredState] = {}

    # ------------------------------------------------------- states

    def register_state(self, name: str, namespace_serializer, state_serializer, *,
                       state_copier: Optional[Callable[[Any], Any]] = None) -> CopyOnWriteStateTable:
        """A new empty table for ``name``; ``state_copier`` defaults to
        ``state_serializer.copy`` (Flink copies through the serializer)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        if name in self._states:
            raise ValueError(f"state {name!r} is already registered")
        if len(self._states) >= 0x7FFF:
            raise ValueError("at most 32767 states per backend (state ids are int16)")
        copier = state_copier if state_copier is not None else state_serializer.copy
        table = CopyOnWriteStateTable(self.key_group_range, self.max_parallelism, capacity=self.capacity,
                                      state_copier=copier)
        self._states[name] = RegisteredState(name, namespace_serializer, state_serializer, table)
        return table

    def state(self, name: str) -> CopyOnWriteStateTable:
        return self.registered_state(name).table

    def registered_state(self, name: str) -> RegisteredState:
        try:
            return self._states[name]
        except KeyError:
            raise KeyError(f"no state {name!r}; registered: {sorted(self._states)}") from None

    def registered_states(self) -> list[RegisteredState]:
        """In registration order, which is state-id order in checkpoints."""
        return list(self._states.values())

    @property
    def state_names(self) -> list[str]:
        return list(self._states)

    # ------------------------------------------------------- checkpoints

    def checkpoint(self, checkpoint_id: int,
                   stream_factory: Optional[CheckpointStreamFactory] = None) -> PendingCheckpoint:
        """The synchronous part of checkpoint ``checkpoint_id``; advance or complete the result."""
        if not isinstance(checkpoint_id, int) or not 0 <= checkpoint_id < 1 << 63:
            raise ValueError(f"checkpoint_id must be an int in [0, 2**63), got {checkpoint_id!r}")
        return self.pending_class(self, checkpoint_id, stream_factory or self.stream_factory)

    @classmethod
    def restore(cls, handles: Iterable[CheckpointHandle], key_group_range: Optional[KeyGroupRange] = None, *,
                capacity: int = DEFAULT_CAPACITY,
                stream_factory: Optional[CheckpointStreamFactory] = None) -> "HeapKeyedStateBackend":
        """A fresh backend for ``key_group_range`` (default: the handles' ranges
        joined) holding the checkpointed state of those key groups: one handle,
        a part of one (scale out) or several merged (scale in). All or
        nothing: on any error nothing is returned and no table escapes."""
        handles = list(handles)
        if not handles:
            raise ValueError("restore needs at least one handle")
        datas = [_CheckpointData(h.read_bytes(), h.source_name, h) for h in handles]
        first = datas[0]
        for data in datas[1:]:
            data.check_compatible(first)
        if key_group_range is None:
            key_group_range = _joined_range(handles)
        owner = _assign_key_groups(handles, key_group_range, cls._restore_range)
        meta = first.metadata
        backend = cls(key_group_range, meta.max_parallelism, key_serializer=first.key_serializer,
                      capacity=capacity, stream_factory=stream_factory)
        for state, (ns_ser, st_ser) in zip(meta.states, first.serializers):
            backend.register_state(state.name, ns_ser, st_ser)
        tables = [backend.state(s.name) for s in meta.states]
        for group in key_group_range:
            datas[owner[group]].load_key_group(group, tables)
        return backend

    @staticmethod
    def _restore_range(handle_range: KeyGroupRange, target: KeyGroupRange) -> KeyGroupRange:
        """The key groups of a handle that a restore into ``target`` reads."""
        return handle_range.intersection(target)

    def __repr__(self) -> str:
        return (f"HeapKeyedStateBackend(key_group_range={self.key_group_range}, "
                f"max_parallelism={self.max_parallelism}, states={self.state_names})")


def _joined_range(handles: list[CheckpointHandle]) -> KeyGroupRange:
    ranges = sorted((h.key_group_range for h in handles if not h.key_group_range.is_empty()),
                    key=lambda r: r.start)
    if not ranges:
        raise ValueError("the handles hold no key groups")
    start, end = ranges[0].start, ranges[0].end
    for r in ranges[1:]:
        if r.start > end + 1:
            raise ValueError(f"the handles' key-group ranges leave a gap ({end + 1}..{r.start - 1}); "
                             f"give restore() a key_group_range")
        end = max(end, r.end)
    return KeyGroupRange(start, end)


def _assign_key_groups(handles, target: KeyGroupRange, restore_range) -> dict[int, int]:
    """Key group -> index of the one handle it is read from."""
    owner: dict[int, int] = {}
    for i, handle in enumerate(handles):
        for group in restore_range(handle.key_group_range, target):
            if group in owner:
                raise ValueError(f"key group {group} is in two handles: {handles[owner[group]].source_name} "
                                 f"and {handle.source_name}")
            owner[group] = i
    missing = [g for g in target if g not in owner]
    if missing:
        raise ValueError(f"key groups {_spans(missing)} of the restore range {target} are in none of the "
                         f"handles (ranges: {', '.join(str(h.key_group_range) for h in handles)})")
    return owner


def _spans(groups: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``'1..3, 7'``."""
    spans = []
    start = prev = groups[0]
    for group in groups[1:] + [None]:
        if group != prev + 1:
            spans.append(str(start) if start == prev else f"{start}..{prev}")
            start = group
        prev = group
    return ", ".join(spans)


# --------------------------------------------------------------------- reading


class _Cursor:
    """Bounded big-endian reads over ``data[pos:end]`` with format errors on overrun."""

    __slots__ = ("data", "pos", "end", "name", "what")

    def __init__(self, data: bytes, pos: int, end: int, name: str, what: str) -> None:
        self.data, self.pos, self.end, self.name, self.what = data, pos, end, name, what

    def take(self, st: struct.Struct):
        if self.pos + st.size > self.end:
            raise CheckpointFormatError(self.name, self.pos, f"{self.what} ends early")
        value = st.unpack_from(self.data, self.pos)[0]
        self.pos += st.size
        return value

    def utf(self) -> str:
        at = self.pos
        size = self.take(_U16)
        if self.pos + size > self.end:
            raise CheckpointFormatError(self.name, at, f"{self.what} ends early (a string of {size} bytes)")
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointFormatError(self.name, at, f"{self.what}: string is not UTF-8") from None


class _CheckpointData:
    """The bytes of one checkpoint, checked on construction: header,
    metadata and its checksum, serializer ids, trailer, whole-file checksum,
    key-group index, and agreement with ``handle`` if given. Key groups are
    decoded on demand (``load_key_group``, ``key_group_entries``)."""

    def __init__(self, data: bytes, name: str, handle: Optional[CheckpointHandle] = None) -> None:
        self.data = data
        self.name = name
        self.handle = handle
        n = len(data)
        if handle is not None and handle.size != n:
            if n < handle.size:
                self._fail(n, f"truncated: the handle records {handle.size} bytes, found {n}")
            self._fail(handle.size, f"{n - handle.size} bytes beyond the {handle.size} the handle records")
        if data[:len(MAGIC)] != MAGIC:
            self._fail(0, f"not a cowcheck checkpoint (starts with {bytes(data[:4])!r}, expected {MAGIC!r})")
        if n < _HEADER_SIZE:
            self._fail(n, "truncated inside the header")
        version = _U16.unpack_from(data, 4)[0]
        if version != FORMAT_VERSION:
            self._fail(4, f"unsupported format version {version} (this reader knows {FORMAT_VERSION})")
        meta_end = _HEADER_SIZE + _U32.unpack_from(data, 6)[0]
        if meta_end + 4 > n:
            self._fail(n, f"truncated: the metadata ends at offset {meta_end + 4}, past the end of the file")
        stored, computed = _U32.unpack_from(data, meta_end)[0], zlib.crc32(data[:meta_end])
        if stored != computed:
            self._fail(meta_end, f"metadata checksum mismatch over bytes 0..{meta_end - 1} "
                                 f"(stored {stored:08x}, computed {computed:08x})")
        self.metadata, self.key_serializer, self.serializers = self._parse_metadata(meta_end)
        self.blocks_start = meta_end + 4
        self._check_trailer()
        self.extents = self._parse_index()
        if handle is not None:
            self._check_handle(handle)

    def _fail(self, offset: int, problem: str):
        raise CheckpointFormatError(self.name, offset, problem)

    # ----------------------------------------------------------- structure

    def _parse_metadata(self, meta_end: int):
        cur = _Cursor(self.data, _HEADER_SIZE, meta_end, self.name, "metadata")
        checkpoint_id = cur.take(_I64)
        at = cur.pos
        max_parallelism, start, end = cur.take(_I32), cur.take(_I32), cur.take(_I32)
        if not 1 <= max_parallelism <= 1 << 15 or not 0 <= start <= end < max_parallelism:
            self._fail(at, f"bad key groups: range [{start}, {end}] with max_parallelism {max_parallelism}")
        key_serializer = self._serializer(cur, "the key serializer")
        states, serializers = [], []
        for _ in range(cur.take(_U16)):
            name = cur.utf()
            ns_ser = self._serializer(cur, f"the namespace serializer of state {name!r}")
            st_ser = self._serializer(cur, f"the state serializer of state {name!r}")
            states.append(StateMetadata(name, ns_ser.serializer_id, st_ser.serializer_id))
            serializers.append((ns_ser, st_ser))
        if cur.pos != meta_end:
            self._fail(cur.pos, f"{meta_end - cur.pos} unexpected bytes at the end of the metadata")
        if len({s.name for s in states}) != len(states):
            self._fail(_HEADER_SIZE, "a state name appears twice in the metadata")
        meta = CheckpointMetadata(checkpoint_id, max_parallelism, KeyGroupRange(start, end),
                                  key_serializer.serializer_id, states)
        return meta, key_serializer, serializers

    def _serializer(self, cur: _Cursor, what: str):
        at = cur.pos
        sid = cur.utf()
        try:
            return serializer_from_id(sid)
        except UnknownSerializerError as exc:
            self._fail(at, f"{what}: {exc}")

    def _check_trailer(self) -> None:
        data, n = self.data, len(self.data)
        if n < self.blocks_start + len(INDEX_MAGIC) + 4 + _TRAILER_SIZE:
            self._fail(n, "truncated: no room for the key-group index and trailer")
        if data[n - 4:] != END_MAGIC:
            self._fail(n - 4, "no end marker: the file is truncated or was never finished")
        stored, computed = _U32.unpack_from(data, n - 8)[0], zlib.crc32(data[: n - 8])
        if self.handle is not None and self.handle.checksum != stored:
            self._fail(n - 8, f"file checksum {stored:08x} differs from the handle's {self.handle.checksum:08x}")
        if stored != computed:
            self._locate_corruption(stored, computed)

    def _locate_corruption(self, stored: int, computed: int):
        """The whole-file checksum failed: name the first damaged key group if the index allows."""
        n = len(self.data)
        try:
            extents = self._parse_index()
        except CheckpointFormatError as damaged:
            self._fail(damaged.offset, f"file checksum mismatch (stored {stored:08x}, computed {computed:08x}); "
                                       f"{damaged.problem}")
        for group, (start, end) in extents.items():
            self._check_block(group, start, end)
        index_offset = _I64.unpack_from(self.data, n - _TRAILER_SIZE)[0]
        self._fail(index_offset, f"file checksum mismatch in the key-group index or trailer "
                                 f"(stored {stored:08x}, computed {computed:08x})")

    def _parse_index(self) -> dict[int, tuple[int, int]]:
        """Key group -> (start, end) of its block including the block checksum."""
        data, n = self.data, len(self.data)
        index_end = n - _TRAILER_SIZE
        index_offset = _I64.unpack_from(data, index_end)[0]
        if not self.blocks_start <= index_offset <= index_end - 8:
            self._fail(index_end, f"index offset {index_offset} is outside [{self.blocks_start}, {index_end - 8}]")
        if data[index_offset:index_offset + 4] != INDEX_MAGIC:
            self._fail(index_offset, "no key-group index at the offset the trailer records")
        count = _U32.unpack_from(data, index_offset + 4)[0]
        groups = list(self.metadata.key_group_range)
        if count != len(groups) or index_offset + 8 + count * _INDEX_ENTRY.size != index_end:
            self._fail(index_offset + 4, f"the index lists {count} key groups, the metadata range "
                                         f"{self.metadata.key_group_range} has {len(groups)}")
        entries = [_INDEX_ENTRY.unpack_from(data, index_offset + 8 + i * _INDEX_ENTRY.size) for i in range(count)]
        extents = {}
        previous = self.blocks_start
        for i, (group, offset) in enumerate(entries):
            at = index_offset + 8 + i * _INDEX_ENTRY.size
            if group != groups[i]:
                self._fail(at, f"index entry {i} is for key group {group}, expected {groups[i]}")
            if offset != previous:
                self._fail(at, f"index places key group {group} at offset {offset}, but the previous block "
                               f"ends at {previous}")
            end = entries[i + 1][1] if i + 1 < count else index_offset
            if not offset + 8 <= end <= index_offset:
                self._fail(at, f"index gives key group {group} the impossible extent [{offset}, {end})")
            extents[group] = (offset, end)
            previous = end
        return extents

    def _check_handle(self, handle: CheckpointHandle) -> None:
        meta = self.metadata
        if (handle.checkpoint_id, handle.max_parallelism) != (meta.checkpoint_id, meta.max_parallelism):
            self._fail(_HEADER_SIZE, f"the handle is for checkpoint {handle.checkpoint_id} with max_parallelism "
                                     f"{handle.max_parallelism}, the file for checkpoint {meta.checkpoint_id} "
                                     f"with max_parallelism {meta.max_parallelism}")
        part = handle.key_group_range
        if not part.is_empty() and part.intersection(meta.key_group_range) != part:
            self._fail(_HEADER_SIZE + 12, f"the handle's key groups {part} are not all in the file's "
                                          f"{meta.key_group_range}")
        listed = [g for g, _ in handle.offsets]
        if listed != list(part):
            self._fail(0, f"the handle's offsets cover key groups {listed[:8]}, its range is {part}")
        for group, offset in handle.offsets:
            if offset != self.extents[group][0]:
                self._fail(offset, f"the handle places key group {group} at offset {offset}, the file's index "
                                   f"at {self.extents[group][0]}")

    def check_compatible(self, other: "_CheckpointData") -> None:
        """Several handles restored together must describe the same states."""
        mine, theirs = self.metadata, other.metadata
        if mine.max_parallelism != theirs.max_parallelism:
            self._fail(_HEADER_SIZE + 8, f"max_parallelism {mine.max_parallelism} differs from "
                                         f"{theirs.max_parallelism} in {other.name}")
        if (mine.key_serializer_id, mine.states) != (theirs.key_serializer_id, theirs.states):
            self._fail(_HEADER_SIZE, f"states or serializers differ from those in {other.name}")

    # ----------------------------------------------------------- key groups

    def _check_block(self, group: int, start: int, end: int) -> None:
        stored = _U32.unpack_from(self.data, end - 4)[0]
        computed = zlib.crc32(self.data[start:end - 4])
        if stored != computed:
            self._fail(start, f"checksum mismatch in key group {group} (stored {stored:08x}, "
                              f"computed {computed:08x})")

    def key_group_entries(self, group: int) -> list[list[tuple]]:
        """Per state (in state-id order), the ``(key, namespace, state)`` entries of ``group``."""
        start, end = self.extents[group]
        self._check_block(group, start, end)
        inp = io.BytesIO(self.data[start:end - 4])
        written = _I32.unpack(inp.read(4))[0]
        if written != group:
            self._fail(start, f"expected key group {group}, found {written}")
        result = []
        mp = self.metadata.max_parallelism
        for state_id, (state, (ns_ser, st_ser)) in enumerate(zip(self.metadata.states, self.serializers)):
            entries = []
            at = start + inp.tell()
            header = inp.read(6)
            if len(header) != 6:
                self._fail(at, f"key group {group} ends before state {state.name!r}")
            found_id, count = _I16.unpack_from(header)[0], _I32.unpack_from(header, 2)[0]
            if found_id != state_id:
                self._fail(at, f"expected state id {state_id} ({state.name!r}) in key group {group}, "
                               f"found {found_id}")
            if count < 0:
                self._fail(at + 2, f"negative entry count {count} for state {state.name!r}")
            for i in range(count):
                at = start + inp.tell()
                try:
                    namespace = ns_ser.deserialize(inp)
                    key = self.key_serializer.deserialize(inp)
                    value = st_ser.deserialize(inp)
                except (SerializationError, struct.error, UnicodeDecodeError, ValueError) as exc:
                    self._fail(at, f"state {state.name!r}, key group {group}, entry {i}: {exc}")
                if key_group(key, mp) != group:
                    self._fail(at, f"state {state.name!r}: key {key!r} belongs to key group "
                                   f"{key_group(key, mp)}, found in key group {group}")
                entries.append((key, namespace, value))
            result.append(entries)
        left = end - 4 - start - inp.tell()
        if left:
            self._fail(start + inp.tell(), f"{left} unexpected bytes at the end of key group {group}")
        return result

    def load_key_group(self, group: int, tables: list[CopyOnWriteStateTable]) -> None:
        for state, table, entries in zip(self.metadata.states, tables, self.key_group_entries(group)):
            target = table.map_for_key_group(group)
            before = len(target)
            for key, namespace, value in entries:
                target.put(key, namespace, value)
            if len(target) - before != len(entries):
                self._fail(self.extents[group][0], f"state {state.name!r}: key group {group} holds the same "
                                                   f"(key, namespace) twice")


# --------------------------------------------------------------------- inspect


@attrs.frozen
class KeyGroupInfo:
    key_group: int
    offset: int
    length: int  # bytes, including the block checksum
    entries: tuple[int, ...]  # per state, in state-id order


@attrs.frozen
class CheckpointInfo:
    """What ``cowcheck checkpoint inspect`` prints; every byte was checked."""

    source: str
    handle_path: Optional[str]
    storage: str  # "file" or "inline"
    data_path: Optional[str]
    size: int
    checksum: int
    metadata: CheckpointMetadata
    key_groups: tuple[KeyGroupInfo, ...]


def inspect_checkpoint(source) -> CheckpointInfo:
    """Read and fully check a checkpoint given as a handle, a handle file or a
    data file; CheckpointFormatError (file, offset, problem) if anything is off."""
    if isinstance(source, CheckpointHandle):
        handle, data = source, _CheckpointData(source.read_bytes(), source.source_name, source)
    else:
        loaded = _load_handle_or_file(os.fspath(source))
        if isinstance(loaded, CheckpointHandle):
            handle, data = loaded, _CheckpointData(loaded.read_bytes(), loaded.source_name, loaded)
        else:
            handle, data = None, loaded
    groups = [g for g, _ in handle.offsets] if handle is not None else list(data.metadata.key_group_range)
    infos = []
    for group in groups:
        start, end = data.extents[group]
        infos.append(KeyGroupInfo(group, start, end - start, tuple(len(e) for e in data.key_group_entries(group))))
    checksum = _U32.unpack_from(data.data, len(data.data) - 8)[0]
    storage = "file" if handle is None or handle.path is not None else "inline"
    data_path = data.name if storage == "file" else None
    return CheckpointInfo(data.name if handle is None else (handle.origin or handle.source_name),
                          None if handle is None else handle.origin, storage, data_path, len(data.data), checksum,
                          data.metadata, tuple(infos))
