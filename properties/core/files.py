"""Files: written whole or not at all, read within bounds.

Writing: :func:`write_atomically` writes a sibling temporary file, flushes
it to disk and renames it over the target (``os.replace``, atomic on one file
system), so a reader — another process, a resumed campaign, a crash in the
middle — sees the old file or the new one, never half of one. Every file
cowcheck writes for others to read goes through it: counterexamples,
regression tests, campaign manifests, Parquet parts, reports and plots. The
file gets the mode the user's umask gives a new file (a campaign directory
shared by a team stays readable by the team), not the 0600 of a temporary file.

Reading: every file a user hands to cowcheck (counterexamples, checkpoint
handles and data files, campaign manifests and tables, the inputs of
``versions``) is read by :func:`read_user_file` or :func:`read_json`: a
regular file only (a FIFO, a device such as ``/dev/zero`` behind a symlink,
a directory are refused without blocking or reading them), at most a stated
number of bytes, and for JSON at most :data:`MAX_JSON_DEPTH` levels of
nesting, no ``NaN``/``Infinity`` and no integer longer than Python converts.
A refusal is :class:`UserFileError`, a usage error (exit 2) naming the file
and the problem.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "a" / "b.txt"
>>> write_atomically(target, "hello"); read_user_file(target, what="a note", limit=10)
b'hello'
>>> read_user_file(Path("/dev/zero"), what="a note", limit=3)  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
...
cowcheck.core.files.UserFileError: /dev/zero: is a character device, not a note (only regular files are read)
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable

from cowcheck.core.errors import UsageError

__all__ = ["write_atomically", "read_user_file", "read_json", "UserFileError", "OutputError", "MAX_JSON_DEPTH",
           "MIB", "file_mode", "writable_directory_problem"]

MIB = 1 << 20
# Deeper JSON is no file cowcheck writes (a counterexample nests about six levels); json.loads
# would recurse into it and the generated regression tests could not be compiled.
MAX_JSON_DEPTH = 100


class UserFileError(UsageError):
    """A file given to cowcheck that it will not read (not a regular file, too large,
    not the JSON it should be); ``.path`` and ``.problem`` say why. Exit 2."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


# ------------------------------------------------------------------- reading


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def read_user_file(path, *, what: str, limit: int, truncate: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most ``limit`` of
    them; :class:`UserFileError` for anything else (with ``truncate``, a longer file
    gives its first ``limit`` bytes instead, for readers that say what is too long
    themselves). Never blocks on a FIFO and never reads more than ``limit + 1``
    bytes, whatever the file claims or grows to."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserFileError(path, "cannot read: no such file") from None
    except IsADirectoryError:
        raise UserFileError(path, f"is a directory, not {what}") from None
    except OSError as exc:
        raise UserFileError(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserFileError(path, f"is {_kind_of(info.st_mode)}, not {what} (only regular files are read)")
        if info.st_size > limit and not truncate:
            raise UserFileError(path, f"larger than {limit:,} bytes, the limit for {what}")
        if truncate:
            limit -= 1  # read at most the limit: the loop reads one byte past it
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit and not truncate:
            raise UserFileError(path, f"larger than {limit:,} bytes, the limit for {what}")
        return b"".join(chunks)
    except OSError as exc:
        raise UserFileError(path, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def data_depth(value: Any) -> int:
    """How deeply the lists and dicts of parsed JSON ``value`` nest, without recursion
    (a walk over its containers, never over the characters of its strings: a regular
    expression skipping a 10 MiB string took 1.3 GB).

    >>> data_depth([1, {"a": [[]]}]), data_depth("[[")
    (4, 0)
    """
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            todo.extend((x, depth + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large for a float")
    return value


def parse_json(text: str, path, *, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` as JSON data, within the bounds of :func:`read_json`."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        problem = "truncated JSON" if exc.pos >= len(text.rstrip()) else "malformed JSON"
        raise UserFileError(path, f"{problem} at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # deeper than the parser goes, far deeper than max_depth
        raise UserFileError(path, f"nested deeper than {max_depth} levels, more than {what} holds") from None
    except ValueError as exc:  # NaN/Infinity, 1e400, an integer longer than Python converts
        raise UserFileError(path, f"not {what}: {str(exc).split(';')[0]}") from None
    if data_depth(data) > max_depth:
        raise UserFileError(path, f"nested deeper than {max_depth} levels, more than {what} holds")
    return data


def read_json(path, *, what: str, limit: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON data in the regular file ``path`` (UTF-8, at most ``limit`` bytes, nested at
    most ``max_depth`` levels, no NaN/Infinity, integers Python can read); UserFileError otherwise."""
    raw = read_user_file(path, what=what, limit=limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError(path, f"not UTF-8 (byte {exc.start}), so not {what}") from None
    return parse_json(text, path, what=what, max_depth=max_depth)


# ------------------------------------------------------------------- writing


def _umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux),
    else by setting it and back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets from the user's umask (0644 under the usual 022)."""
    return 0o666 & ~_umask()


class OutputError(OSError, UsageError):
    """A file cowcheck was asked to write cannot be written (a full disk, a read-only or
    vanished directory): an OSError to code that falls back elsewhere, and to the command
    line a usage error (exit 2, one line), never cowcheck's own error."""

    def __str__(self) -> str:
        return f"cannot write {self.filename} ({self.strerror})"


def write_atomically(path, content: str | bytes | Callable[[Path], None]) -> None:
    """Write ``content`` to ``path`` so that readers see the old file or the new one;
    :class:`OutputError` if the file system refuses it.

    ``content``: text (UTF-8), bytes, or a function that writes the file at
    the temporary path it is given (a Parquet writer, a plot's ``savefig``)."""
    path = Path(path)
    try:
        _write_atomically(path, content)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(exc.errno, exc.strerror or str(exc), str(path)) from None


def _write_atomically(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, file_mode())  # mkstemp makes 0600: give the file what the umask gives
        if callable(content):
            os.close(fd)
            content(tmp)
            with open(tmp, "rb+") as written:
                os.fsync(written.fileno())
        else:
            data = content.encode("utf-8") if isinstance(content, str) else content
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise


def writable_directory_problem(path) -> str | None:
    """Why files cannot be written into directory ``path`` (it, or the nearest
    existing directory above it if it does not exist yet), or None. Known up
    front: a file in the way, or a directory the process may not write."""
    path = Path(path)
    probe = path
    while not os.path.lexists(probe):
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        return (f"{probe} is a file, not a directory" if probe == path
                else f"{probe} is a file, so the directory {path} cannot be made")
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    if not probe.exists():
        return f"{probe} is a broken link"
    return None
