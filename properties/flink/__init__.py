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

import attrs

from cowcheck.core.impls import Implementation, UnknownImplementationError, register_resolver
from cowcheck.core.machine import MachineKind
from cowcheck.flink.jvm import FlinkUnavailableError, JvmInfo, available, compile_helper, jvm
from cowcheck.flink.async_controller import FLINK_ASYNC_SINCE, FlinkAsyncController, api_of
from cowcheck.flink.releases import (DEFAULT_VERSION, check_version, fetch_needed, parse_version, release_lib,
                                       select_release)
from cowcheck.flink.map import (FLINK_CAPACITY, EntryMirror, FlinkCapacityError, FlinkSnapshot, FlinkStateMap,
                                  FlinkView)
from cowcheck.flink.serializers import flink_deserialize, flink_serialize
from cowcheck.flink.backend import FlinkStateBackend, warm_up
from cowcheck.flink.corruptions import BACKEND_CORRUPTIONS, CORRUPTIONS
from cowcheck.flink.table import FlinkStateTable
from cowcheck.flink.segments import DETAILS, WalkHarness, WalkMap, run_batch

__all__ = ["FLINK_CAPACITY", "DETAILS", "FlinkUnavailableError", "FlinkCapacityError", "FlinkStateMap",
           "FlinkSnapshot", "FlinkView", "EntryMirror", "JvmInfo", "FlinkImplementation", "available", "jvm",
           "flink_serialize", "flink_deserialize", "run_batch", "resolve_flink"]


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


def resolve_flink(rest: str, kind: MachineKind) -> Implementation:
    """``resolve("flink")`` (Flink 2.3.0, installed by the ``flink`` extra) or
    ``resolve("flink@VERSION")`` (any release from 1.13.6, fetched on first use),
    either followed by ``:corrupt=NAME`` (a seeded Java-side corruption of the map,
    ``cowcheck.flink.corruptions``; of the keyed backend with ``--machine backend``): checks that the bridge can run, chooses
    the release of this process and fetches its jar if it is not cached yet,
    without starting the JVM (a campaign driver resolves before forking)."""
    spec = "flink" + (rest if not rest or rest.startswith("@") else ":" + rest)
    version = DEFAULT_VERSION
    release, _, options = rest.partition(":")
    if not release and not options and rest.startswith(":"):
        options = rest[1:]
    corruption = ""
    if release.startswith("@"):
        version = release[1:]
    elif release and not release.startswith("corrupt="):
        raise UnknownImplementationError(f"flink:{rest}", "the Flink bridge takes a release and a seeded "
                                                          "corruption: use 'flink' or 'flink@VERSION' (e.g. "
                                                          "flink@1.13.6), optionally followed by ':corrupt=NAME'")
    elif release:
        options = release
    machine = kind.name
    build = _IMPLEMENTATIONS.get(machine)
    if build is None:
        raise UnknownImplementationError(spec, f"the Flink bridge offers the {', '.join(_IMPLEMENTATIONS)} "
                                               f"machines, not {machine!r}")
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
        check_version(version)
    except ValueError as exc:
        raise UnknownImplementationError(spec, str(exc)) from None
    since = _SINCE.get(machine)
    if since is not None and parse_version(version) < since[0]:
        raise UnknownImplementationError(spec, f"{since[1]}; {version} has {since[2]}")
    try:
        select_release(version)
    except ValueError as exc:
        raise UnknownImplementationError(spec, str(exc)) from None
    reason = available()
    if reason is not None:
        raise UnknownImplementationError(spec, reason)
    if version != DEFAULT_VERSION:
        try:
            release_lib(version)  # fetched here, once, before any process that will use it is forked
        except (RuntimeError, OSError) as exc:
            raise UnknownImplementationError(spec, str(exc)) from None
    try:
        compile_helper()  # javac here, outside the step time limit the first implementation is built under
    except FlinkUnavailableError as exc:
        raise UnknownImplementationError(spec, exc.reason) from None
    return build(spec, version, corruption)


def _map(spec: str, version: str, corruption: str) -> FlinkImplementation:
    described = f" with the seeded corruption {corruption}" if corruption else ""
    factory = functools.partial(FlinkStateMap, corruption=corruption) if corruption else FlinkStateMap
    return FlinkImplementation(spec, factory, True,
                               f"Apache Flink {version} CopyOnWriteStateMap through JPype (capacity 128 only)"
                               f"{described}", default_capacity=FLINK_CAPACITY, corruption=corruption)


def _async(spec: str, version: str, corruption: str) -> Implementation:
    api = api_of(parse_version(version))
    lacks = api.lacks()
    # What the release lacks, the machine leaves out (its config), said once in the run's header.
    left_out = f"; {version} has no {', no '.join(lacks)}: the machine leaves them out" if lacks else ""
    return Implementation(spec, FlinkAsyncController, False,
                          f"Apache Flink {version} AsyncExecutionController through JPype (deterministic "
                          f"mailbox and executor, no buffer timeout){left_out}",
                          config_defaults={"buffer_timeout": 0, "final_actions": api.final_actions,
                                           "overdraft": api.overdraft})


def _backend(spec: str, version: str, corruption: str) -> Implementation:
    described = f" with the seeded corruption {corruption}" if corruption else ""
    # Native savepoints (SavepointFormatType) exist from 1.15: before, every savepoint is canonical.
    # TTL switched across a restore is migrated from 2.2 (TtlAwareSerializer in the heap backend): before, incompatible.
    release = parse_version(version)
    lacks = {"native_savepoints": "no native savepoints: the machine leaves them out",
             "ttl_migration": "no TTL state migration: TTL switched across a restore must be refused"}
    defaults = {name: False for name, since in (("native_savepoints", FLINK_NATIVE_SAVEPOINTS_SINCE),
                                                ("ttl_migration", FLINK_TTL_MIGRATION_SINCE)) if release < since}
    left_out = "".join(f"; {version} has {lacks[name]}" for name in defaults)
    return Implementation(spec, functools.partial(FlinkStateBackend, corruption=corruption), False,
                          f"Apache Flink {version} HeapKeyedStateBackend through JPype (its builder, "
                          f"descriptors, snapshot strategy){described}{left_out}", warm_up=warm_up,
                          config_defaults=defaults)


def _table(spec: str, version: str, corruption: str) -> Implementation:
    return Implementation(spec, FlinkStateTable, False,
                          f"Apache Flink {version} CopyOnWriteStateTable through JPype (key groups 0-127)")


FLINK_NATIVE_SAVEPOINTS_SINCE = (1, 15, 0)
FLINK_TTL_MIGRATION_SINCE = (2, 2, 0)  # measured: 2.1.0 refuses, 2.2.0 migrates (FLINK-37294)
# The machines Flink's own classes implement through the bridge, and since which release.
_IMPLEMENTATIONS = {"map": _map, "table": _table, "async": _async, "backend": _backend}
_SINCE = {"async": (FLINK_ASYNC_SINCE, f"Flink's AsyncExecutionController exists from "
                                       f"{'.'.join(str(part) for part in FLINK_ASYNC_SINCE)} on", "no async controller")}
# The seeded Java-side corruptions each machine's Flink implementation takes (flink:corrupt=NAME).
_CORRUPTIONS = {"map": CORRUPTIONS, "backend": BACKEND_CORRUPTIONS}

register_resolver("flink", resolve_flink, fetches=fetch_needed)
