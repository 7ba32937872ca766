"""Seed ranges: run a range of seeds under a guard, one :class:`RangeResult` out.

A seed range is the unit of work a Spark task runs, of resume and of the
``runs/`` table. ``run_range`` never raises for anything a seed does:

- with ``isolate=True`` (the default; POSIX) the seeds run in this process's
  forked child: one long-lived child per process (a Spark Python worker runs
  range after range), so whatever is dear to start (Flink's JVM) starts once
  per worker. It reports each seed as it starts and ends through a pipe. A
  child that dies (``os._exit``, a segfault, the OOM killer, a JVM that
  halts) turns the seed it was running into a CRASH outcome (code
  ``worker-exit``); a seed that shows no progress for its hard limit
  (:func:`hard_limit`; the child reports progress as its harness moves from
  call to call and step to step, so a slow seed on a loaded machine is never
  killed for its slowness), or whose call into native code never returns,
  becomes a TIMEOUT (``time-limit``).
  A new child then carries on with the next seed, so one bad seed costs one
  seed (and one start-up), not the range, the task or the campaign. Each
  :class:`RangeResult` counts the children started for it and the start-up
  paid inside them (``startups``, ``startup_seconds``: a JVM's).
- with ``isolate=False`` the seeds run in this process: exceptions escaping
  ``run_seed`` still become CRASH outcomes, a walk over its time limit still
  stops (checked between steps), but a hang inside one operation or a dying
  process is left to Spark (the driver re-runs the range, then its seeds one
  by one, and reports what keeps failing).

>>> from cowcheck.spark_fuzz.executor import CampaignConfig
>>> result = run_range(0, 2, CampaignConfig(steps=20), isolate=False)
>>> [o.kind for o in result.outcomes], result.ops == sum(o.ops for o in result.outcomes) > 0
(['PASS', 'PASS'], True)
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections import Counter

import attrs

from cowcheck.core.limits import limited, progress_mark
from cowcheck.core.processes import describe_wait_status
from cowcheck.core.profiles import tune_collector
from cowcheck.flink.jvm import started as jvm_started  # a JVM a seed starts: reported as start-up cost
from cowcheck.map.space import SpaceCoverage
from cowcheck.spark_fuzz.executor import (
    CRASH,
    DIVERGENCE,
    INTERNAL,
    INVARIANT,
    PASS,
    TIME_LIMIT,
    TIMEOUT,
    CampaignConfig,
    Outcome,
    internal_outcome,
    learned,
    run_seed,
)
from cowcheck.spark_fuzz.store import space_columns

__all__ = ["RangeResult", "run_range", "guarded_run_seed", "WORKER_EXIT", "hard_limit"]

WORKER_EXIT = "worker-exit"


_BEAT = 0.5  # seconds between a child's looks at its harness's progress


def hard_limit(config: CampaignConfig) -> float:
    """Seconds without progress after which a seed's process is killed: the walk's limit, as long
    again for shrinking, and slack (the limit again, at most 5 s); and never before one call may
    have taken the step time limit and its process been ended for it (the child's own verdict on
    a hang, a better one: a TIMEOUT of the step that hung)."""
    return max(2 * config.seed_time_limit + min(config.seed_time_limit, 5.0), 2 * config.step_time_limit + 5.0)


@attrs.frozen
class RangeResult:
    """Seeds ``start`` (inclusive) to ``stop`` (exclusive) and their outcomes, with
    where and when they ran (``started``/``finished``: Unix time)."""

    start: int
    stop: int
    outcomes: tuple
    started: float
    finished: float
    host: str = ""
    pid: int = 0
    startups: int = 0  # worker processes started for this range (their JVM, for Flink)
    startup_seconds: float = 0.0  # start-up paid inside them (JVM start, helper compile)

    @property
    def ops(self) -> int:
        return sum(o.ops for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    @property
    def internal(self) -> list[Outcome]:
        """Seeds on which cowcheck itself failed."""
        return [o for o in self.outcomes if o.internal]

    def kinds(self) -> Counter:
        return Counter(o.kind for o in self.outcomes)

    def runs_row(self, config: CampaignConfig, round_no: int = 0) -> dict:
        """The ``runs`` table row of this range (cowcheck.spark_fuzz.store.RUNS_SCHEMA)."""
        kinds = self.kinds()
        totals = {name: Counter() for name in ("coverage", "op_mix", "findings")}
        space = SpaceCoverage()
        for outcome in self.outcomes:
            for name, counter in totals.items():
                counter.update(getattr(outcome, name))
            if outcome.space:
                space.update(SpaceCoverage.from_json(outcome.space))
        return {"range_start": self.start, "range_stop": self.stop, "seeds": len(self.outcomes), "ops": self.ops,
                "seconds": sum(o.seconds for o in self.outcomes), "started": self.started,
                "finished": self.finished, "host": self.host, "pid": self.pid, "round": round_no,
                "passed": kinds[PASS], "divergence": kinds[DIVERGENCE], "invariant": kinds[INVARIANT],
                "crash": kinds[CRASH], "timeout": kinds[TIMEOUT], "internal": kinds[INTERNAL],
                **{name: dict(sorted(counter.items())) for name, counter in totals.items()},
                "impl": config.impl, "executor": config.executor, "startups": self.startups,
                "startup_seconds": self.startup_seconds, **space_columns(space.to_json())}

    def failure_rows(self, config: CampaignConfig) -> list[dict]:
        """The ``failures`` table rows of this range (cowcheck.spark_fuzz.store.FAILURES_SCHEMA):
        the implementation's failures, and cowcheck's own errors (kind INTERNAL). A row
        carries its seed's counterexample as the file's text (``counterexample_json``),
        as the seed's worker rendered it."""
        rows = []
        for o in self.outcomes:
            if o.kind == PASS:
                continue
            rows.append({"signature": o.signature, "kind": o.kind, "code": o.code, "seed": o.seed,
                         "range_start": self.start, "range_stop": self.stop, "message": o.message,
                         "failing_op": o.failing_op, "ops": o.ops, "original_steps": o.original_steps,
                         "shrunk_steps": o.shrunk_steps, "counterexample_json": o.counterexample,
                         "impl": config.impl, "executor": config.executor, "details": o.details or None,
                         "nondeterministic": o.nondeterministic or None})
        return rows

    def to_json(self) -> dict:
        return {"start": self.start, "stop": self.stop, "outcomes": [o.to_json() for o in self.outcomes],
                "started": self.started, "finished": self.finished, "host": self.host, "pid": self.pid,
                "startups": self.startups, "startup_seconds": self.startup_seconds}

    @classmethod
    def from_json(cls, data: dict) -> "RangeResult":
        return cls(data["start"], data["stop"], tuple(Outcome.from_json(o) for o in data["outcomes"]),
                   data["started"], data["finished"], data.get("host", ""), data.get("pid", 0),
                   data.get("startups", 0), data.get("startup_seconds", 0.0))


def guarded_run_seed(seed: int, config: CampaignConfig) -> Outcome:
    """``run_seed``, with anything it raises turned into an INTERNAL outcome
    (run_seed itself turns whatever the implementation does into an outcome)."""
    started = time.perf_counter()
    try:
        return run_seed(seed, config)
    except Exception as exc:
        return attrs.evolve(internal_outcome(seed, config, exc), seconds=time.perf_counter() - started)


def run_range(start: int, stop: int, config: CampaignConfig, isolate: bool = True) -> RangeResult:
    """Run seeds ``start..stop-1``; one outcome per seed, in seed order. Each
    call into the implementation runs under ``config.step_time_limit``, paced
    (``cowcheck.core.limits``: a hang is suspected within about a second)."""
    started = time.time()
    seeds = list(range(start, stop))
    if isolate and hasattr(os, "fork"):
        outcomes, startup = _run_forked(seeds, config)
    else:
        had_jvm = jvm_started() is not None
        with limited(config.step_time_limit, paced=True):
            outcomes = []
            for seed in seeds:
                outcomes.append(guarded_run_seed(seed, config))
                config = learned(config, outcomes[-1])
        info = jvm_started()
        fresh = info is not None and not had_jvm
        startup = {"workers": int(fresh), "seconds": info.compile_seconds + info.start_seconds if fresh else 0.0}
    return RangeResult(start, stop, tuple(outcomes), started, time.time(), socket.gethostname(), os.getpid(),
                       startup["workers"], startup["seconds"])


# ------------------------------------------------------------ isolation
#
# One long-lived child per process (a Spark Python worker runs many ranges): it
# owns whatever the implementation needs that is dear to start (Flink's JVM) and
# serves range after range over two pipes; the parent watches each seed. A child
# that dies or hangs costs the seed it was running, and is replaced.


class _Worker:
    """A forked child serving seed ranges: one request line ``{"seeds", "config"}``
    in; one ``{"start": seed}`` and one ``{"outcome": ...}`` line per seed, then
    ``{"done": {...}}`` out. It exits when its request pipe closes (its parent died)."""

    def __init__(self, key: str) -> None:
        self.key = key  # what the child was started for (one JVM per process: one Flink release)
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns into the caller's stack (a Spark worker, pytest, ...)
            status = 0
            try:
                os.close(self.to_child)
                os.close(self.from_child)
                gc.freeze()  # the collector need not walk (and so copy) the pages inherited from the parent
                tune_collector()
                _serve(to_child_r, from_child_w)
            except BrokenPipeError:  # its parent stopped reading (a cancelled task, Ctrl-C): nobody to tell
                status = 0
            except BaseException:
                traceback.print_exc()  # cowcheck's own error: the seed it ran becomes worker-exit
                status = 70
            finally:
                os._exit(status)
        os.close(to_child_r)
        os.close(from_child_w)
        self.pid = pid
        self.buffer = b""
        self.ranges = 0

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.to_child, data):]

    def kill(self) -> int:
        """Kill the child (if it still runs) and reap it: its wait status."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.close()

    def close(self) -> int:
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        return os.waitpid(self.pid, 0)[1]


def _serve(requests_fd: int, out_fd: int) -> None:
    """The child's loop: serve requests until the request pipe closes."""
    with os.fdopen(requests_fd, "r", encoding="utf-8") as requests, os.fdopen(out_fd, "w", encoding="utf-8") as out:
        lock = threading.Lock()  # the main thread, the heartbeat and the watchdog (stuck) all write

        def send(message: dict) -> None:
            with lock:
                out.write(json.dumps(message) + "\n")
                out.flush()

        stop = threading.Event()
        threading.Thread(target=_heartbeat, args=(send, stop), name="cowcheck-heartbeat", daemon=True).start()
        try:
            for line in requests:
                request = json.loads(line)
                config = CampaignConfig.from_json(request["config"])
                had_jvm = jvm_started() is not None

                def stuck(seconds: float) -> None:  # a call into native code (Java) that never returns
                    send({"stuck": seconds})

                with limited(config.step_time_limit, on_stuck=stuck, paced=True):
                    for seed in request["seeds"]:
                        send({"start": seed})
                        outcome = guarded_run_seed(seed, config)
                        send({"outcome": outcome.to_json()})
                        config = learned(config, outcome)
                info = jvm_started()
                startup = info.compile_seconds + info.start_seconds if info is not None and not had_jvm else 0.0
                send({"done": {"startup": startup, "pid": os.getpid()}})
        finally:
            stop.set()


def _heartbeat(send, stop: threading.Event) -> None:
    """Tell the parent the child makes progress: what its main thread runs (a call into the
    implementation, a step's checking, and inside a batched segment which of its calls:
    :func:`cowcheck.core.limits.progress_mark`) has changed since the last look. A seed stuck in one
    call, or in a loop of cowcheck's own, stops the beats."""
    seen = None
    while not stop.wait(_BEAT):
        now = progress_mark()
        if now != seen:
            seen = now
            try:
                send({"alive": 1})
            except (OSError, ValueError):  # the parent is gone (or the pipe closed): nobody to tell
                return


_WORKER: _Worker | None = None


def _worker_for(config: CampaignConfig) -> tuple[_Worker, bool]:
    """This process's child for ``config`` (a new one if there is none, or it was
    started for another implementation spec); (worker, whether it is new)."""
    global _WORKER
    if _WORKER is not None and (_WORKER.key != config.impl or _WORKER.pid is None):
        _WORKER.kill()
        _WORKER = None
    if _WORKER is None:
        _WORKER = _Worker(config.impl)
        return _WORKER, True
    return _WORKER, False


def _retire_worker() -> int:
    global _WORKER
    worker, _WORKER = _WORKER, None
    return worker.kill() if worker is not None else 0


def shutdown_worker() -> None:
    """End this process's child, if any (tests; a process that ends takes it along anyway)."""
    _retire_worker()


def _run_forked(seeds: list[int], config: CampaignConfig) -> tuple[list[Outcome], dict]:
    """Run ``seeds`` in this process's child; (outcomes, start-up: workers started, seconds
    of start-up paid inside them, e.g. a JVM)."""
    outcomes: dict[int, Outcome] = {}
    startup = {"workers": 0, "seconds": 0.0}
    while len(outcomes) < len(seeds):
        pending = [s for s in seeds if s not in outcomes]
        worker, new = _worker_for(config)
        startup["workers"] += new
        status = _supervise(worker, pending, config, outcomes, startup)
        if status is not None:  # the child died or was killed: the next seeds get a new one
            if pending[0] not in outcomes:  # died before its first seed started
                outcomes[pending[0]] = _died(pending[0], config, status, 0.0)
    return [outcomes[s] for s in seeds], startup


def _died(seed: int, config: CampaignConfig, status: int, seconds: float) -> Outcome:
    return Outcome(seed=seed, kind=CRASH, code=WORKER_EXIT, impl_spec=config.impl, seconds=seconds,
                   message=f"the process running the seed died ({describe_wait_status(status)})")


def _supervise(worker: _Worker, seeds: list[int], config: CampaignConfig, outcomes: dict,
               startup: dict) -> int | None:
    """Have ``worker`` run ``seeds``, collecting outcomes into ``outcomes``. A seed
    the child was running when it died, hung or got stuck gets its CRASH or
    TIMEOUT outcome and the child is retired: its wait status is returned (None
    while it lives on)."""
    limit = hard_limit(config)
    try:
        worker.send({"seeds": seeds, "config": config.to_json()})
    except OSError:  # it died between ranges
        return _retire_worker()
    running, since, killed, stuck = None, time.monotonic(), False, None
    try:
        while True:
            wait = since + limit - time.monotonic() if running is not None else None
            if not select.select([worker.from_child], [], [], None if wait is None else max(wait, 0.0))[0]:
                killed = True
                break
            chunk = os.read(worker.from_child, 1 << 16)
            if not chunk:
                break
            *lines, worker.buffer = (worker.buffer + chunk).split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "start" in message:
                    running, since = message["start"], time.monotonic()
                elif "alive" in message:
                    since = time.monotonic()  # (the hard limit counts seconds without progress)
                elif "outcome" in message:
                    outcomes[message["outcome"]["seed"]] = Outcome.from_json(message["outcome"])
                    running = None
                elif "stuck" in message:
                    stuck = message["stuck"]
                else:
                    startup["seconds"] += message["done"]["startup"]
                    worker.ranges += 1
                    return None
    except BaseException:
        _retire_worker()
        raise
    status = _retire_worker()
    if running is not None:
        seconds = time.monotonic() - since
        if killed:
            outcomes[running] = Outcome(seed=running, kind=TIMEOUT, code=TIME_LIMIT, impl_spec=config.impl,
                                        message=f"killed after {limit:g} s without progress (hard limit per seed)",
                                        seconds=seconds)
        elif stuck is not None:
            outcomes[running] = Outcome(seed=running, kind=TIMEOUT, code=TIME_LIMIT, impl_spec=config.impl,
                                        message=f"a call into the implementation did not return within "
                                                f"{config.step_time_limit:g} s (native code; the process was "
                                                f"ended after {stuck:.0f} s)", seconds=seconds)
        else:
            outcomes[running] = _died(running, config, status, seconds)
    return status


