"""``cowcheck versions``: stored counterexamples replayed on Flink releases and builds, as a matrix.

Each column runs in its own process (one JVM per process): a release (a
release not cached yet is fetched first, ``cowcheck.flink.releases``) or a
build given by path (``--versions 2.3.0,/path/to/flink-dist.jar``: "does my
patch fix this finding, and does every other still pass"); ``--classpath``
puts jars before Flink's in every column. Prints, per counterexample and
column: reproduces / fails differently / passes / not applicable, and the
regression range of each counterexample over the releases (a build given by
path has no place in that order: it is a column of its own). With
``--to-junit`` each counterexample's JUnit test is also written for every
column, compiled and run there (:mod:`cowcheck.cli.junit`), and the matrix
says where the JUnit test and the Python replay agree.

Every file is read and checked here first (``cowcheck.core.counterexample.load``):
a bad file is a row of its own ("bad file", and exit 2 with one line naming it
once the matrix is printed), never passed to a release's process, so it
cannot take the others' results down with it. The releases' processes run
without the working directory on ``sys.path`` (``cowcheck.core.processes``).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path
from typing import TextIO

from cowcheck.cli.common import EXIT_USAGE, PrintableOutput, add_classpath, one_line
from cowcheck.cli.junit import agreement
from cowcheck.core.counterexample import CounterexampleError, load
from cowcheck.core.errors import UsageError
from cowcheck.core.processes import module_command
from cowcheck.flink.jars import JarError, class_index, classes_in
from cowcheck.flink.junit import JUnitUnsupported, write_test
from cowcheck.flink.junit.runner import junit_jars, run_tests
from cowcheck.flink.jvm import FlinkUnavailableError, flink_jars
from cowcheck.flink.releases import (DEFAULT_VERSION, OLDEST_VERSION, FlinkBuild, build_of_path, check_version, is_path,
                                     parse_version)
from cowcheck.flink.versions import FAILS_DIFFERENTLY, PASSES, REPRODUCES, regression_range, run_release, spec_of

__all__ = ["register", "versions"]

FINDINGS = Path("docs") / "findings"
BAD_FILE = "bad file"


def register(sub) -> None:
    p = sub.add_parser("versions", help="replay counterexamples on Flink releases and print a matrix",
                       description="Replay stored counterexamples on Flink releases (one process per release; a "
                                   "release is fetched on first use) and print, for each, whether it reproduces, "
                                   "fails differently, passes or does not apply, with its regression range. "
                                   "Exit 0: the matrix was made, 2: bad usage or a bad file (shown as such in the "
                                   "matrix), 3: internal error of cowcheck.")
    p.add_argument("files", nargs="*", metavar="FILE", help="counterexample files (JSON)")
    p.add_argument("--findings", action="store_true", help=f"also the findings in {FINDINGS}/*.json")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--versions", metavar="A,B,...",
                       help=f"releases to run, and builds given by path (a flink-dist*.jar or a directory of jars) "
                            f"(default: {OLDEST_VERSION},{DEFAULT_VERSION})")
    which.add_argument("--all", action="store_true",
                       help=f"every release on the package index from {OLDEST_VERSION} to {DEFAULT_VERSION}")
    p.add_argument("--format", choices=["text", "md", "json"], default="text")
    add_classpath(p)
    p.add_argument("--to-junit", action="store_true",
                   help="also write each counterexample's JUnit 5 test for every column, compile and run it there, "
                        "and say where it agrees with the Python replay")
    p.add_argument("--junit-classpath", metavar="JAR[:JAR...]",
                   help="JUnit 5's console launcher (default: the system's, apt-get install junit5)")
    p.set_defaults(handler=versions)


def _releases(args) -> list[str]:
    """The columns: releases in release order, then builds given by path in the order given; every one
    checked here (a bad path is one line, exit 2, before anything runs or is fetched)."""
    if args.all:
        return all_releases()
    chosen = [v.strip() for v in (args.versions or f"{OLDEST_VERSION},{DEFAULT_VERSION}").split(",") if v.strip()]
    paths = list(dict.fromkeys(v for v in chosen if is_path(v)))
    for v in chosen:
        try:
            if is_path(v):
                build_of_path(v)
            else:
                check_version(v)
        except ValueError as exc:
            raise UsageError(f"versions: {exc}") from None
    for jar in (args.classpath or "").split(os.pathsep):
        if jar:
            try:
                classes_in(jar)
            except JarError as exc:
                raise UsageError(f"versions: --classpath {exc}") from None
    return sorted({v for v in chosen if not is_path(v)}, key=parse_version) + paths


def all_releases() -> list[str]:
    """Releases of apache-flink-libraries on the index, 1.13.6 to 2.3.0."""
    run = subprocess.run(module_command("pip", "index", "versions", "apache-flink-libraries"),
                         capture_output=True, text=True)
    line = next((l for l in run.stdout.splitlines() if l.startswith("Available versions:")), None)
    if run.returncode != 0 or line is None:
        raise UsageError("versions --all: cannot list the releases of apache-flink-libraries on the package index "
                         "(pip index versions failed); name them with --versions")
    found = []
    for v in line.split(":", 1)[1].split(","):
        v = v.strip()
        try:
            check_version(v)
        except ValueError:
            continue
        found.append(v)
    return sorted(found, key=parse_version)


def versions(args, stdout: TextIO, stderr: TextIO) -> int:
    files = list(args.files)
    if args.findings:
        found = sorted(glob.glob(str(FINDINGS / "*.json")))
        if not found:
            raise UsageError(f"versions --findings: no {FINDINGS}/*.json here (run it from a cowcheck checkout)")
        files += found
    if not files:
        raise UsageError("versions: name counterexample files, or --findings")
    releases = _releases(args)
    if args.junit_classpath and not args.to_junit:
        raise UsageError("versions: --junit-classpath goes with --to-junit")
    junit = junit_jars(args.junit_classpath) if args.to_junit else ()
    classpath = os.pathsep.join(os.path.abspath(j) for j in (args.classpath or "").split(os.pathsep) if j)
    bad: dict[str, str] = {}
    for f in files:
        try:
            load(f)
        except CounterexampleError as exc:
            bad[f] = exc.problem
    good = [f for f in files if f not in bad]
    if not good:
        first = next(iter(bad))
        raise UsageError(f"versions: {first}: {bad[first]}" + (f" (and {len(bad) - 1} more bad files)"
                                                               if len(bad) > 1 else ""))
    matrix: dict[str, dict[str, dict]] = {f: {} for f in files}
    for i, version in enumerate(releases, 1):
        stderr.write(f"[{i}/{len(releases)}] Flink {version}: replaying {len(good)} file(s) ...\n")
        stderr.flush()
        for f, record in run_release(spec_of(version, classpath), good).items():
            matrix[f][version] = record
        if junit:
            for f, record in _junit_column(version, classpath, good, junit).items():
                matrix[f][version]["junit"] = record
        for f, problem in bad.items():
            matrix[f][version] = {"outcome": BAD_FILE, "detail": problem}
    ranges = {f: regression_range({v: r["outcome"] for v, r in row.items()}) for f, row in matrix.items()}
    PrintableOutput(stdout).write(render(matrix, releases, ranges, args.format))
    if bad:
        first = next(iter(bad))
        stderr.write(f"cowcheck: error: versions: {one_line(first)}: {one_line(bad[first])}"
                     + (f" (and {len(bad) - 1} more bad files)" if len(bad) > 1 else "") + "\n")
        return EXIT_USAGE
    return 0


def _junit_column(column: str, classpath: str, files: list[str], junit: tuple) -> dict:
    """Each file's JUnit test written for ``column``, compiled and run there in one batch: file ->
    ``{"result", "detail"}`` (result: passes, fails, does not compile, did not run, cannot be written)."""
    user = tuple(j for j in classpath.split(os.pathsep) if j)
    try:
        build = build_of_path(column, user) if is_path(column) else FlinkBuild(release=column, user=user)
        flink, logging = flink_jars(build)
        index = class_index(user + flink)
    except (ValueError, JarError, FlinkUnavailableError) as exc:
        return {f: {"result": "cannot be written", "detail": str(exc)} for f in files}
    out, tests = {}, {}
    for f in files:
        try:
            tests[f] = write_test(load(f), Path(f).name, f"{spec_of(column, classpath)} ({build.describe()})", index)
        except (JUnitUnsupported, CounterexampleError) as exc:
            out[f] = {"result": "cannot be written", "detail": str(exc)}
    if tests:
        outcomes = run_tests(list(tests.values()), user + flink + logging, junit)
        for f, test in tests.items():
            outcome = outcomes[test.qualified]
            out[f] = {"result": outcome.result, "detail": outcome.detail}
    return out


def _agrees(record: dict) -> bool | None:
    """Whether a cell's JUnit result says what its Python replay says (None: nothing to compare)."""
    junit = record.get("junit")
    if junit is None or record["outcome"] not in (REPRODUCES, FAILS_DIFFERENTLY, PASSES):
        return None
    if junit["result"] == "cannot be written":
        return None
    return agreement(record["outcome"] != PASSES, junit["result"])


def render(matrix: dict, releases: list[str], ranges: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"releases": releases,
                           "counterexamples": [{"file": f, "outcomes": row, "range": ranges[f]}
                                               for f, row in matrix.items()]}, indent=2, sort_keys=True) + "\n"
    junit = any("junit" in row[v] for row in matrix.values() for v in releases)
    header = ["counterexample", *releases, "regression range", *(["JUnit agrees"] if junit else [])]

    def cell(record: dict) -> str:
        if "junit" not in record or record["outcome"] not in (REPRODUCES, FAILS_DIFFERENTLY, PASSES):
            return record["outcome"]
        return f"{record['outcome']} / JUnit {record['junit']['result']}"

    def agrees(row: dict) -> str:
        verdicts = {v: _agrees(row[v]) for v in releases}
        compared = [v for v, a in verdicts.items() if a is not None]
        wrong = [v for v in compared if not verdicts[v]]
        return (f"no: {', '.join(wrong)}" if wrong else f"yes ({len(compared)} of {len(releases)})")

    rows = [[Path(f).name, *(cell(row[v]) for v in releases), ranges[f], *([agrees(row)] if junit else [])]
            for f, row in matrix.items()]
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    details = [f"{Path(f).name} on {v}: {row[v]['detail']}" for f, row in matrix.items() for v in releases
               if row[v]["outcome"] in ("not applicable", "fails differently", BAD_FILE)]
    details += [f"{Path(f).name} on {v}: JUnit {row[v]['junit']['result']}: {row[v]['junit']['detail']}"
                for f, row in matrix.items() for v in releases
                if row[v].get("junit", {}).get("detail")
                and row[v]["outcome"] in (REPRODUCES, FAILS_DIFFERENTLY, PASSES) and _agrees(row[v]) is not True]
    out = "\n".join(lines) + "\n"
    if details and fmt == "text":
        out += "\n" + "\n".join(details) + "\n"
    return out
