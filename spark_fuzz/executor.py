"""The campaign executor: one seed in, one :class:`Outcome` out. Pure Python, no Spark.

``run_seed(seed, config)`` runs one seed of a campaign of any machine
(``config.machine``): it builds a program from the seed, runs it against the
implementation under test and the model step by step through the machine's
harness (for the map, P1–P7 and, white-box, I1–I9 apply), and on failure takes
the path of every failure to its counterexample
(:func:`cowcheck.core.settle.settle`: confirmed call by call if a batched
walk found it, replayed 10 times before and after shrinking, a program that
does not fail every time marked nondeterministic), returned as the text of its
file (docs/counterexample-format.md): the one value the worker, the driver and
the campaign's tables carry to ``DIR/counterexamples/``. A call suspected of
hanging at the run's pace that returns under the full step time limit was only
slow: the seed's walk runs again at the new pace. The Spark driver only spreads
seeds and gathers outcomes; everything that decides a verdict is here and is
tested without Spark.

Two executors:

- ``raw`` (default): a seeded *swarm* walk of the machine's walker
  (``MachineKind.walker``; the map's is :func:`cowcheck.map.walks.walk_program`:
  each seed draws its own op weights, some ops switched off, key and namespace
  space sizes and how often key == namespace, hash 0: one long chain), through
  the implementation's batched walks where it has them
  (``Implementation.batched_walks``: Flink's map, a map in its own process);
- ``hypothesis``: the machine's Hypothesis state machine (``MachineKind.builder``)
  run by :func:`cowcheck.core.hunt.hunt` with the seed as Hypothesis seed.

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

import cowcheck.flink  # noqa: F401  (registers --impl flink in every worker process; starts no JVM)
from cowcheck.core.boundary import build, construction_failure
from cowcheck.core.counterexample import signature
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import CRASH, DIVERGENCE, INVARIANT, TIMEOUT, CheckFailure, Failure
from cowcheck.core.hunt import hunt
from cowcheck.core.impls import resolve
from cowcheck.core.limits import DEFAULT_STEP_TIME_LIMIT, active_limit, implementation_seconds
from cowcheck.core.machine import MachineKind, RunRecord, machine_kind
from cowcheck.core.profiles import PROFILES, stabilise_generation
from cowcheck.core.report import nondeterminism_note
from cowcheck.core.settle import Settled, Subject, UnreproducibleFailure, settle
from cowcheck.registry import DEFAULT_MACHINE
from cowcheck.map.harness import CONTRACTS
from cowcheck.map.ops import SIZE_CLASSES
from cowcheck.map.walks import SPACES

__all__ = ["CampaignConfig", "Outcome", "run_seed", "PASS", "DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT", "INTERNAL",
           "KINDS", "EXECUTORS", "internal_outcome", "machine_config"]

PASS = "PASS"
INTERNAL = "INTERNAL"  # cowcheck itself failed on this seed: not the implementation's failure
KINDS = (PASS, DIVERGENCE, INVARIANT, CRASH, TIMEOUT, INTERNAL)
EXECUTORS = ("raw", "hypothesis")

# Codes of outcomes that are not a harness failure (no replayable program).
TIME_LIMIT = "time-limit"  # the seed ran longer than CampaignConfig.seed_time_limit
INTERNAL_CODE = "internal"  # the code of an INTERNAL outcome
UNREPRODUCIBLE = "unreproducible"  # ... of one whose failure is cowcheck's nondeterminism (UnreproducibleFailure)

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
    ``seed_time_limit``: seconds of the implementation's own time a walk may take
    (then TIMEOUT; under a step time limit, cowcheck's checking between its calls
    is not charged, :func:`cowcheck.core.limits.implementation_seconds`);
    shrinking gets as long again. ``step_time_limit``: seconds one step may take
    (then a TIMEOUT failure of that step, shrunk and replayable like any other);
    applied by :func:`cowcheck.spark_fuzz.ranges.run_range`.

    ``batched``: where the implementation offers batched walks
    (``Implementation.batched_walks``: Flink's map, :mod:`cowcheck.flink.segments`;
    a map in its own process), run each raw walk a segment per call into it,
    white-box invariants computed on its side after every step (so
    ``invariants_every`` does not apply); a failure is confirmed call by call
    before it is shrunk and stored.

    ``sizes``: the largest size class raw walks grow maps to (``large``: up to
    100,000 entries); ``space``: ``full`` (every key family) or ``classic``
    (:data:`cowcheck.map.walks.SPACES`).

    ``known``: signatures the campaign has found (and shrunk) already: a seed
    failing with one of them again is counted, not shrunk (no counterexample of
    its own); set per job by the driver and grown by each range as it finds
    (:func:`learned`). ``deadline``: the campaign's end (``time.time()``) when it
    runs for ``--minutes``: shrinking stops there (at least a few seconds after
    the failure is found) and stores the shortest program so far. Neither is part
    of the campaign's manifest.

    ``machine``: the state machine a seed runs (any registered one: its walker or its
    Hypothesis machine, through its harness); ``capacity``, ``sizes``, ``space``,
    ``contract``, ``strict_live_iteration`` and ``key_families``/``namespace_families``
    (the families chosen or probed, docs/contract.md §17; None: every one) apply to
    machines whose config has them (the map's), ``invariants_every`` to machines with a
    ``sampled_harness``.

    ``in_process``: a ``MODULE:FACTORY`` map runs in the process that checks it;
    by default it runs in a process of its own (:mod:`cowcheck.core.remote`),
    its walks run ahead there and are checked here (:mod:`cowcheck.core.ahead`).
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
    key_families: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    namespace_families: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    known: tuple = attrs.field(default=(), converter=tuple)
    deadline: float | None = None
    machine: str = DEFAULT_MACHINE

    def to_json(self) -> dict:
        data = attrs.asdict(self)
        for name in ("known", "deadline", "key_families", "namespace_families"):
            if not data[name]:  # (the manifest holds a campaign's settings, not its state; families if chosen)
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
    ``counterexample`` is the shrunk failure as the text of its counterexample
    file (None when there is no replayable program, or the failure's signature
    was known: counted, not shrunk again), ``shrunk_steps`` its length.
    ``ops``: operations applied and checked (a bulk step counts its keys).
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
    space: dict = attrs.Factory(dict)  # state-space coverage (cowcheck.map.space.SpaceCoverage.to_json)
    failing_op: str = ""
    original_steps: int = 0
    counterexample: str | None = None
    shrunk_steps: int | None = None
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
        """The stable name of the bug (its counterexample file's name without ``.json``)."""
        return "" if self.kind == PASS else signature(self.impl_spec, self.kind, self.code)

    def to_json(self) -> dict:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Outcome":
        return cls(**data)


# ----------------------------------------------------------------- run_seed


@functools.lru_cache(maxsize=16)
def _implementation(spec: str, in_process: bool, machine: str):
    return resolve(spec, machine, isolated=not in_process)


def _white_box(config: CampaignConfig, impl) -> bool | None:
    """White-box unless the config says black-box or the implementation has no
    introspection; None: the harness decides from the instance (a user's map)."""
    if config.white_box is not None:
        return bool(config.white_box) and impl.white_box is not False
    return impl.white_box


def machine_config(config: CampaignConfig, kind: MachineKind, impl, walks: bool = True):
    """The machine's config for the seeds of ``config`` (the settings the machine has; ``walks``:
    with the size class and key space of walks, which Hypothesis examples leave at its defaults)."""
    sizes = dict(sizes=config.sizes, space=config.space) if walks else {}
    return kind.config_for(impl, capacity=config.capacity or None, white_box=_white_box(config, impl),
                           strict_live_iteration=config.strict_live_iteration, contract=config.contract,
                           key_families=config.key_families, namespace_families=config.namespace_families, **sizes)


def run_seed(seed: int, config: CampaignConfig) -> Outcome:
    """Run seed ``seed`` of a campaign; never raises for anything the
    implementation does (a harness failure, an exception escaping the harness,
    a walk over the time limit all become outcomes)."""
    started = time.perf_counter()
    kind = machine_kind(config.machine)
    impl = _implementation(config.impl, config.in_process, kind.name)
    if config.executor == "hypothesis":
        outcome = _run_hypothesis(seed, config, kind, impl)
    else:
        outcome = _run_walk(seed, config, kind, impl)
    return attrs.evolve(outcome, seconds=time.perf_counter() - started)


def _run_walk(seed: int, config: CampaignConfig, kind: MachineKind, impl) -> Outcome:
    if kind.walker is None:
        raise UsageError(f"the {kind.name} machine has no seeded walks: use --executor hypothesis")
    clock = implementation_seconds if active_limit() is not None else time.perf_counter
    charged = clock()  # the walk's budget charges the implementation's own time, where a limit watches it
    while True:
        outcome = _walk_once(seed, config, kind, impl, (clock, charged))
        if outcome is not None:
            return outcome
        # A call suspected of hanging at the run's pace returned under the full limit: only slow.
        # The walk again, at the new pace (the same seed, the same walk).


def _walk_once(seed: int, config: CampaignConfig, kind: MachineKind, impl, budget: tuple) -> Outcome | None:
    """One seeded walk of the machine's walker through its harness: the implementation's batched
    walks if it has them, the harness checking the structural invariants at every n-th step if
    ``invariants_every`` asks for it (and the machine has one), else the machine's own harness.
    ``budget``: ``(clock, reading)``, the clock the seed's time limit runs on and its reading as
    the seed started."""
    subject = Subject.of(kind, config.impl, impl.factory, machine_config(config, kind, impl))
    batched = impl.batched_walks(kind, subject.config) if config.batched else None
    make, harness_class = batched or (subject.make, kind.harness_class)
    every = config.invariants_every
    sampled = batched is None and every > 1 and subject.options.get("white_box") and kind.sampled_harness
    base = dict(seed=seed, impl_spec=config.impl)
    try:
        if impl.warm_up is not None:  # once per process, outside the step time limit (a JVM starting in a loaded worker)
            try:
                impl.warm_up()
            except Exception as exc:
                raise CheckFailure(construction_failure(exc)) from None
        instance = build(make)
        harness = (kind.sampled_harness(instance, every=every, **subject.options) if sampled
                   else harness_class(instance, **subject.options))
    except CheckFailure as exc:  # building it crashed (SystemExit, its process ended...): an empty program fails
        return _failed(seed, config, subject, [], exc.failure, None, _EMPTY)
    if "white_box" in subject.options:  # as the harness decided it (a user's map: if its view conforms)
        subject = attrs.evolve(subject, options=dict(subject.options, white_box=harness.white_box))
    clock, charged = budget
    deadline = charged + config.seed_time_limit
    program = kind.walker_for(subject.config)(seed, config.steps, instance)
    if harness.runs_ahead:  # it runs the program ahead, a segment per call
        program = list(program)
        harness.expect(program)
    try:
        try:
            for i, step in enumerate(program):
                harness.apply(step)
                if not i & 63 and clock() > deadline:
                    return Outcome(kind=TIMEOUT, code=TIME_LIMIT, **base,
                                   message=f"walk still running after {config.seed_time_limit:g} s of the "
                                           f"implementation's time ({len(harness.steps)} steps)", **_counts(harness))
            harness.final_check()
        finally:
            harness.close()  # (the async harness stops its controller's threads)
    except CheckFailure as exc:
        failure = exc.failure
    except Exception as exc:  # cowcheck's own error (InternalError from the harness, or the walk itself)
        return internal_outcome(seed, config, exc, **_counts(harness))
    else:
        return Outcome(kind=PASS, **base, **_counts(harness))
    counts = _counts(harness)
    try:
        return _failed(seed, config, subject, list(harness.steps), failure, (make, type(harness)), counts)
    except Exception as exc:  # shrinking or storing failed: cowcheck's error, not the implementation's
        return internal_outcome(seed, config, exc, **counts)


def internal_outcome(seed: int, config: CampaignConfig, exc: BaseException, **counts) -> Outcome:
    """The INTERNAL outcome of a seed on which cowcheck itself raised ``exc``."""
    summary = exc.summary if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    details = (exc.details if isinstance(exc, InternalError) and exc.details else "") + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, UnreproducibleFailure):  # (its own code: docs/contract.md, unreproducible)
        return Outcome(seed=seed, kind=INTERNAL, code=UNREPRODUCIBLE, impl_spec=config.impl,
                       message=f"internal error in cowcheck: {summary}", details=details, **counts)
    return Outcome(seed=seed, kind=INTERNAL, code=INTERNAL_CODE, impl_spec=config.impl,
                   message=f"internal error in cowcheck: {summary}", details=details, **counts)


_EMPTY = dict(ops=0, coverage={}, findings={}, op_mix={}, space={})


def _counts(harness) -> dict:
    steps, space = harness.steps, harness.space
    return dict(ops=sum(map(harness.operations_in, steps)), coverage=_sorted_counts(harness.coverage),
                findings=_sorted_counts(harness.findings), op_mix=_sorted_counts(Counter(s.op for s in steps)),
                space=space.folded().to_json() if space is not None else {})


def _shrink_budget(config: CampaignConfig) -> float:
    """Seconds a failure may be shrunk: as long as a walk may take, and no later than the campaign's
    end (at least a few seconds)."""
    budget = config.seed_time_limit
    if config.deadline is not None:
        budget = min(budget, max(_SHRINK_AT_LEAST, config.deadline - time.time()))
    return budget


def _failed(seed: int, config: CampaignConfig, subject: Subject, program: list, failure: Failure, through,
            counts: dict) -> Outcome | None:
    """The outcome of a failing walk (:func:`~cowcheck.core.settle.settle`: confirmed, shrunk unless
    its signature is known, its reliability measured); None if the failure was a call suspected of
    hanging that returned under the full limit."""
    found_by = {"tool": "cowcheck campaign", "generator": "walk", "seed": seed, "executor": config.executor,
                "steps": counts["ops"]}
    settled = settle(program, failure, subject, found_by=found_by, through=through, known=config.known,
                     deadline=time.monotonic() + _shrink_budget(config), shrink=config.shrink)
    return None if settled is None else _outcome(seed, config, settled, counts)


def _outcome(seed: int, config: CampaignConfig, settled: Settled, counts: dict) -> Outcome:
    """The outcome of a settled failure, carrying its counterexample as the file's text."""
    failure, program, cx = settled.failure, settled.program, settled.counterexample
    return Outcome(seed=seed, kind=failure.kind, code=failure.code, message=failure.message,
                   failing_op=program[failure.step_index].op if program else "",
                   original_steps=settled.original_length, impl_spec=config.impl,
                   counterexample=cx.text() if cx is not None else None,
                   shrunk_steps=len(program) if cx is not None else None,
                   nondeterministic=(nondeterminism_note((settled.reproduced, settled.replays)).partition(": ")[2]
                                     if cx is not None else ""), **counts)


def _run_hypothesis(seed: int, config: CampaignConfig, kind: MachineKind, impl) -> Outcome:
    stabilise_generation()
    subject = Subject.of(kind, config.impl, impl.factory, machine_config(config, kind, impl, walks=False))
    op_mix: Counter = Counter()
    record = RunRecord()
    profile = settings(**dict(PROFILES["ci"], max_examples=config.examples, stateful_step_count=config.steps,
                              derandomize=False))
    previous: list = []

    def on_example(rec: RunRecord) -> None:
        if previous:
            op_mix.update(s.op for s in previous[-1].steps)
        previous[:] = [rec.last]

    record.on_example = on_example
    try:
        result = hunt(lambda rec: kind.builder(impl.factory, subject.config, rec), subject, base_seed=seed,
                      profile=profile, examples=config.examples, record=record, known=config.known,
                      shrink_seconds=_shrink_budget(config) if config.deadline is not None else None,
                      found_by={"tool": "cowcheck campaign", "seed": seed, "executor": config.executor})
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
    return _outcome(seed, config, result.settled, counts)
