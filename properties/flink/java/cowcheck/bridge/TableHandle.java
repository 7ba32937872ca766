package cowcheck.bridge;

import java.io.IOException;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.state.IterableStateSnapshot;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.StateSnapshot;
import org.apache.flink.runtime.state.heap.StateTable;

/**
 * Flink's own CopyOnWriteStateTable (key groups 0..127 of 128, Integer keys and namespaces,
 * states List of Integer), for the table machine (properties/table). Built by reflection: the
 * constructor is package-private, and its key context moved from ...state.heap (1.13) to
 * ...state (1.14 on), so the same source runs on every release.
 *
 * The state starts registered with a list serializer whose copy returns its argument (values
 * declared immutable); setMetaInfo re-registers it with Flink's ListSerializer(IntSerializer),
 * whose copy copies (schema evolution on restore). Whether the table's maps copy with the new
 * serializer afterwards is FLINK-26853.
 */
public final class TableHandle {
    private static final int MAX_PARALLELISM = 128;
    private static final String NAME = "cowcheck-table-state";

    private final StateTable<Integer, Integer, List<Integer>> table;
    private final Map<Integer, StateSnapshot> snapshots = new HashMap<>();

    @SuppressWarnings("unchecked")
    public TableHandle() throws Exception {
        KeyGroupRange range = KeyGroupRange.of(0, MAX_PARALLELISM - 1);
        Class<?> contextClass;
        try {
            contextClass = Class.forName("org.apache.flink.runtime.state.InternalKeyContextImpl");
        } catch (ClassNotFoundException older) {
            contextClass = Class.forName("org.apache.flink.runtime.state.heap.InternalKeyContextImpl");
        }
        Object context = contextClass.getConstructor(KeyGroupRange.class, int.class).newInstance(range, MAX_PARALLELISM);
        Class<?> tableClass = Class.forName("org.apache.flink.runtime.state.heap.CopyOnWriteStateTable");
        Constructor<?> constructor = null;
        for (Constructor<?> c : tableClass.getDeclaredConstructors()) {
            if (c.getParameterCount() == 3) {
                constructor = c;
            }
        }
        if (constructor == null) {
            throw new IllegalStateException("no 3-argument CopyOnWriteStateTable constructor in this release");
        }
        constructor.setAccessible(true);
        table = (StateTable<Integer, Integer, List<Integer>>) constructor.newInstance(
                context, metaInfo(new SameObjectListSerializer()), IntSerializer.INSTANCE);
    }

    private static RegisteredKeyValueStateBackendMetaInfo<Integer, List<Integer>> metaInfo(
            TypeSerializer<List<Integer>> stateSerializer) {
        return new RegisteredKeyValueStateBackendMetaInfo<>(
                StateDescriptor.Type.VALUE, NAME, IntSerializer.INSTANCE, stateSerializer);
    }

    private static int group(int key) {
        return KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
    }

    private static int[] ints(List<Integer> state) {
        if (state == null) {
            return null;
        }
        int[] out = new int[state.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = state.get(i);
        }
        return out;
    }

    public void put(int key, int namespace, int[] values) {
        List<Integer> state = new ArrayList<>();
        for (int v : values) {
            state.add(v);
        }
        table.put(key, group(key), namespace, state);
    }

    public int[] get(int key, int namespace) {
        return ints(table.get(key, namespace));
    }

    /** get, then append {@code value} to the returned list in place (a caller mutating its state). */
    public int[] getAndAppend(int key, int namespace, int value) {
        List<Integer> state = table.get(key, namespace);
        if (state == null) {
            return null;
        }
        state.add(value);
        return ints(state);
    }

    public int size() {
        return table.size();
    }

    /** Re-register the state with Flink's ListSerializer(IntSerializer) (copy copies). */
    public void setMetaInfo() {
        table.setMetaInfo(metaInfo(new ListSerializer<>(IntSerializer.INSTANCE)));
    }

    public void snapshot(int sid) {
        snapshots.put(sid, table.stateSnapshot());
    }

    /** The snapshot's entries, key group by key group: key, namespace, length, values... each. */
    public int[] readSnapshot(int sid) {
        IterableStateSnapshot<Integer, Integer, List<Integer>> snap =
                (IterableStateSnapshot<Integer, Integer, List<Integer>>) snapshots.get(sid);
        List<Integer> out = new ArrayList<>();
        for (int g = 0; g < MAX_PARALLELISM; g++) {
            Iterator<StateEntry<Integer, Integer, List<Integer>>> it = snap.getIterator(g);
            while (it.hasNext()) {
                StateEntry<Integer, Integer, List<Integer>> e = it.next();
                out.add(e.getKey());
                out.add(e.getNamespace());
                out.add(e.getState().size());
                out.addAll(e.getState());
            }
        }
        int[] flat = new int[out.size()];
        for (int i = 0; i < flat.length; i++) {
            flat[i] = out.get(i);
        }
        return flat;
    }

    /** The snapshot's writeStateInKeyGroup bytes for key group {@code group} (Flink's checkpoint format). */
    public byte[] writeKeyGroup(int sid, int group) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(256);
        snapshots.get(sid).getKeyGroupWriter().writeStateInKeyGroup(out, group);
        return out.getCopyOfBuffer();
    }

    public void release(int sid) {
        StateSnapshot snap = snapshots.remove(sid);
        if (snap != null) {
            snap.release();
        }
    }

    /** Flink's ListSerializer(IntSerializer), except that copy returns its argument. */
    static final class SameObjectListSerializer extends TypeSerializer<List<Integer>> {
        private static final long serialVersionUID = 1L;
        private final TypeSerializer<List<Integer>> delegate = new ListSerializer<>(IntSerializer.INSTANCE);

        @Override
        public boolean isImmutableType() {
            return false;
        }

        @Override
        public TypeSerializer<List<Integer>> duplicate() {
            return this;
        }

        @Override
        public List<Integer> createInstance() {
            return delegate.createInstance();
        }

        @Override
        public List<Integer> copy(List<Integer> from) {
            return from;
        }

        @Override
        public List<Integer> copy(List<Integer> from, List<Integer> reuse) {
            return from;
        }

        @Override
        public int getLength() {
            return delegate.getLength();
        }

        @Override
        public void serialize(List<Integer> record, DataOutputView target) throws IOException {
            delegate.serialize(record, target);
        }

        @Override
        public List<Integer> deserialize(DataInputView source) throws IOException {
            return delegate.deserialize(source);
        }

        @Override
        public List<Integer> deserialize(List<Integer> reuse, DataInputView source) throws IOException {
            return delegate.deserialize(reuse, source);
        }

        @Override
        public void copy(DataInputView source, DataOutputView target) throws IOException {
            delegate.copy(source, target);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof SameObjectListSerializer;
        }

        @Override
        public int hashCode() {
            return 26853;
        }

        @Override
        public TypeSerializerSnapshot<List<Integer>> snapshotConfiguration() {
            return delegate.snapshotConfiguration();
        }
    }
}
