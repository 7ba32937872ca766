"""The table machine's counterexamples as JUnit 5: Flink's own ``CopyOnWriteStateTable``.

The test lives in Flink's package ``org.apache.flink.runtime.state.heap`` (the
table's constructor is package-private) and builds what
``cowcheck.bridge.TableHandle`` builds: key groups 0-127 of 128, Integer keys
and namespaces, ``List<Integer>`` states registered first with a list
serializer whose ``copy`` returns its argument (nested, values declared
immutable), re-registered by ``set_meta_info`` with Flink's
``ListSerializer(IntSerializer)``. One source compiles on every release
1.13.6-2.3.0: ``InternalKeyContextImpl`` is this package's own up to 1.18.x and
``org.apache.flink.runtime.state``'s from 1.19.0, found either way through an
on-demand import (a same-package class wins over it).
"""

from __future__ import annotations

import json

from cowcheck.flink.junit.writer import Writer, java_string
from cowcheck.reference.hashing import key_group
from cowcheck.table.ops import TABLE_OPS

__all__ = ["TableWriter"]

MAX_PARALLELISM = 128


def _state(values) -> str:
    return "new ArrayList<>(List.of(" + ", ".join(str(int(v)) for v in values) + "))"


def _strings(items) -> str:
    return "List.of(" + ", ".join(java_string(i) for i in items) + ")"


class TableWriter(Writer):
    operations = TABLE_OPS
    package = "org.apache.flink.runtime.state.heap"
    crash_code = "T3"
    imports = ("java.io.IOException", "java.util.ArrayList", "java.util.Collections", "java.util.HashMap",
               "java.util.Iterator", "java.util.List", "java.util.Map",
               "org.apache.flink.api.common.state.StateDescriptor",
               "org.apache.flink.api.common.typeutils.TypeSerializer",
               "org.apache.flink.api.common.typeutils.TypeSerializerSnapshot",
               "org.apache.flink.api.common.typeutils.base.IntSerializer",
               "org.apache.flink.api.common.typeutils.base.ListSerializer",
               "org.apache.flink.core.memory.DataInputDeserializer",
               "org.apache.flink.core.memory.DataInputView",
               "org.apache.flink.core.memory.DataOutputSerializer",
               "org.apache.flink.core.memory.DataOutputView",
               "org.apache.flink.runtime.state.IterableStateSnapshot",
               "org.apache.flink.runtime.state.KeyGroupRange",
               "org.apache.flink.runtime.state.KeyGroupRangeAssignment",
               "org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo",
               "org.apache.flink.runtime.state.StateEntry",
               "org.apache.flink.runtime.state.StateSnapshot")
    cannot = {}

    def extra_imports(self) -> list[str]:
        return ["// InternalKeyContextImpl: this package's own up to 1.18.x (it wins over the on-demand import),",
                "// org.apache.flink.runtime.state's from 1.19.0 (found through it).",
                "import org.apache.flink.runtime.state.*;"]

    def setup(self) -> list[str]:
        return ["// A CopyOnWriteStateTable for key groups 0-127 of 128, its state registered with a serializer",
                "// whose copy returns its argument (values declared immutable), as cowcheck's table machine does.",
                "InternalKeyContextImpl<Integer> context =",
                "        new InternalKeyContextImpl<>(KeyGroupRange.of(0, MAX_PARALLELISM - 1), MAX_PARALLELISM);",
                "CopyOnWriteStateTable<Integer, Integer, List<Integer>> t = new CopyOnWriteStateTable<>(",
                "        context, metaInfo(new SameObjectListSerializer()), IntSerializer.INSTANCE);",
                "Map<Integer, StateSnapshot> snapshots = new HashMap<>();",
                "List<Integer> v;"]

    # ------------------------------------------------------------ steps

    def step_put(self, key, namespace, state):
        return [f"t.put({key}, group({key}), {namespace}, {_state(state)});"]

    def step_get(self, key, namespace):
        return [f"t.get({key}, {namespace});"]

    def step_get_mutate(self, key, namespace, value):
        return [f"v = t.get({key}, {namespace});", f"if (v != null) v.add({value});  // the caller mutates its state"]

    def step_set_meta_info(self):
        return ["t.setMetaInfo(metaInfo(new ListSerializer<>(IntSerializer.INSTANCE)));"]

    def step_snapshot(self, sid):
        return [f"snapshots.put({sid}, t.stateSnapshot());"]

    def step_read_snapshot(self, sid):
        return [f"entries(snapshots.get({sid}));"]

    def step_release(self, sid):
        return [f"snapshots.remove({sid}).release();"]

    def step_write_snapshot(self, sid):
        return [f"for (int g = 0; g < MAX_PARALLELISM; g++) written(snapshots.get({sid}), g);",
                f"snapshots.remove({sid});"]

    # ------------------------------------------------------------ failing checks (the model's values)

    def _model_state(self, key, namespace):
        state = self.model.model.get((key, namespace))
        return "null" if state is None else json.dumps(state)

    def expected(self) -> str:
        step = self.cx.steps[self.failing]
        if step.op in ("get", "get_mutate"):
            return f"t.get({step.args[0]}, {step.args[1]}) is {self._model_state(*step.args[:2])}"
        if step.op in ("read_snapshot", "write_snapshot"):
            frozen = self.model.frozen.get(step.args[0], [])
            return f"snapshot s{step.args[0]} holds {frozen[:8]}" + (" ..." if len(frozen) > 8 else "")
        return ""

    def fails_get(self, key, namespace):
        want = java_string(self._model_state(key, namespace))
        return [f"assertEquals({want}, String.valueOf(t.get({key}, {namespace})), "
                f"\"T1: t.get({key}, {namespace})\");"]

    def fails_get_mutate(self, key, namespace, value):
        want = java_string(self._model_state(key, namespace))
        return [f"v = t.get({key}, {namespace});",
                f"assertEquals({want}, String.valueOf(v), \"T1: t.get({key}, {namespace})\");",
                f"if (v != null) v.add({value});"]

    def fails_read_snapshot(self, sid):
        frozen = sorted(self.model.frozen.get(sid, []))
        return [f"assertEquals({_strings(frozen)}, entries(snapshots.get({sid})), "
                f"\"T2: snapshot s{sid} as read, against the model's copy frozen when it was taken\");"]

    def fails_write_snapshot(self, sid):
        groups: dict = {}
        for entry in self.model.frozen.get(sid, []):
            groups.setdefault(key_group(json.loads(entry)[0], MAX_PARALLELISM), []).append(entry)
        lines = ["Map<Integer, List<String>> frozen = new HashMap<>();  // key group -> what the model froze"]
        lines += [f"frozen.put({g}, {_strings(sorted(items))});" for g, items in sorted(groups.items())]
        lines += ["for (int g = 0; g < MAX_PARALLELISM; g++) {",
                  f"    assertEquals(frozen.getOrDefault(g, List.of()), written(snapshots.get({sid}), g),",
                  f"            \"T2: key group \" + g + \" of snapshot s{sid} as written, "
                  f"against the model's copy\");",
                  "}"]
        return lines

    # ------------------------------------------------------------ helpers

    def nested(self) -> str:
        return _NESTED


_NESTED = '''
static final int MAX_PARALLELISM = 128;

static int group(int key) {
    return KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
}

static RegisteredKeyValueStateBackendMetaInfo<Integer, List<Integer>> metaInfo(TypeSerializer<List<Integer>> s) {
    return new RegisteredKeyValueStateBackendMetaInfo<>(StateDescriptor.Type.VALUE, "cowcheck-table-state",
            IntSerializer.INSTANCE, s);
}

/** A snapshot's entries, every key group, as sorted "[key, namespace, state]". */
@SuppressWarnings("unchecked")
static List<String> entries(StateSnapshot snapshot) {
    IterableStateSnapshot<Integer, Integer, List<Integer>> s =
            (IterableStateSnapshot<Integer, Integer, List<Integer>>) snapshot;
    List<String> out = new ArrayList<>();
    for (int g = 0; g < MAX_PARALLELISM; g++) {
        Iterator<StateEntry<Integer, Integer, List<Integer>>> it = s.getIterator(g);
        while (it.hasNext()) {
            StateEntry<Integer, Integer, List<Integer>> e = it.next();
            out.add("[" + e.getKey() + ", " + e.getNamespace() + ", " + e.getState() + "]");
        }
    }
    Collections.sort(out);
    return out;
}

/** writeStateInKeyGroup's bytes for key group g (a checkpoint's), decoded: sorted "[key, namespace, state]". */
static List<String> written(StateSnapshot snapshot, int g) throws IOException {
    DataOutputSerializer out = new DataOutputSerializer(256);
    snapshot.getKeyGroupWriter().writeStateInKeyGroup(out, g);
    DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
    int count = in.readInt();
    List<String> entries = new ArrayList<>();
    ListSerializer<Integer> states = new ListSerializer<>(IntSerializer.INSTANCE);
    for (int i = 0; i < count; i++) {
        int namespace = IntSerializer.INSTANCE.deserialize(in);
        int key = IntSerializer.INSTANCE.deserialize(in);
        entries.add("[" + key + ", " + namespace + ", " + states.deserialize(in) + "]");
    }
    Collections.sort(entries);
    return entries;
}

/** Flink's ListSerializer(IntSerializer), except that copy returns its argument (values declared immutable). */
static final class SameObjectListSerializer extends TypeSerializer<List<Integer>> {
    private static final long serialVersionUID = 1L;
    private final TypeSerializer<List<Integer>> delegate = new ListSerializer<>(IntSerializer.INSTANCE);

    @Override public boolean isImmutableType() { return false; }
    @Override public TypeSerializer<List<Integer>> duplicate() { return this; }
    @Override public List<Integer> createInstance() { return delegate.createInstance(); }
    @Override public List<Integer> copy(List<Integer> from) { return from; }
    @Override public List<Integer> copy(List<Integer> from, List<Integer> reuse) { return from; }
    @Override public int getLength() { return delegate.getLength(); }
    @Override public void serialize(List<Integer> r, DataOutputView t) throws IOException { delegate.serialize(r, t); }
    @Override public List<Integer> deserialize(DataInputView s) throws IOException { return delegate.deserialize(s); }
    @Override public List<Integer> deserialize(List<Integer> r, DataInputView s) throws IOException {
        return delegate.deserialize(r, s);
    }
    @Override public void copy(DataInputView s, DataOutputView t) throws IOException { delegate.copy(s, t); }
    @Override public boolean equals(Object o) { return o instanceof SameObjectListSerializer; }
    @Override public int hashCode() { return 26853; }
    @Override public TypeSerializerSnapshot<List<Integer>> snapshotConfiguration() {
        return delegate.snapshotConfiguration();
    }
}
'''
