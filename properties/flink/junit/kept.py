"""The JUnit tests kept beside the findings (``docs/findings/*Test.java``), run on the releases at hand.

``python -m cowcheck.flink.junit.kept [--versions A,B,...] [--dir DIR]`` compiles every kept test
against each release (default: the installed one and every release in the cache) in one ``javac``
call and runs them in one launcher call per release, prints what each did there and compares it
with what was measured when the tests were written (``junit-expected.tsv`` beside them: a line
per test and release, its result: passes, fails, does not compile, did not run). Exit 0: every
test did as expected, 1: one did not, 2: bad usage (no JUnit 5, an unknown release).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from cowcheck.core.errors import UsageError
from cowcheck.flink.junit.runner import junit_jars, run_tests
from cowcheck.flink.junit.writer import JUnitTest
from cowcheck.flink.jvm import flink_jars
from cowcheck.flink.releases import DEFAULT_VERSION, FlinkBuild, cache_root, check_version, is_cached, parse_version

__all__ = ["kept_tests", "expected_results", "EXPECTED", "run_kept", "main"]

FINDINGS = Path("docs") / "findings"  # in a checkout of cowcheck, as ``cowcheck versions --findings`` reads them
EXPECTED = "junit-expected.tsv"
_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_CLASS = re.compile(r"^class\s+(\w+)\s", re.M)


def kept_tests(directory: Path = FINDINGS) -> list[JUnitTest]:
    """The kept tests of ``directory`` (``*Test.java``), their package and class read from the source."""
    out = []
    for path in sorted(Path(directory).glob("*Test.java")):
        source = path.read_text(encoding="utf-8")
        package, name = _PACKAGE.search(source), _CLASS.search(source)
        if package is None or name is None:
            raise UsageError(f"{path}: not a test class cowcheck wrote (no package or class line)")
        out.append(JUnitTest(package.group(1), name.group(1), source, path.name))
    return out


def expected_results(directory: Path = FINDINGS) -> dict:
    """test class -> release -> the result measured when the tests were written."""
    path = Path(directory) / EXPECTED
    out: dict = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                test, release, result = line.split("\t")
                out.setdefault(test, {})[release] = result
    return out


def run_kept(release: str, directory: Path = FINDINGS, junit: tuple = ()) -> dict:
    """Every kept test compiled and run on ``release``: class name -> result."""
    flink, logging = flink_jars(FlinkBuild(release=release))
    tests = kept_tests(directory)
    outcomes = run_tests(tests, flink + logging, junit or junit_jars())
    return {t.name: outcomes[t.qualified].result for t in tests}


def _cached() -> list[str]:
    releases = [p.name for p in (cache_root() / "flink").glob("*") if p.is_dir() and is_cached(p.name)]
    return sorted({*releases, DEFAULT_VERSION}, key=parse_version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cowcheck.flink.junit.kept", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", metavar="A,B,...", help="releases (default: the installed one and the cached)")
    parser.add_argument("--dir", default=str(FINDINGS), help="where the kept tests are (default docs/findings)")
    parser.add_argument("--junit-classpath", metavar="JAR[:JAR...]")
    args = parser.parse_args(argv)
    try:
        junit = junit_jars(args.junit_classpath)
        releases = [v.strip() for v in args.versions.split(",") if v.strip()] if args.versions else _cached()
        for release in releases:
            check_version(release)
    except (UsageError, ValueError) as exc:
        sys.stderr.write(f"cowcheck: error: {exc}\n")
        return 2
    expected = expected_results(Path(args.dir))
    surprises = []
    for release in releases:
        for name, result in sorted(run_kept(release, Path(args.dir), junit).items()):
            want = expected.get(name, {}).get(release)
            mark = ("" if want == result else f"   <-- expected: {want}" if want is not None
                    else "   <-- no expectation recorded for this release")
            if mark:
                surprises.append(f"{name} on {release}")
            sys.stdout.write(f"{release:8} {name:40} {result}{mark}\n")
        sys.stdout.flush()
    if surprises:
        sys.stdout.write(f"not as expected ({EXPECTED}): {', '.join(surprises)}\n")
    return 1 if surprises else 0


if __name__ == "__main__":
    sys.exit(main())
