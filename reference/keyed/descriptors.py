"""State descriptors: how an operator names and types its keyed states (Flink ``StateDescriptor``).

A descriptor says a state's name, its kind (value, list, map, reducing), the
serializers of what it holds, and its time-to-live (``enable_time_to_live``).
A backend builds one state per descriptor name; the table behind it holds
what :meth:`StateDescriptor.state_serializer` writes: with TTL, every value,
list element or map value wrapped in a :class:`~cowcheck.reference.serializers.TtlValue`.

>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.keyed.ttl import StateTtlConfig
>>> d = ListStateDescriptor("clicks", IntSerializer())
>>> d.state_serializer().serializer_id
'list<int>'
>>> d.enable_time_to_live(StateTtlConfig(ttl=60_000)); d.state_serializer().serializer_id
'list<ttl<int>>'
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from cowcheck.reference.keyed.ttl import StateTtlConfig
from cowcheck.reference.serializers import ListSerializer, MapSerializer, TtlSerializer

__all__ = ["VALUE", "LIST", "MAP", "REDUCING", "KINDS", "StateDescriptor", "ValueStateDescriptor",
           "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor"]

VALUE, LIST, MAP, REDUCING = "value", "list", "map", "reducing"
KINDS = (VALUE, LIST, MAP, REDUCING)


class StateDescriptor:
    """Base of the descriptors: ``name``, ``kind``, ``ttl_config`` (None: no time-to-live)."""

    kind = ""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        self.name = name
        self.ttl_config: Optional[StateTtlConfig] = None

    def enable_time_to_live(self, config: StateTtlConfig) -> None:
        if not isinstance(config, StateTtlConfig):
            raise TypeError(f"enable_time_to_live takes a StateTtlConfig, got {type(config).__name__}")
        self.ttl_config = config

    def _wrap(self, serializer):
        return TtlSerializer(serializer) if self.ttl_config is not None else serializer

    def state_serializer(self):
        """The serializer of what the state's table holds (TTL values wrapped)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        ttl = f", ttl={self.ttl_config.ttl} ms {self.ttl_config.update_type}" if self.ttl_config else ""
        return f"{type(self).__name__}({self.name!r}{ttl})"


class ValueStateDescriptor(StateDescriptor):
    kind = VALUE

    def __init__(self, name: str, serializer: Any) -> None:
        super().__init__(name)
        self.serializer = serializer

    def state_serializer(self):
        return self._wrap(self.serializer)


class ListStateDescriptor(StateDescriptor):
    kind = LIST

    def __init__(self, name: str, element_serializer: Any) -> None:
        super().__init__(name)
        self.element_serializer = element_serializer

    def state_serializer(self):
        return ListSerializer(self._wrap(self.element_serializer))


class MapStateDescriptor(StateDescriptor):
    kind = MAP

    def __init__(self, name: str, user_key_serializer: Any, user_value_serializer: Any) -> None:
        super().__init__(name)
        self.user_key_serializer = user_key_serializer
        self.user_value_serializer = user_value_serializer

    def state_serializer(self):
        return MapSerializer(self.user_key_serializer, self._wrap(self.user_value_serializer))


class ReducingStateDescriptor(StateDescriptor):
    """``reduce_function(accumulator, value) -> accumulator`` combines what ``add`` is given."""

    kind = REDUCING

    def __init__(self, name: str, reduce_function: Callable[[Any, Any], Any], serializer: Any) -> None:
        super().__init__(name)
        self.reduce_function = reduce_function
        self.serializer = serializer

    def state_serializer(self):
        return self._wrap(self.serializer)
