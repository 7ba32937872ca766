"""The step loop every harness shares: one step at a time, every call into the implementation guarded.

A harness applies a :class:`~cowcheck.core.program.Step` to the implementation
under test and to its model, then checks properties. :class:`HarnessBase`
owns what does not depend on the structure:

- the step loop (:meth:`~HarnessBase.apply` calls the subclass's
  ``_op_<name>`` method, then :meth:`~HarnessBase.check_after_step`);
- :meth:`~HarnessBase._fail`, which records a
  :class:`~cowcheck.core.failures.Failure` and raises ``CheckFailure``;
- :meth:`~HarnessBase._call`, the only way into the implementation: an
  exception it raises becomes a CRASH failure of the step, BaseExceptions
  included (``SystemExit``, ``GeneratorExit``, a ``KeyboardInterrupt`` it
  raises itself; :mod:`cowcheck.core.boundary`); an implementation in
  another process whose process ends is a CRASH ``worker-exit`` of the step;
- time limits (:mod:`cowcheck.core.limits`): a call into the implementation
  past the active limit is a TIMEOUT failure (code ``time-limit``) naming the
  step; the limit counts the calls only, never the harness's own checking (a
  step whose checking alone runs past its bound is cowcheck's error);
- the boundary between the implementation's failures and the suite's own
  errors: any other exception escaping a step was raised by cowcheck's own
  code (the model, the invariants, rendering) and becomes
  :class:`~cowcheck.core.errors.InternalError`, never a failure of the
  implementation.

Subclasses set ``operations`` (the machine's
:class:`~cowcheck.core.program.OperationTable`; each operation is applied
by the method ``_op_<name>``, which a subclass must define: a harness
missing one fails when its class is defined), and may set ``crash_code``
(the property an unexpected exception breaks). The table gives the steps'
rendering and the shrinker's argument simplifications; a subclass whose
programs have internal references (snapshot ids) overrides
:meth:`~HarnessBase.valid_program` and :meth:`~HarnessBase.normalise`.
"""

from __future__ import annotations

import traceback
from collections import Counter
from threading import get_ident
from typing import NoReturn

from cowcheck.core.boundary import (WORKER_EXIT, ImplementationError, LateError, WorkerFailure, is_interruption,
                                      is_ours)
from cowcheck.core.errors import InternalError, UsageError
from cowcheck.core.failures import CRASH, DIVERGENCE, TIME_LIMIT, TIMEOUT, CheckFailure, Failure, json_data
from cowcheck.core.limits import MAIN_THREAD, RUNNING, TOKENS, HarnessOverrun, StepTimeout, steps_through
from cowcheck.core.program import OperationTable, Step

__all__ = ["HarnessBase"]

_MISSING = object()


class HarnessBase:
    """See the module docstring. Subclasses call ``super().__init__()`` and
    implement ``_op_<name>(step, *args)`` for each operation."""

    operations: OperationTable | None = None
    crash_code = "P7"
    # What the walk drivers (walk phase, campaigns, replay, shrinking) ask of every harness, declared
    # here so that none of them probes for it:
    runs_ahead = False  # given the steps with expect(), it runs them ahead in batches (Flink's walks,
    # a map in a process of its own): another path to the verdicts than call by call, and a fast one to replay
    confirmed_on_replay = False  # a failure it reports was found or confirmed by calls one at a time
    sampled = False  # checks the structural invariants at some steps only (a failure is replayed with all)
    # The harness that applies the same steps to the same implementation call by call, if this one runs
    # them in the implementation's process: a hang is confirmed with it, once under the limit (here a
    # hanging step's record is waited for, then the step is timed again live: twice the limit).
    live_harness = None
    # A classmethod settling a failing program its own way (shrunk and counted: a map in a process of its
    # own, cowcheck.core.ahead), or None; it returns None where the usual way must do it (cowcheck.core.shrink).
    shrink_apart = None
    spare_harness = None  # the class the walk phase's walks after a first failure run through, if not this one
    space = None  # the state-space coverage it keeps (``update``, ``folded``, ``lines``), if any
    white_box = False  # whether it checks the implementation's structure through its introspection
    # Why a state handed out must be a fresh copy, or the caller's own object (P6), in the machine's words.
    copy_reason = "a live snapshot may share it"
    own_reason = "no live snapshot is newer than the state"

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.operations is not None:
            missing = [op.name for op in cls.operations if not callable(getattr(cls, "_op_" + op.name, None))]
            if missing:
                raise TypeError(f"{cls.__name__} applies no operation {', '.join(missing)} of its table: "
                                f"define {', '.join('_op_' + name for name in missing)}")

    @property
    def machine(self) -> str:
        return self.operations.machine if self.operations is not None else "?"

    @classmethod
    def render_step(cls, step: Step) -> str:
        """The step as a line of Python."""
        return cls.operations.render(step)

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.coverage: Counter = Counter()
        self.findings: Counter = Counter()
        self.failure: Failure | None = None
        self.held: dict = {}  # slot -> the state object the implementation should be holding (P6)
        self._ops: dict = {}

    # ---------------------------------------------------------------- apply

    @steps_through
    def apply(self, step: Step) -> None:
        """Run one step on both sides and check everything; raises CheckFailure
        (the implementation broke a property) or InternalError (cowcheck did)."""
        self.steps.append(step)
        try:
            self._apply(step)
        except CheckFailure:
            raise
        except StepTimeout as exc:
            self._timed_out(step, exc)
        except LateError as exc:  # a call sent ahead raised: the step's CRASH, as if it had raised at once
            self._crashed(step, exc.error)
        except WorkerFailure as exc:
            self._worker_failed(step, exc)
        except (InternalError, UsageError):  # UsageError: a driver refusing its input (exit 2), not the map
            raise
        except HarnessOverrun as exc:
            raise InternalError(f"{exc} (the {self.machine} harness at step {len(self.steps) - 1}, "
                                f"{self._render(step)}, outside the calls into the implementation)",
                                traceback.format_exc()) from None
        except Exception as exc:
            if isinstance(exc, ImplementationError):  # raised in the implementation's process, e.g. by the
                self._crashed(step, exc)  # __eq__ of a value it handed out, while the harness compared it
            raise InternalError(
                f"{type(exc).__name__} in cowcheck's {self.machine} harness at step {len(self.steps) - 1} "
                f"({self._render(step)}): {exc}", traceback.format_exc()) from exc
        except (SystemExit, GeneratorExit, KeyboardInterrupt) as exc:
            # cowcheck's code raises none of these: the implementation's code did (a value's __eq__
            # the harness called), unless it is the user's Ctrl-C
            if is_interruption(exc):
                raise
            self._crashed(step, exc)

    def _apply(self, step: Step) -> None:
        op = self._ops.get(step.op)
        if op is None:
            op = getattr(type(self), "_op_" + step.op, None)  # a function: see the map harness's _ops
            if op is None:
                self._fail(CRASH, "program", f"not a {self.machine} step: {step!r}")
            self._ops[step.op] = op
        op(self, step, *step.args)
        self.check_after_step(step)

    def check_after_step(self, step: Step) -> None:
        """Properties checked after every step (none by default)."""

    def expect(self, steps: list[Step]) -> None:
        """The steps about to be applied, in order (a harness that :attr:`runs_ahead` sends them)."""

    def final_check(self) -> None:
        """The checks a run's last steps skipped, at the end of a walk that ran to its end (none by default)."""

    def close(self) -> None:
        """Release what the harness holds (threads, directories), whether the run passed or failed."""

    @staticmethod
    def calls_in(step: Step) -> int:
        """About how many calls into the implementation ``step`` makes (a bulk step: many)."""
        return 1

    @staticmethod
    def operations_in(step: Step) -> int:
        """The operations ``step`` applies, as a campaign counts checked operations (a bulk step: its count)."""
        return 1

    # -------------------------------------------------------------- failing

    def _fail(self, kind: str, code: str, message: str, expected=None, actual=None) -> NoReturn:
        """Record the failure (expected and actual as detached JSON data) and raise it."""
        self.failure = Failure(kind, code, message, len(self.steps) - 1, json_data(expected), json_data(actual))
        raise CheckFailure(self.failure)

    def _expect_identity(self, step: Step, slot, value, copy_expected: bool) -> None:
        """P6, docs/contract.md §6's exact identity rule: a state handed out is a fresh copy
        if ``copy_expected``, else the very object the implementation holds for
        ``slot`` (``self.held``; unknown slots and None are not checked)."""
        held = self.held.get(slot, _MISSING)
        if held is _MISSING or value is None:
            return
        if copy_expected and value is held:
            self._fail(DIVERGENCE, "P6", f"{self._render(step)}: returned the live state object although "
                                         f"{self.copy_reason} (expected a fresh copy)", "fresh copy", "same object")
        if not copy_expected and value is not held:
            self._fail(DIVERGENCE, "P6", f"{self._render(step)}: returned a copy although {self.own_reason} "
                                         f"(expected the caller's own object)", "same object", "copy")

    def _timed_out(self, step: Step, exc: StepTimeout) -> NoReturn:
        if exc.suspected:  # the run's pace ran out: confirmed under the full limit before it is stored
            message = (f"{self._render(step)}: did not return within {exc.seconds:g} s, the run's pace "
                       f"(suspected hang; the step time limit is {exc.limit:g} s)")
        else:
            message = f"{self._render(step)}: did not return within the step time limit of {exc.seconds:g} s"
        self._fail(TIMEOUT, TIME_LIMIT, message, "returns", "still running")

    def _call(self, step: Step, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, a call into the implementation: an exception
        it raises is a CRASH failure of ``step`` (code :attr:`crash_code`). The
        call, and only the call, runs under the step time limit: it names itself
        in ``limits.RUNNING`` for the watchdog, as :func:`~cowcheck.core.limits.calls_into`
        does, inline because every call into the implementation pays for it."""
        main = get_ident() == MAIN_THREAD
        previous = RUNNING[0]
        try:
            if main:
                RUNNING[0] = next(TOKENS)
            return fn(*args, **kwargs)
        except (CheckFailure, InternalError, UsageError):  # raised by a driver between harness and map
            raise
        except Exception as exc:  # the implementation raised where the model did not
            self._crashed(step, exc)
        except LateError as exc:
            self._crashed(step, exc.error)
        except WorkerFailure as exc:
            self._worker_failed(step, exc)
        except BaseException as exc:  # SystemExit, GeneratorExit, its own KeyboardInterrupt...: a CRASH too
            if is_ours(exc):
                raise
            self._crashed(step, exc)
        finally:
            if main:
                RUNNING[0] = previous

    def _worker_failed(self, step: Step, exc: WorkerFailure) -> NoReturn:
        ended = "its process ended" if exc.code == WORKER_EXIT else "its process broke the protocol"
        self._fail(CRASH, exc.code, f"{self._render(step)}: {ended} ({exc.description})", "returns",
                   exc.description)

    def _crashed(self, step: Step, exc: BaseException) -> NoReturn:
        self._fail(CRASH, self.crash_code, f"{self._render(step)}: raised {type(exc).__name__}: {_text(exc)}",
                   expected="no error", actual=f"{type(exc).__name__}: {_text(exc)}")

    def _render(self, step: Step) -> str:
        try:
            return self.render_step(step)
        except Exception:
            return f"{step.op}{tuple(step.args)!r}"

    # ------------------------------------------------------------ shrinking

    @classmethod
    def simpler_steps(cls, step: Step):
        """Candidate replacements for one step, simplest first (for the shrinker)."""
        return cls.operations.simpler_steps(step) if cls.operations is not None else iter(())

    @classmethod
    def simpler_programs(cls, steps: list[Step]):
        """Simpler whole programs (for the shrinker), tried after the step-by-step passes:
        changes one step alone cannot make, e.g. a key replaced by a simpler one everywhere."""
        return iter(())

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        """Whether a program (a shrinking candidate) is well formed."""
        return True

    @classmethod
    def normalise(cls, steps: list[Step]) -> list[Step]:
        """A shrunk program in its canonical form (e.g. ids renumbered)."""
        return steps


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() raised>"
