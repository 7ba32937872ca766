package cowcheck.bridge;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RunnableFuture;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.checkpoint.RoundRobinOperatorStateRepartitioner;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.DefaultOperatorStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.SnapshotExecutionType;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnapshotStrategyRunner;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

/**
 * Flink's own DefaultOperatorStateBackend, for the operator machine (properties/operator,
 * properties/flink/operator.py).
 *
 * <p>Built by DefaultOperatorStateBackendBuilder (its constructor is the same from 1.13.6 to 2.3.0),
 * restored from the handles given; states registered through descriptors as an operator's
 * initializeState does (list, union list and broadcast states of Integer, Long, String and
 * List&lt;Integer&gt;). A checkpoint is the backend's own snapshot (its SnapshotStrategyRunner) into
 * memory or file streams that may yield at random (BackendHandle's streams); a compressed one
 * (1.18.0 on) goes through a second runner over the same states whose strategy has the snappy
 * decorator, built by reflection: Flink reads the decorator as the asynchronous part writes, so one
 * strategy switched between checkpoints would change a running one. Repartitioning is
 * RoundRobinOperatorStateRepartitioner.INSTANCE.
 */
public final class OperatorHandle {
    private final DefaultOperatorStateBackend backend;
    private final Map<String, Object> states = new HashMap<>();
    private SnapshotStrategyRunner<OperatorStateHandle, ?> compressedRunner;

    public OperatorHandle(OperatorStateHandle[] handles) throws Exception {
        List<OperatorStateHandle> restore = new ArrayList<>();
        for (OperatorStateHandle handle : handles) {
            restore.add(handle);
        }
        this.backend = new DefaultOperatorStateBackendBuilder(OperatorHandle.class.getClassLoader(),
                new ExecutionConfig(), true, restore, new CloseableRegistry()).build();
    }

    private static TypeSerializer<?> serializer(String kind) {
        switch (kind) {
            case "int":
                return IntSerializer.INSTANCE;
            case "long":
                return LongSerializer.INSTANCE;
            case "string":
                return StringSerializer.INSTANCE;
            case "list<int>":
                return new ListSerializer<>(IntSerializer.INSTANCE);
            case "list<long>":
                return new ListSerializer<>(LongSerializer.INSTANCE);
            default:
                throw new IllegalArgumentException("no serializer for " + kind);
        }
    }

    /** Register a state: mode SPLIT_DISTRIBUTE, UNION or BROADCAST; value (element) and key serializer ids. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void register(String name, String mode, String valueKind, String keyKind) throws Exception {
        Object state;
        if (mode.equals("BROADCAST")) {
            state = backend.getBroadcastState(new MapStateDescriptor(name, serializer(keyKind), serializer(valueKind)));
        } else {
            ListStateDescriptor descriptor = new ListStateDescriptor(name, serializer(valueKind));
            state = mode.equals("UNION") ? backend.getUnionListState(descriptor) : backend.getListState(descriptor);
        }
        states.put(name, state);
    }

    @SuppressWarnings("unchecked")
    private ListState<Object> list(String name) {
        return (ListState<Object>) states.get(name);
    }

    @SuppressWarnings("unchecked")
    private BroadcastState<Object, Object> broadcast(String name) {
        return (BroadcastState<Object, Object>) states.get(name);
    }

    public Object[] listGet(String name) throws Exception {
        List<Object> out = new ArrayList<>();
        for (Object element : list(name).get()) {
            out.add(element);
        }
        return out.toArray();
    }

    public void listAdd(String name, Object value) throws Exception {
        list(name).add(value);
    }

    public void listAddAll(String name, List<Object> values) throws Exception {
        list(name).addAll(values);
    }

    public void listUpdate(String name, List<Object> values) throws Exception {
        list(name).update(values);
    }

    /** A list element (a List) of the state changed in place: the {@code index}-th, appended to. */
    @SuppressWarnings("unchecked")
    public void listElementAppend(String name, int index, int value) throws Exception {
        Iterator<Object> it = list(name).get().iterator();
        for (int i = 0; i < index; i++) {
            it.next();
        }
        ((List<Object>) it.next()).add(value);
    }

    public void clear(String name) {
        Object state = states.get(name);
        if (state instanceof BroadcastState) {
            ((BroadcastState<?, ?>) state).clear();
        } else {
            ((ListState<?>) state).clear();
        }
    }

    public void put(String name, Object key, Object value) throws Exception {
        broadcast(name).put(key, value);
    }

    public void putAll(String name, Map<Object, Object> entries) throws Exception {
        broadcast(name).putAll(entries);
    }

    public void remove(String name, Object key) throws Exception {
        broadcast(name).remove(key);
    }

    public Object get(String name, Object key) throws Exception {
        return broadcast(name).get(key);
    }

    public boolean contains(String name, Object key) throws Exception {
        return broadcast(name).contains(key);
    }

    /** A broadcast value (a List) changed in place: appended to. */
    @SuppressWarnings("unchecked")
    public void valueAppend(String name, Object key, int value) throws Exception {
        ((List<Object>) broadcast(name).get(key)).add(value);
    }

    /** The entries, flat: key, value, key, value... */
    public Object[] entries(String name) throws Exception {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<Object, Object> e : broadcast(name).entries()) {
            out.add(e.getKey());
            out.add(e.getValue());
        }
        return out.toArray();
    }

    public void dispose() {
        backend.dispose();
    }

    // ------------------------------------------------------------------ checkpoints

    /**
     * The synchronous part of checkpoint {@code checkpointId} (see the class comment); of a savepoint if
     * {@code savepoint}: the same snapshot with the options of a canonical savepoint, as
     * StreamOperatorStateHandler passes them (SavepointType.savepoint(CANONICAL) from 1.15,
     * CheckpointType.SAVEPOINT before).
     */
    public Pending snapshot(long checkpointId, String directory, long yieldSeed, boolean compressed,
                            boolean savepoint) throws Exception {
        Random random = yieldSeed < 0 ? null : new Random(yieldSeed);
        CheckpointStreamFactory streams = directory == null
                ? new BackendHandle.MemoryStreams(random)
                : new BackendHandle.FileStreams(new Path(directory), random, 0);  // every state in a file
        CheckpointOptions options = savepoint ? BackendHandle.savepointOptions(true)
                : CheckpointOptions.forCheckpointWithDefaultLocation();
        if (!compressed) {
            return new Pending(backend.snapshot(checkpointId, 0L, streams, options));
        }
        return new Pending(compressedRunner().snapshot(checkpointId, 0L, streams, options));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private SnapshotStrategyRunner<OperatorStateHandle, ?> compressedRunner() throws Exception {
        if (compressedRunner == null) {
            Class<?> strategyClass = Class.forName("org.apache.flink.runtime.state.DefaultOperatorStateBackendSnapshotStrategy");
            Constructor<?> constructor = null;
            for (Constructor<?> c : strategyClass.getDeclaredConstructors()) {
                if (c.getParameterCount() == 4) {
                    constructor = c;
                }
            }
            if (constructor == null) {
                throw new UnsupportedOperationException("this Flink release has no operator-state compression "
                        + "(1.18.0 on)");
            }
            constructor.setAccessible(true);
            Object strategy = constructor.newInstance(OperatorHandle.class.getClassLoader(),
                    field("registeredOperatorStates"), field("registeredBroadcastStates"),
                    SnappyStreamCompressionDecorator.INSTANCE);
            compressedRunner = new SnapshotStrategyRunner("cowcheck compressed operator state",
                    (org.apache.flink.runtime.state.SnapshotStrategy) strategy, new CloseableRegistry(),
                    SnapshotExecutionType.ASYNCHRONOUS);
        }
        return compressedRunner;
    }

    private Object field(String name) throws ReflectiveOperationException {
        Field f = DefaultOperatorStateBackend.class.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(backend);
    }

    /** A checkpoint's asynchronous part: run here, or on a Java thread of its own. */
    public static final class Pending {
        private final RunnableFuture<SnapshotResult<OperatorStateHandle>> future;

        Pending(RunnableFuture<SnapshotResult<OperatorStateHandle>> future) {
            this.future = future;
        }

        public OperatorStateHandle run() throws Exception {
            future.run();
            return result(-1);
        }

        public void start() {
            Thread thread = new Thread(future, "cowcheck-async-operator-snapshot");
            thread.setDaemon(true);
            thread.start();
        }

        public boolean isDone() {
            return future.isDone();
        }

        /** The handle (null: nothing registered), once done; the exception the asynchronous part raised. */
        public OperatorStateHandle result(long millis) throws Exception {
            try {
                SnapshotResult<OperatorStateHandle> done = millis < 0 ? future.get()
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

    // ------------------------------------------------------------------ repartitioning and handles

    /** RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState, per new subtask its handles. */
    public static OperatorStateHandle[][] repartition(OperatorStateHandle[][] previous, int oldParallelism,
                                                      int newParallelism) {
        List<List<OperatorStateHandle>> in = new ArrayList<>();
        for (OperatorStateHandle[] handles : previous) {
            List<OperatorStateHandle> subtask = new ArrayList<>();
            for (OperatorStateHandle h : handles) {
                subtask.add(h);
            }
            in.add(subtask);
        }
        List<List<OperatorStateHandle>> out = RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState(
                in, oldParallelism, newParallelism);
        OperatorStateHandle[][] result = new OperatorStateHandle[out.size()][];
        for (int i = 0; i < result.length; i++) {
            result[i] = out.get(i).toArray(new OperatorStateHandle[0]);
        }
        return result;
    }

    /**
     * A handle as text another release's helper (or the reference) can {@link #rebuild}: per state
     * "state NAME MODE OFFSETS...", then the bytes (base64) or the file and its size.
     */
    public static String describe(OperatorStateHandle handle) {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, OperatorStateHandle.StateMetaInfo> e : handle.getStateNameToPartitionOffsets().entrySet()) {
            out.append("state ").append(e.getKey()).append(' ').append(e.getValue().getDistributionMode());
            for (long offset : e.getValue().getOffsets()) {
                out.append(' ').append(offset);
            }
            out.append('\n');
        }
        StreamStateHandle data = handle.getDelegateStateHandle();
        if (data instanceof ByteStreamStateHandle) {
            out.append("bytes ").append(Base64.getEncoder().encodeToString(((ByteStreamStateHandle) data).getData()));
        } else if (data instanceof FileStateHandle) {
            FileStateHandle file = (FileStateHandle) data;
            out.append("file ").append(file.getStateSize()).append(' ').append(file.getFilePath().toString());
        } else {
            throw new IllegalArgumentException("cannot describe a " + data.getClass().getName());
        }
        return out.toString();
    }

    /** The handle {@link #describe} described. */
    public static OperatorStateHandle rebuild(String text, String name) {
        String[] lines = text.split("\n");
        Map<String, OperatorStateHandle.StateMetaInfo> offsets = new HashMap<>();
        for (int i = 0; i < lines.length - 1; i++) {
            String[] parts = lines[i].split(" ");
            long[] at = new long[parts.length - 3];
            for (int j = 0; j < at.length; j++) {
                at[j] = Long.parseLong(parts[j + 3]);
            }
            offsets.put(parts[1], new OperatorStateHandle.StateMetaInfo(at,
                    OperatorStateHandle.Mode.valueOf(parts[2])));
        }
        String[] data = lines[lines.length - 1].split(" ", 3);
        StreamStateHandle stream = data[0].equals("bytes")
                ? new ByteStreamStateHandle(name, Base64.getDecoder().decode(data[1]))
                : new FileStateHandle(new Path(data[2]), Long.parseLong(data[1]));
        return new OperatorStreamStateHandle(offsets, stream);
    }
}
