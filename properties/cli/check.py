"""``cowcheck check``: run the state machines against an implementation."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import TextIO

import attrs
from hypothesis import settings

from cowcheck.cli.common import (Progress, add_classpath, add_family_options, capacity_arg, check_output_directory,
                                   count_arg, minutes_arg, seconds_arg, one_line, seed_arg, step_seconds_arg, store_found,
                                   with_classpath)
from cowcheck.core import bounds, timing
from cowcheck.core.contract import pointer
from cowcheck.core.counterexample import Counterexample, CounterexampleError, load, replay_command, save
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import TIME_LIMIT, TIMEOUT, CheckFailure, Failure
from cowcheck.core.hunt import HuntResult, hunt
from cowcheck.core.impls import implementation_of, resolve
from cowcheck.core.limits import DEFAULT_STEP_TIME_LIMIT, StepTimeLimit, active_limit, unpaced
from cowcheck.core.machine import MACHINES, RunRecord, machine_kind
from cowcheck.core.profiles import stabilise_generation
from cowcheck.core.replay import replay_setup, replay_traced
from cowcheck.core.report import format_failure, format_summary
from cowcheck.core.settle import Subject, counterexample_of
from cowcheck.core.shrink import DEFAULT_REPLAYS
from cowcheck.core.walk_phase import DEFAULT_WALK_STEPS, DEFAULT_WALKS
from cowcheck.registry import DEFAULT_MACHINE
from cowcheck.map.harness import CONTRACTS
from cowcheck.map.ops import SIZE_CLASSES

__all__ = ["register", "check"]

DEFAULT_SHRINK_SECONDS = 60.0
DEFAULT_SAVE_DIR = ".cowcheck/counterexamples"


def register(sub) -> None:
    p = sub.add_parser("check", help="run the state machines against an implementation",
                       description="Run the Hypothesis state machines against an implementation and report "
                                   "coverage and failures. Exit 0: nothing found, 1: failure found (stored, "
                                   "shrunk, replayable), 2: bad usage, 3: internal error of cowcheck.")
    p.add_argument("--machine", default=DEFAULT_MACHINE, choices=sorted(MACHINES),
                   help="which state machine: " + "; ".join(f"{kind.name}: {kind.summary}" for kind in
                                                           sorted(MACHINES.values(), key=lambda k: k.name))
                        + f" (default {DEFAULT_MACHINE})")
    p.add_argument("--impl", default="reference",
                   help="reference | model | mutant:NAME | flink | MODULE:FACTORY (default: reference)")
    add_classpath(p)
    p.add_argument("--in-process", action="store_true",
                   help="run a MODULE:FACTORY map in cowcheck's own process (faster, and white-box if it offers "
                        "introspect(); but what its module or its code does, an os._exit or a patch of cowcheck "
                        "at import, then happens to the checker too). Default: the map runs in a process of its own")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=count_arg(bounds.MAX_EXAMPLES),
                        help="number of examples (default: the profile's)")
    budget.add_argument("--minutes", type=minutes_arg, help="run for this long instead of a fixed count")
    p.add_argument("--seed", type=seed_arg, help="seed for generation (default: random, printed)")
    p.add_argument("--walks", type=count_arg(bounds.MAX_WALKS, zero=True), metavar="N",
                   help=f"seeded swarm walks of {DEFAULT_WALK_STEPS} steps run through the same harness before "
                        f"Hypothesis, the fast path to a first failure (default {DEFAULT_WALKS}, at most "
                        f"--examples; 0: Hypothesis only; machines without walks skip the phase)")
    p.add_argument("--profile", choices=["ci", "dev", "nightly"], default="dev",
                   help="Hypothesis settings profile (default: dev)")
    p.add_argument("--sizes", choices=list(SIZE_CLASSES),
                   help="map machine: the largest size class walks and examples grow maps to: tiny (8 entries), "
                        "small (128), medium (4,000; the default), large (100,000; the default of --profile nightly)")
    p.add_argument("--capacity", type=capacity_arg,
                   help="initial map capacity (default: 4; 128 for flink, Flink's fixed capacity)")
    p.add_argument("--keys", type=count_arg(bounds.MAX_KEYS),
                   help="distinct keys the map machine uses (default: 12, or 5/4 of the capacity if larger, "
                        "so the map fills up and rehashes)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--black-box", action="store_true", help="check model properties only, no introspection")
    mode.add_argument("--white-box", action="store_true",
                      help="require the white-box checks: exit 2 if the implementation's introspect() view "
                           "does not conform (default: white-box when it conforms, else black-box with a notice)")
    p.add_argument("--epoch-mode", choices=["serial", "parallel"],
                   help="async machine: how non-records separate epochs (serial: SERIAL_BETWEEN_EPOCH, Flink's "
                        "default; parallel: PARALLEL_BETWEEN_EPOCH)")
    p.add_argument("--async-part", choices=["thread", "inline"], default=None,
                   help="backend machine: where a checkpoint's asynchronous part runs (default thread: on a thread "
                        "of its own while the next steps go on; inline: on the task thread, so no step races it)")
    p.add_argument("--contract", choices=list(CONTRACTS), default=None,
                   help="map machine: flink (default: snapshot isolation and Flink's copy discipline, P6) or "
                        "isolation (what any snapshot map owes, with no rule about when copies are made; "
                        "docs/contract.md)")
    add_family_options(p)
    p.add_argument("--strict-live-iteration", action="store_true",
                   help="hold live iteration to 'each entry once or an error' (Flink does not meet it)")
    p.add_argument("--step-time-limit", type=step_seconds_arg, default=DEFAULT_STEP_TIME_LIMIT,
                   metavar="SECONDS",
                   help=f"a step running longer is a TIMEOUT failure (default {DEFAULT_STEP_TIME_LIMIT:g})")
    p.add_argument("--shrink-seconds", type=seconds_arg(), default=DEFAULT_SHRINK_SECONDS, metavar="SECONDS",
                   help=f"time budget for shrinking a failure (default {DEFAULT_SHRINK_SECONDS:g})")
    p.add_argument("--replays", type=count_arg(bounds.MAX_REPLAYS), default=DEFAULT_REPLAYS, metavar="N",
                   help=f"replay a failing program N times before and after shrinking; one that does not fail "
                        f"every time is reported and stored as nondeterministic (default {DEFAULT_REPLAYS})")
    p.add_argument("--save-dir", default=DEFAULT_SAVE_DIR,
                   help="where shrunk failures are stored (default .cowcheck/counterexamples)")
    p.add_argument("--no-save", action="store_true", help="do not store the counterexample")
    p.add_argument("--no-replay-stored", action="store_true",
                   help="do not first replay the counterexamples of this implementation stored in --save-dir "
                        "(by default a stored failure that still fails is the verdict, before any search)")
    p.set_defaults(handler=check)


def check(args, stdout: TextIO, stderr: TextIO) -> int:
    with StepTimeLimit(args.step_time_limit, on_stuck=lambda seconds: _stuck(args, stdout, seconds), paced=True):
        return _check(args, stdout, stderr)


_RUN: dict = {}  # what on_stuck needs: the run's record and settings


def _check(args, stdout: TextIO, stderr: TextIO) -> int:
    if not args.no_save and args.save_dir != DEFAULT_SAVE_DIR:  # the default falls back to a temp dir if need be
        check_output_directory(args.save_dir, "--save-dir")
    kind = machine_kind(args.machine)
    args.impl = with_classpath(args.impl, args.classpath)
    factory = getattr(args, "factory", None)  # cowcheck.check(factory) from Python: this process, no spec
    impl = (resolve(args.impl, args.machine, isolated=not args.in_process) if factory is None
            else implementation_of(factory, args.machine))
    stabilise_generation()
    sized = "capacity" in attrs.fields_dict(kind.config_class)  # the map machine's configs have a capacity
    capacity = (args.capacity or impl.default_capacity) if sized else None
    keys = args.keys or (max(12, capacity * 5 // 4) if sized else None)
    if args.epoch_mode is not None and "epoch_mode" not in attrs.fields_dict(kind.config_class):
        raise UsageError(f"--epoch-mode applies to the async machine, not {args.machine!r}")
    if args.async_part is not None and "async_part" not in attrs.fields_dict(kind.config_class):
        raise UsageError(f"--async-part applies to the backend machine, not {args.machine!r}")
    for option in ("contract", "key_families", "namespace_families"):
        if getattr(args, option, None) is not None and option not in attrs.fields_dict(kind.config_class):
            raise UsageError(f"--{option.replace('_', '-')} applies to the map machine, not {args.machine!r}")
    sizes = args.sizes or ("large" if args.profile == "nightly" else None)  # maps up to 10^5 entries (docs/contract.md §17)
    families = {"key_families": getattr(args, "key_families", None),
                "namespace_families": getattr(args, "namespace_families", None)}
    config = kind.config_for(impl, capacity=capacity, keys=keys, white_box=False if args.black_box else None,
                             strict_live_iteration=args.strict_live_iteration, epoch_mode=args.epoch_mode,
                             sizes=sizes, contract=args.contract, async_part=args.async_part, **families)
    try:
        probed = kind.probe_implementation(impl, config, black_box=args.black_box, white_box=args.white_box)
    except CheckFailure as exc:  # building one crashed (ended its process, raised SystemExit...)
        return _failed_at_construction(args, stdout, stderr, exc.failure, kind, impl, config)
    white_box = probed.white_box
    families.update(probed.settings)  # the families it takes, when they were not chosen
    config = kind.config_for(impl, capacity=capacity, keys=keys, white_box=white_box,
                             strict_live_iteration=args.strict_live_iteration, epoch_mode=args.epoch_mode,
                             sizes=sizes, contract=args.contract, async_part=args.async_part, **families)
    base_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    profile = settings.get_profile(args.profile)
    total = args.examples or (None if args.minutes else profile.max_examples)
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    mode = "white-box" if white_box else "black-box"
    where = f", capacity {capacity}" if sized else ""
    level = f", contract {config.contract}" if hasattr(config, "contract") else ""
    stdout.write(f"cowcheck check: {args.machine} machine, {impl.spec} ({impl.description}), {mode}{where}"
                 f"{level}, profile {args.profile}, seed {base_seed}\n")
    stdout.flush()
    for notice in probed.notices:
        stderr.write(f"cowcheck: notice: {notice}\n")
    stderr.flush()

    if not args.no_replay_stored:
        again = _replay_stored(args, stdout, stderr, kind, impl)
        if again is not None:
            return again

    progress = Progress(stderr, total, deadline)
    record = RunRecord(on_example=lambda r: progress.update(r.examples, r.steps))
    subject = Subject.of(kind, impl.spec, impl.factory, config)
    _RUN.update(record=record, subject=subject, seed=base_seed, stderr=stderr)
    walks = default_walks(args.walks, args.examples) if kind.walker is not None else 0
    timing.reset()
    try:
        result = hunt(lambda rec: kind.builder(impl.factory, config, rec), subject, base_seed=base_seed,
                      profile=profile, examples=args.examples, deadline=deadline, record=record,
                      shrink_seconds=args.shrink_seconds, walker=kind.walker_for(config), walks=walks,
                      walk_with=impl.batched_walks(kind, config), replays=args.replays,
                      found_by={"tool": "cowcheck check", "seed": base_seed, "profile": args.profile})
    except KeyboardInterrupt:
        progress.finish()
        stdout.write("interrupted\n")
        stdout.write(format_summary(record, progress.elapsed(), kind, white_box, config))
        return 130
    progress.update(record.examples, record.steps, force=True)
    progress.finish()
    if result.slow_calls:
        limit = active_limit()
        stdout.write(f"slow calls: {result.slow_calls} ran past the run's pace and returned within the step time "
                     f"limit (not hangs; the work they stopped ran again; pace now {limit.pace:g} s)\n")
    walked = result.walks
    if result.failure is not None:  # stored before anything is printed: the failure survives its report
        saved = _save(args, stderr, result.counterexample)
        _hand_over(args, result.counterexample, saved)
    if walks:
        outcome = (f"failure in walk {walked.walks} (seed {walked.finding.seed})" if result.phase == "walks"
                   else "no failure")
        stdout.write(f"walk phase: {walked.walks} walks, {walked.steps:,} steps in {walked.seconds * 1000:.0f} ms; "
                     f"{outcome}\n")
    if result.phase == "walks":
        stdout.write(f"first failure found by the walk phase after {walked.seconds * 1000:.0f} ms; shrunk "
                     f"{result.original_length} -> {len(result.program)} steps in "
                     f"{result.seconds_to_shrink * 1000:.0f} ms\n")
        stdout.write(_verdict_time(result))
        stdout.write(format_failure(result.failure, result.program, impl.spec, kind, config,
                                    (result.reproduced, result.replays)))
        return _report_saved(stdout, saved, impl, args, result)
    stdout.write(format_summary(record, result.seconds_to_find, kind, white_box, config))
    if result.failure is None:
        return 0
    found_examples, found_steps = result.found_at
    stdout.write(f"first failure found by Hypothesis after {found_examples:,} examples, {found_steps:,} steps; "
                 f"shrunk {result.original_length} -> {len(result.program)} steps in "
                 f"{result.seconds_to_shrink * 1000:.0f} ms\n")
    stdout.write(_verdict_time(result))
    stdout.write(format_failure(result.failure, result.program, impl.spec, kind, config,
                                (result.reproduced, result.replays)))
    return _report_saved(stdout, saved, impl, args, result)


def _verdict_time(result: HuntResult) -> str:
    """Where the time from the start of the search to the verdict went (docs/benchmarks.md): finding
    (the walk phase, other failing walks included, or Hypothesis), confirming (replays of a failing
    program by another path, call by call), shrinking, replays (counting how reliably it fails)."""
    taken = timing.taken()
    confirming, replays = taken.get("confirming", 0.0), taken.get("replays", 0.0)
    shrinking = max(0.0, result.seconds_to_shrink - confirming - replays)
    finding = max(0.0, result.elapsed - result.seconds_to_shrink)
    return (f"time to the verdict: finding {finding * 1000:.0f} ms, confirming {confirming * 1000:.0f} ms, "
            f"shrinking {shrinking * 1000:.0f} ms, replays {replays * 1000:.0f} ms\n")


_STORED_MOST = 20  # stored counterexamples replayed before a check (the first ones by file name)


def _replay_stored(args, stdout: TextIO, stderr: TextIO, kind, impl) -> int | None:
    """Replay the counterexamples of ``impl`` (same spec, same machine) stored in ``--save-dir``
    first, as Hypothesis's database does: exit 1 with the first that still fails, else None
    (the search goes on). A file that does not load is skipped with a notice; each replay runs
    under the full step time limit (a stored hang is confirmed, not suspected)."""
    directory = Path(args.save_dir)
    if not directory.is_dir():
        return None
    mine = []
    for path in sorted(directory.glob("*.json")):
        if len(mine) == _STORED_MOST:
            break
        try:
            cx = load(path)
        except CounterexampleError as exc:
            stderr.write(f"cowcheck: notice: stored counterexample skipped: {one_line(str(exc))[:300]}\n")
            continue
        if cx.implementation == impl.spec and cx.machine == kind.name:
            mine.append((path, cx))
    if not mine:
        return None
    for index, (path, cx) in enumerate(mine):
        try:
            _, make_impl, options, cx_kind = replay_setup(cx, impl.spec, isolated=not args.in_process)
            with unpaced():
                outcome = replay_traced(list(cx.steps), make_impl, None, kind=cx_kind, **options)
        except (UsageError, CheckFailure) as exc:  # its settings do not apply any more: the search decides
            stderr.write(f"cowcheck: notice: stored counterexample {path} not replayed: "
                         f"{one_line(str(getattr(exc, 'failure', exc)))[:300]}\n")
            continue
        if outcome.failure is None:
            continue
        failure = outcome.failure
        stdout.write(f"stored counterexamples of {impl.spec}: {index + 1} of {len(mine)} replayed; {path} fails "
                     f"again ({failure.kind} {failure.code}; it was stored for {cx.failure.kind} "
                     f"{cx.failure.code}), before any search (--no-replay-stored to skip)\n")
        config = cx_kind.config_for(impl, capacity=cx.capacity or None, white_box=cx.white_box,
                                    strict_live_iteration=cx.strict_live_iteration, **cx.settings)
        stdout.write(format_failure(failure, list(cx.steps)[: failure.step_index + 1], impl.spec, cx_kind, config))
        stdout.write(f"replay:  {replay_command(path, impl.spec, args.in_process)}\n")
        return 1
    stdout.write(f"stored counterexamples of {impl.spec}: {len(mine)} replayed, none fails now\n")
    return None


def _failed_at_construction(args, stdout: TextIO, stderr: TextIO, failure: Failure, kind, impl, config) -> int:
    """The implementation could not be built at all: a failure of the empty program, stored and reported."""
    stdout.write(f"cowcheck check: {args.machine} machine, {impl.spec} ({impl.description})\n")
    subject = Subject.of(kind, impl.spec, impl.factory, config, white_box=False)
    cx = counterexample_of([], failure, subject, found_by={"tool": "cowcheck check", "generator": "probe",
                                                           "seed": args.seed})
    saved = _save(args, stderr, cx)
    _hand_over(args, cx, saved)
    stdout.write("building the implementation failed before any step\n")
    stdout.write(format_failure(failure, [], impl.spec, kind, config))
    return _report_saved(stdout, saved, impl, args)


def _hand_over(args, cx: Counterexample, saved) -> None:
    """What was found, for a caller from Python (:func:`cowcheck.check` passes a dict as ``found_into``)."""
    into = getattr(args, "found_into", None)
    if into is not None:
        into["found"] = (cx, saved[0] if saved else None)


def default_walks(walks: int | None, examples: int | None) -> int:
    """The walk phase's size: ``--walks``, else the default, at most ``--examples``."""
    if walks is not None:
        return walks
    return min(DEFAULT_WALKS, examples) if examples else DEFAULT_WALKS


def _save(args, stderr: TextIO, cx: Counterexample):
    """``(path, written)`` of the stored counterexample (None with --no-save or if it could not be stored)."""
    if args.no_save:
        return None
    return store_found(lambda directory: save(cx, directory), args.save_dir, stderr)


def _report_saved(stdout: TextIO, saved, impl, args, result: HuntResult | None = None) -> int:
    if result is not None and result.nondeterministic:
        stdout.write(f"the implementation is nondeterministic: the stored program failed in {result.reproduced} of "
                     f"{result.replays} replays (the verdict stands: it failed)\n")
    if saved is not None:
        path, written = saved
        verb = "saved" if written else "already stored (same signature, no longer)"
        stdout.write(f"{verb}: {path}\nreplay:  {replay_command(path, impl.spec, args.in_process)}\n")
    return 1


def _stuck(args, stdout: TextIO, seconds: float) -> None:
    """A step hangs in native code that cannot be interrupted: report it and
    store the program as it is (unshrunk); the process then exits with 1."""
    record = _RUN.get("record")
    harness = getattr(record, "last", None)
    if harness is None or not harness.steps:
        stdout.write(f"\ncowcheck: a call into the implementation has not returned after {seconds:.0f} s and "
                     f"cannot be interrupted (native code)\n")
        return
    steps, subject = list(harness.steps), _RUN["subject"]
    kind = subject.kind
    failure = Failure(TIMEOUT, TIME_LIMIT, f"{kind.render(steps[-1])}: did not return within the step time limit "
                                           f"of {args.step_time_limit:g} s and could not be interrupted (native "
                                           f"code; {seconds:.0f} s)", len(steps) - 1, "returns", "still running")
    stdout.write(f"\nFAILURE {failure.kind} {failure.code} after {len(steps)} steps (not shrunk: the step hangs "
                 f"in native code)\n  {failure.message}\n  {pointer(failure.code)}\n")
    if not args.no_save:
        cx = counterexample_of(steps, failure, subject, found_by={"tool": "cowcheck check", "generator": "hypothesis",
                                                                  "seed": _RUN["seed"], "profile": args.profile})
        saved = store_found(lambda directory: save(cx, directory), args.save_dir, _RUN.get("stderr", sys.stderr))
        if saved is not None:
            stdout.write(f"saved: {saved[0]}\nreplay:  {replay_command(saved[0], subject.spec, args.in_process)}\n")
    stdout.flush()
