"""``cowcheck campaign``: a seeded fuzz campaign on Spark (docs/campaigns.md).

Registered with the command line through the ``cowcheck.commands`` entry
point group (pyproject.toml), so ``properties`` never imports Spark.

Exit codes: 0 every seed passed, 1 a failure was found (in this run or, with
--resume, an earlier one), 2 bad usage or bad input (checked before Spark
starts: the implementation is resolved and one map built with the campaign's
arguments), 3 cowcheck itself failed on some seed (counted apart from the
implementation's failures, tracebacks in DIR/internal-errors/), 130
interrupted (what finished is saved; continue with --resume).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
from typing import TextIO

from cowcheck.cli.common import (EXIT_INTERNAL, add_classpath, capacity_arg, check_output_directory, count_arg,
                                   minutes_arg, one_line, seconds_arg, step_seconds_arg, store_found, with_classpath)
from cowcheck.core import bounds
from cowcheck.core.contract import pointer
from cowcheck.core.errors import UsageError
from cowcheck.core.impls import probe_isolated, resolve
from cowcheck.core.limits import DEFAULT_STEP_TIME_LIMIT
from cowcheck.core.machine import MACHINES, machine_kind
from cowcheck.registry import DEFAULT_MACHINE
from cowcheck.map.harness import CONTRACTS
from cowcheck.map.ops import SIZE_CLASSES
from cowcheck.spark_fuzz.driver import run_campaign
from cowcheck.spark_fuzz.executor import CampaignConfig, machine_config
from cowcheck.spark_fuzz.report import busy_seconds, failure_kind, headline, replay_command
from cowcheck.spark_fuzz.session import start
from cowcheck.spark_fuzz.store import CampaignStore, CampaignStoreError

__all__ = ["register", "campaign", "seed_range"]


def seed_range(text: str) -> tuple[int, int]:
    """``A:B`` -> (A, B) with 0 <= A < B, B at most MAX_SEED, at most MAX_SEEDS seeds."""
    first, sep, stop = text.partition(":")
    try:
        pair = (int(first), int(stop))
    except ValueError:
        pair = None
    if not sep or pair is None or not 0 <= pair[0] < pair[1]:
        raise argparse.ArgumentTypeError(f"expected A:B with 0 <= A < B (seeds A to B-1), got {one_line(text)[:60]!r}")
    if pair[1] > bounds.MAX_SEED.limit:
        raise argparse.ArgumentTypeError(f"seeds go up to {bounds.MAX_SEED.limit:,}: {bounds.MAX_SEED.reason}")
    if pair[1] - pair[0] > bounds.MAX_SEEDS.limit:
        raise argparse.ArgumentTypeError(f"at most {bounds.MAX_SEEDS.limit:,} seeds: {bounds.MAX_SEEDS.reason}")
    return pair


def register(sub) -> None:
    p = sub.add_parser(
        "campaign", help="run a seeded fuzz campaign on Spark (local or a cluster)",
        description="Spread seeds over Spark partitions; each seed is a swarm walk (or a Hypothesis run) "
                    "checked step by step against the model, failures shrunk. Writes Parquet tables, one "
                    "counterexample per distinct failure and report.md/report.html to --out. Exit 0: all "
                    "passed, 1: failures found, 2: bad usage, 130: interrupted (resume with --resume).")
    p.add_argument("--machine", default=DEFAULT_MACHINE, choices=sorted(MACHINES),
                   help=f"the state machine each seed runs: {', '.join(sorted(MACHINES))} (default {DEFAULT_MACHINE})")
    p.add_argument("--impl", default="reference",
                   help="reference | model | mutant:NAME | flink[@VERSION] | MODULE:FACTORY")
    add_classpath(p)
    p.add_argument("--master", help="Spark master (default local[*]; ignored under spark-submit, which sets its own)")
    p.add_argument("--partitions", type=count_arg(bounds.MAX_PARTITIONS),
                   help="seed ranges per Spark job (default: 4 per core; --seeds ranges hold at most 250 seeds)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--seeds", type=seed_range, metavar="A:B", help="run seeds A to B-1 (default 0:1000)")
    budget.add_argument("--minutes", type=minutes_arg, help="run rounds of new seeds until the time is up")
    p.add_argument("--executor", choices=["raw", "hypothesis"], default="raw",
                   help="raw: seeded swarm walks of the machine (fast); hypothesis: its Hypothesis state machine "
                        "(default raw)")
    p.add_argument("--out", default=".cowcheck/campaign", help="campaign directory (default .cowcheck/campaign)")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out, skipping finished ranges")
    p.add_argument("--capacity", type=capacity_arg,
                   help="map machine: initial capacity (default: 4; 128 for flink, Flink's fixed capacity)")
    p.add_argument("--steps", type=count_arg(bounds.MAX_STEPS), default=300,
                   help="steps per walk, or per example with --executor hypothesis (default 300)")
    p.add_argument("--sizes", choices=list(SIZE_CLASSES), default="large",
                   help="map machine: the largest size class walks grow maps to: tiny (8 entries), small (128), "
                        "medium (4,000), large (100,000; the default)")
    p.add_argument("--examples", type=count_arg(bounds.MAX_EXAMPLES), default=5,
                   help="Hypothesis examples per seed (--executor hypothesis; default 5)")
    p.add_argument("--invariants-every", type=count_arg(bounds.MAX_EVERY), default=1, metavar="N",
                   help="map machine: check the structural invariants I1-I9 after every N-th step and at the end "
                        "of each walk (default 1: every step); P1-P7 are checked after every step regardless")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--black-box", action="store_true", help="check model properties only, no introspection")
    mode.add_argument("--white-box", action="store_true",
                      help="require the white-box checks: exit 2 if the implementation's introspect() view "
                           "does not conform (default: white-box when it conforms, else black-box with a notice)")
    p.add_argument("--stop-after", type=count_arg(bounds.MAX_SEEDS), metavar="N",
                   help="stop once N distinct failures are known (what is left runs with --resume)")
    p.add_argument("--contract", choices=list(CONTRACTS), default="flink",
                   help="map machine: flink (default: snapshot isolation and Flink's copy discipline, P6) or isolation "
                        "(what any snapshot map owes, no rule about when copies are made; docs/contract.md)")
    p.add_argument("--strict-live-iteration", action="store_true",
                   help="map machine: hold live iteration to 'each entry once or an error' (Flink does not meet it)")
    p.add_argument("--seed-time-limit", type=seconds_arg(floor=bounds.MIN_SEED_SECONDS), default=60.0, metavar="SECONDS",
                   help="a walk longer than this is a TIMEOUT; a seed is killed at twice this plus slack "
                        "(default 60)")
    p.add_argument("--step-time-limit", type=step_seconds_arg, default=DEFAULT_STEP_TIME_LIMIT, metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT failure, shrunk and replayable (default "
                        f"{DEFAULT_STEP_TIME_LIMIT:g})")
    p.add_argument("--call-by-call", action="store_true",
                   help="run an implementation whose walks run batched (Flink's map; a MODULE:FACTORY in its own "
                        "process) one call per operation instead of a walk segment per call (slower; batched walks "
                        "confirm every failure this way before storing it)")
    p.add_argument("--in-process", action="store_true",
                   help="run a MODULE:FACTORY map in the process that checks it (default: in a process of its own, "
                        "so that what its module does, a patch of cowcheck at import included, cannot change "
                        "the verdict)")
    p.add_argument("--no-isolation", action="store_true",
                   help="run seeds in the Spark worker itself, not a forked child (no hard time limit; a "
                        "crashing seed costs a task retry)")
    p.set_defaults(handler=campaign)


def _checks(kind, config, white_box: bool, batched: bool = False) -> str:
    """What each step of the campaign checks, in the machine's codes (``MachineKind.checks``)."""
    mode = "white-box" if white_box else "black-box"
    if not kind.checks:
        return f"the {kind.name} machine's properties after every step ({mode})"
    properties, invariants = kind.checks
    walks = ", batched walks" if batched else ""
    if not white_box:
        return f"black-box: {properties} after every step, no {invariants}{walks}"
    if config.invariants_every == 1 or config.executor == "hypothesis":
        return f"{properties} and {invariants} after every step{walks}"
    if batched:
        return (f"{properties} and {invariants} after every step, batched walks ({invariants} computed on the "
                f"implementation's side)")
    return f"{properties} after every step, {invariants} after every {config.invariants_every}th step and at the end"


# Options of the machines whose config has the field of that name; their default.
_CONFIG_OPTIONS = (("capacity", None), ("sizes", "large"), ("contract", "flink"), ("strict_live_iteration", False))


def _check_options(args, kind) -> None:
    """Options of other machines' campaigns given to this one's: bad usage, one line."""
    def bad(option: str, whose: list[str]) -> UsageError:
        return UsageError(f"--{option.replace('_', '-')} applies to campaigns of the {' and '.join(whose)} machine"
                          f"{'s' if len(whose) > 1 else ''}, not the {kind.name} machine")

    fields = attrs.fields_dict(kind.config_class)
    for name, default in _CONFIG_OPTIONS:
        if getattr(args, name) != default and name not in fields:
            raise bad(name, sorted(k.name for k in MACHINES.values() if name in attrs.fields_dict(k.config_class)))
    if args.invariants_every != 1 and kind.sampled_harness is None:
        raise bad("invariants_every", sorted(k.name for k in MACHINES.values() if k.sampled_harness is not None))
    if args.executor == "raw" and kind.walker is None:
        raise UsageError(f"the {kind.name} machine has no seeded walks: use --executor hypothesis")


def campaign(args, stdout: TextIO, stderr: TextIO) -> int:
    if args.executor == "hypothesis" and args.invariants_every != 1:
        raise UsageError("--invariants-every applies to --executor raw only (the Hypothesis machine checks "
                         "I1-I9 after every step)")
    check_output_directory(args.out, "--out")
    kind = machine_kind(args.machine)
    _check_options(args, kind)
    args.impl = with_classpath(args.impl, args.classpath)  # the executors resolve the spec with the jars in it
    impl = resolve(args.impl, kind.name, isolated=not args.in_process)
    sized = "capacity" in attrs.fields_dict(kind.config_class)
    capacity = (args.capacity or impl.default_capacity) if sized else 0
    probed = probe_isolated(kind, impl, kind.config_for(impl, capacity=capacity or None), black_box=args.black_box,
                            white_box=args.white_box, step_time_limit=args.step_time_limit)
    white_box = probed.white_box
    config = CampaignConfig(impl=impl.spec, executor=args.executor, capacity=capacity, steps=args.steps,
                            examples=args.examples, invariants_every=args.invariants_every,
                            white_box=white_box, strict_live_iteration=args.strict_live_iteration,
                            seed_time_limit=args.seed_time_limit, step_time_limit=args.step_time_limit,
                            batched=not args.call_by_call, sizes=args.sizes, contract=args.contract,
                            in_process=args.in_process, machine=kind.name)
    settings = machine_config(config, kind, impl)
    batched = (config.batched and config.executor == "raw"
               and impl.batched_walks(kind, settings) is not None)
    seeds = args.seeds if args.seeds or args.minutes else (0, 1000)
    store = CampaignStore(args.out, defaults=CampaignConfig().to_json())
    try:  # one run of a campaign at a time, known before Spark starts
        store.acquire(config.to_json(), args.resume)
    except CampaignStoreError as exc:
        raise UsageError(str(exc)) from None
    budget = f"seeds {seeds[0]}:{seeds[1]}" if seeds else f"{args.minutes:g} minute{'' if args.minutes == 1 else 's'}"
    machine = "" if kind.name == DEFAULT_MACHINE else f"{kind.name} machine ({kind.summary}), "
    details = "".join([f", contract {settings.contract}" if hasattr(settings, "contract") else "",
                       f", maps up to {settings.sizes} ({SIZE_CLASSES[settings.sizes]:,} entries)"
                       if hasattr(settings, "sizes") else ""])
    stdout.write(f"cowcheck campaign: {machine}{impl.spec} ({impl.description}), executor {config.executor}, "
                 f"{budget}, {_checks(kind, config, white_box, batched)}{details}, out {args.out}\n")
    stdout.flush()
    if probed.notice:
        stderr.write(f"cowcheck: notice: {probed.notice}\n")
    try:
        return _run(args, stdout, stderr, kind, impl, config, white_box, batched, seeds, store)
    finally:
        store.close()


def _run(args, stdout: TextIO, stderr: TextIO, kind, impl, config, white_box: bool, batched: bool, seeds,
         store) -> int:
    sc, took = start(args.master)
    stdout.write(f"spark: {sc.master}, {sc.defaultParallelism} cores, started in {took:.1f} s\n")
    stdout.flush()
    meta = {"master": sc.master, "white_box": white_box, "invariants": _checks(kind, config, white_box, batched)}
    try:
        result = run_campaign(sc, config, Path(args.out), seeds=seeds, minutes=args.minutes,
                              partitions=args.partitions, resume=args.resume, isolate=not args.no_isolation,
                              progress=stderr, meta=meta, store=store, stop_after=args.stop_after)
    except CampaignStoreError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        stdout.write(f"interrupted: finished ranges and counterexamples are saved in {args.out}; "
                     f"continue with --resume\n")
        return 130
    own = result.this_run
    if len(own) == len(result.runs):
        stdout.write(f"{result.seeds:,} seeds, {result.ops:,} checked ops in {busy_seconds(own):,.1f} s of ranges "
                     f"running: {headline(own)} (as in report.md)\n")
    else:  # resumed: this run's own figure, then the campaign's (the report's)
        seeds, ops = sum(r["seeds"] for r in own), sum(r["ops"] for r in own)
        stdout.write(f"this run: {seeds:,} seeds, {ops:,} checked ops in {busy_seconds(own):,.1f} s of ranges "
                     f"running: {headline(own)}\n")
        stdout.write(f"the campaign: {result.seeds:,} seeds, {result.ops:,} checked ops in "
                     f"{busy_seconds(result.runs):,.1f} s: {headline(result.runs)} (as in report.md)\n")
    if result.stopped_after is not None:
        stdout.write(f"stopped: {len(result.distinct)} distinct failure{'' if len(result.distinct) == 1 else 's'} "
                     f"known (--stop-after {result.stopped_after}); continue with --resume\n")
    startups = sum(r.get("startups") or 0 for r in result.runs)
    if startups:
        paid = sum(r.get("startup_seconds") or 0.0 for r in result.runs)
        jvm = f" ({paid:.1f} s of JVM start inside them, {paid / startups:.2f} s each)" if paid else ""
        stdout.write(f"worker processes started: {startups}{jvm}\n")
    if not result.distinct:
        stdout.write("no failures\n")
    for row in result.distinct:
        stdout.write(f"FAILURE {failure_kind(row)} {row['signature']}: seed {row['seed']} "
                     f"(+{row['occurrences'] - 1} more seeds)\n  {row['message'][:200]}\n"
                     f"  {replay_command(args.out, row, kind.name)}\n  {pointer(row['code'])}\n")
    for signature, text in result.unstored:  # the campaign directory refused them (a full disk): elsewhere, said so
        store_found(lambda directory, signature=signature, text=text: (store.put_counterexample(signature, text, directory), True),
                    store.counterexamples_dir, stderr)
    if result.report_problem:
        stderr.write(f"cowcheck: no report: {result.report_problem}\n")
    else:
        stdout.write(f"report: {Path(args.out) / 'report.md'}  {Path(args.out) / 'report.html'}\n")
    if result.internal:
        first = result.internal[0]
        stderr.write(f"internal error in cowcheck on {len(result.internal)} seed"
                     f"{'' if len(result.internal) == 1 else 's'} (first: seed {first['seed']}: "
                     f"{first['message'][:300]}) (details in {Path(args.out) / 'internal-errors'})\n")
        return EXIT_INTERNAL
    return 1 if result.distinct else 0
