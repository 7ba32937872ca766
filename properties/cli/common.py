"""What the command modules share: argument types, the progress line, exit codes, internal-error reports,
and the streams that keep file text and broken pipes from changing what a run means."""

from __future__ import annotations

import argparse
import datetime
import errno
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TextIO

from cowcheck.core import bounds
from cowcheck.core.bounds import Bound
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import printable
from cowcheck.core.files import writable_directory_problem, write_atomically
from cowcheck.flink import flink_spec

__all__ = ["Progress", "UsageError", "non_negative_int", "positive_int", "positive_float", "capacity_arg",
           "count_arg", "seconds_arg", "step_seconds_arg", "minutes_arg", "seed_arg", "report_internal_error",
           "EXIT_FAILURE", "EXIT_USAGE", "EXIT_INTERNAL", "one_line", "PrintableOutput", "GuardedOutput",
           "check_output_directory", "standard_streams"]

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


def _number(text: str, convert, accept, wording: str, bound: Bound | None = None, floor: Bound | None = None):
    """``convert(text)`` if ``accept`` holds for it and it is at most ``bound`` (at least
    ``floor``), else an argparse error naming ``wording`` (and the bound's reason)."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wording}, got {one_line(text)[:60]!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {wording} (finite), got {value}")
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {wording}, got {value}")
    if bound is not None and value > bound.limit:
        raise argparse.ArgumentTypeError(f"expected {wording} up to {bound.limit:,}: {bound.reason}; got "
                                         f"{one_line(text)[:40]}")
    if floor is not None and value < floor.limit:
        raise argparse.ArgumentTypeError(f"expected {wording} of at least {floor.limit:g}: {floor.reason}; got "
                                         f"{one_line(text)[:40]}")
    return value


def non_negative_int(text: str, bound: Bound | None = None) -> int:
    return _number(text, int, lambda v: v >= 0, "a whole number >= 0", bound)


def positive_int(text: str, bound: Bound | None = None) -> int:
    return _number(text, int, lambda v: v > 0, "a positive integer", bound)


def positive_float(text: str, bound: Bound | None = None, floor: Bound | None = None) -> float:
    return _number(text, float, lambda v: v > 0, "a positive number", bound, floor)


def count_arg(bound: Bound, zero: bool = False):
    """The argument type of a count (``--examples``, ``--walks``...) of at most ``bound``."""
    def parse(text: str) -> int:
        return non_negative_int(text, bound) if zero else positive_int(text, bound)
    return parse


def seconds_arg(bound: Bound = bounds.MAX_SECONDS, floor: Bound | None = None):
    """The argument type of a time in seconds: positive, finite, at most ``bound`` (at least ``floor``)."""
    return lambda text: positive_float(text, bound, floor)


step_seconds_arg = seconds_arg(bounds.MAX_STEP_SECONDS, bounds.MIN_STEP_SECONDS)  # --step-time-limit


def minutes_arg(text: str) -> float:
    return positive_float(text, bounds.MAX_MINUTES)


def seed_arg(text: str) -> int:
    """A seed: any integer of at most 64 bits."""
    value = _number(text, int, lambda v: True, "an integer seed", bounds.MAX_HYPOTHESIS_SEED)
    if value < -bounds.MAX_HYPOTHESIS_SEED.limit:
        raise argparse.ArgumentTypeError(f"expected an integer seed of at most 64 bits, got {one_line(text)[:40]}")
    return value


def capacity_arg(text: str) -> int:
    value = positive_int(text, bounds.MAX_CAPACITY)
    if value < 4 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"capacity must be a power of two >= 4, got {value}")
    return value


def add_classpath(p) -> None:
    """``--classpath JAR[:JAR...]``: the user's jars before Flink's (with ``--impl flink...``)."""
    p.add_argument("--classpath", metavar="JAR[:JAR...]",
                   help="with --impl flink, flink@VERSION or flink@PATH: put these jars before Flink's on the class "
                        "path, so that classes you compiled replace Flink's (the header names the classes replaced)")


def with_classpath(spec: str, classpath: str | None) -> str:
    """``spec`` with the ``--classpath`` jars in it; UsageError if they do not apply to ``spec``."""
    return flink_spec(spec, classpath)


def check_output_directory(path, option: str) -> None:
    """UsageError naming ``option`` if files cannot be written into ``path`` (a file in
    the way, a directory not writable): known up front, before any work."""
    problem = writable_directory_problem(path)
    if problem is not None:
        raise UsageError(f"{option} {path}: {problem}")


def store_found(save, directory, stderr: TextIO):
    """``save(directory)`` -> ``(path, written)`` of a found failure. If ``directory`` cannot take
    the file (read-only, full, a file in the way) it is saved in a fresh directory under the
    system's temporary directory instead, said in one line on ``stderr``; if that fails too,
    one line says so and None is returned. Either way the failure stays the verdict (exit 1):
    an unwritable directory is never taken for cowcheck's own error."""
    try:
        return save(directory)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    try:
        elsewhere = Path(tempfile.mkdtemp(prefix="cowcheck-counterexamples-"))
        path, written = save(elsewhere)
    except OSError as exc:
        stderr.write(f"cowcheck: cannot store the counterexample in {directory} ({reason}) nor in a temporary "
                     f"directory ({exc.strerror or exc}); the program printed below is its only record\n")
        return None
    stderr.write(f"cowcheck: cannot store the counterexample in {directory} ({reason}); stored it in {path} "
                 f"instead\n")
    return path, written


class PrintableOutput:
    """A text stream that shows every unprintable character but the newline escaped
    (``cowcheck.core.failures.printable``): what a command prints from a file
    (a counterexample's message, a checkpoint's state names) cannot move the
    cursor or forge a line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text, keep="\n"))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


def standard_streams() -> tuple[TextIO, TextIO]:
    """``sys.stdout`` and ``sys.stderr``, made usable when the command was started with any of
    the descriptors 0-2 closed (``cowcheck check >&-``): a closed one is opened on /dev/null,
    so no file cowcheck opens later takes its number (a counterexample written to as if it
    were stdout, a child reading it as stdin), and Python's stream for it, None then, is made
    again (faulthandler and the step watchdog need a stderr)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)
    return sys.stdout, sys.stderr


class GuardedOutput:
    """A stream whose failures do not change the verdict: once writing fails (the
    reader went away, ``| head -1``; the disk is full) further output is dropped
    and the command goes on to store what it found and return its exit code.
    ``failure`` holds the first error; for the process's own stdout the file
    descriptor is pointed at /dev/null, so the interpreter's final flush is quiet."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failure: OSError | None = None

    def _failed(self, exc: OSError) -> None:
        if self.failure is None:
            self.failure = exc
        try:
            fd = self.stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
            pass

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                self.stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self._failed(exc)

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self.stream.fileno()

    def note(self) -> str | None:
        """One line about a failed output other than a closed pipe, or None."""
        if self.failure is None or self.failure.errno == errno.EPIPE:
            return None
        return f"cowcheck: output failed ({self.failure.strerror or self.failure}); the exit code still tells the result"


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
        try:  # whole or not at all: a full disk leaves no empty file behind
            write_atomically(directory / name, text)
            return directory / name
        except OSError:
            continue
    return Path("<unwritable>")


def one_line(value) -> str:
    """``value`` as one line of at most 600 characters, unprintable characters escaped."""
    text = printable(" ".join(str(value).split()))
    return text if len(text) <= 600 else text[:599] + "…"
