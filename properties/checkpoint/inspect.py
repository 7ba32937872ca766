"""What a checkpoint holds, checking every byte (``cowcheck checkpoint inspect``).

Both formats the reference writes are read, each recognised by its content,
never by a file name: the project's own (docs/checkpoint-format.md: a data
file starts with its magic, a handle file is JSON with ``"format":
"cowcheck-checkpoint-handle"``) and Flink's (a data file starts as
``KeyedBackendSerializationProxy`` does, with its version 6; a handle file is
JSON with ``"format": "flink-key-groups-state-handle"``).
"""

from __future__ import annotations

import os
from typing import Optional, Union

import attrs

from cowcheck.reference.checkpoint.flink_format import (FLINK_HANDLE_FORMAT, FlinkCheckpointData, KeyGroupsStateHandle,
                                               SerializationProxy, looks_like_flink_checkpoint)
from cowcheck.reference.checkpoint.format import HANDLE_FORMAT, MAGIC, U32, CheckpointMetadata
from cowcheck.reference.checkpoint.handle import MAX_HANDLE_BYTES, CheckpointHandle, parse_handle_json, read_file
from cowcheck.reference.checkpoint.restore import MAX_DATA_BYTES, CheckpointData
from cowcheck.reference.errors import CheckpointFormatError

__all__ = ["KeyGroupInfo", "CheckpointInfo", "FlinkCheckpointInfo", "inspect_checkpoint", "load_handle_or_file"]


@attrs.frozen
class KeyGroupInfo:
    key_group: int
    offset: int
    length: int  # bytes, including the block checksum (the project's format)
    entries: tuple[int, ...]  # per state, in state-id order


@attrs.frozen
class CheckpointInfo:
    """What ``cowcheck checkpoint inspect`` prints of a checkpoint in the project's format; every byte was
    checked."""

    source: str
    handle_path: Optional[str]
    storage: str  # "file" or "inline"
    data_path: Optional[str]
    size: int
    checksum: int
    metadata: CheckpointMetadata
    key_groups: tuple[KeyGroupInfo, ...]


@attrs.frozen
class FlinkCheckpointInfo:
    """What ``cowcheck checkpoint inspect`` prints of a checkpoint in Flink's format; every byte was
    checked (keys against their key groups only when ``max_parallelism`` is known: Flink's format does
    not record it, a handle written by the reference does)."""

    source: str
    handle_path: Optional[str]
    storage: str
    data_path: Optional[str]
    size: int
    max_parallelism: Optional[int]
    proxy: SerializationProxy
    key_groups: tuple[KeyGroupInfo, ...]


_HANDLES = {HANDLE_FORMAT: CheckpointHandle, FLINK_HANDLE_FORMAT: KeyGroupsStateHandle}


def _size(path: str) -> int:
    """The size the file system gives ``path`` (0 if it gives none: the read then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _is_data(head: bytes) -> bool:
    return head[:len(MAGIC)] == MAGIC or looks_like_flink_checkpoint(head)


def load_handle_or_file(path: str, read=None):
    """A handle file as its handle (CheckpointHandle or KeyGroupsStateHandle), or a data file as its
    parsed data (CheckpointData or FlinkCheckpointData, at most MAX_DATA_BYTES), recognised by content.
    ``read(path, limit)``: at most ``limit`` bytes of a file, the first ones of a longer file (default:
    a plain bounded read)."""
    read = read or read_file
    raw = read(path, MAX_HANDLE_BYTES + 1)
    if _is_data(raw):
        if len(raw) > MAX_HANDLE_BYTES and _size(path) <= MAX_DATA_BYTES:  # a larger one is refused unread
            raw = read(path, MAX_DATA_BYTES + 1)
        if len(raw) > MAX_DATA_BYTES or _size(path) > MAX_DATA_BYTES:
            raise CheckpointFormatError(path, MAX_DATA_BYTES, f"larger than {MAX_DATA_BYTES} bytes, more than "
                                                              f"this reader reads without a handle")
        return CheckpointData(raw, path) if raw[:len(MAGIC)] == MAGIC else FlinkCheckpointData(raw, path)
    if len(raw) > MAX_HANDLE_BYTES:
        raise CheckpointFormatError(path, MAX_HANDLE_BYTES, f"not a handle file (larger than {MAX_HANDLE_BYTES} "
                                                            f"bytes)")
    doc = parse_handle_json(raw, path)
    kind = _HANDLES.get(doc.get("format")) if isinstance(doc, dict) else None
    if kind is None:
        raise CheckpointFormatError(path, 0, f"not a handle file (no \"format\": \"{HANDLE_FORMAT}\" or "
                                             f"\"{FLINK_HANDLE_FORMAT}\")")
    return kind.from_json(doc, path)


def _open(handle, read) -> Union[CheckpointData, FlinkCheckpointData]:
    if isinstance(handle, CheckpointHandle):
        return CheckpointData(handle.read_bytes(read), handle.source_name, handle)
    return FlinkCheckpointData(handle.read_bytes(read), handle.source_name, handle)


def inspect_checkpoint(source, read=None) -> Union[CheckpointInfo, FlinkCheckpointInfo]:
    """Read and fully check a checkpoint given as a handle, a handle file or a
    data file, in either format, with every check restore runs when reading it;
    CheckpointFormatError (file, offset, problem) if anything is off. ``read(path,
    limit)`` reads at most ``limit`` bytes of a file (default: a plain bounded read;
    the command line passes its own, which reads regular files only)."""
    if isinstance(source, (CheckpointHandle, KeyGroupsStateHandle)):
        handle = source
    else:
        loaded = load_handle_or_file(os.fspath(source), read)
        handle = loaded if isinstance(loaded, (CheckpointHandle, KeyGroupsStateHandle)) else None
        data = loaded
    if handle is not None:
        data = _open(handle, read)
    if handle is not None:
        groups = [g for g, _ in handle.offsets]
    else:
        groups = sorted(data.extents) if isinstance(data, FlinkCheckpointData) else list(data.metadata.key_group_range)
    infos = []
    for group in groups:
        start = data.extents[group][0]
        if isinstance(data, FlinkCheckpointData):  # Flink's offsets say where a key group starts only
            end, entries = data.read_key_group(group)
        else:
            end, entries = data.extents[group][1], data.key_group_entries(group)
        infos.append(KeyGroupInfo(group, start, end - start, tuple(len(e) for e in entries)))
    storage = "file" if handle is None or handle.path is not None else "inline"
    data_path = data.name if storage == "file" else None
    source_name = data.name if handle is None else (handle.origin or handle.source_name)
    handle_path = None if handle is None else handle.origin
    if isinstance(data, FlinkCheckpointData):
        return FlinkCheckpointInfo(source_name, handle_path, storage, data_path, len(data.data), data.max_parallelism,
                                   data.proxy, tuple(infos))
    checksum = U32.unpack_from(data.data, len(data.data) - 8)[0]
    return CheckpointInfo(source_name, handle_path, storage, data_path, len(data.data), checksum, data.metadata,
                          tuple(infos))

