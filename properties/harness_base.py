"""The step loop every harness shares: one step at a time, every call into the implementation guarded.

A harness applies a :class:`~properties.program.Step` to the implementation
under test and to its model, then checks properties. :class:`HarnessBase`
owns what does not depend on the structure:

- the step loop (:meth:`~HarnessBase.apply` calls the subclass's
  ``_op_<name>`` method, then :meth:`~HarnessBase.check_after_step`);
- :meth:`~HarnessBase._fail`, which records a
  :class:`~properties.failures.Failure` and raises ``CheckFailure``;
- :meth:`~HarnessBase._call`, the only way into the implementation: an
  exception it raises becomes a CRASH failure of the step;
- time limits (:mod:`properties.limits`): a step past the active limit is a
  TIMEOUT failure (code ``time-limit``) naming the step;
- the boundary between the implementation's failures and the suite's own
  errors: any other exception escaping a step was raised by cowcheck's own
  code (the model, the invariants, rendering) and becomes
  :class:`~properties.errors.InternalError`, never a failure of the
  implementation.

Subclasses set ``render_step`` (a step as a line of Python), may define
``simpler_steps(step)`` (argument simplifications for the shrinker) and
``crash_code`` (the property an unexpected exception breaks).
"""

from __future__ import annotations

import traceback
from collections import Counter
from typing import Callable, NoReturn

from properties.errors import InternalError
from properties.failures import CRASH, TIME_LIMIT, TIMEOUT, CheckFailure, Failure, json_data
from properties.limits import StepTimeout, current_limit, step_begins, step_ends
from properties.program import Step

__all__ = ["HarnessBase"]


class HarnessBase:
    """See the module docstring. Subclasses call ``super().__init__()`` and
    implement ``_op_<name>(step, *args)`` for each operation."""

    render_step: Callable[[Step], str] = staticmethod(lambda step: f"{step.op}{tuple(step.args)!r}")
    crash_code = "P7"
    machine = "map"

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.coverage: Counter = Counter()
        self.findings: Counter = Counter()
        self.failure: Failure | None = None
        self._ops: dict = {}

    # ---------------------------------------------------------------- apply

    def apply(self, step: Step) -> None:
        """Run one step on both sides and check everything; raises CheckFailure
        (the implementation broke a property) or InternalError (cowcheck did)."""
        self.steps.append(step)
        step_begins()
        try:
            self._apply(step)
        except CheckFailure:
            raise
        except StepTimeout:
            self._timed_out(step)
        except InternalError:
            raise
        except Exception as exc:
            raise InternalError(
                f"{type(exc).__name__} in cowcheck's {self.machine} harness at step {len(self.steps) - 1} "
                f"({self._render(step)}): {exc}", traceback.format_exc()) from exc
        finally:
            step_ends()

    def _apply(self, step: Step) -> None:
        op = self._ops.get(step.op)
        if op is None:
            op = getattr(self, "_op_" + step.op, None)
            if op is None:
                self._fail(CRASH, "program", f"not a {self.machine} step: {step!r}")
            self._ops[step.op] = op
        op(step, *step.args)
        self.check_after_step(step)

    def check_after_step(self, step: Step) -> None:
        """Properties checked after every step (none by default)."""

    # -------------------------------------------------------------- failing

    def _fail(self, kind: str, code: str, message: str, expected=None, actual=None) -> NoReturn:
        """Record the failure (expected and actual as detached JSON data) and raise it."""
        self.failure = Failure(kind, code, message, len(self.steps) - 1, json_data(expected), json_data(actual))
        raise CheckFailure(self.failure)

    def _timed_out(self, step: Step) -> NoReturn:
        limit = current_limit()
        self._fail(TIMEOUT, TIME_LIMIT, f"{self._render(step)}: did not return within the step time limit"
                                        f" of {limit:g} s" if limit else f"{self._render(step)}: timed out",
                   "returns", "still running")

    def _call(self, step: Step, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, a call into the implementation: an exception
        it raises is a CRASH failure of ``step`` (code :attr:`crash_code`)."""
        try:
            return fn(*args, **kwargs)
        except CheckFailure:
            raise
        except Exception as exc:  # the implementation raised where the model did not
            self._crashed(step, exc)

    def _crashed(self, step: Step, exc: Exception) -> NoReturn:
        self._fail(CRASH, self.crash_code, f"{self._render(step)}: raised {type(exc).__name__}: {_text(exc)}",
                   expected="no error", actual=f"{type(exc).__name__}: {_text(exc)}")

    def _render(self, step: Step) -> str:
        try:
            return self.render_step(step)
        except Exception:
            return f"{step.op}{tuple(step.args)!r}"

    # ------------------------------------------------------------ shrinking

    @staticmethod
    def simpler_steps(step: Step):
        """Candidate replacements for one step, simplest first (for the shrinker)."""
        return iter(())


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() raised>"
