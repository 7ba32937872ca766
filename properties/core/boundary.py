"""Whose failure it is: the implementation's, the user's Ctrl-C, or cowcheck's own.

A run has four outcomes and never mixes them: the implementation failed
(``CheckFailure``, exit 1), bad usage (exit 2), cowcheck's own error
(``InternalError``, exit 3), or the user interrupted it (exit 130). This
module draws the line for what is not an ordinary exception:

- **BaseExceptions the implementation raises** (``SystemExit`` from a
  ``sys.exit`` in a method, ``GeneratorExit``, a ``KeyboardInterrupt`` it
  raises itself, a BaseException class of its own) are its failures like any
  other exception: :func:`is_ours` says which exceptions are *not* (the
  suite's own ``StepTimeout``, ``BudgetSpent``, ``CheckFailure``,
  ``InternalError``, and a real Ctrl-C).
- **A real Ctrl-C**: :func:`catching_interrupts` installs a SIGINT handler
  that raises :class:`Interrupted` (a KeyboardInterrupt) and remembers the
  key was pressed, so a KeyboardInterrupt the implementation raises is told
  apart from the user's (:func:`is_interruption`). Without the handler (a
  library call, a plain test) every KeyboardInterrupt is taken for the
  user's.
- **An implementation in another process** (``cowcheck.core.remote``)
  fails in two more ways, both BaseExceptions so that no ``except Exception``
  of the checker takes them for something else: its process ends or breaks
  the protocol (:class:`WorkerFailure`), or a call whose answer was not
  awaited raised and the error shows at a later request
  (:class:`LateError`). The harness turns either into the CRASH of the step
  that was running. Exceptions re-raised from that process carry
  :class:`ImplementationError`: wherever the checker meets one (comparing a
  value the map handed out), it is the implementation's.
- **Construction**: :func:`build` makes an implementation under the step
  time limit; its failure is a CRASH (code ``construction``, or
  ``worker-exit``) or a TIMEOUT of a program with no steps yet, stored and
  replayed like any other.

>>> is_ours(SystemExit(0)), is_ours(StepTimeout())
(False, True)
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, NoReturn

from cowcheck.core.errors import InternalError
from cowcheck.core.failures import CRASH, TIME_LIMIT, TIMEOUT, CheckFailure, Failure
from cowcheck.core.garbage import collect_if_grown
from cowcheck.core.limits import BudgetSpent, HarnessOverrun, StepTimeout, current_limit, implementation_call

__all__ = ["Interrupted", "catching_interrupts", "no_user_here", "is_interruption", "is_ours", "WorkerFailure", "LateError", "OutOfStep",
           "ImplementationError", "build", "construction_failure", "is_crash_at_construction", "CONSTRUCTION",
           "WORKER_EXIT", "WORKER_PROTOCOL", "raised_text"]

CONSTRUCTION = "construction"  # CRASH code: building the implementation raised
WORKER_EXIT = "worker-exit"  # CRASH code: the implementation's process ended
WORKER_PROTOCOL = "worker-protocol"  # CRASH code: the implementation's process sent what it may not


# ------------------------------------------------------------------ Ctrl-C


class Interrupted(KeyboardInterrupt):
    """The user pressed Ctrl-C (SIGINT), as cowcheck's handler raises it."""


_PRESSED = False  # SIGINT arrived while cowcheck's handler was installed
_INSTALLED = 0  # nesting depth of catching_interrupts


def _on_sigint(signum, frame) -> NoReturn:
    global _PRESSED
    _PRESSED = True
    raise Interrupted()


@contextlib.contextmanager
def catching_interrupts():
    """While active (main thread only), Ctrl-C raises :class:`Interrupted` and is
    remembered, so :func:`is_interruption` can tell it from a KeyboardInterrupt
    an implementation raises."""
    global _INSTALLED
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _INSTALLED += 1
    try:
        yield
    finally:
        _INSTALLED -= 1
        signal.signal(signal.SIGINT, previous)


def no_user_here() -> None:
    """In a process that ignores SIGINT (an implementation's own, ``cowcheck.core.remote``):
    no KeyboardInterrupt there is the user's."""
    global _INSTALLED, _PRESSED
    _INSTALLED, _PRESSED = 1, False


def is_interruption(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's Ctrl-C (not a KeyboardInterrupt an implementation raised)."""
    return isinstance(exc, KeyboardInterrupt) and (isinstance(exc, Interrupted) or _PRESSED or not _INSTALLED)


class OutOfStep(BaseException):
    """A walk run ahead in the implementation's process (``cowcheck.core.ahead``) recorded
    other calls than the checker's harness makes: the checker stops reading the record and
    asks the implementation live instead. Never a verdict."""


def is_ours(exc: BaseException) -> bool:
    """Whether ``exc``, raised during a call into the implementation, is not the
    implementation's failure: the suite's own control flow or the user's Ctrl-C."""
    return (isinstance(exc, (CheckFailure, InternalError, StepTimeout, HarnessOverrun, BudgetSpent, OutOfStep))
            or is_interruption(exc))


# ---------------------------------------------------- another process


class WorkerFailure(BaseException):
    """The process running the implementation ended (``code`` ``worker-exit``) or sent
    what the protocol does not allow (``worker-protocol``); ``description`` says how
    ("exit code 0", "killed by signal SIGSEGV")."""

    def __init__(self, description: str, code: str = WORKER_EXIT) -> None:
        super().__init__(description)
        self.description = description
        self.code = code


class LateError(BaseException):
    """``error``, raised by a call into the implementation whose answer was not awaited
    (a ``put`` sent ahead), shows at a later request of the same step."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class ImplementationError:
    """Mixed into the exceptions re-raised from the implementation's process: the class
    has the implementation's exception's name and its nearest builtin base (so
    ``except RuntimeError`` still catches a ConcurrentModificationError); ``remote_text``
    is its ``str()`` there; ``base_exception``: it was not an Exception there (SystemExit,
    GeneratorExit, a KeyboardInterrupt...)."""

    remote_text = ""
    base_exception = False

    def __str__(self) -> str:
        return self.remote_text


# ---------------------------------------------------------- construction


def raised_text(exc: BaseException) -> str:
    """``Name: message`` of an exception the implementation raised (never raises)."""
    try:
        text = str(exc)
    except Exception:
        text = f"<{type(exc).__name__} whose str() raised>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_crash_at_construction(exc: BaseException) -> bool:
    """Whether a factory's ``exc`` is a crash rather than a refusal of its arguments:
    it ended its process, or raised what is not an ordinary exception (SystemExit...)."""
    if isinstance(exc, (WorkerFailure, LateError)):
        return True
    if isinstance(exc, ImplementationError):
        return exc.base_exception
    return not isinstance(exc, Exception) and not is_ours(exc)


def construction_failure(exc: BaseException) -> Failure:
    """The failure of a program whose implementation could not be built (``exc``)."""
    if isinstance(exc, WorkerFailure):
        return Failure(CRASH, exc.code, f"building the implementation: its process ended ({exc.description})"
                       if exc.code == WORKER_EXIT else f"building the implementation: {exc.description}",
                       0, "an implementation", exc.description)
    if isinstance(exc, StepTimeout):
        limit = current_limit()
        within = f" within the step time limit of {limit:g} s" if limit else ""
        return Failure(TIMEOUT, TIME_LIMIT, f"building the implementation did not return{within}", 0,
                       "returns", "still running")
    error = exc.error if isinstance(exc, LateError) else exc
    return Failure(CRASH, CONSTRUCTION, f"building the implementation raised {raised_text(error)}", 0,
                   "an implementation", raised_text(error))


def build(make: Callable[[], object]):
    """``make()``, an implementation for a program, under the active step time limit. If it
    raises anything but cowcheck's own control flow, the program fails before its first
    step: CheckFailure with a CRASH (``construction``, ``worker-exit``) or TIMEOUT at
    step 0 of an empty program, which stores and replays like any failure. What earlier
    programs left in reference cycles is collected first if the process has grown
    (:func:`~cowcheck.core.garbage.collect_if_grown`)."""
    collect_if_grown()
    try:
        return implementation_call(make)
    except StepTimeout as exc:
        raise CheckFailure(construction_failure(exc)) from None
    except BaseException as exc:
        if is_ours(exc):  # (cowcheck's own: its control flow, its start-up running past its bound, Ctrl-C)
            raise
        raise CheckFailure(construction_failure(exc)) from None
