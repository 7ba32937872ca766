"""Checkpoint write and restore: round trips, the async part interleaved with
changes, release per key group, spilling, atomic files, bad input, rescaling."""

import copy
import io
import json
import os
import struct
import zlib

import pytest

from cowcheck.reference.checkpoint import (
    DEFAULT_MEMORY_THRESHOLD,
    MAX_MEMORY_THRESHOLD,
    CheckpointHandle,
    CheckpointMetadata,
    CheckpointOutputStream,
    CheckpointStreamFactory,
    HeapKeyedStateBackend,
    PendingCheckpoint,
)
from cowcheck.checkpoint.inspect import inspect_checkpoint
from cowcheck.reference.errors import CheckpointFormatError, IllegalStateError
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import (
    BytesSerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    MapSerializer,
    StringSerializer,
)
from cowcheck.reference.state_table import KeyGroupRange, key_group_range_for_operator

MP = 16


def make_backend(key_group_range=KeyGroupRange(0, MP - 1), directory=None, threshold=DEFAULT_MEMORY_THRESHOLD):
    backend = HeapKeyedStateBackend(key_group_range, MP, capacity=4,
                                    stream_factory=CheckpointStreamFactory(directory, threshold))
    backend.register_state("lists", IntSerializer(), ListSerializer(IntSerializer()))
    backend.register_state("maps", StringSerializer(), MapSerializer(StringSerializer(), BytesSerializer()))
    return backend


def fill(backend, n=60):
    lists, maps = backend.state("lists"), backend.state("maps")
    for k in range(n):
        if key_group(k, MP) in backend.key_group_range:
            lists.put(k, k % 3, [k, k + 1])
            if k % 4 == 0:
                maps.put(k, "w", {"x": bytes([k % 256]), "none": None})


def contents(backend):
    """Every state's entries, deep-copied: later in-place changes must not reach them."""
    return copy.deepcopy({name: sorted(backend.state(name), key=repr) for name in backend.state_names})


def restrict(content, key_group_range):
    return {name: [e for e in entries if key_group(e[0], MP) in key_group_range]
            for name, entries in content.items()}


def reseal(data: bytes) -> bytes:
    """Recompute the whole-file checksum after a deliberate edit."""
    return data[:-8] + struct.pack(">I", zlib.crc32(data[:-8])) + data[-4:]


# ------------------------------------------------------------ round trips


def test_checkpoint_round_trips_every_state():
    backend = make_backend()
    fill(backend)
    handle = backend.checkpoint(1).complete()
    restored = HeapKeyedStateBackend.restore([handle])
    assert contents(restored) == contents(backend)
    assert restored.state_names == ["lists", "maps"]
    assert restored.key_group_range == backend.key_group_range


def test_string_keys_round_trip_with_their_serializer():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, MP - 1), MP, key_serializer=StringSerializer(), capacity=4)
    table = backend.register_state("s", LongSerializer(), ListSerializer(LongSerializer()))
    for k in ["", "a", "é", "\U0001F600", "key"]:
        table.put(k, 2**40, [2**62])
    assert sorted(HeapKeyedStateBackend.restore([backend.checkpoint(3).complete()]).state("s")) == sorted(table)


def test_restore_equals_the_state_at_the_synchronous_point_whatever_happens_during_the_write():
    backend = make_backend()
    fill(backend)
    at_sync = contents(backend)
    pending = backend.checkpoint(7)
    lists = backend.state("lists")
    step = 0
    while pending.advance():
        step += 1
        lists.get(step, step % 3).append(-1)   # in-place mutation of a returned value
        lists.remove(step + 20, (step + 20) % 3)
        lists.put(100 + step, 0, [step])
        backend.state("maps").transform(0, "w", step, lambda old, v: {**(old or {}), str(v): None})
    restored = HeapKeyedStateBackend.restore([pending.complete()])
    assert contents(restored) == at_sync != contents(backend)


def test_each_map_snapshot_is_released_as_soon_as_its_key_group_is_written():
    backend = make_backend()
    fill(backend)
    pending = backend.checkpoint(1)
    for written in range(1, 4):
        pending.advance()
        for name in backend.state_names:
            versions = [m.snapshot_versions for m in backend.state(name).maps]
            assert versions == [set()] * written + [{1}] * (MP - written)
    pending.complete()
    assert all(m.snapshot_versions == set() for name in backend.state_names for m in backend.state(name).maps)
    assert pending.status == PendingCheckpoint.COMPLETED


def test_concurrent_checkpoints_are_independent():
    backend = make_backend()
    fill(backend)
    lists = backend.state("lists")
    first_state = contents(backend)
    first = backend.checkpoint(1)
    first.advance()
    lists.put(3, 0, [333])
    second_state = contents(backend)
    second = backend.checkpoint(2)
    lists.get(3, 0).append(4)
    lists.remove(1, 1)
    second.advance()
    third_state = contents(backend)
    third = backend.checkpoint(3)
    lists.remove(3, 0)
    first.cancel()  # ending one checkpoint leaves the others' snapshots alone
    assert contents(HeapKeyedStateBackend.restore([third.complete()])) == third_state
    assert contents(HeapKeyedStateBackend.restore([second.complete()])) == second_state
    assert len({repr(first_state), repr(second_state), repr(third_state)}) == 3


def test_cancel_releases_every_snapshot_and_ends_the_checkpoint(tmp_path):
    backend = make_backend(directory=str(tmp_path), threshold=0)
    fill(backend)
    pending = backend.checkpoint(1)
    pending.advance()
    assert [p.name for p in tmp_path.iterdir()] != []  # a temporary file exists while writing
    pending.cancel()
    pending.cancel()  # idempotent
    assert pending.status == PendingCheckpoint.CANCELLED
    assert all(m.snapshot_versions == set() for m in backend.state("lists").maps)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IllegalStateError):
        pending.advance()


class _FailingStream(CheckpointOutputStream):
    __slots__ = ("writes_left",)

    def write(self, data):
        self.writes_left -= 1
        if self.writes_left < 0:
            raise OSError(28, "No space left on device (injected)")
        super().write(data)


class _FailingFactory:
    def __init__(self, directory, writes_before_failure):
        self.directory, self.writes = directory, writes_before_failure

    def create_stream(self, checkpoint_id):
        stream = _FailingStream(self.directory, 0, checkpoint_id)
        stream.writes_left = self.writes
        return stream


@pytest.mark.parametrize("writes_before_failure", [0, 1, 5, 17, 18])  # metadata, groups, index, trailer
def test_a_failed_write_releases_every_snapshot_deletes_the_file_and_reraises(tmp_path, writes_before_failure):
    # FLINK-13469: the snapshots of a failed checkpoint must not keep copy-on-write on.
    backend = make_backend()
    fill(backend)
    pending = backend.checkpoint(1, _FailingFactory(str(tmp_path), writes_before_failure))
    with pytest.raises(OSError, match="injected"):
        pending.complete()
    assert pending.status == PendingCheckpoint.FAILED and isinstance(pending.error, OSError)
    assert all(m.snapshot_versions == set() for name in backend.state_names for m in backend.state(name).maps)
    assert list(tmp_path.iterdir()) == []
    lists = backend.state("lists")
    assert lists.get(1, 1) is lists.get(1, 1)  # copy-on-write has stopped


# ------------------------------------------------------------ format


def test_file_starts_with_the_metadata_and_each_key_group_is_id_then_state_id_and_write_state_bytes():
    backend = make_backend()
    fill(backend)
    snapshots = {name: backend.state(name).snapshot() for name in backend.state_names}
    handle = backend.checkpoint(9).complete()
    data = handle.read_bytes()
    meta = CheckpointMetadata(9, MP, KeyGroupRange(0, MP - 1), "int", [
        backend.registered_state("lists").metadata(), backend.registered_state("maps").metadata()]).encode()
    assert data.startswith(meta) and data[:6] == b"CWCK\x00\x01"
    assert handle.offsets[0][1] == len(meta)
    for group, offset in handle.offsets:
        block = io.BytesIO()
        block.write(struct.pack(">i", group))
        for state_id, name in enumerate(backend.state_names):
            reg = backend.registered_state(name)
            block.write(struct.pack(">h", state_id))
            snapshots[name].write_key_group(block, group, IntSerializer(), reg.namespace_serializer,
                                            reg.state_serializer)
        expected = block.getvalue()
        assert data[offset:offset + len(expected)] == expected
        assert data[offset + len(expected):offset + len(expected) + 4] == struct.pack(">I", zlib.crc32(expected))
    assert data.endswith(b"CWCE") and handle.checksum == zlib.crc32(data[:-8])


def test_inspect_reports_metadata_offsets_and_entry_counts():
    backend = make_backend()
    fill(backend)
    handle = backend.checkpoint(4).complete()
    info = inspect_checkpoint(handle)
    assert info.metadata.checkpoint_id == 4 and info.storage == "inline"
    assert [(g.key_group, g.offset) for g in info.key_groups] == list(handle.offsets)
    assert sum(g.entries[0] for g in info.key_groups) == len(backend.state("lists"))
    assert sum(g.entries[1] for g in info.key_groups) == len(backend.state("maps"))


# ------------------------------------------------------------ spilling and files


def checkpoint_size(backend) -> int:
    return backend.checkpoint(99, CheckpointStreamFactory()).complete().size


def test_a_checkpoint_up_to_the_threshold_stays_inline_and_a_larger_one_spills(tmp_path):
    backend = make_backend()
    fill(backend)
    size = checkpoint_size(backend)
    at = backend.checkpoint(1, CheckpointStreamFactory(str(tmp_path), size)).complete()
    over = backend.checkpoint(2, CheckpointStreamFactory(str(tmp_path), size - 1)).complete()
    assert (at.storage, at.path, len(at.inline)) == ("inline", None, size)
    assert over.storage == "file" and os.path.getsize(over.path) == over.size == size
    assert os.path.dirname(over.path) == str(tmp_path)
    assert contents(HeapKeyedStateBackend.restore([at])) == contents(HeapKeyedStateBackend.restore([over]))


def test_default_threshold_is_flinks_20_kb_and_at_most_1_mb():
    assert CheckpointStreamFactory().threshold == DEFAULT_MEMORY_THRESHOLD == 20 * 1024
    assert CheckpointStreamFactory(threshold=MAX_MEMORY_THRESHOLD).threshold == 1024 * 1024
    for bad in (-1, MAX_MEMORY_THRESHOLD + 1):
        with pytest.raises(ValueError):
            CheckpointStreamFactory(threshold=bad)


def test_without_a_directory_everything_stays_in_memory():
    backend = make_backend(directory=None, threshold=0)
    fill(backend)
    assert backend.checkpoint(1).complete().storage == "inline"


def test_the_data_file_appears_only_when_complete(tmp_path):
    backend = make_backend(directory=str(tmp_path), threshold=0)
    fill(backend)
    pending = backend.checkpoint(5)
    pending.advance()
    during = [p.name for p in tmp_path.iterdir()]
    assert len(during) == 1 and during[0].startswith(".chk-5-") and during[0].endswith(".cwck.tmp")
    handle = pending.complete()
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(handle.path)] == [during[0][1:-4]]


def test_handles_save_next_to_their_file_and_load_back(tmp_path):
    backend = make_backend(directory=str(tmp_path), threshold=0)
    fill(backend)
    handle = backend.checkpoint(6).complete()
    path = handle.save()
    assert path == handle.path[:-len(".cwck")] + ".handle.json"
    doc = json.loads(open(path).read())
    assert doc["path"] == os.path.basename(handle.path) and doc["inline"] is None
    assert CheckpointHandle.load(path) == handle
    inline = make_backend()
    fill(inline)
    small = inline.checkpoint(7).complete()
    assert CheckpointHandle.load(small.save(str(tmp_path / "small.handle.json"))) == small


# ------------------------------------------------------------ bad input


@pytest.fixture
def small_file(tmp_path):
    backend = make_backend(directory=str(tmp_path), threshold=0)
    fill(backend, n=12)
    handle = backend.checkpoint(1).complete()
    return backend, handle, open(handle.path, "rb").read()


def test_every_single_byte_corruption_is_a_format_error_naming_file_and_offset(small_file):
    _, handle, data = small_file
    for position in range(len(data)):
        bad = bytearray(data)
        bad[position] ^= 0x5A
        with open(handle.path, "wb") as f:
            f.write(bad)
        with pytest.raises(CheckpointFormatError) as caught:
            HeapKeyedStateBackend.restore([handle])
        err = caught.value
        assert err.path == handle.path and 0 <= err.offset <= len(data), position
        assert str(err).startswith(f"{handle.path}: offset {err.offset}: ")
        assert "\n" not in str(err)


def test_every_truncation_is_a_format_error(small_file):
    _, handle, data = small_file
    for length in range(len(data)):
        with open(handle.path, "wb") as f:
            f.write(data[:length])
        with pytest.raises(CheckpointFormatError):
            HeapKeyedStateBackend.restore([handle])
        with pytest.raises(CheckpointFormatError):
            inspect_checkpoint(handle.path)  # without the handle's size


def test_corruption_inside_a_key_group_names_that_key_group(small_file):
    _, handle, data = small_file
    group, offset = handle.offsets[3]
    bad = bytearray(data)
    bad[offset + 2] ^= 1
    with open(handle.path, "wb") as f:
        f.write(bad)
    with pytest.raises(CheckpointFormatError) as caught:
        HeapKeyedStateBackend.restore([handle])
    assert caught.value.offset == offset and f"key group {group}" in caught.value.problem


def test_an_unknown_serializer_id_is_named(small_file):
    _, handle, data = small_file
    edited = data.replace(b"list<int>", b"list<xyz>", 1)
    meta_end = 10 + struct.unpack_from(">I", edited, 6)[0]
    edited = edited[:meta_end] + struct.pack(">I", zlib.crc32(edited[:meta_end])) + edited[meta_end + 4:]
    with pytest.raises(CheckpointFormatError) as caught:
        restore_bytes(handle, reseal(edited))
    assert "unknown serializer id 'list<xyz>'" in caught.value.problem
    assert caught.value.offset == data.index(b"list<int>") - 2


def restore_bytes(handle, data):
    with open(handle.path, "wb") as f:
        f.write(data)
    return HeapKeyedStateBackend.restore([CheckpointHandle(handle.checkpoint_id, handle.key_group_range, MP,
                                                           handle.offsets, len(data), zlib.crc32(data[:-8]),
                                                           handle.path)])


def test_a_key_in_the_wrong_key_group_is_caught_even_with_valid_checksums(small_file):
    backend, handle, data = small_file
    block = next(g for g in inspect_checkpoint(handle).key_groups if g.entries[0])
    # The first entry's key sits after: key group id (4), state id (2), count (4), namespace (4).
    key_at = block.offset + 14
    key = struct.unpack_from(">i", data, key_at)[0]
    other = next(k for k in range(1000) if key_group(k, MP) != block.key_group)
    edited = bytearray(data)
    edited[key_at:key_at + 4] = struct.pack(">i", other)
    crc_at = block.offset + block.length - 4
    edited[crc_at:crc_at + 4] = struct.pack(">I", zlib.crc32(bytes(edited[block.offset:crc_at])))
    original = backend
    with pytest.raises(CheckpointFormatError) as caught:
        backend = restore_bytes(handle, reseal(bytes(edited)))
    assert backend is original  # nothing half-restored escapes
    assert caught.value.offset == block.offset + 10 and f"key {other}" in caught.value.problem and key != other


@pytest.mark.parametrize("content", [b"", b"hello world", b"CW", b"{}", b'{"format": "x"}', b"\xff\xfe"])
def test_something_that_is_not_a_checkpoint_is_a_format_error(tmp_path, content):
    path = tmp_path / "x.cwck"
    path.write_bytes(content)
    with pytest.raises(CheckpointFormatError) as caught:
        inspect_checkpoint(str(path))
    assert caught.value.path == str(path)


def test_a_missing_file_is_a_format_error_naming_it(tmp_path):
    with pytest.raises(CheckpointFormatError, match="cannot read"):
        inspect_checkpoint(str(tmp_path / "nope.cwck"))


def test_handle_offsets_that_disagree_with_the_file_are_caught(small_file, tmp_path):
    _, handle, _ = small_file
    doc = handle.to_json()
    doc["offsets"][2][1] += 4
    path = tmp_path / "bad.handle.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointFormatError) as caught:
        HeapKeyedStateBackend.restore([CheckpointHandle.load(str(path))])
    assert caught.value.offset == doc["offsets"][2][1] and "the handle places key group" in caught.value.problem


def test_a_file_longer_than_its_handle_is_caught(small_file):
    _, handle, data = small_file
    with open(handle.path, "ab") as f:
        f.write(b"\x00")
    with pytest.raises(CheckpointFormatError, match="beyond"):
        HeapKeyedStateBackend.restore([handle])


# ------------------------------------------------------------ rescaling


def test_restore_into_a_smaller_range_reads_exactly_those_key_groups():
    backend = make_backend()
    fill(backend)
    handle = backend.checkpoint(1).complete()
    part = KeyGroupRange(3, 9)
    restored = HeapKeyedStateBackend.restore([handle], part)
    assert restored.key_group_range == part
    assert contents(restored) == restrict(contents(backend), part)


@pytest.mark.parametrize("old, new", [(1, 3), (3, 1), (3, 2), (2, 5)])
def test_rescaling_partitions_the_state_exactly(old, new):
    source = make_backend()
    fill(source, n=200)
    everything = contents(source)
    handles = []
    for i in range(old):
        part = HeapKeyedStateBackend.restore([source.checkpoint(1).complete()],
                                             key_group_range_for_operator(MP, old, i))
        handles.append(part.checkpoint(2).complete())
    news = [HeapKeyedStateBackend.restore(handles, key_group_range_for_operator(MP, new, i)) for i in range(new)]
    for backend in news:
        assert contents(backend) == restrict(everything, backend.key_group_range)
    merged = {name: sorted((e for b in news for e in contents(b)[name]), key=repr) for name in everything}
    assert merged == everything


def test_restore_range_not_covered_by_the_handles_is_an_error():
    backend = make_backend(KeyGroupRange(0, 7))
    with pytest.raises(ValueError, match="8..10 of the restore range"):
        HeapKeyedStateBackend.restore([backend.checkpoint(1).complete()], KeyGroupRange(5, 10))


def test_overlapping_handles_are_an_error():
    backend = make_backend()
    handle = backend.checkpoint(1).complete()
    with pytest.raises(ValueError, match="key group 0 is in two handles"):
        HeapKeyedStateBackend.restore([handle, handle])


def test_handles_of_different_states_do_not_merge():
    a = make_backend(KeyGroupRange(0, 7))
    b = HeapKeyedStateBackend(KeyGroupRange(8, 15), MP)
    b.register_state("lists", IntSerializer(), ListSerializer(LongSerializer()))
    with pytest.raises(CheckpointFormatError, match="differ"):
        HeapKeyedStateBackend.restore([a.checkpoint(1).complete(), b.checkpoint(1).complete()])
