"""What a checkpoint holds, checking every byte (``cowcheck checkpoint inspect``)."""

from __future__ import annotations

import os
from typing import Optional

import attrs

from reference.checkpoint.format import U32, CheckpointMetadata
from reference.checkpoint.handle import CheckpointHandle
from reference.checkpoint.restore import CheckpointData, load_handle_or_file

__all__ = ["KeyGroupInfo", "CheckpointInfo", "inspect_checkpoint"]


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


def inspect_checkpoint(source, read=None) -> CheckpointInfo:
    """Read and fully check a checkpoint given as a handle, a handle file or a
    data file, with every check restore runs when reading it; CheckpointFormatError
    (file, offset, problem) if anything is off. ``read(path, limit)`` reads at most
    ``limit`` bytes of a file (default: a plain bounded read; the command line
    passes its own, which reads regular files only)."""
    if isinstance(source, CheckpointHandle):
        handle, data = source, CheckpointData(source.read_bytes(read), source.source_name, source)
    else:
        loaded = load_handle_or_file(os.fspath(source), read)
        if isinstance(loaded, CheckpointHandle):
            handle, data = loaded, CheckpointData(loaded.read_bytes(read), loaded.source_name, loaded)
        else:
            handle, data = None, loaded
    groups = [g for g, _ in handle.offsets] if handle is not None else list(data.metadata.key_group_range)
    infos = []
    for group in groups:
        start, end = data.extents[group]
        infos.append(KeyGroupInfo(group, start, end - start, tuple(len(e) for e in data.key_group_entries(group))))
    checksum = U32.unpack_from(data.data, len(data.data) - 8)[0]
    storage = "file" if handle is None or handle.path is not None else "inline"
    data_path = data.name if storage == "file" else None
    return CheckpointInfo(data.name if handle is None else (handle.origin or handle.source_name),
                          None if handle is None else handle.origin, storage, data_path, len(data.data), checksum,
                          data.metadata, tuple(infos))
