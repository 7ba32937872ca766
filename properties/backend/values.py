"""The value types of the backend machine's states, declared once: ints, a POJO and a Kryo type.

The machine draws every value as an int (the ``value`` domain); a state of
another type holds the object that int stands for (:func:`typed`), so every
state-level step (``update``, ``add``, ``put``, reads) works on every type.

- ``int``: the int itself (``IntSerializer``, not nullable);
- ``pojo``: a ``cowcheck.types.Account``, a POJO with public fields
  (Flink's ``PojoSerializer``), in one of the class versions of
  :data:`ACCOUNT_VERSIONS`: the classes a job runs with, before and after an
  upgrade. ``history`` (a ``long[]``) is the mutable field (``pojo_mutate``
  changes it in place); ``owner`` (a ``String``) may be null, ``history`` too;
- ``kryo``: a ``cowcheck.types.Blob`` (``byte[] data``, ``int n``, ``byte[]
  tag``), serialized by Kryo (Flink's ``GenericTypeInfo``): arrays null,
  empty or not; ``tag`` is the last field Kryo writes, empty for every even int.

The versions of ``Account`` (field name -> Java type): a job upgraded from one
to another finds its state compatible as is (the same fields), after
migration (fields added or removed: an added field holds its default, a
removed one is gone) or incompatible (a field whose type changed: Flink
refuses the restore): :func:`upgrade_outcome`.

The Flink bridge compiles each version into a directory of its own and loads
it with a class loader of its own (cowcheck.flink.pojos); the reference
builds a PojoSerializer and a KryoSerializer from the same table.

>>> typed("pojo", 1, 7)
Record('cowcheck.types.Account', history=[7], id=7, owner='o7')
>>> typed("kryo", 1, 6).fields["tag"]
b''
>>> upgrade_outcome(1, 2), upgrade_outcome(1, 3), upgrade_outcome(2, 4)
('compatible after migration', 'compatible after migration', 'incompatible')
"""

from __future__ import annotations

from typing import Optional

from cowcheck.reference.kryo import register_kryo_class
from cowcheck.reference.pojo import AFTER_MIGRATION, AS_IS, INCOMPATIBLE, PojoSerializer, Record, migrate_record
from cowcheck.reference.serializers import IntSerializer, LongArraySerializer, StringSerializer

__all__ = ["TYPES", "ACCOUNT", "BLOB", "ACCOUNT_VERSIONS", "BLOB_FIELDS", "SCHEMAS", "typed", "serializer_of",
           "upgrade_outcome", "migrate_value", "JAVA_TYPES", "tail_blob"]

TYPES = ("int", "pojo", "kryo")
ACCOUNT = "cowcheck.types.Account"
BLOB = "cowcheck.types.Blob"
# Java type -> (the reference's serializer, the value a new object's field holds).
JAVA_TYPES = {"int": (IntSerializer, 0), "String": (StringSerializer, None), "long[]": (LongArraySerializer, None)}
ACCOUNT_VERSIONS = {
    1: {"history": "long[]", "id": "int", "owner": "String"},
    2: {"history": "long[]", "id": "int", "level": "int", "owner": "String"},  # a field added
    3: {"history": "long[]", "id": "int"},  # a field removed
    4: {"history": "long[]", "id": "int", "owner": "int"},  # a field whose type changed
}
SCHEMAS = tuple(ACCOUNT_VERSIONS)
BLOB_FIELDS = {"data": "byte[]", "n": "int", "tag": "byte[]"}
_KRYO = register_kryo_class(BLOB, [(name, "bytes" if java == "byte[]" else "int")
                                   for name, java in BLOB_FIELDS.items()])


def serializer_of(value_type: str, schema: int = 1):
    """The serializer a job registers for ``value_type`` with ``Account`` in class version ``schema``."""
    if value_type == "int":
        return IntSerializer()
    if value_type == "kryo":
        return _KRYO.duplicate()
    fields = ACCOUNT_VERSIONS[schema]
    return PojoSerializer(ACCOUNT, [(name, JAVA_TYPES[java][0]()) for name, java in fields.items()],
                          {name: JAVA_TYPES[java][1] for name, java in fields.items()})


def typed(value_type: str, schema: int, value: int):
    """The object ``value`` (a drawn int) stands for in a state of ``value_type``."""
    if value_type == "int":
        return value
    if value_type == "kryo":
        return Record(BLOB, {"data": None if value % 4 == 0 else bytes(range(value % 3)), "n": value,
                             "tag": b"" if value % 2 == 0 else bytes((value & 0xFF,))})
    fields = {"history": None if value % 5 == 4 else [value, -value][:value % 3 or 1], "id": value,
              "level": value % 7, "owner": None if value % 3 == 0 else f"o{value}"}
    if ACCOUNT_VERSIONS[schema].get("owner") == "int":
        fields["owner"] = value
    return Record(ACCOUNT, {name: fields[name] for name in ACCOUNT_VERSIONS[schema]})


def tail_blob(value: int) -> Record:
    """A Blob whose last field Kryo writes is an empty array (its bytes end with a zero-length read)."""
    blob = typed("kryo", 1, value)
    blob.fields["tag"] = b""
    return blob


def upgrade_outcome(before: int, after: int) -> str:
    """What restoring ``Account`` state written with class version ``before`` into a job with class
    version ``after`` must be (Flink's ``PojoSerializerSnapshot``: :func:`~cowcheck.reference.pojo.pojo_compatibility`)."""
    old, new = ACCOUNT_VERSIONS[before], ACCOUNT_VERSIONS[after]
    if any(old[name] != new[name] for name in old.keys() & new.keys()):
        return INCOMPATIBLE
    return AS_IS if old.keys() == new.keys() else AFTER_MIGRATION


def migrate_value(value_type: str, schema: int, value) -> Optional[object]:
    """A value of a state of ``value_type`` as it reads after an upgrade to class version ``schema``."""
    if value_type != "pojo" or value is None:
        return value
    return migrate_record(value, serializer_of("pojo", schema))
