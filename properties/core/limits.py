"""Time limits on calls into an implementation: nothing the implementation does may hang the tool.

A harness marks each step it runs (:func:`step_begins` / :func:`step_ends`,
one global store each: cheap enough for every step of a walk). While
:class:`StepTimeLimit` is active, a watchdog thread looks at the running
step a few times a second; a step that has run longer than the limit gets
:class:`StepTimeout` raised in the main thread (through ``SIGALRM``, so a
``time.sleep`` or a blocking call that Python can interrupt is left too).
The harness turns it into a TIMEOUT failure naming the step, which shrinks,
is stored and replays like any other failure.

Two kinds of hang cannot be interrupted inside the process:

- native code that released the GIL and never returns (a Java call through
  JPype that loops): after a grace period the watchdog calls ``on_stuck``
  (the command stores what it has, unshrunk) and ends the process with exit 1;
- native code that holds the GIL (a C extension's loop): no Python runs at
  all, so :mod:`faulthandler` ends the process (exit 1) after the limit plus
  the grace period, with every thread's traceback on stderr.

Campaigns also run each seed range in a child process that is killed on a
hang (``spark_fuzz.ranges``), so there a hang costs one seed.

Without an active limit (a library call of the harness, a plain test),
steps run unbounded, as before.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from typing import Callable

__all__ = ["DEFAULT_STEP_TIME_LIMIT", "StepTimeout", "BudgetSpent", "StepTimeLimit", "step_begins", "step_ends",
           "current_limit", "limited"]

DEFAULT_STEP_TIME_LIMIT = 10.0
_GRACE = 2.0  # seconds a stuck main thread gets to pick up StepTimeout before on_stuck / faulthandler


class StepTimeout(BaseException):
    """Raised in the main thread inside a step that ran past its time limit.

    A BaseException, so that an implementation's ``except Exception`` cannot
    swallow it; the harness catches it and reports a TIMEOUT failure."""


class BudgetSpent(BaseException):
    """Raised between steps once a run's time budget (``--minutes``) is spent:
    stops a Hypothesis run at once (a BaseException passes through it)."""


# The running step: whether one runs and a counter that moves at every step
# (module globals: the hot path writes them with two stores per step).
_ACTIVE = False
_TICK = 0
_LIMIT: "StepTimeLimit | None" = None


def step_begins() -> None:
    global _ACTIVE, _TICK
    _TICK += 1
    _ACTIVE = True


def step_ends() -> None:
    global _ACTIVE
    _ACTIVE = False


def current_limit() -> float | None:
    """Seconds a step may take under the active limit, or None."""
    return _LIMIT.seconds if _LIMIT is not None else None


class StepTimeLimit:
    """Context manager: steps of any harness run in this thread take at most
    ``seconds``. Re-entrant: an inner limit (shrinking uses a shorter one)
    replaces the outer one until it exits.

    ``on_stuck(seconds)``: called from the watchdog thread when the main
    thread is stuck in native code past the limit and the grace period (it
    should store what is known); the process then exits with code 1.
    """

    def __init__(self, seconds: float = DEFAULT_STEP_TIME_LIMIT,
                 on_stuck: Callable[[float], None] | None = None) -> None:
        if seconds <= 0:
            raise ValueError(f"step time limit must be positive, got {seconds!r}")
        self.seconds = float(seconds)
        self.on_stuck = on_stuck
        self.timed_out = 0  # how many steps were interrupted
        self._outer: StepTimeLimit | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous_handler = None
        self._fire_tick = -1
        self._enabled = False

    def __enter__(self) -> "StepTimeLimit":
        global _LIMIT
        main = threading.current_thread() is threading.main_thread()
        self._enabled = main and hasattr(signal, "pthread_kill")
        self._outer = _LIMIT
        if not self._enabled:
            return self  # not the main thread: no signals here; steps run unbounded
        if self._outer is not None:
            self._outer._pause()
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
        return min(0.25, self.seconds / 4)

    def _arm_dead_man_switch(self) -> None:
        # Dead man's switch for a main thread stuck in native code that holds the GIL: the
        # watchdog cannot run then either, so it stops re-arming and faulthandler ends the
        # process once the interpreter has been unresponsive for the limit and twice the grace.
        faulthandler.dump_traceback_later(self.seconds + 2 * _GRACE + self._interval(), exit=True)

    def _start_watchdog(self) -> None:
        # Armed here, before the watchdog's first wake-up: a step that takes the GIL for good
        # within the first interval must not leave the switch unarmed.
        self._arm_dead_man_switch()
        self._thread = threading.Thread(target=self._watch, args=(threading.main_thread().ident,),
                                        name="cowcheck-step-watchdog", daemon=True)
        self._thread.start()

    # -------------------------------------------------------- the watchdog

    def _on_alarm(self, signum, frame) -> None:
        if _ACTIVE and _TICK == self._fire_tick:
            self.timed_out += 1
            raise StepTimeout(f"step ran longer than {self.seconds:g} s")

    def _watch(self, main_ident: int) -> None:
        interval = self._interval()
        seen_tick, since, signalled_at = -1, time.monotonic(), None
        while not self._stop.wait(interval):
            self._arm_dead_man_switch()
            now = time.monotonic()
            if not _ACTIVE:
                seen_tick, signalled_at = -1, None
                continue
            if _TICK != seen_tick:
                seen_tick, since, signalled_at = _TICK, now, None
            if now - since < self.seconds:
                continue
            if signalled_at is None:
                self._fire_tick = seen_tick
                signalled_at = now
                signal.pthread_kill(main_ident, signal.SIGALRM)
            elif now - signalled_at > _GRACE:
                self._stuck(now - since)

    def _stuck(self, seconds: float) -> None:
        """The main thread has not picked up StepTimeout: stuck in native code."""
        faulthandler.cancel_dump_traceback_later()
        try:
            if self.on_stuck is not None:
                self.on_stuck(seconds)
            else:
                sys.stderr.write(f"cowcheck: a step has not returned after {seconds:.0f} s and cannot be "
                                 f"interrupted (native code); exiting\n")
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(1)


def limited(seconds: float | None, on_stuck: Callable[[float], None] | None = None):
    """A :class:`StepTimeLimit`, or a no-op context for ``seconds`` None."""
    return StepTimeLimit(seconds, on_stuck) if seconds else contextlib.nullcontext()
