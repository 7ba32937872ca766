"""Implementations under test, named by a spec string, and built once before a run.

A spec names an implementation of one machine's structure: a built-in of
that machine (``reference``, and ``model`` for the map), a registered prefix
(``mutant:NAME`` from the seeded-bug catalogue, ``flink`` from the Flink
bridge once ``cowcheck.flink`` is imported), or ``MODULE:FACTORY``: any
importable callable building the structure.

Resolving a spec imports the factory and builds nothing. The machine's
``probe`` then builds one instance with the arguments the tool chose: a
factory that rejects them is a usage error
(:class:`~cowcheck.core.errors.ConstructionError`, exit 2, naming the
option that changes them), and the instance decides between white-box and
black-box checks.

Only built-in specs (:func:`is_builtin`) are resolved from a stored
counterexample: a file is data, and a module it names is imported only when
the user names it on the command line (docs/contract.md §16). Likewise a spec whose
resolution would fetch something (``flink@VERSION`` of a release not cached
yet: :func:`fetch_needed`) is resolved from a file only once the user has
fetched it by naming it, and one that loads local code (``flink@PATH``, a
class path of jars: :func:`loads_code`) never from a file.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import traceback
from typing import Callable

import attrs

from cowcheck.core.boundary import construction_failure, is_crash_at_construction, is_ours
from cowcheck.core.errors import ConstructionError, InternalError, UsageError, callables_of, did_you_mean
from cowcheck.core.failures import CheckFailure
from cowcheck.core.limits import StepTimeout, implementation_call, limited, unpaced
from cowcheck.core.machine import MachineKind, machine_kind, spec_of
from cowcheck.core.ahead import ahead_harness
from cowcheck.core.remote import ImportFailed, remote_factory

__all__ = ["Implementation", "RemoteImplementation", "UnknownImplementationError", "Probed", "resolve", "register_resolver", "is_builtin",
           "construct", "probe_by_harness", "probe_isolated", "fetch_needed", "loads_code", "implementation_of",
           "drives_deterministically"]

# Prefixes other layers register: "mutant" (cowcheck.core.mutants), "flink" (cowcheck.flink).
_RESOLVERS: dict[str, Callable[[str, MachineKind], "Implementation"]] = {}
# prefix -> fetches(rest): what resolving would fetch over the network (and write to a cache), or None.
_FETCHES: dict[str, Callable[[str], "str | None"]] = {}
# prefix -> loads(rest): what local code resolving would load (a jar given by path), or None.
_LOADS: dict[str, Callable[[str], "str | None"]] = {}
# prefix -> deterministic(rest): whether the implementation runs deterministically when driven so.
_DETERMINISTIC: dict[str, Callable[[str], bool]] = {}


class UnknownImplementationError(ValueError):
    """The spec names no usable implementation; ``.spec`` and ``.reason`` say why."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"unknown implementation {spec!r}: {reason}")
        self.spec = spec
        self.reason = reason


@attrs.frozen
class Implementation:
    """A named factory (for the map: ``factory(capacity=, state_copier=) -> map``).

    ``white_box``: whether its instances offer introspection (None: unknown
    until the machine's probe looks)."""

    spec: str
    factory: Callable
    white_box: bool | None
    description: str = ""
    default_capacity: int = 4  # what the map machine uses unless told otherwise
    # Machine settings this implementation needs unless told otherwise (Flink's controller:
    # buffer_timeout=0, its timeout runs on a wall-clock thread); see MachineKind.config_for.
    config_defaults: dict = attrs.Factory(dict)
    user: bool = False  # a user's MODULE:FACTORY (not one cowcheck ships)
    # Run once in a process before its first instance is built, outside any step time limit (the
    # Flink bridge: start the JVM, compiling its helper on first use), or None.
    warm_up: Callable | None = None

    def new(self, capacity: int = 4, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)

    def batched_walks(self, kind: MachineKind, config) -> tuple[Callable[[], object], type] | None:
        """``(make, harness_class)`` of this implementation's walks of ``kind`` with ``config``
        that run ahead in batches (a harness of that class :attr:`~cowcheck.core.harness.HarnessBase.runs_ahead`:
        ``expect(steps)``, then ``apply`` each), or None: its walks run call by call."""
        return None


@attrs.frozen
class RemoteImplementation(Implementation):
    """A ``MODULE:FACTORY`` implementation running in a process of its own
    (:mod:`cowcheck.core.remote`): its factory returns proxies; its walks run
    ahead there and are checked here (:mod:`cowcheck.core.ahead`)."""

    def batched_walks(self, kind: MachineKind, config) -> tuple[Callable[[], object], type]:
        """Walks run ahead in the implementation's process, checked here from their records."""
        make, _ = kind.replay_setup(self.factory, config)
        return make, ahead_harness(kind.harness_class, kind.name, make)


@attrs.frozen
class Probed:
    """What a probe found: whether to check white-box, and a one-line
    ``notice`` for the user when an offered introspection cannot be used;
    ``settings``: config fields the probe decided (the map machine: the key and
    namespace families its implementation takes), and ``more``: further one-line
    notices (why it decided them)."""

    white_box: bool
    notice: str | None = None
    settings: dict = attrs.Factory(dict)
    more: tuple = ()

    @property
    def notices(self) -> list[str]:
        """Every notice for the user, one line each."""
        return [line for line in (self.notice, *self.more) if line]


def register_resolver(prefix: str, resolver: Callable[[str, MachineKind], Implementation],
                      fetches: Callable[[str], str | None] | None = None,
                      loads: Callable[[str], str | None] | None = None,
                      deterministic: Callable[[str], bool] | None = None) -> None:
    """``resolver(rest, kind)`` resolves specs ``PREFIX``, ``PREFIX:REST`` and ``PREFIX@REST``;
    ``fetches(rest)`` says what resolving one would fetch (None: nothing, it is here);
    ``loads(rest)`` what local code it would load, a file the user names (None: only what ships);
    ``deterministic(rest)``: whether that implementation gives the same answers to the same program
    whenever the harness drives it deterministically (:func:`drives_deterministically`)."""
    _RESOLVERS[prefix] = resolver
    if fetches is not None:
        _FETCHES[prefix] = fetches
    if loads is not None:
        _LOADS[prefix] = loads
    if deterministic is not None:
        _DETERMINISTIC[prefix] = deterministic


def drives_deterministically(spec: str) -> bool:
    """Whether the implementation ``spec`` names answers the same program the same way every time the
    harness drives it deterministically: the reference, the model, the seeded mutants (but those racy
    by design) and a Flink release through the bridge. A user's ``MODULE:FACTORY`` (or Flink build, or
    jars) is never assumed to (it may race). A failure of such an implementation that some replay does not reproduce comes
    from cowcheck's own time, load or nondeterminism (docs/contract.md, ``unreproducible``).

    >>> drives_deterministically("reference"), drives_deterministically("mypkg.maps:make_map")
    (True, False)
    """
    if spec in ("reference", "model", "reference-flink-format"):
        return True
    base, rest = _prefix(spec)
    deterministic = _DETERMINISTIC.get(base)
    return deterministic is not None and bool(deterministic(rest))


def fetch_needed(spec: str) -> str | None:
    """What resolving ``spec`` would fetch over the network (e.g. "Flink 2.0.0, about 200 MB"), or None."""
    base, rest = _prefix(spec)
    fetches = _FETCHES.get(base)
    return fetches(rest) if fetches is not None else None


def loads_code(spec: str) -> str | None:
    """What local code resolving ``spec`` would load (e.g. "the Flink build at /x/flink-dist.jar"), or None."""
    base, rest = _prefix(spec)
    loads = _LOADS.get(base)
    return loads(rest) if loads is not None else None


def _prefix(spec: str) -> tuple[str, str]:
    """``flink@1.13.6`` -> ("flink", "@1.13.6"); ``mutant:x`` -> ("mutant", "x")."""
    head, sep, rest = spec.partition(":")
    base = head.partition("@")[0]
    return base, spec[len(base):].lstrip(":")


def is_builtin(spec: str) -> bool:
    """Whether ``spec`` names an implementation that ships with cowcheck (and so
    may be resolved from a counterexample file without the user naming it)."""
    if spec in ("reference", "model"):
        return True
    return _prefix(spec)[0] in _RESOLVERS


def import_factory(spec: str, module_name: str, attribute: str) -> Callable:
    """``MODULE:FACTORY``: the callable, or UnknownImplementationError naming what is missing."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        reason = f"cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        raise UnknownImplementationError(spec, reason + _path_hint(module_name, reason)) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UnknownImplementationError(spec, f"module {module_name!r} has no callable {attribute!r}"
                                               f"{did_you_mean(attribute, callables_of(module))}")
    return factory


def resolve(spec: str, machine: str = "map", isolated: bool = False) -> Implementation:
    """The implementation of ``machine`` named by ``spec`` (nothing is built);
    UnknownImplementationError otherwise.

    ``isolated``: a ``MODULE:FACTORY`` of a machine that supports it
    (``MachineKind.isolation``) runs in a process of its own
    (:mod:`cowcheck.core.remote`): the module is imported there, never here,
    and the factory returns proxies. Built-in implementations always run here."""
    kind = machine_kind(machine)
    if spec in kind.builtins:
        return kind.builtins[spec]()
    base, rest = _prefix(spec)
    if base in _RESOLVERS:
        return _RESOLVERS[base](rest, kind)
    module, sep, attribute = spec.partition(":")
    if not sep or not module or not attribute:
        names = ", ".join(sorted(kind.builtins) + [p + (":NAME" if p == "mutant" else "") for p in sorted(_RESOLVERS)])
        raise UnknownImplementationError(spec, f"expected {names} or MODULE:FACTORY (e.g. mypkg.maps:make_map)"
                                               f"{_spelling_hint(spec, kind)}")
    if isolated and kind.isolation is not None:
        try:
            factory = remote_factory(module, attribute, kind.isolation)
        except ImportFailed as exc:
            raise UnknownImplementationError(spec, f"{exc}{_path_hint(module, str(exc))}") from None
        return RemoteImplementation(spec, factory, None, f"{module}.{attribute}, in a process of its own", user=True)
    return Implementation(spec, import_factory(spec, module, attribute), None, f"{module}.{attribute}", user=True)


def implementation_of(factory: Callable, machine: str = "map") -> Implementation:
    """The implementation of ``machine`` that ``factory`` builds, run in this process (a factory object
    handed over from Python, :func:`cowcheck.check`): a built-in's or a mutant's own settings when it is
    one, else a user's factory named by its module and qualified name."""
    spec = spec_of(machine, factory)
    if is_builtin(spec):
        return resolve(spec, machine)
    return Implementation(spec, factory, None, f"{spec}, in this process", user=True)


def _spelling_hint(spec: str, kind: MachineKind) -> str:
    """What a spec that is neither a known name nor ``MODULE:FACTORY`` was probably meant to be:
    a misspelt name (``referense``, ``flnk@2.0.0``) or ``module.attr`` for ``module:attr``."""
    base, rest = _prefix(spec)
    close = did_you_mean(base, list(kind.builtins) + list(_RESOLVERS))
    if close:
        name = close[len("; did you mean '"):-2]
        return f"; did you mean {name + spec[len(base):]!r}?"
    module, dot, attribute = spec.rpartition(".")
    if dot and module and attribute.isidentifier():
        return f"; did you mean {module + ':' + attribute!r}? (a colon between the module and its factory)"
    return ""


def _path_hint(module: str, reason: str) -> str:
    """For a module that cannot be found while its file lies in the current directory: how to
    put that directory on the path (cowcheck never puts it there by itself)."""
    top = module.partition(".")[0]
    if "No module named" not in reason or not (os.path.isfile(f"{top}.py") or os.path.isdir(top)):
        return ""
    return (f"; {top}{'.py' if os.path.isfile(f'{top}.py') else '/'} is in the current directory, which cowcheck "
            f"does not put on the import path: run with PYTHONPATH=. (or install the package)")


def construct(impl: Implementation, build: Callable[[], object], arguments: dict, option: str):
    """``build()`` under the active step time limit; ConstructionError (naming
    ``arguments`` and the ``option`` that changes them) if it raises or hangs.
    A factory that crashes instead (ends its process, raises SystemExit or another
    BaseException: :func:`~cowcheck.core.boundary.is_crash_at_construction`) is
    the implementation's failure: CheckFailure of a program with no steps."""
    try:
        with unpaced():
            return implementation_call(build)
    except StepTimeout:
        raise ConstructionError(impl.spec, arguments, TimeoutError("did not return within the step time limit"),
                                option) from None
    except BaseException as exc:
        if not isinstance(exc, Exception) and is_ours(exc):  # Ctrl-C, the run's budget
            raise
        if is_crash_at_construction(exc):
            raise CheckFailure(construction_failure(exc)) from None
        raise ConstructionError(impl.spec, arguments, exc, option) from None


def probe_by_harness(kind: MachineKind, impl: Implementation, config, *, black_box: bool = False,
                     white_box: bool = False) -> Probed:
    """The probe of machines whose harness builds the structure (async,
    checkpoint): one harness is built and closed."""
    settings = dict(attrs.asdict(config, recurse=False), white_box=False if black_box else None)
    make_impl, options = kind.replay_setup(impl.factory, kind.config_for(impl, **settings))
    harness = construct(impl, lambda: kind.harness_class(make_impl(), **options), {}, "another --impl")
    harness.close()
    return Probed(bool(harness.white_box) and not black_box)


def probe_isolated(kind: MachineKind, impl: Implementation, config, *, black_box: bool,
                   step_time_limit: float, white_box: bool = False) -> Probed:
    """``kind.probe`` in a forked child process (so that a factory that starts a
    JVM or ends its process does so there, not in the caller, e.g. a Spark
    driver); raises what the probe raised."""
    if not hasattr(os, "fork"):
        with limited(step_time_limit):
            return kind.probe_implementation(impl, config, black_box=black_box, white_box=white_box)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports one line of JSON, then leaves without unwinding the caller
        code = 0
        try:
            os.close(read_fd)
            try:
                with limited(step_time_limit):
                    probed = kind.probe_implementation(impl, config, black_box=black_box, white_box=white_box)
                message = {"white_box": probed.white_box, "notice": probed.notice, "settings": probed.settings,
                           "more": list(probed.more)}
            except CheckFailure:  # building one crashed: every seed will report it (black-box)
                message = {"white_box": False, "notice": None}
            except (UsageError, UnknownImplementationError) as exc:
                message = {"error": str(exc)}
            except Exception as exc:
                message = {"internal": f"{type(exc).__name__}: {exc}", "details": traceback.format_exc()}
            with os.fdopen(write_fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(message))
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        raise UsageError(f"building one {kind.name} implementation {impl.spec} ended its process (wait status "
                         f"{status}); choose other arguments")
    message = json.loads(text)
    if "error" in message:
        raise UsageError(message["error"])
    if "internal" in message:
        raise InternalError(f"probing {impl.spec}: {message['internal']}", message["details"])
    return Probed(message["white_box"], message["notice"], message.get("settings", {}), tuple(message.get("more", ())))
