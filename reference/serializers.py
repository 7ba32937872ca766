"""Serializers writing the same bytes as Flink's serializers of the same names.

Each offers ``serialize(value, out)``, ``deserialize(inp)`` and ``copy(value)``;
``out``/``inp`` are binary file-likes. Big-endian, as Flink's DataOutputView.

>>> import io
>>> buf = io.BytesIO(); ListSerializer(IntSerializer()).serialize([1, 2], buf)
>>> buf.getvalue().hex()
'000000020000000100000002'
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Callable

from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2, VoidNamespace

__all__ = [
    "IntSerializer",
    "LongSerializer",
    "StringSerializer",
    "ListSerializer",
    "BytesSerializer",
    "MapSerializer",
    "Tuple2Serializer",
    "TimeWindowSerializer",
    "VoidNamespaceSerializer",
    "TtlValue",
    "TtlSerializer",
    "SerializationError",
    "UnknownSerializerError",
    "serializer_from_id",
    "register_serializer",
    "register_serializer_family",
    "LongArraySerializer",
    "duplicate",
]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class SerializationError(ValueError):
    """Bytes that do not decode (truncated input, bad length) or a value that cannot be written."""


class UnknownSerializerError(ValueError):
    """A serializer id that the registry cannot build; ``.serializer_id`` is the id, ``.reason`` why."""

    def __init__(self, serializer_id: str, reason: str) -> None:
        super().__init__(f"unknown serializer id {serializer_id!r}: {reason}")
        self.serializer_id = serializer_id
        self.reason = reason


def _read_exact(inp: BinaryIO, n: int) -> bytes:
    data = inp.read(n)
    if len(data) != n:
        raise SerializationError(f"unexpected end of input: wanted {n} bytes, got {len(data)}")
    return data


class IntSerializer:
    """Flink IntSerializer: 4 bytes big-endian. Ints are immutable, so ``copy`` is identity."""

    serializer_id = "int"

    def serialize(self, value: int, out: BinaryIO) -> None:
        try:
            out.write(_INT.pack(value))
        except struct.error as exc:
            raise SerializationError(f"IntSerializer: {value!r} is not an int32") from exc

    def deserialize(self, inp: BinaryIO) -> int:
        return _INT.unpack(_read_exact(inp, 4))[0]

    def copy(self, value: int) -> int:
        return value


class LongSerializer(IntSerializer):
    """Flink LongSerializer: 8 bytes big-endian."""

    serializer_id = "long"

    def serialize(self, value: int, out: BinaryIO) -> None:
        try:
            out.write(_LONG.pack(value))
        except struct.error as exc:
            raise SerializationError(f"LongSerializer: {value!r} is not an int64") from exc

    def deserialize(self, inp: BinaryIO) -> int:
        return _LONG.unpack(_read_exact(inp, 8))[0]


class StringSerializer:
    """Flink StringSerializer (``StringValue.writeString``): length+1 as a
    7-bit varint (0 means null), then each UTF-16 code unit as a 7-bit varint."""

    serializer_id = "string"

    @staticmethod
    def _write_varint(n: int, buf: bytearray) -> None:
        while n >= 0x80:
            buf.append((n & 0x7F) | 0x80)
            n >>= 7
        buf.append(n)

    def serialize(self, value: str | None, out: BinaryIO) -> None:
        buf = bytearray()
        if value is None:
            buf.append(0)
        else:
            units = value.encode("utf-16-be", "surrogatepass")
            self._write_varint(len(units) // 2 + 1, buf)
            for i in range(0, len(units), 2):
                self._write_varint((units[i] << 8) | units[i + 1], buf)
        out.write(bytes(buf))

    @staticmethod
    def _read_varint(inp: BinaryIO) -> int:
        shift = 0
        result = 0
        while True:
            b = _read_exact(inp, 1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise SerializationError("StringSerializer: varint longer than 5 bytes")

    def deserialize(self, inp: BinaryIO) -> str | None:
        length = self._read_varint(inp)
        if length == 0:
            return None
        units = bytearray()
        for _ in range(length - 1):
            c = self._read_varint(inp)
            if c > 0xFFFF:
                raise SerializationError(f"StringSerializer: code unit {c:#x} out of range")
            units += c.to_bytes(2, "big")
        return units.decode("utf-16-be", "surrogatepass")

    def copy(self, value: str | None) -> str | None:
        return value


class ListSerializer:
    """Flink ListSerializer: int32 size, then each element. ``copy`` copies every element."""

    def __init__(self, element_serializer: Any) -> None:
        self.element_serializer = element_serializer

    @property
    def serializer_id(self) -> str:
        return f"list<{self.element_serializer.serializer_id}>"

    def serialize(self, value: list, out: BinaryIO) -> None:
        if value is None:
            raise SerializationError("ListSerializer: cannot serialize None")
        out.write(_INT.pack(len(value)))
        ser = self.element_serializer
        for element in value:
            ser.serialize(element, out)

    def deserialize(self, inp: BinaryIO) -> list:
        size = _INT.unpack(_read_exact(inp, 4))[0]
        if size < 0:
            raise SerializationError(f"ListSerializer: negative size {size}")
        ser = self.element_serializer
        return [ser.deserialize(inp) for _ in range(size)]

    def copy(self, value: list) -> list:
        if value is None:
            raise SerializationError("ListSerializer: cannot copy None")
        c = self.element_serializer.copy
        return [c(x) for x in value]

    def duplicate(self) -> "ListSerializer":
        element = duplicate(self.element_serializer)
        return self if element is self.element_serializer else ListSerializer(element)


class BytesSerializer:
    """Flink BytePrimitiveArraySerializer: int32 length, then the raw bytes.
    Reads back ``bytes``; ``copy`` makes a mutable ``bytearray`` independent."""

    serializer_id = "bytes"

    def serialize(self, value: bytes, out: BinaryIO) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SerializationError(f"BytesSerializer: expected bytes, got {type(value).__name__}")
        out.write(_INT.pack(len(value)))
        out.write(value)

    def deserialize(self, inp: BinaryIO) -> bytes:
        size = _INT.unpack(_read_exact(inp, 4))[0]
        if size < 0:
            raise SerializationError(f"BytesSerializer: negative length {size}")
        return _read_exact(inp, size)

    def copy(self, value):
        # bytes are immutable; a bytearray may be mutated in place by its holder.
        return bytearray(value) if isinstance(value, bytearray) else value


class LongArraySerializer:
    """Flink LongPrimitiveArraySerializer (``long[]``): int32 length, then each long. A value is a
    list of ints; ``copy`` makes a new list (a ``long[]`` is mutable)."""

    serializer_id = "longs"

    def serialize(self, value: list, out: BinaryIO) -> None:
        if value is None:
            raise SerializationError("LongArraySerializer: cannot serialize None")
        try:
            out.write(_INT.pack(len(value)) + b"".join(_LONG.pack(v) for v in value))
        except struct.error as exc:
            raise SerializationError(f"LongArraySerializer: {value!r:.60} is not a list of int64") from exc

    def deserialize(self, inp: BinaryIO) -> list:
        size = _INT.unpack(_read_exact(inp, 4))[0]
        if size < 0:
            raise SerializationError(f"LongArraySerializer: negative length {size}")
        data = _read_exact(inp, 8 * size)
        return [_LONG.unpack_from(data, 8 * i)[0] for i in range(size)]

    def copy(self, value: list) -> list:
        return list(value)


class MapSerializer:
    """Flink MapSerializer: int32 size, then per entry the key, a boolean null
    flag (one byte, 1 = the value is null) and, unless null, the value.
    Keys may not be None (Flink's MapSerializer has no null flag for keys).

    >>> import io
    >>> buf = io.BytesIO(); MapSerializer(IntSerializer(), LongSerializer()).serialize({7: None}, buf)
    >>> buf.getvalue().hex()
    '000000010000000701'
    """

    def __init__(self, key_serializer: Any, value_serializer: Any) -> None:
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer

    @property
    def serializer_id(self) -> str:
        return f"map<{self.key_serializer.serializer_id},{self.value_serializer.serializer_id}>"

    def serialize(self, value: dict, out: BinaryIO) -> None:
        if value is None:
            raise SerializationError("MapSerializer: cannot serialize None")
        out.write(_INT.pack(len(value)))
        key_ser, value_ser = self.key_serializer, self.value_serializer
        for k, v in value.items():
            if k is None:
                raise SerializationError("MapSerializer: None keys are not serializable")
            key_ser.serialize(k, out)
            if v is None:
                out.write(b"\x01")
            else:
                out.write(b"\x00")
                value_ser.serialize(v, out)

    def deserialize(self, inp: BinaryIO) -> dict:
        size = _INT.unpack(_read_exact(inp, 4))[0]
        if size < 0:
            raise SerializationError(f"MapSerializer: negative size {size}")
        key_ser, value_ser = self.key_serializer, self.value_serializer
        result = {}
        for _ in range(size):
            k = key_ser.deserialize(inp)
            is_null = _read_exact(inp, 1)[0]
            if is_null > 1:
                raise SerializationError(f"MapSerializer: null flag must be 0 or 1, got {is_null}")
            result[k] = None if is_null else value_ser.deserialize(inp)
        return result

    def copy(self, value: dict) -> dict:
        if value is None:
            raise SerializationError("MapSerializer: cannot copy None")
        ck, cv = self.key_serializer.copy, self.value_serializer.copy
        return {ck(k): (None if v is None else cv(v)) for k, v in value.items()}

    def duplicate(self) -> "MapSerializer":
        key, value = duplicate(self.key_serializer), duplicate(self.value_serializer)
        if key is self.key_serializer and value is self.value_serializer:
            return self
        return MapSerializer(key, value)


# ------------------------------------------------------------------ registry
#
# Checkpoints record serializers by id ("int", "list<int>", "map<string,list<long>>"),
# so a reader can rebuild them. Ids are a name with optional <argument ids>.

class Tuple2Serializer:
    """Flink TupleSerializer of a ``Tuple2``: field 0, then field 1, each by its serializer."""

    def __init__(self, f0_serializer: Any, f1_serializer: Any) -> None:
        self.f0_serializer = f0_serializer
        self.f1_serializer = f1_serializer

    @property
    def serializer_id(self) -> str:
        return f"tuple2<{self.f0_serializer.serializer_id},{self.f1_serializer.serializer_id}>"

    def serialize(self, value: Tuple2, out: BinaryIO) -> None:
        if type(value) is not Tuple2:
            raise SerializationError(f"Tuple2Serializer: {value!r} is not a Tuple2")
        self.f0_serializer.serialize(value.f0, out)
        self.f1_serializer.serialize(value.f1, out)

    def deserialize(self, inp: BinaryIO) -> Tuple2:
        return Tuple2(self.f0_serializer.deserialize(inp), self.f1_serializer.deserialize(inp))

    def copy(self, value: Tuple2) -> Tuple2:
        return Tuple2(self.f0_serializer.copy(value.f0), self.f1_serializer.copy(value.f1))


class TimeWindowSerializer:
    """Flink ``TimeWindow.Serializer``: start, then end, as longs."""

    serializer_id = "timewindow"

    def serialize(self, value: TimeWindow, out: BinaryIO) -> None:
        if type(value) is not TimeWindow:
            raise SerializationError(f"TimeWindowSerializer: {value!r} is not a TimeWindow")
        try:
            out.write(_LONG.pack(value.start) + _LONG.pack(value.end))
        except struct.error as exc:
            raise SerializationError(f"TimeWindowSerializer: {value!r} does not fit two longs") from exc

    def deserialize(self, inp: BinaryIO) -> TimeWindow:
        start, end = struct.unpack(">qq", _read_exact(inp, 16))
        return TimeWindow(start, end)

    def copy(self, value: TimeWindow) -> TimeWindow:
        return value


class VoidNamespaceSerializer:
    """Flink VoidNamespaceSerializer: one zero byte (so a stream makes progress)."""

    serializer_id = "void"

    def serialize(self, value: VoidNamespace, out: BinaryIO) -> None:
        if value is not VOID_NAMESPACE:
            raise SerializationError(f"VoidNamespaceSerializer: {value!r} is not VOID_NAMESPACE")
        out.write(b"\x00")

    def deserialize(self, inp: BinaryIO) -> VoidNamespace:
        _read_exact(inp, 1)
        return VOID_NAMESPACE

    def copy(self, value: VoidNamespace) -> VoidNamespace:
        return value


class TtlValue:
    """A user value with the time it was last written (or read, under OnReadAndWrite): what a state
    with time-to-live holds (Flink ``TtlValue``). Timestamps are milliseconds of the backend's clock."""

    __slots__ = ("user_value", "timestamp")

    def __init__(self, user_value, timestamp: int) -> None:
        self.user_value = user_value
        self.timestamp = timestamp

    def __eq__(self, other) -> bool:
        return (isinstance(other, TtlValue) and self.user_value == other.user_value
                and self.timestamp == other.timestamp)

    def __hash__(self) -> int:
        return hash((self.user_value, self.timestamp))

    def __repr__(self) -> str:
        return f"TtlValue({self.user_value!r}, {self.timestamp})"


class TtlSerializer:
    """Flink ``TtlSerializer`` (a ``CompositeSerializer``): the timestamp as a long, then the user
    value through ``user_value_serializer``. ``copy`` copies the user value.

    >>> import io
    >>> buf = io.BytesIO(); TtlSerializer(IntSerializer()).serialize(TtlValue(7, 1000), buf)
    >>> buf.getvalue().hex()
    '00000000000003e800000007'
    """

    def __init__(self, user_value_serializer: Any) -> None:
        self.user_value_serializer = user_value_serializer

    @property
    def serializer_id(self) -> str:
        return f"ttl<{self.user_value_serializer.serializer_id}>"

    def serialize(self, value: TtlValue, out: BinaryIO) -> None:
        if not isinstance(value, TtlValue):
            raise SerializationError(f"TtlSerializer: expected a TtlValue, got {type(value).__name__}")
        out.write(_LONG.pack(value.timestamp))
        self.user_value_serializer.serialize(value.user_value, out)

    def deserialize(self, inp: BinaryIO) -> TtlValue:
        timestamp = _LONG.unpack(_read_exact(inp, 8))[0]
        return TtlValue(self.user_value_serializer.deserialize(inp), timestamp)

    def copy(self, value: TtlValue) -> TtlValue:
        return TtlValue(self.user_value_serializer.copy(value.user_value), value.timestamp)

    def duplicate(self) -> "TtlSerializer":
        user = duplicate(self.user_value_serializer)
        return self if user is self.user_value_serializer else TtlSerializer(user)


def duplicate(serializer):
    """``serializer.duplicate()`` (Flink ``TypeSerializer.duplicate``): a serializer to use on another
    thread, itself when it holds no state (a composite: when none of its parts does). Serializers
    without the method hold none."""
    method = getattr(serializer, "duplicate", None)
    return method() if method is not None else serializer


_REGISTRY: dict[str, tuple[int, Callable[..., Any]]] = {}
# Families whose ids carry their own parameters before the arguments: "pojo:CLASS:FIELD:...<serializers>".
_PREFIXED: dict[str, Callable[..., Any]] = {}


def register_serializer_family(prefix: str, factory: Callable[..., Any]) -> None:
    """Make ids ``PREFIX:PARAMETERS<argument ids>`` known to :func:`serializer_from_id`:
    ``factory(PARAMETERS, *argument_serializers)`` builds one (a POJO serializer's class and field
    names, say), and its ``serializer_id`` must spell the same id."""
    if not prefix or any(c in prefix for c in "<>,: "):
        raise ValueError(f"register_serializer_family: bad prefix {prefix!r}")
    _PREFIXED[prefix] = factory


def register_serializer(name: str, factory: Callable[..., Any], arity: int = 0) -> None:
    """Make ``name`` (with ``arity`` nested serializer ids) known to
    :func:`serializer_from_id`; ``factory(*argument_serializers)`` builds it.
    The built serializer's ``serializer_id`` must spell the same id, e.g.
    ``register_serializer("set", SetSerializer, arity=1)`` for ids like ``set<int>``.
    """
    if not name or any(c in name for c in "<>, "):
        raise ValueError(f"register_serializer: bad name {name!r} (no '<', '>', ',' or spaces)")
    _REGISTRY[name] = (arity, factory)


register_serializer("int", IntSerializer)
register_serializer("long", LongSerializer)
register_serializer("string", StringSerializer)
register_serializer("bytes", BytesSerializer)
register_serializer("list", ListSerializer, arity=1)
register_serializer("map", MapSerializer, arity=2)
register_serializer("tuple2", Tuple2Serializer, arity=2)
register_serializer("timewindow", TimeWindowSerializer)
register_serializer("void", VoidNamespaceSerializer)
register_serializer("ttl", TtlSerializer, arity=1)
register_serializer("longs", LongArraySerializer)


def serializer_from_id(serializer_id: str):
    """Build the serializer an id names; UnknownSerializerError otherwise.

    >>> serializer_from_id("map<string,list<long>>").serializer_id
    'map<string,list<long>>'
    """
    if not isinstance(serializer_id, str):
        raise UnknownSerializerError(repr(serializer_id), "a serializer id is a string")
    serializer, end = _parse_id(serializer_id, 0, 0)
    if end != len(serializer_id):
        raise UnknownSerializerError(serializer_id, f"unexpected {serializer_id[end]!r} at position {end}")
    return serializer


# Serializers nest no deeper than this (map<string,list<long>> is 3): ids come from files.
MAX_SERIALIZER_DEPTH = 32


def _parse_id(text: str, pos: int, depth: int):
    if depth >= MAX_SERIALIZER_DEPTH:
        raise UnknownSerializerError(text, f"nested deeper than {MAX_SERIALIZER_DEPTH} levels")
    start = pos
    while pos < len(text) and text[pos] not in "<>,":
        pos += 1
    name = text[start:pos]
    family, _, parameters = name.partition(":")
    if name not in _REGISTRY and not (parameters and family in _PREFIXED):
        known = ", ".join(sorted(_REGISTRY) + [f"{p}:..." for p in sorted(_PREFIXED)])
        raise UnknownSerializerError(text, f"no serializer named {name!r} (known: {known})")
    arity, factory = _REGISTRY[name] if name in _REGISTRY else (None, _PREFIXED[family])
    args = []
    if pos < len(text) and text[pos] == "<":
        pos += 1
        while True:
            arg, pos = _parse_id(text, pos, depth + 1)
            args.append(arg)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == ">":
                pos += 1
                break
            raise UnknownSerializerError(text, f"expected ',' or '>' at position {pos}")
    if arity is None:  # a family: the factory checks its parameters against its arguments
        try:
            return factory(parameters, *args), pos
        except (TypeError, ValueError) as exc:
            raise UnknownSerializerError(text, str(exc)) from None
    if len(args) != arity:
        raise UnknownSerializerError(text, f"{name!r} takes {arity} serializer argument(s), got {len(args)}")
    return factory(*args), pos
