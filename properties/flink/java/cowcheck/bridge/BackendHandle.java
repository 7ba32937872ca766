package cowcheck.bridge;

import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.HashMap;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RunnableFuture;
import java.util.concurrent.locks.LockSupport;

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
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.CheckpointStorageLocationReference;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.CheckpointedStateScope;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.SnapshotStrategyRunner;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.FsCheckpointStreamFactory;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMap;
import org.apache.flink.runtime.state.heap.HeapKeyedStateBackendBuilder;
import org.apache.flink.runtime.state.heap.HeapPriorityQueueSetFactory;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;

/**
 * Flink's own HeapKeyedStateBackend at the state level, for the backend machine
 * (properties/backend, properties/flink/backend.py).
 *
 * <p>The backend is built by Flink's HeapKeyedStateBackendBuilder, whose constructor's arguments
 * are filled by type (2.x added a SizeTrackingStateConfig; LocalRecoveryConfig changed its
 * constructor twice): one source for every release 1.13.6-2.3.0. States are registered through
 * descriptors (ValueStateDescriptor... with a StateTtlConfig, built by reflection: its builder
 * takes a Time before 1.19 and a Duration from 2.0), Integer namespaces and values, keys of the
 * key serializer the program chose. Checkpoints go through the backend's own snapshot strategy
 * into a MemCheckpointStreamFactory or an FsCheckpointStreamFactory whose streams may yield at
 * random while the asynchronous part writes; that part runs on the caller's thread
 * ({@link Pending#run}) or on a Java thread of its own ({@link Pending#start}). Restores build a
 * fresh backend from the handles' intersection with its key-group range (rescaling).
 */
public final class BackendHandle {
    /** Flink's MemoryStateBackend default maximum state size. */
    private static final int MEMORY_MAX_SIZE = 5 * 1024 * 1024;

    /** The TTL clock: only the task thread moves it; the asynchronous part reads it. */
    public static final class Clock implements TtlTimeProvider {
        private volatile long now;

        @Override
        public long currentTimestamp() {
            return now;
        }

        public void advance(long millis) {
            now += millis;
        }
    }

    /** The reducing states' function: Java int addition. */
    static final class Sum implements ReduceFunction<Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer reduce(Integer a, Integer b) {
            return a + b;
        }
    }

    private final AbstractKeyedStateBackend<Object> backend;
    private final KeyGroupRange range;
    private final Map<String, InternalKvState<Object, Integer, ?>> states = new HashMap<>();
    private final Corruption corruption;
    private final int classVersion;
    private Object currentKey;

    @SuppressWarnings("unchecked")
    public BackendHandle(String keyType, int maxParallelism, int start, int end, Clock clock,
                         KeyedStateHandle[] handles, String corruption) throws Exception {
        this(keyType, maxParallelism, start, end, clock, handles, corruption, 1);
    }

    /** A backend of a job whose user classes are of class version {@code classVersion} ({@link Types}). */
    public BackendHandle(String keyType, int maxParallelism, int start, int end, Clock clock,
                         KeyedStateHandle[] handles, String corruption, int classVersion) throws Exception {
        this.classVersion = classVersion;
        this.range = KeyGroupRange.of(start, end);
        this.corruption = Corruption.forName(corruption);
        List<KeyedStateHandle> restore = new ArrayList<>();
        for (KeyedStateHandle handle : handles) {
            KeyedStateHandle part = handle.getIntersection(range);
            if (part != null) {
                restore.add(part);
            }
        }
        this.backend = (AbstractKeyedStateBackend<Object>) build(keySerializer(keyType), maxParallelism, range,
                clock, restore, Types.loader(classVersion));
    }

    @SuppressWarnings("unchecked")
    private static TypeSerializer<Object> keySerializer(String keyType) {
        switch (keyType) {
            case "int":
                return (TypeSerializer<Object>) (TypeSerializer<?>) IntSerializer.INSTANCE;
            case "long":
                return (TypeSerializer<Object>) (TypeSerializer<?>) LongSerializer.INSTANCE;
            case "string":
                return (TypeSerializer<Object>) (TypeSerializer<?>) StringSerializer.INSTANCE;
            default:
                throw new IllegalArgumentException("no key type " + keyType);
        }
    }

    /** HeapKeyedStateBackendBuilder(...).build(), its constructor's arguments chosen by their types. */
    private static Object build(TypeSerializer<Object> keySerializer, int maxParallelism, KeyGroupRange range,
                                TtlTimeProvider clock, Collection<KeyedStateHandle> restore, ClassLoader classes)
            throws Exception {
        Constructor<?> constructor = HeapKeyedStateBackendBuilder.class.getConstructors()[0];
        Class<?>[] types = constructor.getParameterTypes();
        Object[] args = new Object[types.length];
        for (int i = 0; i < types.length; i++) {
            String name = types[i].getSimpleName();
            switch (name) {
                case "TaskKvStateRegistry":
                    args[i] = null;
                    break;
                case "TypeSerializer":
                    args[i] = keySerializer;
                    break;
                case "ClassLoader":
                    args[i] = classes; // the user code class loader: a restore resolves snapshots' classes in it
                    break;
                case "int":
                    args[i] = maxParallelism;
                    break;
                case "KeyGroupRange":
                    args[i] = range;
                    break;
                case "ExecutionConfig":
                    args[i] = new ExecutionConfig();
                    break;
                case "TtlTimeProvider":
                    args[i] = clock;
                    break;
                case "LatencyTrackingStateConfig":
                case "SizeTrackingStateConfig":
                    args[i] = types[i].getMethod("disabled").invoke(null);
                    break;
                case "Collection":
                    args[i] = restore;
                    break;
                case "StreamCompressionDecorator":
                    args[i] = UncompressedStreamCompressionDecorator.INSTANCE;
                    break;
                case "LocalRecoveryConfig":
                    args[i] = localRecoveryDisabled();
                    break;
                case "HeapPriorityQueueSetFactory":
                    args[i] = new HeapPriorityQueueSetFactory(range, maxParallelism, 128);
                    break;
                case "boolean":
                    args[i] = true; // asynchronous snapshots
                    break;
                case "CloseableRegistry":
                    args[i] = new CloseableRegistry();
                    break;
                default:
                    throw new IllegalStateException("HeapKeyedStateBackendBuilder takes a " + types[i].getName()
                            + " this helper does not know how to make");
            }
        }
        Object builder = constructor.newInstance(args);
        try {
            return builder.getClass().getMethod("build").invoke(builder);
        } catch (java.lang.reflect.InvocationTargetException e) {
            // What build() threw (a BackendBuildingException), not its reflective wrapper, naming its root cause.
            Throwable cause = e.getCause();
            Throwable root = cause;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            if (root == cause) {
                throw cause instanceof Exception ? (Exception) cause : e;
            }
            throw new IllegalStateException(cause + " (root cause: " + root + ")", cause);
        }
    }

    /** Local recovery off: a constant from 2.0, a constructor of one or two arguments before. */
    private static LocalRecoveryConfig localRecoveryDisabled() throws Exception {
        try {
            return (LocalRecoveryConfig) LocalRecoveryConfig.class.getField("BACKUP_AND_RECOVERY_DISABLED").get(null);
        } catch (NoSuchFieldException older) {
            for (Constructor<?> c : LocalRecoveryConfig.class.getConstructors()) {
                if (c.getParameterCount() == 2 && c.getParameterTypes()[0] == boolean.class) {
                    return (LocalRecoveryConfig) c.newInstance(false, null);
                }
                if (c.getParameterCount() == 1) {
                    return (LocalRecoveryConfig) c.newInstance(new Object[] {null});
                }
            }
            throw new IllegalStateException("no LocalRecoveryConfig constructor this helper knows");
        }
    }

    /** NeverReturnExpired, no background cleanup, cleanup in full snapshots; updated on create and write or on read. */
    private static StateTtlConfig ttlConfig(long millis, boolean updateOnRead) throws Exception {
        Object builder;
        try {
            Method newBuilder = StateTtlConfig.class.getMethod("newBuilder", java.time.Duration.class);
            builder = newBuilder.invoke(null, java.time.Duration.ofMillis(millis));
        } catch (NoSuchMethodException older) {
            Class<?> time = Class.forName("org.apache.flink.api.common.time.Time");
            Object ttl = time.getMethod("milliseconds", long.class).invoke(null, millis);
            builder = StateTtlConfig.class.getMethod("newBuilder", time).invoke(null, ttl);
        }
        StateTtlConfig.Builder b = (StateTtlConfig.Builder) builder;
        b = updateOnRead ? b.updateTtlOnReadAndWrite() : b.updateTtlOnCreateAndWrite();
        return b.neverReturnExpired().disableCleanupInBackground().cleanupFullSnapshot().build();
    }

    // ------------------------------------------------------------------ states

    public void register(String name, String kind, long ttlMillis, boolean updateOnRead) throws Exception {
        register(name, kind, ttlMillis, updateOnRead, "int");
    }

    /** A state of {@code kind} whose values are of {@code valueType} (int, pojo, kryo: {@link Types}). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void register(String name, String kind, long ttlMillis, boolean updateOnRead, String valueType)
            throws Exception {
        TypeSerializer<Object> values = Types.serializer(valueType, classVersion);
        StateDescriptor descriptor;
        switch (kind) {
            case "value":
                descriptor = new ValueStateDescriptor<>(name, values);
                break;
            case "list":
                descriptor = new ListStateDescriptor<>(name, values);
                break;
            case "map":
                descriptor = new MapStateDescriptor<>(name, IntSerializer.INSTANCE, values);
                break;
            case "reducing":
                descriptor = new ReducingStateDescriptor<>(name, new Sum(), IntSerializer.INSTANCE);
                break;
            default:
                throw new IllegalArgumentException("no state kind " + kind);
        }
        if (ttlMillis > 0) {
            descriptor.enableTimeToLive(ttlConfig(ttlMillis, updateOnRead));
        }
        State state = backend.getOrCreateKeyedState(IntSerializer.INSTANCE, descriptor);
        states.put(name, (InternalKvState<Object, Integer, ?>) state);
    }

    public void setCurrentKey(Object key) {
        backend.setCurrentKey(key);
        currentKey = key;
    }

    private State at(String name, int namespace) {
        InternalKvState<Object, Integer, ?> state = states.get(name);
        state.setCurrentNamespace(namespace);
        return state;
    }

    /** Before a write: the seeded corruption's hook on the map of the current key group. */
    private State writing(String name, int namespace) throws Exception {
        State state = at(name, namespace);
        if (corruption != Corruption.NONE) {
            corruption.before(mapOf(name), "put", currentKey, namespace);
        }
        return state;
    }

    @SuppressWarnings("unchecked")
    public Object valueGet(String name, int namespace) throws Exception {
        return ((ValueState<Integer>) at(name, namespace)).value();
    }

    @SuppressWarnings("unchecked")
    public void valueUpdate(String name, int namespace, Object value) throws Exception {
        ((ValueState<Object>) writing(name, namespace)).update(value);
    }

    @SuppressWarnings("unchecked")
    public Object[] listGet(String name, int namespace) throws Exception {
        Iterable<Object> got = ((ListState<Object>) at(name, namespace)).get();
        if (got == null) {
            return null;
        }
        List<Object> values = new ArrayList<>();
        for (Object v : got) {
            values.add(v);
        }
        return values.toArray();
    }

    @SuppressWarnings("unchecked")
    public void listAdd(String name, int namespace, Object value) throws Exception {
        ((ListState<Object>) writing(name, namespace)).add(value);
    }

    @SuppressWarnings("unchecked")
    public void listUpdate(String name, int namespace, Object[] values) throws Exception {
        ((ListState<Object>) writing(name, namespace)).update(new ArrayList<>(java.util.Arrays.asList(values)));
    }

    @SuppressWarnings("unchecked")
    public void mapPut(String name, int namespace, int userKey, Object value) throws Exception {
        ((MapState<Integer, Object>) writing(name, namespace)).put(userKey, value);
    }

    @SuppressWarnings("unchecked")
    public void mapRemove(String name, int namespace, int userKey) throws Exception {
        ((MapState<Integer, Object>) writing(name, namespace)).remove(userKey);
    }

    @SuppressWarnings("unchecked")
    public Object mapGet(String name, int namespace, int userKey) throws Exception {
        return ((MapState<Integer, Object>) at(name, namespace)).get(userKey);
    }

    @SuppressWarnings("unchecked")
    public boolean mapContains(String name, int namespace, int userKey) throws Exception {
        return ((MapState<Integer, Object>) at(name, namespace)).contains(userKey);
    }

    /** The map's entries as user key, value pairs, a value null where the map holds null (null when Flink returns null). */
    @SuppressWarnings("unchecked")
    public Object[] mapEntries(String name, int namespace) throws Exception {
        Iterable<Map.Entry<Integer, Object>> got = ((MapState<Integer, Object>) at(name, namespace)).entries();
        if (got == null) {
            return null;
        }
        List<Object> flat = new ArrayList<>();
        for (Map.Entry<Integer, Object> e : got) {
            flat.add(e.getKey());
            flat.add(e.getValue());
        }
        return flat.toArray();
    }

    @SuppressWarnings("unchecked")
    public void reduceAdd(String name, int namespace, int value) throws Exception {
        ((ReducingState<Integer>) writing(name, namespace)).add(value);
    }

    @SuppressWarnings("unchecked")
    public Object reduceGet(String name, int namespace) throws Exception {
        return ((ReducingState<Integer>) at(name, namespace)).get();
    }

    public void clear(String name, int namespace) throws Exception {
        writing(name, namespace).clear();
    }

    public Object[] keys(String name, int namespace) {
        return backend.getKeys(name, namespace).toArray();
    }

    public void dispose() {
        backend.dispose();
    }

    // ------------------------------------------------------------------ checkpoints

    /**
     * The synchronous part of checkpoint {@code checkpointId} (the backend's snapshot strategy):
     * to memory when {@code directory} is null, else to files there keeping at most {@code
     * threshold} bytes inline; the streams yield at random, seeded by {@code yieldSeed}, unless it
     * is negative; key groups snappy-compressed if {@code compressed} (the strategy's decorator,
     * as ExecutionConfig#setUseSnapshotCompression sets it).
     */
    public Pending snapshot(long checkpointId, String directory, long yieldSeed, int threshold, boolean compressed)
            throws Exception {
        useCompression(compressed);
        return new Pending(backend.snapshot(checkpointId, 0L, streams(directory, yieldSeed, threshold),
                CheckpointOptions.forCheckpointWithDefaultLocation()));
    }

    /**
     * Snapshot compression on or off, as ExecutionConfig#setUseSnapshotCompression sets it when a
     * backend is built: the decorator of the checkpoint strategy (checkpoints, native savepoints)
     * and the backend's own (AbstractKeyedStateBackend.keyGroupCompressionDecorator, which
     * savepoint() hands to the canonical savepoint's FullSnapshotAsyncWriter).
     */
    private void useCompression(boolean compressed) throws IllegalAccessException {
        StreamCompressionDecorator decorator = compressed ? SnappyStreamCompressionDecorator.INSTANCE
                : UncompressedStreamCompressionDecorator.INSTANCE;
        COMPRESSION.set(CHECKPOINT_STRATEGY.get(backend), decorator);
        BACKEND_COMPRESSION.set(backend, decorator);
    }

    private static CheckpointStreamFactory streams(String directory, long yieldSeed, int threshold)
            throws IOException {
        Random random = yieldSeed < 0 ? null : new Random(yieldSeed);
        return directory == null ? new MemoryStreams(random) : new FileStreams(new Path(directory), random, threshold);
    }

    /**
     * The synchronous part of a savepoint, taken as Flink's StreamOperatorStateHandler takes it: a
     * canonical one through {@code prepareCanonicalSavepoint} (1.15 on; {@code prepareSavepoint}
     * before, where every savepoint is canonical), i.e. a SavepointSnapshotStrategy over the
     * backend's savepoint() resources run by a SnapshotStrategyRunner; a native one (1.15 on)
     * through the backend's own snapshot with savepoint options. Key groups snappy-compressed if
     * {@code compressed}: Flink compresses savepoints of both forms when snapshot compression is on.
     */
    @SuppressWarnings("unchecked")
    public Pending savepoint(long checkpointId, String directory, long yieldSeed, int threshold, boolean canonical,
            boolean compressed) throws Exception {
        useCompression(compressed);
        CheckpointStreamFactory streams = streams(directory, yieldSeed, threshold);
        CheckpointOptions options = savepointOptions(canonical);
        if (!canonical) {
            return new Pending(backend.snapshot(checkpointId, 0L, streams, options));
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
                (SnapshotStrategyRunner<KeyedStateHandle, ?>) prepare.invoke(null, backend, new CloseableRegistry());
        return new Pending(runner.snapshot(checkpointId, 0L, streams, options));
    }

    /** Whether this release takes native savepoints (SavepointFormatType, from 1.15). */
    public static boolean hasNativeSavepoints() {
        try {
            Class.forName("org.apache.flink.core.execution.SavepointFormatType");
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    /** Savepoint options: SavepointType.savepoint(CANONICAL or NATIVE) from 1.15, CheckpointType.SAVEPOINT before. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static CheckpointOptions savepointOptions(boolean canonical) throws Exception {  // OperatorHandle's too
        Object type;
        if (hasNativeSavepoints()) {
            Class<Enum> format = (Class<Enum>) Class.forName("org.apache.flink.core.execution.SavepointFormatType");
            type = Class.forName("org.apache.flink.runtime.checkpoint.SavepointType").getMethod("savepoint", format)
                    .invoke(null, Enum.valueOf(format, canonical ? "CANONICAL" : "NATIVE"));
        } else if (canonical) {
            type = Class.forName("org.apache.flink.runtime.checkpoint.CheckpointType").getField("SAVEPOINT").get(null);
        } else {
            throw new UnsupportedOperationException("native savepoints exist from Flink 1.15 on");
        }
        for (Constructor<?> c : CheckpointOptions.class.getConstructors()) {
            if (c.getParameterCount() == 2 && c.getParameterTypes()[1] == CheckpointStorageLocationReference.class) {
                return (CheckpointOptions) c.newInstance(type, CheckpointStorageLocationReference.getDefault());
            }
        }
        throw new IllegalStateException("no CheckpointOptions(type, location) constructor");
    }

    /** Where a completed snapshot's bytes are: "inline" (a ByteStreamStateHandle) or "file". */
    public static String storage(KeyedStateHandle handle) {
        Object data = ((KeyGroupsStateHandle) handle).getDelegateStateHandle();
        return data instanceof ByteStreamStateHandle ? "inline" : "file";
    }

    /** A completed snapshot's size in bytes (its stream's). */
    public static long size(KeyedStateHandle handle) {
        return ((KeyGroupsStateHandle) handle).getDelegateStateHandle().getStateSize();
    }

    /** A checkpoint's asynchronous part (Flink's RunnableFuture of the snapshot). */
    public static final class Pending {
        private final RunnableFuture<SnapshotResult<KeyedStateHandle>> future;

        Pending(RunnableFuture<SnapshotResult<KeyedStateHandle>> future) {
            this.future = future;
        }

        /** The asynchronous part on the calling thread; the handle. */
        public KeyedStateHandle run() throws Exception {
            future.run();
            return result(-1);
        }

        /** The asynchronous part on a Java thread of its own. */
        public void start() {
            Thread thread = new Thread(future, "cowcheck-async-snapshot");
            thread.setDaemon(true);
            thread.start();
        }

        public boolean isDone() {
            return future.isDone();
        }

        /**
         * The handle, once done (waiting at most {@code millis}, or for ever if negative: a
         * TimeoutException then); the exception the asynchronous part raised, as it raised it.
         */
        public KeyedStateHandle result(long millis) throws Exception {
            try {
                SnapshotResult<KeyedStateHandle> done = millis < 0 ? future.get()
                        : future.get(millis, java.util.concurrent.TimeUnit.MILLISECONDS);
                return done.getJobManagerOwnedSnapshot();
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) {
                    throw (Exception) cause;
                }
                throw e;
            }
        }
    }

    /** A random yield of the writing thread: often none, sometimes a Thread.yield, now and then up to 0.2 ms. */
    static void pause(Random random) {
        if (random == null) {
            return;
        }
        synchronized (random) {
            int pick = random.nextInt(16);
            if (pick < 4) {
                Thread.yield();
            } else if (pick == 4) {
                LockSupport.parkNanos(random.nextInt(200_000));
            }
        }
    }

    static final class MemoryStreams extends MemCheckpointStreamFactory {
        private final Random random;

        MemoryStreams(Random random) {
            super(MEMORY_MAX_SIZE);
            this.random = random;
        }

        @Override
        public MemoryCheckpointOutputStream createCheckpointStateOutputStream(CheckpointedStateScope scope) {
            return new MemoryCheckpointOutputStream(MEMORY_MAX_SIZE) {
                @Override
                public void write(int b) throws IOException {
                    pause(random);
                    super.write(b);
                }

                @Override
                public void write(byte[] b, int off, int len) throws IOException {
                    pause(random);
                    super.write(b, off, len);
                }
            };
        }
    }

    /**
     * File streams: a stream of at most {@code threshold} bytes comes back inline (a
     * ByteStreamStateHandle), a larger one in a file (FsCheckpointStateOutputStream's rule).
     */
    static final class FileStreams extends FsCheckpointStreamFactory {
        private static final int BUFFER = 4096;
        private final Path directory;
        private final Random random;
        private final int threshold;

        FileStreams(Path directory, Random random, int threshold) throws IOException {
            super(FileSystem.getLocalFileSystem(), directory, directory, threshold, Math.max(BUFFER, threshold));
            this.directory = directory;
            this.random = random;
            this.threshold = threshold;
        }

        @Override
        public FsCheckpointStateOutputStream createCheckpointStateOutputStream(CheckpointedStateScope scope)
                throws IOException {
            return new FsCheckpointStateOutputStream(directory, FileSystem.getLocalFileSystem(),
                    Math.max(BUFFER, threshold), threshold) {
                @Override
                public void write(int b) throws IOException {
                    pause(random);
                    super.write(b);
                }

                @Override
                public void write(byte[] b, int off, int len) throws IOException {
                    pause(random);
                    super.write(b, off, len);
                }
            };
        }
    }

    // ------------------------------------------------------------------ handles across releases

    /**
     * A handle as text another release's helper can {@link #rebuild}: the key-group range, the
     * offsets, then the bytes (base64, a ByteStreamStateHandle) or the file and its size, then
     * "savepoint" for a canonical savepoint's KeyGroupsSavepointStateHandle.
     */
    public static String describe(KeyedStateHandle handle) {
        KeyGroupsStateHandle groups = (KeyGroupsStateHandle) handle;
        KeyGroupRange range = groups.getKeyGroupRange();
        StringBuilder out = new StringBuilder("range ").append(range.getStartKeyGroup()).append(' ')
                .append(range.getEndKeyGroup()).append("\noffsets");
        for (int g = range.getStartKeyGroup(); g <= range.getEndKeyGroup(); g++) {
            out.append(' ').append(groups.getOffsetForKeyGroup(g));
        }
        Object data = groups.getDelegateStateHandle();
        if (data instanceof ByteStreamStateHandle) {
            ByteStreamStateHandle bytes = (ByteStreamStateHandle) data;
            out.append("\nbytes ").append(Base64.getEncoder().encodeToString(bytes.getData()));
        } else if (data instanceof FileStateHandle) {
            FileStateHandle file = (FileStateHandle) data;
            out.append("\nfile ").append(file.getStateSize()).append(' ').append(file.getFilePath().toString());
        } else {
            throw new IllegalArgumentException("cannot describe a " + data.getClass().getName());
        }
        if (handle instanceof KeyGroupsSavepointStateHandle) {
            out.append("\nsavepoint");
        }
        return out.toString();
    }

    /** The handle {@link #describe} described (a file is read where it lies). */
    public static KeyedStateHandle rebuild(String text) {
        String[] lines = text.split("\n");
        String[] range = lines[0].split(" ");
        int start = Integer.parseInt(range[1]);
        int end = Integer.parseInt(range[2]);
        String[] offsets = lines[1].split(" ");
        long[] at = new long[end - start + 1];
        for (int i = 0; i < at.length; i++) {
            at[i] = Long.parseLong(offsets[i + 1]);
        }
        String[] data = lines[2].split(" ", 3);
        StreamStateHandle stream = data[0].equals("bytes")
                ? new ByteStreamStateHandle("cowcheck-" + start + "-" + end, Base64.getDecoder().decode(data[1]))
                : new FileStateHandle(new Path(data[2]), Long.parseLong(data[1]));
        KeyGroupRangeOffsets groups = new KeyGroupRangeOffsets(start, end, at);
        return lines.length > 3 && lines[3].equals("savepoint")
                ? new KeyGroupsSavepointStateHandle(groups, stream)
                : new KeyGroupsStateHandle(groups, stream);
    }

    // ------------------------------------------------------------------ corruptions

    private static final Field REGISTERED;
    private static final Field MAPS;
    /** HeapKeyedStateBackend.checkpointStrategy and its keyGroupCompressionDecorator (snapshot compression). */
    private static final Field CHECKPOINT_STRATEGY;
    private static final Field COMPRESSION;
    private static final Field BACKEND_COMPRESSION;

    static {
        try {
            CHECKPOINT_STRATEGY = Class.forName("org.apache.flink.runtime.state.heap.HeapKeyedStateBackend")
                    .getDeclaredField("checkpointStrategy");
            CHECKPOINT_STRATEGY.setAccessible(true);
            COMPRESSION = Class.forName("org.apache.flink.runtime.state.heap.HeapSnapshotStrategy")
                    .getDeclaredField("keyGroupCompressionDecorator");
            COMPRESSION.setAccessible(true);
            BACKEND_COMPRESSION = Class.forName("org.apache.flink.runtime.state.AbstractKeyedStateBackend")
                    .getDeclaredField("keyGroupCompressionDecorator");
            BACKEND_COMPRESSION.setAccessible(true);
            REGISTERED = Class.forName("org.apache.flink.runtime.state.heap.HeapKeyedStateBackend")
                    .getDeclaredField("registeredKVStates");
            REGISTERED.setAccessible(true);
            MAPS = Class.forName("org.apache.flink.runtime.state.heap.StateTable")
                    .getDeclaredField("keyGroupedStateMaps");
            MAPS.setAccessible(true);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The map of the current key group in state {@code name}'s table. */
    private CopyOnWriteStateMap<?, ?, ?> mapOf(String name) throws IllegalAccessException {
        Object table = ((Map<?, ?>) REGISTERED.get(backend)).get(name);
        Object[] maps = (Object[]) MAPS.get(table);
        return (CopyOnWriteStateMap<?, ?, ?>) maps[backend.getCurrentKeyGroupIndex() - range.getStartKeyGroup()];
    }
}
