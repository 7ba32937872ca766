"""Where a checkpoint in Flink's format is (Flink ``KeyGroupsStateHandle``), and its JSON handle file.

Flink's heap backend returns a ``KeyGroupsStateHandle``: a
``KeyGroupRangeOffsets`` (the key-group range and, per key group, the
offset of its bytes in the stream) over a stream handle, the bytes
themselves (``ByteStreamStateHandle``) or a file (``FileStateHandle``: its
path and size). The offsets live only in the handle, never in the stream.

On disk (``save``/``load``, what ``cowcheck checkpoint inspect`` reads) a
handle is a JSON file, ``"format": "flink-key-groups-state-handle"``, with
the range, the offsets, the size, the file's path or the bytes in base64,
and the job's max parallelism when the writer knew it (Flink's handle does
not record it; a reader needs it to check that every key is in its key
group).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Callable, Optional

import attrs

from reference.checkpoint.handle import MAX_HANDLE_BYTES, json_int, key_group_offsets, parse_handle_json, read_file
from reference.checkpoint.streams import atomic_write
from reference.errors import CheckpointFormatError
from reference.state_table import KeyGroupRange

__all__ = ["KeyGroupsStateHandle", "FLINK_HANDLE_FORMAT"]

FLINK_HANDLE_FORMAT = "flink-key-groups-state-handle"
_HANDLE_VERSION = 1


@attrs.frozen
class KeyGroupsStateHandle:
    """A checkpoint in Flink's format: ``offsets`` ((key group, offset) for every group of
    ``key_group_range``, in order), and the stream: ``inline`` bytes or the file at ``path``, of
    ``size`` bytes. ``max_parallelism``: the job's, if the writer recorded it (None: unknown).
    ``origin``: the handle file it was loaded from (messages only)."""

    key_group_range: KeyGroupRange
    offsets: tuple = attrs.field(converter=key_group_offsets)
    size: int
    path: Optional[str] = None
    inline: Optional[bytes] = attrs.field(default=None, repr=False)
    max_parallelism: Optional[int] = None
    origin: Optional[str] = attrs.field(default=None, eq=False, repr=False)

    @property
    def storage(self) -> str:
        return "inline" if self.path is None else "file"

    @property
    def source_name(self) -> str:
        if self.path is not None:
            return self.path
        if self.origin is not None:
            return f"{self.origin} (inline data)"
        return f"<inline Flink checkpoint {self.key_group_range}>"

    def intersection(self, key_group_range: KeyGroupRange) -> "KeyGroupsStateHandle":
        """The part a subtask owning ``key_group_range`` reads (Flink ``getIntersection``)."""
        part = self.key_group_range.intersection(key_group_range)
        return attrs.evolve(self, key_group_range=part, offsets=[(g, o) for g, o in self.offsets if g in part])

    def read_bytes(self, read: Optional[Callable[[str, int], bytes]] = None) -> bytes:
        """The stream's bytes, never more than one past ``size``."""
        if self.path is None:
            if self.inline is None:
                raise CheckpointFormatError(self.source_name, 0, "the handle has neither a path nor inline data")
            return self.inline
        return (read or read_file)(self.path, self.size + 1)

    # ----------------------------------------------------------- JSON

    def to_json(self, relative_to: Optional[str] = None) -> dict:
        path = self.path
        if path is not None and relative_to is not None and \
                os.path.dirname(os.path.abspath(path)) == os.path.abspath(relative_to):
            path = os.path.basename(path)
        return {
            "format": FLINK_HANDLE_FORMAT,
            "version": _HANDLE_VERSION,
            "key_group_range": [self.key_group_range.start, self.key_group_range.end],
            "offsets": [list(p) for p in self.offsets],
            "size": self.size,
            "max_parallelism": self.max_parallelism,
            "path": path,
            "inline": None if self.inline is None else base64.b64encode(self.inline).decode("ascii"),
        }

    def save(self, path: Optional[str] = None) -> str:
        """Write the handle as JSON (atomically); by default next to its file (``<file>.handle.json``)."""
        if path is None:
            if self.path is None:
                raise ValueError("an inline handle has no data file to sit next to: give save() a path")
            path = self.path + ".handle.json"
        doc = self.to_json(relative_to=os.path.dirname(os.path.abspath(path)))
        atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
        return path

    @classmethod
    def load(cls, path: str, read: Optional[Callable[[str, int], bytes]] = None) -> "KeyGroupsStateHandle":
        raw = (read or read_file)(path, MAX_HANDLE_BYTES + 1)
        if len(raw) > MAX_HANDLE_BYTES:
            raise CheckpointFormatError(path, MAX_HANDLE_BYTES, f"not a handle file (larger than {MAX_HANDLE_BYTES} "
                                                                f"bytes)")
        return cls.from_json(parse_handle_json(raw, path), path)

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> "KeyGroupsStateHandle":
        if not isinstance(doc, dict) or doc.get("format") != FLINK_HANDLE_FORMAT:
            raise CheckpointFormatError(origin, 0, f"not a handle file (no \"format\": \"{FLINK_HANDLE_FORMAT}\")")
        if doc.get("version") != _HANDLE_VERSION:
            raise CheckpointFormatError(origin, 0, f"unsupported handle version {doc.get('version')!r}")
        try:
            path = doc["path"]
            if path is not None and not os.path.isabs(path):
                path = os.path.join(os.path.dirname(os.path.abspath(origin)), path)
            inline = doc["inline"]
            mp = doc.get("max_parallelism")
            return cls(
                key_group_range=KeyGroupRange(*(json_int(x) for x in doc["key_group_range"])),
                offsets=[(json_int(g), json_int(o)) for g, o in doc["offsets"]],
                size=json_int(doc["size"]),
                path=path,
                inline=None if inline is None else base64.b64decode(inline, validate=True),
                max_parallelism=None if mp is None else json_int(mp),
                origin=origin,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointFormatError(origin, 0, f"malformed handle: {type(exc).__name__}: {exc}") from None

