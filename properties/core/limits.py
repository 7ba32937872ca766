"""Time limits on calls into an implementation: nothing the implementation does may hang the tool.

The limit measures the implementation, not cowcheck: every call into it goes
through ``HarnessBase._call`` or a function wrapped by :func:`calls_into`
(:func:`implementation_call`), and a harness step is a function wrapped by
:func:`steps_through` (``HarnessBase.apply``). As each starts in the main thread
it puts a token of its own in :data:`RUNNING` (and puts back the one it found as
it ends), so :data:`RUNNING` names the innermost call into the implementation
(or step whose own checking runs) at every moment. While
:class:`StepTimeLimit` is active, a watchdog thread reads it a few times a
second. (The watchdog never walks the main thread's frames: on CPython 3.11,
reading another thread's frames while it runs, ``sys._current_frames()`` and
``f_back``, can crash the interpreter or hand back an object that is not a
frame, as sampling profilers found: cpython#111363, sentry-python#2386; it did
both here, in runs of 12 and 25 minutes.) A call that has run longer than the limit gets
:class:`StepTimeout` raised in the main thread (through ``SIGALRM``, so a
``time.sleep`` or a blocking call that Python can interrupt is left too).
The harness turns it into a TIMEOUT failure naming the step, which shrinks,
is stored and replays like any other failure. The harness's own checking
(the model, I1-I9) is not the implementation's time: a step whose checking
alone runs past :func:`harness_bound` raises :class:`HarnessOverrun`
instead, cowcheck's own error (exit 3).

A *paced* limit (``paced=True``: ``check``, ``mutants``, campaigns) waits
for a call no longer than the run's own pace requires: ``PACE_FACTOR`` times
the slowest call seen so far, at least ``PACE_FLOOR``, at most the limit
(calls are timed by the watchdog's samples, so the pace moves only for calls
longer than a sample interval). A call past the pace is only *suspected* of
hanging (:attr:`StepTimeout.seconds` below the limit): whoever stores it
first confirms it under the full limit (``cowcheck.core.shrink``), and a
suspicion that does not confirm takes the pace up (:meth:`StepTimeLimit.missed`)
and the work is done again. So a hang costs a second or so to find and one
full limit to confirm; a map that is only slow still passes.

Two kinds of hang cannot be interrupted inside the process:

- native code that released the GIL and never returns (a Java call through
  JPype that loops): after the full limit and a grace period the watchdog
  calls ``on_stuck`` (the command stores what it has, unshrunk) and ends the
  process with exit 1;
- native code that holds the GIL (a C extension's loop): no Python runs at
  all, so :mod:`faulthandler` ends the process (exit 1) after the limit plus
  the grace period, with every thread's traceback on stderr.

Campaigns also run each seed range in a child process that is killed on a
hang (``cowcheck.spark_fuzz.ranges``), so there a hang costs one seed.

Only the implementation's own time is charged. A call that makes many calls
into the implementation with cowcheck's own work between them (a batched
segment of Flink's map: 512 steps, each followed by the invariants I1-I9
checked in Java) is a :func:`metered_call`: it times each of the
implementation's calls itself and the driver charges them step by step
(:func:`charge`: past the pace or the limit, the StepTimeout of the very step
that made the call), while the watchdog reads the call's *meter* (a counter,
odd while one of the implementation's calls runs, read without calling into
it) and ends the process only for one of those calls stuck past the limit and
the grace period; the time between them is cowcheck's (bounded as a step's
checking is). :func:`implementation_seconds` adds up, by the watchdog's
samples, the time the main thread spent inside the implementation's own calls
(a campaign's seed time limit charges that, not the walk's wall time), less
the time it waited for a CPU held by other processes (Linux's schedstat), so
that a busy machine slows a walk without spending its budget.

Frames of a foreign framework that calls back into Python (Flink's async
controller running cowcheck's callbacks) must not be unwound by the limit's
exception mid-way: Flink may catch it, or lose it in a ``CompletableFuture``,
and be left half-updated. Inside :func:`held_back` the interruption is held
back and raised as the region ends (the call has returned by then).

Without an active limit (a library call of the harness, a plain test),
steps run unbounded, as before.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import itertools
import os
import signal
import sys
import threading
import time
from typing import Callable

__all__ = ["DEFAULT_STEP_TIME_LIMIT", "PACE_FLOOR", "PACE_FACTOR", "StepTimeout", "HarnessOverrun", "BudgetSpent",
           "StepTimeLimit", "calls_into", "steps_through", "implementation_call", "implementation_calls", "running",
           "RUNNING", "TOKENS", "MAIN_THREAD", "metered_call", "charge", "held_back", "implementation_seconds",
           "current_limit", "active_limit", "harness_bound", "limited", "unpaced", "progress_mark"]

DEFAULT_STEP_TIME_LIMIT = 10.0
PACE_FLOOR = 0.5  # seconds: a paced limit never suspects a call sooner
PACE_FACTOR = 10.0  # a paced limit suspects a call this many times slower than the slowest seen
_GRACE = 2.0  # seconds a stuck main thread gets to pick up StepTimeout before on_stuck / faulthandler
_REARM = 0.25  # seconds between the watchdog's re-arming of the dead man's switch
_HARNESS_FLOOR = 60.0  # seconds of its own checking a step may take at least (harness_bound)

_LIMIT: "StepTimeLimit | None" = None
MAIN_THREAD = threading.main_thread().ident
# What the main thread runs now, innermost: a call into the implementation (a positive token), the
# harness checking a step (a negative one) or neither (0). A new call or step takes a new token and
# puts back the one it found as it ends, so the slot always names the innermost; the watchdog reads it.
RUNNING = [0]
TOKENS = itertools.count(1)
_COUNTS: dict = {}  # token of an implementation_calls call -> how many calls it stands for
_METERS: dict = {}  # token of a metered_call -> its meter
_SPENT = [0.0]  # seconds the main thread spent inside the implementation's calls (implementation_seconds)
_HELD: list = [0, None]  # how deep in held_back regions the main thread is; the interruption held back


def _publishing(sign: int, fn):
    """``fn``, which while it runs in the main thread is what :data:`RUNNING` names."""

    @functools.wraps(fn)
    def published(*args, **kwargs):
        if threading.get_ident() != MAIN_THREAD:
            return fn(*args, **kwargs)  # limits apply to the main thread only (StepTimeLimit)
        previous = RUNNING[0]
        try:  # whatever interrupts it, the token it found is put back
            RUNNING[0] = sign * next(TOKENS)
            return fn(*args, **kwargs)
        finally:
            RUNNING[0] = previous
    return published


def calls_into(fn):
    """Decorator: ``fn`` is a call into the implementation (timed from when the watchdog
    first sees it running). ``HarnessBase._call``, the hot one, does the same inline."""
    return _publishing(1, fn)


def steps_through(fn):
    """Decorator: ``fn`` (outside the calls into the implementation it makes) is the harness
    checking a step."""
    return _publishing(-1, fn)


@calls_into
def implementation_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` as a call into the implementation outside a harness step
    (building one, probing its view, a batched walk's segment): under the time limit."""
    return fn(*args, **kwargs)


@calls_into
def implementation_calls(count: int, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` that makes (or waits for) ``count`` calls into the implementation
    at once (a step run ahead in the implementation's process): under ``count`` times the limit."""
    token = RUNNING[0] if threading.get_ident() == MAIN_THREAD else 0
    _COUNTS[token] = max(1, int(count))
    try:
        return fn(*args, **kwargs)
    finally:
        _COUNTS.pop(token, None)


def metered_call(meter: Callable[[], int], fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a call into the implementation that makes many of the implementation's
    own calls with cowcheck's work between them, and times them itself (a batched segment: its driver
    hands each call's time to :func:`charge`). ``meter()`` reads, without calling into the
    implementation, a number that is odd while one of those calls runs and changes as each starts
    and ends; the watchdog charges only those calls (one past the limit and the grace period is
    stuck: ``on_stuck``, and the process ends) and holds cowcheck's work between them to the bound of
    a step's own checking."""
    return _metered(meter, fn, *args, **kwargs)


@calls_into
def _metered(meter, fn, *args, **kwargs):
    token = RUNNING[0] if threading.get_ident() == MAIN_THREAD else 0
    _METERS[token] = meter
    try:
        return fn(*args, **kwargs)
    finally:
        _METERS.pop(token, None)


def progress_mark() -> tuple:
    """What changes while the main thread makes progress (a heartbeat compares two): the innermost
    call or step it runs and, inside a metered call, the meter's reading (a batched segment keeps one
    token for all its calls)."""
    token = RUNNING[0]
    meter = _METERS.get(token)
    try:
        return token, meter() if meter is not None else 0
    except Exception:  # (a meter read while its call ends) the token alone then
        return token, 0


def charge(seconds: float) -> None:
    """A call into the implementation that timed itself (:func:`metered_call`) took ``seconds``:
    past the active limit's pace (a suspected hang, confirmed under the full limit as any) or the
    limit, StepTimeout, as the watchdog would have raised had it timed the call; otherwise the
    call counts toward the pace. Called in the main thread, by the step that made the call."""
    limit = _LIMIT
    if limit is None or not limit._enabled:
        return
    pace = limit.pace
    if seconds >= pace:
        limit.timed_out += 1
        limit.last_timeout = pace
        raise StepTimeout(pace, limit.seconds)
    if seconds > limit.slowest:
        limit.slowest = seconds


@contextlib.contextmanager
def held_back():
    """A region in which the active limit's interruption (StepTimeout, HarnessOverrun) is held back
    and raised as the outermost such region ends: for frames of a foreign framework that calls back
    into Python and must not be unwound mid-way (see the module docstring). A hang inside it is
    still found: the watchdog ends a call stuck past the limit and the grace period as any."""
    if threading.get_ident() != MAIN_THREAD:
        yield
        return
    _HELD[0] += 1
    try:
        yield
    finally:
        _HELD[0] -= 1
        held = _HELD[1] if not _HELD[0] else None
        if held is not None:
            _HELD[1] = None
            raise held


def implementation_seconds() -> float:
    """Seconds the main thread has spent inside calls into the implementation while a limit was
    active (by the watchdog's samples: a sum over many calls, not any one's; in a metered call, the
    implementation's own calls only)."""
    return _SPENT[0]


def _run_delay(native_id: int) -> float:
    """Seconds the thread ``native_id`` of this process has waited on a run queue, ready to run
    while other threads held the CPUs (Linux schedstat); 0.0 where the kernel does not say."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat", "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def running() -> tuple[str, int]:
    """What the main thread runs now: ``("call", token)`` of the innermost call into the
    implementation, ``("step", token)`` of the step whose own checking runs, or ``("", 0)``.
    Safe from any thread: it reads :data:`RUNNING`, never the main thread's frames."""
    token = RUNNING[0]
    return ("call", token) if token > 0 else ("step", token) if token < 0 else ("", 0)


def current_limit() -> float | None:
    """Seconds a call may take under the active limit (the full limit, not the pace), or None."""
    return _LIMIT.seconds if _LIMIT is not None else None


def active_limit() -> "StepTimeLimit | None":
    return _LIMIT


def harness_bound(seconds: float) -> float:
    """Seconds of cowcheck's own checking one step may take under a limit of ``seconds``."""
    return max(_HARNESS_FLOOR, 6 * seconds)


class StepTimeout(BaseException):
    """Raised in the main thread inside a call that ran past its time limit.

    A BaseException, so that an implementation's ``except Exception`` cannot
    swallow it; the harness catches it and reports a TIMEOUT failure.
    ``seconds``: the limit that ran out (below ``limit`` when it was a paced
    run's pace: a suspected hang, to be confirmed under ``limit``)."""

    def __init__(self, seconds: float = 0.0, limit: float = 0.0) -> None:
        super().__init__(f"a call ran longer than {seconds:g} s")
        self.seconds = seconds
        self.limit = limit or seconds

    @property
    def suspected(self) -> bool:
        return self.seconds < self.limit


class HarnessOverrun(BaseException):
    """Raised in the main thread when a step's own checking (not the implementation's calls)
    runs past :func:`harness_bound`: cowcheck's own error, never the implementation's."""


class BudgetSpent(BaseException):
    """Raised between steps once a run's time budget (``--minutes``) is spent:
    stops a Hypothesis run at once (a BaseException passes through it)."""


class StepTimeLimit:
    """Context manager: calls into the implementation from any harness run in this
    thread take at most ``seconds``. Re-entrant: an inner limit (shrinking and
    confirming use their own) replaces the outer one until it exits.

    ``paced``: suspect a call at the run's pace (see the module docstring).
    ``resolution``: seconds between the watchdog's samples, when :attr:`slowest` must see
    calls shorter than the default (at most 50 ms; a short run measuring a program's pace).
    ``on_stuck(seconds)``: called from the watchdog thread when the main
    thread is stuck in native code past the limit and the grace period (it
    should store what is known); the process then exits with code 1. An inner
    limit without one uses the nearest outer limit's.
    """

    def __init__(self, seconds: float = DEFAULT_STEP_TIME_LIMIT,
                 on_stuck: Callable[[float], None] | None = None, *, paced: bool = False,
                 resolution: float | None = None) -> None:
        if seconds <= 0:
            raise ValueError(f"step time limit must be positive, got {seconds!r}")
        self.seconds = float(seconds)
        self.on_stuck = on_stuck
        self.paced = paced
        self.resolution = resolution  # seconds between the watchdog's samples, if finer than its own choice
        self.slowest = 0.0  # the longest call seen to return (a lower bound, at the watchdog's resolution)
        self.timed_out = 0  # how many calls were interrupted
        self.last_timeout = 0.0  # the limit that interrupted the last of them
        self._outer: StepTimeLimit | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous_handler = None
        self._fire: tuple = ("", 0, 0.0)  # what the next SIGALRM is for: ("call" | "step", token, seconds)
        self._enabled = False
        self._dead_man = self.seconds  # the limit the dead man's switch allows for (the outermost's, at least)

    @property
    def pace(self) -> float:
        """Seconds the next call may take before it is suspected of hanging."""
        if not self.paced:
            return self.seconds
        return min(self.seconds, max(PACE_FLOOR, PACE_FACTOR * self.slowest))

    def missed(self) -> bool:
        """The last interrupted call was suspected at the pace and did not hang under the full
        limit: it was slow. Take the pace up as if that call had returned; False if it was
        interrupted at the full limit (there is nothing to take up)."""
        if not self.paced or not 0 < self.last_timeout < self.seconds:
            return False
        self.slowest = max(self.slowest, self.last_timeout)
        self.last_timeout = self.seconds
        return True

    def __enter__(self) -> "StepTimeLimit":
        global _LIMIT
        main = threading.current_thread() is threading.main_thread()
        self._enabled = main and hasattr(signal, "pthread_kill")
        self._outer = _LIMIT
        if not self._enabled:
            return self  # not the main thread: no signals here; steps run unbounded
        if self._outer is not None:
            self._outer._pause()
            self._dead_man = max(self.seconds, self._outer._dead_man)  # a shorter inner limit is not the user's
        _LIMIT = self
        self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self._stop.clear()
        self._start_watchdog()
        return self

    def __exit__(self, *exc) -> None:
        global _LIMIT
        if not self._enabled:
            return
        self._pause()
        signal.signal(signal.SIGALRM, self._previous_handler or signal.SIG_DFL)
        _LIMIT = self._outer
        if self._outer is not None:
            self._outer._resume()

    def _pause(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        faulthandler.cancel_dump_traceback_later()

    def _resume(self) -> None:
        self._stop.clear()
        self._start_watchdog()

    def _interval(self) -> float:
        """Seconds between the watchdog's samples: the resolution of the pace, and how late a call
        is first seen (it is timed from then, so never interrupted before its limit)."""
        shortest = min(self.seconds, PACE_FLOOR) if self.paced else self.seconds
        return min(0.05, shortest / 5, self.resolution or 0.05)

    def _arm_dead_man_switch(self) -> None:
        # Dead man's switch for a main thread stuck in native code that holds the GIL: the
        # watchdog cannot run then either, so it stops re-arming and faulthandler ends the
        # process once the interpreter has been unresponsive for the limit and twice the grace.
        faulthandler.dump_traceback_later(self._dead_man + 2 * _GRACE + _REARM, exit=True)

    def _start_watchdog(self) -> None:
        # Armed here, before the watchdog's first wake-up: a step that takes the GIL for good
        # within the first interval must not leave the switch unarmed.
        self._arm_dead_man_switch()
        self._thread = threading.Thread(target=self._watch, args=(threading.main_thread().ident,),
                                        name="cowcheck-step-watchdog", daemon=True)
        self._thread.start()

    # -------------------------------------------------------- the watchdog

    def _on_alarm(self, signum, frame) -> None:
        what, target, seconds = self._fire
        self._fire = ("", 0, 0.0)
        if not target or running() != (what, target):
            return  # that call returned (or that step's checking went into a call) since the watchdog looked
        if what == "call":
            self.timed_out += 1
            self.last_timeout = seconds
            exc: BaseException = StepTimeout(seconds, self.seconds)
        else:
            exc = HarnessOverrun(f"cowcheck's own checking of one step ran past {seconds:g} s")
        if _HELD[0]:  # a foreign framework's frames: raised as held_back's region ends
            _HELD[1] = _HELD[1] or exc
            return
        raise exc

    def _signal(self, main_ident: int, what: str, target: int, seconds: float) -> None:
        self._fire = (what, target, seconds)
        signal.pthread_kill(main_ident, signal.SIGALRM)

    def _watch(self, main_ident: int) -> None:
        interval = self._interval()
        bound = harness_bound(self.seconds)
        call_seen, call_since, call_took, signalled = None, 0.0, 0.0, False
        phase_seen, metered, inside = None, False, False
        step_seen, checking, step_signalled = None, 0.0, False
        native = threading.main_thread().native_id
        waited = _run_delay(native)
        last = armed = time.monotonic()
        wait = interval
        while not self._stop.wait(wait):
            now = time.monotonic()
            queued = _run_delay(native)
            if inside:  # (the last sample found the main thread inside the implementation)
                # Its time, less what the main thread waited for a CPU other threads or processes
                # held: a loaded machine slows a walk, it does not spend its budget.
                _SPENT[0] += max(0.0, (now - last) - (queued - waited))
            waited = queued
            if now - armed >= _REARM:
                self._arm_dead_man_switch()
                armed = now
            wait = interval
            what, where = running()
            call = where if what == "call" else None
            meter = _METERS.get(call) if call is not None else None
            if call != call_seen:  # the call seen last time has returned (or was interrupted)
                if call_seen is not None and not signalled and not metered and call_took > self.slowest:
                    self.slowest = call_took  # the pace: calls that returned, never one interrupted
                call_seen, call_since, call_took, signalled = call, now, 0.0, False
                phase_seen, metered = None, meter is not None
            inside = call is not None
            if meter is not None:  # its own calls timed apart from cowcheck's work between them
                phase = meter()
                if phase != phase_seen:  # one of the implementation's calls started or ended
                    phase_seen, call_since = phase, now
                took = now - call_since
                inside = bool(phase & 1)
                if inside and took > self.seconds + _GRACE:
                    self._stuck(took)
                elif not inside and took > bound + _GRACE:
                    self._stuck_ours(took)
            elif call is not None:
                call_took = now - call_since
                limit = self.pace * _COUNTS.get(call, 1)
                if signalled:  # (a wait for several calls may run past the limit before it is signalled)
                    if call_took > max(limit, self.seconds) + _GRACE:
                        self._stuck(call_took)
                elif call_took >= limit:
                    signalled = True
                    self._signal(main_ident, "call", call, limit)
                else:  # wake up when its time is up, not a sample later
                    wait = min(interval, max(limit - call_took, 0.001))
            elif what == "step":  # the harness's own checking of a step
                if where != step_seen:
                    step_seen, checking, step_signalled = where, 0.0, False
                else:
                    checking += now - last
                if checking >= bound and not step_signalled:
                    step_signalled = True
                    self._signal(main_ident, "step", where, bound)
            last = now

    def _stuck_ours(self, seconds: float) -> None:
        """cowcheck's own work inside a metered call (native code) has not returned: its error, never
        the implementation's; the process ends with exit 3."""
        faulthandler.cancel_dump_traceback_later()
        try:
            sys.stderr.write(f"internal error in cowcheck: its own checking inside a call into the implementation "
                             f"has not returned after {seconds:.0f} s and cannot be interrupted (native code); "
                             f"exiting\n")
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(3)

    def _stuck(self, seconds: float) -> None:
        """The main thread has not picked up StepTimeout: stuck in native code."""
        faulthandler.cancel_dump_traceback_later()
        on_stuck, outer = self.on_stuck, self._outer
        while on_stuck is None and outer is not None:  # a limit of its own (shrinking's) stores as the run's does
            on_stuck, outer = outer.on_stuck, outer._outer
        try:
            if on_stuck is not None:
                on_stuck(seconds)
            else:
                sys.stderr.write(f"cowcheck: a step has not returned after {seconds:.0f} s and cannot be "
                                 f"interrupted (native code); exiting\n")
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)


def unpaced():
    """The active limit without its pace (a nested limit of its full seconds; a no-op without a
    paced limit): for calls that cannot be done again when a suspicion does not confirm
    (building the implementation, probing its view)."""
    limit = _LIMIT
    if limit is None or not limit.paced:
        return contextlib.nullcontext()
    return StepTimeLimit(limit.seconds, limit.on_stuck)


def limited(seconds: float | None, on_stuck: Callable[[float], None] | None = None, *, paced: bool = False):
    """A :class:`StepTimeLimit`, or a no-op context for ``seconds`` None."""
    return StepTimeLimit(seconds, on_stuck, paced=paced) if seconds else contextlib.nullcontext()
