"""What crosses the JPype boundary: keys, namespaces and states, answers, exceptions.

- keys and namespaces (the families of :mod:`cowcheck.core.keys`): ``int``
  in int32 range as ``java.lang.Integer``, other ints as ``Long``, ``str`` as
  ``String`` (lone surrogates included), ``bool`` as ``Boolean``,
  :class:`~cowcheck.reference.keys.Tuple2` as Flink's ``Tuple2``,
  :class:`~cowcheck.reference.keys.TimeWindow` as Flink's ``TimeWindow`` and
  ``VOID_NAMESPACE`` as ``VoidNamespace.INSTANCE`` (``Keys.java``; anything
  else is a TypeError). :func:`java_template` makes one Java object per value
  for the batched encodings' tables (the Java side hands the map a new copy per
  use, ``KeyObjects.java``); :class:`JavaKeys` gives a map what the caller
  gives it: a new Java object for a Python object not seen before, the same
  one for a Python object seen again (a caller holding its keys). Values
  CPython keeps one object of (:func:`~cowcheck.core.keys.pinned`: small
  ints, ``""`` and one Latin-1 character, bools, ``VOID_NAMESPACE``) are one
  Java object per value on every path;
- states: lists of int32 as Java ``int[]`` (the helper keeps the Java lists);
- answers of the helper: JSON (``Json.java``: the key types beyond JSON as the
  tagged objects of counterexample files, ``{"Tuple2": [1, "a"]}``) or
  fixed-layout int arrays (``Encoded.java``, read by :class:`Reader`);
- Java exceptions from Flink as the Python exceptions of docs/contract.md §15
  (``cowcheck.reference.errors``): :func:`translate`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from cowcheck.core.errors import UsageError
from cowcheck.core.keys import pinned
from cowcheck.flink.jvm import Java
from cowcheck.flink.releases import selected_release
from cowcheck.reference.errors import ConcurrentModificationError, IllegalStateError, RehashInProgressError
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2, VoidNamespace

__all__ = ["java_template", "JavaKeys", "java_string", "python_string", "ints", "int_array", "answer",
           "decode_json", "decode_tagged", "Reader", "translate", "exception_for", "FlinkRaised",
           "FlinkKeyTypeError", "KEY_TYPE_CLASSES", "missing_key_types"]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_TEMPLATES: dict = {}

# The Flink classes each key type beyond Java's own needs (Keys.java reaches them by reflection).
KEY_TYPE_CLASSES = {
    Tuple2: ("Tuple2 keys", ("org.apache.flink.api.java.tuple.Tuple2",
                             "org.apache.flink.api.java.typeutils.runtime.TupleSerializer")),
    TimeWindow: ("TimeWindow namespaces", ("org.apache.flink.streaming.api.windowing.windows.TimeWindow",)),
    VoidNamespace: ("VoidNamespace namespaces", ("org.apache.flink.runtime.state.VoidNamespace",
                                                 "org.apache.flink.runtime.state.VoidNamespaceSerializer")),
}
_MISSING: dict = {}  # release -> frozenset of class names its jar lacks (Keys.missing())


class FlinkKeyTypeError(UsageError, TypeError):
    """A key type the Flink release of this process does not have (a usage error: exit 2, one line)."""

    def __init__(self, release: str, what: str, missing: tuple) -> None:
        super().__init__(f"Flink {release} cannot take {what}: its jar has no {', '.join(missing)}")
        self.release, self.what, self.missing = release, what, missing


def missing_key_types() -> dict:
    """``{Python type: (what, missing classes)}`` for the key types this process's release cannot take
    (asks ``Keys.missing()`` once the JVM runs)."""
    release = selected_release()
    absent = _MISSING.get(release)
    if absent is None:
        absent = _MISSING[release] = frozenset(str(name) for name in Java.Keys.missing())
    if not absent:
        return {}
    return {t: (what, tuple(c for c in classes if c in absent))
            for t, (what, classes) in KEY_TYPE_CLASSES.items() if any(c in absent for c in classes)}


def _check_release(t) -> None:
    """FlinkKeyTypeError if this process's release lacks a class key type ``t`` needs."""
    missing = missing_key_types()
    if missing and t in missing:
        raise FlinkKeyTypeError(selected_release(), *missing[t])


def _bad_key(value) -> TypeError:
    return TypeError(f"Flink bridge: keys and namespaces must be int, str, bool, Tuple2, TimeWindow or "
                     f"VOID_NAMESPACE, got {type(value).__name__} {value!r:.60}")


def _new_java(value, field):
    """A new Java object equal to ``value``; ``field(x)`` converts a Tuple2's fields."""
    t = type(value)
    if t is int:
        if _INT_MIN <= value <= _INT_MAX:
            return Java.Integer(value)  # the constructor: never Integer.valueOf's cached objects
        if _LONG_MIN <= value <= _LONG_MAX:
            return Java.Long(value)
        raise TypeError(f"Flink bridge: key or namespace {value} does not fit a Java long")
    if t is str:
        return java_string(value)
    if t is bool:
        return Java.Boolean(value)
    if t is Tuple2:
        _check_release(Tuple2)
        return Java.Keys.tuple2(field(value.f0), field(value.f1))
    if t is TimeWindow:
        _check_release(TimeWindow)
        if not all(type(x) is int and _LONG_MIN <= x <= _LONG_MAX for x in (value.start, value.end)):
            raise TypeError(f"Flink bridge: TimeWindow start and end must be Java longs, got {value!r:.60}")
        return Java.Keys.window(value.start, value.end)
    if value is VOID_NAMESPACE:
        _check_release(VoidNamespace)
        return Java.Keys.voidNamespace()
    if value is None:
        return None  # Flink decides (NullPointerException -> TypeError)
    raise _bad_key(value)


def java_template(value):
    """One Java object per key or namespace value, for the tables of the batched encodings (cached:
    keys repeat). The Java side never hands a map the template itself: a new copy per use, or one
    object per value after hold_keys (``KeyObjects.java``)."""
    t = type(value)
    if t in KEY_TYPE_CLASSES:
        _check_release(t)
    cache_key = (t, value)
    try:
        return _TEMPLATES[cache_key]
    except KeyError:
        pass
    except TypeError:
        raise _bad_key(value) from None
    java = _new_java(value, java_template)
    if len(_TEMPLATES) > 100_000:
        _TEMPLATES.clear()
    _TEMPLATES[cache_key] = java
    return java


class JavaKeys:
    """The Java objects one map is handed for the caller's keys and namespaces, as a Java caller
    would hand them: a Python object seen for the first time becomes a new Java object (Flink's
    keys are fresh, deserialized objects), a Python object seen again the same Java object (a
    caller holding its keys, after the harness's ``hold_keys``); a value CPython keeps one object of
    (:func:`~cowcheck.core.keys.pinned`) one Java object per value. A Tuple2's fields convert the
    same way. Python objects only this table still refers to are forgotten from time to time
    (nobody can hand them again), so a long walk of fresh keys does not keep them all."""

    __slots__ = ("_objects", "_pinned", "_prune_at")

    def __init__(self) -> None:
        self._objects: dict = {}  # id(obj) -> [obj, java]: obj kept alive, so its id names only it
        self._pinned: dict = {}  # (type, value) -> java
        self._prune_at = 4096

    def __call__(self, value):
        hit = self._objects.get(id(value))
        if hit is not None:
            return hit[1]
        if pinned(value):
            cache_key = (type(value), value)
            java = self._pinned.get(cache_key)
            if java is None:
                java = self._pinned[cache_key] = _new_java(value, self)
            return java
        java = _new_java(value, self)
        objects = self._objects
        objects[id(value)] = [value, java]
        if len(objects) >= self._prune_at:
            self._prune()
        return java

    def _prune(self) -> None:
        objects = self._objects
        getrefcount = sys.getrefcount
        for key, entry in list(objects.items()):
            if getrefcount(entry[0]) <= 2:  # the entry's list and getrefcount's argument: only this table
                del objects[key]
        self._prune_at = max(4096, 2 * len(objects))

    def __len__(self) -> int:
        return len(self._objects) + len(self._pinned)


def java_string(value: str):
    """A java.lang.String with the same UTF-16 code units (lone surrogates included,
    which JPype's UTF-8 conversion rejects)."""
    try:
        return Java.JString(value)
    except UnicodeEncodeError:
        units = value.encode("utf-16-be", "surrogatepass")
        chars = [(units[i] << 8) | units[i + 1] for i in range(0, len(units), 2)]
        return Java.JString(Java.jpype.JArray(Java.jpype.JChar)([chr(c) for c in chars]))


def python_string(java_string) -> str:
    try:
        return str(java_string)
    except UnicodeDecodeError:  # lone surrogates: go through the UTF-16 code units
        return b"".join(ord(c).to_bytes(2, "big") for c in java_string.toCharArray()).decode("utf-16-be",
                                                                                           "surrogatepass")


def ints(java_int_array) -> list:
    if len(java_int_array) == 0:
        return []
    return memoryview(java_int_array).cast("B").cast("i").tolist()


def int_array(state) -> Any:
    if not isinstance(state, list):
        raise TypeError(f"Flink bridge: states must be lists of int32 (or None), got {type(state).__name__} "
                        f"{state!r:.60}")
    try:
        if any(type(x) is not int for x in state):
            raise TypeError
        return Java.int_array(state)
    except (TypeError, OverflowError):
        raise TypeError(f"Flink bridge: states must be lists of int32 (or None), got {state!r:.60}") from None


def decode_tagged(obj: dict):
    """A JSON object of the helper's answers as Python: the tagged key types (``{"Tuple2": [f0, f1]}``,
    ``{"TimeWindow": [start, end]}``, ``{"VoidNamespace": []}``)."""
    if len(obj) == 1:
        (tag, fields), = obj.items()
        if tag == "Tuple2":
            return Tuple2(*fields)
        if tag == "TimeWindow":
            return TimeWindow(*fields)
        if tag == "VoidNamespace":
            return VOID_NAMESPACE
    raise ValueError(f"not a tagged key of the helper's answers: {obj!r:.80}")


def decode_json(text: str, object_hook=decode_tagged):
    """JSON from the helper (``Json.java``) as Python data, the key types decoded by ``object_hook``."""
    return json.loads(text, object_hook=object_hook)


def answer(text):
    """A JSON answer of the helper (Json.java) as Python data, tagged keys decoded."""
    return json.loads(str(text), object_hook=decode_tagged)


class Reader:
    """Reads a fixed-layout white-box answer (``Encoded``: ints, and the keys and
    namespaces of new entries as JSON, in record order)."""

    __slots__ = ("data", "pos", "keys")

    def __init__(self, encoded) -> None:
        self.data = ints(encoded.data)
        self.pos = 0
        self.keys = iter(json.loads(str(encoded.keys), object_hook=decode_tagged))

    def raw(self) -> int:
        v = self.data[self.pos]
        self.pos += 1
        return v

    def key(self):
        return next(self.keys)


class FlinkRaised(Exception):
    """A Java exception from Flink with no counterpart in ``cowcheck.reference.errors``, recorded by a batched walk:
    its Java class name and message."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name


def exception_for(name: str, message: str) -> Exception:
    """The Python exception for a Java exception named ``name`` (``Errors.pythonName``)
    with ``message``: the ``cowcheck.reference.errors`` exception where there is one (as :func:`translate`)."""
    if name == "ConcurrentModificationError":
        return ConcurrentModificationError(-1, -1)
    if name == "java.lang.IllegalStateException":
        if "rehash in progress" in message:
            return RehashInProgressError()
        return IllegalStateError(message)
    if name == "java.lang.NullPointerException":
        return TypeError(f"Flink: NullPointerException ({message or 'null key, namespace or state'})")
    if name == "java.lang.IllegalArgumentException":
        return ValueError(message)
    return FlinkRaised(name, message)


def translate(exc):
    """The Python exception for a Java exception from Flink (``cowcheck.reference.errors``)."""
    message = str(exc.getMessage()) if exc.getMessage() is not None else ""
    if isinstance(exc, Java.CME):
        return exception_for("ConcurrentModificationError", message)
    for java, name in ((Java.IllegalState, "java.lang.IllegalStateException"),
                       (Java.NullPointer, "java.lang.NullPointerException"),
                       (Java.IllegalArgument, "java.lang.IllegalArgumentException")):
        if isinstance(exc, java):
            return exception_for(name, message)
    return exc
