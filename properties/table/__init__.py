"""The table machine ("table"): a CopyOnWriteStateTable whose state serializer is
re-registered mid-program (``set_meta_info``), the setting of FLINK-26853.

Importing it registers the machine with :mod:`cowcheck.core.machine`;
``--impl flink`` / ``flink@VERSION`` run Flink's own table of that release
(``cowcheck.flink.table``).
"""

from __future__ import annotations

from cowcheck.core.impls import Implementation, probe_by_harness
from cowcheck.table import mutants  # noqa: F401  (registers the table's seeded bugs)
from cowcheck.core.machine import MachineKind, register_machine
from cowcheck.table.harness import TableHarness, TableMachineConfig
from cowcheck.table.machine import make_table_machine, replay_setup, same_object, walk
from cowcheck.table.ops import TABLE_OPS
from cowcheck.reference.state_table import CopyOnWriteStateTable

__all__ = ["TABLE", "TableHarness", "TableMachineConfig", "make_table_machine", "reference_table"]

SCENARIOS = {
    "mutate-after-reregistration-under-snapshot":
        "in-place mutation of a returned state, after re-registration, while a snapshot is live",
}


def reference_table():
    """The reference table (128 key groups), its state first registered with a
    serializer whose copy returns the same object (values declared immutable)."""
    return CopyOnWriteStateTable(max_parallelism=128, state_copier=same_object)


TABLE = register_machine(MachineKind(
    name="table",
    summary="CopyOnWriteStateTable: key groups, serializer re-registration, checkpoint writes",
    operations=TABLE_OPS,
    harness_class=TableHarness,
    builder=make_table_machine,
    config_class=TableMachineConfig,
    replay_setup=replay_setup,
    builtins={"reference": lambda: Implementation("reference", reference_table, True,
                                                  "reference CopyOnWriteStateTable (set_meta_info updates every "
                                                  "map's copier)")},
    probe=probe_by_harness,
    scenarios=SCENARIOS,
    walker=walk,
    api=("put", "get", "set_meta_info", "snapshot"),
    sample=lambda factory: factory(),
))
