"""Serializer upgrades on restore: what a restored state becomes when its descriptor's serializer changed.

When a job registers a restored state again, Flink's heap backend holds the
serializer the checkpoint was written with (the restored one, which has read
every value already) against the one the descriptor gives
(``RegisteredKeyValueStateBackendMetaInfo.updateStateSerializer``):

- **compatible as is**: the same serializer (a POJO of the same class and
  fields), nothing to do;
- **compatible after migration**: a POJO with fields added or removed (the
  values were read into objects of the new class: an added field holds the
  class's default, a removed one is gone), or time-to-live switched on or off
  (from 2.2: values wrapped with the time of the migration as their last
  access, or unwrapped; ``HeapKeyedStateBackend.migrateTtlAwareStateValues``);
- **incompatible**: another class, a field whose serializer changed, any
  other change: ``StateMigrationException``, and nothing is read
  (before 2.2 switching TTL is incompatible too).

:func:`compatibility` decides, structurally (lists, maps and TTL values of
these); :func:`migrate` converts one value.

>>> from cowcheck.reference.serializers import IntSerializer, ListSerializer, TtlSerializer, TtlValue
>>> compatibility(ListSerializer(IntSerializer()), ListSerializer(TtlSerializer(IntSerializer())))
'compatible after migration'
>>> migrate([1, 2], ListSerializer(IntSerializer()), ListSerializer(TtlSerializer(IntSerializer())), 50)
[TtlValue(1, 50), TtlValue(2, 50)]
"""

from __future__ import annotations

from cowcheck.reference.pojo import AFTER_MIGRATION, AS_IS, INCOMPATIBLE, PojoSerializer, migrate_record, pojo_compatibility
from cowcheck.reference.serializers import ListSerializer, MapSerializer, TtlSerializer, TtlValue

__all__ = ["compatibility", "migrate", "AS_IS", "AFTER_MIGRATION", "INCOMPATIBLE"]

_ORDER = (AS_IS, AFTER_MIGRATION, INCOMPATIBLE)


def _worst(*outcomes: str) -> str:
    return max(outcomes, key=_ORDER.index)


def compatibility(old, new) -> str:
    """The outcome of registering ``new`` for a state written with ``old`` (module docstring)."""
    if old.serializer_id == new.serializer_id:
        return AS_IS
    if isinstance(old, TtlSerializer) != isinstance(new, TtlSerializer):
        inner = compatibility(old.user_value_serializer if isinstance(old, TtlSerializer) else old,
                              new.user_value_serializer if isinstance(new, TtlSerializer) else new)
        return _worst(AFTER_MIGRATION, inner)
    if type(old) is not type(new):
        return INCOMPATIBLE
    if isinstance(old, TtlSerializer):
        return compatibility(old.user_value_serializer, new.user_value_serializer)
    if isinstance(old, ListSerializer):
        return compatibility(old.element_serializer, new.element_serializer)
    if isinstance(old, MapSerializer):
        keys = compatibility(old.key_serializer, new.key_serializer)
        return INCOMPATIBLE if keys != AS_IS else compatibility(old.value_serializer, new.value_serializer)
    if isinstance(old, PojoSerializer):
        return pojo_compatibility(old, new)
    return INCOMPATIBLE


def migrate(value, old, new, now: int):
    """``value`` (read with ``old``) as ``new`` holds it; ``now``: the clock, the last access of a
    value time-to-live was switched on for."""
    if value is None or old.serializer_id == new.serializer_id:
        return value
    if isinstance(new, TtlSerializer) and not isinstance(old, TtlSerializer):
        return TtlValue(migrate(value, old, new.user_value_serializer, now), now)
    if isinstance(old, TtlSerializer) and not isinstance(new, TtlSerializer):
        return migrate(value.user_value, old.user_value_serializer, new, now)
    if isinstance(old, TtlSerializer):
        return TtlValue(migrate(value.user_value, old.user_value_serializer, new.user_value_serializer, now),
                        value.timestamp)
    if isinstance(old, ListSerializer):
        return [migrate(e, old.element_serializer, new.element_serializer, now) for e in value]
    if isinstance(old, MapSerializer):
        return {k: migrate(v, old.value_serializer, new.value_serializer, now) for k, v in value.items()}
    if isinstance(old, PojoSerializer):
        return migrate_record(value, new)
    return value
