"""Human-readable output: run summaries, scenario coverage, failures as runnable programs."""

from __future__ import annotations

from properties.harness import Failure
from properties.program import Step, render
from properties.scenarios import BLACK_BOX_SCENARIOS, MAP_SCENARIOS

__all__ = ["format_summary", "format_coverage", "format_failure", "FINDINGS"]

FINDINGS = {
    "live-iteration-quirk": "live iteration repeated or skipped entries after reads drove the incremental "
                            "rehash, without raising (Flink 2.3.0 does the same; SPEC §7)",
}


def format_coverage(coverage, white_box: bool, scenarios: dict | None = None) -> str:
    """Hits per scenario; ``scenarios`` defaults to the map's (its black-box subset if not white-box)."""
    if scenarios is not None:
        names = scenarios
    else:
        names = MAP_SCENARIOS if white_box else {k: MAP_SCENARIOS[k] for k in BLACK_BOX_SCENARIOS}
    width = max(len(d) for d in names.values())
    lines = []
    for key, description in names.items():
        hits = coverage.get(key, 0)
        lines.append(f"  {description:<{width}}  {hits:>7,}{'   <-- never reached' if hits == 0 else ''}")
    reached = sum(1 for k in names if coverage.get(k))
    return f"Scenario coverage (SPEC §13): {reached}/{len(names)} reached\n" + "\n".join(lines) + "\n"


def format_summary(record, elapsed: float, white_box: bool, scenarios: dict | None = None) -> str:
    rate = record.steps / elapsed if elapsed > 0 else 0.0
    out = [f"{record.examples:,} examples, {record.steps:,} steps in {elapsed:.1f} s ({rate:,.0f} steps/s)\n",
           format_coverage(record.coverage, white_box, scenarios)]
    if record.findings:
        out.append("Findings (reported, not failures):\n")
        for key, count in sorted(record.findings.items()):
            out.append(f"  {key} x{count}: {FINDINGS.get(key, '')}\n")
    return "".join(out)


def format_failure(failure: Failure, steps: list[Step], impl_spec: str, capacity: int | None,
                   render_step=render) -> str:
    """The failing program as Python, the failing step marked, expected vs actual under it."""
    lines = [f"\nFAILURE {failure.kind} {failure.code} after {len(steps)} steps (shrunk)"]
    if capacity is not None:
        lines += ["  from properties.impls import resolve",
                  "  from properties.program import SNAPSHOT_TRANSFORMERS, transform_append, visit_and_prune_even",
                  f"  m = resolve({impl_spec!r}).new(capacity={capacity})"]
    else:
        lines.append(f"  # implementation: {impl_spec}")
    for i, step in enumerate(steps):
        marker = "   # <-- fails here" if i == failure.step_index else ""
        lines.append(f"  {render_step(step)}{marker}")
    lines.append(f"  {failure.message}")
    if failure.expected is not None or failure.actual is not None:
        lines.append(f"  model: {failure.expected!r}")
        lines.append(f"  {impl_spec}: {failure.actual!r}")
    return "\n".join(lines) + "\n"
