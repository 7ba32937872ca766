"""Seed ranges: run a range of seeds under a guard, one :class:`RangeResult` out.

A seed range is the unit of work a Spark task runs, of resume and of the
``runs/`` table. ``run_range`` never raises for anything a seed does:

- with ``isolate=True`` (the default; POSIX) the seeds run in a forked child
  process that reports each seed as it starts and ends through a pipe. A
  child that dies (``os._exit``, a segfault, the OOM killer) turns the seed it
  was running into a CRASH outcome (code ``worker-exit``); a seed that runs
  past its hard limit (:func:`hard_limit`: the walk's own limit, as long
  again for shrinking, and slack) is killed and becomes a TIMEOUT
  (``time-limit``). A new child then carries on with the next seed, so one bad
  seed costs one seed, not the range, the task or the campaign.
- with ``isolate=False`` the seeds run in this process: exceptions escaping
  ``run_seed`` still become CRASH outcomes, a walk over its time limit still
  stops (checked between steps), but a hang inside one operation or a dying
  process is left to Spark (the driver re-runs the range, then its seeds one
  by one, and reports what keeps failing).

>>> from spark_fuzz.executor import CampaignConfig
>>> result = run_range(0, 2, CampaignConfig(steps=20), isolate=False)
>>> [o.kind for o in result.outcomes], result.ops
(['PASS', 'PASS'], 44)
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time
from collections import Counter

import attrs

from properties.core.limits import limited
from spark_fuzz.executor import (
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
    run_seed,
)

__all__ = ["RangeResult", "run_range", "guarded_run_seed", "WORKER_EXIT", "hard_limit"]

WORKER_EXIT = "worker-exit"


def hard_limit(config: CampaignConfig) -> float:
    """Seconds after which a seed's process is killed: the walk's limit, as long
    again for shrinking, and slack (the limit again, at most 5 s)."""
    return 2 * config.seed_time_limit + min(config.seed_time_limit, 5.0)


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
        """The ``runs`` table row of this range (spark_fuzz.store.RUNS_SCHEMA)."""
        kinds = self.kinds()
        totals = {name: Counter() for name in ("coverage", "op_mix", "findings")}
        for outcome in self.outcomes:
            for name, counter in totals.items():
                counter.update(getattr(outcome, name))
        return {"range_start": self.start, "range_stop": self.stop, "seeds": len(self.outcomes), "ops": self.ops,
                "seconds": sum(o.seconds for o in self.outcomes), "started": self.started,
                "finished": self.finished, "host": self.host, "pid": self.pid, "round": round_no,
                "passed": kinds[PASS], "divergence": kinds[DIVERGENCE], "invariant": kinds[INVARIANT],
                "crash": kinds[CRASH], "timeout": kinds[TIMEOUT], "internal": kinds[INTERNAL],
                **{name: dict(sorted(counter.items())) for name, counter in totals.items()},
                "impl": config.impl, "executor": config.executor}

    def failure_rows(self, config: CampaignConfig) -> list[dict]:
        """The ``failures`` table rows of this range (spark_fuzz.store.FAILURES_SCHEMA):
        the implementation's failures, and cowcheck's own errors (kind INTERNAL)."""
        rows = []
        for o in self.outcomes:
            if o.kind == PASS:
                continue
            cx = o.counterexample
            rows.append({"signature": o.signature, "kind": o.kind, "code": o.code, "seed": o.seed,
                         "range_start": self.start, "range_stop": self.stop, "message": o.message,
                         "failing_op": o.failing_op, "ops": o.ops, "original_steps": o.original_steps,
                         "shrunk_steps": len(cx["steps"]) if cx else None,
                         "steps_json": json.dumps(cx["steps"]) if cx else None,
                         "counterexample_json": json.dumps(cx) if cx else None,
                         "impl": config.impl, "executor": config.executor, "details": o.details or None})
        return rows

    def to_json(self) -> dict:
        return {"start": self.start, "stop": self.stop, "outcomes": [o.to_json() for o in self.outcomes],
                "started": self.started, "finished": self.finished, "host": self.host, "pid": self.pid}

    @classmethod
    def from_json(cls, data: dict) -> "RangeResult":
        return cls(data["start"], data["stop"], tuple(Outcome.from_json(o) for o in data["outcomes"]),
                   data["started"], data["finished"], data.get("host", ""), data.get("pid", 0))


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
    step runs under ``config.step_time_limit``."""
    started = time.time()
    seeds = list(range(start, stop))
    if isolate and hasattr(os, "fork"):
        outcomes = _run_forked(seeds, config)
    else:
        with limited(config.step_time_limit):
            outcomes = [guarded_run_seed(seed, config) for seed in seeds]
    return RangeResult(start, stop, tuple(outcomes), started, time.time(), socket.gethostname(), os.getpid())


# ------------------------------------------------------------ isolation


def _run_forked(seeds: list[int], config: CampaignConfig) -> list[Outcome]:
    outcomes: dict[int, Outcome] = {}
    while len(outcomes) < len(seeds):
        pending = [s for s in seeds if s not in outcomes]
        status = _supervise(pending, config, outcomes)
        if pending[0] not in outcomes and status is not None:  # died before its first seed started
            outcomes[pending[0]] = _died(pending[0], config, status, 0.0)
    return [outcomes[s] for s in seeds]


def _died(seed: int, config: CampaignConfig, status: int, seconds: float) -> Outcome:
    return Outcome(seed=seed, kind=CRASH, code=WORKER_EXIT, impl_spec=config.impl, seconds=seconds,
                   message=f"the process running the seed died ({_describe(status)})")


def _child(seeds: list[int], config: CampaignConfig, out_fd: int) -> None:
    """Runs in the forked process: one line when a seed starts, one with its outcome."""
    with os.fdopen(out_fd, "w", encoding="utf-8") as out, limited(config.step_time_limit):
        for seed in seeds:
            out.write(json.dumps({"start": seed}) + "\n")
            out.flush()
            out.write(json.dumps({"outcome": guarded_run_seed(seed, config).to_json()}) + "\n")
            out.flush()


def _supervise(seeds: list[int], config: CampaignConfig, outcomes: dict) -> int | None:
    """Fork a child for ``seeds`` and collect its outcomes into ``outcomes``. A seed
    the child was running when it died or was killed gets its CRASH or TIMEOUT
    outcome. Returns the child's wait status if it did not finish every seed."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child never returns into the caller's stack (a Spark worker, pytest, ...)
        status = 0
        try:
            os.close(read_fd)
            gc.freeze()  # the collector need not walk (and so copy) the pages inherited from the parent
            _child(seeds, config, write_fd)
        except BaseException:
            status = 70
        finally:
            os._exit(status)
    os.close(write_fd)
    limit = hard_limit(config)
    running, since, buffer, killed = None, time.monotonic(), b"", False
    try:
        while True:
            wait = since + limit - time.monotonic() if running is not None else None
            if not select.select([read_fd], [], [], None if wait is None else max(wait, 0.0))[0]:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "start" in message:
                    running, since = message["start"], time.monotonic()
                else:
                    outcomes[message["outcome"]["seed"]] = Outcome.from_json(message["outcome"])
                    running = None
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(read_fd)
        status = os.waitpid(pid, 0)[1]
    if running is not None:
        if killed:
            outcomes[running] = Outcome(seed=running, kind=TIMEOUT, code=TIME_LIMIT, impl_spec=config.impl,
                                        message=f"killed after {limit:g} s (hard limit per seed)",
                                        seconds=time.monotonic() - since)
        else:
            outcomes[running] = _died(running, config, status, time.monotonic() - since)
    return None if all(s in outcomes for s in seeds) else status


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit code {os.WEXITSTATUS(status)}"
