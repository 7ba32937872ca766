"""``cowcheck replay FILE --to-junit``: counterexamples as JUnit 5 tests on Flink's own classes.

Each file becomes one self-contained test class (:mod:`cowcheck.flink.junit`),
written under ``--out-dir`` in its package's directories (a test source root:
paste it into Flink's ``src/test/java``), for the Flink named by ``--impl``
(or the file's own ``flink@VERSION``). With ``--run`` the tests are compiled
against that Flink's jars and JUnit 5 alone and run by JUnit's console
launcher, and each program is replayed in Python beside it: the line printed
says whether the JUnit test failed as the Python program did. A JUnit test that
does not do what its program does (one fails, the other passes; it does not
compile) is cowcheck's own error (exit 3). Exit 0: written (and with ``--run``,
every test passes), 1: a test fails as its program does, 2: bad usage, or a
program the writer cannot express yet (one line).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.files import write_atomically
from cowcheck.core.replay import replay_setup
from cowcheck.core.shrink import replay, signature_of
from cowcheck.flink.jars import class_index
from cowcheck.flink.junit import write_test
from cowcheck.flink.junit.runner import FAILED, PASSED, commands, junit_jars, run_tests
from cowcheck.flink.jvm import flink_jars
from cowcheck.flink.releases import selected_build

__all__ = ["add_junit_options", "to_junit", "DEFAULT_JUNIT_DIR", "agreement"]

DEFAULT_JUNIT_DIR = "cowcheck-junit"


def add_junit_options(p) -> None:
    p.add_argument("--to-junit", action="store_true",
                   help="write a JUnit 5 test on Flink's own classes instead of replaying (--impl flink@VERSION or "
                        f"flink@PATH: the Flink it is written for; into --out-dir, default {DEFAULT_JUNIT_DIR})")
    p.add_argument("--run", action="store_true",
                   help="with --to-junit: compile and run the test (javac and JUnit 5's console launcher) and say "
                        "whether it failed as the Python program does")
    p.add_argument("--junit-classpath", metavar="JAR[:JAR...]",
                   help="JUnit 5's console launcher (default: the system's, "
                        "/usr/share/java/junit-platform-console-standalone.jar: apt-get install junit5)")


def agreement(python_fails: bool, junit: str) -> bool:
    """Whether a JUnit result (passes, fails...) says what the Python replay says."""
    return junit == (FAILED if python_fails else PASSED)


def to_junit(loaded: list, specs: dict, args, stdout: TextIO) -> int:
    """Write (and with ``--run``, compile, run and compare) the JUnit test of each loaded file."""
    if args.run:
        junit = junit_jars(args.junit_classpath)  # before anything is written: a missing JUnit is one line
    out_dir = Path(args.out_dir or DEFAULT_JUNIT_DIR)
    build = selected_build()
    flink, logging = flink_jars(build)
    index = class_index(build.user + flink)
    written = []
    for path, cx in loaded:
        spec = specs[path]
        if not spec.startswith("flink"):
            raise UsageError(f"{path}: --to-junit writes a test on Flink's classes; name the Flink with --impl "
                             f"flink@VERSION or flink@PATH (the file names {cx.implementation})")
        test = write_test(cx, Path(path).name, f"{spec} ({build.describe()})", index)
        target = out_dir / test.path
        write_atomically(target, test.source)
        stdout.write(f"wrote {target} ({test.qualified}, for {spec})\n")
        written.append((path, cx, spec, test))
    classpath = build.user + flink + logging
    if not args.run:
        if written:
            compile_line, run_line = commands(written[0][3], classpath, junit_jars(args.junit_classpath)
                                              if args.junit_classpath else ("junit-platform-console-standalone.jar",))
            stdout.write(f"compile and run it from {out_dir}:\n  {compile_line}\n  {run_line}\n")
        return 0
    outcomes = run_tests([t for _, _, _, t in written], classpath, junit)
    status = 0
    for path, cx, spec, test in written:
        _, make, options, kind = replay_setup(cx, spec)
        failure = replay(list(cx.steps), make, harness_class=kind.harness_class, **options)
        python = ("passes" if failure is None else
                  f"{'reproduces' if signature_of(failure) == signature_of(cx.failure) else 'fails differently'} "
                  f"({failure.kind} {failure.code} at step {failure.step_index})")
        outcome = outcomes[test.qualified]
        detail = f": {outcome.detail}" if outcome.detail else ""
        stdout.write(f"{test.name} on {spec}: JUnit {outcome.result}{detail}\n"
                     f"  the Python replay {python}\n")
        if not agreement(failure is not None, outcome.result):
            raise InternalError(f"the JUnit test {test.qualified} ({outcome.result}) does not do what the program of "
                                f"{path} does on {spec} (the Python replay {python}): a bug of cowcheck's JUnit writer")
        stdout.write("  they agree\n")
        status = max(status, 1 if outcome.failed else 0)
    return status
