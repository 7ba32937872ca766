"""The backend machine's counterexamples as JUnit 5: Flink's own ``HeapKeyedStateBackend``.

The test builds what ``cowcheck.bridge.BackendHandle`` builds, written out in a
nested class ``Backend``: the backend by Flink's ``HeapKeyedStateBackendBuilder``
(its one public constructor's arguments filled by their types: 14 up to 2.0, 15
from 2.1), the twelve states of :data:`~cowcheck.backend.ops.STATES` registered
through descriptors with their time-to-live (``StateTtlConfig.newBuilder`` takes a
``Time`` before 1.19 and a ``Duration`` from 2.0, reached by reflection), a
``TtlTimeProvider`` the steps move, checkpoints by the backend's own ``snapshot``
into a ``MemCheckpointStreamFactory``. One source compiles on every release
1.13.6-2.3.0. Restores and checkpoints to files are not written yet.
"""

from __future__ import annotations

import json

from cowcheck.backend.ops import BACKEND_OPS, STATES
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
    imports = ("java.lang.reflect.Constructor", "java.util.ArrayList", "java.util.Collection",
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
               "org.apache.flink.core.fs.CloseableRegistry",
               "org.apache.flink.runtime.checkpoint.CheckpointOptions",
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
              "join": _NOT_YET, "restore": _NOT_YET, "rescale": _NOT_YET, "recover": _NOT_YET}

    def check_expressible(self) -> None:
        super().check_expressible()
        for i, step in enumerate(self.cx.steps[:self.failing + 1]):
            if step.op == "checkpoint" and step.args[1] != "memory":
                raise JUnitUnsupported(f"{self.file_name}: step {i} checkpoints to {step.args[1]!r}; only checkpoints "
                                       f"to memory are written as JUnit yet")

    def setup(self) -> list[str]:
        return ["Clock clock = new Clock();  // the TTL clock (TtlTimeProvider): only the steps move it",
                "Backend kb = null;"]

    # ------------------------------------------------------------ steps

    def step_open(self, key_type, max_parallelism):
        return [f"kb = Backend.open({java_string(key_type)}, {max_parallelism}, clock);  "
                f"// key groups 0..{max_parallelism - 1}, the twelve states registered"]

    def _at(self, kind: str, name, key, namespace) -> str:
        return f"kb.<{kind}>at({java_string(name)}, {_key(key)}, {namespace})"

    def step_update(self, name, key, namespace, value):
        return [f"{self._at('ValueState<Integer>', name, key, namespace)}.update({_value(value)});"]

    def step_value(self, name, key, namespace):
        return [f"{self._at('ValueState<Integer>', name, key, namespace)}.value();"]

    def step_list_add(self, name, key, namespace, value):
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.add({_value(value)});"]

    def step_list_update(self, name, key, namespace, values):
        items = ", ".join(str(int(v)) for v in values)
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.update(new ArrayList<>(List.of({items})));"]

    def step_list_get(self, name, key, namespace):
        return [f"{self._at('ListState<Integer>', name, key, namespace)}.get();"]

    def step_map_put(self, name, key, namespace, user_key, value):
        return [f"{self._at('MapState<Integer, Integer>', name, key, namespace)}.put({user_key}, {_value(value)});"]

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

    # ------------------------------------------------------------ failing checks: reads (K1)

    def _want(self):
        step = self.cx.steps[self.failing]
        return getattr(self.model.model, step.op)(*step.args)

    def expected(self) -> str:
        step = self.cx.steps[self.failing]
        if step.op in _READS:
            return f"{self.operations.render(step)} answers {_answer(step.op, self._want())}"
        return "no error" if step.op == "checkpoint" else ""

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
            f"{'true' if s.update_on_read else 'false'});" for s in STATES)
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

/** Flink's HeapKeyedStateBackend, built by its builder, with cowcheck's backend machine's twelve states. */
static final class Backend {
    final AbstractKeyedStateBackend<Object> kb;
    final Map<String, InternalKvState<Object, Integer, ?>> states = new HashMap<>();

    private Backend(AbstractKeyedStateBackend<Object> kb) { this.kb = kb; }

    @SuppressWarnings("unchecked")
    static Backend open(String keyType, int maxParallelism, Clock clock) throws Exception {
        TypeSerializer<?> keys = keyType.equals("int") ? IntSerializer.INSTANCE
                : keyType.equals("long") ? LongSerializer.INSTANCE : StringSerializer.INSTANCE;
        Backend b = new Backend((AbstractKeyedStateBackend<Object>) build(keys, maxParallelism,
                KeyGroupRange.of(0, maxParallelism - 1), clock));
@@REGISTER@@
        return b;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    void register(String name, String kind, long ttlMillis, boolean updateOnRead) throws Exception {
        StateDescriptor descriptor;
        switch (kind) {
            case "value": descriptor = new ValueStateDescriptor<>(name, IntSerializer.INSTANCE); break;
            case "list": descriptor = new ListStateDescriptor<>(name, IntSerializer.INSTANCE); break;
            case "map": descriptor = new MapStateDescriptor<>(name, IntSerializer.INSTANCE, IntSerializer.INSTANCE); break;
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
        return kb.snapshot(id, 0L, new MemCheckpointStreamFactory(5 * 1024 * 1024),
                CheckpointOptions.forCheckpointWithDefaultLocation());
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
    static Object build(TypeSerializer<?> keys, int maxParallelism, KeyGroupRange range, Clock clock) throws Exception {
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
                case "Collection": args[i] = Collections.emptyList(); break;
                case "StreamCompressionDecorator": args[i] = UncompressedStreamCompressionDecorator.INSTANCE; break;
                case "LocalRecoveryConfig": args[i] = localRecoveryDisabled(); break;
                case "HeapPriorityQueueSetFactory": args[i] = new HeapPriorityQueueSetFactory(range, maxParallelism, 128); break;
                case "boolean": args[i] = true; break;
                case "CloseableRegistry": args[i] = new CloseableRegistry(); break;
                default: throw new IllegalStateException("a builder argument this test does not know: " + types[i]);
            }
        }
        Object builder = c.newInstance(args);
        return builder.getClass().getMethod("build").invoke(builder);
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
