"""Savepoints, upgrades and streams on Flink's own heap backend (one JVM per test process: 2.3.0 here,
other releases in processes of their own)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cowcheck.flink  # noqa: F401  (registers --impl flink)
import cowcheck.registry  # noqa: F401
from cowcheck.backend import BackendHarness, reference_flink_format_backend
from cowcheck.backend.ops import STATES, descriptor_of
from cowcheck.backend.values import typed
from cowcheck.core.program import Step as S
from cowcheck.flink.backend import FlinkCheckpointHandle, FlinkStateBackend
from cowcheck.flink.backend_releases import describe_handle, rebuild_handle
from cowcheck.flink.jvm import Java
from cowcheck.reference.checkpoint.flink_format.savepoint_restore import FlinkSavepointData
from cowcheck.reference.serializers import IntSerializer
from cowcheck.reference.state_table import KeyGroupRange

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = ROOT / "docs" / "findings"
WHOLE = KeyGroupRange(0, 7)


def _filled(backend):
    kb = backend.create_keyed_state_backend(IntSerializer(), 8, WHOLE)
    states = {s.name: kb.get_or_create_keyed_state(IntSerializer(), descriptor_of(s)) for s in STATES}
    for key in (1, 2, 77):
        kb.set_current_key(key)
        for spec in STATES:
            state = states[spec.name]
            state.set_current_namespace(key % 3)
            value = typed(spec.value_type, 1, key)
            {"value": lambda: state.update(value), "list": lambda: state.add(value),
             "map": lambda: state.put(key % 4, value), "reducing": lambda: state.add(key)}[spec.kind]()
    return kb


def _content(handle) -> tuple:
    """The proxy's states and, per key group, each state's (key, value) byte pairs: the canonical
    savepoint up to the order of its states (Flink's changes from one JVM to the next)."""
    data = FlinkSavepointData(handle.read_bytes(), "f", handle, 8)
    names = data.state_names
    groups = {group: sorted((names[state_id], key, value) for _, state_id, key, value in
                            data._read_pairs(group, *data.extents[group])) for group in data.extents}
    return set(data.proxy.states), groups


@pytest.mark.parametrize("compressed", [False, True])
def test_flink_and_the_reference_write_the_same_canonical_savepoint_up_to_state_order_and_read_each_others(compressed):
    flink = _filled(FlinkStateBackend()).savepoint(1, None, True, compressed=compressed).run()
    text = str(Java.jpype.JClass("cowcheck.bridge.BackendHandle").describe(flink.java))
    from_flink = rebuild_handle(text, 8)
    from_reference = _filled(reference_flink_format_backend()).savepoint(1, None, True, compressed=compressed).run()
    assert _content(from_flink) == _content(from_reference)
    for handle in (from_flink, from_reference):  # the proxy's flag: Flink compresses savepoints too
        assert FlinkSavepointData(handle.read_bytes(), "f", handle, 8).proxy.compressed == compressed
    if not compressed:  # (snappy's compressed bytes differ between its implementations)
        assert from_flink.size == from_reference.size
    # each restores the other's: the same reads
    restored = FlinkStateBackend().create_keyed_state_backend(
        IntSerializer(), 8, WHOLE, [FlinkCheckpointHandle(Java.jpype.JClass("cowcheck.bridge.BackendHandle").rebuild(
            describe_handle(from_reference)))])
    again = reference_flink_format_backend().create_keyed_state_backend(IntSerializer(), 8, WHOLE, [from_flink])
    assert _reads(restored) == _reads(again)


def _reads(kb) -> list:
    states = {s.name: kb.get_or_create_keyed_state(IntSerializer(), descriptor_of(s)) for s in STATES}
    out = []
    for key in (1, 2, 77):
        kb.set_current_key(key)
        for spec in STATES:
            state = states[spec.name]
            state.set_current_namespace(key % 3)
            got = state.value() if spec.kind == "value" else state.entries() if spec.kind == "map" else state.get()
            out.append(sorted(got, key=repr) if spec.kind == "map" else list(got) if spec.kind == "list" else got)
    return out


def test_the_new_steps_pass_on_flink_2_3_0():
    harness = BackendHarness(FlinkStateBackend(), async_part="inline")
    steps = [S("open", ("int", 8)), S("update", ("value_kryo", 1, 0, 4)), S("list_add", ("list_pojo", 2, 1, 5)),
             S("update", ("value_pojo", 1, 0, 7)), S("pojo_mutate", ("value_pojo", 1, 0, 1, 9)),
             S("savepoint", (0, "canonical", "file")), S("savepoint_async", (1, "native", "memory", 3)),
             S("forms", ("memory",)), S("rescale", (0, 3)),
             *(S("checkpoint_threshold", (2 + i, r, "checkpoint")) for i, r in enumerate(("below", "at", "above"))),
             S("upgrade", ("canonical", 2, "flipped")), S("upgrade", ("native", 4, "same")),
             S("upgrade", ("checkpoint", 3, "flipped")), S("tail_checkpoint", (1, 6, "checkpoint"))]
    try:
        for step in steps:
            harness.apply(step)
    finally:
        harness.close()
    assert harness.coverage["schema-incompatible-refused"] == 1 and harness.schema == 3
    assert harness.coverage["threshold-at"] == 1 and harness.coverage["restore-file-handle"] > 0


@pytest.mark.parametrize("finding, reproduces_up_to", [("kryo-empty-array-ends-memory-checkpoint", "1.16.3"),
                                                      ("kryo-empty-array-in-canonical-savepoint", "1.15.4")])
def test_a_kryo_value_ending_in_an_empty_array_reproduces_up_to_its_fix(finding, reproduces_up_to):
    versions = ["1.13.6", reproduces_up_to, "1.17.2"]
    run = subprocess.run([sys.executable, "-m", "cowcheck.cli", "versions", str(FINDINGS / f"{finding}.json"),
                          "--versions", ",".join(versions), "--format", "json"], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
    assert run.returncode == 0, run.stderr
    (row,) = json.loads(run.stdout)["counterexamples"]
    assert {v: o["outcome"] for v, o in row["outcomes"].items()} == {
        "1.13.6": "reproduces", reproduces_up_to: "reproduces", "1.17.2": "passes"}
