"""The ``cowcheck`` command line.

Each subcommand is a module with ``register(subparsers)`` and a handler
``(args, stdout, stderr) -> exit code``; ``main()`` only parses and
dispatches. Built-in commands are the modules below; others (the Spark
``campaign``) register through the ``cowcheck.commands`` entry-point group,
so this layer never imports the packages above it. Exit codes, the same for
every command:

- 0: nothing found;
- 1: the implementation failed a property (the failure is stored, shrunk and
  replayable);
- 2: bad usage or bad input, including a factory that rejects the arguments
  the tool chose (one line on stderr, no traceback, nothing written);
- 3: an internal error of cowcheck (one line on stderr; the traceback goes
  to a file under ``.cowcheck/internal-errors/``; nothing is blamed on the
  implementation and no counterexample is stored);
- 130: interrupted by the user (Ctrl-C: cowcheck's SIGINT handler tells it from a
  KeyboardInterrupt an implementation raises, which is that implementation's failure).
"""

from __future__ import annotations

import argparse
import re
from importlib import metadata
from typing import TextIO

import cowcheck.flink  # noqa: F401  (registers --impl flink)
import cowcheck.registry  # noqa: F401  (registers every machine)
from cowcheck.cli import check, checkpoint, explain, mutants, prove, replay, versions
from cowcheck.cli.common import EXIT_USAGE, GuardedOutput, one_line, report_internal_error, standard_streams
from cowcheck.core.boundary import catching_interrupts
from cowcheck.core.errors import UsageError, did_you_mean
from cowcheck.core.impls import UnknownImplementationError
from cowcheck.core.profiles import tune_collector

__all__ = ["main", "run", "build_parser", "COMMANDS", "ENTRY_POINT_GROUP"]

COMMANDS = (check, mutants, replay, checkpoint, prove, versions, explain)
ENTRY_POINT_GROUP = "cowcheck.commands"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UsageError(f"{message}{_did_you_mean(message)} (see '{self.prog} --help')")


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def _did_you_mean(message: str) -> str:
    """``; did you mean 'map'?`` for an invalid choice close to a valid one."""
    found = _INVALID_CHOICE.search(message)
    if not found:
        return ""
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))


def version_text() -> str:
    """``cowcheck X (Python Y, hypothesis Z, ...)``: what a bug report needs."""
    from cowcheck.core.counterexample import tool_versions

    versions = tool_versions()
    rest = ", ".join(f"{name} {version}" for name, version in versions.items() if name != "cowcheck")
    return f"cowcheck {versions.get('cowcheck', 'unknown')} ({rest})"


def _unavailable(name: str, reason: str):
    def handler(args, stdout, stderr) -> int:
        raise UsageError(f"the {name} command is unavailable: {reason}")
    return handler


def build_parser(commands: tuple = ()) -> argparse.ArgumentParser:
    """The parser of every built-in command, the ``commands`` given (modules with
    ``register``), and the commands of the ``cowcheck.commands`` entry points."""
    parser = _Parser(prog="cowcheck", description="Property-based verification of copy-on-write state maps.")
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, required=True)
    for module in COMMANDS + tuple(commands):
        module.register(sub)
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name in sub.choices:
            continue
        try:
            entry.load().register(sub)
        except Exception as exc:  # e.g. pyspark missing: the command says so when used
            p = sub.add_parser(entry.name, help=f"unavailable ({type(exc).__name__})")
            p.set_defaults(handler=_unavailable(entry.name, f"{type(exc).__name__}: {exc}"))
    return parser


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None,
         commands: tuple = ()) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) writing to ``stdout`` and ``stderr``
    (default the process's own, usable even if it was started with them closed); the exit code."""
    return run(argv, stdout, stderr, commands)


def run(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None,
        commands: tuple = (), **extra) -> int:
    """:func:`main`, with ``extra`` set on the parsed arguments before the command runs (what
    :mod:`cowcheck.checking` hands the commands: a factory object instead of a spec)."""
    if stdout is None or stderr is None:
        standard_out, standard_err = standard_streams()
        stdout, stderr = stdout or standard_out, stderr or standard_err
    # Output that fails (a closed pipe, a full disk) never changes the exit code: what a run
    # found is stored whatever happens to its report (GuardedOutput).
    stdout, stderr = GuardedOutput(stdout), GuardedOutput(stderr)
    parser = build_parser(commands)
    try:
        args = parser.parse_args(argv)
        for name, value in extra.items():
            setattr(args, name, value)
        tune_collector()
        with catching_interrupts():
            code = args.handler(args, stdout, stderr)
    except (UsageError, UnknownImplementationError) as exc:
        stderr.write(f"cowcheck: error: {one_line(exc)}\n")
        code = EXIT_USAGE
    except KeyboardInterrupt:
        stderr.write("cowcheck: interrupted\n")
        code = 130
    except Exception as exc:  # cowcheck's own error: never blamed on the implementation
        code = report_internal_error(exc, stderr, argv)
    stdout.flush()
    note = stdout.note()
    if note:
        stderr.write(note + "\n")
    stderr.flush()
    return code
