"""A zoo of hostile and careless input, run as a user runs it (issue 24).

Every case runs the command line in a child process (or ``cowcheck.cli.main``
with captured streams) in a directory of its own, with the fixtures made here
in ``tmp_path``: a file is data (it never becomes code, never triggers a
download, never imports a module lying beside it), every read is bounded,
bad input is exit 2 with one line and nothing written, and nothing a run
finds is lost to a broken pipe, an unwritable directory or a second run.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shlex
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from cowcheck.cli import main
from cowcheck.core.counterexample import Counterexample, load, save
from cowcheck.core.failures import Failure
from cowcheck.core.files import write_atomically
from cowcheck.core.impls import resolve
from cowcheck.core.processes import module_command
from cowcheck.core.program import Step
from cowcheck.core.shrink import replay
from cowcheck.map import expected_results
from cowcheck.map.harness import Harness
from cowcheck.reference.checkpoint import CheckpointHandle, CheckpointStreamFactory, HeapKeyedStateBackend
from cowcheck.reference.checkpoint.format import INDEX_ENTRY, MAGIC, TRAILER_SIZE, U32, CheckpointMetadata, StateMetadata
from cowcheck.reference.checkpoint.handle import MAX_HANDLE_BYTES
from cowcheck.reference.checkpoint.restore import MAX_DATA_BYTES
from cowcheck.reference.errors import CheckpointFormatError
from cowcheck.reference.serializers import IntSerializer, ListSerializer
from cowcheck.reference.state_table import KeyGroupRange

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = [Step("put_and_get_old", (3, 3, [])), Step("transform", (0, 0, 0)), Step("snapshot", (0,)),
           Step("put_and_get_old", (3, 3, []))]  # fails mutant:skip-prefix-copy with INVARIANT I9
MARKER_MODULE = 'open({marker!r}, "w").write("imported")\n'


# ------------------------------------------------------------------ helpers


def cowcheck(*args, cwd, env=None, timeout=120):
    """The command line in a child process that, like the ``cowcheck`` script, does not put
    the working directory on sys.path; ``PYTHONPATH`` is this checkout only."""
    environment = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(module_command("cowcheck.cli", *map(str, args)), capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=timeout)


def in_process(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def one_line_usage_error(run):
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def tree(directory: Path) -> dict:
    """Every path below ``directory`` with its size and modification time."""
    return {str(p.relative_to(directory)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in directory.rglob("*")}


def clean_map_file(directory: Path, steps=PROGRAM) -> Path:
    make = lambda: resolve("mutant:skip-prefix-copy").new(capacity=4)
    failure = replay(steps, make, harness_class=Harness)
    cx = Counterexample.build(steps, failure, impl="mutant:skip-prefix-copy", machine="map", capacity=4,
                              found_by={"tool": "test"}, expected=expected_results(steps))
    return save(cx, directory)[0]


def variant(source: Path, target: Path, change) -> Path:
    data = json.loads(source.read_text())
    change(data)
    target.write_text(json.dumps(data))
    return target


# Clean files of the machines whose regressions replay through the harness: valid programs, any failure.
OTHER_MACHINES = {
    "checkpoint": [Step("kv_put", ("a", 1, 0, [1])), Step("checkpoint", (0, 0)), Step("complete", (0,))],
    "async": [Step("arrive", (0, [["add", "a", 1]])), Step("drain", (0,))],
    "table": [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("read_snapshot", (0,))],
    "backend": [Step("open", ("int", 8)), Step("update", ("value", 1, 0, 5)), Step("checkpoint", (0, "memory"))],
}


def clean_file_of(machine: str, directory: Path) -> Path:
    if machine == "map":
        return clean_map_file(directory)
    steps = OTHER_MACHINES[machine]
    cx = Counterexample.build(steps, Failure("DIVERGENCE", "C1", "a message", len(steps) - 1), impl="reference",
                              capacity=0, found_by={"tool": "test"}, machine=machine)
    return save(cx, directory)[0]


# ------------------------------------------- 1. a received file never becomes code


INJECTED = 'import os; open({marker!r}, "w")'
HOSTILE_TEXT = [
    '"""\n' + INJECTED + '\n"""',
    "x\n" + INJECTED,
    "x\r" + INJECTED,
    "\\\n" + INJECTED + "  # \x00\x1b[2K\u2028",
    "'''\n" + INJECTED + "\n'''",
]


def _statements(source: str) -> str:
    """The module's statements with every string constant and name of a test function blanked."""
    tree_ = ast.parse(source)
    for node in ast.walk(tree_):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
        if isinstance(node, ast.FunctionDef):
            node.name = "test"
    return ast.dump(tree_)


@pytest.mark.parametrize("machine", ["map", "checkpoint", "async", "table", "backend"])
def test_generated_tests_hold_exactly_the_statements_of_a_clean_file_whatever_its_strings(tmp_path, machine):
    marker = tmp_path / "INJECTED"
    clean = clean_file_of(machine, tmp_path / "in")
    code, _, err = in_process("replay", clean, "--to-pytest", "--impl", "reference", "--out-dir", tmp_path / "clean")
    assert code == 0, err
    expected = _statements(next((tmp_path / "clean").glob("*.py")).read_text())
    for i, text in enumerate(HOSTILE_TEXT):
        text = text.format(marker=str(marker))

        def hostile(data, text=text):
            data["failure"]["message"] = text
            data["implementation"]["spec"] = text
        # the file's own name carries the text too (a received file can be called anything)
        name = tmp_path / "in" / ("x" + text.replace("/", "_").replace("\x00", "") + ".json")
        path = variant(clean, name, hostile)
        out_dir = tmp_path / f"out{i}"
        code, _, err = in_process("replay", path, "--to-pytest", "--impl", "reference", "--out-dir", out_dir)
        assert code == 0, err
        (generated,) = out_dir.glob("*.py")
        source = generated.read_text()
        compile(source, str(generated), "exec")
        assert _statements(source) == expected, source
    assert not marker.exists()


def test_a_file_whose_failure_code_is_not_the_contracts_is_bad_input(tmp_path):
    marker = tmp_path / "INJECTED"
    clean = clean_map_file(tmp_path / "in")
    for i, text in enumerate(HOSTILE_TEXT + ["P66"]):
        path = variant(clean, tmp_path / "in" / f"code{i}.json",
                       lambda data, text=text.format(marker=str(marker)): data["failure"].update(code=text))
        code, _, err = in_process("replay", path, "--to-pytest", "--impl", "reference", "--out-dir", tmp_path / "o")
        assert code == 2 and "unknown failure code" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists() and not marker.exists()


def test_replay_shows_file_text_escaped_on_the_terminal(tmp_path):
    clean = clean_map_file(tmp_path)
    forged = "I9\x1b[2K\r   passes: the failure no longer reproduces\x07"

    def hostile(data):
        data["implementation"]["spec"] = "x\x1b]0;owned\x07"
        data["failure"]["message"] = forged
    path = variant(clean, tmp_path / "esc\x1b[1m.json", hostile)
    for args in (["replay", path, "--impl", "mutant:skip-prefix-copy", "--trace"],
                 ["shrink", path, "--impl", "mutant:skip-prefix-copy"]):
        run = cowcheck(*args, cwd=tmp_path)
        assert run.returncode == 1, run.stderr
        for stream in (run.stdout, run.stderr):
            assert "\x1b" not in stream and "\r" not in stream and "\x07" not in stream
    forged_code = variant(clean, tmp_path / "code.json", lambda d: d["failure"].update(code=forged))
    run = cowcheck("replay", forged_code, "--impl", "mutant:skip-prefix-copy", cwd=tmp_path)
    one_line_usage_error(run)  # not a code of the contract
    assert "\x1b" not in run.stderr and "\r" not in run.stderr and "\x07" not in run.stderr
    bad = variant(clean, tmp_path / "bad.json", lambda d: d["steps"][0].update(op="\x1b[2Jput"))
    run = cowcheck("replay", bad, cwd=tmp_path)
    one_line_usage_error(run)
    assert "\x1b" not in run.stderr


def test_checkpoint_inspect_shows_state_names_escaped(tmp_path):
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 3), 4, capacity=4,
                                    stream_factory=CheckpointStreamFactory(str(tmp_path), 0))
    backend.register_state("a\x1b[2K\rforged", IntSerializer(), ListSerializer(IntSerializer())).put(1, 0, [1])
    handle_path = backend.checkpoint(1).complete().save()
    run = cowcheck("checkpoint", "inspect", handle_path, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "\r" not in run.stdout


# ---------------------------- 2. nothing named in a file triggers a fetch or a cache write


def test_a_file_naming_a_release_not_cached_fetches_nothing(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    flink_file = variant(clean_map_file(tmp_path / "in"), tmp_path / "in" / "flink.json",
                         lambda d: d["implementation"].update(spec="flink@2.0.0", capacity=128))
    env = {"COWCHECK_CACHE_DIR": str(cache), "PIP_INDEX_URL": "http://127.0.0.1:9/nothing", "PIP_NO_INDEX": "1"}
    before = tree(tmp_path)
    for args in (["replay", flink_file], ["shrink", flink_file],
                 ["replay", flink_file, "--to-pytest", "--out-dir", tmp_path / "regressions"]):
        run = cowcheck(*args, cwd=tmp_path, env=env)
        one_line_usage_error(run)
        assert "--impl flink@2.0.0" in run.stderr
    assert tree(tmp_path) == before  # no cache entry, no regression, the file untouched


# --------------------------- 3. no command or worker imports from the working directory


def test_versions_does_not_import_a_module_lying_beside_the_files(tmp_path):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "attrs.py").write_text(MARKER_MODULE.format(marker=str(marker)))
    path = clean_map_file(tmp_path)
    run = cowcheck("versions", "--versions", "2.3.0", "--format", "json", path.name, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    outcome = json.loads(run.stdout)["counterexamples"][0]["outcomes"]["2.3.0"]["outcome"]
    assert outcome == "not applicable"  # capacity 4 on Flink's 128, decided by the release's process


def test_campaign_workers_do_not_import_a_module_lying_in_the_campaign_directory(tmp_path):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "attrs.py").write_text(MARKER_MODULE.format(marker=str(marker)))
    run = cowcheck("campaign", "--impl", "reference", "--seeds", "0:4", "--steps", "20", "--master", "local[1]",
                   "--out", "camp", cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not marker.exists()


# ----------------------------------- 4. bounded reads; non-regular files refused; bad input


def _big_sparse(path: Path, size: int, start: bytes = b"") -> Path:
    with open(path, "wb") as f:
        f.write(start)
        f.truncate(size)
    return path


def _counterexample_hostiles(tmp_path: Path) -> dict:
    """name -> a path that is not a counterexample cowcheck reads."""
    clean = clean_map_file(tmp_path / "in")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    digits = tmp_path / "digits.json"
    digits.write_text(clean.read_text().replace('"capacity": 4', '"capacity": ' + "9" * 5000))
    nan = tmp_path / "nan.json"
    nan.write_text(clean.read_text().replace('"actual": null', '"actual": NaN'))
    return {
        "fifo": fifo, "dev-zero": zero, "directory": tmp_path / "in",
        "too-large": _big_sparse(tmp_path / "large.json", 17 << 20),
        "deep": deep, "digits": digits, "nan": nan,
        "checks": variant(clean, tmp_path / "checks.json", lambda d: d.update(checks=[1])),
        "found-by": variant(clean, tmp_path / "found.json", lambda d: d.update(found_by="x")),
        "machine": variant(clean, tmp_path / "machine.json", lambda d: d.update(machine=["map"])),
        "capacity": variant(clean, tmp_path / "cap.json", lambda d: d["implementation"].update(capacity=1 << 40)),
        "bool-step": variant(clean, tmp_path / "bool.json", lambda d: d.update(failing_step=True)),
    }


@pytest.mark.parametrize("command", ["replay", "shrink", "to-pytest", "versions"])
def test_hostile_counterexample_files_are_one_line_exit_2_and_nothing_is_written(tmp_path, command):
    hostiles = _counterexample_hostiles(tmp_path)
    for name, path in hostiles.items():
        args = {"replay": ["replay", path], "shrink": ["shrink", path],
                "to-pytest": ["replay", path, "--to-pytest", "--out-dir", tmp_path / "regressions"],
                "versions": ["versions", "--versions", "2.3.0", path]}[command]
        before = tree(tmp_path)
        run = cowcheck(*args, cwd=tmp_path, timeout=60)  # a FIFO read would block past the timeout
        one_line_usage_error(run)
        assert tree(tmp_path) == before, name


def _checkpoint_steps(*steps) -> list:
    return [Step("kv_put", ("a", 1, 0, [1])), Step("checkpoint", (0, 0))] + list(steps)


@pytest.mark.parametrize("machine, steps", [
    ("checkpoint", _checkpoint_steps(Step("complete", (1,)))),  # a checkpoint never started
    ("checkpoint", _checkpoint_steps(Step("checkpoint", (0, 0)))),  # one id started twice
    ("checkpoint", [Step("checkpoint", ("0; import os", 0))]),
    ("checkpoint", [Step("kv_put", ("a", 1 << 40, 0, [1]))]),  # no IntSerializer writes this key
    ("checkpoint", [Step("kv_put", ("c", 1, 0, [1]))]),
    ("checkpoint", [Step("kv_put", ("a", 1, 0, [1 << 40]))]),
    ("checkpoint", _checkpoint_steps(Step("complete", (0,)), Step("restore", (0, 5, 2)))),
    ("checkpoint", _checkpoint_steps(Step("complete", (0,)), Step("rescale", (0, 0)))),
    ("checkpoint", [Step("checkpoint", (0, -1))]),
    ("async", [Step("advance_time", (10 ** 12,))]),
    ("async", [Step("arrive", ("k", [["add", "a", 1]]))]),
    ("async", [Step("arrive", (0, [["add", ["a"], 1]]))]),
    ("async", [Step("arrive", (0, [["put", "a", 1 << 70]]))]),
    ("async", [Step("arrive", (0, [["read", "a\x1b"]]))]),
    ("async", [Step("arrive", (0, []))]),
    ("async", [Step("run_mail", (10 ** 9,))]),
    ("table", [Step("put", (1 << 40, 0, [1]))]),
    ("table", [Step("snapshot", ("s",))]),
])
def test_step_arguments_outside_the_machines_domains_are_bad_input(tmp_path, machine, steps):
    cx = Counterexample.build(steps, Failure("DIVERGENCE", "C1", "m", len(steps) - 1), impl="reference", capacity=0,
                              found_by={}, machine=machine)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(cx.to_json()))
    code, out, err = in_process("replay", path)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1


def _checkpoint(tmp_path: Path, threshold: int = 0):
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 0), 1, capacity=4,
                                    stream_factory=CheckpointStreamFactory(str(tmp_path), threshold))
    backend.register_state("s", IntSerializer(), ListSerializer(IntSerializer())).put(7, 0, [1])
    return backend.checkpoint(3).complete()


def _with_first_entry_twice(handle: CheckpointHandle, target: Path) -> CheckpointHandle:
    """The handle's one-key-group checkpoint with its only entry written twice, checksums made good."""
    data = handle.read_bytes()
    start = handle.offsets[0][1]
    index = int.from_bytes(data[-TRAILER_SIZE:-TRAILER_SIZE + 8], "big")
    block = bytearray(data[start:index - 4])
    header = 4 + 2  # key group id, state id
    count = int.from_bytes(block[header:header + 4], "big")
    assert count == 1
    entry = bytes(block[header + 4:])
    block[header:header + 4] = (2).to_bytes(4, "big")
    block += entry
    body = data[:start] + bytes(block) + U32.pack(zlib.crc32(bytes(block)))
    new_index = len(body)
    body += b"CWIX" + U32.pack(1) + INDEX_ENTRY.pack(0, start)
    body += new_index.to_bytes(8, "big")
    body += U32.pack(zlib.crc32(body)) + b"CWCE"
    target.write_bytes(body)
    return CheckpointHandle(handle.checkpoint_id, handle.key_group_range, handle.max_parallelism, handle.offsets,
                            len(body), U32.unpack_from(body, len(body) - 8)[0], path=str(target))


def test_checkpoint_inspect_rejects_what_restore_rejects(tmp_path):
    twice = _with_first_entry_twice(_checkpoint(tmp_path), tmp_path / "twice.cwck")
    with pytest.raises(CheckpointFormatError):
        HeapKeyedStateBackend.restore([twice])
    handle_path = twice.save(str(tmp_path / "twice.handle.json"))
    for path in (handle_path, twice.path):
        one_line_usage_error(cowcheck("checkpoint", "inspect", path, cwd=tmp_path))


def test_checkpoint_inspect_reads_regular_files_only_and_no_more_than_recorded(tmp_path):
    handle = _checkpoint(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for data_path in (tmp_path / "zero", tmp_path / "fifo"):
        moved = CheckpointHandle(handle.checkpoint_id, handle.key_group_range, handle.max_parallelism,
                                 handle.offsets, handle.size, handle.checksum, path=str(data_path))
        one_line_usage_error(cowcheck("checkpoint", "inspect", moved.save(str(tmp_path / "h.handle.json")),
                                      cwd=tmp_path, timeout=60))
    too_big = _big_sparse(tmp_path / "big.cwck", MAX_DATA_BYTES + 10, start=MAGIC)
    for path in (tmp_path / "zero", tmp_path / "fifo", too_big, _big_sparse(tmp_path / "big.json", 5 << 20)):
        one_line_usage_error(cowcheck("checkpoint", "inspect", path, cwd=tmp_path, timeout=60))
    deep_id = "list<" * 10_000 + "int" + ">" * 10_000
    meta = CheckpointMetadata(1, 1, KeyGroupRange(0, 0), "int", [StateMetadata("s", "int", deep_id)])
    (tmp_path / "deep.cwck").write_bytes(meta.encode() + b"\0" * 64)
    assert (tmp_path / "deep.cwck").read_bytes()[:4] == MAGIC
    one_line_usage_error(cowcheck("checkpoint", "inspect", tmp_path / "deep.cwck", cwd=tmp_path))


def test_campaign_state_is_read_as_a_users_file(tmp_path):
    from cowcheck.spark_fuzz.store import CampaignStore, CampaignStoreError

    campaign = tmp_path / "camp"
    campaign.mkdir()
    os.mkfifo(campaign / "campaign.json")
    run = cowcheck("campaign", "--seeds", "0:2", "--out", campaign, "--resume", cwd=tmp_path, timeout=60)
    one_line_usage_error(run)
    (campaign / "campaign.json").unlink()
    (campaign / "runs").mkdir()
    (campaign / "runs" / "part-0.parquet").symlink_to("/dev/zero")
    with pytest.raises(CampaignStoreError):
        CampaignStore(campaign).runs()
    (campaign / "runs" / "part-0.parquet").unlink()
    (campaign / "runs" / "part-0.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(CampaignStoreError):
        CampaignStore(campaign).runs()


# ------------------------------------------------------------------- 5. nothing lost


def test_shrink_on_another_implementation_keeps_the_file_and_saves_the_other_failure_beside_it(tmp_path):
    path = clean_map_file(tmp_path)
    before = path.read_bytes()
    run = cowcheck("shrink", path, "--impl", "mutant:snapshot-version-not-bumped", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert path.read_bytes() == before
    others = [load(p) for p in tmp_path.glob("*.json") if p != path]
    assert [(o.implementation, o.failure.kind, o.failure.code) for o in others] == [
        ("mutant:snapshot-version-not-bumped", "DIVERGENCE", "P5")]


def test_shrink_of_a_file_that_now_fails_differently_keeps_it(tmp_path):
    path = clean_map_file(tmp_path)  # named ...--INVARIANT-I9.json, the name of what it now fails with
    variant(path, path, lambda d: d["failure"].update(code="I8"))
    before = path.read_bytes()
    run = cowcheck("shrink", path, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert path.read_bytes() == before
    (other,) = [p for p in tmp_path.glob("*.json") if p != path]
    assert (load(other).failure.kind, load(other).failure.code) == ("INVARIANT", "I9")


def test_a_campaign_directory_takes_one_run_at_a_time(tmp_path):
    from cowcheck.spark_fuzz.store import CampaignStore

    out = tmp_path / "camp"
    holder = CampaignStore(out)
    holder.acquire({"impl": "reference"}, False)
    try:
        run = cowcheck("campaign", "--seeds", "0:4", "--out", out, "--resume", cwd=tmp_path, timeout=120)
        one_line_usage_error(run)
        assert not (out / "campaign.json").exists()
    finally:
        holder.close()
    # The lock goes with the process that held it, however it ends.
    script = ("import os, sys; from cowcheck.spark_fuzz.store import CampaignStore; "
              f"CampaignStore({str(out)!r}).acquire({{}}, False); os._exit(9)")
    assert subprocess.run([sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=str(ROOT))).returncode == 9
    again = CampaignStore(out)
    again.acquire({}, False)
    again.close()


def test_versions_reports_a_bad_file_as_bad_and_the_others_as_they_are(tmp_path):
    good = tmp_path / "flink-26853.json"
    good.write_text((ROOT / "docs" / "findings" / "flink-26853-stale-copier.json").read_text())
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "cowcheck-counterexample", "format_version": 1, "checks": [')
    run = cowcheck("versions", "--versions", "2.3.0", "--format", "json", good.name, bad.name, cwd=tmp_path,
                   timeout=600)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 2  # the release's progress line, then the error
    rows = {Path(r["file"]).name: r["outcomes"]["2.3.0"]["outcome"]
            for r in json.loads(run.stdout)["counterexamples"]}
    assert rows == {"flink-26853.json": "passes", "bad.json": "bad file"}


def test_a_failure_found_survives_a_closed_pipe(tmp_path):
    process = subprocess.Popen(module_command("cowcheck.cli", "check", "--impl", "mutant:skip-prefix-copy",
                                              "--seed", "1", "--save-dir", str(tmp_path / "found")),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)))
    process.stdout.read(1)  # the reader goes away after the first byte (| head -c 1)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) == 1, err
    (stored,) = (tmp_path / "found").glob("*.json")
    assert (load(stored).failure.kind, load(stored).failure.code) == ("INVARIANT", "I9")
    assert not (tmp_path / ".cowcheck" / "internal-errors").exists()


def test_a_failure_found_is_stored_elsewhere_when_its_directory_refuses_it(tmp_path, monkeypatch):
    import errno
    import tempfile

    import cowcheck.core.counterexample as counterexample

    refused = tmp_path / "save"
    real = counterexample.write_atomically

    def read_only(path, content):
        if Path(path).parent == refused:
            raise OSError(errno.EROFS, "Read-only file system")
        return real(path, content)

    monkeypatch.setattr(counterexample, "write_atomically", read_only)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, out, err = in_process("check", "--impl", "mutant:skip-prefix-copy", "--seed", "1", "--save-dir", refused)
    assert code == 1, err
    said = [line for line in err.splitlines() if line.startswith("cowcheck:")]  # beside the progress line
    assert len(said) == 1, err
    (stored,) = (tmp_path / "tmp").rglob("*.json")
    assert str(stored) in said[0] and str(stored) in out
    assert (load(stored).failure.kind, load(stored).failure.code) == ("INVARIANT", "I9")


@pytest.mark.parametrize("args", [
    ["check", "--save-dir", "a-file/x"],
    ["check", "--save-dir", "a-file"],
    ["replay", "{cx}", "--to-pytest", "--out-dir", "a-file"],
    ["campaign", "--seeds", "0:2", "--out", "a-file"],
])
def test_an_output_directory_that_cannot_be_one_is_exit_2_up_front(tmp_path, args):
    (tmp_path / "a-file").write_text("not a directory")
    path = clean_map_file(tmp_path / "in")
    before = tree(tmp_path)
    run = cowcheck(*[a.format(cx=path) for a in args], cwd=tmp_path, timeout=120)
    one_line_usage_error(run)
    assert tree(tmp_path) == before


# -------------------------------------------------- 6. bounded arguments, sane files


@pytest.mark.parametrize("args", [
    ["campaign", "--seeds", f"0:{2 ** 70}"],
    ["campaign", "--seeds", f"{2 ** 64}:{2 ** 64 + 1}"],
    ["campaign", "--minutes", "inf"],
    ["campaign", "--partitions", str(10 ** 9)],
    ["campaign", "--steps", str(10 ** 9)],
    ["campaign", "--seed-time-limit", "1e300"],
    ["check", "--walks", str(10 ** 9)],
    ["check", "--examples", str(10 ** 30)],
    ["check", "--minutes", "inf"],
    ["check", "--minutes", "nan"],
    ["check", "--step-time-limit", "inf"],
    ["check", "--step-time-limit", "1e-300"],  # every call of a correct map would "time out"
    ["replay", "{cx}", "--step-time-limit", "0.01"],
    ["campaign", "--seed-time-limit", "0.5"],
    ["check", "--capacity", str(2 ** 40)],
    ["check", "--capacity", str(1 << 18)],  # a default check over 2 hours, > 1 GB
    ["check", "--keys", str(10 ** 12)],
    ["check", "--seed", str(2 ** 100)],
    ["mutants", "--examples", str(10 ** 30)],
    ["replay", "{cx}", "--step-time-limit", "1e9"],
    ["shrink", "{cx}", "--step-time-limit", "inf"],
    ["prove", "--workers", str(10 ** 6)],
])
def test_absurd_numbers_are_exit_2_at_once(tmp_path, args):
    path = clean_map_file(tmp_path / "in")  # a file that would replay: only the number is wrong
    before = tree(tmp_path)
    run = cowcheck(*[a.format(cx=path) for a in args], cwd=tmp_path, timeout=60)
    one_line_usage_error(run)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_are_written_with_the_users_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_atomically(tmp_path / "x.txt", "x")
        write_atomically(tmp_path / "y.bin", lambda p: p.write_bytes(b"y"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.txt").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "y.bin").stat().st_mode) == mode


def test_a_stored_counterexample_is_readable_by_the_group_under_umask_002(tmp_path):
    run = subprocess.run(["sh", "-c", 'umask 002 && exec "$@"', "sh",
                          *module_command("cowcheck.cli", "check", "--impl", "mutant:skip-prefix-copy", "--seed",
                                          "1", "--save-dir", "found")],
                         cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=300)
    assert run.returncode == 1, run.stderr
    (stored,) = (tmp_path / "found").glob("*.json")
    assert stat.S_IMODE(stored.stat().st_mode) == 0o664


# ------------------------------------------------- 7. long runs: the step limit's watchdog


def test_the_step_watchdog_never_reads_the_main_threads_frames(monkeypatch):
    """On CPython 3.11 reading another thread's frames while it runs (sys._current_frames()
    and f_back) can crash the interpreter or yield an object that is not a frame: a check at
    capacity 262,144 died of SIGSEGV after 12 minutes, and another exited 1 with nothing
    stored after 25 (the watchdog thread died of "'code' object has no attribute 'f_code'",
    so the dead man's switch ended the process). The watchdog reads what the main thread
    publishes instead, and still times the implementation's calls only."""
    import time as time_

    from cowcheck.core.failures import TIME_LIMIT, TIMEOUT
    from cowcheck.core.limits import StepTimeLimit

    def forbidden(*args, **kwargs):
        raise AssertionError("the watchdog read another thread's frames")

    monkeypatch.setattr(sys, "_current_frames", forbidden)
    reference = resolve("reference")

    class SlowHarness(Harness):
        def check_after_step(self, step):  # cowcheck's own checking: never the implementation's time
            time_.sleep(0.3)
            super().check_after_step(step)

    class SleepsInGet(type(reference.new(capacity=4))):
        def get(self, key, namespace):
            time_.sleep(0.3)
            return super().get(key, namespace)

    program = [Step("put", (1, 0, [1])), Step("get", (1, 0))]
    with StepTimeLimit(0.1):
        assert replay(program, lambda: reference.new(capacity=4), harness_class=SlowHarness) is None
        failure = replay(program, lambda: SleepsInGet(4), harness_class=Harness)
    assert (failure.kind, failure.code, failure.step_index) == (TIMEOUT, TIME_LIMIT, 1)



def test_the_limit_of_a_shrink_stores_what_is_stuck_as_the_run_does(monkeypatch):
    """An inner limit (shrinking's, replaying's) without on_stuck of its own uses the run's: a step
    stuck in native code while shrinking is stored, not lost (it was exit 1 with nothing stored)."""
    from cowcheck.core import limits

    stored, exits = [], []
    monkeypatch.setattr(limits.os, "_exit", exits.append)
    with limits.StepTimeLimit(5.0, on_stuck=stored.append), limits.StepTimeLimit(1.0) as inner:
        inner._stuck(3.0)
    assert stored == [3.0] and exits == [1]


# --------------------------------------------------------- 8. output that cannot be written


def test_a_failure_is_stored_when_the_command_starts_with_its_output_closed(tmp_path):
    """``cowcheck check >&- 2>&-`` (a cron job, a daemon): was an AttributeError traceback, exit 1
    from Python itself, nothing stored and an internal-error file."""
    for closes in ([">&-"], [">&-", "2>&-"], ["<&-", ">&-", "2>&-"]):
        save_dir = tmp_path / f"found{len(closes)}"
        command = " ".join([*map(shlex.quote, module_command("cowcheck.cli", "check", "--impl",
                                                               "mutant:skip-prefix-copy", "--seed", "1",
                                                               "--save-dir", str(save_dir))), *closes])
        run = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             timeout=300)
        assert run.returncode == 1, closes
        (stored,) = save_dir.glob("*.json")
        assert (load(stored).failure.kind, load(stored).failure.code) == ("INVARIANT", "I9")
    assert not (tmp_path / ".cowcheck").exists()  # no internal error


def _full_disk(monkeypatch, module):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(module, "mkstemp", full)


def test_a_full_disk_under_the_output_directory_is_one_line_exit_2(tmp_path, monkeypatch):
    """A regression test that cannot be written (a full disk, a read-only file system found late) is
    not cowcheck's own error: it was exit 3 with a traceback file."""
    import tempfile as tempfile_

    path = clean_map_file(tmp_path / "in")
    _full_disk(monkeypatch, tempfile_)
    monkeypatch.chdir(tmp_path)
    code, out, err = in_process("replay", path, "--to-pytest", "--out-dir", tmp_path / "regressions")
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"cowcheck: error: cannot write {tmp_path / 'regressions'}/") and \
        err.strip().endswith(".py (No space left on device)"), err
    assert not (tmp_path / ".cowcheck").exists()  # not an internal error


def test_a_campaign_whose_directory_cannot_take_its_lock_is_bad_usage(tmp_path, monkeypatch):
    import errno

    from cowcheck.spark_fuzz import store as store_module
    from cowcheck.spark_fuzz.store import CampaignStore, CampaignStoreError

    def full(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(store_module.os, "ftruncate", full)
    with pytest.raises(CampaignStoreError, match="No space left on device"):
        CampaignStore(tmp_path / "camp").acquire({}, False)


# ------------------------------------------------- 9. memory bounded by the work, not the input


def test_reading_a_counterexample_with_a_10_mib_message_stays_small(tmp_path):
    """The nesting check ran a regular expression over the file's strings: 1.3 GB for one 10 MiB string."""
    import tracemalloc

    from cowcheck.core.files import MIB, read_json

    path = variant(clean_map_file(tmp_path), tmp_path / "long.json",
                   lambda d: d["failure"].update(message="m" * (10 * MIB)))
    tracemalloc.start()
    try:
        data = read_json(path, what="a counterexample", limit=16 * MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(data["failure"]["message"]) == 10 * MIB
    assert peak < 5 * 10 * MIB, peak  # the bytes, the text, the parsed string, and change


def test_checkpoint_inspect_refuses_a_huge_data_file_without_reading_it(tmp_path):
    """A file claiming to be a checkpoint, larger than the reader reads without a handle: refused
    from its size (it read 256 MiB first: 599 MB of memory for an 8 GiB sparse file)."""
    import tracemalloc

    from cowcheck.cli.checkpoint import _read
    from cowcheck.checkpoint.inspect import inspect_checkpoint

    huge = _big_sparse(tmp_path / "huge.cwck", 8 << 30, start=MAGIC)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointFormatError, match="larger than"):
            inspect_checkpoint(str(huge), read=_read)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_HANDLE_BYTES, peak  # the first bytes, read to tell a handle from data (was 256 MiB)


def test_a_failures_values_are_described_within_bounds():
    """What a failure keeps of the map's values (json_data) never runs their code beyond the
    built-in types, and never more than a bounded amount of it."""
    from cowcheck.core.failures import json_data

    class Endless(list):
        def __iter__(self):
            while True:
                yield 0

    class ClassRaises(list):
        @property
        def __class__(self):
            raise RuntimeError("no class")

    assert json_data([1, (2, None), {"a": 1.5, 3: True}]) == [1, [2, None], {"a": 1.5, "3": True}]
    assert json_data([float("nan"), 2 ** 20000])[0] == "nan"
    assert json_data(Endless([1])) == "[1]" and json_data({"a": ClassRaises()}) == {"a": "[]"}  # __class__ never read
    big = json_data([0] * 5_000_000)
    assert isinstance(big, str) and big.endswith("(list of 5,000,000 items)")
    cyclic = []
    cyclic.append(cyclic)
    assert isinstance(json_data(cyclic), str)


def test_a_campaign_whose_disk_fills_at_the_end_keeps_its_verdict(tmp_path, monkeypatch):
    """The disk fills as the campaign ends (its counterexamples, plots, reports): was exit 2 (or 3)
    without the FAILURE lines; now the counterexample goes to a temporary directory, said in one
    line, the missing report in another, and the verdict is exit 1."""
    import errno
    import tempfile as tempfile_

    from cowcheck.spark_fuzz import driver
    from cowcheck.spark_fuzz.store import CampaignStore

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    real = CampaignStore.put_counterexample
    out = tmp_path / "camp"
    monkeypatch.setattr(CampaignStore, "put_counterexample", lambda self, signature, text, directory=None: full()
                        if Path(directory or self.counterexamples_dir) == self.counterexamples_dir
                        else real(self, signature, text, directory))
    monkeypatch.setattr(driver, "write_report", full)
    monkeypatch.setattr(tempfile_, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, out_text, err = in_process("campaign", "--impl", "mutant:skip-prefix-copy", "--seeds", "0:4", "--steps",
                                     "100", "--master", "local[1]", "--out", out)
    assert code == 1, out_text + err
    assert "FAILURE INVARIANT I9" in out_text and "report:" not in out_text
    said = [line for line in err.splitlines() if line.startswith("cowcheck:")]
    assert len(said) == 2 and "No space left on device" in said[1], err
    (stored,) = (tmp_path / "tmp").rglob("*.json")
    assert str(stored) in said[0] and load(stored).failure.code == "I9"
