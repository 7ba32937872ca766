"""Parity of Flink's CopyOnWriteStateMap with the reference on seeded programs, on one release.

``python -m cowcheck.flink.parity [--programs N] [--seeds 1,2] [--steps S] [--workers W]
[--every K] [--release VERSION]`` runs ``N`` seeded parity programs
(:func:`cowcheck.map.parity.random_program`: one key family and one namespace
family each, bulk steps and ``hold_keys`` included) on the reference at
capacity 128 in Python and on Flink a Java call each
(:func:`~cowcheck.flink.segments.run_batch`), the map harness driving both;
every step's answers, size and structure summary and the final structure
digest must be identical. Every
``K``-th program also runs call by call through the bridge
(:class:`~cowcheck.flink.map.FlinkStateMap`) with the full digest after every
step. Programs are spread over ``W`` processes forked before any JVM exists.
It prints the counts (programs, steps, steps while rehashing, bulk calls, per
key and namespace family) and the first differences; exit 1 if any program
differs, 2 for bad arguments. ``benchmarks/bench_flink.py`` runs the same
comparison as its first section.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter

__all__ = ["program_seeds", "parity_chunk", "run_parity", "main", "SEED_STRIDE"]

SEED_STRIDE = 1_000_000
_FAMILY_OF = {"put", "put_and_get_old"}


def program_seeds(programs: int, seeds: list[int]) -> list[int]:
    """``programs`` program seeds spread evenly over the base ``seeds``."""
    per, extra = divmod(programs, len(seeds))
    out = []
    for i, base in enumerate(seeds):
        out += [base * SEED_STRIDE + j for j in range(per + (i < extra))]
    return out


def _families(program) -> tuple[str, str]:
    from cowcheck.core.keys import family_of

    for step in program:
        if step.op in _FAMILY_OF:
            key, namespace = family_of(step.args[0]), family_of(step.args[1])
            return (key.name if key else "?"), (namespace.name if namespace else "?")
    for step in program:
        if step.op == "put_range":
            namespace = family_of(step.args[3])
            return step.args[0], (namespace.name if namespace else "?")
    return "-", "-"


def parity_chunk(args: tuple) -> dict:
    """Parity of the reference and Flink on some program seeds (runs in a worker)."""
    from cowcheck.flink import FlinkStateMap, jvm, run_batch
    from cowcheck.map.parity import first_difference, observe, random_program
    from cowcheck.reference import CopyOnWriteStateMap

    seeds, steps, every = args
    counts: Counter = Counter()
    families: Counter = Counter()
    differences: list[str] = []
    started = time.perf_counter()
    info = jvm()
    for n, seed in enumerate(seeds):
        program = random_program(seed, steps)
        flink = run_batch(program, detail="final")
        reference = observe(CopyOnWriteStateMap(capacity=128), program, detail="final")
        diff = first_difference(reference, flink)
        if diff is None and every and n % every == 0:
            counts["call-by-call programs"] += 1
            single = observe(FlinkStateMap(), program, detail="every_step")
            diff = first_difference(observe(CopyOnWriteStateMap(capacity=128), program, detail="every_step"), single)
        if diff is not None:
            counts["differences"] += 1
            differences.append(f"seed {seed}: " + diff.describe(program, "reference", "flink")[:2000])
        counts["programs"] += 1
        counts["steps"] += len(program)
        families["/".join(_families(program))] += 1
        for step in program:
            if step.op in ("put_range", "remove_range", "get_range"):
                counts["bulk steps"] += 1
                counts["bulk calls"] += step.args[2]
            elif step.op == "hold_keys":
                counts["hold_keys steps"] += 1
        rehashing = False
        for _, _, summary in flink[0]:
            if type(summary) is not list:  # the step the harness failed (a difference already)
                continue
            now = summary[1] > 2
            counts["steps while rehashing"] += now
            counts["steps with a live snapshot"] += summary[8] > 0
            counts["rehash runs finished"] += rehashing and not now
            counts["steps after a doubling"] += summary[0] > 128
            rehashing = now
    return {"counts": counts, "families": families, "differences": differences, "jvm_start": info.start_seconds,
            "seconds": time.perf_counter() - started}


def run_parity(programs: int, seeds: list[int], steps: int, workers: int, every: int) -> dict:
    """The parity of ``programs`` programs, spread over ``workers`` processes forked before any JVM."""
    all_seeds = program_seeds(programs, seeds)
    chunks = [(all_seeds[i::workers], steps, every) for i in range(workers)]
    started = time.perf_counter()
    if workers == 1:
        results = [parity_chunk(chunks[0])]
    else:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(parity_chunk, chunks)
    counts: Counter = Counter()
    families: Counter = Counter()
    for r in results:
        counts.update(r["counts"])
        families.update(r["families"])
    return {"counts": counts, "families": families, "differences": [d for r in results for d in r["differences"]],
            "jvm_starts": [r["jvm_start"] for r in results], "seconds": time.perf_counter() - started}


COUNTED = ("programs", "steps", "call-by-call programs", "steps while rehashing", "rehash runs finished",
           "steps after a doubling", "steps with a live snapshot", "bulk steps", "bulk calls", "hold_keys steps",
           "differences")


def report(parity: dict, out) -> None:
    """The counts, the programs per key/namespace family and the first differences."""
    c = parity["counts"]
    for name in COUNTED:
        out.write(f"  {name:<28} {c[name]:>12,}\n")
    out.write("  programs per key/namespace family: " + ", ".join(
        f"{name} {n}" for name, n in sorted(parity["families"].items())) + "\n")
    out.write("  JVM start in each worker     " + ", ".join(f"{s:.2f} s" for s in parity["jvm_starts"]) + "\n")
    for d in parity["differences"][:3]:
        out.write(d + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.parity", description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", type=int, default=2000, help="parity programs (default 2000)")
    p.add_argument("--seeds", default="1", help="base seeds the programs are spread over (default 1)")
    p.add_argument("--steps", type=int, default=300, help="steps per program (default 300)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--every", type=int, default=100,
                   help="every n-th program also runs call by call with digests after every step (0: never)")
    p.add_argument("--release", default=None, help="the Flink release (default: the installed 2.3.0)")
    try:
        args = p.parse_args(argv)
        seeds = [int(s) for s in args.seeds.split(",")]
        if args.programs < 1 or args.workers < 1 or args.steps < 1 or args.every < 0:
            raise ValueError("--programs, --workers and --steps must be > 0, --every >= 0")
        if args.release:
            from cowcheck.flink.releases import release_lib, select_release

            select_release(args.release)
            release_lib(args.release)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"python -m cowcheck.flink.parity: {exc}", file=sys.stderr)
        return 2
    from cowcheck.flink.releases import selected_release

    parity = run_parity(args.programs, seeds, args.steps, args.workers, args.every)
    sys.stdout.write(f"parity (reference vs Flink {selected_release()}, capacity 128), seeds {args.seeds}, "
                     f"{args.workers} workers, {parity['seconds']:.1f} s\n")
    report(parity, sys.stdout)
    return 1 if parity["counts"]["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
