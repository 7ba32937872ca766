"""Campaign throughput: the executors per core, Spark scaling, Spark overhead, start-up.

Run from the repository root::

    python -m benchmarks.bench_campaign [--seconds S] [--repeat R]

What is measured, all in one run so that load from other users of the machine
hits every variant alike:

1. **Raw executor, checked ops/s per core** on the reference: ``run_seed``
   in this process over the same seeds, CPU time of this process
   (``time.process_time``). A checked op is one keyed operation applied to
   the map and the model (a bulk step of 1,000 keys counts 1,000), with P1–P7
   checked after its step; the variants differ in the structural invariants
   I1–I9: after every step (what the Hypothesis machines and the default
   campaign do; past 512 entries every ceil(entries/512)-th step), after every
   8th step (``--invariants-every 8``), never (``--black-box``, which also
   skips scenario classification); black-box on the classic space (int keys
   0..31, namespaces 0..3, maps of at most 128 entries, no bulk steps: what
   walks drew before the key families and size classes) beside the full space
   campaigns draw (every key family, fresh key objects, maps up to 100,000
   entries); and, for scale, walk generation alone (no checks at all).
   Variants run interleaved, ``--repeat`` times; the table shows the median.
2. **Hypothesis executor steps/s** (``--executor hypothesis``: the map state
   machine, invariants after every step), and its ratio to the raw executor
   with the same checks.
3. **Campaign throughput local[2] vs local[1]**: the same seeds run by
   ``run_campaign`` in a fresh process per master (a process holds one
   SparkContext), timed from the first job to the result, start-up excluded.
4. **Spark overhead vs plain multiprocessing**: the same seed ranges through
   the same ``run_range`` (fork-isolated) in a ``multiprocessing`` pool of 2
   processes; overhead = local[2] time / pool time - 1. Seeds are calibrated
   so the pool takes about ``--seconds`` (default 120: the 2-minute campaign
   of the target).
6. **Checking at scale**: large walks (to 50,000–100,000 entries) through the
   harness on the reference, black-box and white-box: the CPU seconds of
   checking (harness, model, invariants) per 10^5 operations, apart from the
   reference's own calls (the CPU time inside the harness's calls into it).
   Printed right after 1–2; ``--scale-only`` stops there.
5. **Spark start to first task**: from before ``import pyspark`` to the first
   task's result, in each of the processes of 3.

For each campaign the CPU time of every process taking part is reported too
(from ``/proc``, so Linux only: the pool's workers, or the Spark driver with
its JVM and Python workers, forked children included; start-up excluded),
which other jobs on the machine distort far less than wall time.

The three campaigns of 3 and 4 run ``--campaign-repeat`` times in rotating
order and the ratios are medians of adjacent runs. They are wall-clock
figures, so on a machine shared with other jobs they measure the share of
the CPUs the campaign got as much as Spark; the lines "ranges running at
once" (task time / wall time: 2.0 means both slots were always busy) show
what Spark itself achieved, independent of how fast each task ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_OPS_PER_CORE = 100_000
TARGET_SCALING = 1.7
TARGET_OVERHEAD = 0.10
TARGET_START = 15.0
STEPS = 300
CLASSIC = "raw, black-box, classic space"  # ints 0..31, namespaces 0..3, small maps, no bulk steps: the old world
TARGET_NEW_SPACE = 0.8  # black-box checked ops/s on the full space, at least this much of the classic space's
SEED_TIME_LIMIT = 3600.0  # seconds: the campaigns' 60 s must not cut a walk short on a loaded machine


def _config(**changes):
    from cowcheck.spark_fuzz.executor import CampaignConfig

    # The seed time limit is wall clock: on a loaded machine a large white-box walk of the reference
    # can pass a minute (seed 3: 73 s at load 16 on 2 cores), which would end the benchmark with a
    # TIMEOUT of the reference. Throughput is measured in CPU time; the limit is not what is measured.
    return CampaignConfig(impl="reference", steps=STEPS, seed_time_limit=SEED_TIME_LIMIT, **changes)


# ----------------------------------------------------------- 1 and 2: per core


def _cpu_rate(run, seeds) -> float:
    began = time.process_time()
    ops = sum(run(seed) for seed in seeds)
    return ops / (time.process_time() - began)


def per_core(repeat: int, seeds_per_round: int) -> dict[str, list[float]]:
    from cowcheck.spark_fuzz.executor import run_seed
    from cowcheck.map.walks import walk_program

    def checked(config):
        def run(seed):
            outcome = run_seed(seed, config)
            assert not outcome.failed, outcome
            return outcome.ops
        return run

    variants = {
        "raw, I1-I9 every step": checked(_config()),
        "raw, I1-I9 every 8th step": checked(_config(invariants_every=8)),
        "raw, black-box (P1-P7 only)": checked(_config(white_box=False)),
        CLASSIC: checked(_config(white_box=False, space="classic")),
        "walk generation only (no checks)": lambda seed: sum(1 for _ in walk_program(seed, STEPS, sizes="large")),
        "hypothesis, I1-I9 every step": checked(_config(executor="hypothesis", examples=1)),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(repeat):
        names = list(variants)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate the order per repeat
        for name in names:
            seeds = range(r * seeds_per_round, (r + 1) * seeds_per_round)
            if name.startswith("hypothesis"):
                seeds = range(r * seeds_per_round // 4, (r + 1) * seeds_per_round // 4)
            rates[name].append(_cpu_rate(variants[name], seeds))
    return rates


# ------------------------------------------------------------ 6: at scale


def checking_at_scale(seeds: int = 6) -> list[tuple[str, int, int, float, float]]:
    """Seconds of checking (the harness and the model) and of the implementation (the reference's
    calls) for large walks, black-box and white-box: ``(mode, walks, operations, implementation
    seconds, checking seconds)``. The implementation's share is the time inside the harness's calls
    into it, less what timing a call costs (measured on an empty call); ``perf_counter`` (a cheap
    clock: a dearer one would count itself as the implementation's)."""
    from cowcheck.core.profiles import tune_collector
    from cowcheck.map.harness import Harness
    from cowcheck.map.walks import walk_program
    from cowcheck.reference import CopyOnWriteStateMap

    tune_collector()
    clock = time.perf_counter

    class Timed(Harness):
        inside = 0.0
        calls = 0

        def _call(self, step, fn, *args, **kwargs):
            began = clock()
            try:
                return super()._call(step, fn, *args, **kwargs)
            finally:
                Timed.inside += clock() - began
                Timed.calls += 1

    plain = Harness(CopyOnWriteStateMap(capacity=4), white_box=False)
    probe = Timed(CopyOnWriteStateMap(capacity=4), white_box=False)
    empty = []
    for harness in (plain, probe, plain, probe):
        began = clock()
        for _ in range(200_000):
            harness._call(None, int)
        empty.append(clock() - began)
    timing = max(0.0, (empty[1] + empty[3] - empty[0] - empty[2]) / 400_000)  # what timing adds to a call
    chosen = [seed for seed in range(400) if _reaches(seed, 50_000)][:seeds]
    out = []
    for white_box in (False, True):
        Timed.inside, Timed.calls, ops = 0.0, 0, 0
        began = clock()
        for seed in chosen:
            harness = Timed(CopyOnWriteStateMap(capacity=4), white_box=white_box)
            steps = list(walk_program(seed, STEPS, sizes="large"))
            for step in steps:
                harness.apply(step)
            harness.final_check()
            ops += sum(map(Harness.operations_in, steps))
        total = clock() - began - Timed.calls * timing
        inside = Timed.inside - Timed.calls * timing
        out.append(("white-box" if white_box else "black-box", len(chosen), ops, inside, total - inside))
    return out


def _reaches(seed: int, entries: int) -> bool:
    """Whether the large walk of ``seed`` puts at least ``entries`` bulk keys (a walk to that size)."""
    from cowcheck.map.walks import walk_program

    return sum(s.args[2] for s in walk_program(seed, STEPS, sizes="large") if s.op == "put_range") >= entries


# ------------------------------------------------------- 3, 4, 5: Spark and pool


def _child(master: str, first: int, stop: int, partitions: int) -> None:
    """In a fresh process: start Spark, run the campaign, print timings as JSON."""
    began = time.perf_counter()
    from cowcheck.spark_fuzz.session import start

    sc, _ = start(master)
    sc.parallelize([0], 1).map(lambda x: x + 1).collect()
    first_task = time.perf_counter() - began
    from cowcheck.spark_fuzz.driver import run_campaign

    with tempfile.TemporaryDirectory() as out:
        cpu_before = tree_cpu(os.getpid())
        t0 = time.perf_counter()
        result = run_campaign(sc, _config(), os.path.join(out, "c"), seeds=(first, stop), partitions=partitions,
                              report=False)
        seconds = time.perf_counter() - t0
        cpu = tree_cpu(os.getpid()) - cpu_before
    task_seconds = sum(r["finished"] - r["started"] for r in result.runs)
    print(json.dumps({"master": master, "first_task": first_task, "seconds": seconds, "ops": result.ops,
                      "task_seconds": task_seconds, "cpu": cpu, "failures": len(result.failures)}))
    sc.stop()


def _spark(master: str, first: int, stop: int, partitions: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_campaign", "--child", master,
                           "--child-seeds", f"{first}:{stop}", "--child-partitions", str(partitions)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{master} campaign failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _pool_range(bounds):
    from cowcheck.spark_fuzz.ranges import run_range

    result = run_range(bounds[0], bounds[1], _config())
    return result.ops, result.finished - result.started


def _pool(ranges, processes: int) -> dict:
    import multiprocessing

    cpu_before = tree_cpu(os.getpid())
    began = time.perf_counter()
    # forkserver: workers start from a fresh process, as Spark's Python workers do from its daemon.
    with multiprocessing.get_context("forkserver").Pool(processes) as pool:
        done = list(pool.imap_unordered(_pool_range, ranges))
        cpu = tree_cpu(os.getpid()) - cpu_before
    return {"seconds": time.perf_counter() - began, "ops": sum(ops for ops, _ in done),
            "task_seconds": sum(span for _, span in done), "cpu": cpu}


def tree_cpu(root: int) -> float:
    """CPU seconds of process ``root`` and every live descendant, including the
    children each has waited for (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))  # ppid, utime..cstime
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total / ticks


# ------------------------------------------------------------------- report


def _row(name: str, value: str, target: str = "", verdict: str = "") -> str:
    return f"  {name:<44} {value:>16}  {target:<14} {verdict}"


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_campaign")
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="wall time the plain-multiprocessing campaign is calibrated to (default 120)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats of the per-core measurements (default 5)")
    parser.add_argument("--seeds-per-round", type=int, default=100, help="seeds per per-core measurement (default 100)")
    parser.add_argument("--campaign-repeat", type=int, default=2,
                        help="rounds of the three campaigns (pool, local[2], local[1]; default 2)")
    parser.add_argument("--scale-only", action="store_true",
                        help="sections 1, 2 and 6 only (no campaigns): the executors and the cost at scale")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-seeds", help=argparse.SUPPRESS)
    parser.add_argument("--child-partitions", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        first, stop = map(int, args.child_seeds.split(":"))
        _child(args.child, first, stop, args.child_partitions)
        return 0

    from cowcheck.spark_fuzz.driver import plan_ranges

    print(f"bench_campaign: Python {platform.python_version()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f}, walks of {STEPS} steps on the reference, capacity 4")
    rates = per_core(args.repeat, args.seeds_per_round)
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n1-2. Executors, checked ops/s per core (CPU time, median of {args.repeat}):")
    for name, value in median.items():
        checked = not name.startswith("walk")
        target = f">= {TARGET_OPS_PER_CORE:,}" if checked else ""
        print(_row(name, f"{value:,.0f}", target, _verdict(value >= TARGET_OPS_PER_CORE) if checked else ""))
    raw_full, hyp = median["raw, I1-I9 every step"], median["hypothesis, I1-I9 every step"]
    print(_row("raw / hypothesis (same checks)", f"{raw_full / hyp:.2f}x"))
    space = median["raw, black-box (P1-P7 only)"] / median[CLASSIC]
    print(_row("black-box: full space / classic space", f"{space:.2f}x", f">= {TARGET_NEW_SPACE}x",
               _verdict(space >= TARGET_NEW_SPACE)))

    print("\n6. Large walks (to 50,000-100,000 entries), CPU seconds of checking vs the implementation:")
    for mode, walks, ops, inside, checking in checking_at_scale():
        print(_row(f"{mode}: {walks} walks, {ops:,} operations", f"{checking / ops * 100_000:.2f} s",
                   "per 10^5 ops", f"(the reference's own calls: {inside / ops * 100_000:.2f} s per 10^5 ops)"))
    if args.scale_only:
        return 0

    # Seeds for a pool campaign of about --seconds, from a short pilot pool run (wall clock: the load counts).
    pilot_seeds = 16
    pilot = _pool(plan_ranges([(10**6, 10**6 + pilot_seeds)], 2), 2)
    total = max(16, int(pilot_seeds / (pilot["task_seconds"] / 2) * args.seconds))
    partitions = 8
    ranges = plan_ranges([(0, total)], partitions)
    print(f"\n3-5. Campaigns of seeds 0:{total} (I1-I9 every step), {len(ranges)} seed ranges, fork-isolated, "
          f"{args.campaign_repeat} rounds in rotating order:")
    runners = {"pool": lambda: _pool(ranges, 2), "local[2]": lambda: _spark("local[2]", 0, total, partitions),
               "local[1]": lambda: _spark("local[1]", 0, total, partitions)}
    runs: dict[str, list[dict]] = {name: [] for name in runners}
    for r in range(args.campaign_repeat):
        names = list(runners)
        for name in names[r % 3:] + names[:r % 3]:
            run = runners[name]()
            run["load"] = os.getloadavg()[0]
            runs[name].append(run)
            busy = run["task_seconds"] / run["seconds"]
            print(_row(f"round {r + 1}: {name}", f"{run['ops'] / run['seconds']:,.0f} ops/s",
                       f"{run['seconds']:.1f} s", f"ranges running at once {busy:.2f}, CPU {run['cpu']:.0f} s, "
                                                  f"load {run['load']:.1f}"))
    checked = {r["ops"] for rs in runs.values() for r in rs}
    if len(checked) != 1:
        print(f"  WARNING: the runs checked different numbers of ops: {sorted(checked)}")
    scaling = statistics.median(one["seconds"] / two["seconds"] for one, two in zip(runs["local[1]"], runs["local[2]"]))
    overhead = statistics.median(two["seconds"] / pool["seconds"] - 1 for two, pool in zip(runs["local[2]"], runs["pool"]))
    busy = {name: statistics.median(r["task_seconds"] / r["seconds"] for r in rs) for name, rs in runs.items()}
    print(_row("local[2] vs local[1] throughput (wall)", f"{scaling:.2f}x", f">= {TARGET_SCALING}x",
               _verdict(scaling >= TARGET_SCALING)))
    print(_row("  ranges running at once, local[2] / local[1]", f"{busy['local[2]'] / busy['local[1]']:.2f}x"))
    print(_row("Spark local[2] overhead vs the pool (wall)", f"{overhead * 100:+.1f}%", f"<= {TARGET_OVERHEAD:.0%}",
               _verdict(overhead <= TARGET_OVERHEAD)))
    print(_row("  slots busy: pool / Spark local[2]", f"{busy['pool'] / 2:.1%} / {busy['local[2]'] / 2:.1%}"))
    cpu = statistics.median(two["cpu"] / pool["cpu"] - 1 for two, pool in zip(runs["local[2]"], runs["pool"]))
    print(_row("  CPU time, Spark local[2] vs the pool", f"{cpu * 100:+.1f}%", "",
               "(every process of the campaign: driver, JVM, workers, forked children)"))
    start_up = statistics.median(r["first_task"] for r in runs["local[2]"] + runs["local[1]"])
    print(_row("Spark start to first task (median)", f"{start_up:.1f} s", f"< {TARGET_START:g} s",
               _verdict(start_up < TARGET_START)))
    print(_row("  all runs", ", ".join(f"{r['first_task']:.1f}" for r in runs["local[2]"] + runs["local[1]"]) + " s"))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
