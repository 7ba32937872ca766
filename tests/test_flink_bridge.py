"""The Flink bridge (cowcheck.flink): Flink 2.3.0's own CopyOnWriteStateMap,
in this process's JVM, behind the docs/contract.md §15 API. Every test here runs the real jar."""

import io
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cowcheck.core.counterexample import load
from cowcheck.core.impls import resolve
from cowcheck.core.keys import fresh
from cowcheck.core.program import Step
from cowcheck.core.shrink import replay, shrink
from cowcheck.flink import FlinkCapacityError, FlinkStateMap, jvm, run_batch
from cowcheck.flink.jvm import GENERATED, Java
from cowcheck.flink.opcodes import OPS_JAVA, ops_java
from cowcheck.map.harness import Harness
from cowcheck.map.ops import MAP_OPS, draw_args
from cowcheck.map.parity import Failed, ParityContext, Raised, first_difference, observe
from cowcheck.reference import VOID_NAMESPACE, ConcurrentModificationError, CopyOnWriteStateMap, TimeWindow, Tuple2
from cowcheck.reference.serializers import IntSerializer, ListSerializer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter (its own JVM, or none), ``args`` its ``sys.argv[1:]``."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


# ----------------------------------------------------------------- resolving


def test_resolve_flink_is_white_box_and_starts_no_jvm():
    result = _python("""
        import jpype
        import cowcheck.flink
        from cowcheck.core.impls import resolve
        impl = resolve("flink")
        print(impl.spec, impl.white_box, jpype.isJVMStarted())
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["flink", "True", "False"]


def test_flink_with_options_is_an_unknown_implementation():
    from cowcheck.core.impls import UnknownImplementationError

    with pytest.raises(UnknownImplementationError) as caught:
        resolve("flink:fast")
    assert caught.value.spec == "flink:fast"


@pytest.mark.parametrize("capacity", [4, 64, 256, 128.0])
def test_capacity_other_than_128_is_a_usage_error_naming_the_fix(capacity):
    with pytest.raises(FlinkCapacityError) as caught:
        FlinkStateMap(capacity=capacity)
    assert caught.value.capacity == capacity
    assert "--capacity 128" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_jvm_reports_how_it_started():
    info = jvm()
    assert info.pid == os.getpid()
    assert any(path.endswith("flink-dist-2.3.0.jar") for path in info.classpath)
    assert info.start_seconds > 0


def test_starting_the_jvm_is_not_the_implementations_time_under_a_step_time_limit():
    """A limit far below the JVM's start-up does not cut the start-up short (that left a JVM half
    started, and every later map of the process failed to build: 'a JVM is already running'): the
    first build may still run past it warming up Flink's classes, the next one builds."""
    result = _python("""
        from cowcheck.core.boundary import build
        from cowcheck.core.failures import CheckFailure
        from cowcheck.core.limits import StepTimeLimit
        from cowcheck.flink import FlinkStateMap
        from cowcheck.flink.jvm import started

        with StepTimeLimit(0.2):
            try:
                build(FlinkStateMap)
            except CheckFailure as exc:
                print(exc.failure.kind, exc.failure.code, end=" ")
        m = build(FlinkStateMap)
        m.put(1, 0, [7])
        print(m.get(1, 0), started().start_seconds > 0.2)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["[7]", "True"], result.stdout


# -------------------------------------------------------- forks and executors


def test_forked_executors_each_start_their_own_jvm_on_first_use():
    result = _python("""
        import multiprocessing, os
        import jpype
        import cowcheck.flink
        from cowcheck.core.impls import resolve

        impl = resolve("flink")  # the driver resolves, and starts no JVM

        def work(n):
            m = impl.new(capacity=128)
            state = [n]
            m.put(n, 0, state)
            return m.get(n, 0) is state, jpype.isJVMStarted(), os.getpid()

        with multiprocessing.get_context("fork").Pool(2) as pool:
            results = pool.map(work, range(4))
        print(all(same and started for same, started, _ in results), jpype.isJVMStarted())
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]


def test_a_child_forked_after_the_jvm_started_gets_a_clear_error():
    result = _python("""
        import os
        from cowcheck.flink import FlinkStateMap, FlinkUnavailableError, jvm
        jvm()
        pid = os.fork()
        if pid == 0:
            try:
                FlinkStateMap()
            except FlinkUnavailableError as exc:
                os._exit(0 if "does not survive fork" in exc.reason else 2)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_missing_flink_jar_is_reported_without_starting_a_jvm(tmp_path):
    env = dict(os.environ, COWCHECK_FLINK_LIB=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", "from cowcheck.flink import available; print(available())"],
                            cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert "flink-dist-2.3.0.jar not found" in result.stdout


# ------------------------------------------------------------------ identity


def test_get_returns_the_callers_object_until_a_snapshot_then_one_fresh_copy():
    # Flink's testCopyOnWriteContracts, through the bridge.
    m = FlinkStateMap()
    original = [1]
    m.put(1, 0, original)
    assert m.get(1, 0) is original
    s = m.snapshot()
    copy = m.get(1, 0)
    assert copy == original and copy is not original
    assert m.get(1, 0) is copy
    s.release()
    assert m.get(1, 0) is copy


def test_in_place_mutation_of_a_returned_state_is_what_flink_copies_and_writes():
    m = FlinkStateMap()
    m.put(1, 0, [1])
    m.get(1, 0).append(2)  # no snapshot: the map's own object
    s = m.snapshot()
    copy = m.get(1, 0)
    copy.append(3)  # the copy is the map's now; the snapshot keeps [1, 2]
    assert list(s) == [(1, 0, [1, 2])]
    out = io.BytesIO()
    s.write_state(out, IntSerializer(), IntSerializer(), ListSerializer(IntSerializer()))
    assert out.getvalue().hex() == "00000001" "00000000" "00000001" "00000002" "00000001" "00000002"
    assert m.get(1, 0) == [1, 2, 3]


def test_transform_passes_the_old_state_and_a_copy_under_a_snapshot():
    m = FlinkStateMap()
    state = [1]
    m.put("k", "n", state)
    seen = []

    def append(old, value):
        seen.append(old)
        old.append(value)
        return old

    m.transform("k", "n", 2, append)
    assert seen[0] is state and m.get("k", "n") is state and state == [1, 2]
    s = m.snapshot()
    m.transform("k", "n", 3, append)
    assert seen[1] is not state and seen[1] == [1, 2, 3]
    assert list(s) == [("k", "n", [1, 2])]


def test_an_exception_in_the_transform_function_comes_back_unchanged():
    m = FlinkStateMap()

    def boom(old, value):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        m.transform(1, 0, 0, boom)
    m.put(1, 0, [1])  # the map is still usable
    assert m.get(1, 0) == [1]


def test_states_must_be_lists_of_int32_and_keys_of_the_key_types():
    m = FlinkStateMap()
    for bad_state in (["x"], [1 << 40]):
        with pytest.raises(TypeError):
            m.put(1, 0, bad_state)
    for bad_key in (1.5, (1, "a"), Tuple2(1.5, "a"), 1 << 70):
        with pytest.raises(TypeError):
            m.put(bad_key, 0, [])
    assert len(m) == 0
    m.put(1 << 40, "ns", [])
    m.put(True, -(1 << 63), [])
    m.put(Tuple2(-7, "\ud800x"), TimeWindow(0, 60_000), [1])
    m.put("", VOID_NAMESPACE, [2])
    assert sorted(map(repr, m)) == ["('', VOID_NAMESPACE, [2])", "(1099511627776, 'ns', [])",
                                    "(True, -9223372036854775808, [])",
                                    "(Tuple2(-7, '\\ud800x'), TimeWindow(0, 60000), [1])"]


def _same_java_object(a, b) -> bool:
    seen = Java.jpype.JClass("java.util.IdentityHashMap")()
    seen.put(a, 1)
    return bool(seen.containsKey(b))


def test_a_python_object_seen_again_is_the_same_java_object_a_new_one_a_new_java_object():
    """What the harness hands the map becomes what a Java caller would hand Flink: fresh keys as
    fresh Java objects (never Integer.valueOf's cached ones), held keys as the same object, values
    CPython keeps one object of as one Java object per value."""
    m = FlinkStateMap()
    to_java = m._keys
    for value in (-100, 1000, 1 << 40, "key", "日", "\ud800", Tuple2(300, "ab"), TimeWindow(0, 10)):
        held = fresh(value)
        assert _same_java_object(to_java(held), to_java(held)), value
        assert not _same_java_object(to_java(fresh(value)), to_java(fresh(value))), value
        assert to_java(fresh(value)).equals(to_java(held))  # equal objects, by Java's equals
    for value in (5, -5, 256, "", "é", True, VOID_NAMESPACE):
        assert _same_java_object(to_java(value), to_java(fresh(value))), value
    other = FlinkStateMap()
    assert not _same_java_object(to_java(1000 + 0), other._keys(1000 + 0))


def test_python_keys_only_the_bridge_refers_to_are_forgotten_held_ones_kept():
    m = FlinkStateMap()
    held = [fresh(10_000 + i) for i in range(50)]
    first = [m._keys(k) for k in held]
    for i in range(20_000):
        m.put(fresh(1_000_000 + i % 500), 0, [])
    assert len(m._keys) < 8_000
    assert all(_same_java_object(m._keys(k), j) for k, j in zip(held, first))


def test_a_release_without_a_key_type_refuses_it_naming_the_release_and_the_type(monkeypatch):
    from cowcheck.core.errors import UsageError
    from cowcheck.flink import WalkHarness, WalkMap, convert
    from cowcheck.flink.releases import selected_release

    jvm()
    monkeypatch.setitem(convert._MISSING, selected_release(), frozenset(convert.KEY_TYPE_CLASSES[TimeWindow][1][:1]))
    for make in (lambda: Harness(FlinkStateMap()), lambda: WalkHarness(WalkMap())):
        harness = make()
        harness.apply(Step("put", (1, 0, [1])))  # the other types still run
        with pytest.raises(convert.FlinkKeyTypeError) as caught:  # neither the map's failure nor cowcheck's
            harness.apply(Step("put", (1, TimeWindow(0, 10), [1])))
        assert isinstance(caught.value, UsageError) and caught.value.release == selected_release()
        assert "TimeWindow" in caught.value.what


def test_a_release_without_key_types_is_checked_on_the_families_it_takes_and_naming_one_is_bad_usage(tmp_path):
    # A release whose jar lacks Tuple2, VoidNamespace and TimeWindow is judged on int, long and string
    # keys (the families probe leaves the others out and says so); naming a family it cannot take is
    # bad usage in one line, nothing written.
    script = f"""
        import sys
        from cowcheck.flink import convert
        convert._MISSING["2.3.0"] = frozenset(c for _, cs in convert.KEY_TYPE_CLASSES.values() for c in cs)
        from cowcheck.cli import main
        sys.exit(main(["check", "--impl", "flink", "--examples", "20", "--seed", "1",
                       "--save-dir", {str(tmp_path)!r}] + sys.argv[1:]))
    """
    result = _python(script)
    assert result.returncode == 0, result.stdout + result.stderr
    notice = [line for line in (result.stdout + result.stderr).splitlines() if "left out of this run" in line]
    assert notice and all(name in notice[0] for name in ("tuple", "void", "window")), notice
    named = _python(script, "--key-families", "int,tuple")
    assert named.returncode == 2, named.stdout + named.stderr
    lines = named.stderr.strip().splitlines()
    assert len(lines) == 1 and "2.3.0" in lines[0] and "key family tuple" in lines[0], lines
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("key, namespace", [
    (Tuple2(-7, "\ud800\U0001f600"), TimeWindow(-(1 << 63), 0)),
    ("a\udfffé", VOID_NAMESPACE),
    ((1 << 63) - 1, 300),
], ids=["tuple-window", "string-void", "long-int"])
def test_every_answer_names_keys_as_the_python_types(key, namespace):
    """Keys coming back from Java (iteration, keys(), snapshots, visits, white-box entries) are the
    Python types the caller put, lone surrogates and non-BMP characters included."""
    m = FlinkStateMap()
    m.put(key, namespace, [1])
    s = m.snapshot()
    assert list(m) == [(key, namespace, [1])]
    assert list(m.keys(fresh(namespace))) == [key]
    assert list(s) == [(key, namespace, [1])]
    assert [(e.key, e.namespace) for e in s.entry_objects()] == [(key, namespace)]
    view = m.introspect()
    assert [(e.key, e.namespace) for e in view.primary_table if e is not None] == [(key, namespace)]
    assert all(type(e.key) is type(key) for e in view.primary_table if e is not None)
    visitor = m.incremental_visitor(4)
    rows = []
    while visitor.has_next():
        rows += visitor.next_entries()
    assert rows == [(key, namespace, [1])] and type(rows[0][1]) is type(namespace)
    s.release()


def test_twins_of_unreachable_states_are_forgotten_and_identity_still_holds():
    m = FlinkStateMap()
    held = {}
    for i in range(12_000):
        state = [i]
        m.put(i % 40, 0, state)
        held[i % 40] = state
        assert m.get(i % 40, 0) is held[i % 40]
    assert len(m._twins) < 4_500


# ---------------------------------------------------------------- iteration


def test_live_iteration_after_an_insert_raises_concurrent_modification_error():
    m = FlinkStateMap()
    for k in range(3):
        m.put(k, 0, [])
    it = iter(m)
    next(it)
    m.put(99, 0, [])
    with pytest.raises(ConcurrentModificationError) as caught:
        list(it)
    assert (caught.value.expected_mod_count, caught.value.actual_mod_count) == (3, 4)


def test_a_change_after_the_last_entry_raises_nothing():
    m = FlinkStateMap()
    m.put(1, 0, [])
    it = iter(m)
    assert next(it) == (1, 0, [])
    m.remove(1, 0)
    assert list(it) == []


def test_keys_and_size_of_namespace_are_flinks():
    m = FlinkStateMap()
    for k in range(5):
        m.put(k, k % 2, [])
    assert sorted(m.keys(1)) == [1, 3]
    assert m.size_of_namespace(0) == 3


def test_incremental_visitor_returns_whole_chains_and_removes_through_the_map():
    m = FlinkStateMap()
    for k in range(6):
        m.put(k, k, [k])  # key == namespace: hash 0, one chain
    visitor = m.incremental_visitor(4)
    chains = []
    while visitor.has_next():
        chain = visitor.next_entries()
        chains.append(chain)
        for entry in chain:
            if entry[0] % 2 == 0:
                visitor.remove(entry)
    assert [len(c) for c in chains if c] == [6]
    assert sorted(k for k, _, _ in m) == [1, 3, 5]


# ---------------------------------------------------------------- white box


def test_introspection_keeps_one_mirror_per_java_entry_across_views():
    m = FlinkStateMap()
    m.put(1, 0, [1])
    first = next(e for e in m.introspect().primary_table if e is not None)
    s = m.snapshot()
    m.put(2, 0, [2])
    view = m.introspect()
    assert first in view.primary_table
    m.get(1, 0)  # copy-on-write replaces the entry in the table
    view = m.introspect()
    copied = next(e for e in view.primary_table if e is not None and e.key == 1)
    assert copied is not first and first.entry_version == 0 and copied.entry_version == 1
    assert list(s.entry_objects()) == [first]
    assert (view.state_map_version, view.highest_required_snapshot_version, view.snapshot_versions) == (1, 1, {1})


def test_introspection_shows_flinks_table_at_the_98th_insert():
    m = FlinkStateMap()
    for k in range(98):
        m.put(k, 0, [])
    view = m.introspect()
    assert (len(view.primary_table), len(view.incremental_rehash_table), view.is_rehashing) == (128, 256, True)
    assert (view.threshold, view.rehash_index, view.primary_table_size) == (192, 0, 98)


# ------------------------------------------------------------------- batch


def test_the_helper_compiles_the_ops_java_generated_from_the_maps_table():
    """Java's operation codes are not written by hand: the compiled helper's Ops.java is the one
    rendered from MAP_OPS (kept beside the classes), and Java names the operations as the table does."""
    info = jvm()
    classes = Path(info.classpath[-1])
    assert (classes / GENERATED / OPS_JAVA).read_text(encoding="utf-8") == ops_java()
    assert list(Java.Walk.operations()) == list(MAP_OPS.names)


def test_a_program_of_every_operation_runs_on_flink_in_one_call_as_on_the_reference():
    context = ParityContext(random.Random(0), list(range(8)), [0, 1], 0.5, False)
    program = [Step("put", (k, 0, [k])) for k in range(8)]
    for op in MAP_OPS:
        if not context.allows(op):
            program.append(Step("snapshot", draw_args(MAP_OPS["snapshot"], context)))
        program.append(Step(op.name, draw_args(op, context)))
    assert {s.op for s in program} == set(MAP_OPS.names)
    flink = run_batch(program, "every_step")
    assert first_difference(observe(CopyOnWriteStateMap(capacity=128), program, "every_step"), flink) is None
    assert len(flink[0]) == len(program) and not any(isinstance(a, Failed) for row in flink[0] for a in row[0])


def test_batch_runs_a_program_in_one_call_with_identity_numbers():
    program = [Step("put", (1, 0, [5])), Step("get", (1, 0)), Step("snapshot", (0,)), Step("get_mutate", (1, 0, 6)),
               Step("read_snapshot", (0,)), Step("iterate_modify", (0, 2, 0, "put"))]
    steps, final = run_batch(program, detail="results")
    answers = [row[0] for row in steps]  # states as [content, number]: the copy under the snapshot is a new one
    assert answers == [[None], [[[5], 1]], [1, 1], [[[5], 2]], [False, [1, 0, [[5], 1]], "end", 1],
                       [None, Raised("ConcurrentModificationError")]]  # an insert before the first next()
    assert final is None


def test_batch_rejects_an_unknown_snapshot_transformer():
    with pytest.raises(ValueError, match="expected one of append_marker, drop_even, none, got 'nope'"):
        run_batch([Step("snapshot", (0,)), Step("read_snapshot_transformed", (0, "nope"))])


# ------------------------------------------------------------- command line


def _cowcheck(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cowcheck", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_cowcheck_check_impl_flink_runs_the_machine_on_flink(tmp_path):
    result = _cowcheck("check", "--impl", "flink", "--capacity", "128", "--examples", "3", "--seed", "1",
                       "--profile", "ci", "--save-dir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "flink (Apache Flink 2.3.0 CopyOnWriteStateMap" in result.stdout
    assert "white-box" in result.stdout


def test_cowcheck_check_impl_flink_defaults_to_capacity_128(tmp_path):
    result = _cowcheck("check", "--impl", "flink", "--examples", "1", "--seed", "1", "--save-dir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "capacity 128" in result.stdout


def test_cowcheck_check_impl_flink_at_another_capacity_is_bad_usage(tmp_path):
    result = _cowcheck("check", "--impl", "flink", "--capacity", "4", "--examples", "1", "--save-dir", str(tmp_path))
    assert result.returncode == 2
    assert "capacity 128" in result.stderr and "Traceback" not in result.stderr


def test_cowcheck_replay_impl_flink_reproduces_the_live_iteration_finding():
    result = _cowcheck("replay", "docs/findings/live-iteration-rehash.json", "--impl", "flink")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "reproduces at step 98: DIVERGENCE P7" in result.stdout


def test_finding_counterexamples_are_valid_and_name_flink():
    for name in ("live-iteration-rehash.json", "live-iteration-rehash-skip.json"):
        with open(os.path.join(ROOT, "docs", "findings", name)) as f:
            data = json.load(f)
        assert data["implementation"] == {"spec": "flink", "capacity": 128, "copier": "deepcopy"}
        assert data["checks"]["strict_live_iteration"] is True
        assert (data["failure"]["kind"], data["failure"]["code"]) == ("DIVERGENCE", "P7")


# ------------------------------------------------------------------ machines


def test_map_machine_on_flink_with_keys_enough_to_rehash_passes_and_reaches_the_rehash_scenarios():
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from cowcheck.map.machine import MachineConfig, make_map_machine
    from cowcheck.core.machine import RunRecord

    record = RunRecord()
    # The classic world (int keys 0..159, namespaces 0..1) drives one table through rehashes under snapshots.
    machine = make_map_machine(FlinkStateMap, MachineConfig(capacity=128, keys=160, namespaces=2, space="classic"),
                               record, impl_spec="flink")
    run_state_machine_as_test(machine, settings=settings(settings.get_profile("ci"), max_examples=60,
                                                         stateful_step_count=300))
    assert machine.impl_spec == "flink"
    assert record.coverage["rehash-step-copies"] > 0
    assert record.coverage["rehash-finish-under-snapshot"] > 0


def test_map_machine_on_flink_over_every_key_family_passes_and_hands_every_kind_of_key():
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from cowcheck.core.machine import RunRecord
    from cowcheck.map.machine import MachineConfig, make_map_machine

    record = RunRecord()
    machine = make_map_machine(FlinkStateMap, MachineConfig(capacity=128, keys=40, namespaces=3), record,
                               impl_spec="flink")
    run_state_machine_as_test(machine, settings=settings(settings.get_profile("ci"), max_examples=60,
                                                         stateful_step_count=120))
    kinds = set(record.space.keys) | set(record.space.namespaces)
    assert {"Tuple2", "TimeWindow", "VoidNamespace", "long, beyond int32", "int, > 256"} <= kinds, kinds
    assert any(k.startswith("string") for k in kinds), kinds
    assert record.space.fresh > 0 and record.space.held > 0


@pytest.mark.parametrize("name", ["live-iteration-rehash.json", "live-iteration-rehash-skip.json"])
def test_the_live_iteration_finding_is_flinks_and_the_references_alike(name):
    cx = load(os.path.join(ROOT, "docs", "findings", name))
    for make in (FlinkStateMap, lambda: CopyOnWriteStateMap(capacity=128)):
        strict = replay(list(cx.steps), make, harness_class=Harness, white_box=True, strict_live_iteration=True)
        assert (strict.kind, strict.code, strict.step_index) == ("DIVERGENCE", "P7", cx.failing_step)
        lenient = Harness(make(), white_box=True)
        for step in cx.steps:
            lenient.apply(step)
        assert lenient.findings["live-iteration-quirk"] == 1


def test_the_shorter_live_iteration_counterexample_is_minimal_for_the_shrinker():
    cx = load(os.path.join(ROOT, "docs", "findings", "live-iteration-rehash.json"))
    steps, _ = shrink(list(cx.steps), cx.failure, FlinkStateMap, harness_class=Harness, white_box=False,
                      strict_live_iteration=True)
    assert len(steps) == len(cx.steps) == 99


def test_spec_3_flinks_private_constructor_with_capacity_0_writes_into_the_shared_empty_table():
    # In a subprocess: the stray entry would show up in every map of this JVM.
    result = _python("""
        import jpype
        from cowcheck.flink import FlinkStateMap, jvm
        jvm()
        Map = jpype.JClass("org.apache.flink.runtime.state.heap.CopyOnWriteStateMap")
        constructor = Map.class_.getDeclaredConstructor(
            jpype.JInt, jpype.JClass("org.apache.flink.api.common.typeutils.TypeSerializer"))
        constructor.setAccessible(True)
        serializer = jpype.JClass("org.apache.flink.api.common.typeutils.base.IntSerializer").INSTANCE
        Integer = jpype.JClass("java.lang.Integer")
        state = jpype.JClass("java.util.ArrayList")()
        state.add(Integer.valueOf(3))
        constructor.newInstance(jpype.JInt(0), serializer).put(Integer.valueOf(1), Integer.valueOf(2), state)
        other = FlinkStateMap()  # capacity 128, not rehashing: its rehash table is the shared empty table
        other.put(7, 0, [7])
        print(len(other), list(other))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 [(7, 0, [7]), (1, 2, [3])]"


def test_the_resolved_implementation_builds_capacity_128_maps_by_default():
    impl = resolve("flink")
    assert len(impl.new().introspect().primary_table) == 128
    with pytest.raises(FlinkCapacityError):
        impl.new(capacity=4)
