package cowcheck.bridge;

import java.io.IOException;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Flink's own serializers named by the ids of reference/serializers.py ("int", "long", "string",
 * "bytes", "list&lt;int&gt;", "map&lt;string,list&lt;long&gt;&gt;", "tuple2&lt;int,string&gt;" (Flink's
 * TupleSerializer of Tuple2), "timewindow" (TimeWindow.Serializer), "void" (VoidNamespaceSerializer)),
 * to compare bytes with the reference and to write snapshots of every key family.
 */
public final class Serializers {
    private Serializers() {}

    public static TypeSerializer<?> byId(String id) {
        int[] pos = {0};
        TypeSerializer<?> s = parse(id, pos);
        if (pos[0] != id.length()) {
            throw new IllegalArgumentException("bad serializer id " + id);
        }
        return s;
    }

    private static TypeSerializer<?> parse(String id, int[] pos) {
        int start = pos[0];
        while (pos[0] < id.length() && "<>,".indexOf(id.charAt(pos[0])) < 0) {
            pos[0]++;
        }
        String name = id.substring(start, pos[0]);
        switch (name) {
            case "int":
                return IntSerializer.INSTANCE;
            case "long":
                return LongSerializer.INSTANCE;
            case "string":
                return StringSerializer.INSTANCE;
            case "bytes":
                return BytePrimitiveArraySerializer.INSTANCE;
            case "list": {
                expect(id, pos, '<');
                TypeSerializer<?> element = parse(id, pos);
                expect(id, pos, '>');
                return new ListSerializer<>(element);
            }
            case "tuple2": {
                expect(id, pos, '<');
                TypeSerializer<?> f0 = parse(id, pos);
                expect(id, pos, ',');
                TypeSerializer<?> f1 = parse(id, pos);
                expect(id, pos, '>');
                return Keys.tupleSerializer(f0, f1);
            }
            case "timewindow":
                return Keys.windowSerializer();
            case "void":
                return Keys.voidSerializer();
            case "map": {
                expect(id, pos, '<');
                TypeSerializer<?> key = parse(id, pos);
                expect(id, pos, ',');
                TypeSerializer<?> value = parse(id, pos);
                expect(id, pos, '>');
                return new MapSerializer<>(key, value);
            }
            default:
                throw new IllegalArgumentException("no Flink serializer for id " + id);
        }
    }

    private static void expect(String id, int[] pos, char c) {
        if (pos[0] >= id.length() || id.charAt(pos[0]) != c) {
            throw new IllegalArgumentException("bad serializer id " + id + ": expected '" + c + "' at " + pos[0]);
        }
        pos[0]++;
    }

    /** The bytes Flink's serializer {@code id} writes for {@code value}. */
    @SuppressWarnings("unchecked")
    public static byte[] serialize(String id, Object value) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(64);
        ((TypeSerializer<Object>) byId(id)).serialize(value, out);
        return out.getCopyOfBuffer();
    }

    /** What Flink's serializer {@code id} reads from {@code bytes}; it must consume all of them. */
    public static Object deserialize(String id, byte[] bytes) throws IOException {
        DataInputDeserializer in = new DataInputDeserializer(bytes);
        Object value = byId(id).deserialize(in);
        if (in.available() != 0) {
            throw new IOException(in.available() + " bytes left after deserializing " + id);
        }
        return value;
    }
}
