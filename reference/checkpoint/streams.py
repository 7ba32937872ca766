"""Where checkpoint bytes go (Flink ``FsCheckpointStreamFactory`` / ``FsCheckpointStateOutputStream``).

Small checkpoints stay in memory and travel inline in their handle; larger
ones spill to a file written under a temporary name and renamed into place
only after fsync, so a reader never sees a partial checkpoint file.
"""

from __future__ import annotations

import io
import os
import uuid
from typing import Optional

import attrs

from cowcheck.reference.checkpoint.format import DATA_SUFFIX, DEFAULT_MEMORY_THRESHOLD, MAX_MEMORY_THRESHOLD
from cowcheck.reference.errors import IllegalStateError

__all__ = ["CheckpointStreamFactory", "CheckpointOutputStream", "ByteStreamInput", "fsync_directory", "atomic_write"]


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

    def create_stream(self, checkpoint_id: int, suffix: str = DATA_SUFFIX) -> "CheckpointOutputStream":
        """A stream for checkpoint ``checkpoint_id``; a spilled one ends in ``chk-<id>-<16 hex><suffix>``."""
        return CheckpointOutputStream(self.directory, self.threshold, checkpoint_id, suffix)


class CheckpointOutputStream:
    """Bytes of one checkpoint: a buffer until they exceed ``threshold``, then
    a temporary file in ``directory`` that ``close_and_get_result()`` fsyncs
    and renames into place; ``discard()`` deletes it. Flink spills when its
    write buffer (max(4 KB, threshold)) fills; either way a stream of at most
    ``threshold`` bytes ends inline and a larger one in a file."""

    __slots__ = ("directory", "threshold", "checkpoint_id", "suffix", "_buffer", "_file", "temp_path", "_pos",
                 "closed")

    def __init__(self, directory: Optional[str], threshold: int, checkpoint_id: int,
                 suffix: str = DATA_SUFFIX) -> None:
        self.directory = directory
        self.threshold = threshold
        self.checkpoint_id = checkpoint_id
        self.suffix = suffix
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
        name = f"chk-{self.checkpoint_id}-{uuid.uuid4().hex[:16]}{self.suffix}"
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
        fsync_directory(directory)
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


class ByteStreamInput(io.BytesIO):
    """Bytes a restore reads (Flink's ``ByteStateHandleInputStream`` over a handle's bytes, or a
    ``DataInputDeserializer`` over a byte array), with Java's ``InputStream.read(b, off, len)`` as
    ``java_read``. ``at_stream_end``: whether the end of these bytes is the end of the stream
    (a key group's bytes sliced out of a checkpoint end where the next group begins)."""

    def __init__(self, data: bytes = b"", at_stream_end: bool = True) -> None:
        super().__init__(data)
        self.at_stream_end = at_stream_end

    def java_read(self, n: int) -> Optional[bytes]:
        """At most ``n`` bytes: ``b""`` when ``n`` is 0 ("if len is zero, then no bytes are read and
        0 is returned"), None (-1) at the end when ``n`` is not."""
        if n == 0:
            return b""
        data = self.read(n)
        return data if data else None


def fsync_directory(directory: str) -> None:
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


def atomic_write(path: str, data: bytes) -> None:
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
    fsync_directory(directory)
