"""The ``cowcheck`` command line.

Each subcommand is a function ``(args, stdout, stderr) -> exit code``;
``main()`` only parses and dispatches. Exit codes, the same for every
command:

- 0: nothing found;
- 1: the implementation failed a property (the failure is stored, shrunk and
  replayable);
- 2: bad usage or bad input, including a factory that rejects the arguments
  the tool chose (one line on stderr, no traceback, nothing written);
- 3: an internal error of cowcheck (one line on stderr; the traceback goes
  to a file under ``.cowcheck/internal-errors/``; nothing is blamed on the
  implementation and no counterexample is stored);
- 130: interrupted.
"""

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

from properties.errors import InternalError, UsageError

__all__ = ["main", "build_parser", "Progress", "UsageError", "report_internal_error", "EXIT_INTERNAL"]

EXIT_INTERNAL = 3
INTERNAL_ERRORS_DIR = Path(".cowcheck") / "internal-errors"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


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


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def capacity_arg(text: str) -> int:
    value = positive_int(text)
    if value < 4 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"capacity must be a power of two >= 4, got {value}")
    return value


# Each module adds its subcommand through register(subparsers); its handler is
# a function (args, stdout, stderr) -> exit code.
COMMAND_MODULES = [
    "properties.check_cmd",
    "properties.mutants_cmd",
    "properties.replay_cmd",
    "properties.checkpoint_cmd",
    "properties.campaign_cmd",
    "properties.prove_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(prog="cowcheck", description="Property-based verification of copy-on-write state maps.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    from properties.impls import UnknownImplementationError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.handler(args, stdout, stderr)
    except (UsageError, UnknownImplementationError) as exc:
        stderr.write(f"cowcheck: error: {_one_line(exc)}\n")
        return 2
    except KeyboardInterrupt:
        stderr.write("cowcheck: interrupted\n")
        return 130
    except Exception as exc:  # cowcheck's own error: never blamed on the implementation
        return report_internal_error(exc, stderr, argv)


def report_internal_error(exc: BaseException, stderr: TextIO, argv: list[str] | None = None) -> int:
    """Write the traceback to a file under ``.cowcheck/internal-errors/`` and one
    line on ``stderr``; the exit code of an internal error (3)."""
    summary = exc.summary if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    details = exc.details if isinstance(exc, InternalError) and exc.details else ""
    text = (f"cowcheck {' '.join(sys.argv[1:] if argv is None else argv)}\n"
            f"python {sys.version.split()[0]}, pid {os.getpid()}\n\n{details}"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    path = _internal_error_file(text)
    stderr.write(f"internal error in cowcheck: {_one_line(summary)} (details in {path})\n")
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


def _one_line(value) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= 600 else text[:599] + "…"


if __name__ == "__main__":  # pragma: no cover
    # Through the package module, so exception classes are the ones subcommands import.
    from properties.cli import main as _main

    sys.exit(_main())
