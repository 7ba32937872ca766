"""Operator state onto a new parallelism (Flink ``RoundRobinOperatorStateRepartitioner``, 2.3.0), ported step by step.

``repartition(previous, old, new)`` takes, per old subtask, its handles (None
for an empty snapshot) and returns, per new subtask, the handles it restores:

- same parallelism: unchanged, unless there are union states (or broadcast
  states some subtasks lack): then every subtask keeps its own handles and
  gets every union state's offsets of every handle (and the broadcast state of
  old subtask ``i % old`` where its own lacks one);
- another parallelism: per state name (in the order of a Java ``HashMap`` of
  the names, which decides where each round starts), SPLIT_DISTRIBUTE offsets
  dealt out round-robin (``total // new`` each, one more to the first
  ``total % new`` subtasks of the round, the next state's round starting
  where this one's remainder ran out); UNION offsets of every handle to every
  subtask; BROADCAST: subtask ``i`` gets the state of old subtask ``i % old``.

Offsets of one stream given to one subtask merge into one handle (Flink: a map
from the stream handle to the new handle, iterated as a Java ``HashMap`` of the
streams: the order in which a subtask reads its handles).

>>> from cowcheck.reference.operator.format import OperatorStreamStateHandle, StateOffsets, StreamData
>>> h = [OperatorStreamStateHandle({"ids": StateOffsets([0, 4, 8], "SPLIT_DISTRIBUTE")}, StreamData(f"s{i}", 12, b""))
...      for i in range(2)]
>>> [[list(x.states["ids"].offsets) for x in part] for part in repartition([[h[0]], [h[1]]], 2, 4)]
[[[0, 4]], [[8], [0]], [[4]], [[8]]]
"""

from __future__ import annotations

from typing import Optional

from cowcheck.reference.operator.format import OperatorStreamStateHandle, StateOffsets
from cowcheck.reference.operator.javamap import expected_size_capacity, java_map_order, java_string_hash
from cowcheck.reference.operator.states import BROADCAST, MODES, SPLIT_DISTRIBUTE, UNION

__all__ = ["repartition", "RoundRobinRepartitioner"]


class _MergeMap:
    """``Map<StreamStateHandle, OperatorStateHandle>`` of one new subtask: per stream, the states it reads."""

    def __init__(self) -> None:
        self.handles: dict = {}  # stream name -> [stream, {state: StateOffsets}, capacity]

    def states_of(self, stream, capacity: Optional[int]) -> dict:
        entry = self.handles.get(stream.name)
        if entry is None:
            entry = self.handles[stream.name] = [stream, {}, capacity]
        return entry[1]

    def result(self) -> list:
        order = java_map_order(list(self.handles), lambda name: self.handles[name][0].java_hash)
        return [OperatorStreamStateHandle(self.handles[n][1], self.handles[n][0], self.handles[n][2]) for n in order]


def _by_name(states: dict) -> list:
    """A ``HashMap<String, ...>``'s iteration order (``states``: insertion-ordered, default capacity)."""
    return java_map_order(list(states), java_string_hash)


class RoundRobinRepartitioner:
    """See the module docstring; a class so that seeded bugs can override one step."""

    def repartition(self, previous: list, old_parallelism: int, new_parallelism: int) -> list:
        if new_parallelism <= 0 or len(previous) != old_parallelism:
            raise ValueError(f"repartition: {len(previous)} subtasks' handles for parallelism {old_parallelism}, "
                             f"new parallelism {new_parallelism}")
        if new_parallelism == old_parallelism:
            union = self._collect(previous, UNION)
            partial = {name: entries for name, (entries, reported) in self._collect_entries(previous, BROADCAST).items()
                       if 0 < len(reported) < old_parallelism}
            if not union and not partial:
                return [list(handles) for handles in previous]
            merge = self._init_merge(previous)
            self._union(union, merge)
            self._broadcast(partial, merge)
        else:
            by_mode = self._group_by_mode(previous)
            merge = [_MergeMap() for _ in range(new_parallelism)]
            self._split(by_mode[SPLIT_DISTRIBUTE], new_parallelism, merge)
            self._union(by_mode[UNION], merge)
            self._broadcast(by_mode[BROADCAST], merge)
        return [m.result() for m in merge]

    # ------------------------------------------------------------ grouping

    @staticmethod
    def _collect_entries(previous: list, mode: str) -> dict:
        """``collectStates``: name -> ([(stream, offsets)...], subtasks that reported it)."""
        found: dict = {}
        for index, handles in enumerate(previous):
            for handle in handles:
                if handle is None:
                    continue
                for name in handle.names():
                    offsets = handle.states[name]
                    if offsets.mode == mode:
                        entries, reported = found.setdefault(name, ([], set()))
                        entries.append((handle.stream, offsets))
                        reported.add(index)
        order = java_map_order(list(found), java_string_hash, expected_size_capacity(len(previous)))
        return {name: found[name] for name in order}

    def _collect(self, previous: list, mode: str) -> dict:
        return {name: entries for name, (entries, _) in self._collect_entries(previous, mode).items()}

    @staticmethod
    def _group_by_mode(previous: list) -> dict:
        by_mode: dict = {mode: {} for mode in MODES}
        for handles in previous:
            for handle in handles:
                if handle is None:
                    continue
                for name in handle.names():
                    offsets = handle.states[name]
                    by_mode[offsets.mode].setdefault(name, []).append((handle.stream, offsets))
        return by_mode

    @staticmethod
    def _init_merge(previous: list) -> list:
        merge = []
        for handles in previous:
            m = _MergeMap()
            for handle in handles:
                m.states_of(handle.stream, handle.capacity).update(handle.states)
            merge.append(m)
        return merge

    # ------------------------------------------------------------ the three modes

    def _split(self, states: dict, parallelism: int, merge: list) -> None:
        start = 0
        for name in _by_name(states):
            current = states[name]
            total = sum(len(offsets.offsets) for _, offsets in current)
            at, offset_at = 0, 0
            base, remainder = divmod(total, parallelism)
            next_start = start
            for i in range(parallelism):
                index = (i + start) % parallelism
                assign = base
                if remainder > 0:
                    assign += 1
                    remainder -= 1
                elif remainder == 0:
                    next_start = index
                    remainder -= 1
                while assign > 0:
                    stream, offsets = current[at]
                    remaining = len(offsets.offsets) - offset_at
                    if remaining > assign:
                        part = offsets.offsets[offset_at:offset_at + assign]
                        offset_at += assign
                    else:
                        part = offsets.offsets[offset_at:]
                        offset_at = 0
                        at += 1
                    assign -= remaining
                    merge[index].states_of(stream, len(states))[name] = StateOffsets(part, SPLIT_DISTRIBUTE)
            start = next_start

    @staticmethod
    def _union(states: dict, merge: list) -> None:
        for m in merge:
            for name in _by_name(states):
                for stream, offsets in states[name]:
                    m.states_of(stream, len(states))[name] = offsets

    @staticmethod
    def _broadcast(states: dict, merge: list) -> None:
        for i, m in enumerate(merge):
            for name in _by_name(states):
                entries = states[name]
                stream, offsets = entries[i % len(entries)]
                m.states_of(stream, len(states))[name] = offsets


_INSTANCE = RoundRobinRepartitioner()


def repartition(previous: list, old_parallelism: int, new_parallelism: int) -> list:
    """``RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState`` (see the module docstring)."""
    return _INSTANCE.repartition(previous, old_parallelism, new_parallelism)
