"""``cowcheck replay`` and ``cowcheck shrink``: stored counterexamples at a desk.

replay exits 1 if a failure reproduces, 0 if it no longer does (for
bisecting a fix), 2 for bad input, 3 for an internal error; files are
validated before anything runs. A file marked nondeterministic (its program
failed in only k of n replays when it was stored) is replayed n times, and
replay says in how many it failed (exit 1 if in any).

A counterexample file is data: it may name any implementation, but only the
built-in ones (``reference``, ``model``, ``mutant:NAME``, ``flink``...) are
resolved from it. Any other must be named on the command line with
``--impl``, so replaying a file received from elsewhere never imports a
module the file chose, nor fetches a release it names
(:func:`cowcheck.core.replay.implementation_for`). What replay prints from a
file is shown with unprintable characters escaped (``PrintableOutput``).

shrink never changes which failure a file holds: a file is rewritten only
with a shorter program of the same failure on the same implementation; a
program that now fails differently (or on another ``--impl``) is saved as a
new counterexample beside it and the file is left as it was.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

import attrs

from cowcheck.cli.junit import DEFAULT_JUNIT_DIR, add_junit_options, to_junit
from cowcheck.cli.common import (PrintableOutput, add_classpath, check_output_directory, count_arg, step_seconds_arg,
                                   store_found, with_classpath)
from cowcheck.core import bounds
from cowcheck.core.counterexample import CounterexampleError, load, reliability, save
from cowcheck.core.contract import pointer
from cowcheck.core.errors import UsageError
from cowcheck.core.files import write_atomically
from cowcheck.core.impls import UnknownImplementationError, resolve
from cowcheck.core.limits import DEFAULT_STEP_TIME_LIMIT, StepTimeLimit
from cowcheck.core.regression import test_name_for, to_pytest
from cowcheck.core.failures import CheckFailure
from cowcheck.core.replay import implementation_for, replay_setup, replay_subject, replay_traced
from cowcheck.core.report import nondeterminism_note
from cowcheck.core.settle import settle
from cowcheck.core.shrink import replay, signature_of
from cowcheck.map.harness import CONTRACTS

__all__ = ["register", "replay_files", "shrink_files"]

DEFAULT_PYTEST_DIR = "tests/regressions"


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay stored counterexamples step by step",
                       description="Re-execute counterexample files deterministically, without Hypothesis. "
                                   "Exit 1: a failure reproduces, 0: none does, 2: bad input, 3: internal error.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--impl", help="replay on this implementation instead of the file's (needed for one that is "
                                  "not built in)")
    add_classpath(p)
    p.add_argument("--trace", action="store_true", help="print every step with the model's and the map's result")
    p.add_argument("--diagram", action="store_true",
                   help="print the buckets and chains with entry versions (implementations with introspection)")
    p.add_argument("--to-pytest", action="store_true",
                   help="write a regression test into tests/regressions/ instead of replaying")
    add_junit_options(p)
    p.add_argument("--out-dir", help=f"where --to-pytest writes (default tests/regressions) or --to-junit "
                                     f"(default {DEFAULT_JUNIT_DIR})")
    p.add_argument("--contract", choices=list(CONTRACTS),
                   help="map machine: replay under this contract level instead of the file's (docs/contract.md)")
    p.add_argument("--replays", type=count_arg(bounds.MAX_REPLAYS), metavar="N",
                   help="replay each file N times and say in how many it failed (default: once, or as many times "
                        "as a nondeterministic file was replayed when it was stored)")
    _add_step_time_limit(p)
    _add_in_process(p)
    p.set_defaults(handler=replay_files)

    s = sub.add_parser("shrink", help="re-shrink stored counterexamples; rewrite a file only if shorter",
                       description="Shrink counterexample files again (e.g. after a change); a file is rewritten "
                                   "only with a shorter program of its own failure, another failure is saved as a "
                                   "new file beside it. Exit 0: done, 1: a file no longer fails as stored, 2: bad "
                                   "input, 3: internal error.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--impl", help="the implementation to shrink on, if the file names one that is not built in")
    add_classpath(s)
    _add_step_time_limit(s)
    _add_in_process(s)
    s.set_defaults(handler=shrink_files)


def _add_step_time_limit(p) -> None:
    p.add_argument("--step-time-limit", type=step_seconds_arg, default=DEFAULT_STEP_TIME_LIMIT, metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT (default {DEFAULT_STEP_TIME_LIMIT:g})")


def _add_in_process(p) -> None:
    p.add_argument("--in-process", action="store_true",
                   help="run a MODULE:FACTORY implementation in cowcheck's own process (default: in a process of "
                        "its own, as check runs it)")


def spec_for(cx, args, path) -> str:
    """The implementation to run ``cx`` on: ``--impl`` or the file's own (as a file may name it),
    with the ``--classpath`` jars."""
    return with_classpath(implementation_for(cx, args.impl, path), getattr(args, "classpath", None))


def _load_all(paths: list[str], args, isolated: bool = False):
    """Validate every file (and the implementation each names) before anything runs."""
    loaded = []
    for path in paths:
        try:
            cx = load(path)
            resolve(spec_for(cx, args, path), cx.machine, isolated=isolated)
        except CounterexampleError as exc:
            raise UsageError(str(exc)) from None
        except UnknownImplementationError as exc:
            raise UsageError(f"{path}: {exc}") from None
        loaded.append((path, cx))
    return loaded


def replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    stdout = PrintableOutput(stdout)

    def stuck(seconds: float) -> None:
        stdout.write(f"   reproduces: TIMEOUT time-limit: a step has not returned after {seconds:.0f} s and cannot "
                     f"be interrupted (native code)\n")

    with StepTimeLimit(args.step_time_limit, on_stuck=stuck):
        return _replay_files(args, stdout, stderr)


def _replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    if args.to_pytest and args.to_junit:
        raise UsageError("--to-pytest and --to-junit: choose one")
    if (args.run or args.junit_classpath) and not args.to_junit:
        raise UsageError("--run and --junit-classpath go with --to-junit")
    if args.to_pytest or args.to_junit:
        check_output_directory(args.out_dir or (DEFAULT_PYTEST_DIR if args.to_pytest else DEFAULT_JUNIT_DIR),
                               "--out-dir")
    loaded = _load_all(args.files, args, not args.in_process)
    if args.to_junit:
        return to_junit(loaded, {path: spec_for(cx, args, path) for path, cx in loaded}, args, stdout)
    if args.to_pytest:
        out_dir = Path(args.out_dir or DEFAULT_PYTEST_DIR)
        for path, cx in loaded:
            impl_spec = spec_for(cx, args, path)
            target = out_dir / f"{test_name_for(cx)}.py"
            write_atomically(target, to_pytest(cx, impl_spec, Path(path).name))
            stdout.write(f"wrote {target}\n")
        return 0
    reproduced = False
    for path, cx in loaded:
        spec = spec_for(cx, args, path)
        times = args.replays or (cx.reproduced[1] if cx.reproduced else 1)
        started = time.perf_counter()
        try:
            impl, make_impl, options, kind = replay_setup(cx, spec, {"contract": args.contract},
                                                          isolated=not args.in_process)
        except CheckFailure as exc:  # building it crashed: the program fails before its first step
            stdout.write(f"== {path}: {cx.failure.kind} {cx.failure.code} on {cx.implementation}, "
                         f"{len(cx.steps)} steps; replaying on {spec}\n")
            failures = [exc.failure] * times
        else:
            stdout.write(f"== {path}: {cx.failure.kind} {cx.failure.code} on {cx.implementation}, "
                         f"{len(cx.steps)} steps; replaying on {impl.spec}\n")
            if cx.nondeterministic:
                stdout.write(f"   stored as nondeterministic: reproduced {cx.reproduced[0]} of {cx.reproduced[1]} "
                             f"replays\n")
            started = time.perf_counter()
            outcome = replay_traced(list(cx.steps), make_impl, stdout if (args.trace or args.diagram) else None,
                                    kind=kind, impl_name=impl.spec, diagrams=args.diagram, **options)
            failures = [outcome.failure]
            for _ in range(times - 1):  # the first replay traced (if asked), the others counted
                failures.append(replay(list(cx.steps), make_impl, harness_class=kind.harness_class, **options))
        took = (time.perf_counter() - started) * 1000 / times
        same = [f for f in failures if f is not None and signature_of(f) == signature_of(cx.failure)]
        other = [f for f in failures if f is not None and signature_of(f) != signature_of(cx.failure)]
        of = f" in {len(same)} of {times} replays" if times > 1 else ""
        each = " each" if times > 1 else ""
        if not same and not other:
            never = f" in {times} replays" if times > 1 else ""
            stdout.write(f"   passes: the failure no longer reproduces{never} ({len(cx.steps)} steps, "
                         f"{took:.1f} ms{each})\n")
            continue
        reproduced = True
        shown = (same or other)[0]
        what = "reproduces" if same else "fails differently"
        if same and other:
            of += f" (and fails differently in {len(other)})"
        elif not same and times > 1:
            of = f" in {len(other)} of {times} replays"
        stdout.write(f"   {what}{of} at step {shown.step_index}: {shown.kind} {shown.code}: {shown.message} "
                     f"({took:.1f} ms{each})\n"
                     f"   {pointer(shown.code)}\n")
    return 1 if reproduced else 0


def shrink_files(args, stdout: TextIO, stderr: TextIO) -> int:
    with StepTimeLimit(args.step_time_limit):
        return _shrink_files(args, PrintableOutput(stdout), stderr)


def _shrink_files(args, stdout: TextIO, stderr: TextIO) -> int:
    status = 0
    for path, cx in _load_all(args.files, args, not args.in_process):
        spec = spec_for(cx, args, path)
        try:
            impl, subject = replay_subject(cx, spec, isolated=not args.in_process)
        except CheckFailure as exc:  # building it crashed: nothing to shrink
            same = spec == cx.implementation and signature_of(exc.failure) == signature_of(cx.failure)
            stdout.write(f"{path}: building {spec} fails ({exc.failure.kind} {exc.failure.code}) before any step"
                         + ("; left unchanged\n" if same and not cx.steps else "\n"))
            if same and cx.steps:
                shorter = attrs.evolve(cx, steps=(), failing_step=0, failure=exc.failure, expected=())
                write_atomically(Path(path), shorter.text())
                stdout.write(f"{path}: shrunk {len(cx.steps)} -> 0 steps\n")
            status = status if same else 1
            continue
        failure = None
        for _ in range(cx.reproduced[1] if cx.reproduced else 1):  # a nondeterministic file may pass once
            failure = replay(list(cx.steps), subject.make, **subject.replays())
            if failure is not None:
                break
        if failure is None:
            stdout.write(f"{path}: no longer fails on {impl.spec}; left unchanged\n")
            status = 1
            continue
        settled = settle(list(cx.steps), failure, subject,
                         found_by={"tool": "cowcheck shrink", "from": Path(path).name})
        steps, failure, found = settled.program, settled.failure, settled.counterexample
        if impl.spec != cx.implementation or signature_of(failure) != signature_of(cx.failure):
            # Another failure (or another implementation's): stored apart, the file keeps its own.
            saved = store_found(lambda directory: save(found, directory), Path(path).parent, stderr)
            where = f"saved as {saved[0]}" if saved else "not stored"
            stdout.write(f"{path}: on {impl.spec} it fails with {failure.kind} {failure.code} in {len(steps)} steps, "
                         f"not the stored {cx.failure.kind} {cx.failure.code} on {cx.implementation}: left "
                         f"unchanged; that failure is {where}\n")
            status = 1
            continue
        if (reliability(found), -len(steps)) <= (reliability(cx), -len(cx.steps)):
            stdout.write(f"{path}: already minimal at {len(cx.steps)} steps; left unchanged\n")
            continue
        shorter = attrs.evolve(cx, steps=found.steps, failing_step=found.failing_step, failure=found.failure,
                               expected=found.expected, reproduced=found.reproduced)  # the file's own record kept
        write_atomically(Path(path), shorter.text())
        note = f" ({nondeterminism_note((settled.reproduced, settled.replays))})" if settled.nondeterministic else ""
        stdout.write(f"{path}: shrunk {len(cx.steps)} -> {len(steps)} steps{note}\n")
    return status
