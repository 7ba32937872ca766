"""What crosses the JPype boundary: keys, namespaces and states, answers, exceptions.

- keys and namespaces: ``int`` in int32 range as ``java.lang.Integer``, other
  ints as ``Long``, ``str`` as ``String`` (lone surrogates included), ``bool``
  as ``Boolean`` (the types whose ``hashCode`` docs/contract.md §2 reproduces; anything
  else is a TypeError);
- states: lists of int32 as Java ``int[]`` (the helper keeps the Java lists);
- answers of the helper: JSON (``Json.java``) or fixed-layout int arrays
  (``Encoded.java``, read by :class:`Reader`);
- Java exceptions from Flink as the Python exceptions of the reference
  (``reference.errors``): :func:`translate`.
"""

from __future__ import annotations

import json
from typing import Any

from properties.flink.jvm import Java
from properties.map.parity import Raised
from reference.errors import ConcurrentModificationError, IllegalStateError, RehashInProgressError

__all__ = ["java_value", "java_string", "python_string", "ints", "int_array", "answer", "Reader", "translate",
           "exception_for", "FlinkRaised"]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_VALUES: dict = {}


def java_value(value):
    """The Java object for a key or namespace (cached: keys repeat)."""
    cache_key = (type(value), value)
    try:
        return _JAVA_VALUES[cache_key]
    except KeyError:
        pass
    except TypeError:
        raise TypeError(f"Flink bridge: keys and namespaces must be int, str or bool, got "
                        f"{type(value).__name__} {value!r}") from None
    t = type(value)
    if t is int:
        if _INT_MIN <= value <= _INT_MAX:
            java = Java.Integer.valueOf(value)
        elif _LONG_MIN <= value <= _LONG_MAX:
            java = Java.Long.valueOf(value)
        else:
            raise TypeError(f"Flink bridge: key or namespace {value} does not fit a Java long")
    elif t is str:
        java = java_string(value)
    elif t is bool:
        java = Java.Boolean.valueOf(value)
    elif value is None:
        java = None  # Flink decides (NullPointerException -> TypeError)
    else:
        raise TypeError(f"Flink bridge: keys and namespaces must be int, str or bool, got "
                        f"{type(value).__name__} {value!r}")
    if len(_JAVA_VALUES) > 100_000:
        _JAVA_VALUES.clear()
    _JAVA_VALUES[cache_key] = java
    return java


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


def answer(text):
    """A JSON answer of the helper (Json.java) as Python data; ``{"raised": name}`` -> Raised."""
    return json.loads(str(text), object_hook=_raised)


def _raised(obj: dict):
    return Raised(obj["raised"])


class Reader:
    """Reads a fixed-layout white-box answer (``Encoded``: ints, and the keys and
    namespaces of new entries as JSON, in record order)."""

    __slots__ = ("data", "pos", "keys")

    def __init__(self, encoded) -> None:
        self.data = ints(encoded.data)
        self.pos = 0
        self.keys = iter(json.loads(str(encoded.keys)))

    def raw(self) -> int:
        v = self.data[self.pos]
        self.pos += 1
        return v

    def key(self):
        return next(self.keys)


class FlinkRaised(Exception):
    """A Java exception from Flink with no counterpart in ``reference.errors``, recorded by a batched walk:
    its Java class name and message."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name


def exception_for(name: str, message: str) -> Exception:
    """The Python exception for a Java exception named ``name`` (``Errors.pythonName``)
    with ``message``: the ``reference.errors`` exception where there is one (as :func:`translate`)."""
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
    """The Python exception for a Java exception from Flink (``reference.errors``)."""
    message = str(exc.getMessage()) if exc.getMessage() is not None else ""
    if isinstance(exc, Java.CME):
        return exception_for("ConcurrentModificationError", message)
    for java, name in ((Java.IllegalState, "java.lang.IllegalStateException"),
                       (Java.NullPointer, "java.lang.NullPointerException"),
                       (Java.IllegalArgument, "java.lang.IllegalArgumentException")):
        if isinstance(exc, java):
            return exception_for(name, message)
    return exc
