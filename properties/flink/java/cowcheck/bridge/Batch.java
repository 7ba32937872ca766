package cowcheck.bridge;

import static cowcheck.bridge.Ops.CONTAINS_KEY;
import static cowcheck.bridge.Ops.GET;
import static cowcheck.bridge.Ops.GET_MUTATE;
import static cowcheck.bridge.Ops.GET_RANGE;
import static cowcheck.bridge.Ops.HOLD_KEYS;
import static cowcheck.bridge.Ops.ITERATE;
import static cowcheck.bridge.Ops.ITERATE_MODIFY;
import static cowcheck.bridge.Ops.KEYS;
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
 * format of properties/map/parity.py's {@code observe} (as JSON): that function run on the reference
 * gives the same answer exactly when the two maps behave the same, identity of states and entries
 * included (objects are numbered by first appearance).
 *
 * <p>Operation codes are {@link Ops}'s. Keys and namespaces arrive as a table of values; every use
 * is a new Java object equal to it, one object per value after a hold_keys step ({@link KeyObjects}),
 * as parity's observer hands them to any map. Bulk steps compute their keys here ({@link Keys#nth}).
 * States are Java lists through Flink's plain ListSerializer: nothing calls back into Python.
 */
public final class Batch {
    /**
     * How much each step reports besides its result and the size: nothing, the structure summary,
     * the summary and the whole structure after the last step, the whole structure after every step.
     */
    public static final int DETAIL_RESULTS = 0;
    public static final int DETAIL_SUMMARY = 1;
    public static final int DETAIL_FINAL = 2;
    public static final int DETAIL_EVERY_STEP = 3;

    private final CopyOnWriteStateMap<Object, Object, List<Integer>> map =
            Internals.newMap(new ListSerializer<>(IntSerializer.INSTANCE));
    private final Object[] keys; // values: each use is a new object (KeyObjects), as the observer hands them
    private final KeyObjects keyObjects = new KeyObjects();
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

    /** The operation names in code order ({@link Ops#OPERATIONS}). */
    public static String[] operations() {
        return Ops.names();
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

    /** A key or namespace of the table (a value: {@link #use} makes the object a call is handed). */
    private Object key() {
        return keys[arg()];
    }

    private Object use(Object value) {
        return keyObjects.use(value);
    }

    private int[] content() {
        int n = arg();
        int[] c = new int[n];
        for (int i = 0; i < n; i++) {
            c[i] = arg();
        }
        return c;
    }

    /** A new state list with this content, numbered (parity's observer numbers a state before putting it). */
    private List<Integer> newState(int[] content) {
        List<Integer> s = new ArrayList<>(content.length);
        for (int x : content) {
            s.add(x);
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

    /** One step's decoded arguments: key and namespace values, ints, a state's content. */
    private static final class Args {
        Object k;
        Object n;
        int[] ints = new int[0];
        int[] content;
    }

    /** Decodes one step, runs it and writes its result (an ERROR on an exception). */
    private void step() {
        int op = arg();
        Args a = new Args();
        switch (op) {
            case PUT:
            case PUT_AND_GET_OLD:
                a.k = key();
                a.n = key();
                a.content = content();
                break;
            case GET:
            case CONTAINS_KEY:
            case REMOVE:
            case REMOVE_AND_GET_OLD:
                a.k = key();
                a.n = key();
                break;
            case GET_MUTATE:
            case TRANSFORM:
                a.k = key();
                a.n = key();
                a.ints = new int[] {arg()};
                break;
            case REHASH:
                a.k = key();
                a.n = key();
                a.ints = new int[] {arg()};
                break;
            case ITERATE_MODIFY:
                a.ints = new int[] {arg(), 0};
                a.k = key();
                a.n = key();
                a.ints[1] = arg();
                break;
            case KEYS:
            case SIZE_OF_NAMESPACE:
                a.n = key();
                break;
            case ITERATE:
            case HOLD_KEYS:
                break;
            case READ_SNAPSHOT_TRANSFORMED:
                a.ints = new int[] {arg(), arg()};
                break;
            case PUT_RANGE:
                a.ints = new int[] {arg(), arg(), arg()}; // family, first, count
                a.n = key();
                a.content = content();
                break;
            case REMOVE_RANGE:
            case GET_RANGE:
                a.ints = new int[] {arg(), arg(), arg()};
                a.n = key();
                break;
            case SNAPSHOT:
            case READ_SNAPSHOT:
            case RELEASE:
            case VISIT:
                a.ints = new int[] {arg()};
                break;
            default:
                throw new IllegalArgumentException("unknown operation code " + op + " in a batch");
        }
        int mark = out.mark();
        try {
            execute(op, a);
        } catch (Exception e) {
            out.reset(mark);
            out.error(e);
        }
    }

    private void execute(int op, Args a) throws Exception {
        int[] args = a.ints;
        switch (op) {
            case PUT:
                map.put(use(a.k), use(a.n), newState(a.content));
                out.nil();
                return;
            case PUT_AND_GET_OLD:
                state(map.putAndGetOld(use(a.k), use(a.n), newState(a.content)));
                return;
            case GET:
                state(map.get(use(a.k), use(a.n)));
                return;
            case GET_MUTATE: {
                List<Integer> got = map.get(use(a.k), use(a.n));
                state(got);
                if (got != null) {
                    got.add(args[0]);
                }
                return;
            }
            case CONTAINS_KEY:
                out.bool(map.containsKey(use(a.k), use(a.n)));
                return;
            case REMOVE:
                map.remove(use(a.k), use(a.n));
                out.nil();
                return;
            case REMOVE_AND_GET_OLD:
                state(map.removeAndGetOld(use(a.k), use(a.n)));
                return;
            case TRANSFORM:
                transform(use(a.k), use(a.n), args[0]);
                return;
            case REHASH:
                for (int i = 0; i < args[0]; i++) {
                    map.containsKey(use(a.k), use(a.n));
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
                iterateModify(args[0], a.k, a.n, args[1]);
                return;
            case KEYS: {
                List<Object> ks = new ArrayList<>();
                map.getKeys(use(a.n)).forEach(ks::add);
                out.open();
                for (Object key : ks) {
                    out.value(key);
                }
                out.close();
                return;
            }
            case SIZE_OF_NAMESPACE:
                out.i(map.sizeOfNamespace(use(a.n)));
                return;
            case VISIT:
                visit(args[0]);
                return;
            case PUT_RANGE:
                for (long i = args[1]; i < (long) args[1] + args[2]; i++) {
                    map.put(use(Keys.nth(args[0], i)), use(a.n), newState(a.content));
                }
                out.nil();
                return;
            case REMOVE_RANGE:
                for (long i = args[1]; i < (long) args[1] + args[2]; i++) {
                    map.remove(use(Keys.nth(args[0], i)), use(a.n));
                }
                out.nil();
                return;
            case GET_RANGE:
                out.open();
                for (long i = args[1]; i < (long) args[1] + args[2]; i++) {
                    state(map.get(use(Keys.nth(args[0], i)), use(a.n)));
                }
                out.close();
                return;
            case HOLD_KEYS:
                keyObjects.hold();
                out.nil();
                return;
            default:
                throw new IllegalArgumentException("unknown operation code " + op + " in a batch");
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
            map.put(use(k), use(n), s);
        } else {
            map.remove(use(k), use(n));
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
                    visitor.remove(new StateEntry.SimpleStateEntry<>(keyObjects.passed(r[0]),
                            keyObjects.passed(r[1]), s));
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
