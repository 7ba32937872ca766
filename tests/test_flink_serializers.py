"""cowcheck.reference.serializers against Flink 2.3.0's serializers of the same names, and the reference
snapshot's write_state against Flink's CopyOnWriteStateMapSnapshot.writeState: byte for byte,
on the real jar (docs/contract.md §15)."""

import io
import random

import pytest

from collections import Counter

from cowcheck.core.keys import FAMILIES, KEY_FAMILIES, NAMESPACE_FAMILIES, nth_key
from cowcheck.core.states import decode_written, write_serializers
from cowcheck.flink import FlinkStateMap, flink_deserialize, flink_serialize
from cowcheck.map.parity import random_program
from cowcheck.reference import VOID_NAMESPACE, CopyOnWriteStateMap, TimeWindow, Tuple2
from cowcheck.reference.serializers import (
    BytesSerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    MapSerializer,
    StringSerializer,
    TimeWindowSerializer,
    Tuple2Serializer,
    VoidNamespaceSerializer,
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
    (Tuple2Serializer(IntSerializer(), StringSerializer()),
     [Tuple2(0, ""), Tuple2(-7, "\ud800"), Tuple2((1 << 31) - 1, "\U0001f600a"), Tuple2(-(1 << 31), "Aa")]),
    (Tuple2Serializer(LongSerializer(), IntSerializer()), [Tuple2(1 << 40, -1)]),
    (TimeWindowSerializer(), [TimeWindow(0, 1), TimeWindow(-(1 << 63), (1 << 63) - 1), TimeWindow(5, -5)]),
    (VoidNamespaceSerializer(), [VOID_NAMESPACE]),
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
    """The writes, reads, rehash and bulk steps of a parity program (no snapshots)."""
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
            for _ in range(args[2]):
                m.contains_key(args[0], args[1])
        elif op == "put_range":
            for i in range(args[1], args[1] + args[2]):
                m.put(nth_key(args[0], i), args[3], list(args[4]))
        elif op == "remove_range":
            for i in range(args[1], args[1] + args[2]):
                m.remove(nth_key(args[0], i), args[3])


def _program_serializers(program) -> tuple:
    """Flink's serializers of the program's key and namespace families (write_serializers)."""
    first = next(s for s in program if s.op == "put")
    return write_serializers(first.args[0], first.args[1])


def test_reference_write_state_equals_flinks_write_state_mid_rehash_and_after_for_every_family():
    mid_rehash = 0
    families = Counter()
    for seed in range(120):
        program = [s for s in random_program(seed, 250)
                   if s.op in ("put", "put_and_get_old", "get_mutate", "remove", "remove_and_get_old", "rehash",
                               "put_range", "remove_range")]
        if not any(s.op == "put" for s in program):
            continue
        key_serializer, namespace_serializer, _ = _program_serializers(program)
        families[key_serializer.serializer_id, namespace_serializer.serializer_id] += 1
        reference, flink = CopyOnWriteStateMap(capacity=128), FlinkStateMap()
        _apply_writes(reference, program)
        _apply_writes(flink, program)
        mid_rehash += flink.introspect().is_rehashing
        assert _write_state(reference, key_serializer, namespace_serializer) == _write_state(
            flink, key_serializer, namespace_serializer), seed
    assert mid_rehash >= 3
    assert {k for k, _ in families} == {"int", "long", "string", "tuple2<int,string>"}, families
    assert {n for _, n in families} == {"int", "void", "timewindow"}, families


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


@pytest.mark.parametrize("key_family", [f.name for f in KEY_FAMILIES])
@pytest.mark.parametrize("namespace_family", [f.name for f in NAMESPACE_FAMILIES])
def test_write_state_with_every_family_writes_the_references_bytes(key_family, namespace_family):
    """Flink's writeState with Flink's serializers of each family pair (TupleSerializer of Tuple2,
    TimeWindow.Serializer, VoidNamespaceSerializer...) through the bridge, byte for byte the
    reference's, mid-rehash, under a snapshot taken before updates; the bytes decode back to the entries."""
    r = random.Random(f"{key_family}/{namespace_family}")
    keys = [FAMILIES[key_family].draw(r) for _ in range(40)] + [nth_key(key_family, i) for i in range(80)]
    namespaces = [FAMILIES[namespace_family].draw(r) for _ in range(3)]
    reference, flink = CopyOnWriteStateMap(capacity=128), FlinkStateMap()
    serializers = write_serializers(keys[0], namespaces[0])
    for m in (reference, flink):
        for i, key in enumerate(keys):
            m.put(key, namespaces[i % 3], [i, -i])
    assert flink.introspect().is_rehashing
    snapshots = [m.snapshot() for m in (reference, flink)]
    for m in (reference, flink):
        for key in keys[::3]:
            m.put(key, namespaces[0], [7])
    written = []
    for snap in snapshots:
        out = io.BytesIO()
        snap.write_state(out, *serializers)
        written.append(out.getvalue())
    assert written[0] == written[1]
    count, entries = decode_written(written[1], serializers)
    assert count == len(entries) == len(list(snapshots[0]))
    assert sorted(map(repr, entries)) == sorted(map(repr, snapshots[0]))
