"""Where a completed checkpoint is (Flink ``KeyGroupsStateHandle``), and its JSON handle file."""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Callable, Optional

import attrs

from cowcheck.reference.checkpoint.format import CHECKSUM, DATA_SUFFIX, FORMAT_VERSION, HANDLE_FORMAT, HANDLE_SUFFIX
from cowcheck.reference.checkpoint.streams import atomic_write
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["CheckpointHandle", "StreamHandle", "read_file", "parse_handle_json", "json_int", "key_group_offsets"]

# A handle file holds at most MAX_MEMORY_THRESHOLD (1 MiB) of inline data, as base64.
MAX_HANDLE_BYTES = 4 << 20


def read_file(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; CheckpointFormatError if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise CheckpointFormatError(path, 0, f"cannot read: {exc.strerror or exc}") from None


def key_group_offsets(value) -> tuple:
    """(key group, offset) pairs as a tuple of int pairs (a handle's ``offsets``)."""
    return tuple((int(g), int(o)) for g, o in value)


def parse_handle_json(raw: bytes, path: str):
    """The JSON document of a handle file's bytes; CheckpointFormatError if it is not JSON."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(path, exc.start, "not a handle file (not UTF-8 JSON)") from None
    except json.JSONDecodeError as exc:
        raise CheckpointFormatError(path, exc.pos, f"not a handle file (bad JSON: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # an integer too long to read, nesting too deep
        raise CheckpointFormatError(path, 0, f"not a handle file ({str(exc).split(';')[0]})") from None


class StreamHandle:
    """What a handle of either format does with its stream (the project's
    :class:`CheckpointHandle`, Flink's ``KeyGroupsStateHandle``): subclasses are attrs
    classes with ``key_group_range``, ``offsets``, ``size``, ``path``, ``inline`` and
    ``origin``, and name their JSON ``_FORMAT`` and ``_VERSION``."""

    __slots__ = ()
    _FORMAT = ""
    _VERSION = 0

    def _inline_name(self) -> str:
        """How messages name inline data loaded from no file."""
        raise NotImplementedError

    def _default_path(self) -> str:
        """Where :meth:`save` writes the handle by default, beside its data file."""
        raise NotImplementedError

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
        return self._inline_name()

    def intersection(self, key_group_range: KeyGroupRange):
        """The part of this handle a subtask owning ``key_group_range`` reads (Flink ``getIntersection``)."""
        part = self.key_group_range.intersection(key_group_range)
        return attrs.evolve(self, key_group_range=part, offsets=[(g, o) for g, o in self.offsets if g in part])

    def read_bytes(self, read: Optional[Callable[[str, int], bytes]] = None) -> bytes:
        """The checkpoint's bytes, never more than one past the ``size`` the handle records
        (so a data file that grew, or a path to a device, cannot be read without end).
        ``read(path, limit)``: how to read the data file (default: a plain bounded read)."""
        if self.path is None:
            if self.inline is None:
                raise CheckpointFormatError(self.source_name, 0, "the handle has neither a path nor inline data")
            return self.inline
        return (read or read_file)(self.path, self.size + 1)

    def _stream_json(self, relative_to: Optional[str]) -> dict:
        """The stream's part of the JSON: the path (relative when the data file sits beside the
        handle) and the inline bytes in base64."""
        path = self.path
        if path is not None and relative_to is not None and \
                os.path.dirname(os.path.abspath(path)) == os.path.abspath(relative_to):
            path = os.path.basename(path)
        return {"path": path,
                "inline": None if self.inline is None else base64.b64encode(self.inline).decode("ascii")}

    def save(self, path: Optional[str] = None) -> str:
        """Write the handle as JSON (atomically); by default next to its data file."""
        if path is None:
            if self.path is None:
                raise ValueError("an inline handle has no data file to sit next to: give save() a path")
            path = self._default_path()
        doc = self.to_json(relative_to=os.path.dirname(os.path.abspath(path)))
        atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
        return path

    @classmethod
    def load(cls, path: str, read: Optional[Callable[[str, int], bytes]] = None):
        """Read a handle file; CheckpointFormatError (file, offset, problem) if it is not one.
        ``read(path, limit)``: how to read it (default: a plain bounded read)."""
        raw = (read or read_file)(path, MAX_HANDLE_BYTES + 1)
        if len(raw) > MAX_HANDLE_BYTES:
            raise CheckpointFormatError(path, MAX_HANDLE_BYTES, f"not a handle file (larger than "
                                                                f"{MAX_HANDLE_BYTES} bytes)")
        return cls.from_bytes(raw, path)

    @classmethod
    def from_bytes(cls, raw: bytes, path: str):
        """A handle from the bytes of its file."""
        return cls.from_json(parse_handle_json(raw, path), path)

    @classmethod
    def _check_format(cls, doc: Any, origin: str) -> None:
        if not isinstance(doc, dict) or doc.get("format") != cls._FORMAT:
            raise CheckpointFormatError(origin, 0, f"not a handle file (no \"format\": \"{cls._FORMAT}\")")
        if doc.get("version") != cls._VERSION:
            raise CheckpointFormatError(origin, 0, f"unsupported handle version {doc.get('version')!r}")

    @staticmethod
    def _stream_fields(doc: dict, origin: str) -> dict:
        """``path`` (a relative one is beside the handle file), ``inline`` and ``origin``, from the JSON."""
        path = doc["path"]
        if path is not None and not os.path.isabs(path):
            path = os.path.join(os.path.dirname(os.path.abspath(origin)), path)
        inline = doc["inline"]
        return {"path": path, "inline": None if inline is None else base64.b64decode(inline, validate=True),
                "origin": origin}


@attrs.frozen
class CheckpointHandle(StreamHandle):
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
    offsets: tuple = attrs.field(converter=key_group_offsets)
    size: int
    checksum: int
    path: Optional[str] = None
    inline: Optional[bytes] = attrs.field(default=None, repr=False)
    origin: Optional[str] = attrs.field(default=None, eq=False, repr=False)

    _FORMAT = HANDLE_FORMAT
    _VERSION = FORMAT_VERSION

    def _inline_name(self) -> str:
        return f"<inline checkpoint {self.checkpoint_id} {self.key_group_range}>"

    def _default_path(self) -> str:
        return self.path[: -len(DATA_SUFFIX)] + HANDLE_SUFFIX if self.path.endswith(DATA_SUFFIX) \
            else self.path + HANDLE_SUFFIX

    # ----------------------------------------------------------- JSON

    def to_json(self, relative_to: Optional[str] = None) -> dict:
        return {
            "format": HANDLE_FORMAT,
            "version": FORMAT_VERSION,
            "checkpoint_id": self.checkpoint_id,
            "max_parallelism": self.max_parallelism,
            "key_group_range": [self.key_group_range.start, self.key_group_range.end],
            "offsets": [list(p) for p in self.offsets],
            "size": self.size,
            CHECKSUM: f"{self.checksum:08x}",
            **self._stream_json(relative_to),
        }

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> "CheckpointHandle":
        cls._check_format(doc, origin)
        try:
            return cls(
                checkpoint_id=json_int(doc["checkpoint_id"]),
                key_group_range=KeyGroupRange(*(json_int(x) for x in doc["key_group_range"])),
                max_parallelism=json_int(doc["max_parallelism"]),
                offsets=[(json_int(g), json_int(o)) for g, o in doc["offsets"]],
                size=json_int(doc["size"]),
                checksum=int(doc[CHECKSUM], 16),
                **cls._stream_fields(doc, origin),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointFormatError(origin, 0, f"malformed handle: {type(exc).__name__}: {exc}") from None


def json_int(value) -> int:
    """A JSON integer (not a bool); TypeError otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value
