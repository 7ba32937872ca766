"""Portable counterexamples: a failure as versioned JSON (docs/counterexample-format.md).

A counterexample names the implementation and its configuration, how it was
found (tool, seed, generator), the shrunk step list with the model's expected
result per step, the failing step and the failure. Keys, namespaces and states
are JSON data; nothing is pickled or evaluated. Files are named by a stable
signature, so the same bug found twice is stored once (the shorter program
wins), and written atomically.

>>> from cowcheck.core.failures import Failure
>>> from cowcheck.core.program import Step
>>> cx = Counterexample.build([Step("put", (1, 0, []))], Failure("CRASH", "P7", "m", 0),
...                           impl="mutant:x", machine="map", capacity=4, found_by={"tool": "doctest"})
>>> cx.signature
'mutant-x--CRASH-P7'
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

import attrs

from cowcheck.core.bounds import MAX_CAPACITY
from cowcheck.core.contract import entries as contract_entries
from cowcheck.core.failures import Failure, json_data
from cowcheck.core.files import MIB, UserFileError, read_json, write_atomically
from cowcheck.core.impls import is_builtin, loads_code
from cowcheck.core.legacy import renamed_spec
from cowcheck.core.machine import MACHINES, unimportable
from cowcheck.core.program import Step, step_to_json

__all__ = ["FORMAT", "FORMAT_VERSION", "Counterexample", "CounterexampleError", "DEFAULT_DIR", "load", "save",
           "signature", "tool_versions", "replay_command", "reliability"]

FORMAT = "cowcheck-counterexample"
FORMAT_VERSION = 1
DEFAULT_DIR = Path(".cowcheck") / "counterexamples"
# The largest counterexample file read: a shrunk program is a few kB, an unshrunk walk of the longest
# allowed --steps about 10 MB (docs/counterexample-format.md, "Limits").
MAX_BYTES = 16 * MIB
KINDS = ("DIVERGENCE", "INVARIANT", "CRASH", "TIMEOUT")
_MACHINE_OF_THE_FIRST_FILES = "map"  # a file without "machine": written when the map was the only machine


class CounterexampleError(ValueError):
    """A file that is not a valid counterexample; ``.path`` and ``.problem`` say why."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def tool_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("cowcheck", "hypothesis", "attrs"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


_json_safe = json_data  # results as JSON data (tuples become lists; anything exotic its repr)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "impl"


def signature(impl_spec: str, kind: str, code: str) -> str:
    """The stable name of a bug: ``<implementation>--<KIND>-<CODE>``."""
    return f"{_slug(impl_spec)}--{kind}-{_slug(code)}"


@attrs.frozen
class Counterexample:
    """One stored failure. ``expected[i]`` is the model's result of ``steps[i]``
    (None for steps that return nothing)."""

    implementation: str
    capacity: int
    machine: str
    steps: tuple
    expected: tuple
    failing_step: int
    failure: Failure
    found_by: dict
    copier: str = "deepcopy"
    white_box: bool = True
    strict_live_iteration: bool = False
    versions: dict = attrs.Factory(tool_versions)
    settings: dict = attrs.Factory(dict)  # the machine's recorded settings (MachineKind.recorded_settings)
    # (reproduced, replays): the program failed the same way in ``reproduced`` of ``replays`` fresh replays
    # before it was stored; fewer than all: the implementation is nondeterministic. None: every time.
    reproduced: tuple | None = None

    @property
    def nondeterministic(self) -> bool:
        return self.reproduced is not None and self.reproduced[0] < self.reproduced[1]

    @property
    def signature(self) -> str:
        """One bug, one name: the implementation and the broken property or
        invariant (not the operation it showed in, which varies by program)."""
        return signature(self.implementation, self.failure.kind, self.failure.code)

    @classmethod
    def build(cls, steps: list[Step], failure: Failure, *, impl: str, machine: str, capacity: int, found_by: dict,
              expected: list | None = None, white_box: bool = True,
              strict_live_iteration: bool = False, settings: dict | None = None,
              reproduced: tuple | None = None) -> "Counterexample":
        """``reproduced``: ``(k, n)`` replays that failed the same way; recorded only if ``k < n``."""
        expected = expected if expected is not None else [None] * len(steps)
        if reproduced is not None and reproduced[0] >= reproduced[1]:
            reproduced = None
        return cls(impl, capacity, machine, tuple(steps), tuple(_json_safe(e) for e in expected),
                   failure.step_index, failure, found_by, white_box=white_box,
                   strict_live_iteration=strict_live_iteration, settings=dict(settings or {}),
                   reproduced=None if reproduced is None else (int(reproduced[0]), int(reproduced[1])))

    def to_json(self) -> dict:
        f = self.failure
        settings = {"settings": dict(self.settings)} if self.settings else {}
        nondeterministic = ({"nondeterministic": {"reproduced": self.reproduced[0], "replays": self.reproduced[1]}}
                            if self.nondeterministic else {})
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "signature": self.signature,
            "implementation": {"spec": self.implementation, "capacity": self.capacity, "copier": self.copier},
            "machine": self.machine,
            **settings,
            "checks": {"white_box": self.white_box, "strict_live_iteration": self.strict_live_iteration},
            "found_by": self.found_by,
            "steps": [dict(step_to_json(s), expected=e) for s, e in zip(self.steps, self.expected)],
            "failing_step": self.failing_step,
            "failure": {"kind": f.kind, "code": f.code, "message": f.message,
                        "expected": _json_safe(f.expected), "actual": _json_safe(f.actual)},
            **nondeterministic,
            "versions": self.versions,
        }

    def text(self) -> str:
        """The file's text (what :func:`save` writes): one rendering, carried as it is from a campaign's
        worker to its file."""
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, data: Any, path: str = "<data>") -> "Counterexample":
        def need(obj, key, kind, where="top level"):
            if not isinstance(obj, dict) or key not in obj:
                raise CounterexampleError(path, f"missing field {key!r} at {where}")
            if not isinstance(obj[key], kind):
                raise CounterexampleError(path, f"field {key!r} at {where} should be {kind.__name__ if isinstance(kind, type) else kind[0].__name__}, "
                                                f"got {type(obj[key]).__name__}")
            return obj[key]

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CounterexampleError(path, f"not a counterexample (no \"format\": \"{FORMAT}\")")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise CounterexampleError(path, f"unknown format version {version!r} (this cowcheck reads {FORMAT_VERSION})")
        impl = need(data, "implementation", dict)
        spec = renamed_spec(need(impl, "spec", str, "implementation"))  # a module's pre-0.2.0 name
        capacity = need(impl, "capacity", int, "implementation")
        if isinstance(capacity, bool) or not (capacity == 0 or 4 <= capacity <= MAX_CAPACITY.limit
                                              and not capacity & (capacity - 1)):
            raise CounterexampleError(path, f"capacity {capacity!r:.40} is not 0 or a power of two from 4 to "
                                            f"{MAX_CAPACITY.limit} ({MAX_CAPACITY.reason})")
        copier = impl.get("copier", "deepcopy")
        if not isinstance(copier, str):
            raise CounterexampleError(path, f"field 'copier' at implementation should be str, got "
                                            f"{type(copier).__name__}")
        machine = data.get("machine", _MACHINE_OF_THE_FIRST_FILES)
        kind = MACHINES.get(machine) if isinstance(machine, str) else None
        if kind is None:
            raise CounterexampleError(path, f"unknown machine {machine!r} (known: {', '.join(MACHINES)})")
        raw_steps = need(data, "steps", list)
        steps, expected = [], []
        for i, raw in enumerate(raw_steps):
            try:
                steps.append(kind.parse(raw))
            except ValueError as exc:
                raise CounterexampleError(path, f"step {i}: {exc}") from None
            expected.append(raw.get("expected"))
        if not kind.harness_class.valid_program(steps):
            raise CounterexampleError(path, "the steps refer to something they never create (e.g. a snapshot "
                                            "never taken, or one taken twice)")
        failing = need(data, "failing_step", int)
        if isinstance(failing, bool) or not 0 <= failing < max(len(steps), 1):
            raise CounterexampleError(path, f"failing_step {failing} outside the {len(steps)} steps")
        raw_failure = need(data, "failure", dict)
        kind = need(raw_failure, "kind", str, "failure")
        if kind not in KINDS:
            raise CounterexampleError(path, f"unknown failure kind {kind!r} (expected one of {', '.join(KINDS)})")
        code = need(raw_failure, "code", str, "failure")
        if code not in contract_entries():
            raise CounterexampleError(path, f"unknown failure code {code[:40]!r} (the codes are docs/contract.md's: "
                                            f"cowcheck explain lists them)")
        failure = Failure(kind, code, need(raw_failure, "message", str, "failure"),
                          failing, raw_failure.get("expected"), raw_failure.get("actual"))
        checks = data.get("checks", {})
        if not isinstance(checks, dict) or any(not isinstance(checks.get(name), (bool, type(None)))
                                               for name in ("white_box", "strict_live_iteration")):
            raise CounterexampleError(path, f"checks {checks!r:.80} should be an object of true/false/null values")
        for optional in ("found_by", "versions"):
            if not isinstance(data.get(optional, {}), dict):
                raise CounterexampleError(path, f"field {optional!r} at top level should be an object, got "
                                                f"{type(data[optional]).__name__}")
        settings = data.get("settings", {})
        machine_kind = MACHINES[machine]
        if not isinstance(settings, dict) or set(settings) - set(machine_kind.recorded_settings):
            raise CounterexampleError(path, f"settings {settings!r:.80} are not settings of the {machine} machine "
                                            f"(it records {', '.join(machine_kind.recorded_settings) or 'none'})")
        try:
            machine_kind.config(**settings)
        except (TypeError, ValueError) as exc:
            raise CounterexampleError(path, f"settings {settings!r:.80}: {exc}") from None
        reproduced = None
        if "nondeterministic" in data:
            raw = need(data, "nondeterministic", dict)
            k = need(raw, "reproduced", int, "nondeterministic")
            n = need(raw, "replays", int, "nondeterministic")
            if not 0 <= k < n:
                raise CounterexampleError(path, f"nondeterministic: reproduced {k} of {n} replays is not a count "
                                                f"below the replays")
            reproduced = (k, n)
        return cls(spec, capacity, machine, tuple(steps), tuple(expected), failing, failure,
                   data.get("found_by", {}), copier=copier,
                   white_box=bool(checks.get("white_box", True)),
                   strict_live_iteration=bool(checks.get("strict_live_iteration", False)),
                   versions=data.get("versions", {}), settings=settings, reproduced=reproduced)


def replay_command(path, impl_spec: str, in_process: bool = False) -> str:
    """The command that replays a stored counterexample. A file names only
    built-in implementations by itself, so another one is named with --impl
    (and ``--in-process`` if it was found running in cowcheck's process).

    >>> replay_command("x.json", "mypkg.maps:make_map")
    'cowcheck replay x.json --impl mypkg.maps:make_map --trace'

    A factory that has no importable name gets, instead of a command, what to do about it.
    """
    problem = None if is_builtin(impl_spec) else unimportable(impl_spec)
    if problem is not None:
        return f"(no replay command: {problem})"
    named = not is_builtin(impl_spec) or loads_code(impl_spec) is not None  # a file names neither by itself
    impl = f" --impl {impl_spec}" + (" --in-process" if in_process and not is_builtin(impl_spec) else "") if named else ""
    return f"cowcheck replay {path}{impl} --trace"


def load(path) -> Counterexample:
    """Read and validate a counterexample file; CounterexampleError naming the problem otherwise."""
    path = Path(path)
    try:  # a regular file of at most MAX_BYTES, plain JSON data (files.read_json)
        data = read_json(path, what="a counterexample", limit=MAX_BYTES)
    except UserFileError as exc:
        raise CounterexampleError(path, exc.problem) from None
    return Counterexample.from_json(data, str(path))


def reliability(cx: Counterexample) -> float:
    """The share of replays in which ``cx``'s program failed (1.0: every time)."""
    return 1.0 if cx.reproduced is None else cx.reproduced[0] / cx.reproduced[1]


def save(cx: Counterexample, directory=DEFAULT_DIR) -> tuple[Path, bool]:
    """Store ``cx`` under its signature; keeps an existing file of the same
    signature unless ``cx`` reproduces more reliably, or as reliably and is
    shorter. A file under that name holding anything else (another failure, or
    no readable counterexample) is never replaced: ``cx`` goes to
    ``SIGNATURE.2.json`` (or the next free number) beside it.
    Returns the path and whether it was written."""
    directory = Path(directory)
    for n in range(1, 1000):
        path = directory / (f"{cx.signature}.json" if n == 1 else f"{cx.signature}.{n}.json")
        if not path.exists() and not path.is_symlink():
            break
        try:
            held = load(path)
        except CounterexampleError:
            continue  # not ours to replace
        if held.signature != cx.signature:
            continue
        if (reliability(held), -len(held.steps)) >= (reliability(cx), -len(cx.steps)):
            return path, False
        break
    else:
        raise OSError(f"{directory}: 999 files named {cx.signature}.*.json hold other things")
    write_atomically(path, cx.text())
    return path, True
