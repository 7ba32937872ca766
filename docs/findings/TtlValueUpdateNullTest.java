package org.apache.flink.runtime.state.heap;

import static org.junit.jupiter.api.Assertions.*;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.RunnableFuture;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.junit.jupiter.api.Test;

/**
 * Replays cowcheck's counterexample ttl-value-update-null.json (backend machine) on Flink's own classes,
 * written for flink@1.13.6 (Apache Flink 1.13.6): it fails where the bug is (crash K6 at step 2) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class TtlValueUpdateNullTest {
    @Test
    void replay() throws Exception {
        Clock clock = new Clock();  // the TTL clock (TtlTimeProvider): only the steps move it
        Backend kb = null;

        // step 0: kb = open_backend('long', 128) # key groups 0..128-1, the twelve states registered
        kb = Backend.open("long", 128, clock);  // key groups 0..127, the twelve states registered

        // step 1: at(12884917726, 0, 'value_ttl_read').update(None)
        kb.<ValueState<Integer>>at("value_ttl_read", 12884917726L, 0).update(null);

        // step 2: h0 = kb.snapshot(0, streams('memory')).run() # both parts on the task thread   <-- fails here
        // K6: The backend raises nowhere the model does not. (docs/contract.md#k6)
        // the model expects: no error
        try {
            RunnableFuture<SnapshotResult<KeyedStateHandle>> f0 = kb.snapshot(0);
            f0.run();  // both parts on the task thread
            SnapshotResult<KeyedStateHandle> h0 = f0.get();
        } catch (Exception e) {
            fail("K6: h0 = kb.snapshot(0, streams('memory')).run()  # both parts on the task thread raised " + e, e);
        }
    }

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
            b.register("value", "value", 0L, false);
            b.register("value_ttl", "value", 10L, false);
            b.register("value_ttl_read", "value", 10L, true);
            b.register("list", "list", 0L, false);
            b.register("list_ttl", "list", 10L, false);
            b.register("list_ttl_read", "list", 10L, true);
            b.register("map", "map", 0L, false);
            b.register("map_ttl", "map", 10L, false);
            b.register("map_ttl_read", "map", 10L, true);
            b.register("reducing", "reducing", 0L, false);
            b.register("reducing_ttl", "reducing", 10L, false);
            b.register("reducing_ttl_read", "reducing", 10L, true);
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
}
