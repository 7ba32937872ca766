"""The backend machine's counterexamples as JUnit 5: Flink's own ``HeapKeyedStateBackend``.

The test builds what ``cowcheck.bridge.BackendHandle`` builds, written out in a
nested class ``Backend``: the backend by Flink's ``HeapKeyedStateBackendBuilder``
(its one public constructor's arguments filled by their types: 14 up to 2.0, 15
from 2.1), the states of :data:`~cowcheck.backend.ops.STATES` registered
through descriptors with their time-to-live (``StateTtlConfig.newBuilder`` takes a
``Time`` before 1.19 and a ``Duration`` from 2.0, reached by reflection), a
``TtlTimeProvider`` the steps move, checkpoints by the backend's own ``snapshot``
into a ``MemCheckpointStreamFactory`` (snappy-compressed from a ``compress(True)`` step: the
snapshot strategy's decorator set by reflection, as the bridge sets it), savepoints as Flink's
``StreamOperatorStateHandler`` takes them (a canonical one through ``prepareCanonicalSavepoint``,
``prepareSavepoint`` before 1.15, run by a ``SnapshotStrategyRunner``; a native one by the
backend's own ``snapshot`` with savepoint options, 1.15 on), the POJO and Kryo states' values of
classes of the test's own (``Account``, ``Blob``: the fields of ``cowcheck.backend.values``' class
version 1). A failing savepoint step restores the savepoint into a fresh backend (it must build);
``tail_checkpoint`` builds its backend of one key group, snapshots it and restores it. One source
compiles on every release 1.13.6-2.3.0. Restores of the program's checkpoints, checkpoints to files,
snapshots on a thread of their own and upgrades are not written yet.
"""

from __future__ import annotations

import json

from cowcheck.backend.ops import BACKEND_OPS, STATES
from cowcheck.backend.values import tail_blob, typed
from cowcheck.core.failures import CRASH
from cowcheck.flink.junit.writer import JUnitUnsupported, Writer, java_string

__all__ = ["BackendWriter"]

_NOT_YET = "restores are not written as JUnit yet"


def _key(key) -> str:
    """A key as the Java literal of the type its family has (Integer, Long, String)."""
    if isinstance(key, str):
        return java_string(key)
    return f"{key}L" if not -(1 << 31) <= key < (1 << 31) else str(key)


def _value(value) -> str:
    return "null" if value is None else str(int(value))


_TYPES = {s.name: s.value_type for s in STATES}


def _bytes(data) -> str:
    if data is None:
        return "null"
    return "new byte[] {" + ", ".join(f"(byte) {b}" for b in data) + "}"


def _typed(state: str, value) -> str:
    """A value of ``state`` as Java: an int, or a new ``Account``/``Blob`` (values.typed, class version 1)."""
    value_type = _TYPES[state]
    if value is None or value_type == "int":
        return _value(value)
    return _object(typed(value_type, 1, value))


def _object(record) -> str:
    f = record.fields
    if "tag" in f:
        return f"Blob.of({_bytes(f['data'])}, {f['n']}, {_bytes(f['tag'])})"
    history = "null" if f["history"] is None else "new long[] {" + ", ".join(f"{v}L" for v in f["history"]) + "}"
    owner = "null" if f["owner"] is None else java_string(f["owner"])
    return f"Account.of({history}, {f['id']}, {owner})"


def _show_blob(record) -> str:
    """A Blob as ``Blob.show`` writes it (Java's Arrays.toString of signed bytes)."""
    def array(data):
        return "null" if data is None else "[" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "]"
    f = record.fields
    return f"Blob(data={array(f['data'])}, n={f['n']}, tag={array(f['tag'])})"


def _answer(op: str, want) -> str:
    """The model's answer as the string ``Backend.show`` makes of Flink's (Java's toString forms)."""
    if want is None:
        return "null"
    if op == "map_entries":
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(want.items())) + "}"
    if op == "map_contains":
        return "true" if want else "false"
    return json.dumps(want) if isinstance(want, list) else str(want)


class BackendWriter(Writer):
    operations = BACKEND_OPS
    package = "org.apache.flink.runtime.state.heap"
    crash_code = "K6"
    imports = ("java.lang.reflect.Constructor", "java.lang.reflect.Field", "java.lang.reflect.Method",
               "java.util.ArrayList", "java.util.Arrays", "java.util.Collection",
               "java.util.Collections", "java.util.HashMap", "java.util.List", "java.util.Map",
               "java.util.TreeMap", "java.util.concurrent.RunnableFuture",
               "org.apache.flink.api.common.ExecutionConfig",
               "org.apache.flink.api.common.functions.ReduceFunction",
               "org.apache.flink.api.common.state.ListState",
               "org.apache.flink.api.common.state.ListStateDescriptor",
               "org.apache.flink.api.common.state.MapState",
               "org.apache.flink.api.common.state.MapStateDescriptor",
               "org.apache.flink.api.common.state.ReducingState",
               "org.apache.flink.api.common.state.ReducingStateDescriptor",
               "org.apache.flink.api.common.state.State",
               "org.apache.flink.api.common.state.StateDescriptor",
               "org.apache.flink.api.common.state.StateTtlConfig",
               "org.apache.flink.api.common.state.ValueState",
               "org.apache.flink.api.common.state.ValueStateDescriptor",
               "org.apache.flink.api.common.typeutils.TypeSerializer",
               "org.apache.flink.api.common.typeutils.base.IntSerializer",
               "org.apache.flink.api.common.typeutils.base.LongSerializer",
               "org.apache.flink.api.common.typeutils.base.StringSerializer",
               "org.apache.flink.api.common.typeinfo.TypeInformation",
               "org.apache.flink.api.java.typeutils.GenericTypeInfo",
               "org.apache.flink.api.java.typeutils.TypeExtractor",
               "org.apache.flink.core.fs.CloseableRegistry",
               "org.apache.flink.runtime.checkpoint.CheckpointOptions",
               "org.apache.flink.runtime.state.CheckpointStorageLocationReference",
               "org.apache.flink.runtime.state.CheckpointableKeyedStateBackend",
               "org.apache.flink.runtime.state.KeyGroupRangeAssignment",
               "org.apache.flink.runtime.state.SnappyStreamCompressionDecorator",
               "org.apache.flink.runtime.state.SnapshotStrategyRunner",
               "org.apache.flink.runtime.state.AbstractKeyedStateBackend",
               "org.apache.flink.runtime.state.KeyGroupRange",
               "org.apache.flink.runtime.state.KeyedStateHandle",
               "org.apache.flink.runtime.state.LocalRecoveryConfig",
               "org.apache.flink.runtime.state.SnapshotResult",
               "org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator",
               "org.apache.flink.runtime.state.internal.InternalKvState",
               "org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory",
               "org.apache.flink.runtime.state.ttl.TtlTimeProvider")
    cannot = {"checkpoint_async": "a checkpoint whose asynchronous part runs on a thread of its own, and its join, "
                                  "are not written as JUnit yet",
              "savepoint_async": "a savepoint whose asynchronous part runs on a thread of its own, and its join, "
                                 "are not written as JUnit yet",
              "join": _NOT_YET, "restore": _NOT_YET, "rescale": _NOT_YET, "recover": _NOT_YET,
              "forms": "a checkpoint and both savepoints of one step, each restored and compared, are not written "
                       "as JUnit yet",
              "checkpoint_threshold": "snapshots to file streams of a measured inline threshold are not written as "
                                      "JUnit yet",
              "pojo_mutate": "a POJO changed in place and written back is not written as JUnit yet",
              "upgrade": "a restore into another class version of the POJO (a class loader per version) is not "
                         "written as JUnit yet"}

    def check_expressible(self) -> None:
        super().check_expressible()
        for i, step in enumerate(self.cx.steps[:self.failing + 1]):
            target = {"checkpoint": 1, "savepoint": 2}.get(step.op)
            if target is not None and step.args[target] != "memory":
                raise JUnitUnsupported(f"{self.file_name}: step {i} snapshots to {step.args[target]!r}; only "
                                       f"snapshots to memory are written as JUnit yet")
        step = self.cx.steps[self.failing]
        if step.op == "savepoint" and not (self.cx.failure.kind == CRASH
                                          or self.cx.failure.expected == "a restored backend"):
            # (the written test checks that the savepoint is taken and restores, not what it restores)
            raise JUnitUnsupported(f"{self.file_name}: step {self.failing} (savepoint) fails by what the savepoint "
                                   f"restores; comparing a restored savepoint's contents is not written as JUnit yet")
        if step.op in _READS and _TYPES[step.args[0]] != "int":
            raise JUnitUnsupported(f"{self.file_name}: the check of step {self.failing} ({step.op}) reads a "
                                   f"{_TYPES[step.args[0]]} state; reads of POJO and Kryo values are not written as "
                                   f"JUnit yet")

    def setup(self) -> list[str]:
        return ["Clock clock = new Clock();  // the TTL clock (TtlTimeProvider): only the steps move it",
                "Backend kb = null;"]

    # ------------------------------------------------------------ steps

    def step_open(self, key_type, max_parallelism):
        return [f"kb = Backend.open({java_string(key_type)}, {max_parallelism}, clock);  "
                f"// key groups 0..{max_parallelism - 1}, the {len(STATES)} states of ops.STATES registered"]

    def _at(self, kind: str, name, key, namespace) -> str:
        if _TYPES.get(name, "int") != "int":
            kind = kind.replace("Integer>", "Object>")  # the values of a POJO or Kryo state
        return f"kb.<{kind}>at({java_string(name)}, {_key(key)}, {namespace})"

    def step_update(self, name, key, namespace, value):
        return [f"{self._at('ValueState<Integer>', name, key, namespace)}.update({_typed(name, value)});"]

    def step_value(self, name, key, namespace):
        return [f"{self._at('ValueState<Integer>', name, key, namespace)}.value();"]

    def step_list_add(self, name, key, namespace, value):
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.add({_typed(name, value)});"]

    def step_list_update(self, name, key, namespace, values):
        items = ", ".join(_typed(name, v) for v in values)
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.update(new ArrayList<>(List.of({items})));"]

    def step_list_get(self, name, key, namespace):
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.get();"]

    def step_map_put(self, name, key, namespace, user_key, value):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.put({user_key}, "
                f"{_typed(name, value)});"]

    def step_map_put_null(self, name, key, namespace, user_key):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.put({user_key}, null);"]

    def step_map_remove(self, name, key, namespace, user_key):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.remove({user_key});"]

    def step_map_get(self, name, key, namespace, user_key):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.get({user_key});"]

    def step_map_contains(self, name, key, namespace, user_key):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.contains({user_key});"]

    def step_map_entries(self, name, key, namespace):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.entries();"]

    def step_reduce_add(self, name, key, namespace, value):
        return [f"{self._at('ReducingState<Integer>', name, key, namespace)}.add({_value(value)});"]

    def step_reduce_get(self, name, key, namespace):
        return [f"{self._at('ReducingState<Integer>', name, key, namespace)}.get();"]

    def step_clear(self, name, key, namespace):
        return [f"{self._at('State', name, key, namespace)}.clear();"]

    def step_keys(self, name, namespace):
        return [f"kb.keys({java_string(name)}, {namespace});"]

    def step_advance(self, millis):
        return [f"clock.advance({millis}L);"]

    def step_checkpoint(self, cid, target):
        return [f"RunnableFuture<SnapshotResult<KeyedStateHandle>> f{cid} = kb.snapshot({cid});",
                f"f{cid}.run();  // both parts on the task thread",
                f"SnapshotResult<KeyedStateHandle> h{cid} = f{cid}.get();"]

    def step_compress(self, on):
        return [f"kb.compressed = {'true' if on else 'false'};  // snappy: the snapshot strategy's decorator, "
                f"as ExecutionConfig#setUseSnapshotCompression sets it"]

    def _savepoint(self, cid, form) -> list[str]:
        how = ("StreamOperatorStateHandler.prepareCanonicalSavepoint" if form == "canonical"
               else "the backend's snapshot with savepoint options")
        return [f"RunnableFuture<SnapshotResult<KeyedStateHandle>> f{cid} = "
                f"kb.savepoint({cid}, {'true' if form == 'canonical' else 'false'});  // {form}: {how}",
                f"f{cid}.run();  // both parts on the task thread"]

    def step_savepoint(self, cid, form, target):
        return [*self._savepoint(cid, form), f"SnapshotResult<KeyedStateHandle> h{cid} = f{cid}.get();"]

    def step_tail_checkpoint(self, key, value, of):
        return [f"kb.restore(kb.tailSnapshot({_key(key)}, {_object(tail_blob(value))}, {java_string(of)}), "
                f"{_key(key)});  // one Kryo value ending in an empty array, its {of} restored"]

    # ------------------------------------------------------------ failing checks: reads (K1)

    def _want(self):
        step = self.cx.steps[self.failing]
        return getattr(self.model.model, step.op)(*step.args)

    def expected(self) -> str:
        step = self.cx.steps[self.failing]
        if step.op in _READS:
            return f"{self.operations.render(step)} answers {_answer(step.op, self._want())}"
        if step.op == "savepoint":
            return "no error, and the savepoint restores into a fresh backend"
        if step.op == "tail_checkpoint":
            return f"the {step.args[2]} restores, and the value reads back as {_show_blob(tail_blob(step.args[1]))}"
        return "no error" if step.op == "checkpoint" else ""

    def _max_parallelism(self) -> int:
        return self.cx.steps[0].args[1]

    def fails_savepoint(self, cid, form, target):
        """The savepoint must be taken (K6) and restore into a fresh backend of every key group (K7)."""
        render = self.operations.render(self.cx.steps[self.failing])
        whole = f"[0, {self._max_parallelism() - 1}]"
        return [f"SnapshotResult<KeyedStateHandle> h{cid} = null;",
                *self.no_exception("K6", [*self._savepoint(cid, form), f"h{cid} = f{cid}.get();"], render),
                *self.no_exception("K7", [f"kb.restore(h{cid}.getJobManagerOwnedSnapshot(), null);  "
                                          f"// into a fresh backend of key groups {whole}"],
                                   f"restoring savepoint c{cid} into {whole}")]

    def fails_tail_checkpoint(self, key, value, of):
        """The one Kryo value's snapshot must restore (K10) and read back as written (K10)."""
        blob = tail_blob(value)
        what = f"restoring the {of} of a backend whose stream ends with an empty array"
        return [f"KeyedStateHandle tail = kb.tailSnapshot({_key(key)}, {_object(blob)}, {java_string(of)});",
                "Object restored = null;",
                *self.no_exception("K10", [f"restored = kb.restore(tail, {_key(key)});"], what),
                f"assertEquals({java_string(_show_blob(blob))}, Blob.show(restored), "
                f"{java_string(f'K10: the {of} of one Kryo value restored')});"]

    def _read(self, kind: str, call: str, name, key, namespace, *args):
        step = self.cx.steps[self.failing]
        want = java_string(_answer(step.op, self._want()))
        message = java_string(f"K1: {self.operations.render(step)}")
        return [f"assertEquals({want}, Backend.show({self._at(kind, name, key, namespace)}.{call}), {message});"]

    def fails_value(self, name, key, namespace):
        return self._read("ValueState<Integer>", "value()", name, key, namespace)

    def fails_reduce_get(self, name, key, namespace):
        return self._read("ReducingState<Integer>", "get()", name, key, namespace)

    def fails_list_get(self, name, key, namespace):
        return self._read("ListState<Integer>", "get()", name, key, namespace)

    def fails_map_get(self, name, key, namespace, user_key):
        return self._read("MapState<Integer, Integer>", f"get({user_key})", name, key, namespace)

    def fails_map_contains(self, name, key, namespace, user_key):
        return self._read("MapState<Integer, Integer>", f"contains({user_key})", name, key, namespace)

    def fails_map_entries(self, name, key, namespace):
        return self._read("MapState<Integer, Integer>", "entries()", name, key, namespace)

    def nested(self) -> str:
        registrations = "\n".join(
            f"        b.register({java_string(s.name)}, {java_string(s.kind)}, {s.ttl or 0}L, "
            f"{'true' if s.update_on_read else 'false'}, {java_string(s.value_type)});" for s in STATES)
        return _NESTED.replace("@@REGISTER@@", registrations)


_READS = {"value", "reduce_get", "list_get", "map_get", "map_contains", "map_entries"}

_NESTED = '''
/** The TTL clock (Flink's TtlTimeProvider): only the steps move it. */
static final class Clock implements TtlTimeProvider {
    private volatile long now;
    @Override public long currentTimestamp() { return now; }
    void advance(long millis) { now += millis; }
}

/** The reducing states' function: Java int addition. */
static final class Sum implements ReduceFunction<Integer> {
    private static final long serialVersionUID = 1L;
    @Override public Integer reduce(Integer a, Integer b) { return a + b; }
}

/** The POJO states' values (cowcheck.types.Account, class version 1): a PojoSerializer's. */
public static class Account {
    public long[] history;
    public int id;
    public String owner;

    public Account() { }

    static Account of(long[] history, int id, String owner) {
        Account a = new Account();
        a.history = history;
        a.id = id;
        a.owner = owner;
        return a;
    }
}

/** The Kryo states' values (cowcheck.types.Blob): a generic type, serialized by Kryo, its fields in name order. */
public static class Blob {
    public byte[] data;
    public int n;
    public byte[] tag;

    public Blob() { }

    static Blob of(byte[] data, int n, byte[] tag) {
        Blob b = new Blob();
        b.data = data;
        b.n = n;
        b.tag = tag;
        return b;
    }

    static String show(Object o) {
        if (!(o instanceof Blob)) {
            return String.valueOf(o);
        }
        Blob b = (Blob) o;
        return "Blob(data=" + Arrays.toString(b.data) + ", n=" + b.n + ", tag=" + Arrays.toString(b.tag) + ")";
    }
}

/** Flink's HeapKeyedStateBackend, built by its builder, with cowcheck's backend machine's states. */
static final class Backend {
    final AbstractKeyedStateBackend<Object> kb;
    final Map<String, InternalKvState<Object, Integer, ?>> states = new HashMap<>();
    final String keyType;
    final int maxParallelism;
    final Clock clock;
    boolean compressed;  // snapshots snappy-compressed (the snapshot strategy's decorator)

    private Backend(AbstractKeyedStateBackend<Object> kb, String keyType, int maxParallelism, Clock clock) {
        this.kb = kb;
        this.keyType = keyType;
        this.maxParallelism = maxParallelism;
        this.clock = clock;
    }

    static Backend open(String keyType, int maxParallelism, Clock clock) throws Exception {
        Backend b = build(keyType, maxParallelism, KeyGroupRange.of(0, maxParallelism - 1), clock,
                Collections.emptyList());
@@REGISTER@@
        return b;
    }

    @SuppressWarnings("unchecked")
    static Backend build(String keyType, int maxParallelism, KeyGroupRange range, Clock clock,
                         Collection<KeyedStateHandle> restore) throws Exception {
        TypeSerializer<?> keys = keyType.equals("int") ? IntSerializer.INSTANCE
                : keyType.equals("long") ? LongSerializer.INSTANCE : StringSerializer.INSTANCE;
        return new Backend((AbstractKeyedStateBackend<Object>) build(keys, maxParallelism, range, clock, restore),
                keyType, maxParallelism, clock);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    void register(String name, String kind, long ttlMillis, boolean updateOnRead, String valueType) throws Exception {
        TypeSerializer values = serializer(valueType);
        StateDescriptor descriptor;
        switch (kind) {
            case "value": descriptor = new ValueStateDescriptor<>(name, values); break;
            case "list": descriptor = new ListStateDescriptor<>(name, values); break;
            case "map": descriptor = new MapStateDescriptor<>(name, IntSerializer.INSTANCE, values); break;
            default: descriptor = new ReducingStateDescriptor<>(name, new Sum(), IntSerializer.INSTANCE); break;
        }
        if (ttlMillis > 0) {
            descriptor.enableTimeToLive(ttl(ttlMillis, updateOnRead));
        }
        states.put(name, (InternalKvState<Object, Integer, ?>) kb.getOrCreateKeyedState(IntSerializer.INSTANCE, descriptor));
    }

    /** The state called name, with the current key set to key and its namespace to namespace. */
    @SuppressWarnings("unchecked")
    <S> S at(String name, Object key, int namespace) {
        kb.setCurrentKey(key);
        InternalKvState<Object, Integer, ?> state = states.get(name);
        state.setCurrentNamespace(namespace);
        return (S) state;
    }

    List<Object> keys(String name, int namespace) {
        List<Object> out = new ArrayList<>();
        kb.getKeys(name, namespace).forEach(out::add);
        return out;
    }

    RunnableFuture<SnapshotResult<KeyedStateHandle>> snapshot(long id) throws Exception {
        Field strategy = Class.forName("org.apache.flink.runtime.state.heap.HeapKeyedStateBackend")
                .getDeclaredField("checkpointStrategy");
        strategy.setAccessible(true);
        Field decorator = Class.forName("org.apache.flink.runtime.state.heap.HeapSnapshotStrategy")
                .getDeclaredField("keyGroupCompressionDecorator");
        decorator.setAccessible(true);
        decorator.set(strategy.get(kb), compressed ? SnappyStreamCompressionDecorator.INSTANCE
                : UncompressedStreamCompressionDecorator.INSTANCE);
        return kb.snapshot(id, 0L, new MemCheckpointStreamFactory(5 * 1024 * 1024),
                CheckpointOptions.forCheckpointWithDefaultLocation());
    }

    /**
     * A savepoint as StreamOperatorStateHandler takes it: a canonical one by prepareCanonicalSavepoint
     * (prepareSavepoint before 1.15, where every savepoint is canonical) run by a SnapshotStrategyRunner;
     * a native one (1.15 on) by the backend's own snapshot with savepoint options.
     */
    @SuppressWarnings("unchecked")
    RunnableFuture<SnapshotResult<KeyedStateHandle>> savepoint(long id, boolean canonical) throws Exception {
        MemCheckpointStreamFactory streams = new MemCheckpointStreamFactory(5 * 1024 * 1024);
        CheckpointOptions options = savepointOptions(canonical);
        if (!canonical) {
            return kb.snapshot(id, 0L, streams, options);
        }
        Class<?> handler = Class.forName("org.apache.flink.streaming.api.operators.StreamOperatorStateHandler");
        Method prepare;
        try {
            prepare = handler.getMethod("prepareCanonicalSavepoint", CheckpointableKeyedStateBackend.class,
                    CloseableRegistry.class);
        } catch (NoSuchMethodException older) {
            prepare = handler.getMethod("prepareSavepoint", CheckpointableKeyedStateBackend.class,
                    CloseableRegistry.class);
        }
        SnapshotStrategyRunner<KeyedStateHandle, ?> runner =
                (SnapshotStrategyRunner<KeyedStateHandle, ?>) prepare.invoke(null, kb, new CloseableRegistry());
        return runner.snapshot(id, 0L, streams, options);
    }

    /** SavepointType.savepoint(CANONICAL or NATIVE) from 1.15, CheckpointType.SAVEPOINT before. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static CheckpointOptions savepointOptions(boolean canonical) throws Exception {
        Object type;
        try {
            Class<Enum> format = (Class<Enum>) Class.forName("org.apache.flink.core.execution.SavepointFormatType");
            type = Class.forName("org.apache.flink.runtime.checkpoint.SavepointType").getMethod("savepoint", format)
                    .invoke(null, Enum.valueOf(format, canonical ? "CANONICAL" : "NATIVE"));
        } catch (ClassNotFoundException older) {
            if (!canonical) {
                throw new UnsupportedOperationException("native savepoints exist from Flink 1.15 on");
            }
            type = Class.forName("org.apache.flink.runtime.checkpoint.CheckpointType").getField("SAVEPOINT").get(null);
        }
        for (Constructor<?> k : CheckpointOptions.class.getConstructors()) {
            if (k.getParameterCount() == 2 && k.getParameterTypes()[1] == CheckpointStorageLocationReference.class) {
                return (CheckpointOptions) k.newInstance(type, CheckpointStorageLocationReference.getDefault());
            }
        }
        throw new IllegalStateException("no CheckpointOptions(type, location) constructor");
    }

    /**
     * A backend of key's one key group holding one Kryo value (state value_kryo, namespace 0), its
     * snapshot to memory streams (of: checkpoint, canonical or native), taken on the task thread.
     */
    KeyedStateHandle tailSnapshot(Object key, Blob value, String of) throws Exception {
        int group = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
        Backend side = build(keyType, maxParallelism, KeyGroupRange.of(group, group), clock, Collections.emptyList());
        side.register("value_kryo", "value", 0L, false, "kryo");
        side.<ValueState<Object>>at("value_kryo", key, 0).update(value);
        RunnableFuture<SnapshotResult<KeyedStateHandle>> f = of.equals("checkpoint") ? side.snapshot(1L << 40)
                : side.savepoint(1L << 40, of.equals("canonical"));
        f.run();
        KeyedStateHandle handle = f.get().getJobManagerOwnedSnapshot();
        side.kb.dispose();
        return handle;
    }

    /**
     * handle restored into a fresh backend: of every key group (key null), or of key's one group,
     * where it reads state value_kryo of key in namespace 0 and answers it.
     */
    Object restore(KeyedStateHandle handle, Object key) throws Exception {
        int group = key == null ? 0 : KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
        KeyGroupRange range = key == null ? KeyGroupRange.of(0, maxParallelism - 1) : KeyGroupRange.of(group, group);
        Backend restored = build(keyType, maxParallelism, range, clock, Collections.singletonList(handle));
        try {
            if (key == null) {
                return null;
            }
            restored.register("value_kryo", "value", 0L, false, "kryo");
            return restored.<ValueState<Object>>at("value_kryo", key, 0).value();
        } finally {
            restored.kb.dispose();
        }
    }

    /** A state's value serializer: int, pojo (TypeExtractor: a PojoSerializer) or kryo (GenericTypeInfo). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeSerializer<Object> serializer(String type) throws Exception {
        if (type.equals("int")) {
            return (TypeSerializer) IntSerializer.INSTANCE;
        }
        TypeInformation info = type.equals("pojo") ? TypeExtractor.createTypeInfo(Account.class)
                : new GenericTypeInfo(Blob.class);
        try {  // createSerializer of a SerializerConfig from 1.19 (the only one in 2.x), of an ExecutionConfig before
            Class<?> config = Class.forName("org.apache.flink.api.common.serialization.SerializerConfig");
            Object instance = Class.forName("org.apache.flink.api.common.serialization.SerializerConfigImpl")
                    .getConstructor().newInstance();
            return (TypeSerializer<Object>) TypeInformation.class.getMethod("createSerializer", config)
                    .invoke(info, instance);
        } catch (ClassNotFoundException | NoSuchMethodException older) {
            return (TypeSerializer<Object>) TypeInformation.class.getMethod("createSerializer", ExecutionConfig.class)
                    .invoke(info, new ExecutionConfig());
        }
    }

    /** An answer as cowcheck's backend machine compares it: an empty list is none; a map's entries sorted. */
    @SuppressWarnings("unchecked")
    static String show(Object answer) {
        if (answer instanceof Iterable) {
            Map<Object, Object> map = new TreeMap<>();
            List<Object> list = new ArrayList<>();
            for (Object item : (Iterable<Object>) answer) {
                if (item instanceof Map.Entry) {
                    map.put(((Map.Entry<Object, Object>) item).getKey(), ((Map.Entry<Object, Object>) item).getValue());
                } else {
                    list.add(item);
                }
            }
            return !map.isEmpty() ? map.toString() : list.isEmpty() ? "null" : list.toString();
        }
        return String.valueOf(answer);
    }

    /** HeapKeyedStateBackendBuilder(...).build(), its arguments chosen by their types (they differ by release). */
    static Object build(TypeSerializer<?> keys, int maxParallelism, KeyGroupRange range, Clock clock,
                        Collection<KeyedStateHandle> restore) throws Exception {
        Constructor<?> c = HeapKeyedStateBackendBuilder.class.getConstructors()[0];
        Class<?>[] types = c.getParameterTypes();
        Object[] args = new Object[types.length];
        for (int i = 0; i < types.length; i++) {
            switch (types[i].getSimpleName()) {
                case "TaskKvStateRegistry": args[i] = null; break;
                case "TypeSerializer": args[i] = keys; break;
                case "ClassLoader": args[i] = Backend.class.getClassLoader(); break;
                case "int": args[i] = maxParallelism; break;
                case "KeyGroupRange": args[i] = range; break;
                case "ExecutionConfig": args[i] = new ExecutionConfig(); break;
                case "TtlTimeProvider": args[i] = clock; break;
                case "LatencyTrackingStateConfig": case "SizeTrackingStateConfig":
                    args[i] = types[i].getMethod("disabled").invoke(null); break;
                case "Collection": args[i] = restore; break;
                case "StreamCompressionDecorator": args[i] = UncompressedStreamCompressionDecorator.INSTANCE; break;
                case "LocalRecoveryConfig": args[i] = localRecoveryDisabled(); break;
                case "HeapPriorityQueueSetFactory": args[i] = new HeapPriorityQueueSetFactory(range, maxParallelism, 128); break;
                case "boolean": args[i] = true; break;
                case "CloseableRegistry": args[i] = new CloseableRegistry(); break;
                default: throw new IllegalStateException("a builder argument this test does not know: " + types[i]);
            }
        }
        Object builder = c.newInstance(args);
        try {
            return builder.getClass().getMethod("build").invoke(builder);
        } catch (java.lang.reflect.InvocationTargetException e) {
            // What build() threw (a BackendBuildingException of a failed restore), not its reflective wrapper.
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    /** Local recovery off: a constant from 1.20, a constructor of one or two arguments before. */
    static LocalRecoveryConfig localRecoveryDisabled() throws Exception {
        try {
            return (LocalRecoveryConfig) LocalRecoveryConfig.class.getField("BACKUP_AND_RECOVERY_DISABLED").get(null);
        } catch (NoSuchFieldException older) {
            for (Constructor<?> k : LocalRecoveryConfig.class.getConstructors()) {
                if (k.getParameterCount() == 2 && k.getParameterTypes()[0] == boolean.class) {
                    return (LocalRecoveryConfig) k.newInstance(false, null);
                }
                if (k.getParameterCount() == 1) {
                    return (LocalRecoveryConfig) k.newInstance(new Object[] {null});
                }
            }
            throw new IllegalStateException("no LocalRecoveryConfig constructor this test knows");
        }
    }

    /** Never return expired, no background cleanup, cleanup in full snapshots; newBuilder(Duration) or (Time). */
    static StateTtlConfig ttl(long millis, boolean updateOnRead) throws Exception {
        Object b;
        try {
            b = StateTtlConfig.class.getMethod("newBuilder", java.time.Duration.class)
                    .invoke(null, java.time.Duration.ofMillis(millis));
        } catch (NoSuchMethodException older) {
            Class<?> time = Class.forName("org.apache.flink.api.common.time.Time");
            b = StateTtlConfig.class.getMethod("newBuilder", time)
                    .invoke(null, time.getMethod("milliseconds", long.class).invoke(null, millis));
        }
        StateTtlConfig.Builder builder = (StateTtlConfig.Builder) b;
        builder = updateOnRead ? builder.updateTtlOnReadAndWrite() : builder.updateTtlOnCreateAndWrite();
        return builder.neverReturnExpired().disableCleanupInBackground().cleanupFullSnapshot().build();
    }
}
'''
