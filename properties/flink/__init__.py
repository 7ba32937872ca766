"""The Flink bridge: Apache Flink's own classes under the suite, through JPype (docs/flink-bridge.md).

- ``jvm``: the Flink jar, our Java helper (``java/``) compiled against it, the JVM started once;
- ``convert``: what crosses the boundary (keys, namespaces, states, answers, exceptions);
- ``map``: Flink's ``CopyOnWriteStateMap`` behind the SPEC §15 API (``--impl flink``);
- ``batch``: a whole program in one Java call, observed as ``properties.map.parity`` observes;
- ``serializers``: Flink's own serializers, for byte-for-byte parity with the reference's.

Importing this package registers the ``flink`` implementation spec of the
map machine (it starts no JVM: that happens when the first map is built).
"""

from __future__ import annotations

import copy

from properties.core.impls import Implementation, UnknownImplementationError, register_resolver
from properties.core.machine import MachineKind
from properties.flink.batch import BATCH_OPS, DETAILS, run_batch
from properties.flink.jvm import FlinkUnavailableError, JvmInfo, available, jvm
from properties.flink.map import FLINK_CAPACITY, EntryMirror, FlinkCapacityError, FlinkSnapshot, FlinkStateMap, FlinkView
from properties.flink.serializers import flink_deserialize, flink_serialize

__all__ = ["FLINK_CAPACITY", "BATCH_OPS", "DETAILS", "FlinkUnavailableError", "FlinkCapacityError", "FlinkStateMap",
           "FlinkSnapshot", "FlinkView", "EntryMirror", "JvmInfo", "FlinkImplementation", "available", "jvm",
           "flink_serialize", "flink_deserialize", "run_batch", "resolve_flink"]


class FlinkImplementation(Implementation):
    """The ``flink`` implementation: ``new()`` builds a map of capacity 128 unless
    told otherwise (then FlinkCapacityError)."""

    def new(self, capacity: int = FLINK_CAPACITY, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)


def resolve_flink(rest: str, kind: MachineKind | None = None) -> FlinkImplementation:
    """``resolve("flink")``: checks that jpype1 and the Flink jar are installed,
    without starting the JVM (a campaign driver resolves before forking)."""
    if rest:
        raise UnknownImplementationError(f"flink{rest if rest.startswith('@') else ':' + rest}",
                                         "the Flink bridge takes no options: use 'flink'")
    if kind is not None and kind.name != "map":
        raise UnknownImplementationError("flink", f"the Flink bridge offers the map machine, not {kind.name!r}")
    reason = available()
    if reason is not None:
        raise UnknownImplementationError("flink", reason)
    return FlinkImplementation("flink", FlinkStateMap, True,
                               "Apache Flink 2.3.0 CopyOnWriteStateMap through JPype (capacity 128 only)",
                               default_capacity=FLINK_CAPACITY)


register_resolver("flink", resolve_flink)
