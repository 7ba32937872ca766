package org.apache.flink.runtime.state.heap;

import static org.junit.jupiter.api.Assertions.*;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.TypeExtractor;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.CheckpointStorageLocationReference;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnapshotStrategyRunner;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.junit.jupiter.api.Test;

/**
 * Replays cowcheck's counterexample kryo-empty-array-in-canonical-savepoint.json (backend machine) on Flink's own classes,
 * written for flink@1.13.6 (Apache Flink 1.13.6): it fails where the bug is (divergence K7 at step 2) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class KryoEmptyArrayInCanonicalSavepointTest {
    @Test
    void replay() throws Exception {
        Clock clock = new Clock();  // the TTL clock (TtlTimeProvider): only the steps move it
        Backend kb = null;

        // step 0: kb = open_backend('int', 8) # key groups 0..8-1, every state of ops.STATES registered
        kb = Backend.open("int", 8, clock);  // key groups 0..7, the 18 states of ops.STATES registered

        // step 1: at(0, 0, 'value_kryo').update(0)
        kb.<ValueState<Object>>at("value_kryo", 0, 0).update(Blob.of(null, 0, new byte[] {}));

        // step 2: h0 = kb.savepoint(0, streams('memory'), 'canonical').run() # both parts on the task thread   <-- fails here
        // K7: A savepoint restores to the state at its synchronous part, as a checkpoint does. (docs/contract.md#k7)
        // the model expects: no error, and the savepoint restores into a fresh backend
        SnapshotResult<KeyedStateHandle> h0 = null;
        try {
            RunnableFuture<SnapshotResult<KeyedStateHandle>> f0 = kb.savepoint(0, true);  // canonical: StreamOperatorStateHandler.prepareCanonicalSavepoint
            f0.run();  // both parts on the task thread
            h0 = f0.get();
        } catch (Exception e) {
            fail("K6: h0 = kb.savepoint(0, streams('memory'), 'canonical').run()  # both parts on the task thread raised " + e, e);
        }
        try {
            kb.restore(h0.getJobManagerOwnedSnapshot(), null);  // into a fresh backend of key groups [0, 7]
        } catch (Exception e) {
            fail("K7: restoring savepoint c0 into [0, 7] raised " + e, e);
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
            b.register("value", "value", 0L, false, "int");
            b.register("value_ttl", "value", 10L, false, "int");
            b.register("value_ttl_read", "value", 10L, true, "int");
            b.register("list", "list", 0L, false, "int");
            b.register("list_ttl", "list", 10L, false, "int");
            b.register("list_ttl_read", "list", 10L, true, "int");
            b.register("map", "map", 0L, false, "int");
            b.register("map_ttl", "map", 10L, false, "int");
            b.register("map_ttl_read", "map", 10L, true, "int");
            b.register("reducing", "reducing", 0L, false, "int");
            b.register("reducing_ttl", "reducing", 10L, false, "int");
            b.register("reducing_ttl_read", "reducing", 10L, true, "int");
            b.register("value_pojo", "value", 0L, false, "pojo");
            b.register("list_pojo", "list", 0L, false, "pojo");
            b.register("map_pojo", "map", 0L, false, "pojo");
            b.register("value_kryo", "value", 0L, false, "kryo");
            b.register("list_kryo", "list", 0L, false, "kryo");
            b.register("map_kryo", "map", 0L, false, "kryo");
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
}
