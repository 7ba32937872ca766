"""`cowcheck checkpoint inspect` as a user runs it: output, exit codes, one-line errors."""

import subprocess
import sys
from pathlib import Path

import pytest

from cowcheck.reference.checkpoint import CheckpointStreamFactory, HeapKeyedStateBackend
from cowcheck.reference.serializers import IntSerializer, ListSerializer, MapSerializer, StringSerializer
from cowcheck.reference.state_table import KeyGroupRange

ROOT = Path(__file__).resolve().parent.parent


def cowcheck(*args):
    return subprocess.run([sys.executable, "-m", "cowcheck.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _backend(directory, threshold):
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4,
                                    stream_factory=CheckpointStreamFactory(str(directory), threshold))
    clicks = backend.register_state("clicks", IntSerializer(), ListSerializer(IntSerializer()))
    names = backend.register_state("names", StringSerializer(), MapSerializer(StringSerializer(), IntSerializer()))
    for k in range(30):
        clicks.put(k, k % 2, [k])
        if k % 3 == 0:
            names.put(k, "ns", {"n": k})
    return backend


@pytest.fixture
def spilled(tmp_path):
    handle = _backend(tmp_path, 0).checkpoint(7).complete()
    return handle, handle.save()


def _one_line_error(run):
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    return run.stderr.strip()


def test_inspect_a_handle_prints_metadata_key_groups_offsets_and_entry_counts(spilled):
    handle, handle_path = spilled
    run = cowcheck("checkpoint", "inspect", handle_path)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.startswith(f"checkpoint 7 (format version 1), handle {handle_path}")
    assert f"data: file {handle.path}, {handle.size:,} bytes, crc32 {handle.checksum:08x} (verified)" in out
    assert "key groups [0, 7] of max_parallelism 8, key serializer int" in out
    assert "  0  clicks" in out and "map<string,int>" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit() and len(line.split()) == 5]
    assert [(int(r[0]), int(r[1].replace(",", ""))) for r in rows] == list(handle.offsets)
    assert out.splitlines()[-1].split()[-2:] == ["30", "10"]  # totals per state


def test_inspect_a_data_file_without_its_handle(spilled):
    handle, _ = spilled
    run = cowcheck("checkpoint", "inspect", handle.path)
    assert run.returncode == 0, run.stderr
    assert "handle" not in run.stdout.splitlines()[0] and f"data: file {handle.path}" in run.stdout


def test_inspect_an_inline_handle(tmp_path):
    handle = _backend(tmp_path, 1 << 20).checkpoint(2).complete()
    path = handle.save(str(tmp_path / "small.handle.json"))
    run = cowcheck("checkpoint", "inspect", path)
    assert run.returncode == 0, run.stderr
    assert "data: inline in the handle" in run.stdout


def test_a_corrupted_file_is_one_line_naming_file_offset_and_problem(spilled):
    handle, handle_path = spilled
    data = bytearray(Path(handle.path).read_bytes())
    group, offset = handle.offsets[2]
    data[offset + 5] ^= 0xFF
    Path(handle.path).write_bytes(bytes(data))
    err = _one_line_error(cowcheck("checkpoint", "inspect", handle_path))
    assert err == (f"cowcheck: error: {handle.path}: offset {offset}: checksum mismatch in key group {group} "
                   f"(stored {err.split('stored ')[1]}")


def test_a_truncated_file_is_one_line(spilled):
    handle, handle_path = spilled
    cut = handle.size - 10
    Path(handle.path).write_bytes(Path(handle.path).read_bytes()[:cut])
    assert f"{handle.path}: offset {cut}: truncated" in _one_line_error(cowcheck("checkpoint", "inspect", handle_path))
    # Without the handle the size is unknown: the missing end marker gives it away.
    assert f"{handle.path}: offset {cut - 4}: no end marker" in _one_line_error(
        cowcheck("checkpoint", "inspect", handle.path))


@pytest.mark.parametrize("content, problem", [
    (b"just some text\n", "not a handle file"),
    (b'{"format": "something-else"}', "not a handle file"),
    (b"", "not a handle file"),
])
def test_something_else_is_one_line(tmp_path, content, problem):
    path = tmp_path / "thing"
    path.write_bytes(content)
    err = _one_line_error(cowcheck("checkpoint", "inspect", str(path)))
    assert f"{path}: offset " in err and problem in err


def test_a_missing_file_and_a_missing_argument_are_one_line(tmp_path):
    assert "cannot read" in _one_line_error(cowcheck("checkpoint", "inspect", str(tmp_path / "nope.cwck")))
    _one_line_error(cowcheck("checkpoint", "inspect"))
    _one_line_error(cowcheck("checkpoint"))


def test_help_lists_inspect():
    run = cowcheck("checkpoint", "--help")
    assert run.returncode == 0 and "inspect" in run.stdout
