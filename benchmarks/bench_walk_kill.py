"""Time to find each seeded map bug with the raw campaign executor, per check mode.

Run from the repository root::

    python -m benchmarks.bench_walk_kill [--max-seeds N]

For every map mutant of the catalogue (``cowcheck mutants --list``) and each
way of checking — I1–I9 after every step (the default), after every 8th step
(``--invariants-every 8``), P1–P7 only (``--black-box``) — seeds 0, 1, 2, …
run one after another in this process (walks of 300 steps, no shrinking)
until one fails. The table gives the CPU time to the first failing seed, that
seed and the failure code; a mutant no seed below ``--max-seeds`` finds shows
"not found". This is what throughput buys: checked steps are only worth as
much as the bugs they find.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

MODES = {
    "I1-I9 every step": {},
    "I1-I9 every 8th": {"invariants_every": 8},
    "black-box": {"white_box": False},
}


def first_failure(spec: str, options: dict, max_seeds: int) -> tuple[float, int | None, str]:
    from spark_fuzz.executor import CampaignConfig, run_seed

    config = CampaignConfig(impl=spec, steps=300, shrink=False, **options)
    began = time.process_time()
    for seed in range(max_seeds):
        outcome = run_seed(seed, config)
        if outcome.failed:
            return time.process_time() - began, seed, outcome.code
    return time.process_time() - began, None, ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_walk_kill")
    parser.add_argument("--max-seeds", type=int, default=2000, help="seeds tried per mutant and mode (default 2000)")
    args = parser.parse_args(argv)

    from properties.core.mutants import catalogue

    names = [name for name, mutant in catalogue().items() if mutant.machine == "map"]
    print(f"bench_walk_kill: {len(names)} map mutants, walks of 300 steps, seeds 0..{args.max_seeds - 1}, "
          f"CPU time to the first failing seed")
    print(f"{'mutant':40}" + "".join(f"  {mode:>26}" for mode in MODES))
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    missed: dict[str, int] = {mode: 0 for mode in MODES}
    for name in names:
        cells = []
        for mode, options in MODES.items():
            seconds, seed, code = first_failure(f"mutant:{name}", options, args.max_seeds)
            if seed is None:
                missed[mode] += 1
                cells.append(f"{'not found':>26}")
            else:
                times[mode].append(seconds)
                cells.append(f"{seconds * 1000:>10.0f} ms  seed {seed:<4} {code:<3}")
        print(f"{name:40}" + "".join(f"  {cell}" for cell in cells), flush=True)
    print()
    for mode in MODES:
        found = times[mode]
        summary = (f"median {statistics.median(found) * 1000:.0f} ms, max {max(found) * 1000:.0f} ms"
                   if found else "none found")
        print(f"  {mode:<18} found {len(found)}/{len(names)}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
