package cowcheck.bridge;

import java.io.IOException;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;

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
 * One Flink CopyOnWriteStateMap (key and namespace: Integer, Long, String or Boolean; state:
 * {@code List<Integer>} through Flink's ListSerializer) driven call by call from Python.
 *
 * <p>State objects cross to Python as ids (see {@link PythonSide} for the codes): Python keeps
 * one twin list per id, so the same Java object always comes back as the same Python object
 * and a fresh Java copy as a fresh Python object. Python owns the content; the map's serializer
 * refreshes a state from its twin before reading it ({@link TwinSyncingSerializer}).
 *
 * <p>Entries cross only for introspection, also as ids, so Python can keep one mirror object per
 * Java entry. Both registries keep their objects alive until {@link #prune} drops what the map
 * and the snapshots Python still holds can no longer reach.
 */
public final class MapHandle {
    private final CopyOnWriteStateMap<Object, Object, List<Integer>> map;
    private final PythonSide python;
    private final Registry states = new Registry();
    private final Registry entries = new Registry();
    private final List<CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> unreleased = new ArrayList<>();

    private final Corruption corruption;

    public MapHandle(PythonSide python) {
        this(python, "");
    }

    /** A map with a seeded corruption ({@link Corruption}; "" for none). */
    public MapHandle(PythonSide python, String corruption) {
        this.python = python;
        this.corruption = Corruption.forName(corruption);
        this.map = Internals.newMap(new TwinSyncingSerializer(this, new ListSerializer<>(IntSerializer.INSTANCE)));
    }

    // ------------------------------------------------------------------ states

    @SuppressWarnings("unchecked")
    private List<Integer> state(int id) {
        return id == 0 ? null : (List<Integer>) states.get(id);
    }

    void refreshFromTwin(List<Integer> s) {
        int id = s == null ? 0 : states.idOf(s);
        if (id != 0) {
            int[] content = python.twinContent(id);
            s.clear();
            for (int x : content) {
                s.add(x);
            }
        }
    }

    /** Registers a new Java list with this content (the twin of a new Python list); its id. */
    public int adopt(int[] content) {
        ArrayList<Integer> s = new ArrayList<>(content.length);
        for (int x : content) {
            s.add(x);
        }
        return states.register(s);
    }

    /** The Java content of state {@code id} (to build the twin of a list Java made). */
    public int[] content(int id) {
        List<Integer> s = state(id);
        int[] out = new int[s.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = s.get(i);
        }
        return out;
    }

    public int registeredStates() {
        return states.size();
    }

    public int registeredEntries() {
        return entries.size();
    }

    // ------------------------------------------------------------- keyed ops

    public int get(Object key, Object namespace) {
        corruption.before(map, "get", key, namespace);
        List<Integer> got = map.get(key, namespace);
        corruption.after(map, "get", key, namespace);
        return states.code(got);
    }

    public boolean containsKey(Object key, Object namespace) {
        corruption.before(map, "contains_key", key, namespace);
        boolean found = map.containsKey(key, namespace);
        corruption.after(map, "contains_key", key, namespace);
        return found;
    }

    public void put(Object key, Object namespace, int stateId) {
        corruption.before(map, "put", key, namespace);
        map.put(key, namespace, state(stateId));
        corruption.after(map, "put", key, namespace);
    }

    public int putAndGetOld(Object key, Object namespace, int stateId) {
        corruption.before(map, "put_and_get_old", key, namespace);
        List<Integer> old = map.putAndGetOld(key, namespace, state(stateId));
        corruption.after(map, "put_and_get_old", key, namespace);
        return states.code(old);
    }

    public void remove(Object key, Object namespace) {
        corruption.before(map, "remove", key, namespace);
        map.remove(key, namespace);
        corruption.after(map, "remove", key, namespace);
    }

    public int removeAndGetOld(Object key, Object namespace) {
        corruption.before(map, "remove_and_get_old", key, namespace);
        List<Integer> old = map.removeAndGetOld(key, namespace);
        corruption.after(map, "remove_and_get_old", key, namespace);
        return states.code(old);
    }

    /** Flink's transform; the function is Python's pending one (the value stays in Python). */
    public void transform(Object key, Object namespace) throws Exception {
        corruption.before(map, "transform", key, namespace);
        map.transform(key, namespace, null, (previous, unused) -> state(python.transform(states.code(previous))));
        corruption.after(map, "transform", key, namespace);
    }

    public int size() {
        return map.size();
    }

    public int sizeOfNamespace(Object namespace) {
        return map.sizeOfNamespace(namespace);
    }

    // -------------------------------------------------------------- iteration

    public Iterator<StateEntry<Object, Object, List<Integer>>> iterator() {
        return map.iterator();
    }

    /** The next entry as JSON {@code [key, namespace, state code]}, or null at the end. */
    public String next(Iterator<StateEntry<Object, Object, List<Integer>>> it) {
        if (!it.hasNext()) {
            return null;
        }
        StateEntry<Object, Object, List<Integer>> e = it.next();
        return row(new Json(), e.getKey(), e.getNamespace(), e.getState()).toString();
    }

    /** {expected, actual} mod count of a live iterator that just failed. */
    public int[] modCounts(Object iterator) {
        return new int[] {Internals.expectedModCount(iterator), Internals.modCount(map)};
    }

    public Iterator<Object> keys(Object namespace) {
        return map.getKeys(namespace).iterator();
    }

    /** The next key as a one-element JSON array, or null at the end. */
    public String nextKey(Iterator<Object> it) {
        return it.hasNext() ? new Json().open().value(it.next()).close().toString() : null;
    }

    public StateIncrementalVisitor<Object, Object, List<Integer>> visitor(int recommendedMaxRecords) {
        return map.getStateIncrementalVisitor(recommendedMaxRecords);
    }

    /** The next chain as JSON rows; an empty list where Flink returns null. */
    public String nextEntries(StateIncrementalVisitor<Object, Object, List<Integer>> visitor) {
        Json out = new Json().open();
        var chain = visitor.nextEntries();
        if (chain != null) {
            for (StateEntry<Object, Object, List<Integer>> e : chain) {
                row(out, e.getKey(), e.getNamespace(), e.getState());
            }
        }
        return out.close().toString();
    }

    public void visitorRemove(StateIncrementalVisitor<Object, Object, List<Integer>> visitor, Object key,
                              Object namespace) {
        visitor.remove(new StateEntry.SimpleStateEntry<>(key, namespace, null));
    }

    public void visitorUpdate(StateIncrementalVisitor<Object, Object, List<Integer>> visitor, Object key,
                              Object namespace, int stateId) {
        visitor.update(new StateEntry.SimpleStateEntry<>(key, namespace, null), state(stateId));
    }

    private Json row(Json out, Object key, Object namespace, List<Integer> state) {
        return out.open().value(key).value(namespace).i(states.code(state)).close();
    }

    // -------------------------------------------------------------- snapshots

    public CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> snapshot() {
        CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s = map.stateSnapshot();
        corruption.after(map, "snapshot", null, null);
        unreleased.add(s);
        return s;
    }

    /** {version, entry count} of a snapshot. */
    public int[] snapshotInfo(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s) {
        return new int[] {Internals.snapshotVersion(s), Internals.snapshotEntryCount(s)};
    }

    public void release(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s) {
        s.release();
        corruption.after(map, "release", null, null);
        unreleased.removeIf(u -> u == s);
    }

    /** JSON rows of the snapshot in Flink's order (NonTransformSnapshotIterator). */
    public String read(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s) {
        Json out = new Json().open();
        Iterator<StateEntry<Object, Object, List<Integer>>> it = s.getIterator(null, null, null, null);
        while (it.hasNext()) {
            StateEntry<Object, Object, List<Integer>> e = it.next();
            row(out, e.getKey(), e.getNamespace(), e.getState());
        }
        return out.close().toString();
    }

    /** JSON {size, rows} through Flink's TransformedSnapshotIterator with Python's pending transformer. */
    public String readTransformed(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s) {
        StateSnapshotTransformer<List<Integer>> transformer =
                value -> state(python.filterOrTransform(states.code(value)));
        Iterator<StateEntry<Object, Object, List<Integer>>> it = s.getIterator(null, null, null, transformer);
        Json out = new Json().open().i(Internals.iteratorSize(it)).open();
        while (it.hasNext()) {
            StateEntry<Object, Object, List<Integer>> e = it.next();
            row(out, e.getKey(), e.getNamespace(), e.getState());
        }
        return out.close().close().toString();
    }

    /** Flink's writeState (no transformer) into a byte array; key and namespace serializers by id. */
    @SuppressWarnings("unchecked")
    public byte[] writeState(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s, String keySerializer,
                             String namespaceSerializer) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(256);
        s.writeState((TypeSerializer<Object>) Serializers.byId(keySerializer),
                (TypeSerializer<Object>) Serializers.byId(namespaceSerializer), map.getStateSerializer(), out, null);
        return out.getCopyOfBuffer();
    }

    // ----------------------------------------------------------- white box

    /**
     * The whole structure: summary (9 ints), rehashing flag, live snapshot versions, one record
     * per entry reachable from the tables or from an unreleased snapshot (see {@link
     * #entryRecords}), then the bucket heads of both tables as entry ids.
     */
    public Encoded introspect() {
        Ints out = new Ints();
        Json keys = new Json().open();
        for (int v : Internals.summary(map)) {
            out.add(v);
        }
        out.add(Internals.isRehashing(map) ? 1 : 0);
        var versions = Internals.snapshotVersions(map);
        out.add(versions.size());
        for (int v : versions) {
            out.add(v);
        }
        List<Object> reachable = new ArrayList<>();
        IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
        Object[] primary = Internals.primaryTable(map);
        Object[] rehash = Internals.rehashTable(map);
        collect(primary, reachable, seen);
        collect(rehash, reachable, seen);
        for (var s : unreleased) {
            collect(Internals.snapshotData(s), reachable, seen);
        }
        entryRecords(out, keys, reachable);
        heads(out, primary);
        heads(out, rehash);
        return new Encoded(out.toArray(), keys.close().toString());
    }

    /** The entries of a snapshot's array: entry records, then the array as entry ids. */
    public Encoded snapshotEntries(CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>> s) {
        Ints out = new Ints();
        Json keys = new Json().open();
        Object[] data = Internals.snapshotData(s);
        List<Object> reachable = new ArrayList<>();
        collect(data, reachable, new IdentityHashMap<>());
        entryRecords(out, keys, reachable);
        heads(out, data);
        return new Encoded(out.toArray(), keys.close().toString());
    }

    private static void collect(Object[] table, List<Object> reachable, IdentityHashMap<Object, Boolean> seen) {
        for (Object head : table) {
            for (Object e = head; e != null && seen.put(e, Boolean.TRUE) == null; e = Internals.next(e)) {
                reachable.add(e);
            }
        }
    }

    private void heads(Ints out, Object[] table) {
        out.add(table.length);
        for (Object head : table) {
            out.add(head == null ? 0 : entries.idOf(head));
        }
    }

    /**
     * Count, then per entry: id (negative if Python has not seen it yet: then its key and
     * namespace follow in {@code keys}, in record order), next id (0: none), state code, entry
     * version, state version, hash.
     */
    private void entryRecords(Ints out, Json keys, List<Object> reachable) {
        int[] codes = new int[reachable.size()];
        for (int i = 0; i < codes.length; i++) {
            codes[i] = entries.code(reachable.get(i));
        }
        out.add(codes.length);
        for (int i = 0; i < codes.length; i++) {
            Object e = reachable.get(i);
            out.add(codes[i]);
            if (codes[i] < 0) {
                keys.value(Internals.key(e)).value(Internals.namespace(e));
            }
            Object next = Internals.next(e);
            out.add(next == null ? 0 : entries.idOf(next));
            @SuppressWarnings("unchecked")
            List<Integer> state = (List<Integer>) Internals.state(e);
            out.add(states.code(state));
            out.add(Internals.entryVersion(e));
            out.add(Internals.stateVersion(e));
            out.add(Internals.hash(e));
        }
    }

    /**
     * Forgets the states and entries that neither the map nor any of {@code held} (the snapshots
     * Python still holds, released or not) can reach: {dropped state ids}, {dropped entry ids}.
     */
    public int[][] prune(Object[] held) {
        IdentityHashMap<Object, Boolean> keepEntries = new IdentityHashMap<>();
        List<Object> reachable = new ArrayList<>();
        collect(Internals.primaryTable(map), reachable, keepEntries);
        collect(Internals.rehashTable(map), reachable, keepEntries);
        for (var s : unreleased) {
            collect(Internals.snapshotData(s), reachable, keepEntries);
        }
        for (Object s : held) {
            collect(Internals.snapshotData(s), reachable, keepEntries);
        }
        IdentityHashMap<Object, Boolean> keepStates = new IdentityHashMap<>();
        for (Object e : reachable) {
            Object state = Internals.state(e);
            if (state != null) {
                keepStates.put(state, Boolean.TRUE);
            }
        }
        return new int[][] {states.retainOnly(keepStates), entries.retainOnly(keepEntries)};
    }
}
