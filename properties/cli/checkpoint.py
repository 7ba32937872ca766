"""``cowcheck checkpoint inspect``: show what a checkpoint holds, checking every byte.

Takes a handle file (``*.handle.json``, see docs/checkpoint-format.md) or a
checkpoint data file, in the project's format (``*.cwck``, recognised by its
magic) or in Flink's (what ``HeapSnapshotStrategy`` writes, recognised by its
serialization proxy's version; its handle file says ``"format":
"flink-key-groups-state-handle"``): by content, never by name. Exit 0 and a
report on stdout; bad input is one line on stderr naming the file, the
offset and the problem, exit 2. Every check restore runs when reading a
checkpoint runs here too (``cowcheck.checkpoint.inspect``). Files are read
as a user's files (``cowcheck.core.files``: regular files only, at most the
size the handle records, or 1 GiB for a data file without one), and what the
report shows from them (state names) is printed with unprintable characters
escaped.
"""

from __future__ import annotations

from typing import TextIO

from cowcheck.cli.common import PrintableOutput
from cowcheck.core.errors import UsageError
from cowcheck.core.files import UserFileError, read_user_file
from cowcheck.checkpoint.inspect import FlinkCheckpointInfo, inspect_checkpoint
from cowcheck.reference.checkpoint.restore import MAX_DATA_BYTES
from cowcheck.reference.errors import CheckpointFormatError

__all__ = ["register", "inspect", "format_info"]


def register(sub) -> None:
    p = sub.add_parser("checkpoint", help="work with checkpoints written by cowcheck.reference.checkpoint",
                       description="Work with checkpoints written by cowcheck.reference.checkpoint.")
    actions = p.add_subparsers(dest="checkpoint_command", required=True)
    i = actions.add_parser("inspect", help="print metadata, key groups, offsets and entry counts",
                           description="Read and check a checkpoint; print its metadata, key groups, offsets "
                                       "and entry counts. Exit 0: fine, 2: bad input.")
    i.add_argument("path", metavar="HANDLE_OR_FILE",
                   help="a handle file (*.handle.json) or a data file, in the project's format or Flink's")
    i.set_defaults(handler=inspect)


def _read(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes (and never more than a data file may hold) of the regular file ``path``."""
    return read_user_file(path, what="a checkpoint file", limit=min(limit, MAX_DATA_BYTES + 1), truncate=True)


def inspect(args, stdout: TextIO, stderr: TextIO) -> int:
    try:
        info = inspect_checkpoint(args.path, read=_read)
    except (CheckpointFormatError, UserFileError) as exc:
        raise UsageError(str(exc)) from None
    PrintableOutput(stdout).write(format_info(info))
    return 0


def format_info(info) -> str:
    where = f"file {info.data_path}" if info.storage == "file" else "inline in the handle"
    handle = f", handle {info.handle_path}" if info.handle_path else ""
    if isinstance(info, FlinkCheckpointInfo):
        groups = info.key_groups
        span = f"{groups[0].key_group}..{groups[-1].key_group}" if groups else "none"
        mp = info.max_parallelism
        lines = [
            f"Flink keyed-state checkpoint (KeyedBackendSerializationProxy version 6){handle}",
            f"data: {where}, {info.size:,} bytes (Flink's format has no checksum)",
            f"key groups {span}" + (f" of max_parallelism {mp}" if mp is not None else
                                    " (max_parallelism not recorded: keys not checked against their key groups)")
            + f", key serializer {info.proxy.key_serializer_id}",
            "states:",
        ]
        states = [(s.name, s.kind, s.namespace_serializer.serializer_id, s.state_serializer.serializer_id)
                  for s in info.proxy.states]
    else:
        meta = info.metadata
        lines = [
            f"checkpoint {meta.checkpoint_id} (format version {meta.format_version}){handle}",
            f"data: {where}, {info.size:,} bytes, crc32 {info.checksum:08x} (verified)",
            f"key groups {meta.key_group_range} of max_parallelism {meta.max_parallelism}, "
            f"key serializer {meta.key_serializer_id}",
            "states:",
        ]
        states = [(s.name, None, s.namespace_serializer_id, s.state_serializer_id) for s in meta.states]
    names = [name for name, _, _, _ in states]
    name_width = max([4] + [len(n) for n in names])
    kinds = any(kind is not None for _, kind, _, _ in states)
    lines.append(f"  {'id':>3}  {'name':<{name_width}}  " + ("kind      " if kinds else "")
                 + f"{'namespace':<16}  state")
    for state_id, (name, kind, namespace_id, state_serializer_id) in enumerate(states):
        lines.append(f"  {state_id:>3}  {name:<{name_width}}  " + (f"{kind:<8}  " if kinds else "")
                     + f"{namespace_id:<16}  {state_serializer_id}")
    widths = [max(7, len(n)) for n in names]
    header = f"{'key group':>9}  {'offset':>10}  {'bytes':>8}" + "".join(f"  {n:>{w}}" for n, w in zip(names, widths))
    lines += ["", header]
    for group in info.key_groups:
        lines.append(f"{group.key_group:>9}  {group.offset:>10,}  {group.length:>8,}"
                     + "".join(f"  {c:>{w},}" for c, w in zip(group.entries, widths)))
    totals = [sum(g.entries[i] for g in info.key_groups) for i in range(len(names))]
    lines.append(f"{'total':>9}  {'':>10}  {sum(g.length for g in info.key_groups):>8,}"
                 + "".join(f"  {t:>{w},}" for t, w in zip(totals, widths)))
    return "\n".join(lines) + "\n"
