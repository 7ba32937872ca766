"""``cowcheck replay`` and ``cowcheck shrink``: stored counterexamples at a desk.

replay exits 1 if a failure reproduces, 0 if it no longer does (for
bisecting a fix), 2 for bad input, 3 for an internal error; files are
validated before anything runs.

A counterexample file is data: it may name any implementation, but only the
built-in ones (``reference``, ``model``, ``mutant:NAME``, ``flink``...) are
resolved from it. Any other must be named on the command line with
``--impl``, so replaying a file received from elsewhere never imports a
module the file chose.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from properties.cli import UsageError, positive_float
from properties.limits import DEFAULT_STEP_TIME_LIMIT

__all__ = ["register", "replay_files", "shrink_file"]


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay stored counterexamples step by step",
                       description="Re-execute counterexample files deterministically, without Hypothesis. "
                                   "Exit 1: a failure reproduces, 0: none does, 2: bad input.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--impl", help="replay on this implementation instead of the file's (e.g. reference)")
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
                                   "1: a file no longer fails, 2: bad input.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--impl", help="the implementation to shrink on, if the file names one that is not built in")
    _add_step_time_limit(s)
    s.set_defaults(handler=shrink_file)


def _add_step_time_limit(p) -> None:
    p.add_argument("--step-time-limit", type=positive_float, default=DEFAULT_STEP_TIME_LIMIT, metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT (default {DEFAULT_STEP_TIME_LIMIT:g})")


def implementation_for(cx, impl_override: str | None, path) -> str:
    """The implementation spec to run ``cx`` on: ``--impl`` if given, else the
    file's own, which must be built in (a file never chooses code to import)."""
    from properties.impls import is_builtin

    if impl_override:
        return impl_override
    if not is_builtin(cx.implementation):
        raise UsageError(f"{path}: names the implementation {cx.implementation!r}, which is not built into "
                         f"cowcheck; a counterexample file does not choose code to import: name it on the "
                         f"command line with --impl {cx.implementation}")
    return cx.implementation


def _load_all(paths: list[str], impl_override: str | None = None):
    """Validate every file (and the implementation each names) before anything runs."""
    from properties.counterexample import CounterexampleError, load
    from properties.impls import UnknownImplementationError, resolve_for

    loaded = []
    for path in paths:
        try:
            cx = load(path)
            resolve_for(implementation_for(cx, impl_override, path), cx.machine)
        except CounterexampleError as exc:
            raise UsageError(str(exc)) from None
        except UnknownImplementationError as exc:
            raise UsageError(f"{path}: {exc}") from None
        loaded.append((path, cx))
    return loaded


def replay_setup(cx, impl_spec: str):
    """``(implementation, make_impl, harness options, machine kind)`` to replay ``cx`` on ``impl_spec``."""
    from properties.impls import probe, resolve_for
    from properties.machines import machine_kind

    kind = machine_kind(cx.machine)
    impl = resolve_for(impl_spec, cx.machine)
    if cx.machine == "map":  # built once with the file's capacity: a factory rejecting it is bad usage
        white_box = probe(impl, cx.capacity, black_box=not cx.white_box).white_box
    else:
        white_box = cx.white_box and impl.white_box
    config = kind.config(capacity=cx.capacity if cx.machine == "map" else None, white_box=white_box,
                         strict_live_iteration=cx.strict_live_iteration)
    make_impl, options = kind.load("replay_setup")(impl.factory, config)
    if cx.machine == "map":
        options["white_box"] = white_box
    options["harness_class"] = kind.load("harness_class")
    return impl, make_impl, options, kind


def trace_of(path, impl_spec: str | None = None, diagrams: bool = True) -> str:
    """The step-by-step trace of a counterexample file as text (no timings): the
    same bytes in every process, whatever PYTHONHASHSEED is."""
    import io

    from properties.counterexample import load
    from properties.replay import replay_traced

    cx = load(path)
    impl, make_impl, options, kind = replay_setup(cx, implementation_for(cx, impl_spec, path))
    out = io.StringIO()
    replay_traced(list(cx.steps), make_impl, out, impl_name=impl.spec, diagrams=diagrams,
                  render_step=kind.load("render"), **options)
    return out.getvalue()


def replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    from properties.limits import StepTimeLimit

    def stuck(seconds: float) -> None:
        stdout.write(f"   reproduces: TIMEOUT time-limit: a step has not returned after {seconds:.0f} s and cannot "
                     f"be interrupted (native code)\n")

    with StepTimeLimit(args.step_time_limit, on_stuck=stuck):
        return _replay_files(args, stdout, stderr)


def _replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    from properties.counterexample import write_atomically
    from properties.regression import test_name_for, to_pytest
    from properties.replay import replay_traced
    from properties.shrink import signature_of

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
                                impl_name=impl.spec, diagrams=args.diagram, render_step=kind.load("render"),
                                **options)
        took = (time.perf_counter() - started) * 1000
        if outcome.failure is None:
            stdout.write(f"   passes: the failure no longer reproduces ({len(cx.steps)} steps, {took:.1f} ms)\n")
            continue
        reproduced = True
        same = signature_of(outcome.failure) == signature_of(cx.failure)
        what = "reproduces" if same else "fails differently"
        stdout.write(f"   {what} at step {outcome.failure.step_index}: {outcome.failure.kind} "
                     f"{outcome.failure.code}: {outcome.failure.message} ({took:.1f} ms)\n")
    return 1 if reproduced else 0


def shrink_file(args, stdout: TextIO, stderr: TextIO) -> int:
    from properties.limits import StepTimeLimit

    with StepTimeLimit(args.step_time_limit):
        return _shrink_files(args, stdout, stderr)


def _shrink_files(args, stdout: TextIO, stderr: TextIO) -> int:
    import json

    import attrs

    from properties.counterexample import write_atomically
    from properties.replay import expected_results
    from properties.shrink import replay, shrink

    status = 0
    for path, cx in _load_all(args.files, args.impl):
        impl, make, options, _ = replay_setup(cx, implementation_for(cx, args.impl, path))
        failure = replay(list(cx.steps), make, **options)
        if failure is None:
            stdout.write(f"{path}: no longer fails on {impl.spec}; left unchanged\n")
            status = 1
            continue
        steps, failure = shrink(list(cx.steps), failure, make, **options)
        if len(steps) >= len(cx.steps):
            stdout.write(f"{path}: already minimal at {len(cx.steps)} steps; left unchanged\n")
            continue
        shorter = attrs.evolve(cx, steps=tuple(steps), failing_step=failure.step_index, failure=failure,
                               expected=tuple(expected_results(steps, cx.machine)))
        write_atomically(Path(path), json.dumps(shorter.to_json(), indent=2) + "\n")
        stdout.write(f"{path}: shrunk {len(cx.steps)} -> {len(steps)} steps\n")
    return status
