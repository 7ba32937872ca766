"""EpochManager: records and non-records in epochs (FLIP-425), as Flink 2.0–2.3 define them.

A non-record input (a watermark, a timer, a record attribute) closes the
current epoch and opens the next: the records that arrived before it belong
to the closed epoch, the ones after it to the new one. The non-record's
action runs only once every record of its epoch has finished (all of its
asynchronous work included) and every earlier epoch has finished: epochs
finish in arrival order.

The action comes in two parts (FLINK-36928, in every 2.x release): the
*trigger* action runs first; records it starts (a timer that processes
elements) join the finishing epoch, and the *final* action runs once those
have finished too. While an epoch is finishing, every new record joins it.

Parallel modes (``ParallelMode``): ``SERIAL_BETWEEN_EPOCH`` drains every
in-flight record right after the non-record arrives, so the next epoch starts
only when this one has finished; ``PARALLEL_BETWEEN_EPOCH`` lets the next
epoch's records run meanwhile (the actions still run in epoch order).

Statuses: OPEN (taking records), CLOSED (its non-record arrived), FINISHING
(trigger action ran, waiting for what it started), FINISHED (final action ran).

>>> fired = []
>>> m = EpochManager(drain=None)
>>> first = m.on_record()
>>> m.on_non_record(lambda: fired.append("trigger"), lambda: fired.append("final"), ParallelMode.PARALLEL_BETWEEN_EPOCH)
>>> fired
[]
>>> m.complete_one_record(first); fired
['trigger', 'final']
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Callable

__all__ = ["EpochManager", "Epoch", "EpochStatus", "ParallelMode"]


class ParallelMode(enum.Enum):
    SERIAL_BETWEEN_EPOCH = "serial"
    PARALLEL_BETWEEN_EPOCH = "parallel"


class EpochStatus(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"
    FINISHING = "finishing"
    FINISHED = "finished"


class Epoch:
    """``ongoing``: records of this epoch not finished yet."""

    __slots__ = ("id", "ongoing", "trigger_action", "final_action", "status")

    def __init__(self, epoch_id: int) -> None:
        self.id = epoch_id
        self.ongoing = 0
        self.trigger_action: Callable[[], None] | None = None
        self.final_action: Callable[[], None] | None = None
        self.status = EpochStatus.OPEN

    def close(self, trigger_action, final_action) -> None:
        self.trigger_action, self.final_action = trigger_action, final_action
        self.status = EpochStatus.CLOSED

    def try_finish(self) -> bool:
        """Run what can run now: the trigger action once the epoch is closed and
        empty, the final action once it is finishing and empty. True if finished."""
        if self.ongoing:
            return False
        if self.status is EpochStatus.CLOSED:
            self.status = EpochStatus.FINISHING
            if self.trigger_action is not None:
                self.trigger_action()
        if not self.ongoing and self.status is EpochStatus.FINISHING:
            self.status = EpochStatus.FINISHED
            if self.final_action is not None:
                self.final_action()
        return self.status is EpochStatus.FINISHED

    def __repr__(self) -> str:
        return f"Epoch(id={self.id}, ongoing={self.ongoing}, status={self.status.value})"


class EpochManager:
    """See the module docstring. ``drain(target)``: the controller's
    ``drain_inflight_records`` (SERIAL_BETWEEN_EPOCH calls it with 0)."""

    epoch_class = Epoch  # a seam for variants

    def __init__(self, drain: Callable[[int], None] | None) -> None:
        self.drain = drain
        self.epoch_count = 0
        self.output_queue: deque[Epoch] = deque()  # closed epochs, not finished, oldest first
        self.active = self._new_epoch()
        self.finishing: Epoch | None = None  # the epoch whose actions are running (new records join it)
        self._finishing_queue = False  # re-entrance guard of _try_finish_in_queue

    def _new_epoch(self) -> Epoch:
        epoch = self.epoch_class(self.epoch_count)
        self.epoch_count += 1
        return epoch

    def on_record(self) -> Epoch:
        """A new record: it joins the finishing epoch if actions are running, else the open one."""
        epoch = self.finishing if self.finishing is not None else self.active
        epoch.ongoing += 1
        return epoch

    def on_epoch(self, epoch: Epoch) -> Epoch:
        """A record that inherits ``epoch`` (a context built from another record's)."""
        epoch.ongoing += 1
        return epoch

    def on_non_record(self, trigger_action, final_action, mode: ParallelMode) -> None:
        """Close the open epoch with the non-record's actions and open the next."""
        self.active.close(trigger_action, final_action)
        self.output_queue.append(self.active)
        self.active = self._new_epoch()
        self._try_finish_in_queue()
        if mode is ParallelMode.SERIAL_BETWEEN_EPOCH and self.drain is not None:
            self.drain(0)

    def complete_one_record(self, epoch: Epoch) -> None:
        epoch.ongoing -= 1
        if epoch.ongoing == 0 and epoch is not self.active:
            self._try_finish_in_queue()

    def _try_finish_in_queue(self) -> None:
        if self._finishing_queue:
            return  # called from an action: the outer loop carries on
        self._finishing_queue = True
        try:
            while self.output_queue:
                epoch = self.output_queue[0]
                self.finishing = epoch
                try:
                    if not epoch.try_finish():
                        break
                finally:
                    self.finishing = None
                self.output_queue.popleft()
        finally:
            self._finishing_queue = False

    def __repr__(self) -> str:
        return f"EpochManager(active={self.active!r}, queue={list(self.output_queue)!r})"
