"""How the CrossHair backend of Hypothesis does on short programs, next to the default backend.

Run from the repository root::

    python -m benchmarks.bench_crosshair_backend [--examples N] [--max-steps S] [--only MUTANT ...]
                                                 [--backend crosshair|hypothesis] [--machine]

For the reference and each map mutant of the catalogue (or ``--only``), runs
the model-vs-implementation property on short programs
(``cowcheck.map.short_programs``) with the ``crosshair`` profile and with the
same settings on Hypothesis's own backend, up to ``--examples`` examples
each, and prints per run: examples until the first failure (or the budget),
wall seconds, examples per second, and the property or invariant that
failed. ``--machine`` also times the map state machine under the crosshair
profile. Wall time on a shared machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import time

from hypothesis import given, seed, settings

from cowcheck.core.failures import CheckFailure
from cowcheck.map.short_programs import run_program, short_programs


def hunt(factory, backend: str, examples: int, max_steps: int) -> tuple[int, float, str]:
    """(examples until the first failure or the budget, seconds to it, failure code or '-') for one
    backend on one implementation; the shrink phase that follows is not counted."""
    count = [0]
    first: list = []
    start = time.monotonic()

    @seed(0)
    @settings(parent=settings.get_profile("crosshair"), backend=backend, max_examples=examples)
    @given(short_programs(max_steps=max_steps))
    def prop(ops):
        count[0] += 1
        try:
            run_program(factory, ops)
        except CheckFailure as exc:
            if not first:
                first.append((count[0], time.monotonic() - start, f"{exc.failure.kind} {exc.failure.code}"))
            raise

    try:
        prop()
    except CheckFailure:
        return first[0]
    return count[0], time.monotonic() - start, "-"


def time_machine(examples: int, steps: int) -> tuple[int, int, float]:
    """(examples, steps, seconds) of the map machine on the reference under the crosshair profile."""
    from hypothesis.stateful import run_state_machine_as_test

    from cowcheck.core.machine import RunRecord
    from cowcheck.map.machine import make_map_machine
    from cowcheck.reference import CopyOnWriteStateMap

    record = RunRecord()
    machine = make_map_machine(CopyOnWriteStateMap, record=record)
    start = time.monotonic()
    run_state_machine_as_test(machine, settings=settings(parent=settings.get_profile("crosshair"),
                                                         max_examples=examples, stateful_step_count=steps))
    return record.examples, record.steps, time.monotonic() - start


def main(argv=None) -> None:
    from cowcheck.core.mutants import catalogue
    from cowcheck.core.profiles import register_profiles, stabilise_generation
    from cowcheck.reference import CopyOnWriteStateMap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="example budget per run (default 300)")
    parser.add_argument("--max-steps", type=int, default=12, help="longest program (default 12)")
    parser.add_argument("--only", nargs="*", metavar="MUTANT", help="these mutants (default: every map mutant)")
    parser.add_argument("--backend", choices=["crosshair", "hypothesis"], action="append",
                        help="only this backend (repeatable; default: both)")
    parser.add_argument("--machine", action="store_true", help="also time the map machine under crosshair")
    args = parser.parse_args(argv)
    register_profiles()
    stabilise_generation()

    mutants = {n: m for n, m in catalogue().items() if m.machine == "map"}
    names = args.only if args.only is not None else list(mutants)
    targets = [("reference", CopyOnWriteStateMap)] + [(n, mutants[n].factory) for n in names]
    print(f"short programs (<= {args.max_steps} ops, capacity 4), up to {args.examples} examples per run")
    print(f"{'implementation':<38} {'backend':<10} {'examples':>8} {'seconds':>8} {'ex/s':>7}  found")
    for name, factory in targets:
        for backend in args.backend or ("crosshair", "hypothesis"):
            n, seconds, found = hunt(factory, backend, args.examples, args.max_steps)
            print(f"{name:<38} {backend:<10} {n:>8} {seconds:>8.1f} {n / max(seconds, 1e-9):>7.1f}  {found}",
                  flush=True)
    if args.machine:
        examples, steps, seconds = time_machine(examples=5, steps=10)
        print(f"map machine, crosshair profile: {examples} examples, {steps} steps in {seconds:.1f} s "
              f"({steps / max(seconds, 1e-9):.2f} steps/s)")


if __name__ == "__main__":
    main()
