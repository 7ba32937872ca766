"""The campaign executor: one seed in, one :class:`Outcome` out. Pure Python, no Spark.

``run_seed(seed, config)`` builds a program from the seed, runs it against
the implementation under test and the model step by step through
:class:`~properties.map.harness.Harness` (so P1–P7 and, white-box, I1–I9 apply),
and on failure shrinks it (:func:`properties.core.shrink.shrink_failure`: the
program is replayed 10 times before and after, and one that does not fail every
time is marked nondeterministic) and returns the counterexample as JSON data
(the file format of docs/counterexample-format.md). A call suspected of hanging
at the run's pace that returns under the full step time limit was only slow:
the seed's walk runs again at the new pace.
The Spark driver only spreads seeds and gathers outcomes; everything that
decides a verdict is here and is tested without Spark.

Two executors:

- ``raw`` (default): a seeded *swarm* walk
  (:func:`properties.map.walks.walk_program`): each seed draws its own op
  weights (some ops switched off), key and namespace space sizes and how
  often key == namespace (hash 0: one long chain).
- ``hypothesis``: the map state machine of :mod:`properties.map.machine` run by
  :func:`properties.core.hunt.hunt` with the seed as Hypothesis seed.

Determinism: generation uses ``random.Random(seed)`` only (never ``hash()``,
never set or dict order of strings), and layouts use the Java-compatible
hashes, so a seed gives the same program and the same outcome in every
process, executor and machine (``Outcome`` equality ignores timing).

>>> outcome = run_seed(7, CampaignConfig(impl="reference", steps=50))
>>> outcome.kind, outcome.ops > 50
('PASS', True)
"""

from __future__ import annotations

import functools
import time
import traceback
from collections import Counter

import attrs
from hypothesis import settings

import properties.machines  # noqa: F401  (every machine registered: campaigns of any of them)
from properties.core.boundary import build, construction_failure
from properties.core.counterexample import Counterexample, signature
from properties.core.errors import InternalError, UsageError
from properties.core.failures import CRASH, DIVERGENCE, INVARIANT, TIMEOUT, CheckFailure, Failure
from properties.core.hunt import hunt
from properties.core.impls import resolve
from properties.core.limits import DEFAULT_STEP_TIME_LIMIT
from properties.core.machine import RunRecord, machine_kind
from properties.core.profiles import PROFILES, stabilise_generation
from properties.core.report import nondeterminism_note
from properties.core.shrink import confirm_replay, is_hang, replay, shrink_failure
import properties.flink  # noqa: F401  (registers --impl flink in every worker process; starts no JVM)
from properties.map import MAP, MachineConfig, expected_results, make_map_machine
from properties.map.harness import Harness
from properties.map.harness import CONTRACTS
from properties.map.ops import MAP_OPS, SIZE_CLASSES
from properties.map.walks import SPACES, SampledHarness, walk_program

__all__ = ["CampaignConfig", "Outcome", "run_seed", "PASS", "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT", "INTERNAL",
           "KINDS", "EXECUTORS", "internal_outcome"]

PASS = "PASS"
INTERNAL = "INTERNAL"  # cowcheck itself failed on this seed: not the implementation's failure
KINDS = (PASS, DIVERGENCE, INVARIANT, CRASH, TIMEOUT, INTERNAL)
EXECUTORS = ("raw", "hypothesis")

# Codes of outcomes that are not a harness failure (no replayable program).
TIME_LIMIT = "time-limit"  # the seed ran longer than CampaignConfig.seed_time_limit
INTERNAL_CODE = "internal"  # the code of every INTERNAL outcome

def _positive(instance, attribute, value):
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r} ({type(value).__name__})")


@attrs.frozen
class CampaignConfig:
    """What every seed of a campaign runs.

    ``invariants_every``: check the structural invariants I1–I9 after every
    n-th step and at the end of the walk (1: after every step, as the
    Hypothesis machines do). The model properties P1–P7 run after every step
    whatever this is. A failure found with n > 1 is replayed with checks after
    every step before it is shrunk and stored, so counterexamples are the same
    either way; what n > 1 gives up is noticing a broken invariant that a later
    step repairs before the next check. White-box checks cost O(table length +
    entries each live snapshot reaches) per step; see docs/campaigns.md for
    measured throughput.

    ``steps``: steps per walk (raw) or per example (hypothesis);
    ``examples``: Hypothesis examples per seed (hypothesis executor only);
    ``seed_time_limit``: seconds a walk may take (then TIMEOUT); shrinking gets
    as long again. ``step_time_limit``: seconds one step may take (then a
    TIMEOUT failure of that step, shrunk and replayable like any other);
    applied by :func:`spark_fuzz.ranges.run_range`.

    ``batched``: where the implementation offers batched walks
    (``walk_harness``: Flink's map, :mod:`properties.flink.walk`), run each
    raw walk a segment per call into it, white-box invariants computed on its
    side after every step (so ``invariants_every`` does not apply); a failure
    is confirmed call by call before it is shrunk and stored.

    ``sizes``: the largest size class raw walks grow maps to (``large``: up to
    100,000 entries); ``space``: ``full`` (every key family) or ``classic``
    (:data:`properties.map.walks.SPACES`).

    ``known``: signatures the campaign has found (and shrunk) already: a seed
    failing with one of them again is counted, not shrunk (no counterexample of
    its own); set per job by the driver and grown by each range as it finds
    (:func:`learned`). ``deadline``: the campaign's end (``time.time()``) when it
    runs for ``--minutes``: shrinking stops there (at least a few seconds after
    the failure is found) and stores the shortest program so far. Neither is part
    of the campaign's manifest.

    ``machine``: the state machine a seed walks (``map`` by default; ``async``,
    ``checkpoint``, ``table``: one seeded walk of that machine's walker through its
    harness per seed, shrunk and stored as for the map; ``capacity``, ``sizes``,
    ``space``, ``invariants_every`` and ``batched`` are the map's).

    ``in_process``: a ``MODULE:FACTORY`` map runs in the process that checks it;
    by default it runs in a process of its own (:mod:`properties.core.remote`),
    its walks run ahead there and are checked here (:mod:`properties.core.ahead`).
    """

    impl: str = "reference"
    executor: str = attrs.field(default="raw", validator=attrs.validators.in_(EXECUTORS))
    capacity: int = 4
    steps: int = attrs.field(default=300, validator=_positive)
    examples: int = attrs.field(default=5, validator=_positive)
    invariants_every: int = attrs.field(default=1, validator=_positive)
    white_box: bool | None = None
    strict_live_iteration: bool = False
    seed_time_limit: float = attrs.field(default=60.0, validator=_positive)
    shrink: bool = True
    step_time_limit: float = attrs.field(default=DEFAULT_STEP_TIME_LIMIT, validator=_positive)
    batched: bool = True
    sizes: str = attrs.field(default="large", validator=attrs.validators.in_(tuple(SIZE_CLASSES)))
    space: str = attrs.field(default="full", validator=attrs.validators.in_(SPACES))
    in_process: bool = False
    contract: str = attrs.field(default="flink", validator=attrs.validators.in_(CONTRACTS))
    known: tuple = attrs.field(default=(), converter=tuple)
    deadline: float | None = None
    machine: str = "map"

    def to_json(self) -> dict:
        data = attrs.asdict(self)
        for name in ("known", "deadline"):  # (what the manifest holds: a campaign's settings, not its state)
            if not data[name]:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "CampaignConfig":
        fields = attrs.fields_dict(cls)
        return cls(**{k: v for k, v in data.items() if k in fields})


def learned(config: CampaignConfig, outcome: "Outcome") -> CampaignConfig:
    """``config`` for the next seed of a range: ``outcome``'s signature known once it was shrunk."""
    if outcome.counterexample is None or outcome.signature in config.known:
        return config
    return attrs.evolve(config, known=(*config.known, outcome.signature))


_SHRINK_AT_LEAST = 5.0  # seconds a failure found near a campaign's deadline may still be shrunk


def _sorted_counts(counter) -> dict:
    return {k: int(counter[k]) for k in sorted(counter)}


@attrs.frozen
class Outcome:
    """What one seed did. ``kind`` is PASS, a failure kind (DIVERGENCE,
    INVARIANT, CRASH, TIMEOUT) or INTERNAL (cowcheck itself failed: never the
    implementation's failure; ``details`` holds the traceback); ``code`` the
    property or invariant (P1–P7, I0–I9), ``raised`` (building the
    implementation raised), ``time-limit`` (a step, or the whole walk, ran past
    its limit) or ``worker-exit`` (the process running the seed died).
    ``counterexample`` is the shrunk failure as counterexample JSON data (None
    when there is no replayable program). ``ops``: steps applied and checked.
    ``nondeterministic``: ``reproduced k of n replays`` when the stored program
    did not fail in every replay (the implementation fails at random), else ''.
    Equality ignores ``seconds``.
    """

    seed: int
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    impl_spec: str = ""
    code: str = ""
    message: str = ""
    ops: int = 0
    coverage: dict = attrs.Factory(dict)
    findings: dict = attrs.Factory(dict)
    op_mix: dict = attrs.Factory(dict)
    space: dict = attrs.Factory(dict)  # state-space coverage (properties.map.space.SpaceCoverage.to_json)
    failing_op: str = ""
    original_steps: int = 0
    counterexample: dict | None = None
    seconds: float = attrs.field(default=0.0, eq=False)
    details: str = ""
    nondeterministic: str = ""

    @property
    def failed(self) -> bool:
        """The implementation failed (INTERNAL is cowcheck's failure, not its)."""
        return self.kind != PASS and self.kind != INTERNAL

    @property
    def internal(self) -> bool:
        return self.kind == INTERNAL

    @property
    def signature(self) -> str:
        """The stable name of the bug: the counterexample's (its file name
        without ``.json``), else built the same way from kind and code."""
        if self.counterexample is not None:
            return self.counterexample["signature"]
        if self.kind == PASS:
            return ""
        return signature(self.impl_spec, self.kind, self.code)

    def to_json(self) -> dict:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Outcome":
        return cls(**data)


# ----------------------------------------------------------------- run_seed


@functools.lru_cache(maxsize=16)
def _implementation(spec: str, in_process: bool = False, machine: str = "map"):
    return resolve(spec, machine, isolated=not in_process)


def _white_box(config: CampaignConfig, impl) -> bool | None:
    """White-box unless the config says black-box or the implementation has no
    introspection; None: the harness decides from the instance (a user's map)."""
    if config.white_box is not None:
        return bool(config.white_box) and impl.white_box is not False
    return impl.white_box


def run_seed(seed: int, config: CampaignConfig) -> Outcome:
    """Run seed ``seed`` of a campaign; never raises for anything the
    implementation does (a harness failure, an exception escaping the harness,
    a walk over the time limit all become outcomes)."""
    started = time.perf_counter()
    impl = _implementation(config.impl, config.in_process, config.machine)
    if config.machine != "map":
        return attrs.evolve(_run_machine_walk(seed, config, impl), seconds=time.perf_counter() - started)
    if config.executor == "hypothesis":
        outcome = _run_hypothesis(seed, config, impl)
    else:
        outcome = _run_walk(seed, config, impl, started)
    return attrs.evolve(outcome, seconds=time.perf_counter() - started)


def _run_machine_walk(seed: int, config: CampaignConfig, impl) -> Outcome:
    """A seed of another machine than the map's: one walk of its walker (``MachineKind.walker``)
    through its harness, a failure shrunk and stored as a counterexample of that machine."""
    kind = machine_kind(config.machine)
    if kind.walker is None or config.executor != "raw":
        raise UsageError(f"campaigns of the {kind.name} machine run its seeded walks (--executor raw)")
    machine_config = kind.config_for(impl, white_box=False if config.white_box is False else None)
    make_impl, options = kind.replay_setup(impl.factory, machine_config)
    base = dict(seed=seed, impl_spec=config.impl)
    try:
        if getattr(impl, "warm_up", None) is not None:
            try:  # once per process, outside the step time limit (a JVM starting in a loaded worker)
                impl.warm_up()
            except Exception as exc:
                raise CheckFailure(construction_failure(exc)) from None
        instance = build(make_impl)
        harness = kind.harness_class(instance, **options)
    except CheckFailure as exc:  # building it crashed: an empty program fails
        return _machine_outcome(seed, config, kind, machine_config, [], exc.failure, make_impl, options, {})
    program: list = []
    deadline = time.perf_counter() + config.seed_time_limit
    try:
        try:
            for step in kind.walker_for(machine_config)(seed, config.steps, instance):
                program.append(step)
                harness.apply(step)
                if not len(program) & 63 and time.perf_counter() > deadline:
                    return Outcome(kind=TIMEOUT, code=TIME_LIMIT, **base, message=f"walk still running after "
                                   f"{config.seed_time_limit:g} s ({len(program)} steps)",
                                   **_machine_counts(harness, program))
            final_check = getattr(harness, "final_check", None)
            if final_check is not None:
                final_check()
        finally:
            close = getattr(harness, "close", None)  # the async harness stops its controller's threads
            if close is not None:
                close()
    except CheckFailure as exc:
        counts = _machine_counts(harness, program)
        try:
            return _machine_outcome(seed, config, kind, machine_config, program, exc.failure, make_impl, options,
                                    counts)
        except Exception as error:  # shrinking or storing failed: cowcheck's error
            return internal_outcome(seed, config, error, **counts)
    except Exception as exc:  # cowcheck's own error (InternalError from the harness, or the walker)
        return internal_outcome(seed, config, exc, **_machine_counts(harness, program))
    return Outcome(kind=PASS, **base, **_machine_counts(harness, program))


def _machine_counts(harness, program: list) -> dict:
    return dict(ops=len(program), coverage=_sorted_counts(Counter(getattr(harness, "coverage", None) or {})),
                findings=_sorted_counts(Counter(getattr(harness, "findings", None) or {})),
                op_mix=_sorted_counts(Counter(s.op for s in program)), space={})


def _machine_outcome(seed, config, kind, machine_config, program, failure, make_impl, options, counts) -> Outcome:
    """A failing walk of another machine: shrunk (unless its signature is known) and stored."""
    program = program[: failure.step_index + 1]
    original = len(program)
    counts = counts or dict(ops=0, coverage={}, findings={}, op_mix={}, space={})
    if signature(config.impl, failure.kind, failure.code) in config.known and not is_hang(failure):
        return Outcome(seed=seed, kind=failure.kind, code=failure.code, message=failure.message,
                       failing_op=program[-1].op if program else "", original_steps=original,
                       impl_spec=config.impl, **counts)
    budget = config.seed_time_limit
    if config.deadline is not None:
        budget = min(budget, max(_SHRINK_AT_LEAST, config.deadline - time.time()))
    shrunk = shrink_failure(program, failure, make_impl, harness_class=kind.harness_class, shrink=config.shrink,
                            deadline=time.monotonic() + budget, **options)
    program, failure = shrunk.program, shrunk.failure
    found_by = {"tool": "cowcheck campaign", "generator": "walk", "seed": seed, "executor": config.executor,
                "steps": counts["ops"]}
    reproduced = (shrunk.reproduced, shrunk.replays)
    cx = Counterexample.build(program, failure, impl=config.impl, capacity=0, found_by=found_by,
                              expected=kind.expected_results(program), machine=kind.name,
                              white_box=bool(options.get("white_box", True)), settings=kind.settings(machine_config),
                              reproduced=reproduced)
    return Outcome(seed=seed, kind=failure.kind, code=failure.code, message=failure.message,
                   failing_op=program[failure.step_index].op if program else "", original_steps=original,
                   counterexample=cx.to_json(), impl_spec=config.impl,
                   nondeterministic=nondeterminism_note(reproduced).partition(": ")[2], **counts)


def _options(config: CampaignConfig, impl) -> dict:
    return {"white_box": _white_box(config, impl), "strict_live_iteration": config.strict_live_iteration,
            "contract": config.contract}


def _walk_harness(config: CampaignConfig, impl, options: dict):
    """The batched harness of ``impl`` for this config, or None (run call by call)."""
    if not config.batched or not callable(getattr(impl, "walk_harness", None)):
        return None
    return impl.walk_harness(config.capacity, **options)


def _run_walk(seed: int, config: CampaignConfig, impl, started: float) -> Outcome:
    while True:
        outcome = _walk_once(seed, config, impl, started)
        if outcome is not None:
            return outcome
        # A call suspected of hanging at the run's pace returned under the full limit: only slow.
        # The walk again, at the new pace (the same seed, the same walk).


def _walk_once(seed: int, config: CampaignConfig, impl, started: float) -> Outcome | None:
    options = _options(config, impl)
    base = dict(seed=seed, impl_spec=config.impl)
    try:
        harness = _walk_harness(config, impl, options)
        instance = build(lambda: impl.new(capacity=config.capacity)) if harness is None else harness.impl
    except CheckFailure as exc:  # building it crashed (SystemExit, its process ended...): an empty program fails
        return _with_counterexample(seed, config, [], exc.failure, functools.partial(impl.new, capacity=config.capacity),
                                    options, "walk", 0, dict(ops=0, coverage={}, findings={}, op_mix={}, space={}),
                                    (1, 1))
    every = config.invariants_every
    if harness is None:
        harness = (SampledHarness(instance, every=every, capacity=config.capacity, **options)
                   if every > 1 and options["white_box"] else Harness(instance, capacity=config.capacity, **options))
    options["white_box"] = harness.white_box
    deadline = started + config.seed_time_limit
    visitor = callable(getattr(instance, "incremental_visitor", None))
    program = walk_program(seed, config.steps, visitor, sizes=config.sizes, space=config.space)
    expect = getattr(harness, "expect", None)
    if expect is not None:  # a batched harness runs the program ahead, a segment per call
        program = list(program)
        expect(program)
    try:
        for i, step in enumerate(program):
            harness.apply(step)
            if not i & 63 and time.perf_counter() > deadline:
                return Outcome(kind=TIMEOUT, code=TIME_LIMIT, **base,
                               message=f"walk still running after {config.seed_time_limit:g} s "
                                       f"({len(harness.steps)} steps)", **_counts(harness))
        final_check = getattr(harness, "final_check", None)
        if final_check is not None:
            final_check()
    except CheckFailure as exc:
        failure = exc.failure
    except Exception as exc:  # cowcheck's own error (InternalError from the harness, or the walk itself)
        return internal_outcome(seed, config, exc, **_counts(harness))
    else:
        return Outcome(kind=PASS, **base, **_counts(harness))
    try:
        return _failed(seed, config, impl, harness, failure, options)
    except Exception as exc:  # shrinking or storing failed: cowcheck's error, not the implementation's
        return internal_outcome(seed, config, exc, **_counts(harness))


def internal_outcome(seed: int, config: CampaignConfig, exc: BaseException, **counts) -> Outcome:
    """The INTERNAL outcome of a seed on which cowcheck itself raised ``exc``."""
    summary = exc.summary if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    details = (exc.details if isinstance(exc, InternalError) and exc.details else "") + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Outcome(seed=seed, kind=INTERNAL, code=INTERNAL_CODE, impl_spec=config.impl,
                   message=f"internal error in cowcheck: {summary}", details=details, **counts)


def operations(steps) -> int:
    """Operations the steps apply: one per step, ``count`` per bulk step (``put_range`` of 1,000: 1,000)."""
    return sum(step.args[2] if _BULK.get(step.op) else 1 for step in steps)


_BULK = {op.name: op.bulk for op in MAP_OPS}


def _counts(harness: Harness) -> dict:
    space = getattr(harness, "space", None)
    return dict(ops=operations(harness.steps), coverage=_sorted_counts(harness.coverage),
                findings=_sorted_counts(harness.findings), op_mix=_sorted_counts(Counter(s.op for s in harness.steps)),
                space=space.folded().to_json() if space is not None else {})


def _failed(seed: int, config: CampaignConfig, impl, harness: Harness, failure: Failure,
            options: dict) -> Outcome | None:
    """The outcome of a failing walk, its program shrunk and its reliability measured; None if
    the failure was a call suspected of hanging that returned under the full limit."""
    program = list(harness.steps)
    make = functools.partial(impl.new, capacity=config.capacity)
    shrink_make, shrink_class = make, Harness
    batched = getattr(harness, "expect", None) is not None
    # A walk run ahead in a user's map's process reports only failures it confirmed live (call by call)
    live = getattr(type(harness), "confirmed_on_replay", False)
    hang = is_hang(failure)  # replayed under the full limit by shrink_failure, once (each costs the limit)
    if (isinstance(harness, SampledHarness) or batched) and not hang:
        # Checked after every step, call by call, the program may fail earlier or with another
        # code: that failure is the one `cowcheck replay` shows. A batched walk's must be the same.
        if batched and live:
            confirmed = None
            shrink_make, shrink_class = impl.walk_factory(config.capacity)
        elif batched:
            confirmed = confirm_replay(program, failure, make, harness_class=Harness, what="the walk", **options)
            shrink_make, shrink_class = impl.walk_factory(config.capacity)
        else:
            confirmed = replay(program, make, harness_class=Harness, **options)
        failure = confirmed or failure
        program = program[: failure.step_index + 1]
    original = len(program[: failure.step_index + 1])
    if signature(config.impl, failure.kind, failure.code) in config.known and not hang:
        # Found and shrunk before: counted (occurrences), its seed kept; shrinking it again would
        # cost a minute of a campaign that keeps re-finding its first bug.
        return Outcome(seed=seed, kind=failure.kind, code=failure.code, message=failure.message,
                       failing_op=program[failure.step_index].op if program else "", original_steps=original,
                       impl_spec=config.impl, **_counts(harness))
    budget = config.seed_time_limit
    if config.deadline is not None:
        budget = min(budget, max(_SHRINK_AT_LEAST, config.deadline - time.time()))
    shrunk = shrink_failure(program, failure, shrink_make, harness_class=shrink_class, shrink=config.shrink,
                            deadline=time.monotonic() + budget, **options)
    if not shrunk.confirmed:
        return None
    program, failure = shrunk.program, shrunk.failure
    if batched and config.shrink and not hang and not live:  # the stored failure is the call-by-call bridge's, as replay shows
        failure = confirm_replay(program, failure, make, harness_class=Harness, what="the shrunk program", **options)
    return _with_counterexample(seed, config, program, failure, make, options, "walk", original, _counts(harness),
                                (shrunk.reproduced, shrunk.replays))


def _with_counterexample(seed, config, program, failure, make, options, generator, original, counts,
                         reproduced: tuple) -> Outcome:
    found_by = {"tool": "cowcheck campaign", "generator": generator, "seed": seed, "executor": config.executor,
                "steps": counts["ops"]}
    cx = Counterexample.build(program, failure, impl=config.impl, capacity=config.capacity, found_by=found_by,
                              expected=expected_results(program), white_box=options["white_box"],
                              strict_live_iteration=options["strict_live_iteration"],
                              settings=MAP.settings(MachineConfig(contract=config.contract)), reproduced=reproduced)
    return Outcome(seed=seed, kind=failure.kind, code=failure.code, message=failure.message,
                   failing_op=program[failure.step_index].op if program else "", original_steps=original,
                   counterexample=cx.to_json(), impl_spec=config.impl,
                   nondeterministic=nondeterminism_note(reproduced).partition(": ")[2], **counts)


def _run_hypothesis(seed: int, config: CampaignConfig, impl) -> Outcome:
    stabilise_generation()
    options = _options(config, impl)
    op_mix: Counter = Counter()
    record = RunRecord()
    machine_config = MachineConfig(capacity=config.capacity, **options)
    profile = settings(**dict(PROFILES["ci"], max_examples=config.examples, stateful_step_count=config.steps,
                              derandomize=False))
    make = functools.partial(impl.new, capacity=config.capacity)
    previous: list = []

    def on_example(rec: RunRecord) -> None:
        if previous:
            op_mix.update(s.op for s in previous[-1].steps)
        previous[:] = [rec.last]

    record.on_example = on_example
    try:
        result = hunt(lambda rec: make_map_machine(impl.factory, machine_config, rec, impl_spec=impl.spec), make,
                      base_seed=seed, profile=profile, examples=config.examples, record=record,
                      harness_options=options, replay_harness=MAP.harness_class)
    except InternalError as exc:
        return internal_outcome(seed, config, exc, ops=record.steps)
    coverage = Counter(record.coverage)
    if record.last is not None:
        op_mix.update(s.op for s in record.last.steps)
        if result.failure is not None:
            coverage.update(record.last.coverage)
    counts = dict(ops=record.steps, coverage=_sorted_counts(coverage), findings=_sorted_counts(record.findings),
                  op_mix=_sorted_counts(op_mix))
    if result.failure is None:
        return Outcome(seed=seed, kind=PASS, impl_spec=config.impl, **counts)
    return _with_counterexample(seed, config, result.program, result.failure, make, options, "hypothesis",
                                result.original_length, counts, (result.reproduced, result.replays))
