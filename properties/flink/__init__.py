"""The Flink bridge: Apache Flink's own classes under the suite, through JPype (docs/flink-bridge.md).

- ``jvm``: the Flink jar, our Java helper (``java/``) compiled against it, the JVM started once;
- ``convert``: what crosses the boundary (keys, namespaces, states, answers, exceptions);
- ``map``: Flink's ``CopyOnWriteStateMap`` behind the docs/contract.md §15 API (``--impl flink``);
- ``batch``, ``opcodes``: the batched encoding of map programs, and the helper's ``Ops.java`` generated
  from the map's table;
- ``walk``: map programs on Flink a segment per Java call (``Walk.java``): batched walks checked by the
  harness, and ``run_batch``, a program observed as ``cowcheck.map.parity`` observes;
- ``serializers``: Flink's own serializers, for byte-for-byte parity with the reference's;
- ``backend``: Flink's ``HeapKeyedStateBackend`` at the state level (``--machine backend``).

Importing this package registers the ``flink`` implementation spec of the
map machine (it starts no JVM: that happens when the first map is built).
"""

from __future__ import annotations

import copy
import functools
import os

import attrs

from cowcheck.core.errors import UsageError
from cowcheck.core.impls import Implementation, UnknownImplementationError, register_resolver
from cowcheck.core.machine import MachineKind
from cowcheck.flink.jars import JarError, class_index
from cowcheck.flink.jvm import FlinkUnavailableError, JvmInfo, available, compile_helper, flink_jars, jvm
from cowcheck.flink.async_controller import FlinkAsyncController, api_from
from cowcheck.flink.releases import (DEFAULT_VERSION, FlinkBuild, build_of_path, check_version, fetch_needed, is_path,
                                       parse_version, release_lib, select_build, user_jars)
from cowcheck.flink.map import (FLINK_CAPACITY, EntryMirror, FlinkCapacityError, FlinkSnapshot, FlinkStateMap,
                                  FlinkView)
from cowcheck.flink.serializers import flink_deserialize, flink_serialize
from cowcheck.flink.backend import FlinkStateBackend, warm_up
from cowcheck.flink.corruptions import BACKEND_CORRUPTIONS, CORRUPTIONS
from cowcheck.flink.table import FlinkStateTable
from cowcheck.flink.operator import FlinkOperatorBackends
from cowcheck.flink.operator import warm_up as warm_up_operator
from cowcheck.flink.segments import DETAILS, WalkHarness, WalkMap, run_batch

__all__ = ["FLINK_CAPACITY", "DETAILS", "FlinkUnavailableError", "FlinkCapacityError", "FlinkStateMap",
           "FlinkSnapshot", "FlinkView", "EntryMirror", "JvmInfo", "FlinkImplementation", "available", "jvm",
           "flink_serialize", "flink_deserialize", "run_batch", "resolve_flink", "flink_spec", "loads_code"]


@attrs.frozen
class FlinkImplementation(Implementation):
    """The ``flink`` implementation: ``new()`` builds a map of capacity 128 unless
    told otherwise (then FlinkCapacityError). ``corruption``: a seeded
    Java-side corruption (``cowcheck.flink.corruptions``), "" for none."""

    corruption: str = ""

    def new(self, capacity: int = FLINK_CAPACITY, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)

    def batched_walks(self, kind: MachineKind, config):
        """Walks on Flink a segment per Java call (``cowcheck.flink.segments``)."""
        return functools.partial(WalkMap, config.capacity, corruption=self.corruption), WalkHarness


def _parse(rest: str) -> tuple[str, str, tuple]:
    """``rest`` of a ``flink`` spec -> ``(release or path, corrupt option, class path jars)``:
    ``[@TARGET][:corrupt=NAME][:classpath=JAR[:JAR...]]`` (the class path takes the rest)."""
    target = ""
    if rest.startswith("@"):
        target, _, rest = rest[1:].partition(":")
    rest = rest.removeprefix(":")
    before, found, jars = rest.partition("classpath=")
    if found and before and not before.endswith(":"):  # "classpath=" inside another option's value
        before, jars = rest, ""
    classpath = tuple(j for j in jars.split(os.pathsep) if j) if found else ()
    return target, before.rstrip(":"), classpath


def flink_spec(spec: str, classpath: str | None) -> str:
    """``spec`` with ``--classpath JAR[:JAR...]`` in it (``flink...:classpath=...``, the jars made
    absolute); UsageError when ``spec`` is not a Flink's. The spec unchanged without a class path.

    >>> flink_spec("flink@1.13.6", "/tmp/a.jar:/tmp/b.jar")
    'flink@1.13.6:classpath=/tmp/a.jar:/tmp/b.jar'
    """
    if not classpath:
        return spec
    if spec != "flink" and not spec.startswith(("flink@", "flink:")):
        raise UsageError(f"--classpath puts jars before Flink's: it applies to --impl flink, flink@VERSION or "
                         f"flink@PATH, not {spec!r}")
    if "classpath=" in spec:
        raise UsageError(f"{spec!r} already names a class path: give it once")
    jars = [os.path.abspath(os.path.expanduser(j)) for j in classpath.split(os.pathsep) if j]
    return f"{spec}:classpath={os.pathsep.join(jars)}"


def loads_code(rest: str) -> str | None:
    """What local code a ``flink`` spec loads (a build given by path, jars of a class path), or None:
    such a spec is run only when named on the command line, never from a counterexample file."""
    target, _, classpath = _parse(rest)
    named = ([f"the Flink build at {target}"] if is_path(target) else []) + [f"the jar {j}" for j in classpath]
    return " and ".join(named) or None


def resolve_flink(rest: str, kind: MachineKind) -> Implementation:
    """``resolve("flink")`` (Flink 2.3.0, installed by the ``flink`` extra), ``resolve("flink@VERSION")``
    (any release from 1.13.6, fetched on first use) or ``resolve("flink@PATH")`` (a ``flink-dist*.jar``
    or a directory of jars, as it is), each optionally followed by ``:corrupt=NAME`` (a seeded Java-side
    corruption of the map, ``cowcheck.flink.corruptions``; of the keyed backend with ``--machine backend``)
    and ``:classpath=JAR[:JAR...]`` (jars before Flink's on the class path, replacing its classes):
    checks that the bridge can run, chooses the Flink of this process and fetches a release's jar if it
    is not cached yet, without starting the JVM (a campaign driver resolves before forking). What the
    machine may use is read from the classes found (``cowcheck.flink.jars``), never from the version."""
    spec = "flink" + (rest if not rest or rest.startswith("@") else ":" + rest)
    target, options, classpath = _parse(rest)
    if options and not rest.startswith("@") and not options.startswith("corrupt="):
        raise UnknownImplementationError(spec, "the Flink bridge takes a release (or a build's path), a seeded "
                                               "corruption and a class path: use 'flink' or 'flink@VERSION' (e.g. "
                                               "flink@1.13.6) or 'flink@PATH', optionally followed by "
                                               "':corrupt=NAME' and ':classpath=JAR[:JAR...]'")
    machine = kind.name
    implement = _IMPLEMENTATIONS.get(machine)
    if implement is None:
        raise UnknownImplementationError(spec, f"the Flink bridge offers the {', '.join(_IMPLEMENTATIONS)} "
                                               f"machines, not {machine!r}")
    corruption = ""
    if options:
        known = _CORRUPTIONS.get(machine, ())
        name = options.removeprefix("corrupt=")
        if not known:
            raise UnknownImplementationError(spec, f"seeded corruptions are corruptions of the "
                                                   f"{' and the '.join(_CORRUPTIONS)} machines, not the {machine}'s")
        if not options.startswith("corrupt=") or name not in known:
            raise UnknownImplementationError(spec, f"unknown option {options!r}: the Flink bridge takes "
                                                   f"corrupt=NAME, NAME one of {', '.join(known)}")
        corruption = name
    try:
        if is_path(target):
            build = build_of_path(target)
        else:
            version = target or DEFAULT_VERSION
            check_version(version)
            build = FlinkBuild(release=version)
    except ValueError as exc:
        raise UnknownImplementationError(spec, str(exc)) from None
    reason = available(build)
    if reason is not None:
        raise UnknownImplementationError(spec, reason)
    if build.release and build.release != DEFAULT_VERSION:
        try:
            release_lib(build.release)  # fetched here, once, before any process that will use it is forked
        except (RuntimeError, OSError) as exc:
            raise UnknownImplementationError(spec, str(exc)) from None
    try:
        flink = flink_jars(build)[0]
        if classpath:
            build = attrs.evolve(build, user=classpath, replaced=user_jars(classpath, flink))
        index = class_index(build.user + flink)
        implementation = implement(spec, build, corruption, index)  # refuses what the classes lack
        select_build(build)
    except UnknownImplementationError:
        raise
    except FlinkUnavailableError as exc:
        raise UnknownImplementationError(spec, exc.reason) from None
    except (ValueError, JarError) as exc:
        raise UnknownImplementationError(spec, str(exc)) from None
    try:
        compile_helper()  # javac here, outside the step time limit the first implementation is built under
    except FlinkUnavailableError as exc:
        raise UnknownImplementationError(spec, exc.reason) from None
    return implementation


def _who(build: FlinkBuild) -> str:
    return build.describe()


def _map(spec: str, build: FlinkBuild, corruption: str, index) -> FlinkImplementation:
    described = f" with the seeded corruption {corruption}" if corruption else ""
    factory = functools.partial(FlinkStateMap, corruption=corruption) if corruption else FlinkStateMap
    return FlinkImplementation(spec, factory, True,
                               f"{_who(build)} CopyOnWriteStateMap through JPype (capacity 128 only)"
                               f"{described}{build.describe_user()}", default_capacity=FLINK_CAPACITY,
                               corruption=corruption)


def _async(spec: str, build: FlinkBuild, corruption: str, index) -> Implementation:
    api = api_from(index)
    if api is None:
        raise UnknownImplementationError(spec, f"Flink's AsyncExecutionController exists from 1.20.0 on; "
                                               f"{build.label} has no async controller (no "
                                               f"org.apache.flink.runtime.asyncprocessing.AsyncExecutionController)")
    lacks = api.lacks()
    # What the Flink lacks, the machine leaves out (its config), said once in the run's header.
    left_out = f"; {build.label} has no {', no '.join(lacks)}: the machine leaves them out" if lacks else ""
    return Implementation(spec, FlinkAsyncController, False,
                          f"{_who(build)} AsyncExecutionController through JPype (deterministic "
                          f"mailbox and executor, no buffer timeout){left_out}{build.describe_user()}",
                          config_defaults={"buffer_timeout": 0, "final_actions": api.final_actions,
                                           "overdraft": api.overdraft})


def _backend(spec: str, build: FlinkBuild, corruption: str, index) -> Implementation:
    described = f" with the seeded corruption {corruption}" if corruption else ""
    # Native savepoints (SavepointFormatType) exist from 1.15: before, every savepoint is canonical (decided
    # by the classes found). TTL switched across a restore is migrated from 2.2 (measured: 2.0.0 and 2.1.0
    # refuse; their jars hold TtlAwareSerializer too, so this one is decided by the release it behaves as).
    lacks = {"native_savepoints": "no native savepoints: the machine leaves them out",
             "ttl_migration": "no TTL state migration: TTL switched across a restore must be refused"}
    defaults = {}
    if not index.has("org.apache.flink.core.execution.SavepointFormatType"):
        defaults["native_savepoints"] = False
    if parse_version(build.behaves_as) < FLINK_TTL_MIGRATION_SINCE:
        defaults["ttl_migration"] = False
    left_out = "".join(f"; {build.label} has {lacks[name]}" for name in defaults)
    return Implementation(spec, functools.partial(FlinkStateBackend, corruption=corruption), False,
                          f"{_who(build)} HeapKeyedStateBackend through JPype (its builder, "
                          f"descriptors, snapshot strategy){described}{left_out}{build.describe_user()}",
                          warm_up=warm_up, config_defaults=defaults)


def _operator(spec: str, build: FlinkBuild, corruption: str, index) -> Implementation:
    # Operator-state compression is decided by the classes found (the serialization proxy's flag, 1.18.0 on).
    compression = bool(index.methods("org.apache.flink.runtime.state.OperatorBackendSerializationProxy",
                                     "isUsingStateCompression"))
    left_out = "" if compression else (f"; {build.label} has no operator-state compression (1.18.0 on): the "
                                       f"machine leaves it out")
    return Implementation(spec, FlinkOperatorBackends, False,
                          f"{_who(build)} DefaultOperatorStateBackend through JPype (its builder, descriptors, "
                          f"snapshot strategy, RoundRobinOperatorStateRepartitioner){left_out}"
                          f"{build.describe_user()}",
                          config_defaults={"compression": compression}, warm_up=warm_up_operator)


def _table(spec: str, build: FlinkBuild, corruption: str, index) -> Implementation:
    return Implementation(spec, FlinkStateTable, False,
                          f"{_who(build)} CopyOnWriteStateTable through JPype (key groups 0-127)"
                          f"{build.describe_user()}")


FLINK_TTL_MIGRATION_SINCE = (2, 2, 0)  # measured: 2.1.0 refuses, 2.2.0 migrates (FLINK-37294)
# The machines Flink's own classes implement through the bridge (what each needs is read from the
# classes found: the async controller's API generation, cowcheck.flink.async_controller.api_from;
# operator-state compression; native savepoints).
_IMPLEMENTATIONS = {"map": _map, "table": _table, "async": _async, "backend": _backend, "operator": _operator}
# The seeded Java-side corruptions each machine's Flink implementation takes (flink:corrupt=NAME).
_CORRUPTIONS = {"map": CORRUPTIONS, "backend": BACKEND_CORRUPTIONS}

def _released(rest: str) -> bool:
    """A release's classes (no build by path, no jars of the user's): driven deterministically."""
    return loads_code(rest) is None


register_resolver("flink", resolve_flink, fetches=fetch_needed, loads=loads_code, deterministic=_released)
