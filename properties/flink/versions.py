"""Stored counterexamples replayed on Flink releases and builds (``cowcheck versions``).

One process per Flink (one JVM per process, one Flink per JVM): the driver
runs ``python -m cowcheck.flink.versions SPEC FILE...`` for each column (a
release, ``flink@VERSION``, or a build given by path, ``flink@PATH``; either
with ``:classpath=JAR...``: :func:`spec_of`), which replays every file on it
and prints one JSON object: file -> ``{"outcome", "detail"}``. Outcomes:

- ``reproduces``: the stored failure (same kind and code) happens on that release;
- ``fails differently``: another failure happens;
- ``passes``: the program runs through with every check passing;
- ``not applicable``: the file cannot run on Flink (a machine the bridge does
  not offer: it runs the map, the table, the keyed backend and the async
  controller; a map capacity other than Flink's 128, an async program on a
  release before 1.20.0 or in parallel epochs before 2.1.0, a program the
  bridge rejects).

:func:`regression_range` turns a row into "last release where it
reproduces, first where it passes".
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time

from cowcheck.core.processes import module_command
from cowcheck.flink.releases import DEFAULT_VERSION, is_path, parse_version

__all__ = ["REPRODUCES", "FAILS_DIFFERENTLY", "PASSES", "NOT_APPLICABLE", "run_release", "regression_range",
           "replay_on_release"]

REPRODUCES = "reproduces"
FAILS_DIFFERENTLY = "fails differently"
PASSES = "passes"
NOT_APPLICABLE = "not applicable"
FLINK_CAPACITY = 128


def spec_of(column: str, classpath: str = "") -> str:
    """The implementation spec of a column of the matrix: a release (``flink`` for the installed one)
    or a path, with the jars of ``classpath`` (``JAR[:JAR...]``) first.

    >>> spec_of("2.3.0"), spec_of("1.13.6", "/u.jar"), spec_of("/b/lib")
    ('flink', 'flink@1.13.6:classpath=/u.jar', 'flink@/b/lib')
    """
    spec = "flink" if column == DEFAULT_VERSION else f"flink@{column}"
    return f"{spec}:classpath={classpath}" if classpath else spec


def replay_on_release(spec: str, files: list[str], step_time_limit: float = 10.0) -> dict:
    """In this process: every file replayed on the Flink ``spec`` names; file -> outcome record."""
    import cowcheck.registry  # noqa: F401  (registers the machines)
    from cowcheck.core.counterexample import CounterexampleError, load
    from cowcheck.core.errors import UsageError
    from cowcheck.core.impls import UnknownImplementationError, resolve
    from cowcheck.core.limits import StepTimeLimit
    from cowcheck.core.replay import replay_setup
    from cowcheck.core.shrink import replay, signature_of

    from cowcheck.flink.jvm import FlinkUnavailableError, jvm

    results = {}
    try:
        resolve(spec, "map")  # this process's Flink chosen (a release fetched if need be), the helper compiled
        jvm()  # and the JVM started, outside the step time limit
    except FlinkUnavailableError as exc:
        return {path: {"outcome": NOT_APPLICABLE, "detail": str(exc)} for path in files}
    except UnknownImplementationError as exc:
        return {path: {"outcome": NOT_APPLICABLE, "detail": exc.reason} for path in files}
    with StepTimeLimit(step_time_limit):
        for path in files:
            try:
                cx = load(path)
            except (CounterexampleError, OSError) as exc:
                results[path] = {"outcome": NOT_APPLICABLE, "detail": f"unreadable: {exc}"}
                continue
            if cx.machine not in ("map", "table", "async", "backend", "operator"):
                results[path] = {"outcome": NOT_APPLICABLE,
                                 "detail": f"a {cx.machine} program (the bridge runs Flink's map, table, keyed "
                                           f"backend, operator backend and async controller)"}
                continue
            if cx.machine == "operator" and not _operator_compression(spec) and any(
                    step.op in ("checkpoint", "checkpoint_async") and step.args[1] for step in cx.steps):
                results[path] = {"outcome": NOT_APPLICABLE,
                                 "detail": "a compressed operator checkpoint (operator-state compression: 1.18.0 on)"}
                continue
            if cx.capacity and cx.capacity != FLINK_CAPACITY:  # (0: a machine without a capacity)
                results[path] = {"outcome": NOT_APPLICABLE,
                                 "detail": f"capacity {cx.capacity} (Flink's maps have {FLINK_CAPACITY})"}
                continue
            try:
                _, make_impl, options, kind = replay_setup(cx, spec)
            except (UsageError, UnknownImplementationError) as exc:
                results[path] = {"outcome": NOT_APPLICABLE, "detail": str(exc)}
                continue
            started = time.perf_counter()
            try:
                failure = replay(cx.steps, make_impl, harness_class=kind.harness_class, **options)
            except UsageError as exc:  # a step this release cannot take (a native savepoint before 1.15...)
                results[path] = {"outcome": NOT_APPLICABLE, "detail": str(exc)}
                continue
            took = (time.perf_counter() - started) * 1000
            if failure is None:
                results[path] = {"outcome": PASSES, "detail": f"{len(cx.steps)} steps pass ({took:.0f} ms)"}
            elif signature_of(failure) == signature_of(cx.failure):
                results[path] = {"outcome": REPRODUCES,
                                 "detail": f"{failure.kind} {failure.code} at step {failure.step_index}"}
            else:
                results[path] = {"outcome": FAILS_DIFFERENTLY,
                                 "detail": f"{failure.kind} {failure.code} at step {failure.step_index} "
                                           f"(stored: {cx.failure.kind} {cx.failure.code}): {failure.message[:200]}"}
    return results


@functools.lru_cache(maxsize=None)
def _operator_compression(spec: str) -> bool:
    """Whether the Flink ``spec`` names compresses operator state: decided by its classes, as
    ``--machine operator`` decides it (the implementation's ``compression`` default)."""
    from cowcheck.core.impls import resolve

    return bool(resolve(spec, "operator").config_defaults.get("compression"))


def run_release(spec: str, files: list[str], timeout: float = 1800.0) -> dict:
    """Replay ``files`` on the Flink ``spec`` names (:func:`spec_of`) in a fresh process; file -> outcome
    record (every file ``not applicable`` with the reason if the process itself failed)."""
    version = spec.partition("@")[2].partition(":")[0] or DEFAULT_VERSION
    command = module_command("cowcheck.flink.versions", spec, *files)  # no working directory on sys.path
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {f: {"outcome": NOT_APPLICABLE, "detail": f"release {version}: no answer within {timeout:.0f} s"}
                for f in files}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("cowcheck: fetch")]
        reason = tail[-1].strip() if tail else f"exit {done.returncode}"
        return {f: {"outcome": NOT_APPLICABLE, "detail": f"release {version} unavailable: {reason}"} for f in files}
    return json.loads(lines[-1])


def regression_range(row: dict[str, str]) -> str:
    """``row``: release -> outcome. "reproduces up to A, passes from B" (in release order; builds given
    by path have no place in it and are left out)."""
    ordered = sorted((v for v in row if not is_path(v)), key=parse_version)
    reproducing = [v for v in ordered if row[v] == REPRODUCES]
    passing = [v for v in ordered if row[v] == PASSES]
    if not reproducing and not passing:
        return "-"
    if not reproducing:
        return f"passes on every release run ({ordered[0]}–{ordered[-1]})"
    if not passing:
        return f"reproduces on every release run ({ordered[0]}–{ordered[-1]})"
    last_bad = reproducing[-1]
    first_good = next((v for v in passing if parse_version(v) > parse_version(last_bad)), None)
    text = f"last reproduces on {last_bad}"
    if first_good:
        text += f", first passes on {first_good}"
    if any(parse_version(v) < parse_version(last_bad) for v in passing):
        text += " (not monotonic: passes on some earlier release)"
    return text


def main(argv: list[str]) -> int:
    spec, files = argv[0], argv[1:]
    print(json.dumps(replay_on_release(spec, files), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
