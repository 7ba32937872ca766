package org.apache.flink.runtime.state.heap;

import static org.junit.jupiter.api.Assertions.*;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.state.IterableStateSnapshot;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.StateSnapshot;
import org.junit.jupiter.api.Test;
// InternalKeyContextImpl: this package's own up to 1.18.x (it wins over the on-demand import),
// org.apache.flink.runtime.state's from 1.19.0 (found through it).
import org.apache.flink.runtime.state.*;

/**
 * Replays cowcheck's counterexample flink-26853-stale-copier.json (table machine) on Flink's own classes,
 * written for flink@1.13.6 (Apache Flink 1.13.6): it fails where the bug is (divergence T2 at step 4) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class Flink26853StaleCopierTest {
    @Test
    void replay() throws Exception {
        // A CopyOnWriteStateTable for key groups 0-127 of 128, its state registered with a serializer
        // whose copy returns its argument (values declared immutable), as cowcheck's table machine does.
        InternalKeyContextImpl<Integer> context =
                new InternalKeyContextImpl<>(KeyGroupRange.of(0, MAX_PARALLELISM - 1), MAX_PARALLELISM);
        CopyOnWriteStateTable<Integer, Integer, List<Integer>> t = new CopyOnWriteStateTable<>(
                context, metaInfo(new SameObjectListSerializer()), IntSerializer.INSTANCE);
        Map<Integer, StateSnapshot> snapshots = new HashMap<>();
        List<Integer> v;

        // step 0: t.put(1, 0, [])
        t.put(1, group(1), 0, new ArrayList<>(List.of()));

        // step 1: s0 = t.snapshot()
        snapshots.put(0, t.stateSnapshot());

        // step 2: t.set_meta_info() # re-register the state with a copying serializer
        t.setMetaInfo(metaInfo(new ListSerializer<>(IntSerializer.INSTANCE)));

        // step 3: v = t.get(1, 0); v is not None and v.append(6) # mutate in place
        v = t.get(1, 0);
        if (v != null) v.add(6);  // the caller mutates its state

        // step 4: key_groups_written(s0) # writeStateInKeyGroup for key groups 0-127, as a checkpoint does   <-- fails here
        // T2: A table snapshot, and every key group written from it, holds the state at snapshot time. (docs/contract.md#t2)
        // the model expects: snapshot s0 holds ['[1, 0, []]']
        Map<Integer, List<String>> frozen = new HashMap<>();  // key group -> what the model froze
        frozen.put(86, List.of("[1, 0, []]"));
        for (int g = 0; g < MAX_PARALLELISM; g++) {
            assertEquals(frozen.getOrDefault(g, List.of()), written(snapshots.get(0), g),
                    "T2: key group " + g + " of snapshot s0 as written, against the model's copy");
        }
    }

    static final int MAX_PARALLELISM = 128;

    static int group(int key) {
        return KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
    }

    static RegisteredKeyValueStateBackendMetaInfo<Integer, List<Integer>> metaInfo(TypeSerializer<List<Integer>> s) {
        return new RegisteredKeyValueStateBackendMetaInfo<>(StateDescriptor.Type.VALUE, "cowcheck-table-state",
                IntSerializer.INSTANCE, s);
    }

    /** A snapshot's entries, every key group, as sorted "[key, namespace, state]". */
    @SuppressWarnings("unchecked")
    static List<String> entries(StateSnapshot snapshot) {
        IterableStateSnapshot<Integer, Integer, List<Integer>> s =
                (IterableStateSnapshot<Integer, Integer, List<Integer>>) snapshot;
        List<String> out = new ArrayList<>();
        for (int g = 0; g < MAX_PARALLELISM; g++) {
            Iterator<StateEntry<Integer, Integer, List<Integer>>> it = s.getIterator(g);
            while (it.hasNext()) {
                StateEntry<Integer, Integer, List<Integer>> e = it.next();
                out.add("[" + e.getKey() + ", " + e.getNamespace() + ", " + e.getState() + "]");
            }
        }
        Collections.sort(out);
        return out;
    }

    /** writeStateInKeyGroup's bytes for key group g (a checkpoint's), decoded: sorted "[key, namespace, state]". */
    static List<String> written(StateSnapshot snapshot, int g) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(256);
        snapshot.getKeyGroupWriter().writeStateInKeyGroup(out, g);
        DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
        int count = in.readInt();
        List<String> entries = new ArrayList<>();
        ListSerializer<Integer> states = new ListSerializer<>(IntSerializer.INSTANCE);
        for (int i = 0; i < count; i++) {
            int namespace = IntSerializer.INSTANCE.deserialize(in);
            int key = IntSerializer.INSTANCE.deserialize(in);
            entries.add("[" + key + ", " + namespace + ", " + states.deserialize(in) + "]");
        }
        Collections.sort(entries);
        return entries;
    }

    /** Flink's ListSerializer(IntSerializer), except that copy returns its argument (values declared immutable). */
    static final class SameObjectListSerializer extends TypeSerializer<List<Integer>> {
        private static final long serialVersionUID = 1L;
        private final TypeSerializer<List<Integer>> delegate = new ListSerializer<>(IntSerializer.INSTANCE);

        @Override public boolean isImmutableType() { return false; }
        @Override public TypeSerializer<List<Integer>> duplicate() { return this; }
        @Override public List<Integer> createInstance() { return delegate.createInstance(); }
        @Override public List<Integer> copy(List<Integer> from) { return from; }
        @Override public List<Integer> copy(List<Integer> from, List<Integer> reuse) { return from; }
        @Override public int getLength() { return delegate.getLength(); }
        @Override public void serialize(List<Integer> r, DataOutputView t) throws IOException { delegate.serialize(r, t); }
        @Override public List<Integer> deserialize(DataInputView s) throws IOException { return delegate.deserialize(s); }
        @Override public List<Integer> deserialize(List<Integer> r, DataInputView s) throws IOException {
            return delegate.deserialize(r, s);
        }
        @Override public void copy(DataInputView s, DataOutputView t) throws IOException { delegate.copy(s, t); }
        @Override public boolean equals(Object o) { return o instanceof SameObjectListSerializer; }
        @Override public int hashCode() { return 26853; }
        @Override public TypeSerializerSnapshot<List<Integer>> snapshotConfiguration() {
            return delegate.snapshotConfiguration();
        }
    }
}
