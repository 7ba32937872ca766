"""Serializers write Flink's bytes; ids rebuild serializers; bad ids and bytes are clear errors."""

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cowcheck.reference.serializers import (
    BytesSerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    MapSerializer,
    SerializationError,
    StringSerializer,
    UnknownSerializerError,
    serializer_from_id,
)


def dump(serializer, value) -> str:
    out = io.BytesIO()
    serializer.serialize(value, out)
    return out.getvalue().hex()


def load(serializer, hex_bytes: str):
    return serializer.deserialize(io.BytesIO(bytes.fromhex(hex_bytes)))


# ------------------------------------------------------------ bytes, by hand


def test_int_long_string_bytes_are_flinks():
    assert dump(IntSerializer(), -1) == "ffffffff"
    assert dump(LongSerializer(), 1) == "0000000000000001"
    # StringValue.writeString: length+1 as a 7-bit varint, then the code unit 0xE9
    # as a varint: low 7 bits 0x69 | 0x80 = 0xE9, then 0xE9 >> 7 = 0x01.
    assert dump(StringSerializer(), "é") == "02" + "e901"
    assert dump(StringSerializer(), None) == "00"


def test_bytes_serializer_writes_int32_length_then_raw_bytes():
    # BytePrimitiveArraySerializer: writeInt(length), write(bytes)
    assert dump(BytesSerializer(), b"\x01\xff") == "00000002" + "01ff"
    assert dump(BytesSerializer(), b"") == "00000000"


def test_map_serializer_writes_size_then_key_null_flag_and_value_per_entry():
    # MapSerializer: writeInt(size); per entry key, writeBoolean(value == null), value if not null.
    expected = ("00000002"
                + "02" + "61" + "00" + "00000001"  # "a" -> 1
                + "02" + "62" + "01")              # "b" -> None: flag true, no value
    assert dump(MapSerializer(StringSerializer(), IntSerializer()), {"a": 1, "b": None}) == expected


def test_nested_map_of_lists_bytes():
    ser = MapSerializer(IntSerializer(), ListSerializer(LongSerializer()))
    assert dump(ser, {7: [1]}) == "00000001" + "00000007" + "00" + "00000001" + "0000000000000001"


def test_map_serializer_reads_back_flinks_bytes():
    ser = MapSerializer(StringSerializer(), IntSerializer())
    assert load(ser, "00000002" "0261" "00" "00000001" "0262" "01") == {"a": 1, "b": None}


# ------------------------------------------------------------ round trips

@given(st.dictionaries(st.text(max_size=4), st.one_of(st.none(), st.lists(st.integers(-(2**63), 2**63 - 1),
                                                                            max_size=3)), max_size=4))
def test_map_of_lists_round_trips(value):
    ser = MapSerializer(StringSerializer(), ListSerializer(LongSerializer()))
    assert load(ser, dump(ser, value)) == value


@given(st.binary(max_size=64))
def test_bytes_round_trip(value):
    assert load(BytesSerializer(), dump(BytesSerializer(), value)) == value


def test_map_copy_is_deep_and_keeps_none_values():
    ser = MapSerializer(StringSerializer(), ListSerializer(IntSerializer()))
    original = {"a": [1], "b": None}
    copied = ser.copy(original)
    copied["a"].append(2)
    assert (original, copied) == ({"a": [1], "b": None}, {"a": [1, 2], "b": None})


def test_bytes_copy_separates_bytearrays():
    original = bytearray(b"ab")
    copied = BytesSerializer().copy(original)
    copied[0] = 0
    assert original == bytearray(b"ab")


# ------------------------------------------------------------ bad bytes and values


@pytest.mark.parametrize("serializer, hex_bytes", [
    (BytesSerializer(), "00000005" "0102"),                                   # 5 bytes announced, 2 there
    (BytesSerializer(), "ffffffff"),                                          # negative length
    (MapSerializer(IntSerializer(), IntSerializer()), "00000001" "00000001" "02"),  # null flag 2
    (MapSerializer(IntSerializer(), IntSerializer()), "00000001" "00000001"),       # flag missing
])
def test_bad_bytes_raise_serialization_error(serializer, hex_bytes):
    with pytest.raises(SerializationError):
        load(serializer, hex_bytes)


def test_map_serializer_rejects_none_keys_and_none_maps():
    ser = MapSerializer(IntSerializer(), IntSerializer())
    with pytest.raises(SerializationError):
        dump(ser, {None: 1})
    with pytest.raises(SerializationError):
        dump(ser, None)


# ------------------------------------------------------------ registry


@pytest.mark.parametrize("serializer", [
    IntSerializer(), LongSerializer(), StringSerializer(), BytesSerializer(),
    ListSerializer(IntSerializer()),
    MapSerializer(StringSerializer(), ListSerializer(LongSerializer())),
    MapSerializer(IntSerializer(), MapSerializer(StringSerializer(), BytesSerializer())),
])
def test_every_serializer_is_rebuilt_from_its_id(serializer):
    rebuilt = serializer_from_id(serializer.serializer_id)
    assert type(rebuilt) is type(serializer)
    assert rebuilt.serializer_id == serializer.serializer_id


def test_serializer_ids_are_stable_strings():
    assert MapSerializer(StringSerializer(), ListSerializer(LongSerializer())).serializer_id == \
        "map<string,list<long>>"
    assert BytesSerializer().serializer_id == "bytes"


@pytest.mark.parametrize("bad_id, reason_part", [
    ("float", "no serializer named 'float'"),
    ("list", "takes 1 serializer argument(s), got 0"),
    ("map<int>", "takes 2 serializer argument(s), got 1"),
    ("int<long>", "takes 0 serializer argument(s), got 1"),
    ("list<int", "expected ',' or '>'"),
    ("list<int>>", "unexpected '>'"),
])
def test_unknown_or_malformed_ids_are_clear_errors_carrying_the_id(bad_id, reason_part):
    with pytest.raises(UnknownSerializerError) as caught:
        serializer_from_id(bad_id)
    assert caught.value.serializer_id == bad_id
    assert reason_part in caught.value.reason
