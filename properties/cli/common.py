"""What the command modules share: argument types, the progress line, exit codes, internal-error reports."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TextIO

from properties.core.errors import InternalError, UsageError

__all__ = ["Progress", "UsageError", "non_negative_int", "positive_int", "positive_float", "capacity_arg", "report_internal_error",
           "EXIT_FAILURE", "EXIT_USAGE", "EXIT_INTERNAL", "one_line"]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
INTERNAL_ERRORS_DIR = Path(".cowcheck") / "internal-errors"


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, a line every
    few seconds otherwise (CI logs)."""

    def __init__(self, stream: TextIO, total: int | None, deadline: float | None) -> None:
        self.stream = stream
        self.total = total
        self.deadline = deadline
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = stream.isatty()
        self.drawn = False

    def update(self, examples: int, steps: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        if self.total:
            done = min(examples / self.total, 1.0)
        elif self.deadline:
            done = min(elapsed / max(self.deadline - self.start, 1e-9), 1.0)
        else:
            done = 0.0
        bar = "#" * int(done * 24)
        line = (f"[{bar:<24}] {examples:,} examples  {steps:,} steps  "
                f"{steps / elapsed:,.0f} steps/s  {elapsed:.0f}s")
        if self.tty:
            self.stream.write("\r" + line)
            self.drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _number(text: str, convert, accept, wording: str):
    """``convert(text)`` if ``accept`` holds for it, else an argparse error naming ``wording``."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wording}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {wording}, got {value}")
    return value


def non_negative_int(text: str) -> int:
    return _number(text, int, lambda v: v >= 0, "a whole number >= 0")


def positive_int(text: str) -> int:
    return _number(text, int, lambda v: v > 0, "a positive integer")


def positive_float(text: str) -> float:
    return _number(text, float, lambda v: v > 0, "a positive number")


def capacity_arg(text: str) -> int:
    value = positive_int(text)
    if value < 4 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"capacity must be a power of two >= 4, got {value}")
    return value


def report_internal_error(exc: BaseException, stderr: TextIO, argv: list[str] | None = None) -> int:
    """Write the traceback to a file under ``.cowcheck/internal-errors/`` and one
    line on ``stderr``; the exit code of an internal error (3)."""
    summary = exc.summary if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    details = exc.details if isinstance(exc, InternalError) and exc.details else ""
    text = (f"cowcheck {' '.join(sys.argv[1:] if argv is None else argv)}\n"
            f"python {sys.version.split()[0]}, pid {os.getpid()}\n\n{details}"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    path = _internal_error_file(text)
    stderr.write(f"internal error in cowcheck: {one_line(summary)} (details in {path})\n")
    return EXIT_INTERNAL


def _internal_error_file(text: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{stamp}-{os.getpid()}.txt"
    for directory in (INTERNAL_ERRORS_DIR, Path(tempfile.gettempdir()) / "cowcheck-internal-errors"):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return Path("<unwritable>")


def one_line(value) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= 600 else text[:599] + "…"
