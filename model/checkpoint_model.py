"""The oracle for checkpoints (docs/contract.md §11): a dict of live states plus, per
checkpoint, a frozen deep copy taken at its synchronous point.

Identity (docs/contract.md §6, per key group): the write of a checkpoint releases its map
snapshot group by group, so a state handed out is a fresh copy iff some
running checkpoint that has not yet written the state's key group is newer
than the state's last write or copy. Versions go 1, 2, 3… with each
checkpoint, as every map of every table is snapshotted once per checkpoint.

>>> m = CheckpointModel(key_group_of=lambda key: key % 2, key_groups=[0, 1])
>>> m.put("s", 1, 0, [1]); c = m.start(7); m.get("s", 1, 0).append(2)
>>> c.frozen, m.get("s", 1, 0)
({('s', 1, 0): [1]}, [1, 2])
"""

from __future__ import annotations

import copy
from typing import Callable

__all__ = ["CheckpointModel", "ModelCheckpoint"]


class ModelCheckpoint:
    __slots__ = ("version", "frozen", "unwritten", "status")

    def __init__(self, version: int, frozen: dict, key_groups: list[int]) -> None:
        self.version = version
        self.frozen = frozen  # (state, key, namespace) -> value at the synchronous point
        self.unwritten = list(key_groups)  # in write order
        self.status = "running"


class CheckpointModel:
    def __init__(self, key_group_of: Callable[[object], int], key_groups: list[int],
                 state_copier=copy.deepcopy) -> None:
        self.key_group_of = key_group_of
        self.key_groups = list(key_groups)
        self.state_copier = state_copier
        self.data: dict = {}  # (state, key, namespace) -> [value, version of last write or copy]
        self.version = 0
        self.checkpoints: dict = {}  # cid -> ModelCheckpoint

    # ------------------------------------------------------------ identity

    def required_version(self, key) -> int:
        group = self.key_group_of(key)
        return max((c.version for c in self.checkpoints.values()
                    if c.status == "running" and group in c.unwritten), default=0)

    def copy_expected(self, state, key, namespace) -> bool:
        slot = self.data.get((state, key, namespace))
        return slot is not None and slot[1] < self.required_version(key)

    def _hand_out(self, state, key, namespace):
        slot = self.data[(state, key, namespace)]
        if slot[1] < self.required_version(key):
            slot[:] = [self.state_copier(slot[0]), self.version]
        return slot[0]

    # ------------------------------------------------------------ states

    def get(self, state, key, namespace):
        return self._hand_out(state, key, namespace) if (state, key, namespace) in self.data else None

    def put(self, state, key, namespace, value) -> None:
        self.data[(state, key, namespace)] = [value, self.version]

    def remove(self, state, key, namespace) -> None:
        self.data.pop((state, key, namespace), None)

    def transform(self, state, key, namespace, value, fn) -> None:
        old = self.get(state, key, namespace)
        self.put(state, key, namespace, fn(old, value))

    def entries(self, state) -> list:
        return [(k, n, slot[0]) for (s, k, n), slot in self.data.items() if s == state]

    # ------------------------------------------------------------ checkpoints

    def start(self, cid) -> ModelCheckpoint:
        self.version += 1
        frozen = {name: copy.deepcopy(slot[0]) for name, slot in self.data.items()}
        checkpoint = self.checkpoints[cid] = ModelCheckpoint(self.version, frozen, self.key_groups)
        return checkpoint

    def running(self) -> list:
        return [cid for cid, c in self.checkpoints.items() if c.status == "running"]

    def write_next(self, cid) -> int | None:
        """The key group the next write step of ``cid`` writes (None when all are written)."""
        unwritten = self.checkpoints[cid].unwritten
        return unwritten.pop(0) if unwritten else None

    def end(self, cid, status: str) -> None:
        checkpoint = self.checkpoints[cid]
        checkpoint.status, checkpoint.unwritten = status, []

    def frozen_entries(self, cid, state, key_group_range) -> list:
        """What restoring ``cid`` into ``key_group_range`` must give for ``state``."""
        return [(k, n, v) for (s, k, n), v in self.checkpoints[cid].frozen.items()
                if s == state and self.key_group_of(k) in key_group_range]

    def recover(self, cid) -> None:
        """Continue from checkpoint ``cid``: fresh maps (version 0), nothing running."""
        frozen = self.checkpoints[cid].frozen
        self.data = {name: [copy.deepcopy(v), 0] for name, v in frozen.items()}
        self.version = 0
        for other in self.running():
            self.end(other, "cancelled")
