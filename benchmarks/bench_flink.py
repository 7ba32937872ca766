"""Flink's own map through the bridge: parity with the reference, and what it costs.

Run from the repository root (needs ``pip install -e '.[flink]'``)::

    python -m benchmarks.bench_flink [--programs N] [--seeds 1,2,3,4] [--steps S] [--workers W]

What it does, in this order:

1. **Parity** (``cowcheck.flink.parity``, also ``python -m cowcheck.flink.parity``).
   ``--programs`` seeded programs (``cowcheck.map.parity.random_program``,
   split evenly over the ``--seeds``; one key family and one namespace family
   each, bulk steps included; most of them double the table and run the
   incremental rehash under snapshots) run on the reference at capacity 128 in
   Python and on Flink in one Java call each (``run_batch``: the harness over a
   batched walk on each side); every step's answers, size and structure summary,
   and the final structure digest (chains,
   entry and state versions, entry and state identity, every live snapshot's
   entries in order) must be identical. Every ``--every``-th program also runs
   call by call through the bridge with the full digest after every step
   (white-box mirrors), against the reference's. Programs are spread over
   ``--workers`` processes forked before any JVM exists; each starts its own
   JVM on first use, as campaign executors do (their start times are printed).
2. **JVM start** in this process (compile of the helper if not cached, start,
   class loading).
3. **Calls one at a time** through the bridge: get, contains_key, put of a
   known list, put of a new list (two Java calls), and an empty Java call.
4. **Batched**: a 200k-op put/get/contains/remove sequence in one Java call
   of the interpreter (``Walk.java``, black-box: Java time alone, and end to
   end: encoding, the call and its records decoded), and the parity programs'
   ops/s in Java.
5. **Bulk steps**: a ``put_range`` of ``--bulk`` keys (computed in Java) against
   as many single puts, per key family, in one Java call (alone, and end to end)
   and walked through the harness (batched) next to the reference's harness.
6. **Harness** (campaign-style): steps/s of ``Harness.apply`` on
   ``--impl flink`` and ``--impl reference`` (capacity 128), white-box and
   black-box, over the same programs.
7. **Campaign walks per core** (run before this process starts a JVM): the
   raw executor's seeds ``0:--campaign-seeds`` through ``run_range`` in a
   worker child, as a campaign's Spark task runs them, each configuration in a
   fresh worker (so each Flink run pays its JVM start): ``--impl reference``,
   ``--impl flink`` (batched walks, the default) and ``--impl flink
   --call-by-call``, black-box and white-box, capacity 128, maps up to the
   ``--sizes`` class (default large, as campaigns draw them). Checked ops/s
   with the worker's start-up included and without it, the start-up itself,
   and the ratios flink / reference against the targets (black-box >= 0.7,
   white-box >= 0.5).

Times are wall-clock (``time.perf_counter``); the parity counts are exact.
Exit 1 if any program differs.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from cowcheck.core.failures import CheckFailure
from cowcheck.core.program import Step
from cowcheck.flink import FlinkStateMap, jvm
from cowcheck.flink.batch import encode, java_keys
from cowcheck.flink.jvm import Java
from cowcheck.flink.segments import WalkHarness, WalkMap
from cowcheck.flink.parity import program_seeds, report, run_parity
from cowcheck.map.harness import Harness
from cowcheck.map.parity import random_program
from cowcheck.reference import CopyOnWriteStateMap


def calls_one_at_a_time(n: int) -> dict:
    """Bridge operations per second, one Python -> Java call (or two) each."""

    m = FlinkStateMap()
    states = [[k] for k in range(1000)]
    for k, s in enumerate(states):
        m.put(k, 0, s)
    rates = {}

    def rate(name, fn):
        t = time.perf_counter()
        fn()
        rates[name] = n / (time.perf_counter() - t)

    rate("get", lambda: [m.get(i % 1000, 0) for i in range(n)])
    rate("contains_key", lambda: [m.contains_key(i % 1000, 0) for i in range(n)])
    rate("put (its own list)", lambda: [m.put(i % 1000, 0, states[i % 1000]) for i in range(n)])
    rate("put (a new list: 2 calls)", lambda: [m.put(i % 1000, 0, [i]) for i in range(n)])
    handle = m._handle
    rate("empty Java call (size)", lambda: [handle.size() for _ in range(n)])
    return rates


def batched(ops: int, parity_programs: list) -> dict:
    keys = 1000
    program = []
    for i in range(ops):
        k = (i * 7919) % keys
        op = ("put", "get", "contains_key", "get", "put", "remove")[i % 6]
        program.append(Step(op, (k, 0, [i % 10]) if op == "put" else (k, 0)))
    code, table = _java_program(program)
    _java_walk(code, table, len(program))  # warm up the JIT
    t = time.perf_counter()
    _java_walk(code, table, len(program))
    java = time.perf_counter() - t
    t = time.perf_counter()
    _end_to_end(program)
    end_to_end = time.perf_counter() - t
    encoded = [_java_program(p) + (len(p),) for p in parity_programs]
    t = time.perf_counter()
    for c, tb, bound in encoded:
        _java_walk(c, tb, bound)
    mixed = time.perf_counter() - t
    return {"put/get/contains/remove, Java alone": ops / java,
            "put/get/contains/remove, end to end": ops / end_to_end,
            "parity programs (every op), Java alone": sum(map(len, parity_programs)) / mixed}


def _java_program(program: list) -> tuple:
    code, table = encode(program)
    return Java.int_array(code), java_keys(table)


def _java_walk(code, table, bound: int):
    """The program on a fresh Flink map in one call of the interpreter (black-box: answers only)."""
    return Java.Walk(False, "").run(code, table, bound)


def _end_to_end(program: list) -> None:
    """Encoding, the interpreter's call and its records decoded (what a batched walk pays besides the harness)."""
    walk = WalkMap()
    walk.start(False)
    walk.run(program, len(program))


def harness_rates(programs: list) -> dict:
    """Steps/s of Harness.apply per implementation and mode (campaign-style)."""

    rates = {}
    for name, factory in (("flink", FlinkStateMap), ("reference", lambda: CopyOnWriteStateMap(capacity=128))):
        for white_box in (True, False):
            steps = 0
            t = time.perf_counter()
            for program in programs:
                harness = Harness(factory(), white_box=white_box)
                try:
                    for step in program:
                        harness.apply(step)
                        steps += 1
                except CheckFailure as exc:
                    raise SystemExit(f"harness failure on {name}: {exc}") from None
            rates[f"{name}, {'white' if white_box else 'black'}-box"] = steps / (time.perf_counter() - t)
    return rates


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def campaign_rates(seeds: int, sizes: str) -> list[dict]:
    """Section 6: one row per (implementation, mode), each in a fresh worker child."""
    from cowcheck.spark_fuzz.executor import CampaignConfig
    from cowcheck.spark_fuzz.ranges import run_range, shutdown_worker

    rows = []
    for white_box in (False, True):
        for name, impl, batched in (("reference", "reference", True), ("flink", "flink", True),
                                    ("flink --call-by-call", "flink", False)):
            shutdown_worker()
            config = CampaignConfig(impl=impl, capacity=128, white_box=white_box, batched=batched, sizes=sizes)
            before = _children_cpu()
            t = time.perf_counter()
            result = run_range(0, seeds, config, isolate=True)
            seconds = time.perf_counter() - t
            shutdown_worker()  # reaped: its CPU time (all its threads, the JVM's included) is counted
            cpu = _children_cpu() - before
            bad = [o for o in result.outcomes if o.kind != "PASS"]
            if bad:
                raise SystemExit(f"campaign walks on {name}: seed {bad[0].seed} {bad[0].kind} {bad[0].code}: "
                                 f"{bad[0].message}")
            rows.append({"name": name, "mode": "white-box" if white_box else "black-box", "ops": result.ops,
                         "seconds": seconds, "startup": result.startup_seconds, "cpu": cpu})
    shutdown_worker()
    return rows


def bulk_steps(n: int, families=("int", "string", "tuple")) -> list[dict]:
    """A put_range of ``n`` keys against ``n`` single puts of the same keys, per family: in one Java
    call (Java alone, best of 3, and end to end), and walked through the harness (``WalkHarness``,
    batched, black-box) next to the reference's harness."""
    from cowcheck.core.keys import nth_key

    def best(fn, times: int) -> float:
        out = []
        for _ in range(times):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return min(out)

    def walk(harness, program):
        expect = getattr(harness, "expect", None)
        if expect is not None:
            expect(program)
        for step in program:
            harness.apply(step)

    rows = []
    for family in families:
        programs = {"put_range": [Step("put_range", (family, 0, n, 0, [1]))],
                    "single puts": [Step("put", (nth_key(family, i), 0, [1])) for i in range(n)]}
        for name, program in programs.items():
            code, table = _java_program(program)
            _java_walk(code, table, n)  # warm up
            rows.append({"family": family, "name": name,
                         "java": best(lambda: _java_walk(code, table, n), 3),
                         "end_to_end": best(lambda: _end_to_end(program), 2),
                         "walk": best(lambda: walk(WalkHarness(WalkMap(), white_box=False), program), 2),
                         "reference": best(lambda: walk(Harness(CopyOnWriteStateMap(capacity=128), white_box=False),
                                                        program), 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_flink", description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", type=int, default=10_000, help="parity programs (default 10000)")
    p.add_argument("--seeds", default="1,2,3,4", help="base seeds the programs are spread over (default 1,2,3,4)")
    p.add_argument("--steps", type=int, default=300, help="steps per program (default 300)")
    p.add_argument("--workers", type=int, default=2, help="worker processes for parity (default 2)")
    p.add_argument("--every", type=int, default=100,
                   help="every n-th program also runs call by call with digests after every step (0: never)")
    p.add_argument("--calls", type=int, default=200_000, help="calls per single-call measurement")
    p.add_argument("--harness-programs", type=int, default=20, help="programs for the harness ops/s (default 20)")
    p.add_argument("--bulk", type=int, default=25_000, help="keys of the bulk-step measurement (default 25000)")
    p.add_argument("--campaign-seeds", type=int, default=300,
                   help="seeds per campaign-walk measurement (default 300: one core's share of a 600-seed "
                        "campaign on 2 cores)")
    p.add_argument("--sizes", default="large", choices=("tiny", "small", "medium", "large"),
                   help="the largest size class the campaign walks grow maps to (default large, the campaign's "
                        "default)")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    out = sys.stdout

    parity = run_parity(args.programs, seeds, args.steps, args.workers, args.every)
    c = parity["counts"]
    out.write(f"parity (reference vs Flink 2.3.0, capacity 128), seeds {args.seeds}, {args.workers} workers, "
              f"{parity['seconds']:.1f} s\n")
    report(parity, out)

    # Before this process starts a JVM: the worker children start their own.
    out.write(f"campaign walks per core (raw executor, seeds 0:{args.campaign_seeds}, capacity 128, maps up to the "
              f"{args.sizes} size class, a fresh worker each)\n")
    out.write(f"  {'implementation':<22} {'mode':<10} {'ops/s':>9} {'w/o start':>10} {'start-up':>9} {'CPU s':>7} "
              f"{'ops/CPU s':>10}\n")
    rows = campaign_rates(args.campaign_seeds, args.sizes)
    for r in rows:
        out.write(f"  {r['name']:<22} {r['mode']:<10} {r['ops'] / r['seconds']:>9,.0f} "
                  f"{r['ops'] / (r['seconds'] - r['startup']):>10,.0f} {r['startup']:>8.2f}s {r['cpu']:>7.1f} "
                  f"{r['ops'] / max(r['cpu'], 1e-9):>10,.0f}\n")
    rate = {(r["name"], r["mode"]): r["ops"] / r["seconds"] for r in rows}
    per_cpu = {(r["name"], r["mode"]): r["ops"] / max(r["cpu"], 1e-9) for r in rows}
    for mode, target in (("black-box", 0.7), ("white-box", 0.5)):
        for name in ("flink", "flink --call-by-call"):
            ratio = rate[(name, mode)] / rate[("reference", mode)]
            out.write(f"  {name} / reference, {mode}: {ratio:.2f} (target >= {target}: "
                      f"{'met' if ratio >= target else 'not met'}); per CPU second "
                      f"{per_cpu[(name, mode)] / per_cpu[('reference', mode)]:.2f}\n")


    t = time.perf_counter()
    info = jvm()
    out.write(f"JVM (this process): {time.perf_counter() - t:.2f} s to first use (javac {info.compile_seconds:.2f} s, "
              f"start + class loading {info.start_seconds:.2f} s), Java {info.java_version}\n")

    out.write("calls one at a time (ops/s)\n")
    for name, rate in calls_one_at_a_time(args.calls).items():
        out.write(f"  {name:<38} {rate:>12,.0f}\n")
    sample = [random_program(s, args.steps) for s in program_seeds(200, seeds)]
    out.write("batched, one Java call per program (ops/s)\n")
    for name, rate in batched(200_000, sample).items():
        out.write(f"  {name:<38} {rate:>12,.0f}\n")
    out.write(f"bulk steps: a put_range of {args.bulk:,} keys and {args.bulk:,} single puts (ms; walked: the harness "
              f"on batched Flink, black-box, and on the reference)\n")
    out.write(f"  {'family':<8} {'steps':<12} {'Java alone':>10} {'end to end':>11} {'walked':>9} {'reference':>10}\n")
    for r in bulk_steps(args.bulk):
        out.write(f"  {r['family']:<8} {r['name']:<12} {r['java'] * 1e3:>10.1f} {r['end_to_end'] * 1e3:>11.1f} "
                  f"{r['walk'] * 1e3:>9.1f} {r['reference'] * 1e3:>10.1f}\n")
    out.write(f"harness, campaign-style (steps/s over {args.harness_programs} programs of {args.steps} steps)\n")
    for name, rate in harness_rates(sample[:args.harness_programs]).items():
        out.write(f"  {name:<38} {rate:>12,.0f}\n")
    return 1 if c["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
