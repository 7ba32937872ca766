"""Human-readable output: run summaries, scenario coverage, failures as runnable programs."""

from __future__ import annotations

from cowcheck.core.contract import pointer
from cowcheck.core.failures import Failure
from cowcheck.core.machine import MachineKind
from cowcheck.core.program import Step

__all__ = ["format_summary", "format_coverage", "format_space", "format_failure", "nondeterminism_note"]


def format_coverage(coverage, kind: MachineKind, white_box: bool, config=None) -> str:
    """Hits per docs/contract.md §13 scenario of ``kind`` (the black-box subset if not white-box; without
    those a run of ``config`` cannot reach, as what the implementation takes decides)."""
    names = kind.scenarios
    if not white_box and kind.black_box_scenarios is not None:
        names = {k: names[k] for k in kind.black_box_scenarios}
    if config is not None:
        out = kind.out_of_reach(config)
        names = {k: d for k, d in names.items() if k not in out}
    width = max(len(d) for d in names.values())
    lines = []
    for key, description in names.items():
        hits = coverage.get(key, 0)
        lines.append(f"  {description:<{width}}  {hits:>7,}{'   <-- never reached' if hits == 0 else ''}")
    reached = sum(1 for k in names if coverage.get(k))
    return f"Scenario coverage (docs/contract.md §13): {reached}/{len(names)} reached\n" + "\n".join(lines) + "\n"


def format_space(space) -> str:
    """The state space a run explored (sizes, rehash generations, key kinds...), with what it never reached."""
    lines = space.lines()
    return ("State space explored:\n" + "\n".join(lines) + "\n") if lines else ""


def format_summary(record, elapsed: float, kind: MachineKind, white_box: bool, config=None) -> str:
    rate = record.steps / elapsed if elapsed > 0 else 0.0
    out = [f"{record.examples:,} examples, {record.steps:,} steps in {elapsed:.1f} s ({rate:,.0f} steps/s)\n",
           format_coverage(record.coverage, kind, white_box, config)]
    space = getattr(record, "space", None)
    if space is not None:
        out.append(format_space(space))
    if record.findings:
        out.append("Findings (reported, not failures):\n")
        for key, count in sorted(record.findings.items()):
            out.append(f"  {key} x{count}: {kind.findings.get(key, '')}\n")
    return "".join(out)


def nondeterminism_note(reproduced: tuple | None) -> str:
    """``nondeterministic: reproduced k of n replays`` for ``(k, n)`` with k < n, else ''."""
    if reproduced is None or reproduced[0] >= reproduced[1]:
        return ""
    return f"nondeterministic: reproduced {reproduced[0]} of {reproduced[1]} replays"


def format_failure(failure: Failure, steps: list[Step], impl_spec: str, kind: MachineKind, config,
                   reproduced: tuple | None = None) -> str:
    """The failing program as Python, the failing step marked, expected vs actual under it;
    ``reproduced``: ``(k, n)`` replays that failed the same way (marked if not all)."""
    note = nondeterminism_note(reproduced)
    lines = [f"\nFAILURE {failure.kind} {failure.code} after {len(steps)} steps (shrunk"
             f"{'; ' + note if note else ''})"]
    if kind.program is not None:
        program = list(kind.program(steps, failure, impl_spec, config))
        if not steps and program:  # building the implementation failed
            program[-1] += "   # <-- fails here"
        lines += [f"  {line}" for line in program]
    else:
        setup = kind.setup_lines(impl_spec, config)
        if not steps and setup:  # building the implementation failed
            setup[-1] += "   # <-- fails here"
        lines += [f"  {line}" for line in setup]
        for i, step in enumerate(steps):
            marker = "   # <-- fails here" if i == failure.step_index else ""
            lines.append(f"  {kind.render(step)}{marker}")
    lines.append(f"  {failure.message}")
    if failure.expected is not None or failure.actual is not None:
        lines.append(f"  model: {failure.expected!r}")
        lines.append(f"  {impl_spec}: {failure.actual!r}")
    lines.append(f"  {pointer(failure.code)}")
    return "\n".join(lines) + "\n"
