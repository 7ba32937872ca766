"""Named states over one key-group range, checkpointed together (Flink ``HeapKeyedStateBackend``)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from cowcheck.reference.checkpoint.flink_format import FlinkCheckpointData, FlinkPendingCheckpoint, KeyGroupsStateHandle
from cowcheck.reference.checkpoint.flink_format.savepoint import CanonicalSavepoint, KeyGroupsSavepointStateHandle
from cowcheck.reference.checkpoint.flink_format.savepoint_restore import FlinkSavepointData
from cowcheck.reference.checkpoint.handle import CheckpointHandle
from cowcheck.reference.checkpoint.restore import CheckpointData, assign_key_groups, joined_range
from cowcheck.reference.checkpoint.snapshot import PendingCheckpoint, RegisteredState
from cowcheck.reference.checkpoint.streams import ByteStreamInput, CheckpointStreamFactory
from cowcheck.reference.layout import DEFAULT_CAPACITY
from cowcheck.reference.serializers import IntSerializer
from cowcheck.reference.state_table import DEFAULT_MAX_PARALLELISM, CopyOnWriteStateTable, KeyGroupRange

__all__ = ["HeapKeyedStateBackend", "RegisteredState", "CHECKPOINT_FORMATS", "open_checkpoints"]

# The project's own format (docs/checkpoint-format.md: checksums, an index) and Flink's (flink_format/).
CHECKPOINT_FORMATS = ("cowcheck", "flink")


def open_checkpoints(handles: list, max_parallelism: Optional[int] = None,
                     stream_input: type = ByteStreamInput) -> list:
    """Each handle's checked bytes: CheckpointData for the project's format, FlinkCheckpointData for
    Flink's (``max_parallelism``: the job's, which Flink's format does not record). The handles must be
    of one format; the project's records max_parallelism, which must then agree."""
    kinds = {type(h) for h in handles}
    if kinds <= {CheckpointHandle}:
        datas = [CheckpointData(h.read_bytes(), h.source_name, h, stream_input) for h in handles]
        for data in datas:
            if max_parallelism is not None and data.max_parallelism != max_parallelism:
                raise ValueError(f"the handles were written with max_parallelism {data.max_parallelism}, "
                                 f"not {max_parallelism}")
        return datas
    if kinds <= {KeyGroupsStateHandle} or kinds <= {KeyGroupsSavepointStateHandle}:
        # Flink's builder picks the restore operation by the first handle's type (a savepoint's:
        # HeapSavepointRestoreOperation); here the handles must all be of one kind.
        data_class = FlinkSavepointData if kinds <= {KeyGroupsSavepointStateHandle} else FlinkCheckpointData
        datas = [data_class(h.read_bytes(), h.source_name, h, max_parallelism, stream_input) for h in handles]
        if datas[0].max_parallelism is None:
            raise ValueError("restoring a checkpoint in Flink's format needs the job's max_parallelism (Flink's "
                             "handles do not record it)")
        return datas
    raise TypeError(f"restore takes CheckpointHandle, KeyGroupsStateHandle or KeyGroupsSavepointStateHandle objects "
                    f"of one kind, got "
                    f"{', '.join(sorted(k.__name__ for k in kinds))}")


class HeapKeyedStateBackend:
    """Named states over one key-group range, checkpointed together (Flink
    ``HeapKeyedStateBackend``). One key serializer for all states; each state
    has its namespace and state serializers, recorded by id in checkpoints.

    ``checkpoint_format``: what its checkpoints are written in, the project's own format
    (``cowcheck``, the default: docs/checkpoint-format.md) or Flink's (``flink``:
    :mod:`cowcheck.reference.checkpoint.flink_format`); a restore reads either, by its handles.

    ``pending_class`` builds the pending checkpoints of the project's format (a seam for
    seeded bugs); ``flink_pending_class`` those of Flink's; ``savepoint_class`` canonical savepoints
    (:meth:`canonical_savepoint`); ``stream_input`` what restores read the handles' bytes through.
    """

    pending_class = PendingCheckpoint
    flink_pending_class = FlinkPendingCheckpoint
    savepoint_class = CanonicalSavepoint
    stream_input = ByteStreamInput

    def __init__(self, key_group_range: Optional[KeyGroupRange] = None,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, key_serializer=None,
                 capacity: int = DEFAULT_CAPACITY, stream_factory: Optional[CheckpointStreamFactory] = None,
                 checkpoint_format: str = "cowcheck") -> None:
        if checkpoint_format not in CHECKPOINT_FORMATS:
            raise ValueError(f"checkpoint_format must be one of {', '.join(CHECKPOINT_FORMATS)}, got "
                             f"{checkpoint_format!r}")
        # A throwaway table validates the range and max_parallelism with the table's own messages.
        probe = CopyOnWriteStateTable(key_group_range, max_parallelism, capacity=capacity)
        self.key_group_range = probe.key_group_range
        self.max_parallelism = max_parallelism
        self.key_serializer = key_serializer if key_serializer is not None else IntSerializer()
        self.capacity = capacity
        self.stream_factory = stream_factory if stream_factory is not None else CheckpointStreamFactory()
        self.checkpoint_format = checkpoint_format
        self._states: dict[str, RegisteredState] = {}

    # ------------------------------------------------------- states

    def register_state(self, name: str, namespace_serializer, state_serializer, *,
                       state_copier: Optional[Callable[[Any], Any]] = None,
                       transformer: Optional[Callable[[Any], Any]] = None,
                       kind: Optional[str] = None) -> CopyOnWriteStateTable:
        """A new empty table for ``name``; ``state_copier`` defaults to
        ``state_serializer.copy`` (Flink copies through the serializer); ``transformer``:
        what checkpoints apply to each state as they write it (None: nothing); ``kind``:
        the state's kind if known (``value``, ``list``, ``map``, ``reducing``), which Flink's
        format records."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        if name in self._states:
            raise ValueError(f"state {name!r} is already registered")
        if len(self._states) >= 0x7FFF:
            raise ValueError("at most 32767 states per backend (state ids are int16)")
        copier = state_copier if state_copier is not None else state_serializer.copy
        table = CopyOnWriteStateTable(self.key_group_range, self.max_parallelism, capacity=self.capacity,
                                      state_copier=copier)
        self._states[name] = RegisteredState(name, namespace_serializer, state_serializer, table, transformer, kind)
        return table

    def state(self, name: str) -> CopyOnWriteStateTable:
        return self.registered_state(name).table

    def registered_state(self, name: str) -> RegisteredState:
        try:
            return self._states[name]
        except KeyError:
            raise KeyError(f"no state {name!r}; registered: {sorted(self._states)}") from None

    def registered_states(self) -> list[RegisteredState]:
        """In registration order, which is state-id order in checkpoints."""
        return list(self._states.values())

    @property
    def state_names(self) -> list[str]:
        return list(self._states)

    # ------------------------------------------------------- checkpoints

    def checkpoint(self, checkpoint_id: int, stream_factory: Optional[CheckpointStreamFactory] = None, *,
                   compressed: bool = False) -> PendingCheckpoint:
        """The synchronous part of checkpoint ``checkpoint_id``; advance or complete the result.
        ``compressed``: snapshot compression (snappy key groups), which only Flink's format has: such a
        checkpoint is written in Flink's format whatever ``checkpoint_format`` says."""
        if not isinstance(checkpoint_id, int) or not 0 <= checkpoint_id < 1 << 63:
            raise ValueError(f"checkpoint_id must be an int in [0, 2**63), got {checkpoint_id!r}")
        if compressed:
            return self.flink_pending_class(self, checkpoint_id, stream_factory or self.stream_factory,
                                            compressed=True)
        pending_class = self.pending_class if self.checkpoint_format == "cowcheck" else self.flink_pending_class
        return pending_class(self, checkpoint_id, stream_factory or self.stream_factory)

    def canonical_savepoint(self, checkpoint_id: int, stream_factory: Optional[CheckpointStreamFactory] = None, *,
                            compressed: bool = False):
        """The synchronous part of a canonical savepoint (Flink's backend-independent format, whatever
        ``checkpoint_format`` is: flink_format/savepoint.py), its key groups snappy-compressed if
        ``compressed``; advance or complete the result."""
        if not isinstance(checkpoint_id, int) or not 0 <= checkpoint_id < 1 << 63:
            raise ValueError(f"checkpoint_id must be an int in [0, 2**63), got {checkpoint_id!r}")
        if compressed:
            return self.savepoint_class(self, checkpoint_id, stream_factory or self.stream_factory, compressed=True)
        return self.savepoint_class(self, checkpoint_id, stream_factory or self.stream_factory)

    @classmethod
    def restore(cls, handles: Iterable, key_group_range: Optional[KeyGroupRange] = None, *,
                max_parallelism: Optional[int] = None, capacity: int = DEFAULT_CAPACITY,
                stream_factory: Optional[CheckpointStreamFactory] = None, **options) -> "HeapKeyedStateBackend":
        """A fresh backend for ``key_group_range`` (default: the handles' ranges
        joined) holding the checkpointed state of those key groups: one handle,
        a part of one (scale out) or several merged (scale in). All or
        nothing: on any error nothing is returned and no table escapes.
        ``handles``: CheckpointHandle (the project's format) or KeyGroupsStateHandle
        (Flink's, which needs ``max_parallelism``: Flink does not record it).
        ``options`` go to the constructor of ``cls`` (a subclass's own arguments)."""
        handles = list(handles)
        if not handles:
            raise ValueError("restore needs at least one handle")
        datas = open_checkpoints(handles, max_parallelism, cls.stream_input)
        first = datas[0]
        for data in datas[1:]:
            data.check_compatible(first)
        if key_group_range is None:
            key_group_range = joined_range(handles)
        owner = assign_key_groups(handles, key_group_range, cls._restore_range)
        backend = cls(key_group_range, first.max_parallelism, key_serializer=first.key_serializer,
                      capacity=capacity, stream_factory=stream_factory, **options)
        restored = first.restored_states()
        for name, kind, ns_ser, st_ser in restored:
            backend.register_state(name, ns_ser, st_ser, kind=kind)
        # By name: each of Flink's handles numbers the states in its own order.
        tables = [[backend.state(name) for name in data.state_names] for data in datas]
        for group in key_group_range:
            datas[owner[group]].load_key_group(group, tables[owner[group]])
        return backend

    @staticmethod
    def _restore_range(handle_range: KeyGroupRange, target: KeyGroupRange) -> KeyGroupRange:
        """The key groups of a handle that a restore into ``target`` reads."""
        return handle_range.intersection(target)

    def __repr__(self) -> str:
        return (f"HeapKeyedStateBackend(key_group_range={self.key_group_range}, "
                f"max_parallelism={self.max_parallelism}, states={self.state_names})")
