"""The suite's own exceptions, by outcome: bad usage (exit 2) and internal errors (exit 3).

A failure of the implementation under test is not an exception of this
module: it is a :class:`~cowcheck.core.failures.CheckFailure` carrying a
``Failure`` (exit 1). Everything here is about the suite and its user:

- :class:`UsageError`: bad arguments or input, reported as one line, exit 2.
- :class:`ConstructionError`: the implementation's factory rejected the
  constructor arguments the tool chose (a usage error: the user picks others).
- :class:`InternalError`: the suite itself broke; never blamed on the
  implementation, reported with the traceback in a file, exit 3.

>>> raise ConstructionError("mypkg:make", {"capacity": 4}, ValueError("only 128"), "--capacity")
Traceback (most recent call last):
...
cowcheck.core.errors.ConstructionError: mypkg:make(capacity=4) raised ValueError: only 128; choose other arguments with --capacity
"""

from __future__ import annotations

import difflib

__all__ = ["UsageError", "ConstructionError", "InternalError", "did_you_mean", "callables_of"]


class UsageError(Exception):
    """Bad arguments or input: reported as one line, exit 2."""


class ConstructionError(UsageError):
    """The factory of ``spec`` raised for ``arguments`` (the tool's choice);
    ``option`` names the command-line option that changes them."""

    def __init__(self, spec: str, arguments: dict, cause: BaseException, option: str = "--capacity") -> None:
        shown = ", ".join(f"{name}={value!r}" if not callable(value) else f"{name}={_name(value)}"
                          for name, value in arguments.items())
        super().__init__(f"{spec}({shown}) raised {type(cause).__name__}: {_first_line(cause)}; "
                         f"choose other arguments with {option}")
        self.spec = spec
        self.arguments = dict(arguments)
        self.cause = cause
        self.option = option


class InternalError(Exception):
    """An error inside cowcheck itself (model, invariants, rendering,
    shrinking...), not the implementation's; ``details`` holds the traceback."""

    def __init__(self, summary: str, details: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.details = details


def _name(fn) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def did_you_mean(name: str, choices) -> str:
    """``; did you mean 'reference'?`` when one of ``choices`` is close to ``name``, else "".

    >>> did_you_mean("referense", ["model", "reference"])
    "; did you mean 'reference'?"
    >>> did_you_mean("xyz", ["model", "reference"])
    ''
    """
    close = difflib.get_close_matches(name, [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def callables_of(module) -> list[str]:
    """The public callables a module defines or imports (names a factory may have)."""
    if module is None:
        return []
    return [name for name, value in vars(module).items() if not name.startswith("_") and callable(value)]
