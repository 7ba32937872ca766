"""Time to find each seeded bug: the walk phase of ``check``/``mutants`` on every
machine, side by side with Hypothesis alone; and the raw campaign executor per
check mode (map).

Run from the repository root::

    python -m benchmarks.bench_walk_kill [--max-seeds N] [--section walks|executor|verdict|all]

Section ``walks`` (every mutant of every machine, seed 0): CPU time of the walk
phase to its first failing walk (``cowcheck.core.walk_phase``, 32 walks at
most, white-box), next to the CPU time Hypothesis alone (``--walks 0``, ci
profile) takes to its first failure, and the ratio.

For every map mutant of the catalogue (``cowcheck mutants --list``) and each
way of checking — I1–I9 after every step (the default), after every 8th step
(``--invariants-every 8``), P1–P7 only (``--black-box``) — seeds 0, 1, 2, …
run one after another in this process (walks of 300 steps, no shrinking)
until one fails. The table gives the CPU time to the first failing seed, that
seed and the failure code; a mutant no seed below ``--max-seeds`` finds shows
"not found". This is what throughput buys: checked steps are only worth as
much as the bugs they find.

Section ``verdict`` (not part of ``all``): what a user waits for. Every map
mutant of the catalogue that a black-box run can catch (one that breaks a
property, not only an invariant) is written as a user's module in a temporary
directory outside the repository (``make = <the mutant's factory>``) and
checked as a user checks a map: ``cowcheck check --black-box --impl
MODULE:make --minutes 1 --seed 7`` in a fresh working directory, the map in a
process of its own (the default), then the same with ``--in-process`` (and,
with ``--before PYTHON``, isolated with another checkout's cowcheck), the
runs of one mutant interleaved, bytecode cached as an installed cowcheck has
it. The table gives the wall time of the whole command (start-up, probe,
walk phase, shrinking, the replays that count how reliably it fails,
storing) and its CPU time with its map's process (the median of
``--repeat`` runs; a mutant no check finds within the minute is left out),
the shrunk length each way (isolation must not cost shrink quality) and,
from the command's own ``time to the verdict`` line, where the time went:
finding (the walk phase, the other failing walks it looks for included),
confirming (a failing program replayed live, call by call), shrinking,
replays (counting how reliably the stored program fails).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = {
    "I1-I9 every step": {},
    "I1-I9 every 8th": {"invariants_every": 8},
    "black-box": {"white_box": False},
}


def first_failure(spec: str, options: dict, max_seeds: int) -> tuple[float, int | None, str]:
    from cowcheck.spark_fuzz.executor import CampaignConfig, run_seed

    config = CampaignConfig(impl=spec, steps=300, shrink=False, **options)
    began = time.process_time()
    for seed in range(max_seeds):
        outcome = run_seed(seed, config)
        if outcome.failed:
            return time.process_time() - began, seed, outcome.code
    return time.process_time() - began, None, ""


def walk_phase_vs_hypothesis() -> None:
    from hypothesis import settings

    import cowcheck.registry  # noqa: F401
    from cowcheck.core.machine import machine_kind
    from cowcheck.core.mutants import catalogue, run_mutant
    from cowcheck.core.profiles import stabilise_generation
    from cowcheck.core.walk_phase import DEFAULT_WALKS, run_walks

    stabilise_generation()
    profile = settings.get_profile("ci")
    mutants = catalogue()
    print(f"walk phase vs Hypothesis alone: {len(mutants)} mutants of every machine, seed 0, white-box, CPU time "
          f"to the first failure")
    print(f"{'mutant':40} {'machine':11} {'walk phase':>12} {'walk':>5} {'Hypothesis':>12} {'ratio':>7}")
    walk_times, hypothesis_times, ratios = [], [], []
    for name, mutant in mutants.items():
        kind = machine_kind(mutant.machine)
        make_impl, options = kind.replay_setup(mutant.factory, kind.config(white_box=True))
        began = time.process_time()
        walked = run_walks(kind.walker, make_impl, harness_class=kind.harness_class, harness_options=options,
                           base_seed=0, walks=DEFAULT_WALKS)
        walk_seconds = time.process_time() - began
        began = time.process_time()
        row = run_mutant(mutant, white_box=True, seed=0, examples=5000, max_seconds=120, profile=profile, walks=0)
        hypothesis_seconds = time.process_time() - began if row.killed else None
        walk_cell = f"{walk_seconds * 1000:9.1f} ms" if walked.finding else "   not found"
        hyp_cell = f"{hypothesis_seconds * 1000:9.1f} ms" if hypothesis_seconds is not None else "   not found"
        ratio = ""
        if walked.finding and hypothesis_seconds is not None:
            walk_times.append(walk_seconds)
            hypothesis_times.append(hypothesis_seconds)
            ratios.append(hypothesis_seconds / max(walk_seconds, 1e-6))
            ratio = f"{ratios[-1]:6.0f}x"
        walk_number = walked.finding.walk if walked.finding else "-"
        print(f"{name:40} {mutant.machine:11} {walk_cell:>12} {walk_number:>5} {hyp_cell:>12} {ratio:>7}", flush=True)
    print()
    if walk_times:
        print(f"  walk phase: found {len(walk_times)}/{len(mutants)}, median "
              f"{statistics.median(walk_times) * 1000:.1f} ms, max {max(walk_times) * 1000:.1f} ms")
        print(f"  Hypothesis alone: median {statistics.median(hypothesis_times) * 1000:.1f} ms, max "
              f"{max(hypothesis_times) * 1000:.1f} ms; ratio median {statistics.median(ratios):.0f}x")
    print()


_SHRUNK = re.compile(r"shrunk ([\d,]+) -> ([\d,]+) steps in (\d+) ms")
_FOUND = re.compile(r"first failure found by the walk phase after (\d+) ms")
_PHASES = re.compile(r"time to the verdict: (.*)")


def check_verdict(python: str, env: dict, module: str, in_process: bool) -> dict:
    """One ``cowcheck check`` of ``module:make`` as a user runs it (a fresh working directory):
    its wall and CPU time (with its map's process), exit code, shrunk length and the phases it reports."""
    command = [python, "-m", "cowcheck.cli", "check", "--black-box", "--impl", f"{module}:make", "--minutes", "1",
               "--seed", "7"] + (["--in-process"] if in_process else [])
    with tempfile.TemporaryDirectory(prefix="cowcheck-verdict-") as cwd:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shrunk, found, phases = (_SHRUNK.search(done.stdout), _FOUND.search(done.stdout), _PHASES.search(done.stdout))
    return {"wall": wall, "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "code": done.returncode, "length": int(shrunk.group(2).replace(",", "")) if shrunk else None,
            "found_ms": int(found.group(1)) if found else None, "shrink_ms": int(shrunk.group(3)) if shrunk else None,
            "phases": phases.group(1) if phases else "", "failure": next(
                (line.split(" after ")[0] for line in done.stdout.splitlines() if line.startswith("FAILURE")), "")}


def verdict_times(repeat: int, only: list[str], before: str | None) -> None:
    import cowcheck.registry  # noqa: F401  (registers every machine's mutants)
    from cowcheck.core.mutants import catalogue

    # (a bug only the structure shows, I0-I9 alone, is no verdict of a black-box run: left out)
    names = [name for name, mutant in catalogue().items() if mutant.machine == "map" and (not only or name in only)
             and any(code.startswith("P") for code in mutant.expected_codes)]
    modes = [("isolated", sys.executable, False), ("in-process", sys.executable, True)]
    if before:
        modes.append(("before", before, False))
    print(f"time to the verdict: cowcheck check --black-box --impl MODULE:make --minutes 1 --seed 7, {len(names)} map "
          f"mutants as users' modules; {', '.join(label for label, _, _ in modes)} (isolated: the map in a process of "
          f"its own, the default{'; before: isolated, ' + before if before else ''}); median of {repeat} interleaved "
          f"runs; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'mutant':38}" + "".join(f" {label:>17}" for label, _, _ in modes) + "  shrunk  failure; where the "
          "isolated run's time went")
    print(f"{'':38}" + " {:>8} {:>8}".format("wall s", "CPU s") * len(modes))
    walls: dict = {label: [] for label, _, _ in modes}
    cpus: dict = {label: [] for label, _, _ in modes}
    with tempfile.TemporaryDirectory(prefix="cowcheck-users-maps-") as module_dir:
        # bytecode cached (outside the checkouts), as an installed cowcheck has it; PYTHONPATH: the users' modules
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=module_dir, PYTHONPYCACHEPREFIX=str(Path(module_dir, "pycache")))
        for name in names:
            module = "users_" + name.replace("-", "_")
            Path(module_dir, module + ".py").write_text(
                "import cowcheck.map  # noqa: F401\nfrom cowcheck.core.mutants import catalogue\n\n"
                f"make = catalogue()[{name!r}].factory\n")
        for label, python, in_process in modes:  # the first run of each compiles what it imports
            check_verdict(python, env, "users_" + names[0].replace("-", "_"), in_process)
        for name in names:
            module = "users_" + name.replace("-", "_")
            first = check_verdict(sys.executable, env, module, True)
            if first["code"] != 1:  # not found within the minute (--in-process): no verdict to time
                print(f"{name:38}  no failure found in the budget (exit {first['code']}, {first['wall']:.0f} s "
                      f"--in-process): left out", flush=True)
                continue
            runs: dict = {label: [] for label, _, _ in modes}
            for _ in range(repeat):  # interleaved: every mode sees the same load
                for label, python, in_process in modes:
                    runs[label].append(check_verdict(python, env, module, in_process))
            cells = []
            for label, _, _ in modes:
                wall = statistics.median(r["wall"] for r in runs[label])
                cpu = statistics.median(r["cpu"] for r in runs[label])
                walls[label].append(wall)
                cpus[label].append(cpu)
                cells.append(f" {wall:>8.2f} {cpu:>8.2f}")
            last = runs["isolated"][-1]
            lengths = "/".join(str(runs[label][-1]["length"] or "-") for label, _, _ in modes)
            codes = {r["code"] for rs in runs.values() for r in rs}
            verdict = last["failure"] if codes == {1} else f"exit {sorted(codes)}"
            where = last["phases"] or f"found in {last['found_ms']} ms, shrunk in {last['shrink_ms']} ms"
            print(f"{name:38}{''.join(cells)}  {lengths:>6}  {verdict}; {where}", flush=True)
    for label, _, _ in modes:
        print(f"  {label:<10} wall: median {statistics.median(walls[label]):.2f} s, max {max(walls[label]):.2f} s; "
              f"CPU: median {statistics.median(cpus[label]):.2f} s, max {max(cpus[label]):.2f} s"
              + ("  (target: median wall <= 1 s)" if label == "isolated" else ""))
    print(f"  load average now {os.getloadavg()[0]:.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_walk_kill")
    parser.add_argument("--max-seeds", type=int, default=2000, help="seeds tried per mutant and mode (default 2000)")
    parser.add_argument("--section", choices=["walks", "executor", "verdict", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3, help="verdict: runs per mutant and mode (default 3)")
    parser.add_argument("--mutants", default="", help="verdict: these mutants only (comma-separated)")
    parser.add_argument("--before", metavar="PYTHON",
                        help="verdict: also run each check isolated with this interpreter (another checkout's "
                             "cowcheck), interleaved: before and after under the same load")
    args = parser.parse_args(argv)
    if args.section == "verdict":
        verdict_times(args.repeat, [name for name in args.mutants.split(",") if name], args.before)
        return 0

    if args.section in ("walks", "all"):
        walk_phase_vs_hypothesis()
    if args.section == "walks":
        return 0

    from cowcheck.core.mutants import catalogue

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
