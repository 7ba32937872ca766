"""Operator state in the reference (reference/operator/), snappy framed streams, and the operator machine.

What real Flink makes of these bytes is checked with its jars by tests/test_flink_operator.py and by
``python -m cowcheck.flink.operator_releases``; here, without a JVM: the bytes Flink 2.3.0 writes
for three states (recorded with its jar), compressed and not, against the reference's; Flink 2.3.0's
recorded checkpoints (tests/flink_checkpoints/operator-2.3.0/, written by operator_releases) restored
by the reference at 1 to 10 instances; the round-robin split's sizes and multisets; each release's
null handling; and snappy framing at chunk boundaries.
"""

import os
from collections import Counter
from pathlib import Path

import cramjam
import pytest

import cowcheck.registry  # noqa: F401
from cowcheck.core.failures import CheckFailure
from cowcheck.flink.operator_releases import read
from cowcheck.model.operator_model import OperatorModel, OperatorStateSpec
from cowcheck.operator.harness import OPERATOR_SCENARIOS, OperatorHarness
from cowcheck.operator.walks import walk_program
from cowcheck.reference.checkpoint.flink_format.compression import (HEADER, RawInput, SnappyFramedInput,
                                                                    compress_stream)
from cowcheck.reference.keyed import HashMapStateBackend, ListStateDescriptor, MapStateDescriptor
from cowcheck.reference.operator import OperatorStateBackends, OperatorStreamStateHandle, StateOffsets, StreamData
from cowcheck.reference.serializers import IntSerializer, StringSerializer
from cowcheck.reference.state_table import KeyGroupRange

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "flink_checkpoints" / "operator-2.3.0"

# Flink 2.3.0's bytes after the metadata for split_int [1, 2, 3], union_string ["x"], bcast {7: "seven"}
# (DefaultOperatorStateBackend by its builder; the metadata itself is compared in full below).
FLINK_PLAIN_TAIL = "0000000100000002000000030278000000010000000706736576656e"
FLINK_COMPRESSED_TAIL = ("ff060000734e6150705901080000f15e0c340000000101080000903de418000000020108000047a1e9120000000301"
                         "060000a2457f3a0278011200003c521b15000000010000000706736576656e")
FLINK_OFFSETS = {False: {"split_int": [649, 653, 657], "union_string": [661], "bcast": [663]},
                 True: {"split_int": [659, 671, 683], "union_string": [695], "bcast": [705]}}


def _three_states(compression: bool):
    b = OperatorStateBackends(compression=compression).create_operator_state_backend()
    ids = b.get_list_state(ListStateDescriptor("split_int", IntSerializer()))
    for v in (1, 2, 3):
        ids.add(v)
    b.get_union_list_state(ListStateDescriptor("union_string", StringSerializer())).add("x")
    b.get_broadcast_state(MapStateDescriptor("bcast", IntSerializer(), StringSerializer())).put(7, "seven")
    return b


@pytest.mark.parametrize("compressed", [False, True])
def test_the_reference_writes_the_bytes_and_offsets_flink_2_3_0_writes(compressed):
    handle = _three_states(compressed).snapshot(1).run()
    data = handle.stream.inline
    tail = FLINK_COMPRESSED_TAIL if compressed else FLINK_PLAIN_TAIL
    assert data[:5].hex() == ("0000000601" if compressed else "0000000600")
    assert data.hex().endswith(tail) and len(data) == FLINK_OFFSETS[False]["split_int"][0] + len(tail) // 2
    assert {n: list(o.offsets) for n, o in handle.states.items()} == FLINK_OFFSETS[compressed]
    restored = OperatorStateBackends().create_operator_state_backend([handle])
    assert restored.get_list_state(ListStateDescriptor("split_int", IntSerializer())).get() == [1, 2, 3]
    assert restored.get_broadcast_state(MapStateDescriptor("bcast", IntSerializer(), StringSerializer())).entries() \
        == [(7, "seven")]


@pytest.mark.parametrize("compressed", [False, True])
def test_a_savepoint_is_written_as_the_checkpoint_of_the_same_state(compressed):
    # Flink's DefaultOperatorStateBackendSnapshotStrategy never reads its CheckpointOptions (javap 1.13.6, 2.3.0;
    # Flink's own savepoint and checkpoint bytes compared equal on both): the reference's must not differ either.
    backend = _three_states(compressed)
    checkpoint, savepoint = (backend.snapshot(1, savepoint=s).run() for s in (False, True))
    assert savepoint.stream.inline == checkpoint.stream.inline
    assert {n: list(o.offsets) for n, o in savepoint.states.items()} == FLINK_OFFSETS[compressed]


def test_checkpoints_flink_2_3_0_wrote_restore_in_the_reference_at_1_to_10_instances():
    result = read("reference", RECORDED)
    assert result["checkpoints"] >= 15 and set(map(int, result["parallelisms"])) == set(range(1, 11))
    assert (result["different"], result["same"]) == ([], result["checkpoints"])


def test_round_robin_split_keeps_every_element_and_deals_the_remainder_one_each():
    handles = [OperatorStreamStateHandle({"a": StateOffsets(range(0, 4 * n, 4), "SPLIT_DISTRIBUTE"),
                                          "b": StateOffsets(range(1000, 1000 + 4 * (7 - n), 4), "SPLIT_DISTRIBUTE")},
                                         StreamData(f"s{i}", 2000, b""), 3)
               for i, n in enumerate((0, 3, 5))]
    assert OperatorStateBackends().repartition([[h] for h in handles], 3, 3) == [[h] for h in handles]
    for new in (n for n in range(1, 11) if n != 3):  # (at the same parallelism nothing moves)
        parts = OperatorStateBackends().repartition([[h] for h in handles], 3, new)
        for name, total in (("a", 8), ("b", 13)):
            got = [(h.stream.name, o) for part in parts for h in part if name in h.states
                   for o in h.states[name].offsets]
            assert Counter(got) == Counter((h.stream.name, o) for h in handles for o in h.states[name].offsets)
            sizes = sorted(sum(len(h.states[name].offsets) for h in part if name in h.states) for part in parts)
            assert sizes == sorted([total // new + 1] * (total % new) + [total // new] * (new - total % new))


@pytest.mark.parametrize("release, raises, after", [("2.3.0", True, [9, 1]), ("1.18.1", False, [9, 1, None, 2])])
def test_update_with_a_null_element_follows_the_release(release, raises, after):
    spec = OperatorStateSpec("l", "SPLIT_DISTRIBUTE", "string")
    model = OperatorModel([spec], 1, release)
    state = OperatorStateBackends(release=release).create_operator_state_backend().get_list_state(
        ListStateDescriptor("l", StringSerializer()))
    state.add(9)
    model.call(0, "l", "add", 9)
    try:
        state.update([9, 1, None, 2])
        raised = False
    except TypeError:
        raised = True
    assert (raised, state.get()) == (raises, after) == (model.call(0, "l", "update", [9, 1, None, 2])[0],
                                                       model.read(0, "l", "get"))


@pytest.mark.parametrize("size", [0, 1, 65536, 65537, 200_000])
def test_framed_streams_split_at_64_kib_and_read_back_as_one_stream_each_after_another(size):
    data = os.urandom(size // 2) + bytes(size - size // 2)  # half incompressible, half compressible
    framed = compress_stream(data) + compress_stream(b"next")
    assert framed.startswith(HEADER) and framed.count(HEADER) == 2
    reader = SnappyFramedInput(RawInput(framed, 0, "f"))
    assert reader.read(size + 4) == data + b"next" and reader.read(1) == b""
    assert bytes(cramjam.snappy.decompress(framed[:len(framed) - len(compress_stream(b"next"))])) == data


def test_a_compressed_keyed_checkpoint_restores_into_any_key_group_range():
    backend = HashMapStateBackend(capacity=4)
    kb = backend.create_keyed_state_backend(IntSerializer(), 8, KeyGroupRange(0, 7))
    state = kb.get_or_create_keyed_state(IntSerializer(), ListStateDescriptor("l", IntSerializer()))
    for key in range(50):
        kb.set_current_key(key)
        state.set_current_namespace(key % 3)
        state.add(key)
    plain, compressed = kb.snapshot(1).run(), kb.snapshot(2, compressed=True).run()
    assert compressed.inline[4] == 1 and compressed.inline.count(HEADER) == 8  # a framed stream per group and state
    for part in (KeyGroupRange(0, 7), KeyGroupRange(2, 5)):
        got = [sorted(backend.create_keyed_state_backend(IntSerializer(), 8, part, [h]).get_keys("l", 1))
               for h in (plain, compressed)]
        assert got[0] == got[1] and got[0]


@pytest.mark.slow
def test_walks_on_the_reference_pass_and_reach_every_scenario():
    coverage = Counter()
    for seed in range(8):  # (seeds 0-6 reach every scenario)
        harness = OperatorHarness(OperatorStateBackends())
        try:
            for step in walk_program(seed, 150):
                harness.apply(step)
        except CheckFailure as exc:  # pragma: no cover - the failure is the message
            pytest.fail(f"seed {seed}: {exc.failure.code} {exc.failure.message}")
        finally:
            harness.close()
        coverage.update(harness.coverage)
    assert set(OPERATOR_SCENARIOS) - set(coverage) == set()


def test_a_compressed_checkpoint_on_an_implementation_without_compression_is_bad_usage_never_a_pass():
    # A stored program replayed on a release without operator-state compression (before 1.18.0) once took
    # its checkpoint uncompressed and passed; now it is refused (exit 2), and walks there draw none.
    from cowcheck.core.errors import UsageError
    from cowcheck.core.program import Step
    harness = OperatorHarness(OperatorStateBackends(), compression=False)
    try:
        harness.apply(Step("open", (1,)))
        with pytest.raises(UsageError, match="compressed checkpoint"):
            harness.apply(Step("checkpoint", (0, True, "memory")))
    finally:
        harness.close()
    assert not any(step.op == "checkpoint" and step.args[1] for step in walk_program(3, 400, compression=False))
