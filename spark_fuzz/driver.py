"""The Spark driver of a campaign: spread seed ranges over partitions, gather rows.

Each seed range is one partition and one task; the task runs
:func:`cowcheck.spark_fuzz.ranges.run_range` (a forked child per range, see there) and
adds its ``runs`` row and ``failures`` rows to an accumulator, which the
driver reads while the job runs: results arrive task by task, so the progress
line is live, counterexamples are saved the moment they arrive, and results
are written to ``DIR`` in batches (cowcheck.spark_fuzz.store) while the job is still
running. A campaign interrupted at any point keeps every range and every
counterexample written so far; ``resume=True`` skips the finished ranges.

``--seeds A:B`` is one job of ``partitions`` ranges; ``--minutes M`` runs
rounds (one job each) sized from the measured seed rate, until the time is up.
A failure row carries its counterexample as the text of its file, rendered
once by the seed's worker; the driver keeps the best row of each signature
from the rows in hand (:func:`prefer`: a shrunk program, a deterministic one,
the shortest, the lowest seed) and writes its file when a better one arrives,
so each file is written with the text its row carries and the end of the run
has nothing left to write. The report is rendered from the tables
(cowcheck.spark_fuzz.report).

A task that fails at the Spark level (its Python worker died outside the
forked child, or ``isolate=False``) aborts its job; the driver keeps what
arrived, re-runs each missing range in a job of its own, and the seeds of a
range that fails again one by one; a seed whose task still fails is a CRASH
row (``spark-task-failed``). Nothing is lost and the campaign goes on.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Callable, TextIO

import attrs

from cowcheck.spark_fuzz.executor import CRASH, INTERNAL, CampaignConfig, Outcome, internal_outcome
from cowcheck.spark_fuzz.ranges import RangeResult, run_range
from cowcheck.spark_fuzz.report import HEADLINE, headline, write_report
from cowcheck.spark_fuzz.store import CampaignStore

__all__ = ["CampaignResult", "run_campaign", "plan_ranges", "missing_ranges", "distinct_failures", "prefer",
           "SPARK_TASK_FAILED", "ProgressLine"]

SPARK_TASK_FAILED = "spark-task-failed"
_FLUSH_SECONDS = 5.0
_POLL_SECONDS = 0.25
_MAX_RANGE = 250  # seeds per range when --seeds leaves it open: keeps resume and progress fine-grained


@attrs.frozen
class CampaignResult:
    """What a campaign did: its rows (all of them, earlier runs included when
    resumed), the distinct failures, and how long it took."""

    out: str
    runs: list
    failures: list
    distinct: list
    seconds: float
    interrupted: bool = False
    internal: list = attrs.Factory(list)  # rows of seeds on which cowcheck itself failed
    this_run: list = attrs.Factory(list)  # the runs rows of this run alone (a resumed campaign's own)
    stopped_after: int | None = None  # --stop-after: stopped once this many distinct failures were known
    # What the campaign directory could not take at the end (a full disk): the distinct failures'
    # counterexamples not stored there (the command stores them elsewhere), why the report is missing.
    unstored: list = attrs.Factory(list)
    report_problem: str | None = None

    @property
    def seeds(self) -> int:
        return sum(r["seeds"] for r in self.runs)

    @property
    def ops(self) -> int:
        return sum(r["ops"] for r in self.runs)


# --------------------------------------------------------------- planning


def missing_ranges(first: int, stop: int, done: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The gaps of ``[first, stop)`` not covered by the finished ranges ``done``.

    >>> missing_ranges(0, 10, [(2, 4), (6, 7)])
    [(0, 2), (4, 6), (7, 10)]
    """
    gaps, at = [], first
    for start, end in sorted(done):
        if end <= at or start >= stop:
            continue
        if start > at:
            gaps.append((at, start))
        at = max(at, end)
    if at < stop:
        gaps.append((at, stop))
    return gaps


def plan_ranges(gaps: list[tuple[int, int]], partitions: int, max_size: int | None = _MAX_RANGE) -> list[tuple[int, int]]:
    """Split ``gaps`` into about ``partitions`` ranges of equal size (at most
    ``max_size`` seeds each, so more when the gaps are large).

    >>> plan_ranges([(0, 10)], 3)
    [(0, 4), (4, 8), (8, 10)]
    """
    total = sum(stop - start for start, stop in gaps)
    if total == 0:
        return []
    size = math.ceil(total / max(partitions, 1))
    if max_size is not None:
        size = min(size, max_size)
    out = []
    for start, stop in gaps:
        out += [(s, min(s + size, stop)) for s in range(start, stop, size)]
    return out


# ------------------------------------------------------------ the job


class _Rows:
    """Picklable accumulator parameter: a list of (runs row, failure rows) pairs."""

    def zero(self, value):
        return []

    def addInPlace(self, value1, value2):
        value1.extend(value2)
        return value1


def _task(config: CampaignConfig, isolate: bool, round_no: int):
    """The function each Spark task runs on its seed range (executor side)."""

    def run(bounds, sink):
        start, stop = bounds
        try:
            result = run_range(start, stop, config, isolate)
        except Exception as exc:  # the guard itself failed (cowcheck's error): every seed is an INTERNAL row
            now = time.time()
            result = RangeResult(start, stop, tuple(internal_outcome(s, config, exc) for s in range(start, stop)),
                                 now, now)
        sink.add([(result.runs_row(config, round_no), result.failure_rows(config))])

    return run


class _Job:
    """One Spark job over ``ranges``, run on a thread so the driver can poll it."""

    def __init__(self, sc, ranges, config, isolate, round_no):
        self.sc = sc
        self.ranges = ranges
        self.group = f"cowcheck-{uuid.uuid4().hex[:12]}"
        self.sink = sc.accumulator([], _Rows())
        self.error: BaseException | None = None
        self.taken = 0
        run, sink = _task(config, isolate, round_no), self.sink
        rdd = sc.parallelize(ranges, len(ranges))

        def body():
            try:
                sc.setJobGroup(self.group, f"cowcheck campaign: {len(ranges)} seed ranges", interruptOnCancel=True)
                rdd.foreach(lambda bounds: run(bounds, sink))
            except BaseException as exc:  # reported to the driver thread
                self.error = exc

        from pyspark import InheritableThread

        self.thread = InheritableThread(target=body, daemon=True)

    def start(self) -> "_Job":
        self.thread.start()
        return self

    def running(self) -> bool:
        return self.thread.is_alive()

    def take(self) -> list:
        """Results that arrived since the last call."""
        rows = self.sink.value
        new = rows[self.taken:]
        self.taken += len(new)
        return new

    def tasks(self) -> tuple[int, int, int]:
        """(completed, running, total) tasks of this job."""
        tracker = self.sc.statusTracker()
        done = active = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job_id)
            for stage_id in (info.stageIds if info else []):
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
                    active += stage.numActiveTasks
        return done, active, len(self.ranges)

    def cancel(self) -> None:
        self.sc.cancelJobGroup(self.group)
        self.thread.join()

    def release(self) -> None:
        """Drop the rows taken (the accumulator stays registered with pyspark for the session)."""
        self.sink.value.clear()
        self.taken = 0


# -------------------------------------------------------------- progress


class ProgressLine:
    """The live line on stderr: tasks, seeds, ops/s, failures. Redrawn in place
    on a terminal, a line every few seconds otherwise (CI logs)."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and stream.isatty())
        self.last = 0.0
        self.drawn = False

    def show(self, text: str, force: bool = False) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and now - self.last < (0.25 if self.tty else 5.0):
            return
        self.last = now
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
            self.drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.drawn and self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


class _Campaign:
    """State of one run_campaign call: the store, what arrived, the progress line."""

    def __init__(self, sc, config, store, isolate, progress: ProgressLine, on_batch):
        self.sc = sc
        self.config = config
        self.store = store
        self.isolate = isolate
        self.progress = progress
        self.on_batch = on_batch
        self.started = time.monotonic()
        self.pending: list = []
        self.last_flush = time.monotonic()
        self.seeds = self.ops = 0
        self.failures = 0
        self.internal = 0
        self.best: dict = {}  # signature -> (the row whose counterexample is stored, occurrences)
        self.rows: list = []  # this run's runs rows
        self.stop_after: int | None = None  # stop once this many distinct failures are known
        self.deadline: float | None = None  # time.time() when a --minutes campaign ends
        self.round = 0
        self.last_error: BaseException | None = None

    # results ---------------------------------------------------------
    def receive(self, results: list, notify: bool = True) -> None:
        for run_row, failure_rows in results:
            self.rows.append(run_row)
            self.seeds += run_row["seeds"]
            self.ops += run_row["ops"]
            for row in failure_rows:
                if row["kind"] == INTERNAL:
                    self.internal += 1
                    self.store.save_internal_error(row)
                    continue
                self.failures += 1
                if self.keep(row) and row["counterexample_json"]:
                    try:
                        self.store.put_counterexample(row["signature"], row["counterexample_json"])
                    except OSError:  # a full disk: the campaign's end stores it, elsewhere if need be
                        pass
            self.pending.append((run_row, failure_rows))
        if results and notify and self.on_batch is not None:
            self.on_batch(self)

    def keep(self, row: dict) -> bool:
        """Count ``row`` with the other failures of its signature; whether it is now the best of them."""
        signature = row["signature"]
        held = self.best.get(signature)
        self.best[signature] = chosen = prefer(held, (row, 1)) if held is not None else (row, 1)
        return chosen[0] is row

    def flush(self, force: bool = False) -> None:
        if self.pending and (force or time.monotonic() - self.last_flush >= _FLUSH_SECONDS):
            self.store.append([r for r, _ in self.pending], [f for _, fs in self.pending for f in fs])
            self.pending = []
            self.last_flush = time.monotonic()

    def show(self, job: _Job | None, force: bool = False) -> None:
        if self.progress.stream is None:
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        tasks = ""
        if job is not None:
            done, active, total = job.tasks()
            tasks = f"round {self.round}: tasks {done}/{total} ({active} running)  "
        rate = headline(self.rows) if self.rows else f"0 {HEADLINE}"  # the figure stdout and the report print
        self.progress.show(f"{tasks}{self.seeds:,} seeds  {self.ops:,} ops  {rate}  "
                           f"failures {self.failures} ({len(self.best)} distinct)  "
                           + (f"INTERNAL ERRORS {self.internal}  " if self.internal else "")
                           + f"{elapsed:.0f}s", force)

    # jobs ------------------------------------------------------------
    def run(self, ranges: list[tuple[int, int]]) -> None:
        """Run ``ranges``; on a Spark-level failure re-run what is missing, narrower."""
        if not ranges:
            return
        arrived = self._job(ranges)
        missing = [r for r in ranges if r not in arrived]
        if not missing:
            return
        for bounds in missing:  # one job per range, then per seed
            if bounds in self._job([bounds]):
                continue
            for seed in range(*bounds):
                if (seed, seed + 1) not in self._job([(seed, seed + 1)]):
                    self._spark_failed(seed, bounds)

    def _job(self, ranges: list[tuple[int, int]]) -> set:
        # found already: not shrunk again; shrinking stops at the campaign's end
        config = attrs.evolve(self.config, known=sorted(self.best), deadline=self.deadline)
        job = _Job(self.sc, ranges, config, self.isolate, self.round).start()
        arrived: set = set()
        try:
            while job.running():
                job.thread.join(_POLL_SECONDS)
                arrived |= self._take(job)
                self.flush()
                self.show(job)
                if self.enough():
                    raise _Enough
        except BaseException:  # KeyboardInterrupt, enough failures: stop the job, keep what arrived
            job.cancel()
            self._take(job, notify=False)
            self.flush(force=True)
            raise
        arrived |= self._take(job)
        job.release()
        self.flush()
        self.show(job, force=True)
        if job.error is not None and not _is_spark_failure(job.error):
            raise job.error
        self.last_error = job.error
        return arrived

    def enough(self) -> bool:
        """``--stop-after N``: N distinct failures are known (earlier runs' included)."""
        return self.stop_after is not None and len(self.best) >= self.stop_after

    def _take(self, job: _Job, notify: bool = True) -> set:
        results = job.take()
        self.receive(results, notify)
        return {(run["range_start"], run["range_stop"]) for run, _ in results}

    def _spark_failed(self, seed: int, bounds: tuple[int, int]) -> None:
        message = _first_line(self.last_error)
        outcome = Outcome(seed=seed, kind=CRASH, code=SPARK_TASK_FAILED, impl_spec=self.config.impl,
                          message=f"the Spark task running the seed failed: {message}")
        now = time.time()
        result = RangeResult(seed, seed + 1, (outcome,), now, now)
        self.receive([(result.runs_row(self.config, self.round), result.failure_rows(self.config))])


class _Enough(Exception):
    """``--stop-after``: enough distinct failures are known; the campaign stops (resumable)."""


def _is_spark_failure(exc: BaseException) -> bool:
    return type(exc).__name__ in ("Py4JJavaError", "PythonException") or "SparkException" in str(exc)[:500]


def _first_line(exc: BaseException | None) -> str:
    """The innermost reason in a Spark job failure, e.g. 'Python worker exited unexpectedly (crashed)'."""
    if exc is None:
        return "unknown error"
    for line in str(exc).splitlines():
        if "Exception: " in line:
            reason = line.rsplit("Exception: ", 1)[1]
            return reason.split(". Consider", 1)[0].strip()[:300]
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


# ---------------------------------------------------------------- dedupe


def prefer(a: tuple[dict, int], b: tuple[dict, int]) -> tuple[dict, int]:
    """Of two failures with one signature: one with a counterexample (a seed that
    failed with a signature already known is not shrunk and has none), then the one
    whose program failed in every replay (a deterministic one before one marked
    nondeterministic), then the shorter program, then the lower seed; occurrences
    add up."""

    def rank(row):
        return (row.get("counterexample_json") is None, bool(row.get("nondeterministic")),
                row["shrunk_steps"] if row["shrunk_steps"] is not None else math.inf, row["seed"])

    return (a[0] if rank(a[0]) <= rank(b[0]) else b[0]), a[1] + b[1]


def distinct_failures(failures: list[dict]) -> list[dict]:
    """One row per signature (with ``occurrences``), the row :func:`prefer` chooses, by signature."""
    chosen: dict = {}
    for row in failures:
        sig = row["signature"]
        chosen[sig] = prefer(chosen[sig], (row, 1)) if sig in chosen else (row, 1)
    return [dict(row, occurrences=n) for _, (row, n) in sorted(chosen.items())]


# ------------------------------------------------------------ campaign


def run_campaign(sc, config: CampaignConfig, out, *, seeds: tuple[int, int] | None = None,
                 minutes: float | None = None, partitions: int | None = None, resume: bool = False,
                 isolate: bool = True, progress: TextIO | None = None,
                 on_batch: Callable[[object], None] | None = None, report: bool = True,
                 meta: dict | None = None, store: CampaignStore | None = None,
                 stop_after: int | None = None) -> CampaignResult:
    """Run a campaign into directory ``out``; see the module docstring.

    ``seeds``: ``(first, stop)``; ``minutes``: run rounds until the time is up
    (from ``first`` = 0 or where a resumed campaign stopped); ``partitions``:
    ranges per job (default: 4 per core of the cluster). ``on_batch(state)``
    runs whenever results arrive (tests use it to interrupt a campaign);
    ``store``: the campaign's store if the caller took its lock already
    (``CampaignStore.acquire``). The lock is held until the function returns;
    ``stop_after``: stop once that many distinct failures are known (what is
    not done is left to ``--resume``).
    Raises KeyboardInterrupt after saving what arrived if interrupted."""
    if (seeds is None) == (minutes is None):
        raise ValueError("run_campaign needs seeds=(first, stop) or minutes=M, not both")
    store = store if store is not None else CampaignStore(out, defaults=CampaignConfig().to_json())
    try:
        store.begin(config.to_json(), resume)
        return _run(sc, config, store, seeds, minutes, partitions, isolate, progress, on_batch, report, meta,
                    stop_after)
    finally:
        store.close()


def _run(sc, config, store, seeds, minutes, partitions, isolate, progress, on_batch, report, meta,
         stop_after) -> CampaignResult:
    partitions = partitions or 4 * sc.defaultParallelism
    campaign = _Campaign(sc, config, store, isolate, ProgressLine(progress), on_batch)
    campaign.stop_after = stop_after
    for row in store.failures():  # an earlier run's (resumed): its chosen files are written already
        if row["kind"] != INTERNAL:
            campaign.keep(row)
    began = time.monotonic()
    interrupted = stopped = False
    try:
        if campaign.enough():
            stopped = True
        elif seeds is not None:
            campaign.round = 1
            campaign.run(plan_ranges(missing_ranges(seeds[0], seeds[1], store.completed_seeds()), partitions))
        else:
            campaign.deadline = time.time() + minutes * 60
            _rounds(campaign, store, partitions, began + minutes * 60)
    except _Enough:
        stopped = True
    except KeyboardInterrupt:
        interrupted = True
    finally:
        campaign.flush(force=True)
        campaign.progress.finish()
    runs, rows = store.runs(), store.failures()
    failures = [row for row in rows if row["kind"] != INTERNAL]
    internal = [row for row in rows if row["kind"] == INTERNAL]
    distinct = distinct_failures(failures)
    unstored, report_problem = [], None  # a full disk here loses no verdict: the command says where things are
    for row in distinct:  # (nothing to write unless an earlier run ended before writing its choice)
        if row["counterexample_json"]:
            try:
                store.put_counterexample(row["signature"], row["counterexample_json"])
            except OSError:
                unstored.append((row["signature"], row["counterexample_json"]))
    if report:
        try:
            write_report(store.root, runs, failures, distinct, config, dict(meta or {}, partitions=partitions))
        except OSError as exc:
            report_problem = str(exc)
    result = CampaignResult(str(store.root), runs, failures, distinct, time.monotonic() - began, interrupted,
                            internal, campaign.rows, stop_after if stopped else None, unstored, report_problem)
    if interrupted:
        raise KeyboardInterrupt
    return result


def _rounds(campaign: _Campaign, store: CampaignStore, partitions: int, deadline: float) -> None:
    """Rounds of ``partitions`` ranges until ``deadline``: first the gaps an
    interrupted run left, then new seeds. Ranges grow with the measured rate so
    that a round takes about 30 s, or less when less time is left."""
    done = store.completed_seeds()
    next_seed = max((stop for _, stop in done), default=0)
    gaps = missing_ranges(0, next_seed, done)
    per_range = 1  # the first round measures the rate
    while time.monotonic() < deadline - 0.5:
        ranges = []
        for _ in range(partitions):
            if gaps:
                start, stop = gaps[0]
                end = min(stop, start + per_range)
                gaps = ([(end, stop)] if end < stop else []) + gaps[1:]
                ranges.append((start, end))
            else:
                ranges.append((next_seed, next_seed + per_range))
                next_seed += per_range
        campaign.round += 1
        began = time.monotonic()
        campaign.run(ranges)
        if campaign.enough():
            raise _Enough
        seeds_per_second = sum(b - a for a, b in ranges) / max(time.monotonic() - began, 1e-3)
        target = min(30.0, max(1.0, 0.8 * (deadline - time.monotonic())))
        per_range = max(1, int(seeds_per_second * target / partitions))
