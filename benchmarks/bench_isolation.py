"""What running a user's map in a process of its own costs ``cowcheck check``.

Run from the repository root::

    python -m benchmarks.bench_isolation [--impl MODULE:FACTORY] [--seeds 1,2,3] [--repeat R]

``cowcheck check --impl MODULE:FACTORY`` runs the map in a child process by
default (docs/contract.md §16: a map that ends its process, or patches the
suite at import, cannot change the verdict); ``--in-process`` runs it in the
checker's own process, as every run did before. This benchmark runs the same
command both ways over the same seeds (same seed: the same programs, the
same number of steps; the benchmark checks that the two runs report the
same walk and example counts, so it compares equal work), interleaved,
``--repeat`` times, and prints per seed and mode the median wall time of the
whole command (start-up included: what a user waits for), the walk phase's
and the Hypothesis phase's own times (``check`` reports the walk phase's,
and the time to the end of the Hypothesis phase counted from the start of the
walks: the Hypothesis phase is the difference), the CPU time the command took
with its map's process (user + system, of the command and every process it
waited for), and the throughput ratio isolated / in-process (1.0: isolation
is free; the target is at least 0.7), of wall times and of CPU times.

On a machine whose cores are all busy the wall ratio follows the CPU ratio
(the map's process takes its CPU from the same share as the checker), and
the load average is printed at the start and the end for that reason; on a
machine with a core to spare the map's process runs beside the checker.

The default map is the reference port itself, named as a user's module
(``reference:CopyOnWriteStateMap``), checked black-box both ways (a map in
its own process is checked black-box).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_WALKS = re.compile(r"walk phase: ([\d,]+) walks, ([\d,]+) steps in (\d+) ms")
_EXAMPLES = re.compile(r"([\d,]+) examples, ([\d,]+) steps in ([\d.]+) s")


def run_check(impl: str, seed: int, in_process: bool) -> dict:
    """One ``cowcheck check`` run: wall seconds, and the phases' counts and times as it printed them."""
    command = [sys.executable, "-m", "cowcheck.cli", "check", "--impl", impl, "--black-box", "--seed", str(seed),
               "--no-save"] + (["--in-process"] if in_process else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"bench_isolation: {' '.join(command[2:])} exited {done.returncode}:\n{done.stdout[-2000:]}"
                 f"{done.stderr[-2000:]}")
    walks, examples = _WALKS.search(done.stdout), _EXAMPLES.search(done.stdout)
    if walks is None or examples is None:
        sys.exit(f"bench_isolation: could not read the counts of {' '.join(command[2:])}:\n{done.stdout[-2000:]}")
    walk_s = int(walks.group(3)) / 1000
    return {"wall": wall, "cpu": cpu, "walk_count": walks.group(1) + "/" + walks.group(2), "walk_s": walk_s,
            "examples": examples.group(1) + "/" + examples.group(2),
            "hypothesis_s": float(examples.group(3)) - walk_s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impl", default="reference:CopyOnWriteStateMap")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"bench_isolation: cowcheck check --impl {args.impl} --black-box --seed S, isolated (default) vs "
          f"--in-process, {args.repeat} interleaved runs each, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'seed':>5} {'mode':<11} {'wall s':>7} {'walks s':>8} {'hypothesis s':>13} {'cpu s':>6}  "
          f"work (walks/steps, examples/steps)")
    ratios, cpu_ratios = [], []
    for seed in seeds:
        runs = {True: [], False: []}
        for _ in range(args.repeat):
            for in_process in (False, True):
                runs[in_process].append(run_check(args.impl, seed, in_process))
        work = {(r["walk_count"], r["examples"]) for mode in runs.values() for r in mode}
        if len(work) != 1:
            sys.exit(f"bench_isolation: seed {seed} did different work in different runs: {sorted(work)}")
        medians = {}
        for in_process in (True, False):
            rs = runs[in_process]
            medians[in_process] = {k: statistics.median(r[k] for r in rs)
                                   for k in ("wall", "walk_s", "hypothesis_s", "cpu")}
            m = medians[in_process]
            print(f"{seed:>5} {'in-process' if in_process else 'isolated':<11} {m['wall']:>7.2f} {m['walk_s']:>8.2f} "
                  f"{m['hypothesis_s']:>13.2f} {m['cpu']:>6.2f}  {rs[0]['walk_count']}, {rs[0]['examples']}")
        ratio = medians[True]["wall"] / medians[False]["wall"]
        ratios.append(ratio)
        cpu_ratios.append(medians[True]["cpu"] / medians[False]["cpu"])
        print(f"{seed:>5} throughput isolated / in-process: {ratio:.2f}  (walk phase "
              f"{medians[True]['walk_s'] / medians[False]['walk_s']:.2f}, Hypothesis phase "
              f"{medians[True]['hypothesis_s'] / medians[False]['hypothesis_s']:.2f}; CPU {cpu_ratios[-1]:.2f})")
    print(f"median throughput ratio isolated / in-process over {len(seeds)} seeds: {statistics.median(ratios):.2f} "
          f"(target >= 0.70); of CPU time: {statistics.median(cpu_ratios):.2f}; load average now "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
