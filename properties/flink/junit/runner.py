"""Compile and run written JUnit tests: ``javac`` against Flink's jars, JUnit 5's console launcher.

Several tests compile in one ``javac`` call and run in one launcher call (a
JVM start and a compilation cost seconds each); the launcher's XML report
(``--reports-dir``) says which passed and which failed with what. JUnit comes
from the system (Debian's ``junit5`` package:
``/usr/share/java/junit-platform-console-standalone.jar``) or from jars the
user names (``--junit-classpath``). The launcher's ``--class-path`` does not
expand ``dir/*``, so every jar is listed; the user's jars come first, as on the
bridge's class path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import attrs

from cowcheck.core.errors import UsageError
from cowcheck.flink.junit.writer import JUnitTest

__all__ = ["SYSTEM_JUNIT", "PASSED", "FAILED", "NOT_COMPILED", "NOT_RUN", "Outcome", "junit_jars", "run_tests",
           "commands", "OPENS"]

SYSTEM_JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")
PASSED, FAILED, NOT_COMPILED, NOT_RUN = "passes", "fails", "does not compile", "did not run"
_ERROR_LINE = re.compile(r"^(.+\.java):(\d+): error: (.*)$", re.M)
# Flink 1.x's Kryo (chill's serializers) reflects into java.util and java.lang, closed since JDK 17:
# opened as the bridge's JVM opens them (cowcheck.flink.jvm) and as Flink's own build runs its tests on 17.
OPENS = ("--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED")
_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *OPENS)


@attrs.frozen
class Outcome:
    """What became of one test: ``result`` (passes, fails, does not compile, did not run) and
    ``detail`` (the assertion's message, the first compiler error, why it did not run)."""

    test: str
    result: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.result == FAILED


def junit_jars(option: str | None = None) -> tuple[str, ...]:
    """The jars of JUnit 5's console launcher: ``--junit-classpath`` (``JAR[:JAR...]``) or the system's;
    UsageError in one line when neither is there."""
    if option:
        jars = tuple(os.path.abspath(j) for j in option.split(os.pathsep) if j)
        for jar in jars:
            if not os.path.isfile(jar):
                raise UsageError(f"--junit-classpath: {jar}: no such file")
        return jars
    if SYSTEM_JUNIT.is_file():
        return (str(SYSTEM_JUNIT),)
    raise UsageError(f"JUnit 5 not found ({SYSTEM_JUNIT}): install it (apt-get install junit5) or name the "
                     f"console launcher's jar with --junit-classpath")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"{name} not found on PATH: running JUnit tests needs a JDK (11 or newer)")
    return found


def commands(test: JUnitTest, classpath: tuple, junit: tuple) -> tuple[str, str]:
    """The two command lines that compile and run ``test`` by hand from the directory above its package."""
    flink = os.pathsep.join(classpath)
    return (f"javac -d classes -cp '{flink}{os.pathsep}{os.pathsep.join(junit)}' {test.path}",
            f"java {' '.join(OPENS)} -jar {junit[0]} --class-path 'classes{os.pathsep}{flink}' --select-class {test.qualified}")


def run_tests(tests: list[JUnitTest], classpath: tuple, junit: tuple, timeout: float = 600.0) -> dict[str, Outcome]:
    """Compile ``tests`` in one ``javac`` call against ``classpath`` (Flink's jars, the user's first) and
    run them in one launcher call; qualified class name -> :class:`Outcome`."""
    javac, java = _tool("javac"), _tool("java")
    work = Path(tempfile.mkdtemp(prefix="cowcheck-junit-"))
    try:
        sources = {}
        for test in tests:
            source = work / "src" / test.path
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_text(test.source, encoding="utf-8")
            sources[test.qualified] = source
        outcomes: dict[str, Outcome] = {}
        compiling = dict(sources)
        while compiling:
            run = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-proc:none", "-d", str(work / "classes"),
                                  "-cp", os.pathsep.join((*classpath, *junit)), *map(str, compiling.values())],
                                 capture_output=True, text=True)
            if run.returncode == 0:
                break
            broken = {}
            for match in _ERROR_LINE.finditer(run.stdout + run.stderr):
                broken.setdefault(str(Path(match.group(1)).resolve()), f"line {match.group(2)}: {match.group(3)}")
            bad = [name for name, path in compiling.items() if str(path.resolve()) in broken] or list(compiling)
            for name in bad:
                detail = broken.get(str(compiling[name].resolve())) or (run.stderr or run.stdout).strip()[:300]
                outcomes[name] = Outcome(name, NOT_COMPILED, detail)
                del compiling[name]
        if compiling:
            outcomes.update(_launch(java, work, list(compiling), classpath, junit, timeout))
        return outcomes
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _launch(java: str, work: Path, names: list[str], classpath: tuple, junit: tuple,
            timeout: float) -> dict[str, Outcome]:
    reports = work / "reports"
    command = [java, *_JVM, "-cp", os.pathsep.join(junit), "org.junit.platform.console.ConsoleLauncher",
               "--disable-banner", "--disable-ansi-colors", "--details=none", "--include-engine=junit-jupiter",
               "--fail-if-no-tests", "--reports-dir", str(reports),
               "--class-path", os.pathsep.join((str(work / "classes"), *classpath)),
               *(arg for name in names for arg in ("--select-class", name))]
    started = time.perf_counter()
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {n: Outcome(n, NOT_RUN, f"the launcher gave no answer within {timeout:.0f} s") for n in names}
    found = _report(reports)
    out = {}
    for name in names:
        if name in found:
            out[name] = found[name]
        else:
            tail = [line for line in (run.stderr or run.stdout).splitlines() if line.strip()]
            out[name] = Outcome(name, NOT_RUN, f"launcher exit {run.returncode} after "
                                               f"{time.perf_counter() - started:.0f} s: {tail[-1] if tail else ''}")
    return out


def _report(reports: Path) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for report in sorted(reports.glob("*.xml")):
        try:
            root = ElementTree.parse(report).getroot()
        except ElementTree.ParseError:
            continue
        for case in root.iter("testcase"):
            name = case.get("classname", "")
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if problem is not None:
                out[name] = Outcome(name, FAILED, (problem.get("message") or problem.get("type") or "").strip())
            elif case.find("skipped") is not None:  # an assumption the release does not meet
                skipped = case.find("skipped")
                why = (skipped.get("message") or skipped.text or "skipped").strip()
                out.setdefault(name, Outcome(name, NOT_RUN, why))
            else:
                out.setdefault(name, Outcome(name, PASSED))
    return out
