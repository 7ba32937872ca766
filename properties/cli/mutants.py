"""``cowcheck mutants``: run the suite against every seeded bug and tabulate the kills."""

from __future__ import annotations

from typing import TextIO

from hypothesis import settings

from cowcheck.cli.common import count_arg, seconds_arg, seed_arg, step_seconds_arg
from cowcheck.core import bounds
from cowcheck.core.contract import CONTRACT
from cowcheck.core.errors import UsageError
from cowcheck.core.limits import DEFAULT_STEP_TIME_LIMIT, StepTimeLimit
from cowcheck.core.mutants import catalogue, format_table, run_mutant
from cowcheck.core.profiles import stabilise_generation
from cowcheck.core.shrink import DEFAULT_REPLAYS
from cowcheck.core.walk_phase import DEFAULT_WALKS

__all__ = ["register", "mutants"]


def register(sub) -> None:
    p = sub.add_parser("mutants", help="run the suite against the seeded-bug catalogue",
                       description="Run the state machines against every mutant (or --only NAME) and print "
                                   "a kill table. Exit 0: all killed, 1: a mutant survived, 2: bad usage, 3: internal error.")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    p.add_argument("--machine", metavar="NAME", help="run only the mutants of this machine (e.g. operator)")
    p.add_argument("--black-box", action="store_true", help="no introspection: the model properties alone")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed for every mutant (default: 0)")
    p.add_argument("--examples", type=count_arg(bounds.MAX_EXAMPLES), default=2000, help="example budget per mutant (default 2000)")
    p.add_argument("--max-seconds", type=seconds_arg(), default=60.0,
                   help="time budget per mutant (default 60)")
    p.add_argument("--profile", choices=["ci", "dev", "nightly"], default="ci",
                   help="Hypothesis settings profile for step counts (default: ci)")
    p.add_argument("--walks", type=count_arg(bounds.MAX_WALKS, zero=True), default=DEFAULT_WALKS, metavar="N",
                   help=f"seeded swarm walks before Hypothesis, per mutant (default {DEFAULT_WALKS}; "
                        f"0: Hypothesis only)")
    p.add_argument("--replays", type=count_arg(bounds.MAX_REPLAYS), default=DEFAULT_REPLAYS, metavar="N",
                   help=f"replays of a kill's program before and after shrinking, to tell a nondeterministic "
                        f"mutant (default {DEFAULT_REPLAYS})")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--step-time-limit", type=step_seconds_arg, default=DEFAULT_STEP_TIME_LIMIT, metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT (default {DEFAULT_STEP_TIME_LIMIT:g})")
    p.set_defaults(handler=mutants)


def mutants(args, stdout: TextIO, stderr: TextIO) -> int:
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
    machine = getattr(args, "machine", None)
    if machine is not None:
        machines = sorted({m.machine for m in everything.values()})
        if machine not in machines:
            raise UsageError(f"no mutants of a machine {machine!r}; machines with mutants: {', '.join(machines)}")
        chosen = [m for m in chosen if m.machine == machine]
        if not chosen:  # (--only names mutants of other machines: nothing would run, and nothing is "all killed")
            raise UsageError(f"--machine {machine}: none of the mutants chosen is of that machine")
    stabilise_generation()
    profile = settings.get_profile(args.profile)
    rows = []
    with StepTimeLimit(args.step_time_limit, paced=True):
        for i, mutant in enumerate(chosen, 1):
            stderr.write(f"[{i}/{len(chosen)}] {mutant.name} ... ")
            stderr.flush()
            row = run_mutant(mutant, white_box=not args.black_box, seed=args.seed, examples=args.examples,
                             max_seconds=args.max_seconds, profile=profile, walks=args.walks, replays=args.replays)
            by = f" by {'the walk phase' if row.phase == 'walks' else 'Hypothesis'}" if row.killed else ""
            if row.nondeterministic:
                by += f" (nondeterministic: reproduced {row.reproduced} of {row.replays} replays)"
            stderr.write(f"{'killed' if row.killed else 'SURVIVED'} in {row.seconds:.3f} s{by}\n")
            rows.append(row)
    stdout.write(format_table(rows))
    stdout.write(f"what a code in 'caught by' means: cowcheck explain CODE ({CONTRACT})\n")
    return 0 if all(r.killed for r in rows) else 1
