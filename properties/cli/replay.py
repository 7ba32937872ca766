"""``cowcheck replay`` and ``cowcheck shrink``: stored counterexamples at a desk.

replay exits 1 if a failure reproduces, 0 if it no longer does (for
bisecting a fix), 2 for bad input, 3 for an internal error; files are
validated before anything runs.

A counterexample file is data: it may name any implementation, but only the
built-in ones (``reference``, ``model``, ``mutant:NAME``, ``flink``...) are
resolved from it. Any other must be named on the command line with
``--impl``, so replaying a file received from elsewhere never imports a
module the file chose (:func:`properties.core.replay.implementation_for`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

import attrs

from properties.cli.common import positive_float
from properties.core.contract import pointer
from properties.core.counterexample import CounterexampleError, load
from properties.core.errors import UsageError
from properties.core.files import write_atomically
from properties.core.impls import UnknownImplementationError, resolve
from properties.core.limits import DEFAULT_STEP_TIME_LIMIT, StepTimeLimit
from properties.core.regression import test_name_for, to_pytest
from properties.core.replay import implementation_for, replay_setup, replay_traced
from properties.core.shrink import replay, shrink, signature_of

__all__ = ["register", "replay_files", "shrink_files"]


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay stored counterexamples step by step",
                       description="Re-execute counterexample files deterministically, without Hypothesis. "
                                   "Exit 1: a failure reproduces, 0: none does, 2: bad input, 3: internal error.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--impl", help="replay on this implementation instead of the file's (needed for one that is "
                                  "not built in)")
    p.add_argument("--trace", action="store_true", help="print every step with the model's and the map's result")
    p.add_argument("--diagram", action="store_true",
                   help="print the buckets and chains with entry versions (implementations with introspection)")
    p.add_argument("--to-pytest", action="store_true",
                   help="write a regression test into tests/regressions/ instead of replaying")
    p.add_argument("--out-dir", default="tests/regressions", help="where --to-pytest writes (default tests/regressions)")
    _add_step_time_limit(p)
    p.set_defaults(handler=replay_files)

    s = sub.add_parser("shrink", help="re-shrink stored counterexamples; rewrite a file only if shorter",
                       description="Shrink counterexample files again (e.g. after a change). Exit 0: done, "
                                   "1: a file no longer fails, 2: bad input, 3: internal error.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--impl", help="the implementation to shrink on, if the file names one that is not built in")
    _add_step_time_limit(s)
    s.set_defaults(handler=shrink_files)


def _add_step_time_limit(p) -> None:
    p.add_argument("--step-time-limit", type=positive_float, default=DEFAULT_STEP_TIME_LIMIT, metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT (default {DEFAULT_STEP_TIME_LIMIT:g})")


def _load_all(paths: list[str], impl_override: str | None = None):
    """Validate every file (and the implementation each names) before anything runs."""
    loaded = []
    for path in paths:
        try:
            cx = load(path)
            resolve(implementation_for(cx, impl_override, path), cx.machine)
        except CounterexampleError as exc:
            raise UsageError(str(exc)) from None
        except UnknownImplementationError as exc:
            raise UsageError(f"{path}: {exc}") from None
        loaded.append((path, cx))
    return loaded


def replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    def stuck(seconds: float) -> None:
        stdout.write(f"   reproduces: TIMEOUT time-limit: a step has not returned after {seconds:.0f} s and cannot "
                     f"be interrupted (native code)\n")

    with StepTimeLimit(args.step_time_limit, on_stuck=stuck):
        return _replay_files(args, stdout, stderr)


def _replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    loaded = _load_all(args.files, args.impl)
    if args.to_pytest:
        out_dir = Path(args.out_dir)
        for path, cx in loaded:
            impl_spec = implementation_for(cx, args.impl, path)
            target = out_dir / f"{test_name_for(cx)}.py"
            write_atomically(target, to_pytest(cx, impl_spec, Path(path).name))
            stdout.write(f"wrote {target}\n")
        return 0
    reproduced = False
    for path, cx in loaded:
        impl, make_impl, options, kind = replay_setup(cx, implementation_for(cx, args.impl, path))
        stdout.write(f"== {path}: {cx.failure.kind} {cx.failure.code} on {cx.implementation}, "
                     f"{len(cx.steps)} steps; replaying on {impl.spec}\n")
        started = time.perf_counter()
        outcome = replay_traced(list(cx.steps), make_impl, stdout if (args.trace or args.diagram) else None,
                                kind=kind, impl_name=impl.spec, diagrams=args.diagram, **options)
        took = (time.perf_counter() - started) * 1000
        if outcome.failure is None:
            stdout.write(f"   passes: the failure no longer reproduces ({len(cx.steps)} steps, {took:.1f} ms)\n")
            continue
        reproduced = True
        same = signature_of(outcome.failure) == signature_of(cx.failure)
        what = "reproduces" if same else "fails differently"
        stdout.write(f"   {what} at step {outcome.failure.step_index}: {outcome.failure.kind} "
                     f"{outcome.failure.code}: {outcome.failure.message} ({took:.1f} ms)\n"
                     f"   {pointer(outcome.failure.code)}\n")
    return 1 if reproduced else 0


def shrink_files(args, stdout: TextIO, stderr: TextIO) -> int:
    with StepTimeLimit(args.step_time_limit):
        return _shrink_files(args, stdout, stderr)


def _shrink_files(args, stdout: TextIO, stderr: TextIO) -> int:
    status = 0
    for path, cx in _load_all(args.files, args.impl):
        impl, make, options, kind = replay_setup(cx, implementation_for(cx, args.impl, path))
        failure = replay(list(cx.steps), make, harness_class=kind.harness_class, **options)
        if failure is None:
            stdout.write(f"{path}: no longer fails on {impl.spec}; left unchanged\n")
            status = 1
            continue
        steps, failure = shrink(list(cx.steps), failure, make, harness_class=kind.harness_class, **options)
        if len(steps) >= len(cx.steps):
            stdout.write(f"{path}: already minimal at {len(cx.steps)} steps; left unchanged\n")
            continue
        shorter = attrs.evolve(cx, steps=tuple(steps), failing_step=failure.step_index, failure=failure,
                               expected=tuple(kind.expected_results(steps)))
        write_atomically(Path(path), json.dumps(shorter.to_json(), indent=2) + "\n")
        stdout.write(f"{path}: shrunk {len(cx.steps)} -> {len(steps)} steps\n")
    return status
