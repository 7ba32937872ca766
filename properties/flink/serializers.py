"""Flink's own serializers from Python: the bytes Flink writes for a value, and what it reads back.

Each serializer of ``cowcheck.reference.serializers`` (int, long, string, bytes, list,
map, and the key types' ``tuple2<int,string>`` (Flink's ``TupleSerializer`` of
``Tuple2``), ``timewindow`` (``TimeWindow.Serializer``) and ``void``
(``VoidNamespaceSerializer``)) has a Flink counterpart of the same
``serializer_id`` in the helper (``Serializers.java``); tests compare the
reference's bytes with Flink's.
"""

from __future__ import annotations

from cowcheck.flink.convert import answer, java_string, java_template, python_string, translate
from cowcheck.flink.jvm import Java, jvm
from cowcheck.reference import serializers as ref

__all__ = ["flink_serialize", "flink_deserialize"]

_KEY_CLASSES = frozenset(("org.apache.flink.api.java.tuple.Tuple2",
                          "org.apache.flink.streaming.api.windowing.windows.TimeWindow",
                          "org.apache.flink.runtime.state.VoidNamespace"))


def _to_java(serializer, value):
    """``value`` as the Java object Flink's serializer of the same id takes."""
    jpype = Java.jpype
    if value is None:
        return None
    if isinstance(serializer, ref.LongSerializer):  # before IntSerializer, its base class
        return Java.Long.valueOf(value)
    if isinstance(serializer, ref.IntSerializer):
        return Java.Integer.valueOf(value)
    if isinstance(serializer, ref.StringSerializer):
        return java_string(value)
    if isinstance(serializer, ref.BytesSerializer):
        return jpype.JArray(jpype.JByte)(bytes(value))
    if isinstance(serializer, ref.ListSerializer):
        out = jpype.JClass("java.util.ArrayList")()
        for x in value:
            out.add(_to_java(serializer.element_serializer, x))
        return out
    if isinstance(serializer, ref.MapSerializer):
        out = jpype.JClass("java.util.LinkedHashMap")()  # keeps the dict's order, as the reference writes it
        for k, v in value.items():
            out.put(_to_java(serializer.key_serializer, k), _to_java(serializer.value_serializer, v))
        return out
    if isinstance(serializer, ref.Tuple2Serializer):
        return Java.Keys.tuple2(_to_java(serializer.f0_serializer, value.f0),
                                _to_java(serializer.f1_serializer, value.f1))
    if isinstance(serializer, (ref.TimeWindowSerializer, ref.VoidNamespaceSerializer)):
        return java_template(value)
    raise TypeError(f"no Flink serializer for {type(serializer).__name__}")


def _from_java(value):
    jpype = Java.jpype
    if value is None:
        return None
    if isinstance(value, (Java.Integer, Java.Long)):
        return int(value)
    if isinstance(value, jpype.JClass("java.lang.String")):
        return python_string(value)
    if isinstance(value, jpype.JArray(jpype.JByte)):
        return bytes(value)
    if isinstance(value, jpype.JClass("java.util.List")):
        return [_from_java(x) for x in value]
    if isinstance(value, jpype.JClass("java.util.Map")):
        return {_from_java(e.getKey()): _from_java(e.getValue()) for e in value.entrySet()}
    name = str(value.getClass().getName())
    if name in _KEY_CLASSES:  # Tuple2, TimeWindow, VoidNamespace: as the bridge's answers carry them
        return answer(Java.Keys.json(value))[0]
    raise TypeError(f"no Python value for {value.getClass().getName()}")


def flink_serialize(serializer, value) -> bytes:
    """The bytes Flink 2.3.0's serializer with the id of ``serializer`` (a
    ``cowcheck.reference.serializers`` object) writes for ``value``."""
    jvm()
    try:
        return bytes(Java.Serializers.serialize(serializer.serializer_id, _to_java(serializer, value)))
    except Java.JException as exc:
        raise translate(exc) from None


def flink_deserialize(serializer, data: bytes):
    """What Flink 2.3.0's serializer with the id of ``serializer`` reads from ``data``
    (all of it), as Python values."""
    jvm()
    jpype = Java.jpype
    try:
        return _from_java(Java.Serializers.deserialize(serializer.serializer_id, jpype.JArray(jpype.JByte)(data)))
    except Java.JException as exc:
        raise translate(exc) from None
