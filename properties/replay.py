"""Replay a step list without Hypothesis: traces, table diagrams, expected results.

Replay is deterministic in any process: layouts come from the Java-compatible
hashes and every printed collection is sorted, so the same file gives the same
trace byte for byte whatever ``PYTHONHASHSEED`` is.
"""

from __future__ import annotations

import json
from typing import Callable, TextIO

import attrs

from properties.failures import CheckFailure, Failure, safe_repr
from properties.harness import Harness, has_introspection
from properties.program import Step, render

__all__ = ["ReplayOutcome", "replay_traced", "expected_results", "diagram"]


@attrs.frozen
class ReplayOutcome:
    failure: Failure | None
    steps_run: int


def _show(value) -> str:
    try:
        return json.dumps(value, default=safe_repr, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(value)


def diagram(view) -> str:
    """The buckets and chains of a white-box view with entry/state versions."""

    def table(name: str, tab, size: int) -> list[str]:
        lines = [f"  {name} (length {len(tab)}, size {size})"]
        for i, head in enumerate(tab):
            chain = []
            e = head
            while e is not None and len(chain) < 64:
                chain.append(f"({e.key!r},{e.namespace!r})={_show(e.state)} ev={e.entry_version} sv={e.state_version}")
                e = e.next
            if chain:
                lines.append(f"    [{i}] " + " -> ".join(chain))
        return lines

    live = sorted(view.snapshot_versions)
    lines = [f"  V={view.state_map_version} R={view.highest_required_snapshot_version} live snapshots={live} "
             f"rehashing={view.is_rehashing} rehash_index={view.rehash_index} threshold={view.threshold}"]
    lines += table("primary", view.primary_table, view.primary_table_size)
    if view.is_rehashing:
        lines += table("rehash", view.incremental_rehash_table, view.incremental_rehash_table_size)
    return "\n".join(lines)


def _snapshot_chains(harness) -> str:
    """What each live snapshot still reaches, chain by chain (white-box)."""
    lines = []
    for sid, (snap, _) in sorted(harness.snapshots.items()):
        data = getattr(snap, "snapshot_data", None)
        if snap.released or data is None:
            continue
        lines.append(f"  snapshot s{sid} (version {snap.version}) reaches:")
        for i, head in enumerate(data):
            chain, e = [], head
            while e is not None and len(chain) < 64:
                chain.append(f"({e.key!r},{e.namespace!r})={_show(e.state)} ev={e.entry_version}")
                e = e.next
            if chain:
                lines.append(f"    [{i}] " + " -> ".join(chain))
    return "".join(line + "\n" for line in lines)


def replay_traced(steps: list[Step], make_impl: Callable[[], object], out: TextIO | None = None, *,
                  impl_name: str = "impl", diagrams: bool = False, harness_class=Harness, render_step=render,
                  **harness_options) -> ReplayOutcome:
    """Replay ``steps``; with ``out``, print each step as Python with the model's
    and the implementation's results, and the divergence at the failing step."""
    harness = harness_class(make_impl(), **harness_options)
    white_box = diagrams and has_introspection(getattr(harness, "impl", None))
    for i, step in enumerate(steps):
        try:
            harness.apply(step)
        except CheckFailure as exc:
            failure = exc.failure
            if out is not None:
                out.write(f"[{i}] {render_step(step)}\n")
                out.write(f"    FAILS: {failure.kind} {failure.code}: {failure.message}\n")
                if failure.expected is not None or failure.actual is not None:
                    out.write(f"    model:  {_show(failure.expected)}\n")
                    out.write(f"    {impl_name}: {_show(failure.actual)}\n")
                if white_box:
                    out.write(diagram(harness.impl.introspect()) + "\n")
                    out.write(_snapshot_chains(harness))
            return ReplayOutcome(failure, i + 1)
        if out is not None:
            out.write(f"[{i}] {render_step(step)}\n")
            observed = getattr(harness, "observed", None)
            if observed is not None:
                want, got = observed
                out.write(f"    model: {_show(want)}   {impl_name}: {_show(got)}\n")
            if white_box:
                out.write(diagram(harness.impl.introspect()) + "\n")
    return ReplayOutcome(None, len(steps))


def expected_results(steps: list[Step], machine: str = "map") -> list:
    """The model's result of every step as JSON data (None where a step returns
    nothing), from replaying the program on the model itself, which runs every
    step to its end. Recorded for the map machine; None throughout for others."""
    if machine != "map":
        return [None] * len(steps)
    from model import ModelMap

    harness = Harness(ModelMap(), white_box=False)
    results = []
    for step in steps:
        harness.apply(step)
        observed = harness.observed
        results.append(json.loads(_show(observed[0])) if observed else None)
    return results
