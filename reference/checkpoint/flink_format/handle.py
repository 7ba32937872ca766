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

from typing import Any, Optional

import attrs

from cowcheck.reference.checkpoint.handle import StreamHandle, json_int, key_group_offsets
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["KeyGroupsStateHandle", "FLINK_HANDLE_FORMAT", "FLINK_SAVEPOINT_HANDLE_FORMAT"]

FLINK_HANDLE_FORMAT = "flink-key-groups-state-handle"
# A canonical savepoint's handle (Flink KeyGroupsSavepointStateHandle, savepoint.py).
FLINK_SAVEPOINT_HANDLE_FORMAT = "flink-key-groups-savepoint-state-handle"
_HANDLE_VERSION = 1


@attrs.frozen
class KeyGroupsStateHandle(StreamHandle):
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

    _FORMAT = FLINK_HANDLE_FORMAT
    _VERSION = _HANDLE_VERSION

    def _inline_name(self) -> str:
        return f"<inline Flink checkpoint {self.key_group_range}>"

    def _default_path(self) -> str:
        return self.path + ".handle.json"

    # ----------------------------------------------------------- JSON

    def to_json(self, relative_to: Optional[str] = None) -> dict:
        return {
            "format": self._FORMAT,
            "version": _HANDLE_VERSION,
            "key_group_range": [self.key_group_range.start, self.key_group_range.end],
            "offsets": [list(p) for p in self.offsets],
            "size": self.size,
            "max_parallelism": self.max_parallelism,
            **self._stream_json(relative_to),
        }

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> "KeyGroupsStateHandle":
        cls._check_format(doc, origin)
        try:
            mp = doc.get("max_parallelism")
            return cls(
                key_group_range=KeyGroupRange(*(json_int(x) for x in doc["key_group_range"])),
                offsets=[(json_int(g), json_int(o)) for g, o in doc["offsets"]],
                size=json_int(doc["size"]),
                max_parallelism=None if mp is None else json_int(mp),
                **cls._stream_fields(doc, origin),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointFormatError(origin, 0, f"malformed handle: {type(exc).__name__}: {exc}") from None
