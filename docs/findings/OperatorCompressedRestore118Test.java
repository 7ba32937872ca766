package org.apache.flink.runtime.state;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.checkpoint.RoundRobinOperatorStateRepartitioner;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;
import org.junit.jupiter.api.Test;

/**
 * Replays cowcheck's counterexample operator-compressed-restore-1.18.json (operator machine) on Flink's own classes,
 * written for flink@1.18.1 (Apache Flink 1.18.1): it fails where the bug is (divergence O3 at step 1) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class OperatorCompressedRestore118Test {
    @Test
    void replay() throws Exception {
        Job op = null;

        // step 0: op = open_job(1) # each instance's ten states registered
        op = Job.open(1);  // 1 instance(s), each with the ten states registered

        // step 1: h0 = checkpoint(op, 0, compressed=True, to='memory') # every instance, asynchronous parts on the task thread   <-- fails here
        // O3: A checkpoint restores, at its own parallelism, what its synchronous part saw. (docs/contract.md#o3)
        // the model expects: each instance restored holds what the job held at the checkpoint's synchronous part
        assumeTrue(Job.compressionAvailable(), "operator-state compression is new in 1.18.0: the program does not apply to this release");
        OperatorStateHandle[] h0 = null;
        h0 = op.checkpoint(0, true);
        Job restored = null;
        try {
            restored = Job.restore(h0, 1, "", null);
        } catch (Exception e) {
            fail("O3: restoring c0 at parallelism 1 raised " + e, e);
        }
        assertEquals(String.join("\n",
                "0 split_int []",
                "0 split_long []",
                "0 split_string []",
                "0 split_list []",
                "0 union_int []",
                "0 union_string []",
                "0 union_list []",
                "0 bcast_int_long {}",
                "0 bcast_string_string {}",
                "0 bcast_long_list {}"),
                restored.view(true), "O3: h0 = checkpoint(op, 0, compressed=True, to='memory')  # every instance, asynchronous parts on the task thread");
    }

    /** Flink's DefaultOperatorStateBackend, one per parallel instance, with cowcheck's operator machine's ten states. */
    static final class Job {
        /** Per state: name, distribution mode, value (element) type, key type (broadcast states). */
        static final String[][] STATES = {
            {"split_int", "SPLIT_DISTRIBUTE", "int", null},
            {"split_long", "SPLIT_DISTRIBUTE", "long", null},
            {"split_string", "SPLIT_DISTRIBUTE", "string", null},
            {"split_list", "SPLIT_DISTRIBUTE", "list", null},
            {"union_int", "UNION", "int", null},
            {"union_string", "UNION", "string", null},
            {"union_list", "UNION", "list", null},
            {"bcast_int_long", "BROADCAST", "long", "int"},
            {"bcast_string_string", "BROADCAST", "string", "string"},
            {"bcast_long_list", "BROADCAST", "list", "long"}
        };

        final List<DefaultOperatorStateBackend> backends = new ArrayList<>();
        final List<Map<String, Object>> states = new ArrayList<>();

        static Job open(int parallelism) throws Exception {
            Job job = new Job();
            for (int i = 0; i < parallelism; i++) {
                job.add(Collections.emptyList());
            }
            return job;
        }

        /** One more instance, restored from handles; every state registered as initializeState does. */
        void add(Collection<OperatorStateHandle> handles) throws Exception {
            DefaultOperatorStateBackend backend = build(handles);
            Map<String, Object> registered = new HashMap<>();
            for (String[] spec : STATES) {
                registered.put(spec[0], register(backend, spec, false));
            }
            backends.add(backend);
            states.add(registered);
        }

        static DefaultOperatorStateBackend build(Collection<OperatorStateHandle> handles) throws Exception {
            return new DefaultOperatorStateBackendBuilder(Job.class.getClassLoader(), new ExecutionConfig(), true,
                    handles, new CloseableRegistry()).build();
        }

        /** A state's descriptor registered; incompatible: its element (or key) serializer one no release migrates from. */
        static Object register(DefaultOperatorStateBackend backend, String[] spec, boolean incompatible) throws Exception {
            if (spec[1].equals("BROADCAST")) {
                return backend.getBroadcastState(new MapStateDescriptor<>(spec[0], serializer(spec[3], incompatible),
                        serializer(spec[2], false)));
            }
            ListStateDescriptor<Object> descriptor = new ListStateDescriptor<>(spec[0], serializer(spec[2], incompatible));
            return spec[1].equals("UNION") ? backend.getUnionListState(descriptor) : backend.getListState(descriptor);
        }

        @SuppressWarnings("unchecked")
        static TypeSerializer<Object> serializer(String kind, boolean incompatible) {
            TypeSerializer<?> s;
            switch (kind) {
                case "int": s = incompatible ? LongSerializer.INSTANCE : IntSerializer.INSTANCE; break;
                case "long": s = incompatible ? IntSerializer.INSTANCE : LongSerializer.INSTANCE; break;
                case "string": s = incompatible ? IntSerializer.INSTANCE : StringSerializer.INSTANCE; break;
                default: s = incompatible ? new ListSerializer<>(LongSerializer.INSTANCE)
                        : new ListSerializer<>(IntSerializer.INSTANCE); break;
            }
            return (TypeSerializer<Object>) s;
        }

        /** The instance of the moment: a step's instance modulo the job's parallelism. */
        private Map<String, Object> at(int instance) {
            return states.get(instance % states.size());
        }

        @SuppressWarnings("unchecked")
        ListState<Object> list(int instance, String name) {
            return (ListState<Object>) at(instance).get(name);
        }

        @SuppressWarnings("unchecked")
        BroadcastState<Object, Object> broadcast(int instance, String name) {
            return (BroadcastState<Object, Object>) at(instance).get(name);
        }

        void clear(int instance, String name) {
            Object state = at(instance).get(name);
            if (state instanceof BroadcastState) {
                ((BroadcastState<?, ?>) state).clear();
            } else {
                ((ListState<?>) state).clear();
            }
        }

        void dispose() {
            for (DefaultOperatorStateBackend backend : backends) {
                backend.dispose();
            }
        }

        /** Every instance's synchronous part, then every asynchronous part on the task thread: the handles
         *  (null: an empty snapshot). */
        OperatorStateHandle[] checkpoint(long id, boolean compressed) throws Exception {
            List<RunnableFuture<SnapshotResult<OperatorStateHandle>>> futures = new ArrayList<>();
            for (DefaultOperatorStateBackend backend : backends) {
                MemCheckpointStreamFactory streams = new MemCheckpointStreamFactory(5 * 1024 * 1024);
                CheckpointOptions options = CheckpointOptions.forCheckpointWithDefaultLocation();
                futures.add(compressed ? compressedRunner(backend).snapshot(id, 0L, streams, options)
                        : backend.snapshot(id, 0L, streams, options));
            }
            OperatorStateHandle[] handles = new OperatorStateHandle[futures.size()];
            for (int i = 0; i < handles.length; i++) {
                futures.get(i).run();
                handles[i] = futures.get(i).get().getJobManagerOwnedSnapshot();
            }
            return handles;
        }

        /** Operator-state compression (1.18.0 on): DefaultOperatorStateBackendSnapshotStrategy has a decorator argument. */
        static boolean compressionAvailable() throws Exception {
            return strategyConstructor() != null;
        }

        private static Constructor<?> strategyConstructor() throws Exception {
            Class<?> strategy = Class.forName("org.apache.flink.runtime.state.DefaultOperatorStateBackendSnapshotStrategy");
            for (Constructor<?> c : strategy.getDeclaredConstructors()) {
                if (c.getParameterCount() == 4) {
                    return c;
                }
            }
            return null;
        }

        /** A runner over the backend's own states whose strategy has the snappy decorator, as a job with snapshot
         *  compression on builds it (the backend's builder takes no decorator: reflection). */
        @SuppressWarnings({"unchecked", "rawtypes"})
        static SnapshotStrategyRunner<OperatorStateHandle, ?> compressedRunner(DefaultOperatorStateBackend backend)
                throws Exception {
            Constructor<?> constructor = strategyConstructor();
            constructor.setAccessible(true);
            Object strategy = constructor.newInstance(Job.class.getClassLoader(),
                    field(backend, "registeredOperatorStates"),
                    field(backend, "registeredBroadcastStates"), SnappyStreamCompressionDecorator.INSTANCE);
            return new SnapshotStrategyRunner("cowcheck compressed operator state", (SnapshotStrategy) strategy,
                    new CloseableRegistry(), SnapshotExecutionType.ASYNCHRONOUS);
        }

        private static Object field(DefaultOperatorStateBackend backend, String name) throws Exception {
            Field f = DefaultOperatorStateBackend.class.getDeclaredField(name);
            f.setAccessible(true);
            return f.get(backend);
        }

        /**
         * The job restored from a checkpoint's handles at a parallelism (RoundRobinOperatorStateRepartitioner).
         * reregister: a state each instance first registers with an incompatible serializer, which must fail
         * (refused: the test's failure if it does not; then the job restarts and the instance is restored again).
         */
        static Job restore(OperatorStateHandle[] handles, int parallelism, String reregister, String refused)
                throws Exception {
            List<List<OperatorStateHandle>> previous = new ArrayList<>();
            for (OperatorStateHandle handle : handles) {
                previous.add(handle == null ? new ArrayList<>() : new ArrayList<>(Collections.singletonList(handle)));
            }
            List<List<OperatorStateHandle>> parts = RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState(
                    previous, handles.length, parallelism);
            Job job = new Job();
            for (int i = 0; i < parallelism; i++) {
                if (!reregister.isEmpty()) {
                    DefaultOperatorStateBackend backend = build(parts.get(i));
                    boolean accepted = true;
                    try {
                        register(backend, spec(reregister), true);
                    } catch (Exception expected) {  // StateMigrationException
                        accepted = false;
                    }
                    backend.dispose();
                    if (accepted && refused != null) {
                        fail(refused);
                    }
                }
                job.add(parts.get(i));
            }
            return job;
        }

        private static String[] spec(String name) {
            for (String[] spec : STATES) {
                if (spec[0].equals(name)) {
                    return spec;
                }
            }
            throw new IllegalArgumentException(name);
        }

        /** What a restored job holds, as cowcheck compares it: a line per instance and state (split lists in order
         *  when exact, else their sizes and elements over all instances; union lists sorted; broadcast maps). */
        String view(boolean exact) throws Exception {
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < states.size(); i++) {
                for (String[] spec : STATES) {
                    Object state = states.get(i).get(spec[0]);
                    if (spec[1].equals("BROADCAST")) {
                        lines.add(i + " " + spec[0] + " " + showEntries(((BroadcastState<?, ?>) state).entries()));
                    } else if (spec[1].equals("UNION")) {
                        lines.add(i + " " + spec[0] + " " + sorted(((ListState<?>) state).get()));
                    } else if (exact) {
                        lines.add(i + " " + spec[0] + " " + show(((ListState<?>) state).get()));
                    }
                }
            }
            if (!exact) {
                for (String[] spec : STATES) {
                    if (!spec[1].equals("SPLIT_DISTRIBUTE")) {
                        continue;
                    }
                    List<Object> all = new ArrayList<>();
                    List<Integer> sizes = new ArrayList<>();
                    for (Map<String, Object> instance : states) {
                        int size = 0;
                        Iterable<?> elements = ((ListState<?>) instance.get(spec[0])).get();
                        for (Object element : elements == null ? Collections.emptyList() : elements) {
                            all.add(element);
                            size++;
                        }
                        sizes.add(size);
                    }
                    Collections.sort(sizes);
                    lines.add(spec[0] + " sizes " + sizes + " elements " + sorted(all));
                }
            }
            return String.join("\n", lines);
        }

        /** An answer as cowcheck prints it: Java's toString forms, a map's pairs sorted by their keys' text. */
        @SuppressWarnings("unchecked")
        static String show(Object answer) {
            if (answer instanceof Map) {
                return showEntries(((Map<Object, Object>) answer).entrySet());
            }
            if (answer instanceof List) {
                List<String> items = new ArrayList<>();
                for (Object item : (List<Object>) answer) {
                    items.add(show(item));
                }
                return "[" + String.join(", ", items) + "]";
            }
            return String.valueOf(answer);
        }

        /** A broadcast state's entries as a map: its pairs sorted by their keys' text. */
        static String showEntries(Iterable<? extends Map.Entry<?, ?>> entries) {
            List<String> items = new ArrayList<>();
            for (Map.Entry<?, ?> e : entries) {
                items.add(show(e.getKey()) + "=" + show(e.getValue()));
            }
            Collections.sort(items);
            return "{" + String.join(", ", items) + "}";
        }

        /** A list state's answer as cowcheck reads it: none is the empty list. */
        static String show(Iterable<?> elements) {
            List<String> items = new ArrayList<>();
            if (elements != null) {
                for (Object element : elements) {
                    items.add(show(element));
                }
            }
            return "[" + String.join(", ", items) + "]";
        }

        /** A multiset of elements: each one's text, sorted. */
        static String sorted(Iterable<?> elements) {
            List<String> items = new ArrayList<>();
            if (elements != null) {
                for (Object element : elements) {
                    items.add(show(element));
                }
            }
            Collections.sort(items);
            return "[" + String.join(", ", items) + "]";
        }

        /** A list element found by value, changed in place through what the state handed out: appended to. */
        @SuppressWarnings("unchecked")
        static void appendTo(ListState<Object> state, List<Integer> element, int value) throws Exception {
            for (Object held : state.get()) {
                if (element.equals(held)) {
                    ((List<Object>) held).add(value);
                    return;
                }
            }
            fail("O1: the state holds no element " + element + "; the model's holds it");
        }

        /** A broadcast value changed in place through what the state handed out: appended to. */
        @SuppressWarnings("unchecked")
        static void appendTo(BroadcastState<Object, Object> state, Object key, int value) throws Exception {
            Object held = state.get(key);
            if (held == null) {
                fail("O1: the state handed out null for key " + key + "; the model's holds a value");
            }
            ((List<Object>) held).add(value);
        }

        static List<Integer> ints(Integer... values) {
            return new ArrayList<>(Arrays.asList(values));
        }

        static List<Object> values(Object... values) {
            return new ArrayList<>(Arrays.asList(values));
        }

        static Map<Object, Object> entries(Object... keysAndValues) {
            Map<Object, Object> out = new HashMap<>();
            for (int i = 0; i < keysAndValues.length; i += 2) {
                out.put(keysAndValues[i], keysAndValues[i + 1]);
            }
            return out;
        }
    }
}
