package cowcheck.bridge;

import java.io.IOException;
import java.util.List;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * Flink's ListSerializer, except that a state with a Python twin is first brought up to date
 * from its twin. Python callers mutate the list objects they were handed (a get result, a
 * transform argument) in place, and the map only ever reads a state's content through its
 * serializer (copy-on-write copies, writeState), so refreshing here keeps the Java object and
 * its twin equal exactly when it matters, at the cost of one callback per copy or write.
 */
final class TwinSyncingSerializer extends TypeSerializer<List<Integer>> {
    private static final long serialVersionUID = 1L;

    private final transient MapHandle handle;
    private final TypeSerializer<List<Integer>> delegate;

    TwinSyncingSerializer(MapHandle handle, TypeSerializer<List<Integer>> delegate) {
        this.handle = handle;
        this.delegate = delegate;
    }

    @Override
    public boolean isImmutableType() {
        return delegate.isImmutableType();
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
        handle.refreshFromTwin(from);
        return delegate.copy(from);
    }

    @Override
    public List<Integer> copy(List<Integer> from, List<Integer> reuse) {
        handle.refreshFromTwin(from);
        return delegate.copy(from, reuse);
    }

    @Override
    public int getLength() {
        return delegate.getLength();
    }

    @Override
    public void serialize(List<Integer> record, DataOutputView target) throws IOException {
        handle.refreshFromTwin(record);
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
        return o instanceof TwinSyncingSerializer && delegate.equals(((TwinSyncingSerializer) o).delegate);
    }

    @Override
    public int hashCode() {
        return delegate.hashCode();
    }

    @Override
    public TypeSerializerSnapshot<List<Integer>> snapshotConfiguration() {
        return delegate.snapshotConfiguration();
    }
}
