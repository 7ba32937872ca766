package cowcheck.bridge;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

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
 * A walk on one Flink CopyOnWriteStateMap, a segment of steps per Java call (properties/flink/walk.py).
 *
 * <p>For every step this class makes the calls the map harness (properties/map/harness.py) makes
 * into an implementation, in the same order and with the same decisions, and records each call's
 * answer (a value, or the exception it raised): the Python side then runs the harness itself
 * against these answers, so every model check is the harness's own, step by step, and a failure
 * names its exact step. White-box, the invariants I1–I9 and the scenarios of the step are
 * computed here ({@link Checker}) over Flink's object graph.
 *
 * <p>Per step: {@code [answers, size after the step]}, white-box followed by {@code scenarios,
 * rehashing before the step, violations}. States cross as {@code [content, number]}, or as the
 * number alone when Python's object already holds that content: objects are numbered by identity
 * in order of first appearance (a state put gets its number at the put), so Python hands the
 * harness one Python object per Java object. States are Java lists through Flink's
 * plain ListSerializer, mutated here exactly where the harness mutates what it was handed.
 */
public final class Walk {
    /** Operation codes: positions in properties.map.ops.MAP_OPS (a test holds the two together). */
    static final String[] OPERATIONS = {
        "put", "put_and_get_old", "get", "get_mutate", "contains_key", "remove", "remove_and_get_old", "transform",
        "rehash", "snapshot", "read_snapshot", "read_snapshot_transformed", "release", "iterate", "iterate_modify",
        "keys", "size_of_namespace", "visit", "write_snapshot",
    };

    private static final int PUT = 0;
    private static final int PUT_AND_GET_OLD = 1;
    private static final int GET = 2;
    private static final int GET_MUTATE = 3;
    private static final int CONTAINS_KEY = 4;
    private static final int REMOVE = 5;
    private static final int REMOVE_AND_GET_OLD = 6;
    private static final int TRANSFORM = 7;
    private static final int REHASH = 8;
    private static final int SNAPSHOT = 9;
    private static final int READ_SNAPSHOT = 10;
    private static final int READ_SNAPSHOT_TRANSFORMED = 11;
    private static final int RELEASE = 12;
    private static final int ITERATE = 13;
    private static final int ITERATE_MODIFY = 14;
    private static final int KEYS = 15;
    private static final int SIZE_OF_NAMESPACE = 16;
    private static final int VISIT = 17;
    private static final int WRITE_SNAPSHOT = 18;

    private static final Integer MINUS_ONE = -1;

    private final CopyOnWriteStateMap<Object, Object, List<Integer>> map =
            Internals.newMap(new ListSerializer<>(IntSerializer.INSTANCE));
    private final Checker checker;
    private final Corruption corruption;
    private final IdentityHashMap<Object, Integer> numbers = new IdentityHashMap<>();
    // The content Python's object for each state holds (what was sent, plus the harness's own
    // appends, which this class mirrors): a state whose content is unchanged crosses as its number.
    private final IdentityHashMap<Object, List<Integer>> sent = new IdentityHashMap<>();
    private final Map<Integer, CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> snapshots =
            new HashMap<>();
    private final Set<Integer> released = new HashSet<>(); // sids the program released (the model's view)
    private final Map<Integer, Integer> liveVersions = new LinkedHashMap<>(); // sid -> version reported

    private int[] program;
    private int pc;
    private Object[] keys;
    private Json out;
    private int bound;

    public Walk(boolean whiteBox, String corruption) {
        this.checker = whiteBox ? new Checker() : null;
        this.corruption = Corruption.forName(corruption);
    }

    public static String[] operations() {
        return OPERATIONS.clone();
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
        this.out = new Json(48 * program.length + 64);
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

    private Object key() {
        return keys[arg()];
    }

    private int rowBound() {
        return 2 * bound + 65;
    }

    // ------------------------------------------------------------------ steps

    private void step() {
        int op = arg();
        Object k = null;
        Object n = null;
        List<Integer> s = null;
        int a = 0;
        int b = 0;
        switch (op) {
            case PUT:
            case PUT_AND_GET_OLD:
                k = key();
                n = key();
                s = newState();
                break;
            case GET:
            case CONTAINS_KEY:
            case REMOVE:
            case REMOVE_AND_GET_OLD:
                k = key();
                n = key();
                break;
            case GET_MUTATE:
            case TRANSFORM:
                k = key();
                n = key();
                a = arg();
                break;
            case ITERATE_MODIFY:
                a = arg();
                k = key();
                n = key();
                b = arg();
                break;
            case KEYS:
            case SIZE_OF_NAMESPACE:
                n = key();
                break;
            case ITERATE:
                break;
            case READ_SNAPSHOT_TRANSFORMED:
                a = arg();
                b = arg();
                break;
            default:
                a = arg();
        }
        boolean keyed = op <= TRANSFORM;
        List<String> scenarios = null;
        boolean rehashingBefore = false;
        int[] before = null;
        if (checker != null) {
            rehashingBefore = Internals.isRehashing(map);
            if (keyed) {
                scenarios = Checker.classifyKeyed(map, OPERATIONS[op], k, n);
            } else if (op == SNAPSHOT) {
                scenarios = Checker.classifySnapshot(map);
            }
            if ((keyed || op == REHASH) && rehashingBefore) {
                before = new int[] {Internals.summary(map)[4], Internals.primaryTable(map).length};
            }
        }
        out.open();
        execute(op, k, n, s, a, b, rehashingBefore);
        out.close();
        out.i(map.size());
        if (checker == null) {
            return;
        }
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

    private List<Integer> newState() {
        int size = arg();
        List<Integer> s = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
            s.add(arg());
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

    /** Up to {@code limit} rows of {@code it} as a list, then the exception it raised or null. */
    private <T> void rows(Iterator<T> it, int limit, boolean keysOnly) {
        out.open();
        Throwable error = null;
        try {
            for (int i = 0; i < limit && it.hasNext(); i++) {
                T x = it.next();
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
        out.close();
        if (error == null) {
            out.nil();
        } else {
            out.thrown(error);
        }
    }

    private void execute(int op, Object k, Object n, List<Integer> s, int a, int b, boolean rehashingBefore) {
        switch (op) {
            case PUT:
                put(k, n, s);
                return;
            case PUT_AND_GET_OLD:
                try {
                    corruption.before(map, "put_and_get_old", k, n);
                    int id = number(s);
                    synced(s);
                    List<Integer> old = map.putAndGetOld(k, n, s);
                    corruption.after(map, "put_and_get_old", k, n);
                    out.open().i(id);
                    state(old);
                    out.close();
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case GET:
            case GET_MUTATE:
                try {
                    corruption.before(map, "get", k, n);
                    List<Integer> got = map.get(k, n);
                    corruption.after(map, "get", k, n);
                    state(got);
                    if (got != null && op == GET_MUTATE) {
                        got.add(a);
                        synced(got); // the harness appends to what it was handed
                    }
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case CONTAINS_KEY:
                try {
                    corruption.before(map, "contains_key", k, n);
                    boolean found = map.containsKey(k, n);
                    corruption.after(map, "contains_key", k, n);
                    out.bool(found);
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case REMOVE:
                remove(k, n);
                return;
            case REMOVE_AND_GET_OLD:
                try {
                    corruption.before(map, "remove_and_get_old", k, n);
                    List<Integer> old = map.removeAndGetOld(k, n);
                    corruption.after(map, "remove_and_get_old", k, n);
                    state(old);
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case TRANSFORM:
                transform(k, n, a);
                return;
            case REHASH:
                for (int i = 0; i < a; i++) {
                    try {
                        corruption.before(map, "contains_key", MINUS_ONE, MINUS_ONE);
                        boolean found = map.containsKey(MINUS_ONE, MINUS_ONE);
                        corruption.after(map, "contains_key", MINUS_ONE, MINUS_ONE);
                        out.bool(found);
                    } catch (RuntimeException e) {
                        out.thrown(e);
                        return;
                    }
                }
                return;
            case SNAPSHOT:
                snapshot(a);
                return;
            case READ_SNAPSHOT:
                readSnapshot(a);
                return;
            case READ_SNAPSHOT_TRANSFORMED:
                readTransformed(a, b);
                return;
            case RELEASE:
                if (snapshots.containsKey(a)) {
                    release(a);
                    release(a);
                }
                return;
            case ITERATE:
                try {
                    rows(map.iterator(), rowBound(), false);
                } catch (RuntimeException e) {
                    out.open().close().thrown(e);
                }
                return;
            case ITERATE_MODIFY:
                iterateModify(a, k, n, b);
                return;
            case KEYS:
                try {
                    rows(map.getKeys(n).iterator(), rowBound(), true);
                } catch (RuntimeException e) {
                    out.open().close().thrown(e);
                }
                return;
            case SIZE_OF_NAMESPACE:
                try {
                    out.i(map.sizeOfNamespace(n));
                } catch (RuntimeException e) {
                    out.thrown(e);
                }
                return;
            case VISIT:
                visit(a);
                return;
            case WRITE_SNAPSHOT:
                writeSnapshot(a);
                return;
            default:
                throw new IllegalArgumentException("unknown operation code " + op);
        }
    }

    private void put(Object k, Object n, List<Integer> s) {
        try {
            corruption.before(map, "put", k, n);
            int id = number(s);
            synced(s);
            map.put(k, n, s);
            corruption.after(map, "put", k, n);
            out.i(id);
        } catch (RuntimeException e) {
            out.thrown(e);
        }
    }

    private void remove(Object k, Object n) {
        try {
            corruption.before(map, "remove", k, n);
            map.remove(k, n);
            corruption.after(map, "remove", k, n);
            out.nil();
        } catch (RuntimeException e) {
            out.thrown(e);
        }
    }

    /** [called, old state, number of the new state, exception or null] with transform_append. */
    private void transform(Object k, Object n, int value) {
        boolean[] called = {false};
        Json seen = new Json();
        Throwable error = null;
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
            CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap = map.stateSnapshot();
            corruption.after(map, "snapshot", null, null);
            snapshots.put(sid, snap);
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
        out.bool(snap.isReleased());
        try {
            rows(snap.getIterator(null, null, null, null), rowBound(), false);
        } catch (RuntimeException e) {
            out.open().close().thrown(e);
        }
    }

    /** [released flag, [size, rows] or exception, release answers...]: properties.map.ops' transformers. */
    private void readTransformed(int sid, int transformer) {
        var snap = readable(sid);
        if (snap == null) {
            return;
        }
        out.bool(snap.isReleased());
        try {
            if (transformer == 2) { // "none": iterate(None) reads the snapshot as it is
                Iterator<StateEntry<Object, Object, List<Integer>>> it = snap.getIterator(null, null, null, null);
                List<StateEntry<Object, Object, List<Integer>>> all = new ArrayList<>();
                while (it.hasNext() && all.size() < rowBound()) {
                    all.add(it.next());
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
                Iterator<StateEntry<Object, Object, List<Integer>>> it = snap.getIterator(null, null, null, t);
                int size = Internals.iteratorSize(it);
                out.open().i(size).open();
                int count = 0;
                while (it.hasNext() && count++ < rowBound()) {
                    row(it.next());
                }
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
            snap.release();
            corruption.after(map, "release", null, null);
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
        out.bool(snap.isReleased());
    }

    /** [released flag, bytes as hex or exception]: Flink's writeState with Int key and namespace serializers. */
    @SuppressWarnings("unchecked")
    private void writeSnapshot(int sid) {
        var snap = readable(sid);
        if (snap == null) {
            return;
        }
        out.bool(snap.isReleased());
        try {
            DataOutputSerializer bytes = new DataOutputSerializer(256);
            snap.writeState((TypeSerializer<Object>) Serializers.byId("int"),
                    (TypeSerializer<Object>) Serializers.byId("int"), map.getStateSerializer(), bytes, null);
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
            it = map.iterator();
        } catch (RuntimeException e) {
            out.open().close().thrown(e).bool(false);
            return;
        }
        out.open();
        int read = 0;
        try {
            while (read < position && it.hasNext()) {
                row(it.next());
                read++;
            }
        } catch (RuntimeException e) {
            out.close().thrown(e).bool(false);
            return;
        }
        out.close().nil().bool(read == position);
        if (read < position) {
            return; // the harness fails: the iteration ended early
        }
        if (change == 0) {
            List<Integer> s = new ArrayList<>();
            s.add(0);
            put(k, n, s);
        } else {
            remove(k, n);
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
            visitor = map.getStateIncrementalVisitor(maxEmpty);
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
                more = visitor.hasNext();
            } catch (RuntimeException e) {
                out.close().thrown(e);
                return;
            }
            if (!more) {
                out.close().nil();
                return;
            }
            List<StateEntry<Object, Object, List<Integer>>> chain = new ArrayList<>();
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
                out.thrown(e).close().str("cap");
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
                    visitor.remove(new StateEntry.SimpleStateEntry<>(e.getKey(), e.getNamespace(), s));
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
}
