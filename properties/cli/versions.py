"""``cowcheck versions``: stored counterexamples replayed on Flink releases, as a matrix.

Each release runs in its own process (one JVM per process); a release not
cached yet is fetched first (``cowcheck.flink.releases``). Prints, per
counterexample and release: reproduces / fails differently / passes / not
applicable, and the regression range of each counterexample.

Every file is read and checked here first (``cowcheck.core.counterexample.load``):
a bad file is a row of its own ("bad file", and exit 2 with one line naming it
once the matrix is printed), never passed to a release's process, so it
cannot take the others' results down with it. The releases' processes run
without the working directory on ``sys.path`` (``cowcheck.core.processes``).
"""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path
from typing import TextIO

from cowcheck.cli.common import EXIT_USAGE, PrintableOutput, one_line
from cowcheck.core.counterexample import CounterexampleError, load
from cowcheck.core.errors import UsageError
from cowcheck.core.processes import module_command
from cowcheck.flink.releases import DEFAULT_VERSION, OLDEST_VERSION, check_version, parse_version
from cowcheck.flink.versions import regression_range, run_release

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
                       help=f"releases to run (default: {OLDEST_VERSION},{DEFAULT_VERSION})")
    which.add_argument("--all", action="store_true",
                       help=f"every release on the package index from {OLDEST_VERSION} to {DEFAULT_VERSION}")
    p.add_argument("--format", choices=["text", "md", "json"], default="text")
    p.set_defaults(handler=versions)


def _releases(args) -> list[str]:
    if args.all:
        return all_releases()
    chosen = [v.strip() for v in (args.versions or f"{OLDEST_VERSION},{DEFAULT_VERSION}").split(",") if v.strip()]
    for v in chosen:
        try:
            check_version(v)
        except ValueError as exc:
            raise UsageError(f"versions: {exc}") from None
    return sorted(set(chosen), key=parse_version)


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
        for f, record in run_release(version, good).items():
            matrix[f][version] = record
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


def render(matrix: dict, releases: list[str], ranges: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"releases": releases,
                           "counterexamples": [{"file": f, "outcomes": row, "range": ranges[f]}
                                               for f, row in matrix.items()]}, indent=2, sort_keys=True) + "\n"
    header = ["counterexample", *releases, "regression range"]
    rows = [[Path(f).name, *(row[v]["outcome"] for v in releases), ranges[f]] for f, row in matrix.items()]
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    details = [f"{Path(f).name} on {v}: {row[v]['detail']}" for f, row in matrix.items() for v in releases
               if row[v]["outcome"] in ("not applicable", "fails differently", BAD_FILE)]
    out = "\n".join(lines) + "\n"
    if details and fmt == "text":
        out += "\n" + "\n".join(details) + "\n"
    return out
