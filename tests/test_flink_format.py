"""Flink's heap checkpoint format in the reference (reference/checkpoint/flink_format/, issue 28 point 3).

What real Flink makes of these bytes is checked with its jars by tests/test_flink_backend.py and by
``python -m cowcheck.flink.backend_releases --pairs reference:2.3.0,2.3.0:reference``; here: the
layout facts (from Flink's sources), the reference's own round trips, checkpoints Flink 1.13.6 and
2.3.0 wrote (tests/flink_checkpoints/, recorded by backend_releases) restored without a JVM, and
``cowcheck checkpoint inspect`` on both formats.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cowcheck.flink.backend_releases import REFERENCE, describe_handle, read, rebuild_handle
from cowcheck.reference.checkpoint import CheckpointStreamFactory, HeapKeyedStateBackend
from cowcheck.reference.checkpoint.flink_format import FlinkCheckpointData, KeyGroupsStateHandle, UnsupportedSerializerError
from cowcheck.reference.checkpoint.flink_format.datastream import java_utf
from cowcheck.reference.checkpoint.flink_format.snapshots import snapshot_bytes
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.keyed import HashMapStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from cowcheck.reference.keyed.ttl import ManualClock, StateTtlConfig
from cowcheck.reference.serializers import BytesSerializer, IntSerializer, ListSerializer, StringSerializer, Tuple2Serializer
from cowcheck.reference.hashing import key_group
from cowcheck.reference.state_table import KeyGroupRange

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "flink_checkpoints"


def test_a_simple_serializer_snapshot_is_proxy_version_class_name_and_version_3():
    # TypeSerializerSnapshotSerializationUtil: i32 2; writeVersionedSnapshot: writeUTF(class), i32 version;
    # SimpleTypeSerializerSnapshot: version 3, no content.
    name = "org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
    assert snapshot_bytes(IntSerializer()) == b"\0\0\0\2" + len(name).to_bytes(2, "big") + name.encode() + b"\0\0\0\3"


def test_a_composite_snapshot_nests_its_parts_after_both_magic_numbers():
    data = snapshot_bytes(ListSerializer(StringSerializer()))
    head = java_utf("org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot")
    assert data.startswith(b"\0\0\0\2" + head)
    rest = data[4 + len(head):]
    numbers = [int.from_bytes(rest[i:i + 4], "big", signed=True) for i in range(0, 24, 4)]
    assert numbers == [3, 911108, 1, 1333245, 1, 1]  # version, magic, outer version, nested magic, version, count
    assert rest[24:].startswith(java_utf("org.apache.flink.api.common.typeutils.base.StringSerializer$"
                                         "StringSerializerSnapshot"))


def _keyed(fmt="flink", clock=None):
    backend = HashMapStateBackend(capacity=4, checkpoint_format=fmt, clock=clock or ManualClock(1000))
    kb = backend.create_keyed_state_backend(StringSerializer(), 16, KeyGroupRange(0, 15))
    ttl = ValueStateDescriptor("v", IntSerializer())
    ttl.enable_time_to_live(StateTtlConfig(ttl=10))
    descriptors = [ttl, ListStateDescriptor("l", IntSerializer()), MapStateDescriptor("m", StringSerializer(),
                                                                                      IntSerializer())]
    states = [kb.get_or_create_keyed_state(IntSerializer(), d) for d in descriptors]
    for i in range(40):
        kb.set_current_key(f"k{i}")
        for s in states:
            s.set_current_namespace(i % 3)
        states[0].update(i)
        states[1].add(i)
        states[2].put("x", i)
    return backend, kb, descriptors


def _contents(kb, descriptors):
    out = []
    for d in descriptors:
        s = kb.get_or_create_keyed_state(IntSerializer(), d)
        for ns in range(3):
            for key in sorted(kb.get_keys(d.name, ns)):
                kb.set_current_key(key)
                s.set_current_namespace(ns)
                got = s.value() if d.name == "v" else list(s.get()) if d.name == "l" else sorted(s.entries())
                out.append((d.name, ns, key, got))
    return out


def test_a_flink_format_checkpoint_restores_whole_split_and_merged_back():
    backend, kb, descriptors = _keyed()
    before = _contents(kb, descriptors)
    handle = kb.snapshot(1).run()
    assert isinstance(handle, KeyGroupsStateHandle) and [g for g, _ in handle.offsets] == list(range(16))
    halves = [backend.create_keyed_state_backend(StringSerializer(), 16, r, [handle])
              for r in (KeyGroupRange(0, 6), KeyGroupRange(7, 15))]
    for half in halves:
        for d in descriptors:
            half.get_or_create_keyed_state(IntSerializer(), d)
    merged = backend.create_keyed_state_backend(StringSerializer(), 16, KeyGroupRange(0, 15),
                                                [h.snapshot(2).run() for h in halves])
    assert _contents(merged, descriptors) == before and len(before) == 120


def test_handles_numbering_their_states_in_different_orders_merge_by_name():
    halves = []
    for names, part in ((("a", "b"), KeyGroupRange(0, 3)), (("b", "a"), KeyGroupRange(4, 7))):
        backend = HeapKeyedStateBackend(part, 8, checkpoint_format="flink")
        tables = {name: backend.register_state(name, IntSerializer(), StringSerializer()) for name in names}
        for key in range(40):
            if key_group(key, 8) in part:
                tables["a"].put(key, 0, f"a{key}")
                tables["b"].put(key, 0, f"b{key}")
        halves.append(backend.checkpoint(1).complete())
    merged = HeapKeyedStateBackend.restore(halves, max_parallelism=8)
    assert sorted(merged.state("a")) == [(k, 0, f"a{k}") for k in range(40)]
    assert sorted(merged.state("b")) == [(k, 0, f"b{k}") for k in range(40)]


def test_the_project_format_stays_the_default_and_a_restore_reads_either():
    backend, kb, descriptors = _keyed(fmt="cowcheck")
    own = kb.snapshot(1).run()
    assert type(own).__name__ == "CheckpointHandle"
    flink = HashMapStateBackend(capacity=4, checkpoint_format="flink", clock=backend.clock)
    restored = flink.create_keyed_state_backend(StringSerializer(), 16, KeyGroupRange(0, 15), [own])
    for d in descriptors:
        restored.get_or_create_keyed_state(IntSerializer(), d)
    again = flink.create_keyed_state_backend(StringSerializer(), 16, KeyGroupRange(0, 15), [restored.snapshot(2).run()])
    assert _contents(again, descriptors) == _contents(kb, descriptors)
    with pytest.raises(ValueError, match="checkpoint_format"):
        HashMapStateBackend(checkpoint_format="rocksdb").create_keyed_state_backend(IntSerializer(), 1,
                                                                                    KeyGroupRange(0, 0))


def test_restore_needs_max_parallelism_and_handles_of_one_format():
    _, kb, _ = _keyed()
    handle = kb.snapshot(1).run()
    bare = KeyGroupsStateHandle(handle.key_group_range, handle.offsets, handle.size, inline=handle.inline)
    with pytest.raises(ValueError, match="max_parallelism"):
        HeapKeyedStateBackend.restore([bare])
    _, own, _ = _keyed(fmt="cowcheck")
    with pytest.raises(TypeError, match="one kind"):
        HeapKeyedStateBackend.restore([handle, own.snapshot(1).run()], max_parallelism=16)


def test_a_serializer_flink_cannot_name_fails_the_synchronous_part():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 3), 4, checkpoint_format="flink")
    backend.register_state("t", IntSerializer(), Tuple2Serializer(IntSerializer(), IntSerializer()))
    with pytest.raises(UnsupportedSerializerError, match="tuple"):
        backend.checkpoint(1)
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 3), 4, checkpoint_format="flink")
    backend.register_state("b", IntSerializer(), BytesSerializer()).put(1, 0, b"\0\1")
    assert list(HeapKeyedStateBackend.restore([backend.checkpoint(1).complete()], max_parallelism=4)
                .state("b")) == [(1, 0, b"\0\1")]


def test_a_write_racing_the_asynchronous_part_of_a_flink_format_checkpoint_is_caught_only_when_it_races():
    from cowcheck.backend import BackendHarness, reference_flink_format_backend
    from cowcheck.backend.mutants import ReleaseAtSyncPoint
    from cowcheck.core.program import Step
    from cowcheck.core.shrink import replay

    race = [Step("open", ("int", 8)), Step("list_add", ("list", 0, 0, 1)), Step("checkpoint_async", (0, "memory", 0)),
            Step("list_add", ("list", 0, 0, 2)), Step("join", (0,))]
    assert replay(race, reference_flink_format_backend, harness_class=BackendHarness) is None
    broken = lambda: HashMapStateBackend(capacity=4, backend_class=ReleaseAtSyncPoint,  # noqa: E731
                                         checkpoint_format="flink")
    failure = replay(race, broken, harness_class=BackendHarness)
    assert (failure.kind, failure.code, failure.step_index) == ("DIVERGENCE", "K5", 4)
    assert replay(race, broken, harness_class=BackendHarness, async_part="inline") is None


def test_damage_is_a_format_error_naming_the_offset():
    _, kb, _ = _keyed()
    handle = kb.snapshot(1).run()
    group, offset = handle.offsets[5]
    data = bytearray(handle.inline)
    data[offset + 3] ^= 1  # the key-group id at the handle's offset
    with pytest.raises(CheckpointFormatError, match=f"offset {offset}: expected key group {group}, found"):
        HeapKeyedStateBackend.restore([KeyGroupsStateHandle(handle.key_group_range, handle.offsets, handle.size,
                                                            inline=bytes(data))], max_parallelism=16)
    with pytest.raises(CheckpointFormatError, match="not in \\[0, "):
        FlinkCheckpointData(handle.inline[:handle.offsets[0][1]] + b"\xff" * 8, "f")


def test_the_text_description_round_trips_as_flinks_bridge_writes_it(tmp_path):
    _, kb, _ = _keyed()
    inline = kb.snapshot(1).run()
    assert rebuild_handle(describe_handle(inline), 16) == inline.__class__(
        inline.key_group_range, inline.offsets, inline.size, inline=inline.inline, max_parallelism=16)
    on_file = kb.snapshot(2, CheckpointStreamFactory(str(tmp_path), threshold=0)).run()
    assert on_file.path is not None and not on_file.path.endswith(".cwck")
    text = describe_handle(on_file).replace(f" {on_file.path}", f" file:{on_file.path}")  # as Flink's Path prints
    assert rebuild_handle(text, 16).read_bytes() == on_file.read_bytes()


@pytest.mark.parametrize("release", ["1.13.6", "2.3.0"])
def test_checkpoints_flink_wrote_restore_in_the_reference_to_the_models_state(release, tmp_path):
    result = read(REFERENCE, RECORDED / release)["forms"]["checkpoint"]
    assert result["checkpoints"] == result["same"] == 1, result
    records = json.loads((RECORDED / release / "records.json").read_text())
    shown = next(w for r in records["records"] for w in r["expected"].values() if w["shows"])
    shown["shows"][0][1] = "not what it holds"
    (tmp_path / "records.json").write_text(json.dumps(records))
    assert read(REFERENCE, tmp_path)["forms"]["checkpoint"]["different"]


def cowcheck(*args):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_inspect_recognises_flinks_format_by_content_and_garbage_is_one_line(tmp_path):
    _, kb, _ = _keyed()
    handle = kb.snapshot(3, CheckpointStreamFactory(str(tmp_path), threshold=0)).run()
    handle_file = handle.save(str(tmp_path / "named-like-anything.json"))
    for path in (handle_file, handle.path):
        run = cowcheck("checkpoint", "inspect", path)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        assert lines[0].startswith("Flink keyed-state checkpoint (KeyedBackendSerializationProxy version 6)")
        assert "key serializer string" in lines[2] and ("max_parallelism 16" in lines[2]) == (path == handle_file)
        assert lines[-1].split()[-3:] == ["40", "40", "40"]  # entries per state
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\0\0\0\6\0" + b"\x41" * 40)
    run = cowcheck("checkpoint", "inspect", str(garbage))
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert f"{garbage}: offset 5: " in run.stderr
