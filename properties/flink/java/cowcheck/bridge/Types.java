package cowcheck.bridge;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.TypeExtractor;

/**
 * The user classes of the backend machine's typed states, one class loader per class version
 * (properties/flink/pojos.py generates them and jvm.py compiles each version into types/vN/ beside
 * this class, off the class path).
 *
 * <p>Version N's loader is a URLClassLoader over types/vN/ whose parent is this helper's loader
 * (Flink), so cowcheck.types.Account of version 1 and of version 2 are two classes; a backend
 * built for a job of version N takes that loader as its user code class loader, and a restore
 * resolves the class a PojoSerializerSnapshot or KryoSerializerSnapshot names in it. Values cross
 * to Python as their fields in name order ({@link #fields}) and come back the same way
 * ({@link #object}).
 */
public final class Types {
    public static final String ACCOUNT = "cowcheck.types.Account";
    public static final String BLOB = "cowcheck.types.Blob";
    private static final Map<Integer, ClassLoader> LOADERS = new ConcurrentHashMap<>();

    private Types() {
    }

    /** The class loader of class version {@code version}. */
    public static ClassLoader loader(int version) {
        return LOADERS.computeIfAbsent(version, v -> {
            try {
                File helper = new File(Types.class.getProtectionDomain().getCodeSource().getLocation().toURI());
                File dir = new File(helper, "types/v" + v);
                if (!dir.isDirectory()) {
                    throw new IllegalArgumentException("no class version " + v + " (" + dir + ")");
                }
                return new URLClassLoader(new URL[] {dir.toURI().toURL()}, Types.class.getClassLoader());
            } catch (java.net.URISyntaxException | java.net.MalformedURLException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    public static Class<?> load(String name, int version) throws ClassNotFoundException {
        return Class.forName(name, true, loader(version));
    }

    /** The serializer of a state's values: int, pojo (Flink's TypeExtractor: a PojoSerializer) or kryo (GenericTypeInfo). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static TypeSerializer<Object> serializer(String type, int version) throws Exception {
        TypeInformation info;
        switch (type) {
            case "int":
                return (TypeSerializer) IntSerializer.INSTANCE;
            case "pojo":
                info = TypeExtractor.createTypeInfo(load(ACCOUNT, version));
                break;
            case "kryo":
                info = new GenericTypeInfo(load(BLOB, version));
                break;
            default:
                throw new IllegalArgumentException("no value type " + type);
        }
        return (TypeSerializer<Object>) create(info);
    }

    /** TypeInformation.createSerializer: of a SerializerConfig from 1.19 (the only one in 2.x), an ExecutionConfig before. */
    private static TypeSerializer<?> create(TypeInformation<?> info) throws Exception {
        try {
            Class<?> config = Class.forName("org.apache.flink.api.common.serialization.SerializerConfig");
            Object instance = Class.forName("org.apache.flink.api.common.serialization.SerializerConfigImpl")
                    .getConstructor().newInstance();
            return (TypeSerializer<?>) TypeInformation.class.getMethod("createSerializer", config).invoke(info, instance);
        } catch (ClassNotFoundException | NoSuchMethodException older) {
            return (TypeSerializer<?>) TypeInformation.class.getMethod("createSerializer", ExecutionConfig.class)
                    .invoke(info, new ExecutionConfig());
        }
    }

    private static List<Field> fieldsOf(Class<?> type) {
        List<Field> fields = new ArrayList<>();
        for (Field f : type.getFields()) {
            if (!Modifier.isStatic(f.getModifiers())) {
                fields.add(f);
            }
        }
        fields.sort(Comparator.comparing(Field::getName));
        return fields;
    }

    /** A new object of {@code name} in class version {@code version} with {@code values} as its fields in name order. */
    public static Object object(String name, int version, Object[] values) throws Exception {
        Class<?> type = load(name, version);
        Object o = type.getConstructor().newInstance();
        List<Field> fields = fieldsOf(type);
        if (fields.size() != values.length) {
            throw new IllegalArgumentException(name + " v" + version + " has fields " + fields + ", got "
                    + Arrays.toString(values));
        }
        for (int i = 0; i < values.length; i++) {
            Field f = fields.get(i);
            Object v = values[i];
            if (v instanceof Number && f.getType() == int.class) {
                v = ((Number) v).intValue();
            }
            f.set(o, v);
        }
        return o;
    }

    /** {class name, field names (String[]), field values (Object[])} of an object, in field-name order; null for null. */
    public static Object[] fields(Object o) throws IllegalAccessException {
        if (o == null) {
            return null;
        }
        List<Field> fields = fieldsOf(o.getClass());
        String[] names = new String[fields.size()];
        Object[] values = new Object[fields.size()];
        for (int i = 0; i < names.length; i++) {
            names[i] = fields.get(i).getName();
            values[i] = fields.get(i).get(o);
        }
        return new Object[] {o.getClass().getName(), names, values};
    }
}
