"""reference.serializers against Flink 2.3.0's serializers of the same names, and the reference
snapshot's write_state against Flink's CopyOnWriteStateMapSnapshot.writeState: byte for byte,
on the real jar (docs/contract.md §15)."""

import io
import random

import pytest

from properties.flink import FlinkStateMap, flink_deserialize, flink_serialize
from properties.map.parity import random_program
from reference import CopyOnWriteStateMap
from reference.serializers import (
    BytesSerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    MapSerializer,
    StringSerializer,
)

STRINGS = ["", "a", "abc" * 50, "x" * 200, "\u007f", "\u0080", "\u07ff", "\u0800", "\uffff", "\u00e9t\u00e9",
           "\u4e2d\u6587", "\U0001f600", "a\u0000b", "\ud800", "a\udfffb", "\U0010fc00"]

CASES = [
    (IntSerializer(), [0, 1, -1, 42, (1 << 31) - 1, -(1 << 31)]),
    (LongSerializer(), [0, -1, 1 << 40, (1 << 63) - 1, -(1 << 63)]),
    (StringSerializer(), STRINGS),
    (ListSerializer(IntSerializer()), [[], [1], [1, 2, 3], list(range(-5, 300))]),
    (ListSerializer(LongSerializer()), [[], [1 << 40, -1]]),
    (ListSerializer(StringSerializer()), [["a", "\U0001f600", ""]]),
    (ListSerializer(ListSerializer(IntSerializer())), [[[], [1, 2], [3]]]),
    (BytesSerializer(), [b"", b"\x00\xff", bytes(range(256))]),
    (MapSerializer(IntSerializer(), LongSerializer()), [{}, {7: None}, {1: 2, 3: None, -4: 1 << 40}]),
    (MapSerializer(StringSerializer(), ListSerializer(LongSerializer())), [{"a": [1, 2], "b": None, "": []}]),
]


def _reference_bytes(serializer, value) -> bytes:
    out = io.BytesIO()
    serializer.serialize(value, out)
    return out.getvalue()


@pytest.mark.parametrize("serializer, values", CASES, ids=[s.serializer_id for s, _ in CASES])
def test_reference_serializer_writes_flinks_bytes_and_each_reads_the_others(serializer, values):
    for value in values:
        written = _reference_bytes(serializer, value)
        assert written == flink_serialize(serializer, value), (serializer.serializer_id, value)
        assert flink_deserialize(serializer, written) == value
        assert serializer.deserialize(io.BytesIO(written)) == value


def test_random_strings_and_int_lists_write_flinks_bytes():
    r = random.Random(5)
    alphabet = [chr(c) for c in (0, 1, 0x41, 0x7f, 0x80, 0x3fff, 0x4000, 0xd7ff, 0xe000, 0xfffe)] + ["\U00010000"]
    strings, lists = StringSerializer(), ListSerializer(IntSerializer())
    for _ in range(300):
        text = "".join(r.choice(alphabet) for _ in range(r.randrange(40)))
        assert _reference_bytes(strings, text) == flink_serialize(strings, text)
        ints = [r.randint(-(1 << 31), (1 << 31) - 1) for _ in range(r.randrange(20))]
        assert _reference_bytes(lists, ints) == flink_serialize(lists, ints)


def _write_state(m, key_serializer, namespace_serializer) -> bytes:
    out = io.BytesIO()
    m.snapshot().write_state(out, key_serializer, namespace_serializer, ListSerializer(IntSerializer()))
    return out.getvalue()


def _apply_writes(m, program) -> None:
    """The writes, reads and rehash steps of a parity program (no snapshots)."""
    for step in program:
        op, args = step.op, step.args
        if op in ("put", "put_and_get_old"):
            m.put(args[0], args[1], list(args[2]))
        elif op == "get_mutate":
            state = m.get(args[0], args[1])
            if state is not None:
                state.append(args[2])
        elif op in ("remove", "remove_and_get_old"):
            m.remove(args[0], args[1])
        elif op == "rehash":
            for _ in range(args[0]):
                m.contains_key(-1, -1)


def _int32(value) -> bool:
    return type(value) is int and -(1 << 31) <= value < 1 << 31


def test_reference_write_state_equals_flinks_write_state_mid_rehash_and_after():
    mid_rehash = 0
    for seed in range(120):
        program = [s for s in random_program(seed, 250)
                   if s.op == "rehash" or s.op in ("put", "get_mutate", "remove") and _int32(s.args[0])
                   and _int32(s.args[1])]
        reference, flink = CopyOnWriteStateMap(capacity=128), FlinkStateMap()
        _apply_writes(reference, program)
        _apply_writes(flink, program)
        mid_rehash += flink.introspect().is_rehashing
        assert _write_state(reference, IntSerializer(), IntSerializer()) == _write_state(
            flink, IntSerializer(), IntSerializer()), seed
    assert mid_rehash >= 3


def test_write_state_with_string_and_long_keys_equals_flinks():
    strings = ["", "k\u00e9y", "\U0001f600", "Aa", "BB"] + [f"s{i}" for i in range(120)]
    for key_serializer, key_of in ((StringSerializer(), lambda i: strings[i]), (LongSerializer(), lambda i: (1 << 40) + i)):
        reference, flink = CopyOnWriteStateMap(capacity=128), FlinkStateMap()
        for m in (reference, flink):
            for i in range(110):
                m.put(key_of(i), "ns", [i, -i])
        assert flink.introspect().is_rehashing
        assert _write_state(reference, key_serializer, StringSerializer()) == _write_state(
            flink, key_serializer, StringSerializer())


def test_write_state_of_a_none_state_fails_on_both():
    # The reference: ValueError; Flink's ListSerializer: NullPointerException (TypeError here).
    reference, flink = CopyOnWriteStateMap(capacity=128), FlinkStateMap()
    for m, error in ((reference, ValueError), (flink, TypeError)):
        m.put(1, 0, None)
        with pytest.raises(error):
            _write_state(m, IntSerializer(), IntSerializer())
