"""The oracle for keyed states (docs/contract.md §20): plain dicts, a clock, frozen copies.

Per (state, key, namespace) the model keeps what the state holds with the
millisecond of each part's last write (or read, under ``OnReadAndWrite``):
a value or a reducing accumulator is ``[value, ms]``, a list ``[[element,
ms], ...]``, a map ``{user_key: [user_value, ms]}``. A state with
time-to-live ``ttl`` shows only what has not expired (``ms + ttl > now``);
one without never expires. Reads apply Flink's rules: an expired value is
gone, an unexpired one read under ``OnReadAndWrite`` is rewritten with the
current time (a list's unexpired elements all at once).

Key iteration is held to two bounds: it must list every key whose state
shows something now, and may list only keys that something may still keep
in the table: the model's ``touched`` (per entry, the last time an
operation may have left an entry there; a removal that Flink documents as
removing the entry — ``clear``, ``update(None)``, ``update([])``, removing
a map's last key — forgets it). For a state without TTL the two bounds meet.

A checkpoint freezes a deep copy of all this at its synchronous part
(:meth:`KeyedModel.freeze`); a restore of it must show, at any later time,
exactly what the frozen copy shows then, and its key iteration may not list
a key whose entry had expired when the checkpoint was taken (cleanup in full
snapshots drops it; Flink's transformer keeps an empty map, :meth:`Frozen.kept`).

>>> m = KeyedModel([StateSpec("v", "value", ttl=10)], now=1000)
>>> m.update("v", 1, 0, 7); frozen = m.freeze(); m.advance(10)
>>> m.value("v", 1, 0), frozen.visible("v", 1, 0, 1005)
(None, 7)
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Optional

import attrs

__all__ = ["StateSpec", "KeyedModel", "Frozen"]


@attrs.frozen
class StateSpec:
    """A state the model keeps: its name, kind (value, list, map, reducing), time-to-live in
    milliseconds (None: none), whether reads refresh it, a reducing state's function, and the
    type of its values (``int``, ``pojo``, ``kryo``: the model only keeps them)."""

    name: str
    kind: str
    ttl: Optional[int] = None
    update_on_read: bool = False
    reduce: Optional[Callable] = None
    value_type: str = "int"

    def expired(self, ms: int, now: int) -> bool:
        return self.ttl is not None and ms + self.ttl <= now


def _visible(spec: StateSpec, content, now: int):
    """What ``content`` shows at ``now`` (None when nothing), without changing it."""
    if content is None:
        return None
    if spec.kind in ("value", "reducing"):
        return None if spec.expired(content[1], now) else content[0]
    if spec.kind == "list":
        shown = [e for e, ms in content if not spec.expired(ms, now)]
        return shown or None
    shown = {k: v for k, (v, ms) in content.items() if not spec.expired(ms, now)}
    return shown or None


@attrs.frozen
class Frozen:
    """The model at a checkpoint's synchronous part: contents, touched entries, the time."""

    specs: dict
    data: dict
    touched: dict
    time: int

    def visible(self, name: str, key, namespace, now: int):
        return _visible(self.specs[name], self.data.get((name, key, namespace)), now)

    def entries(self, name: str, namespace, now: int, owned: Callable[[object], bool]) -> dict:
        """key -> what a restore into the key groups ``owned`` accepts shows at ``now``."""
        out = {}
        for (state, key, ns), content in self.data.items():
            if state == name and ns == namespace and owned(key):
                shown = _visible(self.specs[name], content, now)
                if shown is not None:
                    out[key] = shown
        return out

    def may_keys(self, name: str, namespace, owned: Callable[[object], bool]) -> set:
        """Keys a restore may list: those whose entry the checkpoint kept (:meth:`kept`)."""
        return {key for (state, key, ns) in self.touched
                if state == name and ns == namespace and owned(key) and self.kept((state, key, ns))}

    def upgraded(self, specs: Iterable[StateSpec], convert: Callable[[str, Any], Any], now: int) -> "KeyedModel":
        """The model of a restore of this checkpoint into the states ``specs`` (the same names; a
        state's time-to-live may be switched on or off) taken at ``now``, each user value passed
        through ``convert(name, value)`` (a class upgrade). What the checkpoint left out (expired
        when it was taken) is gone; a state that gains time-to-live has every part last accessed
        ``now``; one that loses it keeps what it held."""
        model = KeyedModel(specs, now)
        for at, content in self.data.items():
            name = at[0]
            old, new = self.specs[name], model.specs[name]
            if at not in self.touched or not self.kept(at):  # left out by the checkpoint (or by the one recovered)
                continue
            gains = old.ttl is None and new.ttl is not None

            def part(value, ms):
                return [convert(name, value), now if gains else ms]

            if old.kind in ("value", "reducing"):
                content = part(*content)
            elif old.kind == "list":
                content = [part(e, ms) for e, ms in content if not old.expired(ms, self.time)]
            else:
                content = {k: part(v, ms) for k, (v, ms) in content.items() if not old.expired(ms, self.time)}
            model.data[at] = content
            model.touched[at] = now if gains else self.touched[at]
        return model

    def kept(self, at: tuple) -> bool:
        """Whether the checkpoint may have written the entry ``at``: one not expired when it was
        taken; or an empty map, which a map iteration leaves when it removes the last (expired)
        user key and which Flink's snapshot transformer keeps as it is (nothing in it to drop)."""
        return not self.specs[at[0]].expired(self.touched[at], self.time) or self.data.get(at) == {}


class KeyedModel:
    """See the module docstring. ``specs``: the states; ``now``: the clock's start."""

    def __init__(self, specs: Iterable[StateSpec], now: int = 0) -> None:
        self.specs = {s.name: s for s in specs}
        self.data: dict = {}
        self.touched: dict = {}
        self.now = now

    def advance(self, millis: int) -> None:
        self.now += millis

    # ------------------------------------------------------------ helpers

    def _live(self, name, key, namespace):
        """A value's or an accumulator's content, gone once it has expired (a read clears it)."""
        spec = self.specs[name]
        at = (name, key, namespace)
        content = self.data.get(at)
        if content is not None and spec.expired(content[1], self.now):
            del self.data[at]
            return None
        return content

    def _write(self, name, key, namespace, content) -> None:
        self.data[(name, key, namespace)] = content
        self.touched[(name, key, namespace)] = self.now

    def _remove(self, name, key, namespace) -> None:
        self.data.pop((name, key, namespace), None)
        self.touched.pop((name, key, namespace), None)

    def _refreshed(self, name, key, namespace) -> bool:
        """Whether a read of this state rewrites what it finds (OnReadAndWrite)."""
        spec = self.specs[name]
        if spec.ttl is not None and spec.update_on_read:
            self.touched[(name, key, namespace)] = self.now
            return True
        return False

    # ------------------------------------------------------------ value and reducing

    def value(self, name, key, namespace):
        content = self._live(name, key, namespace)
        if content is None:
            return None
        if self._refreshed(name, key, namespace):
            content[1] = self.now
        return content[0]

    def update(self, name, key, namespace, value) -> None:
        if value is None:
            self._remove(name, key, namespace)
        else:
            self._write(name, key, namespace, [value, self.now])

    def reduce_get(self, name, key, namespace):
        return self.value(name, key, namespace)

    def reduce_add(self, name, key, namespace, value) -> None:
        content = self._live(name, key, namespace)
        new = value if content is None else self.specs[name].reduce(content[0], value)
        self._write(name, key, namespace, [new, self.now])

    # ------------------------------------------------------------ list

    def list_get(self, name, key, namespace) -> Optional[list]:
        spec = self.specs[name]
        content = self.data.get((name, key, namespace))
        if content is None:
            return None
        unexpired = [[e, ms] for e, ms in content if not spec.expired(ms, self.now)]
        if not unexpired:
            del self.data[(name, key, namespace)]
            return None
        if self._refreshed(name, key, namespace):
            content[:] = [[e, self.now] for e, _ in unexpired]
        return [e for e, _ in unexpired]

    def list_add(self, name, key, namespace, value) -> None:
        content = self.data.get((name, key, namespace)) or []
        self._write(name, key, namespace, content + [[value, self.now]])

    def list_update(self, name, key, namespace, values: list) -> None:
        if not values:
            self._remove(name, key, namespace)
        else:
            self._write(name, key, namespace, [[v, self.now] for v in values])

    # ------------------------------------------------------------ map

    # A map's content is what Flink's table holds, expired user keys included until a read meets
    # them: removing the last user key removes the entry, an iteration that removes the last
    # (expired) one leaves an empty map there.

    def _map_part(self, name, key, namespace, user_key) -> Optional[list]:
        """A user key's ``[user value, ms]`` as a read finds it (None: absent or expired)."""
        spec = self.specs[name]
        content = self.data.get((name, key, namespace))
        part = None if content is None else content.get(user_key)
        if part is None:
            return None
        if spec.expired(part[1], self.now):
            self.map_remove(name, key, namespace, user_key)
            return None
        if self._refreshed(name, key, namespace):
            part[1] = self.now
        return part

    def map_get(self, name, key, namespace, user_key):
        part = self._map_part(name, key, namespace, user_key)
        return None if part is None else part[0]

    def map_contains(self, name, key, namespace, user_key) -> bool:
        """Whether the user key is there (its value may be null: ``put(k, null)`` holds a null)."""
        return self._map_part(name, key, namespace, user_key) is not None

    def map_put(self, name, key, namespace, user_key, user_value) -> None:
        content = self.data.get((name, key, namespace)) or {}
        content[user_key] = [user_value, self.now]
        self._write(name, key, namespace, content)

    def map_remove(self, name, key, namespace, user_key) -> None:
        content = self.data.get((name, key, namespace))
        if content is None:
            return
        content.pop(user_key, None)
        if content:
            self.touched[(name, key, namespace)] = self.now
        else:
            self._remove(name, key, namespace)

    def map_entries(self, name, key, namespace) -> Optional[dict]:
        spec = self.specs[name]
        content = self.data.get((name, key, namespace))
        if content is None:
            return None
        for user_key in [k for k, (_, ms) in content.items() if spec.expired(ms, self.now)]:
            del content[user_key]
        if content and self._refreshed(name, key, namespace):
            for part in content.values():
                part[1] = self.now
        return {k: v for k, (v, _) in content.items()} or None

    # ------------------------------------------------------------ every kind

    def clear(self, name, key, namespace) -> None:
        self._remove(name, key, namespace)

    def key_bounds(self, name, namespace) -> tuple[set, set]:
        """(keys key iteration must list, keys it may list) for ``name`` in ``namespace`` now."""
        spec = self.specs[name]
        must = {key for (state, key, ns), content in self.data.items()
                if state == name and ns == namespace and _visible(spec, content, self.now) is not None}
        may = {key for (state, key, ns) in self.touched if state == name and ns == namespace}
        return must, may

    # ------------------------------------------------------------ checkpoints

    def freeze(self) -> Frozen:
        return Frozen(self.specs, copy.deepcopy(self.data), dict(self.touched), self.now)

    def recover(self, frozen: Frozen) -> None:
        """Go on from a restore of ``frozen``: its contents, minus what its checkpoint left out."""
        self.data = copy.deepcopy(frozen.data)
        self.touched = {at: ms for at, ms in frozen.touched.items() if frozen.kept(at)}
