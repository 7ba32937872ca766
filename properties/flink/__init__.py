"""The Flink bridge: Apache Flink's own classes under the suite, through JPype (docs/flink-bridge.md).

- ``jvm``: the Flink jar, our Java helper (``java/``) compiled against it, the JVM started once;
- ``convert``: what crosses the boundary (keys, namespaces, states, answers, exceptions);
- ``map``: Flink's ``CopyOnWriteStateMap`` behind the docs/contract.md §15 API (``--impl flink``);
- ``batch``, ``opcodes``: the batched encoding of map programs, and the helper's ``Ops.java`` generated
  from the map's table;
- ``walk``: map programs on Flink a segment per Java call (``Walk.java``): batched walks checked by the
  harness, and ``run_batch``, a program observed as ``properties.map.parity`` observes;
- ``serializers``: Flink's own serializers, for byte-for-byte parity with the reference's.

Importing this package registers the ``flink`` implementation spec of the
map machine (it starts no JVM: that happens when the first map is built).
"""

from __future__ import annotations

import copy
import functools

import attrs

from properties.core.impls import Implementation, UnknownImplementationError, register_resolver
from properties.core.machine import MachineKind
from properties.flink.jvm import FlinkUnavailableError, JvmInfo, available, jvm
from properties.flink.async_controller import FLINK_ASYNC_SINCE, FlinkAsyncController
from properties.flink.releases import (DEFAULT_VERSION, check_version, fetch_needed, parse_version, release_lib,
                                       select_release)
from properties.flink.map import (FLINK_CAPACITY, EntryMirror, FlinkCapacityError, FlinkSnapshot, FlinkStateMap,
                                  FlinkView)
from properties.flink.serializers import flink_deserialize, flink_serialize
from properties.flink.corruptions import CORRUPTIONS
from properties.flink.table import FlinkStateTable
from properties.flink.walk import DETAILS, WalkHarness, WalkMap, run_batch

__all__ = ["FLINK_CAPACITY", "DETAILS", "FlinkUnavailableError", "FlinkCapacityError", "FlinkStateMap",
           "FlinkSnapshot", "FlinkView", "EntryMirror", "JvmInfo", "FlinkImplementation", "available", "jvm",
           "flink_serialize", "flink_deserialize", "run_batch", "resolve_flink"]


@attrs.frozen
class FlinkImplementation(Implementation):
    """The ``flink`` implementation: ``new()`` builds a map of capacity 128 unless
    told otherwise (then FlinkCapacityError). ``corruption``: a seeded
    Java-side corruption (``properties.flink.corruptions``), "" for none."""

    corruption: str = ""

    def new(self, capacity: int = FLINK_CAPACITY, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)

    def walk_harness(self, capacity: int = FLINK_CAPACITY, **options) -> WalkHarness:
        """A harness whose walks run on Flink a segment per Java call (``properties.flink.walk``):
        call its ``expect(steps)`` with the program, then ``apply`` each step."""
        return WalkHarness(WalkMap(capacity, corruption=self.corruption), **options)

    def walk_factory(self, capacity: int = FLINK_CAPACITY):
        """``(make, harness_class)`` for replays through batched walks (shrinking)."""
        return functools.partial(WalkMap, capacity, corruption=self.corruption), WalkHarness


def resolve_flink(rest: str, kind: MachineKind | None = None) -> FlinkImplementation:
    """``resolve("flink")`` (Flink 2.3.0, installed by the ``flink`` extra) or
    ``resolve("flink@VERSION")`` (any release from 1.13.6, fetched on first use),
    either followed by ``:corrupt=NAME`` (a seeded Java-side corruption of the map,
    ``properties.flink.corruptions``): checks that the bridge can run, chooses
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
    if options:
        name = options.removeprefix("corrupt=")
        if not options.startswith("corrupt=") or name not in CORRUPTIONS:
            raise UnknownImplementationError(spec, f"unknown option {options!r}: the Flink bridge takes "
                                                   f"corrupt=NAME, NAME one of {', '.join(CORRUPTIONS)}")
        corruption = name
    if kind is not None and kind.name not in ("map", "table", "async"):
        raise UnknownImplementationError(spec, f"the Flink bridge offers the map, table and async machines, "
                                               f"not {kind.name!r}")
    if corruption and kind is not None and kind.name != "map":
        raise UnknownImplementationError(spec, "seeded corruptions are corruptions of the map")
    try:
        check_version(version)
    except ValueError as exc:
        raise UnknownImplementationError(spec, str(exc)) from None
    if kind is not None and kind.name == "async" and parse_version(version) < FLINK_ASYNC_SINCE:
        raise UnknownImplementationError(spec, f"Flink's AsyncExecutionController exists from 2.0.0 on; {version} "
                                               f"has no async controller")
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
    if kind is not None and kind.name == "async":
        return Implementation(spec, FlinkAsyncController, False,
                              f"Apache Flink {version} AsyncExecutionController through JPype (deterministic "
                              f"mailbox and executor, no buffer timeout)",
                              config_defaults={"buffer_timeout": 0})
    if kind is not None and kind.name == "table":
        return Implementation(spec, FlinkStateTable, False,
                              f"Apache Flink {version} CopyOnWriteStateTable through JPype (key groups 0-127)")
    described = f" with the seeded corruption {corruption}" if corruption else ""
    factory = functools.partial(FlinkStateMap, corruption=corruption) if corruption else FlinkStateMap
    return FlinkImplementation(spec, factory, True,
                               f"Apache Flink {version} CopyOnWriteStateMap through JPype (capacity 128 only)"
                               f"{described}", default_capacity=FLINK_CAPACITY, corruption=corruption)


register_resolver("flink", resolve_flink, fetches=fetch_needed)
