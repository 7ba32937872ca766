"""Named states over one key-group range, checkpointed together (Flink ``HeapKeyedStateBackend``)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from reference.checkpoint.handle import CheckpointHandle
from reference.checkpoint.restore import CheckpointData, assign_key_groups, joined_range
from reference.checkpoint.snapshot import PendingCheckpoint, RegisteredState
from reference.checkpoint.streams import CheckpointStreamFactory
from reference.layout import DEFAULT_CAPACITY
from reference.serializers import IntSerializer
from reference.state_table import DEFAULT_MAX_PARALLELISM, CopyOnWriteStateTable, KeyGroupRange

__all__ = ["HeapKeyedStateBackend", "RegisteredState"]


class HeapKeyedStateBackend:
    """Named states over one key-group range, checkpointed together (Flink
    ``HeapKeyedStateBackend``). One key serializer for all states; each state
    has its namespace and state serializers, recorded by id in checkpoints.

    ``pending_class`` builds the pending checkpoints (a seam for seeded bugs).
    """

    pending_class = PendingCheckpoint

    def __init__(self, key_group_range: Optional[KeyGroupRange] = None,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, *, key_serializer=None,
                 capacity: int = DEFAULT_CAPACITY, stream_factory: Optional[CheckpointStreamFactory] = None) -> None:
        # A throwaway table validates the range and max_parallelism with the table's own messages.
        probe = CopyOnWriteStateTable(key_group_range, max_parallelism, capacity=capacity)
        self.key_group_range = probe.key_group_range
        self.max_parallelism = max_parallelism
        self.key_serializer = key_serializer if key_serializer is not None else IntSerializer()
        self.capacity = capacity
        self.stream_factory = stream_factory if stream_factory is not None else CheckpointStreamFactory()
        self._states: dict[str, RegisteredState] = {}

    # ------------------------------------------------------- states

    def register_state(self, name: str, namespace_serializer, state_serializer, *,
                       state_copier: Optional[Callable[[Any], Any]] = None,
                       transformer: Optional[Callable[[Any], Any]] = None) -> CopyOnWriteStateTable:
        """A new empty table for ``name``; ``state_copier`` defaults to
        ``state_serializer.copy`` (Flink copies through the serializer); ``transformer``:
        what checkpoints apply to each state as they write it (None: nothing)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        if name in self._states:
            raise ValueError(f"state {name!r} is already registered")
        if len(self._states) >= 0x7FFF:
            raise ValueError("at most 32767 states per backend (state ids are int16)")
        copier = state_copier if state_copier is not None else state_serializer.copy
        table = CopyOnWriteStateTable(self.key_group_range, self.max_parallelism, capacity=self.capacity,
                                      state_copier=copier)
        self._states[name] = RegisteredState(name, namespace_serializer, state_serializer, table, transformer)
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

    def checkpoint(self, checkpoint_id: int,
                   stream_factory: Optional[CheckpointStreamFactory] = None) -> PendingCheckpoint:
        """The synchronous part of checkpoint ``checkpoint_id``; advance or complete the result."""
        if not isinstance(checkpoint_id, int) or not 0 <= checkpoint_id < 1 << 63:
            raise ValueError(f"checkpoint_id must be an int in [0, 2**63), got {checkpoint_id!r}")
        return self.pending_class(self, checkpoint_id, stream_factory or self.stream_factory)

    @classmethod
    def restore(cls, handles: Iterable[CheckpointHandle], key_group_range: Optional[KeyGroupRange] = None, *,
                capacity: int = DEFAULT_CAPACITY,
                stream_factory: Optional[CheckpointStreamFactory] = None, **options) -> "HeapKeyedStateBackend":
        """A fresh backend for ``key_group_range`` (default: the handles' ranges
        joined) holding the checkpointed state of those key groups: one handle,
        a part of one (scale out) or several merged (scale in). All or
        nothing: on any error nothing is returned and no table escapes.
        ``options`` go to the constructor of ``cls`` (a subclass's own arguments)."""
        handles = list(handles)
        if not handles:
            raise ValueError("restore needs at least one handle")
        datas = [CheckpointData(h.read_bytes(), h.source_name, h) for h in handles]
        first = datas[0]
        for data in datas[1:]:
            data.check_compatible(first)
        if key_group_range is None:
            key_group_range = joined_range(handles)
        owner = assign_key_groups(handles, key_group_range, cls._restore_range)
        meta = first.metadata
        backend = cls(key_group_range, meta.max_parallelism, key_serializer=first.key_serializer,
                      capacity=capacity, stream_factory=stream_factory, **options)
        for state, (ns_ser, st_ser) in zip(meta.states, first.serializers):
            backend.register_state(state.name, ns_ser, st_ser)
        tables = [backend.state(s.name) for s in meta.states]
        for group in key_group_range:
            datas[owner[group]].load_key_group(group, tables)
        return backend

    @staticmethod
    def _restore_range(handle_range: KeyGroupRange, target: KeyGroupRange) -> KeyGroupRange:
        """The key groups of a handle that a restore into ``target`` reads."""
        return handle_range.intersection(target)

    def __repr__(self) -> str:
        return (f"HeapKeyedStateBackend(key_group_range={self.key_group_range}, "
                f"max_parallelism={self.max_parallelism}, states={self.state_names})")
