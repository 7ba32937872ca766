"""Seeded bugs of the state table (machine ``table``)."""

from __future__ import annotations

import copy

from cowcheck.core.mutants import register_mutant
from cowcheck.table.machine import same_object
from cowcheck.reference.state_table import CopyOnWriteStateTable

__all__ = ["StaleCopierTable"]


@register_mutant("table-set-meta-info-keeps-copier", "setMetaInfo re-registers the state serializer but the "
                 "table's maps keep copying with the old one (Flink before 1.16)", "T2", machine="table",
                 source="FLINK-26853")
class StaleCopierTable(CopyOnWriteStateTable):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_parallelism", 128)
        kwargs.setdefault("state_copier", same_object)
        super().__init__(*args, **kwargs)

    def set_meta_info(self, state_copier=copy.deepcopy) -> None:
        pass  # CopyOnWriteStateTable does not override setMetaInfo: the maps' serializer is final
