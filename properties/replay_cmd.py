"""``cowcheck replay`` and ``cowcheck shrink``: stored counterexamples at a desk.

replay exits 1 if a failure reproduces, 0 if it no longer does (for
bisecting a fix), 2 for bad input; files are validated before anything runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from properties.cli import UsageError

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
    p.set_defaults(handler=replay_files)

    s = sub.add_parser("shrink", help="re-shrink stored counterexamples; rewrite a file only if shorter",
                       description="Shrink counterexample files again (e.g. after a change). Exit 0: done, "
                                   "1: a file no longer fails, 2: bad input.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.set_defaults(handler=shrink_file)


def _load_all(paths: list[str], impl_override: str | None = None):
    """Validate every file (and the implementation each names) before anything runs."""
    from properties.counterexample import CounterexampleError, load
    from properties.impls import UnknownImplementationError, resolve_for

    loaded = []
    for path in paths:
        try:
            cx = load(path)
            resolve_for(impl_override or cx.implementation, cx.machine)
        except CounterexampleError as exc:
            raise UsageError(str(exc)) from None
        except UnknownImplementationError as exc:
            raise UsageError(f"{path}: {exc}") from None
        loaded.append((path, cx))
    return loaded


def replay_setup(cx, impl_spec: str):
    """``(implementation, make_impl, harness options, machine kind)`` to replay ``cx`` on ``impl_spec``."""
    from properties.impls import resolve_for
    from properties.machines import machine_kind

    kind = machine_kind(cx.machine)
    impl = resolve_for(impl_spec, cx.machine)
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
    impl, make_impl, options, kind = replay_setup(cx, impl_spec or cx.implementation)
    out = io.StringIO()
    replay_traced(list(cx.steps), make_impl, out, impl_name=impl.spec, diagrams=diagrams,
                  render_step=kind.load("render"), **options)
    return out.getvalue()


def replay_files(args, stdout: TextIO, stderr: TextIO) -> int:
    from properties.counterexample import write_atomically
    from properties.regression import test_name_for, to_pytest
    from properties.replay import replay_traced
    from properties.shrink import signature_of

    loaded = _load_all(args.files, args.impl)
    if args.to_pytest:
        out_dir = Path(args.out_dir)
        for path, cx in loaded:
            impl_spec = args.impl or cx.implementation
            target = out_dir / f"{test_name_for(cx)}.py"
            write_atomically(target, to_pytest(cx, impl_spec, Path(path).name))
            stdout.write(f"wrote {target}\n")
        return 0
    reproduced = False
    for path, cx in loaded:
        impl, make_impl, options, kind = replay_setup(cx, args.impl or cx.implementation)
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
    import json

    import attrs

    from properties.counterexample import write_atomically
    from properties.replay import expected_results
    from properties.shrink import replay, shrink

    status = 0
    for path, cx in _load_all(args.files):
        impl, make, options, _ = replay_setup(cx, cx.implementation)
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
