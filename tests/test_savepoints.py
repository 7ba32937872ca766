"""Savepoints, serializer upgrades and checkpoint streams: the reference's formats and the backend machine's steps."""

import io

import pytest

from cowcheck.backend import reference_state_backend
from cowcheck.backend.harness import BackendHarness
from cowcheck.backend.values import serializer_of, typed, upgrade_outcome
from cowcheck.core.failures import CheckFailure
from cowcheck.core.program import Step as S
from cowcheck.reference.checkpoint import HeapKeyedStateBackend
from cowcheck.reference.checkpoint.flink_format.compression import HEADER
from cowcheck.reference.checkpoint.flink_format.datastream import FlinkCursor
from cowcheck.reference.checkpoint.flink_format.savepoint import CanonicalSavepoint, KeyGroupsSavepointStateHandle
from cowcheck.reference.checkpoint.flink_format.snapshots import read_snapshot, snapshot_bytes
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.keyed.migration import AFTER_MIGRATION, AS_IS, INCOMPATIBLE, compatibility
from cowcheck.reference.serializers import (IntSerializer, ListSerializer, LongSerializer, MapSerializer, TtlSerializer,
                                             TtlValue)
from cowcheck.reference.state_table import KeyGroupRange

OPEN = S("open", ("int", 8))
INT = IntSerializer()


def _backend():
    b = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4)
    b.register_state("v", INT, TtlSerializer(INT), kind="value").put(1, 0, TtlValue(5, 100))
    b.register_state("l", INT, ListSerializer(INT), kind="list").put(1, 0, [1, 2])
    b.register_state("m", INT, MapSerializer(INT, INT), kind="map").put(42, 2, {1: None, 2: 3})
    b.register_state("e", INT, ListSerializer(INT), kind="list").put(42, 0, [])  # written as nothing
    b.register_state("pojo", INT, serializer_of("pojo"), kind="value").put(7, 1, typed("pojo", 1, 7))
    b.register_state("kryo", INT, serializer_of("kryo"), kind="value").put(7, 0, typed("kryo", 1, 6))
    return b


def test_a_canonical_savepoint_is_flinks_layout_key_group_by_key_group():
    b = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4)
    b.register_state("l", INT, ListSerializer(INT), kind="list").put(42, 0, [1, 2])
    handle = CanonicalSavepoint(b, 1, b.stream_factory).complete()
    assert isinstance(handle, KeyGroupsSavepointStateHandle)
    assert [o for _, o in handle.offsets].count(0) == 7  # key groups without entries: offset 0
    group, offset = next((g, o) for g, o in handle.offsets if o)
    data = handle.inline[offset:]
    # state 0, a key of 9 bytes (group | 0x80: its state's last entry, 42, namespace 0), "1,2", the end mark
    assert data == bytes.fromhex("0000" "00000009" f"{0x80 | group:02x}" "0000002a" "00000000"
                                 "00000009" "00000001" "2c" "00000002" "ffff")


@pytest.mark.parametrize("compressed", [False, True])
def test_a_canonical_savepoint_restores_every_kind_of_value_into_any_range_and_leaves_empty_lists_out(compressed):
    b = _backend()
    handle = b.canonical_savepoint(1, compressed=compressed).complete()
    # compressed: each key group is one snappy framed stream, its stream identifier at the group's offset
    assert {handle.inline[o:o + 10] == HEADER for _, o in handle.offsets if o} == {compressed}
    whole = HeapKeyedStateBackend.restore([handle], max_parallelism=8)
    want = {name: sorted(b.state(name), key=repr) for name in b.state_names}
    want["e"] = []
    assert {name: sorted(whole.state(name), key=repr) for name in whole.state_names} == want
    group = whole.state("m").key_group_of(42)
    part = HeapKeyedStateBackend.restore([handle.intersection(KeyGroupRange(group, group))],
                                         KeyGroupRange(group, group), max_parallelism=8)
    assert list(part.state("m")) == [(42, 2, {1: None, 2: 3})] and list(part.state("l")) == []


def test_damage_to_a_canonical_savepoint_is_a_format_error_naming_the_offset():
    handle = _backend().canonical_savepoint(1).complete()
    data = bytearray(handle.inline)
    data[-2:] = b"\x00\x07"  # the last group's end mark, now a state id the proxy has not
    damaged = KeyGroupsSavepointStateHandle(handle.key_group_range, handle.offsets, handle.size, inline=bytes(data))
    with pytest.raises(CheckpointFormatError, match="ends early|state id"):
        HeapKeyedStateBackend.restore([damaged], max_parallelism=8)


def test_pojo_and_kryo_values_and_snapshots_are_the_bytes_flink_writes():
    # Recorded from Flink 1.13.6 and 2.3.0 (identical): cowcheck.types.Account and Blob.
    out = io.BytesIO()
    serializer_of("pojo").serialize(typed("pojo", 1, 7), out)
    assert out.getvalue().hex() == "0200000000010000000000000007" "00" "00000007" "00" "036f37"
    out = io.BytesIO()
    serializer_of("kryo").serialize(typed("kryo", 1, 1), out)
    assert out.getvalue().hex() == "5701" "0102" "00" "02" "010201"  # data [0], n 1, tag [1]
    for value_type, length in (("pojo", 572), ("kryo", 493)):
        data = snapshot_bytes(serializer_of(value_type))
        assert len(data) == length
        assert read_snapshot(FlinkCursor(data, 0, len(data), "f", "s")).serializer_id == \
            serializer_of(value_type).serializer_id


def test_serializer_upgrades_are_flinks_compatibility_outcomes():
    assert [upgrade_outcome(1, v) for v in (1, 2, 3, 4)] == [AS_IS, AFTER_MIGRATION, AFTER_MIGRATION, INCOMPATIBLE]
    assert upgrade_outcome(3, 4) == AFTER_MIGRATION  # a field added as int where none was
    assert compatibility(serializer_of("pojo", 1), serializer_of("pojo", 4)) == INCOMPATIBLE
    assert compatibility(ListSerializer(INT), ListSerializer(TtlSerializer(INT))) == AFTER_MIGRATION
    assert compatibility(INT, LongSerializer()) == INCOMPATIBLE


def _run(steps, **options):
    h = BackendHarness(reference_state_backend(), async_part="inline", **options)
    try:
        for step in steps:
            h.apply(step)
    finally:
        h.close()
    return h


def test_the_machines_new_steps_pass_on_the_reference_and_reach_their_scenarios():
    h = _run([OPEN, S("map_put_null", ("map", 1, 0, 2)), S("update", ("value_kryo", 1, 0, 4)),
              S("list_add", ("list_pojo", 2, 1, 5)), S("pojo_mutate", ("value_pojo", 1, 0, 1, 9)),
              S("update", ("value_pojo", 1, 0, 7)), S("pojo_mutate", ("value_pojo", 1, 0, 1, 9)),
              S("savepoint", (0, "canonical", "file")), S("savepoint_async", (1, "native", "memory", 3)),
              S("forms", ("memory",)), S("rescale", (0, 3)), S("restore", (1, 2, 5)),
              *(S("checkpoint_threshold", (2 + i, r, "canonical")) for i, r in enumerate(("below", "at", "above"))),
              S("upgrade", ("canonical", 2, "flipped")), S("upgrade", ("native", 4, "same")),
              S("upgrade", ("checkpoint", 3, "flipped")), S("tail_checkpoint", (1, 6, "checkpoint"))])
    reached = {name for name, hits in h.coverage.items() if hits}
    assert {"savepoint-canonical", "savepoint-native", "forms-of-one-state", "map-null-value", "threshold-below",
            "threshold-at", "threshold-above", "restore-inline-handle", "restore-file-handle", "pojo-state",
            "kryo-state", "kryo-empty-array", "pojo-changed-in-place", "schema-field-added", "schema-field-removed",
            "schema-incompatible-refused", "ttl-switched-on", "ttl-switched-off", "tail-zero-length-read"} <= reached
    assert h.schema == 3 and h.generation == 2


def test_where_a_release_refuses_to_switch_ttl_a_backend_that_migrates_is_k9():
    # Before Flink 2.2 TTL switched across a restore is incompatible (ttl_migration=False); the
    # reference, a port of 2.3.0, migrates it: held to such a release, that is K9.
    with pytest.raises(CheckFailure) as failed:
        _run([OPEN, S("update", ("value", 0, 0, 1)), S("upgrade", ("checkpoint", 1, "flipped"))], ttl_migration=False)
    assert (failed.value.failure.kind, failed.value.failure.code) == ("DIVERGENCE", "K9")


def test_a_native_savepoint_on_an_implementation_without_them_is_bad_usage_never_its_failure():
    # A stored program replayed on a release before 1.15 (no native savepoints): exit 2, and cowcheck versions
    # marks the file not applicable, instead of a failure blamed on that release.
    from cowcheck.core.errors import UsageError
    with pytest.raises(UsageError, match="native savepoint"):
        _run([OPEN, S("savepoint", (0, "native", "memory"))], native_savepoints=False)
