"""``cowcheck mutants``: run the suite against every seeded bug and tabulate the kills."""

from __future__ import annotations

import statistics
import time
from typing import TextIO

import attrs

from properties.cli import UsageError, positive_float, positive_int

__all__ = ["register", "mutants", "run_mutant", "MutantResult"]


def register(sub) -> None:
    p = sub.add_parser("mutants", help="run the suite against the seeded-bug catalogue",
                       description="Run the state machines against every mutant (or --only NAME) and print "
                                   "a kill table. Exit 0: all killed, 1: a mutant survived, 2: bad usage.")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    p.add_argument("--black-box", action="store_true", help="no introspection: the model properties alone")
    p.add_argument("--seed", type=int, default=0, help="seed for every mutant (default: 0)")
    p.add_argument("--examples", type=positive_int, default=2000, help="example budget per mutant (default 2000)")
    p.add_argument("--max-seconds", type=positive_float, default=60.0,
                   help="time budget per mutant (default 60)")
    p.add_argument("--profile", choices=["ci", "dev", "nightly"], default="ci",
                   help="Hypothesis settings profile for step counts (default: ci)")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.set_defaults(handler=mutants)


@attrs.frozen
class MutantResult:
    name: str
    machine: str
    killed: bool
    seconds: float
    examples: int
    steps: int
    shrunk_length: int
    caught_by: str
    white_box: bool


def run_mutant(mutant, *, white_box: bool, seed: int, examples: int, max_seconds: float,
               profile) -> MutantResult:
    """Hunt one mutant with its machine; the row of the kill table."""
    from properties.hunt import hunt
    from properties.machines import machine_kind

    kind = machine_kind(mutant.machine)
    config = kind.config(white_box=white_box)
    builder = kind.load("builder")
    make_impl, options = kind.load("replay_setup")(mutant.factory, config)
    result = hunt(lambda rec: builder(mutant.factory, config, rec), make_impl, base_seed=seed, profile=profile,
                  examples=examples, deadline=time.monotonic() + max_seconds, harness_options=options,
                  replay_harness=kind.load("harness_class"))
    if result.failure is None:
        return MutantResult(mutant.name, mutant.machine, False, result.elapsed, result.examples, result.steps,
                            0, "-", white_box)
    found_examples, found_steps = result.found_at or (result.examples, result.steps)
    return MutantResult(mutant.name, mutant.machine, True, result.seconds_to_find, found_examples, found_steps,
                        len(result.program), f"{result.failure.kind} {result.failure.code}", white_box)


def format_table(rows: list[MutantResult]) -> str:
    header = ("mutant", "killed", "time-to-kill", "examples", "steps", "shrunk", "caught by", "mode")
    body = [(r.name, "yes" if r.killed else "NO", f"{r.seconds:.2f} s", f"{r.examples:,}", f"{r.steps:,}",
             str(r.shrunk_length) if r.killed else "-", r.caught_by, "white-box" if r.white_box else "black-box")
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(b) for b in body]
    killed = [r for r in rows if r.killed]
    summary = f"\n{len(killed)}/{len(rows)} killed"
    if killed:
        times = [r.seconds for r in killed]
        lengths = [r.shrunk_length for r in killed]
        summary += (f"; time-to-kill median {statistics.median(times):.2f} s, max {max(times):.2f} s; "
                    f"shrunk length median {statistics.median(lengths):g}, max {max(lengths)}")
    return "\n".join(out) + summary + "\n"


def mutants(args, stdout: TextIO, stderr: TextIO) -> int:
    from hypothesis import settings

    from properties.mutants import catalogue
    from properties.profiles import stabilise_generation

    everything = catalogue()
    if args.list:
        for m in everything.values():
            source = f" [{m.source}]" if m.source else ""
            stdout.write(f"{m.name:<40} {m.machine:<10} {m.expected:<20} {m.description}{source}\n")
        return 0
    unknown = [name for name in args.only or [] if name not in everything]
    if unknown:
        raise UsageError(f"unknown mutant {unknown[0]!r}; known: {', '.join(everything)}")
    chosen = [everything[n] for n in args.only] if args.only else list(everything.values())
    stabilise_generation()
    profile = settings.get_profile(args.profile)
    rows = []
    for i, mutant in enumerate(chosen, 1):
        stderr.write(f"[{i}/{len(chosen)}] {mutant.name} ... ")
        stderr.flush()
        row = run_mutant(mutant, white_box=not args.black_box, seed=args.seed, examples=args.examples,
                         max_seconds=args.max_seconds, profile=profile)
        stderr.write(f"{'killed' if row.killed else 'SURVIVED'} in {row.seconds:.2f} s\n")
        rows.append(row)
    stdout.write(format_table(rows))
    return 0 if all(r.killed for r in rows) else 1
