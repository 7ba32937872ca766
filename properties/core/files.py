"""Files that readers see whole or not at all.

:func:`write_atomically` writes a sibling temporary file, flushes it to disk
and renames it over the target (``os.replace``, atomic on one file system),
so a reader — another process, a resumed campaign, a crash in the middle —
sees the old file or the new one, never half of one. Every file cowcheck
writes for others to read goes through it: counterexamples, regression
tests, campaign manifests, Parquet parts, reports and plots.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "a" / "b.txt"
>>> write_atomically(target, "hello"); target.read_text()
'hello'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ["write_atomically"]


def write_atomically(path, content: str | bytes | Callable[[Path], None]) -> None:
    """Write ``content`` to ``path`` so that readers see the old file or the new one.

    ``content``: text (UTF-8), bytes, or a function that writes the file at
    the temporary path it is given (a Parquet writer, a plot's ``savefig``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
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
