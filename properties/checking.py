"""Checking from Python: :func:`check` and :func:`replay`, the commands' runs with their verdict as a value.

Each runs the same code as its command (``cowcheck check``, ``cowcheck replay``)
in this process and returns a :class:`Verdict`: the exit code the command
would have given, the failure and its counterexample (stored as the command
stores it), and what the command printed::

    import cowcheck
    from mypkg.maps import make_map

    verdict = cowcheck.check(make_map, minutes=1, seed=7)
    if verdict.failed:
        print(verdict.failure)                   # DIVERGENCE P1 after 3 steps: m.get(...): ...
        print(verdict.counterexample.steps)      # the shrunk program, as data
        cowcheck.replay(verdict.saved)           # the same failure again

A factory given as an object runs in this process (the command's
``--in-process``); given as a spec string (``"mypkg.maps:make_map"``,
``"flink@1.13.6"``) it is resolved as ``--impl`` resolves it, a user's map in a
process of its own.

>>> verdict = check("reference", examples=3, seed=1, walks=1, save=False)
>>> verdict.exit_code, verdict.failed, verdict.failure is None
(0, False, True)
>>> replay("no/such/file.json").exit_code
2
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable

import attrs

from cowcheck.cli import run
from cowcheck.core.counterexample import Counterexample
from cowcheck.core.failures import Failure

__all__ = ["Verdict", "check", "replay"]


@attrs.frozen
class Verdict:
    """What a run decided. ``exit_code``: 0 nothing found, 1 the implementation failed (``failure``,
    ``counterexample``, and ``saved``: where it was stored, None if it was not), 2 bad usage or input
    (``errors`` says why, in one line), 3 cowcheck's own error. ``output`` and ``errors`` hold what the
    command printed on stdout and stderr."""

    exit_code: int
    output: str
    errors: str
    counterexample: Counterexample | None = None
    saved: Path | None = None

    @property
    def failed(self) -> bool:
        """Whether the implementation failed (exit 1)."""
        return self.exit_code == 1

    @property
    def failure(self) -> Failure | None:
        """The failure (kind, code, message, step) of the implementation, or None."""
        return self.counterexample.failure if self.counterexample is not None else None


def _options(options: dict) -> list[str]:
    """``minutes=1, black_box=True`` -> ``["--minutes", "1", "--black-box"]``: the command's own options."""
    argv = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def check(implementation: str | Callable = "reference", *, machine: str = "map", save: bool = True,
          **options) -> Verdict:
    """Check ``implementation`` as ``cowcheck check`` does and return the verdict.

    ``implementation``: a factory (for the map machine ``factory(capacity=, state_copier=)``; run in
    this process) or an implementation spec string (``"reference"``, ``"mutant:NAME"``,
    ``"flink@VERSION"``, ``"MODULE:FACTORY"``). ``options`` are the command's options by their
    Python names: ``minutes=1``, ``examples=200``, ``seed=7``, ``black_box=True``, ``contract="isolation"``,
    ``sizes="large"``, ``save_dir=".cowcheck/counterexamples"``... (``cowcheck check --help``);
    ``save=False`` stores nothing."""
    argv = ["check", "--machine", machine, *_options(dict(options, no_save=not save))]
    found: dict = {}
    extra = {"found_into": found}
    if isinstance(implementation, str):
        argv += ["--impl", implementation]
    else:
        extra["factory"] = implementation
    out, err = io.StringIO(), io.StringIO()
    code = run(argv, out, err, **extra)
    cx, saved = found.get("found", (None, None))
    return Verdict(code, out.getvalue(), err.getvalue(), cx, Path(saved) if saved else None)


def replay(path: str | Path, *, impl: str | None = None, **options) -> Verdict:
    """Replay a stored counterexample as ``cowcheck replay FILE`` does: exit code 1 while it still
    fails, 0 once it passes (``impl``: replay on another implementation, e.g. a fixed release)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["replay", str(path), *(["--impl", impl] if impl else []), *_options(options)]
    code = run(argv, out, err)
    return Verdict(code, out.getvalue(), err.getvalue())
