package cowcheck.bridge;

import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.StateSnapshotTransformer;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMap;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMapSnapshot;
import org.apache.flink.runtime.state.internal.InternalKvState.StateIncrementalVisitor;

/**
 * Runs a whole program (the steps of properties/core/program.py, encoded by properties/flink/batch.py)
 * on a fresh Flink CopyOnWriteStateMap in one call and returns what every step observed, in the
 * format of properties/map/parity.py's {@code observe} (as JSON): that function run on the reference gives the
 * same answer exactly when the two maps behave the same, identity of states and entries included
 * (objects are numbered by first appearance).
 *
 * <p>States are Java lists through Flink's plain ListSerializer: nothing calls back into Python.
 */
public final class Batch {
    // Op codes: the order of BATCH_OPS in properties/flink/batch.py.
    static final int PUT = 0;
    static final int PUT_AND_GET_OLD = 1;
    static final int GET = 2;
    static final int GET_MUTATE = 3;
    static final int CONTAINS_KEY = 4;
    static final int REMOVE = 5;
    static final int REMOVE_AND_GET_OLD = 6;
    static final int TRANSFORM = 7;
    static final int REHASH = 8;
    static final int SNAPSHOT = 9;
    static final int READ_SNAPSHOT = 10;
    static final int READ_SNAPSHOT_TRANSFORMED = 11;
    static final int RELEASE = 12;
    static final int ITERATE = 13;
    static final int ITERATE_MODIFY = 14;
    static final int KEYS = 15;
    static final int SIZE_OF_NAMESPACE = 16;
    static final int VISIT = 17;

    /**
     * How much each step reports besides its result and the size: nothing, the structure summary,
     * the summary and the whole structure after the last step, the whole structure after every step.
     */
    public static final int DETAIL_RESULTS = 0;
    public static final int DETAIL_SUMMARY = 1;
    public static final int DETAIL_FINAL = 2;
    public static final int DETAIL_EVERY_STEP = 3;

    private static final Integer MINUS_ONE = -1;

    private final CopyOnWriteStateMap<Object, Object, List<Integer>> map =
            Internals.newMap(new ListSerializer<>(IntSerializer.INSTANCE));
    private final Object[] keys;
    private final int[] program;
    private int pc;
    private final Json out;
    private final IdentityHashMap<Object, Integer> objects = new IdentityHashMap<>();
    private final IdentityHashMap<Object, Integer> entryNumbers = new IdentityHashMap<>();
    private final Map<Integer, CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> snapshots = new HashMap<>();
    private final List<CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> taken = new ArrayList<>();

    private Batch(int[] program, Object[] keys) {
        this.program = program;
        this.keys = keys;
        this.out = new Json(16 * program.length + 64);
    }

    /**
     * Runs {@code program} (op code and arguments per step; keys and namespaces are indexes into
     * {@code keys}) and returns {@code [[result, size, summary or null(, digest)] per step, final
     * digest or null]}.
     */
    public static String run(int[] program, Object[] keys, int detail) {
        Batch b = new Batch(program, keys);
        b.out.open().open();
        while (b.pc < program.length) {
            b.out.open();
            b.step();
            b.out.i(b.map.size());
            if (detail == DETAIL_RESULTS) {
                b.out.nil();
            } else {
                b.out.ints(Internals.summary(b.map));
            }
            if (detail == DETAIL_EVERY_STEP) {
                b.digest();
            }
            b.out.close();
        }
        b.out.close();
        if (detail == DETAIL_FINAL) {
            b.digest();
        } else {
            b.out.nil();
        }
        return b.out.close().toString();
    }

    private int arg() {
        return program[pc++];
    }

    private Object key() {
        return keys[arg()];
    }

    private List<Integer> newState() {
        int n = arg();
        List<Integer> s = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            s.add(arg());
        }
        number(s);
        return s;
    }

    private int number(Object o) {
        Integer n = objects.get(o);
        if (n == null) {
            n = objects.size() + 1;
            objects.put(o, n);
        }
        return n;
    }

    private void state(List<Integer> s) {
        if (s == null) {
            out.nil();
        } else {
            out.open().content(s).i(number(s)).close();
        }
    }

    private void rows(List<Object[]> rows) {
        out.open();
        for (Object[] r : rows) {
            @SuppressWarnings("unchecked")
            List<Integer> s = (List<Integer>) r[2];
            out.open().value(r[0]).value(r[1]).content(s);
            if (s == null) {
                out.nil();
            } else {
                out.i(number(s));
            }
            out.close();
        }
        out.close();
    }

    private static Object[] row(StateEntry<Object, Object, List<Integer>> e) {
        return new Object[] {e.getKey(), e.getNamespace(), e.getState()};
    }

    /** Decodes one step, runs it and writes its result (an ERROR on an exception). */
    private void step() {
        int op = arg();
        int[] args;
        Object k = null;
        Object n = null;
        List<Integer> s = null;
        switch (op) {
            case PUT:
            case PUT_AND_GET_OLD:
                k = key();
                n = key();
                args = new int[0];
                s = newState();
                break;
            case GET:
            case CONTAINS_KEY:
            case REMOVE:
            case REMOVE_AND_GET_OLD:
                k = key();
                n = key();
                args = new int[0];
                break;
            case GET_MUTATE:
            case TRANSFORM:
                k = key();
                n = key();
                args = new int[] {arg()};
                break;
            case ITERATE_MODIFY:
                args = new int[] {arg(), 0};
                k = key();
                n = key();
                args[1] = arg();
                break;
            case KEYS:
            case SIZE_OF_NAMESPACE:
                n = key();
                args = new int[0];
                break;
            case ITERATE:
                args = new int[0];
                break;
            case READ_SNAPSHOT_TRANSFORMED:
                args = new int[] {arg(), arg()};
                break;
            default:
                args = new int[] {arg()};
        }
        int mark = out.mark();
        try {
            execute(op, k, n, s, args);
        } catch (Exception e) {
            out.reset(mark);
            out.error(e);
        }
    }

    private void execute(int op, Object k, Object n, List<Integer> s, int[] args) throws Exception {
        switch (op) {
            case PUT:
                map.put(k, n, s);
                out.nil();
                return;
            case PUT_AND_GET_OLD:
                state(map.putAndGetOld(k, n, s));
                return;
            case GET:
                state(map.get(k, n));
                return;
            case GET_MUTATE: {
                List<Integer> got = map.get(k, n);
                state(got);
                if (got != null) {
                    got.add(args[0]);
                }
                return;
            }
            case CONTAINS_KEY:
                out.bool(map.containsKey(k, n));
                return;
            case REMOVE:
                map.remove(k, n);
                out.nil();
                return;
            case REMOVE_AND_GET_OLD:
                state(map.removeAndGetOld(k, n));
                return;
            case TRANSFORM:
                transform(k, n, args[0]);
                return;
            case REHASH:
                for (int i = 0; i < args[0]; i++) {
                    map.containsKey(MINUS_ONE, MINUS_ONE);
                }
                out.nil();
                return;
            case SNAPSHOT: {
                CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap = map.stateSnapshot();
                if (snapshots.putIfAbsent(args[0], snap) != null) {
                    throw new IllegalArgumentException("snapshot id s" + args[0] + " used twice");
                }
                taken.add(snap);
                out.ints(new int[] {Internals.snapshotVersion(snap), Internals.snapshotEntryCount(snap)});
                return;
            }
            case READ_SNAPSHOT:
                readSnapshot(snapshot(args[0]));
                return;
            case READ_SNAPSHOT_TRANSFORMED:
                readSnapshotTransformed(snapshot(args[0]), args[1]);
                return;
            case RELEASE:
                snapshot(args[0]).release();
                out.nil();
                return;
            case ITERATE: {
                List<Object[]> seen = new ArrayList<>();
                for (StateEntry<Object, Object, List<Integer>> e : map) {
                    seen.add(row(e));
                }
                rows(seen);
                return;
            }
            case ITERATE_MODIFY:
                iterateModify(args[0], k, n, args[1]);
                return;
            case KEYS: {
                List<Object> ks = new ArrayList<>();
                map.getKeys(n).forEach(ks::add);
                out.open();
                for (Object key : ks) {
                    out.value(key);
                }
                out.close();
                return;
            }
            case SIZE_OF_NAMESPACE:
                out.i(map.sizeOfNamespace(n));
                return;
            case VISIT:
                visit(args[0]);
                return;
            default:
                throw new IllegalArgumentException("unknown op code " + op);
        }
    }

    private CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snapshot(int sid) {
        var snap = snapshots.get(sid);
        if (snap == null) {
            throw new IllegalArgumentException("snapshot s" + sid + " was never taken");
        }
        return snap;
    }

    /** transform with properties.core.states.transform_append: append in place, or a new [value]. */
    private void transform(Object k, Object n, int value) throws Exception {
        out.open();
        boolean[] called = {false};
        map.transform(k, n, value, (old, v) -> {
            called[0] = true;
            state(old);
            List<Integer> result = old;
            if (result == null) {
                result = new ArrayList<>();
            }
            result.add(v);
            out.i(number(result));
            return result;
        });
        if (!called[0]) {
            out.nil().nil();
        }
        out.close();
    }

    private void readSnapshot(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap) {
        if (snap.isReleased()) {
            out.nil();
            return;
        }
        List<Object[]> seen = new ArrayList<>();
        Iterator<StateEntry<Object, Object, List<Integer>>> it = snap.getIterator(null, null, null, null);
        while (it.hasNext()) {
            seen.add(row(it.next()));
        }
        rows(seen);
    }

    /** properties.map.ops.SNAPSHOT_TRANSFORMERS in declaration order: 0 drop_even, 1 append_marker, 2 none (null);
     *  then release. */
    private void readSnapshotTransformed(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snap,
                                         int transformer) {
        if (snap.isReleased()) {
            out.nil();
            return;
        }
        StateSnapshotTransformer<List<Integer>> t;
        if (transformer == 0) {
            t = s -> s == null || s.size() % 2 == 0 ? null : s;
        } else if (transformer == 2) {
            t = null;
        } else {
            t = s -> {
                if (s == null) {
                    return null;
                }
                List<Integer> marked = new ArrayList<>(s);
                marked.add(-1);
                return marked;
            };
        }
        Iterator<StateEntry<Object, Object, List<Integer>>> it = snap.getIterator(null, null, null, t);
        int size = Internals.iteratorSize(it);
        List<Object[]> seen = new ArrayList<>();
        while (it.hasNext()) {
            seen.add(row(it.next()));
        }
        out.open().i(size);
        rows(seen);
        out.close();
        snap.release();
    }

    private void iterateModify(int position, Object k, Object n, int change) {
        position = Math.min(position, map.size());
        Iterator<StateEntry<Object, Object, List<Integer>>> it = map.iterator();
        List<Object[]> seen = new ArrayList<>();
        for (int i = 0; i < position; i++) {
            seen.add(row(it.next()));
        }
        if (change == 0) {
            List<Integer> s = new ArrayList<>();
            s.add(0);
            number(s);
            map.put(k, n, s);
        } else {
            map.remove(k, n);
        }
        String error = null;
        try {
            while (it.hasNext()) {
                seen.add(row(it.next()));
            }
        } catch (ConcurrentModificationException e) {
            error = Errors.pythonName(e);
        }
        out.open();
        rows(seen);
        if (error == null) {
            out.nil();
        } else {
            out.str(error);
        }
        out.close();
    }

    /** properties.map.ops.visit_and_prune_even, recording every chain the visitor returns. */
    private void visit(int maxEmpty) {
        StateIncrementalVisitor<Object, Object, List<Integer>> visitor = map.getStateIncrementalVisitor(maxEmpty);
        int limit = 4 * (map.size() + 64) + 1024;
        int calls = 0;
        out.open();
        while (visitor.hasNext()) {
            if (++calls > limit) {
                out.error("Timeout");
                break;
            }
            List<Object[]> chain = new ArrayList<>();
            var entries = visitor.nextEntries();
            if (entries != null) {
                for (StateEntry<Object, Object, List<Integer>> e : entries) {
                    chain.add(row(e));
                }
            }
            rows(chain);
            for (Object[] r : chain) {
                @SuppressWarnings("unchecked")
                List<Integer> s = (List<Integer>) r[2];
                if (s != null && s.size() % 2 == 0) {
                    visitor.remove(new StateEntry.SimpleStateEntry<>(r[0], r[1], s));
                }
            }
        }
        out.close();
    }

    // ----------------------------------------------------------------- digest

    private int entryNumber(Object e) {
        Integer n = entryNumbers.get(e);
        if (n == null) {
            n = entryNumbers.size() + 1;
            entryNumbers.put(e, n);
        }
        return n;
    }

    /** properties.map.parity.digest: the structure with entries and states numbered by identity. */
    private void digest() {
        out.open().ints(Internals.summary(map));
        boolean rehashing = Internals.isRehashing(map);
        out.bool(rehashing).open();
        for (int v : Internals.snapshotVersions(map)) {
            out.i(v);
        }
        out.close();
        chains(Internals.primaryTable(map));
        if (rehashing) {
            chains(Internals.rehashTable(map));
        } else {
            out.nil();
        }
        out.open();
        for (var snap : taken) {
            if (snap.isReleased()) {
                continue;
            }
            out.open().i(Internals.snapshotVersion(snap)).open();
            for (Object head : Internals.snapshotData(snap)) {
                for (Object e = head; e != null; e = Internals.next(e)) {
                    out.i(entryNumber(e));
                }
            }
            out.close().close();
        }
        out.close().close();
    }

    private void chains(Object[] table) {
        out.open();
        for (int i = 0; i < table.length; i++) {
            if (table[i] == null) {
                continue;
            }
            out.open().i(i).open();
            for (Object e = table[i]; e != null; e = Internals.next(e)) {
                out.open().i(entryNumber(e)).value(Internals.key(e)).value(Internals.namespace(e))
                        .i(Internals.entryVersion(e)).i(Internals.stateVersion(e));
                Object s = Internals.state(e);
                if (s == null) {
                    out.nil();
                } else {
                    out.i(number(s));
                }
                out.i(Internals.hash(e)).close();
            }
            out.close().close();
        }
        out.close();
    }
}
