"""Replay a stored counterexample without Hypothesis: setup, traces, and which code may run.

Replay is deterministic in any process: layouts come from the Java-compatible
hashes and every printed collection is sorted, so the same file gives the same
trace byte for byte whatever ``PYTHONHASHSEED`` is.

A counterexample file is data: it may name any implementation, but only the
built-in ones are resolved from it (:func:`implementation_for`); any other
must be named by the user (``--impl``), so replaying a file received from
elsewhere never imports a module the file chose, never loads a jar it names
(``flink@PATH``, ``flink...:classpath=JAR``: the user names the build with
``--impl`` and the jars with ``--classpath``), and never fetches (or writes
into a cache) a release the file names.
"""

from __future__ import annotations

import io
import json
from typing import Callable, TextIO

import attrs

from cowcheck.core.boundary import build
from cowcheck.core.counterexample import Counterexample, load
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import CheckFailure, Failure, safe_repr
from cowcheck.core.impls import Implementation, fetch_needed, is_builtin, loads_code, resolve
from cowcheck.core.machine import MachineKind, machine_kind
from cowcheck.core.program import Step
from cowcheck.core.settle import Subject

__all__ = ["ReplayOutcome", "replay_traced", "replay_setup", "replay_subject", "implementation_for", "trace_of",
           "show"]


@attrs.frozen
class ReplayOutcome:
    failure: Failure | None
    steps_run: int


def show(value) -> str:
    """A value as one line of JSON (sorted keys; anything exotic as its repr)."""
    try:
        return json.dumps(value, default=safe_repr, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(value)


def replay_traced(steps: list[Step], make_impl: Callable[[], object], out: TextIO | None = None, *,
                  kind: MachineKind, harness_class=None, impl_name: str = "impl", diagrams: bool = False,
                  **harness_options) -> ReplayOutcome:
    """Replay ``steps``; with ``out``, print each step as Python with the model's
    and the implementation's results, the divergence at the failing step and,
    with ``diagrams``, the structure after each step (``kind.describe_state``)."""
    try:
        harness = (harness_class or kind.harness_class)(build(make_impl), **harness_options)
    except CheckFailure as exc:
        if out is not None:
            out.write(f"    FAILS before its first step: {exc.failure.kind} {exc.failure.code}: {exc.failure.message}\n")
        return ReplayOutcome(exc.failure, 0)
    for i, step in enumerate(steps):
        try:
            harness.apply(step)
        except CheckFailure as exc:
            failure = exc.failure
            if out is not None:
                out.write(f"[{i}] {kind.render(step)}\n")
                out.write(f"    FAILS: {failure.kind} {failure.code}: {failure.message}\n")
                if failure.expected is not None or failure.actual is not None:
                    out.write(f"    model:  {show(failure.expected)}\n")
                    out.write(f"    {impl_name}: {show(failure.actual)}\n")
                if diagrams:
                    out.write(kind.describe_state(harness, failed=True))
            return ReplayOutcome(failure, i + 1)
        if out is not None:
            out.write(f"[{i}] {kind.render(step)}\n")
            observed = getattr(harness, "observed", None)
            if observed is not None:
                want, got = observed
                out.write(f"    model: {show(want)}   {impl_name}: {show(got)}\n")
            traced = getattr(harness, "trace_line", None)  # what else the step showed (a map's size)
            if traced is not None and traced():
                out.write(f"    {traced()}\n")
            if diagrams:
                drawn = kind.describe_state(harness, failed=False)
                if not drawn:
                    out.write(f"    (no diagram: {impl_name} offers no introspection; --diagram draws the "
                              f"structure of maps that do)\n")
                    diagrams = False
                out.write(drawn)
    return ReplayOutcome(None, len(steps))


def implementation_for(cx: Counterexample, impl_override: str | None, path) -> str:
    """The implementation spec to run ``cx`` on: ``--impl`` if given, else the
    file's own, which must be built in (a file never chooses code to import) and
    here already (a file never makes cowcheck fetch anything)."""
    if impl_override:
        return impl_override
    if not is_builtin(cx.implementation):
        raise UsageError(f"{path}: names the implementation {cx.implementation!r}, which is not built into "
                         f"cowcheck; a counterexample file does not choose code to import: name it on the "
                         f"command line with --impl {cx.implementation}")
    loads = loads_code(cx.implementation)
    if loads is not None:
        raise UsageError(f"{path}: names {cx.implementation}, which loads {loads}; a counterexample file does not "
                         f"choose code to load: name it on the command line with --impl (a build given by path) "
                         f"and --classpath (jars first on the class path)")
    fetch = fetch_needed(cx.implementation)
    if fetch is not None:
        raise UsageError(f"{path}: names {cx.implementation}, which is not here yet ({fetch}); a counterexample "
                         f"file does not make cowcheck fetch anything: to fetch it, pass --impl "
                         f"{cx.implementation}")
    return cx.implementation


def replay_setup(cx: Counterexample, impl_spec: str,
                 overrides: dict | None = None, isolated: bool = False) -> tuple[Implementation, Callable, dict, MachineKind]:
    """``(implementation, make_impl, harness options, machine kind)`` to replay
    ``cx`` on ``impl_spec`` (:func:`replay_subject`)."""
    impl, subject = replay_subject(cx, impl_spec, overrides, isolated)
    return impl, subject.make, subject.options, subject.kind


def replay_subject(cx: Counterexample, impl_spec: str, overrides: dict | None = None,
                   isolated: bool = False) -> tuple[Implementation, Subject]:
    """The implementation named ``impl_spec`` and the :class:`~cowcheck.core.settle.Subject`
    that replays ``cx`` on it; the implementation is built once with the file's arguments first
    (a factory rejecting them is a ConstructionError; one that crashes, a CheckFailure).
    ``overrides``: recorded settings to replay with instead of the file's (e.g. another
    contract level). ``isolated``: a ``MODULE:FACTORY`` runs in a process of its own
    (:func:`~cowcheck.core.impls.resolve`)."""
    kind = machine_kind(cx.machine)
    impl = resolve(impl_spec, cx.machine, isolated=isolated)
    settings = dict(cx.settings, **{k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = set(settings) - set(kind.recorded_settings)
    if unknown:
        raise UsageError(f"--{sorted(unknown)[0].replace('_', '-')} does not apply to the {kind.name} machine")
    config = kind.config_for(impl, capacity=cx.capacity or None, white_box=cx.white_box,
                             strict_live_iteration=cx.strict_live_iteration, **settings)
    probed = kind.probe_implementation(impl, config, black_box=not cx.white_box)
    config = kind.config_for(impl, capacity=cx.capacity or None, white_box=probed.white_box,
                             strict_live_iteration=cx.strict_live_iteration, **settings)
    return impl, Subject.of(kind, impl.spec, impl.factory, config)


def trace_of(path, impl_spec: str | None = None, diagrams: bool = True) -> str:
    """The step-by-step trace of a counterexample file as text (no timings): the
    same bytes in every process, whatever PYTHONHASHSEED is."""
    cx = load(path)
    impl, make_impl, options, kind = replay_setup(cx, implementation_for(cx, impl_spec, path))
    out = io.StringIO()
    replay_traced(list(cx.steps), make_impl, out, kind=kind, impl_name=impl.spec, diagrams=diagrams, **options)
    return out.getvalue()
