"""Values of user classes and Flink's ``PojoSerializer`` of them (byte-compatible).

A :class:`Record` is an object of a Java class with public fields: its class
name and its fields by name (``None`` for a null reference; a ``long[]`` is a
list, so it can be changed in place as a Java array can). Flink treats such
a class as a POJO and serializes it with ``PojoSerializer``; a class it does
not treat as one goes through Kryo (:mod:`cowcheck.reference.kryo`).

``PojoSerializer`` bytes (the same in every release 1.13.6-2.3.0, checked
against Flink's own serializer): a flags byte (``1``: the value is null and
nothing follows; ``2``: an object of the class itself, no subclass), then per
field in the order of their names a null flag (``1``: null) and, unless null,
the field through its serializer. The serializer's snapshot
(``PojoSerializerSnapshot``, written by flink_format/pojo_snapshots.py)
records the class name and each field's serializer snapshot; on restore it
decides whether the serializer the job registers now reads the old bytes as
is, after a migration, or not at all (:func:`pojo_compatibility`).

>>> import io
>>> from cowcheck.reference.serializers import IntSerializer, LongArraySerializer, StringSerializer
>>> s = PojoSerializer("cowcheck.types.Account", [("owner", StringSerializer()), ("id", IntSerializer()),
...                                               ("history", LongArraySerializer())])
>>> out = io.BytesIO(); s.serialize(Record("cowcheck.types.Account", {"history": None, "id": 7, "owner": None}), out)
>>> out.getvalue().hex()
'0201000000000701'
>>> s.deserialize(io.BytesIO(out.getvalue()))
Record('cowcheck.types.Account', history=None, id=7, owner=None)
"""

from __future__ import annotations

from typing import BinaryIO, Optional

from cowcheck.reference.serializers import SerializationError, _read_exact, duplicate, register_serializer_family

__all__ = ["Record", "PojoSerializer", "pojo_compatibility", "migrate_record", "AS_IS", "AFTER_MIGRATION",
           "INCOMPATIBLE"]

IS_NULL, NO_SUBCLASS = 1, 2  # PojoSerializer's flags
AS_IS, AFTER_MIGRATION, INCOMPATIBLE = "compatible as is", "compatible after migration", "incompatible"


class Record:
    """An object of a Java class: ``class_name`` and ``fields`` (name -> value, in name order).
    Mutable, as the Java object is: equality compares class and fields."""

    __slots__ = ("class_name", "fields")

    def __init__(self, class_name: str, fields: dict) -> None:
        self.class_name = class_name
        self.fields = dict(sorted(fields.items()))

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and (self.class_name, self.fields) == (other.class_name, other.fields)

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"Record({self.class_name!r}, {fields})"


class PojoSerializer:
    """Flink ``PojoSerializer`` of ``class_name`` with ``fields`` ((name, serializer) pairs, kept in
    name order, as Flink's ``PojoTypeInfo`` orders them). ``defaults``: what the fields of a new
    object of the class hold (its no-arg constructor: 0 for a primitive number, else null unless
    told), which a field the bytes do not have keeps (a migration); a snapshot does not record
    them. ``duplicate()`` is itself unless a field's serializer holds state (Flink's rule)."""

    def __init__(self, class_name: str, fields: list, defaults: Optional[dict] = None) -> None:
        self.defaults = dict(defaults or {})
        if not class_name or any(c in class_name for c in "<>,: "):
            raise ValueError(f"PojoSerializer: bad class name {class_name!r}")
        self.class_name = class_name
        self.fields = sorted(fields, key=lambda f: f[0])
        if len({n for n, _ in self.fields}) != len(self.fields) or any(not n or any(c in n for c in "<>,: ")
                                                                        for n, _ in self.fields):
            raise ValueError(f"PojoSerializer: bad field names {[n for n, _ in self.fields]!r}")

    @property
    def serializer_id(self) -> str:
        names = ":".join(n for n, _ in self.fields)
        return f"pojo:{self.class_name}:{names}<{','.join(s.serializer_id for _, s in self.fields)}>"

    @property
    def field_names(self) -> list[str]:
        return [n for n, _ in self.fields]

    def serialize(self, value: Optional[Record], out: BinaryIO) -> None:
        if value is None:
            out.write(bytes((IS_NULL,)))
            return
        if not isinstance(value, Record) or value.class_name != self.class_name or \
                list(value.fields) != self.field_names:
            raise SerializationError(f"PojoSerializer({self.class_name}): {value!r:.100} is not an object of the "
                                     f"class with fields {self.field_names}")
        out.write(bytes((NO_SUBCLASS,)))
        for name, serializer in self.fields:
            field = value.fields[name]
            if field is None:
                out.write(b"\x01")
            else:
                out.write(b"\x00")
                serializer.serialize(field, out)

    def deserialize(self, inp: BinaryIO) -> Optional[Record]:
        flags = _read_exact(inp, 1)[0]
        if flags == IS_NULL:
            return None
        if flags != NO_SUBCLASS:
            raise SerializationError(f"PojoSerializer({self.class_name}): flags {flags} (subclasses are not supported)")
        fields = {}
        for name, serializer in self.fields:
            null = _read_exact(inp, 1)[0]
            if null > 1:
                raise SerializationError(f"PojoSerializer({self.class_name}): null flag {null} for field {name!r}")
            fields[name] = None if null else serializer.deserialize(inp)
        return Record(self.class_name, fields)

    def copy(self, value: Optional[Record]) -> Optional[Record]:
        if value is None:
            return None
        return Record(value.class_name, {name: None if value.fields[name] is None
                                         else serializer.copy(value.fields[name]) for name, serializer in self.fields})

    def duplicate(self) -> "PojoSerializer":
        fields = [(name, duplicate(serializer)) for name, serializer in self.fields]
        if all(new is old for (_, new), (_, old) in zip(fields, self.fields)):
            return self
        return PojoSerializer(self.class_name, fields, self.defaults)

    def __repr__(self) -> str:
        return f"PojoSerializer({self.serializer_id})"


def _pojo_from_id(parameters: str, *field_serializers) -> PojoSerializer:
    class_name, *names = parameters.split(":")
    if len(names) != len(field_serializers):
        raise ValueError(f"a POJO of {len(names)} fields takes as many serializers, got {len(field_serializers)}")
    return PojoSerializer(class_name, list(zip(names, field_serializers)))


register_serializer_family("pojo", _pojo_from_id)


def pojo_compatibility(old: PojoSerializer, new: PojoSerializer) -> str:
    """What Flink's ``PojoSerializerSnapshot.resolveSchemaCompatibility`` decides for a state written
    with ``old`` and registered with ``new``: another class, or a field of both whose serializer
    changed, is incompatible; fields added or removed need a migration; else compatible as is."""
    if old.class_name != new.class_name:
        return INCOMPATIBLE
    before, after = dict(old.fields), dict(new.fields)
    if any(before[n].serializer_id != after[n].serializer_id for n in before.keys() & after.keys()):
        return INCOMPATIBLE
    return AS_IS if before.keys() == after.keys() else AFTER_MIGRATION


def migrate_record(value: Optional[Record], new: PojoSerializer) -> Optional[Record]:
    """``value`` as the migrated state holds it: the fields of ``new``, those the old bytes had kept,
    a field they had not at the class's default (``new.defaults``), a removed field gone (Flink:
    the restored serializer reads old bytes into an object of the new class)."""
    if value is None:
        return None
    return Record(value.class_name, {name: value.fields[name] if name in value.fields else new.defaults.get(name)
                                     for name in new.field_names})
