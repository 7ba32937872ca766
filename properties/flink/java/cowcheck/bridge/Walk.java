package cowcheck.bridge;

import static cowcheck.bridge.Ops.ARGUMENTS;
import static cowcheck.bridge.Ops.CONTAINS_KEY;
import static cowcheck.bridge.Ops.GET;
import static cowcheck.bridge.Ops.GET_MUTATE;
import static cowcheck.bridge.Ops.GET_RANGE;
import static cowcheck.bridge.Ops.HOLD_KEYS;
import static cowcheck.bridge.Ops.ITERATE;
import static cowcheck.bridge.Ops.ITERATE_MODIFY;
import static cowcheck.bridge.Ops.KEYS;
import static cowcheck.bridge.Ops.OPERATIONS;
import static cowcheck.bridge.Ops.PUT;
import static cowcheck.bridge.Ops.PUT_AND_GET_OLD;
import static cowcheck.bridge.Ops.PUT_RANGE;
import static cowcheck.bridge.Ops.READ_SNAPSHOT;
import static cowcheck.bridge.Ops.READ_SNAPSHOT_TRANSFORMED;
import static cowcheck.bridge.Ops.REHASH;
import static cowcheck.bridge.Ops.RELEASE;
import static cowcheck.bridge.Ops.REMOVE;
import static cowcheck.bridge.Ops.REMOVE_AND_GET_OLD;
import static cowcheck.bridge.Ops.REMOVE_RANGE;
import static cowcheck.bridge.Ops.SIZE_OF_NAMESPACE;
import static cowcheck.bridge.Ops.SNAPSHOT;
import static cowcheck.bridge.Ops.TRANSFORM;
import static cowcheck.bridge.Ops.VISIT;
import static cowcheck.bridge.Ops.WRITE_SNAPSHOT;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.StateSnapshotTransformer;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMap;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMapSnapshot;
import org.apache.flink.runtime.state.internal.InternalKvState.StateIncrementalVisitor;

/**
 * The one interpreter of the batched encoding: a program on one Flink CopyOnWriteStateMap, a segment
 * of steps per Java call (properties/flink/segments.py). Campaign walks, the walk phase of cowcheck
 * check and parity programs (properties/flink/parity.py) all run here.
 *
 * <p>For every step this class makes the calls the map harness (properties/map/harness.py) makes
 * into an implementation, in the same order and with the same decisions, and records each call's
 * answer (a value, or the exception it raised): the Python side then runs the harness itself
 * against these answers, so every model check is the harness's own, step by step, and a failure
 * names its exact step. White-box, the invariants I1–I9 and the scenarios of the step are
 * computed here ({@link Checker}) over Flink's object graph. Operation codes, names and argument
 * layouts are {@link Ops}'s, generated from the map's table; each operation's application is its
 * one case of {@link #execute}.
 *
 * <p>Per step: {@code [answers, size after the step]}, white-box followed by {@code scenarios,
 * rehashing before the step, violations}, then by {@code detail}: nothing, {@code [summary,
 * rehashing]}, or the whole structure ({@link #structure()}: what parity compares). States cross as
 * {@code [content, number]}, or as the number alone when Python's object already holds that
 * content: objects are numbered by identity in order of first appearance (a state put gets its
 * number at the put), so Python hands the harness one Python object per Java object. States are
 * Java lists through Flink's plain ListSerializer, mutated here exactly where the harness mutates
 * what it was handed.
 *
 * <p>Every call into Flink's map is timed ({@link Clock}): each step's record ends with its longest
 * call in nanoseconds, which is all of the segment's time the step time limit charges Flink with.
 */
public final class Walk {
    /** What each step reports beyond its answers: nothing, the structure summary, the whole structure. */
    public static final int DETAIL_NONE = 0;
    public static final int DETAIL_SUMMARY = 1;
    public static final int DETAIL_STRUCTURE = 2;

    // Arguments of one step at most, by kind (execute reads the first two keys and three ints of any step)
    private static final int MOST_KEYS = Math.max(2, most('k'));
    private static final int MOST_INTS = Math.max(3, most('i'));

    private final CopyOnWriteStateMap<Object, Object, List<Integer>> map =
            Internals.newMap(new ListSerializer<>(IntSerializer.INSTANCE));
    private final Checker checker;
    private final Clock clock;
    private final int detail;
    private final KeyObjects keyObjects = new KeyObjects(); // the objects the harness hands the map
    private final Corruption corruption;
    private final IdentityHashMap<Object, Integer> numbers = new IdentityHashMap<>();
    private final IdentityHashMap<Object, Integer> entryNumbers = new IdentityHashMap<>(); // for structures
    // The content Python's object for each state holds (what was sent, plus the harness's own
    // appends, which this class mirrors): a state whose content is unchanged crosses as its number.
    private final IdentityHashMap<Object, List<Integer>> sent = new IdentityHashMap<>();
    private final Map<Integer, CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> snapshots =
            new HashMap<>();
    private final List<CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> taken = new ArrayList<>();
    private final Set<Integer> released = new HashSet<>(); // sids the program released (the model's view)
    private final Map<Integer, Integer> liveVersions = new LinkedHashMap<>(); // sid -> version reported

    private int[] program;
    private int pc;
    private Object[] keys;
    private Json out;
    private int bound;
    // The arguments of the step being run, decoded by Ops.ARGUMENTS: keys and namespaces (values, made
    // into the objects a call is handed by use()), ints and a state's content, each in argument order.
    private final Object[] keyArgs = new Object[MOST_KEYS];
    private final int[] intArgs = new int[MOST_INTS];
    private int[] stateArg;

    public Walk(boolean whiteBox, String corruption) {
        this(whiteBox, corruption, DETAIL_NONE, null);
    }

    /** {@code clock}: 8 bytes where {@link Clock} publishes its phase for Python's watchdog, or null. */
    public Walk(boolean whiteBox, String corruption, int detail, ByteBuffer clock) {
        this.clock = new Clock(clock);
        this.checker = whiteBox ? new Checker() : null;
        this.corruption = Corruption.forName(corruption);
        this.detail = detail;
    }

    /** The operation names in code order ({@link Ops#OPERATIONS}). */
    public static String[] operations() {
        return Ops.names();
    }

    private static int most(char kind) {
        int most = 0;
        for (String layout : ARGUMENTS) {
            most = Math.max(most, (int) layout.chars().filter(c -> c == kind).count());
        }
        return most;
    }

    /**
     * Runs the encoded steps of {@code program} (keys and namespaces index {@code keys}). {@code
     * bound}: at most how many entries the model may hold during the segment; iterations read at
     * most {@code 2 * bound + 65} entries (one more than the harness's own bound ever is), and a
     * visit makes at most {@code 4 * (bound + 64) + 1025} calls.
     */
    public String run(int[] program, Object[] keys, int bound) {
        this.program = program;
        this.pc = 0;
        this.keys = keys;
        this.bound = bound;
        this.out = new Json((detail == DETAIL_STRUCTURE ? 512 : 48) * program.length + 64);
        out.open();
        while (pc < program.length) {
            out.open();
            step();
            out.close();
        }
        return out.close().toString();
    }

    private int arg() {
        return program[pc++];
    }

    /** A key or namespace of the table: a value, made into the object a call is handed by {@link #use}. */
    private Object key() {
        return keys[arg()];
    }

    private Object use(Object value) {
        return keyObjects.use(value);
    }

    private int[] content() {
        int size = arg();
        int[] c = new int[size];
        for (int i = 0; i < size; i++) {
            c[i] = arg();
        }
        return c;
    }

    private int rowBound() {
        return 2 * bound + 65;
    }

    // ------------------------------------------------------------------ steps

    /** Reads operation {@code op}'s arguments as its layout says ({@link Ops#ARGUMENTS}). */
    private void decode(int op) {
        if (op < 0 || op >= ARGUMENTS.length) {
            throw new IllegalArgumentException("unknown operation code " + op);
        }
        String layout = ARGUMENTS[op];
        int k = 0;
        int i = 0;
        stateArg = null;
        for (int at = 0; at < layout.length(); at++) {
            char kind = layout.charAt(at);
            if (kind == 'k') {
                keyArgs[k++] = key();
            } else if (kind == 's') {
                stateArg = content();
            } else {
                intArgs[i++] = arg();
            }
        }
    }

    private void step() {
        int op = arg();
        decode(op);
        boolean keyed = Ops.keyed(op);
        List<String> scenarios = null;
        boolean rehashingBefore = false;
        int[] before = null;
        if (checker != null) {
            rehashingBefore = Internals.isRehashing(map);
            if (keyed) { // a keyed operation's first argument is its key and namespace
                scenarios = Checker.classifyKeyed(map, OPERATIONS[op], keyArgs[0], keyArgs[1]);
            } else if (op == SNAPSHOT) {
                scenarios = Checker.classifySnapshot(map);
            }
            if ((keyed || op == REHASH) && rehashingBefore) {
                before = new int[] {Internals.summary(map)[4], Internals.primaryTable(map).length};
            }
        }
        out.open();
        execute(op);
        out.close();
        out.i(flink(map::size));
        if (checker != null) {
            out.open();
            for (String name : scenarios == null ? List.<String>of() : scenarios) {
                out.str(name);
            }
            out.close().bool(rehashingBefore).open();
            for (String[] v : checker.violations(map, liveVersions.values())) {
                out.open().str(v[0]).str(v[1]).close();
            }
            if (before != null && Internals.isRehashing(map) && Internals.primaryTable(map).length == before[1]
                    && Internals.summary(map)[4] <= before[0]) {
                out.open().str("I4").str("a rehash is in progress but rehash_index stayed at "
                        + Internals.summary(map)[4] + " (every keyed operation moves at least one bucket)").close();
            }
            out.close();
        }
        if (detail == DETAIL_SUMMARY) {
            out.open().ints(Internals.summary(map)).bool(Internals.isRehashing(map)).close();
        } else if (detail == DETAIL_STRUCTURE) {
            structure(out);
        }
        out.i(clock.step());
    }

    private static List<Integer> newState(int[] content) {
        List<Integer> s = new ArrayList<>(content.length);
        for (int x : content) {
            s.add(x);
        }
        return s;
    }

    private int number(Object o) {
        Integer id = numbers.get(o);
        if (id == null) {
            id = numbers.size() + 1;
            numbers.put(o, id);
        }
        return id;
    }

    /** A state: null, its number (Python's object holds this content already) or [content, number]. */
    private void state(List<Integer> s) {
        if (s == null) {
            out.nil();
            return;
        }
        List<Integer> known = sent.get(s);
        if (known != null && known.equals(s)) {
            out.i(number(s));
            return;
        }
        sent.put(s, new ArrayList<>(s));
        out.open().content(s).i(number(s)).close();
    }

    /** Python's object for {@code s} now holds its content (the harness made or changed it as Java did). */
    private void synced(List<Integer> s) {
        if (s != null) {
            sent.put(s, new ArrayList<>(s));
        }
    }

    private void row(StateEntry<Object, Object, List<Integer>> e) {
        out.open().value(e.getKey()).value(e.getNamespace());
        state(e.getState());
        out.close();
    }

    /**
     * Up to {@code limit} rows of {@code it} as a list, then the exception it raised or null: one
     * call of the harness's, timed without the recording of its rows.
     */
    private <T> void rows(Iterator<T> it, int limit, boolean keysOnly) {
        out.open();
        Throwable error = null;
        try {
            for (int i = 0; i < limit && next(it); i++) {
                T x = it.next();
                clock.pause();
                if (keysOnly) {
                    out.value(x);
                } else {
                    @SuppressWarnings("unchecked")
                    StateEntry<Object, Object, List<Integer>> e = (StateEntry<Object, Object, List<Integer>>) x;
                    row(e);
                }
            }
        } catch (RuntimeException e) {
            error = e;
        }
        clock.out();
        out.close();
        if (error == null) {
            out.nil();
        } else {
            out.thrown(error);
        }
    }

    /**
     * Flink's call of operation {@code op} on key {@code k} and namespace {@code n}, the seeded
     * corruption's hooks around it: one call of Flink's, timed ({@link Clock}).
     */
    private <T> T call(String op, Object k, Object n, Supplier<T> call) {
        clock.in();
        try {
            corruption.before(map, op, k, n);
            T result = call.get();
            corruption.after(map, op, k, n);
            return result;
        } finally {
            clock.out();
        }
    }

    /** {@code call.get()}: one call of Flink's, timed ({@link Clock}). */
    private <T> T flink(Supplier<T> call) {
        clock.in();
        try {
            return call.get();
        } finally {
            clock.out();
        }
    }

    /** The snapshot's iterator (Flink's getIterator, timed). */
    private Iterator<StateEntry<Object, Object, List<Integer>>> iterator(
            CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap,
            StateSnapshotTransformer<List<Integer>> t) {
        clock.in();
        try {
            return snap.getIterator(null, null, null, t);
        } finally {
            clock.out();
        }
    }

    /** {@code it.hasNext()}, timed as a part of Flink's call; if true, the clock runs on for its next(). */
    private boolean next(Iterator<?> it) {
        clock.in();
        boolean more = it.hasNext();
        if (!more) {
            clock.pause();
        }
        return more;
    }

    /**
     * Runs step {@code op} (its arguments decoded into {@link #keyArgs}, {@link #intArgs} and
     * {@link #stateArg}) as the harness does, recording every call's answer.
     */
    private void execute(int op) {
        Object k = keyArgs[0];
        Object n = keyArgs[1];
        int a = intArgs[0];
        int b = intArgs[1];
        int c = intArgs[2];
        switch (op) {
            case PUT: // key, namespace, state
                put(use(k), use(n), newState(stateArg));
                return;
            case PUT_AND_GET_OLD: { // key, namespace, state
                Object key = use(k);
                Object namespace = use(n);
                List<Integer> s = newState(stateArg);
                try {
                    int id = number(s);
                    synced(s);
                    List<Integer> old = call("put_and_get_old", key, namespace,
                            () -> map.putAndGetOld(key, namespace, s));
                    out.open().i(id);
                    state(old);
                    out.close();
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            }
            case GET: // key, namespace
                get(use(k), use(n), false, 0);
                return;
            case GET_MUTATE: // key, namespace, value
                get(use(k), use(n), true, a);
                return;
            case CONTAINS_KEY: // key, namespace
                containsKey(use(k), use(n));
                return;
            case REMOVE: // key, namespace
                remove(use(k), use(n));
                return;
            case REMOVE_AND_GET_OLD: { // key, namespace
                Object key = use(k);
                Object namespace = use(n);
                try {
                    state(call("remove_and_get_old", key, namespace, () -> map.removeAndGetOld(key, namespace)));
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            }
            case TRANSFORM: // key, namespace, value
                transform(use(k), use(n), a);
                return;
            case REHASH: // key, namespace, reads
                for (int i = 0; i < a; i++) {
                    if (!containsKey(use(k), use(n))) {
                        return; // it raised: the harness fails this step
                    }
                }
                return;
            case SNAPSHOT: // sid
                snapshot(a);
                return;
            case READ_SNAPSHOT: // sid
                readSnapshot(a);
                return;
            case READ_SNAPSHOT_TRANSFORMED: // sid, transformer
                readTransformed(a, b);
                return;
            case RELEASE: // sid
                if (snapshots.containsKey(a)) {
                    release(a);
                    release(a);
                }
                return;
            case ITERATE:
                try {
                    rows(flink(map::iterator), rowBound(), false);
                } catch (RuntimeException e) {
                    out.open().close().thrown(e);
                }
                return;
            case ITERATE_MODIFY: // position, key, namespace, change
                iterateModify(a, k, n, b);
                return;
            case KEYS: // namespace
                try {
                    Object namespace = use(k);
                    rows(flink(() -> map.getKeys(namespace).iterator()), rowBound(), true);
                } catch (RuntimeException e) {
                    out.open().close().thrown(e);
                }
                return;
            case SIZE_OF_NAMESPACE: // namespace
                try {
                    Object namespace = use(k);
                    out.i(flink(() -> map.sizeOfNamespace(namespace)));
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case VISIT: // max_empty
                visit(a);
                return;
            // Bulk steps (family, first, count, namespace[, state]): the harness makes count single
            // calls, and stops at the first that raises.
            case PUT_RANGE:
                for (long i = b; i < (long) b + c; i++) {
                    if (!put(use(Keys.nth(a, i)), use(k), newState(stateArg))) {
                        return;
                    }
                }
                return;
            case REMOVE_RANGE:
                for (long i = b; i < (long) b + c; i++) {
                    if (!remove(use(Keys.nth(a, i)), use(k))) {
                        return;
                    }
                }
                return;
            case GET_RANGE:
                for (long i = b; i < (long) b + c; i++) {
                    if (!get(use(Keys.nth(a, i)), use(k), false, 0)) {
                        return;
                    }
                }
                return;
            case HOLD_KEYS:
                keyObjects.hold();
                return;
            case WRITE_SNAPSHOT: // sid
                writeSnapshot(a);
                return;
            default:
                throw new IllegalArgumentException("operation " + OPERATIONS[op] + " has no case in Walk.execute");
        }
    }

    /** A put's answer: the number of the state put; false if it raised. */
    private boolean put(Object k, Object n, List<Integer> s) {
        try {
            int id = number(s);
            synced(s);
            call("put", k, n, () -> {
                map.put(k, n, s);
                return null;
            });
            out.i(id);
            return true;
        } catch (RuntimeException e) {
            out.thrown(e);
            return false;
        }
    }

    private boolean remove(Object k, Object n) {
        try {
            call("remove", k, n, () -> {
                map.remove(k, n);
                return null;
            });
            out.nil();
            return true;
        } catch (RuntimeException e) {
            out.thrown(e);
            return false;
        }
    }

    private boolean get(Object k, Object n, boolean mutate, int value) {
        try {
            List<Integer> got = call("get", k, n, () -> map.get(k, n));
            state(got);
            if (got != null && mutate) {
                got.add(value);
                synced(got); // the harness appends to what it was handed
            }
            return true;
        } catch (RuntimeException e) {
            out.thrown(e);
            return false;
        }
    }

    private boolean containsKey(Object k, Object n) {
        try {
            out.bool(call("contains_key", k, n, () -> map.containsKey(k, n)));
            return true;
        } catch (RuntimeException e) {
            out.thrown(e);
            return false;
        }
    }

    /** [called, old state, number of the new state, exception or null] with transform_append. */
    private void transform(Object k, Object n, int value) {
        boolean[] called = {false};
        Json seen = new Json();
        Throwable error = null;
        clock.in(); // (Flink calls the function, which records what it was handed: part of Flink's call)
        try {
            corruption.before(map, "transform", k, n);
            map.transform(k, n, value, (old, v) -> {
                called[0] = true;
                Json saved = out;
                out = seen;
                state(old);
                List<Integer> result = old == null ? new ArrayList<>() : old;
                result.add(v);
                synced(result); // Python's transform function made the same change to its object
                out.i(number(result));
                out = saved;
                return result;
            });
            corruption.after(map, "transform", k, n);
        } catch (Exception e) {
            error = e;
        } finally {
            clock.out();
        }
        out.open().bool(called[0]);
        String inner = seen.toString();
        if (called[0]) {
            out.raw(inner);
        } else {
            out.nil().nil();
        }
        if (error == null) {
            out.nil();
        } else {
            out.thrown(error);
        }
        out.close();
    }

    private CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> readable(int sid) {
        return released.contains(sid) ? null : snapshots.get(sid);
    }

    private void snapshot(int sid) {
        if (snapshots.containsKey(sid)) {
            return; // the harness fails the program before calling the map
        }
        try {
            CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap;
            clock.in();
            try {
                snap = map.stateSnapshot();
                corruption.after(map, "snapshot", null, null);
            } finally {
                clock.out();
            }
            snapshots.put(sid, snap);
            taken.add(snap);
            int version = Internals.snapshotVersion(snap);
            liveVersions.put(sid, version);
            if (checker != null) {
                checker.record(snap);
            }
            out.open().i(version).i(Internals.snapshotEntryCount(snap)).close();
        } catch (RuntimeException e) {
            out.thrown(e);
        }
    }

    /** [released flag, rows, exception or null]. */
    private void readSnapshot(int sid) {
        var snap = readable(sid);
        if (snap == null) {
            return;
        }
        out.bool(flink(snap::isReleased));
        try {
            rows(iterator(snap, null), rowBound(), false);
        } catch (RuntimeException e) {
            out.open().close().thrown(e);
        }
    }

    /** [released flag, [size, rows] or exception, release answers...]: cowcheck.map.ops' transformers. */
    private void readTransformed(int sid, int transformer) {
        var snap = readable(sid);
        if (snap == null) {
            return;
        }
        out.bool(flink(snap::isReleased));
        try {
            if (transformer == 2) { // "none": iterate(None) reads the snapshot as it is
                Iterator<StateEntry<Object, Object, List<Integer>>> it = iterator(snap, null);
                List<StateEntry<Object, Object, List<Integer>>> all = new ArrayList<>();
                clock.in();
                try {
                    while (it.hasNext() && all.size() < rowBound()) {
                        all.add(it.next());
                    }
                } finally {
                    clock.out();
                }
                out.open().i(Internals.snapshotEntryCount(snap)).open();
                for (StateEntry<Object, Object, List<Integer>> e : all) {
                    row(e);
                }
                out.close().close();
            } else {
                StateSnapshotTransformer<List<Integer>> t = transformer == 0
                        ? x -> x == null || x.size() % 2 == 0 ? null : x
                        : x -> {
                            if (x == null) {
                                return null;
                            }
                            List<Integer> marked = new ArrayList<>(x);
                            marked.add(-1);
                            return marked;
                        };
                Iterator<StateEntry<Object, Object, List<Integer>>> it = iterator(snap, t);
                int size = flink(() -> Internals.iteratorSize(it));
                out.open().i(size).open();
                int count = 0;
                while (next(it) && count++ < rowBound()) {
                    var e = it.next();
                    clock.pause();
                    row(e);
                }
                clock.out();
                out.close().close();
            }
        } catch (RuntimeException e) {
            out.thrown(e);
            return;
        }
        release(sid);
    }

    /** [exception or null, released flag]; the program's view: released from now on. */
    private void release(int sid) {
        var snap = snapshots.get(sid);
        try {
            clock.in();
            try {
                snap.release();
                corruption.after(map, "release", null, null);
            } finally {
                clock.out();
            }
            out.nil();
        } catch (RuntimeException e) {
            out.thrown(e);
            return;
        }
        released.add(sid);
        Integer version = liveVersions.remove(sid);
        if (checker != null && version != null) {
            checker.forget(version);
        }
        out.bool(flink(snap::isReleased));
    }

    /**
     * [released flag, [key serializer id, namespace serializer id, bytes as hex or exception, and
     * with Int serializers: bytes or exception]]: Flink's writeState. The harness hands write_state
     * the serializers of the family of its model's first entry, or Int ones for an empty snapshot
     * (cowcheck.core.states.write_serializers): the family's are those of the snapshot's first
     * entry here (ids null if it has none: then any serializers write the same bytes), and both are
     * written, so Python hands the harness what Flink wrote with the serializers it passes.
     */
    private void writeSnapshot(int sid) {
        var snap = readable(sid);
        if (snap == null) {
            return;
        }
        out.bool(flink(snap::isReleased));
        Object key = null;
        Object namespace = null;
        try {
            Iterator<StateEntry<Object, Object, List<Integer>>> it = snap.getIterator(null, null, null, null);
            if (it.hasNext()) {
                StateEntry<Object, Object, List<Integer>> first = it.next();
                key = first.getKey();
                namespace = first.getNamespace();
            }
        } catch (RuntimeException e) {
            // a broken snapshot: writeState below raises or writes what it writes
        }
        out.open();
        if (key == null) {
            out.nil().nil();
            written(snap, "int", "int");
        } else {
            String keyId = Keys.serializerId(key);
            String namespaceId = Keys.serializerId(namespace);
            out.str(keyId).str(namespaceId);
            written(snap, keyId, namespaceId);
            if (!keyId.equals("int") || !namespaceId.equals("int")) {
                written(snap, "int", "int");
            }
        }
        out.close();
    }

    @SuppressWarnings("unchecked")
    private void written(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap, String keyId,
                         String namespaceId) {
        try {
            DataOutputSerializer bytes = new DataOutputSerializer(256);
            clock.in();
            try {
                snap.writeState((TypeSerializer<Object>) Serializers.byId(keyId),
                        (TypeSerializer<Object>) Serializers.byId(namespaceId), map.getStateSerializer(), bytes,
                        null);
            } finally {
                clock.out();
            }
            StringBuilder hex = new StringBuilder();
            for (byte x : bytes.getCopyOfBuffer()) {
                hex.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
            }
            out.str(hex.toString());
        } catch (Exception e) {
            out.thrown(e);
        }
    }

    /**
     * [rows before the change, exception or null, whether the iterator gave all {@code position}
     * of them; then, if it did, the answer of the change, the rows after it and an exception or null].
     */
    private void iterateModify(int position, Object k, Object n, int change) {
        position = Math.min(position, map.size()); // == the model's size while no check has failed
        Iterator<StateEntry<Object, Object, List<Integer>>> it;
        try {
            it = flink(map::iterator);
        } catch (RuntimeException e) {
            out.open().close().thrown(e).bool(false);
            return;
        }
        out.open();
        int read = 0;
        try {
            while (read < position && next(it)) {
                var e = it.next();
                clock.pause();
                row(e);
                read++;
            }
        } catch (RuntimeException e) {
            clock.out();
            out.close().thrown(e).bool(false);
            return;
        }
        clock.out();
        out.close().nil().bool(read == position);
        if (read < position) {
            return; // the harness fails: the iteration ended early
        }
        if (change == 0) {
            List<Integer> s = new ArrayList<>();
            s.add(0);
            put(use(k), use(n), s);
        } else {
            remove(use(k), use(n));
        }
        rows(it, rowBound(), false);
    }

    /**
     * The visit as [answer of getStateIncrementalVisitor, chains, end]: one element per chain
     * nextEntries returned (0 for an empty one; else [rows], [rows, removes] or [rows, removes,
     * exception of the next remove]; an exception if nextEntries raised), then how hasNext ended
     * the visit (null: false; an exception; "cap": still true after the call cap).
     */
    private void visit(int maxEmpty) {
        StateIncrementalVisitor<Object, Object, List<Integer>> visitor;
        try {
            visitor = flink(() -> map.getStateIncrementalVisitor(maxEmpty));
            out.nil();
        } catch (RuntimeException e) {
            out.thrown(e);
            return;
        }
        Set<List<Object>> present = new HashSet<>(); // what the model holds (the map, while no check failed)
        try {
            Iterator<StateEntry<Object, Object, List<Integer>>> all = map.iterator();
            for (int i = 0; i < rowBound() && all.hasNext(); i++) {
                StateEntry<Object, Object, List<Integer>> e = all.next();
                present.add(List.of(Repr.identity(e.getKey()), Repr.identity(e.getNamespace())));
            }
        } catch (RuntimeException e) {
            // a broken map: the harness fails on the visit's first answers; nothing to prune
        }
        int cap = 4 * (bound + 64) + 1025;
        out.open();
        for (int calls = 0; calls <= cap; calls++) {
            boolean more;
            try {
                more = flink(visitor::hasNext);
            } catch (RuntimeException e) {
                out.close().thrown(e);
                return;
            }
            if (!more) {
                out.close().nil();
                return;
            }
            List<StateEntry<Object, Object, List<Integer>>> chain = new ArrayList<>();
            RuntimeException thrown = null;
            clock.in();
            try {
                var entries = visitor.nextEntries();
                if (entries != null) {
                    for (StateEntry<Object, Object, List<Integer>> e : entries) {
                        chain.add(e);
                        if (chain.size() > rowBound()) {
                            break;
                        }
                    }
                }
            } catch (RuntimeException e) {
                thrown = e;
            } finally {
                clock.out(); // whatever ends the call (an Error too): the clock never runs on into cowcheck's work
            }
            if (thrown != null) {
                out.thrown(thrown).close().str("cap");
                return;
            }
            if (chain.isEmpty()) {
                out.i(0);
                continue;
            }
            out.open().open();
            for (StateEntry<Object, Object, List<Integer>> e : chain) {
                row(e);
            }
            out.close();
            int removes = 0;
            for (StateEntry<Object, Object, List<Integer>> e : chain) {
                List<Object> ident = List.of(Repr.identity(e.getKey()), Repr.identity(e.getNamespace()));
                List<Integer> s = e.getState();
                if (!present.remove(ident) || s == null || s.size() % 2 != 0) {
                    continue; // not in the model (the harness fails, or it was pruned already): no remove
                }
                try {
                    // the harness hands back the key and namespace the visitor gave it (new objects in Python)
                    var entry = new StateEntry.SimpleStateEntry<>(keyObjects.passed(e.getKey()),
                            keyObjects.passed(e.getNamespace()), s);
                    clock.in();
                    try {
                        visitor.remove(entry);
                    } finally {
                        clock.out();
                    }
                    removes++;
                } catch (RuntimeException x) {
                    out.i(removes).thrown(x).close().close().str("cap");
                    return;
                }
            }
            if (removes > 0) {
                out.i(removes);
            }
            out.close();
        }
        out.close().str("cap");
    }

    // -------------------------------------------------------------- structure

    /** The whole structure now (parity's final digest: cowcheck.map.parity.digest). */
    public String structure() {
        Json saved = out;
        out = new Json();
        try {
            structure(out);
            return out.toString();
        } finally {
            out = saved;
        }
    }

    private int entryNumber(Object e) {
        Integer id = entryNumbers.get(e);
        if (id == null) {
            id = entryNumbers.size() + 1;
            entryNumbers.put(e, id);
        }
        return id;
    }

    /**
     * {@code [summary, rehashing, live snapshot versions, entries, primary heads, rehash heads,
     * snapshots]}: every entry reachable from the tables or an unreleased snapshot as {@code
     * [number, key, namespace, next number or 0, state, entry version, state version, hash]}
     * (entries numbered by identity, states as the answers carry them), the tables' buckets as the
     * numbers of their heads (0: empty), and per unreleased snapshot in the order they were taken
     * {@code [version, the numbers of its entries in its array's order]}.
     */
    private void structure(Json json) {
        Json saved = out;
        out = json; // state() writes to out
        try {
            out.open().ints(Internals.summary(map)).bool(Internals.isRehashing(map)).open();
            for (int v : Internals.snapshotVersions(map)) {
                out.i(v);
            }
            out.close();
            Object[] primary = Internals.primaryTable(map);
            Object[] rehash = Internals.rehashTable(map);
            List<Object[]> live = new ArrayList<>();
            for (var snap : taken) {
                if (!snap.isReleased()) {
                    live.add(Internals.snapshotData(snap));
                }
            }
            IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
            out.open();
            entries(primary, seen);
            entries(rehash, seen);
            for (Object[] data : live) {
                entries(data, seen);
            }
            out.close();
            heads(primary);
            heads(rehash);
            out.open();
            int at = 0;
            for (var snap : taken) {
                if (snap.isReleased()) {
                    continue;
                }
                out.open().i(Internals.snapshotVersion(snap)).open();
                for (Object head : live.get(at++)) {
                    for (Object e = head; e != null; e = Internals.next(e)) {
                        out.i(entryNumber(e));
                    }
                }
                out.close().close();
            }
            out.close().close();
        } finally {
            out = saved;
        }
    }

    @SuppressWarnings("unchecked")
    private void entries(Object[] table, IdentityHashMap<Object, Boolean> seen) {
        for (Object head : table) {
            for (Object e = head; e != null && seen.put(e, Boolean.TRUE) == null; e = Internals.next(e)) {
                Object next = Internals.next(e);
                out.open().i(entryNumber(e)).value(Internals.key(e)).value(Internals.namespace(e))
                        .i(next == null ? 0 : entryNumber(next));
                state((List<Integer>) Internals.state(e));
                out.i(Internals.entryVersion(e)).i(Internals.stateVersion(e)).i(Internals.hash(e)).close();
            }
        }
    }

    private void heads(Object[] table) {
        out.open();
        for (Object head : table) {
            out.i(head == null ? 0 : entryNumber(head));
        }
        out.close();
    }
}
