"""State time-to-live: the config, the clock, expiry, and the TTL decorators' shared logic.

Flink's ``StateTtlConfig``, ``TtlTimeProvider``, ``TtlUtils`` and
``AbstractTtlDecorator``, as the reference uses them: a state with TTL holds
:class:`~cowcheck.reference.serializers.TtlValue` objects (the user value and the
millisecond it was last written, or read under ``OnReadAndWrite``), and a
value is expired once ``timestamp + ttl <= now`` on the backend's clock.

What the reference supports (and the Flink bridge builds the same way):
visibility ``NeverReturnExpired`` (an expired value is never returned), no
background cleanup (``disableCleanupInBackground``: expired entries stay in
the table until a read finds them or a checkpoint leaves them out), and
cleanup in full snapshots (``cleanupFullSnapshot``: a checkpoint's
asynchronous part drops what has expired when it writes, through the
snapshot transformer of :func:`snapshot_transformer`).

>>> clock = ManualClock(1000)
>>> config = StateTtlConfig(ttl=10)
>>> expired(TtlValue(7, 1000), config.ttl, clock.current_timestamp())
False
>>> clock.advance(10); expired(TtlValue(7, 1000), config.ttl, clock.current_timestamp())
True
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import attrs

from cowcheck.reference.serializers import TtlValue

__all__ = ["ON_CREATE_AND_WRITE", "ON_READ_AND_WRITE", "UPDATE_TYPES", "StateTtlConfig", "ManualClock", "expired",
           "expiration_timestamp", "TtlDecorator", "snapshot_transformer"]

ON_CREATE_AND_WRITE = "OnCreateAndWrite"
ON_READ_AND_WRITE = "OnReadAndWrite"
UPDATE_TYPES = (ON_CREATE_AND_WRITE, ON_READ_AND_WRITE)
_LONG_MAX = (1 << 63) - 1


def _positive(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= _LONG_MAX:
        raise ValueError(f"StateTtlConfig: ttl must be a positive number of milliseconds, got {value!r}")


def _update_type(instance, attribute, value) -> None:
    if value not in UPDATE_TYPES:
        raise ValueError(f"StateTtlConfig: update_type must be one of {', '.join(UPDATE_TYPES)}, got {value!r}")


@attrs.frozen
class StateTtlConfig:
    """Time-to-live of a state: ``ttl`` milliseconds since the last write (``OnCreateAndWrite``)
    or the last read or write (``OnReadAndWrite``)."""

    ttl: int = attrs.field(validator=_positive)
    update_type: str = attrs.field(default=ON_CREATE_AND_WRITE, validator=_update_type)

    @property
    def update_on_read(self) -> bool:
        return self.update_type == ON_READ_AND_WRITE


class ManualClock:
    """A ``TtlTimeProvider`` whose time only moves when told (milliseconds). Read by the task
    thread and by a checkpoint's asynchronous part (its snapshot transformer)."""

    __slots__ = ("now",)

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def current_timestamp(self) -> int:
        return self.now

    def advance(self, millis: int) -> None:
        if millis < 0:
            raise ValueError(f"ManualClock: time does not go back (advance by {millis})")
        self.now += millis

    def __repr__(self) -> str:
        return f"ManualClock({self.now})"


def expiration_timestamp(timestamp: int, ttl: int) -> int:
    """``timestamp + ttl``, capped at Long.MAX_VALUE (Flink ``TtlUtils.getExpirationTimestamp``)."""
    return timestamp + (min(_LONG_MAX - timestamp, ttl) if timestamp > 0 else ttl)


def expired(value: TtlValue, ttl: int, now: int) -> bool:
    return value is not None and expiration_timestamp(value.timestamp, ttl) <= now


class TtlDecorator:
    """What every TTL state shares (Flink ``AbstractTtlDecorator``): wrapping with the
    current time, the expiry check, and the read that clears an expired value and
    refreshes an unexpired one under ``OnReadAndWrite``."""

    __slots__ = ("original", "config", "clock")

    def __init__(self, original, config: StateTtlConfig, clock: ManualClock) -> None:
        self.original = original
        self.config = config
        self.clock = clock

    def wrap(self, value) -> TtlValue:
        return TtlValue(value, self.clock.current_timestamp())

    def is_expired(self, value: TtlValue) -> bool:
        return expired(value, self.config.ttl, self.clock.current_timestamp())

    def unexpired(self, value: Optional[TtlValue]):
        """The user value, or None if absent or expired (visibility NeverReturnExpired)."""
        return None if value is None or self.is_expired(value) else value.user_value

    def get_with_ttl_check_and_update(self, getter: Callable[[], Optional[TtlValue]],
                                      updater: Callable[[TtlValue], Any], clear: Callable[[], Any]):
        value = getter()
        if value is None:
            return None
        if self.is_expired(value):
            clear()
            return None
        if self.config.update_on_read:
            updater(self.wrap(value.user_value))
        return value.user_value

    def set_current_namespace(self, namespace) -> None:
        self.original.set_current_namespace(namespace)

    def clear(self) -> None:
        self.original.clear()


def snapshot_transformer(kind: str, config: StateTtlConfig, clock: ManualClock) -> Callable[[Any], Any]:
    """The transformer a checkpoint applies to each state of a TTL state's table as it writes it
    (Flink ``TtlStateSnapshotTransformer``, cleanup in full snapshots): None drops the entry.
    Values and reducing accumulators are dropped when expired; lists and maps keep their
    unexpired elements and are dropped when the transformer dropped something and none is
    left (a list or map it drops nothing from is written as it is, empty or not). The time
    is read when the asynchronous part writes, not at the synchronous part."""
    ttl = config.ttl

    def keep(value: TtlValue) -> bool:
        return not expired(value, ttl, clock.current_timestamp())

    if kind == "list":
        def transform_list(elements):
            kept = [e for e in elements if keep(e)]
            if len(kept) == len(elements):
                return elements
            return kept or None
        return transform_list
    if kind == "map":
        def transform_map(entries):
            kept = {k: v for k, v in entries.items() if keep(v)}
            if len(kept) == len(entries):
                return entries  # unchanged, so an empty map is kept as it is (as Flink's transformer does)
            return kept or None
        return transform_map
    return lambda value: value if keep(value) else None
