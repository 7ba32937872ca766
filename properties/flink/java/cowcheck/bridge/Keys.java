package cowcheck.bridge;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.typeutils.TypeSerializer;

/**
 * The key and namespace types of properties/core/keys.py on the Java side: Integer, Long, String,
 * Boolean, Flink's {@code Tuple2}, {@code TimeWindow} and {@code VoidNamespace.INSTANCE}.
 *
 * <p>The three Flink types are reached by reflection (method handles, looked up once), so this
 * helper compiles against any release's jar; {@link #missing} names a class a release does not
 * have (the Python side then refuses that key type in one line, naming the release). Families are
 * numbered as {@code cowcheck.core.keys.FAMILIES} orders them (the FAMILY domain's encoding), and
 * {@link #nth} is {@code Family.nth} computed here (a test holds the two equal).
 */
public final class Keys {
    private Keys() {}

    /** Families, in the order of cowcheck.core.keys.FAMILIES. */
    static final int INT = 0;
    static final int LONG = 1;
    static final int STRING = 2;
    static final int TUPLE = 3;
    static final int VOID = 4;
    static final int WINDOW = 5;

    static final String TUPLE2_CLASS = "org.apache.flink.api.java.tuple.Tuple2";
    static final String TUPLE_SERIALIZER_CLASS = "org.apache.flink.api.java.typeutils.runtime.TupleSerializer";
    static final String TIME_WINDOW_CLASS = "org.apache.flink.streaming.api.windowing.windows.TimeWindow";
    static final String VOID_NAMESPACE_CLASS = "org.apache.flink.runtime.state.VoidNamespace";
    static final String VOID_SERIALIZER_CLASS = "org.apache.flink.runtime.state.VoidNamespaceSerializer";

    private static final List<String> MISSING = new ArrayList<>();
    static final Class<?> TUPLE2 = load(TUPLE2_CLASS);
    static final Class<?> TIME_WINDOW = load(TIME_WINDOW_CLASS);
    static final Class<?> VOID_NAMESPACE = load(VOID_NAMESPACE_CLASS);
    private static final Class<?> TUPLE_SERIALIZER = load(TUPLE_SERIALIZER_CLASS);
    private static final Class<?> TIME_WINDOW_SERIALIZER = TIME_WINDOW == null ? null
            : load(TIME_WINDOW_CLASS + "$Serializer");
    private static final Class<?> VOID_SERIALIZER = load(VOID_SERIALIZER_CLASS);

    private static final MethodHandle TUPLE2_NEW;
    private static final MethodHandle TUPLE2_F0;
    private static final MethodHandle TUPLE2_F1;
    private static final MethodHandle WINDOW_NEW;
    private static final MethodHandle WINDOW_START;
    private static final MethodHandle WINDOW_END;
    private static final Object VOID_INSTANCE;

    static {
        MethodHandles.Lookup lookup = MethodHandles.publicLookup();
        try {
            MethodHandle tupleNew = null;
            MethodHandle f0 = null;
            MethodHandle f1 = null;
            if (TUPLE2 != null) {
                MethodType pair = MethodType.methodType(Object.class, Object.class, Object.class);
                tupleNew = lookup.findConstructor(TUPLE2, MethodType.methodType(void.class, Object.class,
                        Object.class)).asType(pair);
                f0 = lookup.findGetter(TUPLE2, "f0", Object.class).asType(MethodType.methodType(Object.class,
                        Object.class));
                f1 = lookup.findGetter(TUPLE2, "f1", Object.class).asType(MethodType.methodType(Object.class,
                        Object.class));
            }
            TUPLE2_NEW = tupleNew;
            TUPLE2_F0 = f0;
            TUPLE2_F1 = f1;
            MethodHandle windowNew = null;
            MethodHandle start = null;
            MethodHandle end = null;
            if (TIME_WINDOW != null) {
                windowNew = lookup.findConstructor(TIME_WINDOW, MethodType.methodType(void.class, long.class,
                        long.class)).asType(MethodType.methodType(Object.class, long.class, long.class));
                MethodType getter = MethodType.methodType(long.class, Object.class);
                start = lookup.findVirtual(TIME_WINDOW, "getStart", MethodType.methodType(long.class))
                        .asType(getter);
                end = lookup.findVirtual(TIME_WINDOW, "getEnd", MethodType.methodType(long.class)).asType(getter);
            }
            WINDOW_NEW = windowNew;
            WINDOW_START = start;
            WINDOW_END = end;
            VOID_INSTANCE = VOID_NAMESPACE == null ? null : VOID_NAMESPACE.getField("INSTANCE").get(null);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError("cowcheck bridge: Flink's Tuple2, TimeWindow or VoidNamespace "
                    + "does not have the members this bridge uses: " + e);
        }
    }

    private static Class<?> load(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException | LinkageError e) {
            MISSING.add(name);
            return null;
        }
    }

    /** The classes of the key types (and their serializers) this release does not have. */
    public static String[] missing() {
        return MISSING.toArray(new String[0]);
    }

    private static RuntimeException unavailable(String name) {
        return new UnsupportedOperationException("this Flink release has no " + name);
    }

    // ------------------------------------------------------------------ values

    public static Object tuple2(Object f0, Object f1) {
        if (TUPLE2_NEW == null) {
            throw unavailable(TUPLE2_CLASS);
        }
        try {
            return (Object) TUPLE2_NEW.invokeExact(f0, f1);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static Object window(long start, long end) {
        if (WINDOW_NEW == null) {
            throw unavailable(TIME_WINDOW_CLASS);
        }
        try {
            return (Object) WINDOW_NEW.invokeExact(start, end);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static Object voidNamespace() {
        if (VOID_INSTANCE == null) {
            throw unavailable(VOID_NAMESPACE_CLASS);
        }
        return VOID_INSTANCE;
    }

    static boolean isTuple2(Object o) {
        return o != null && o.getClass() == TUPLE2;
    }

    static boolean isWindow(Object o) {
        return o != null && o.getClass() == TIME_WINDOW;
    }

    static boolean isVoid(Object o) {
        return o != null && o == VOID_INSTANCE;
    }

    static Object f0(Object tuple) {
        try {
            return (Object) TUPLE2_F0.invokeExact(tuple);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static Object f1(Object tuple) {
        try {
            return (Object) TUPLE2_F1.invokeExact(tuple);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long start(Object window) {
        try {
            return (long) WINDOW_START.invokeExact(window);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long end(Object window) {
        try {
            return (long) WINDOW_END.invokeExact(window);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        return new IllegalStateException(t);
    }

    /**
     * Values CPython keeps a single object of, so Python cannot hand a map a new one
     * (cowcheck.core.keys.pinned): ints -5..256, "" and one Latin-1 character, booleans and
     * the VoidNamespace singleton. Both sides pass one object per such value.
     */
    static boolean pinned(Object o) {
        if (o instanceof Integer) {
            int v = (Integer) o;
            return v >= -5 && v <= 256;
        }
        if (o instanceof String) {
            String s = (String) o;
            return s.isEmpty() || (s.length() == 1 && s.charAt(0) < 256);
        }
        return o instanceof Boolean || isVoid(o);
    }

    /** A new object equal to {@code o} (fields: new ones too); the VoidNamespace singleton stays itself. */
    @SuppressWarnings("deprecation")
    public static Object copy(Object o) {
        if (o instanceof Integer) {
            return new Integer((Integer) o); // never Integer.valueOf: its cache would share small values
        }
        if (o instanceof Long) {
            return new Long((Long) o);
        }
        if (o instanceof String) {
            return new String((String) o);
        }
        if (o instanceof Boolean) {
            return new Boolean((Boolean) o);
        }
        if (isTuple2(o)) {
            return tuple2(copy(f0(o)), copy(f1(o)));
        }
        if (isWindow(o)) {
            return window(start(o), end(o));
        }
        if (o == null || isVoid(o)) {
            return o;
        }
        throw new IllegalArgumentException("not a key or namespace of cowcheck's: " + o.getClass().getName());
    }

    // ---------------------------------------------------------- bulk sequence

    /** The digits of cowcheck.core.keys._NTH_ALPHABET, as code points (one lone high surrogate). */
    private static final int[] NTH_ALPHABET = {
        'a', 0xe9, 0x65e5, 0x1f600, 'Z', 0xfc, 0x4e2d, 0x1d11e, 'b', 0xd800, 0xd8, 0x8a9e, 'c', 0xdf, 0xf1, 0x6587,
    };

    static int nthInt(long i) {
        return (int) (i * 0x9E3779B1L);
    }

    static String nthString(long i) {
        StringBuilder out = new StringBuilder();
        long n = i + 1;
        while (n > 0) {
            long digit = (n - 1) % NTH_ALPHABET.length;
            n = (n - 1) / NTH_ALPHABET.length;
            out.appendCodePoint(NTH_ALPHABET[(int) digit]);
        }
        return out.toString();
    }

    /** cowcheck.core.keys.nth_key: the {@code i}-th key of family {@code family}'s bulk sequence (a new object). */
    @SuppressWarnings("deprecation")
    public static Object nth(int family, long i) {
        switch (family) {
            case INT:
                return new Integer(nthInt(i));
            case LONG:
                return new Long(3L * (1L << 32) + i * 7919L);
            case STRING:
                return nthString(i);
            case TUPLE:
                return tuple2(new Integer(nthInt(i)), nthString(i % 11));
            case VOID:
                return voidNamespace();
            case WINDOW:
                return window(i * 60_000L, (i + 1) * 60_000L);
            default:
                throw new IllegalArgumentException("no key family " + family);
        }
    }

    /** JSON {@code [nth(family, first), ..., nth(family, first + count - 1)]} (tests compare it with Python's). */
    public static String nthJson(int family, long first, int count) {
        Json out = new Json().open();
        for (long i = first; i < first + count; i++) {
            out.value(nth(family, i));
        }
        return out.close().toString();
    }

    /** {@code value} as the JSON the bridge answers with (a test and the serializers' round trip use it). */
    public static String json(Object value) {
        return new Json().open().value(value).close().toString();
    }

    // -------------------------------------------------------------- serializers

    static TypeSerializer<?> tupleSerializer(TypeSerializer<?> f0, TypeSerializer<?> f1) {
        if (TUPLE_SERIALIZER == null || TUPLE2 == null) {
            throw unavailable(TUPLE_SERIALIZER_CLASS);
        }
        try {
            return (TypeSerializer<?>) TUPLE_SERIALIZER.getConstructor(Class.class, TypeSerializer[].class)
                    .newInstance(TUPLE2, new TypeSerializer<?>[] {f0, f1});
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static TypeSerializer<?> windowSerializer() {
        if (TIME_WINDOW_SERIALIZER == null) {
            throw unavailable(TIME_WINDOW_CLASS + "$Serializer");
        }
        try {
            return (TypeSerializer<?>) TIME_WINDOW_SERIALIZER.getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static TypeSerializer<?> voidSerializer() {
        if (VOID_SERIALIZER == null) {
            throw unavailable(VOID_SERIALIZER_CLASS);
        }
        try {
            return (TypeSerializer<?>) VOID_SERIALIZER.getField("INSTANCE").get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The id of the serializer cowcheck.core.states.write_serializers hands write_state for
     * keys or namespaces like {@code o} (int for anything else, as Python's serializers_for).
     */
    static String serializerId(Object o) {
        if (o instanceof Long) {
            return "long";
        }
        if (o instanceof String) {
            return "string";
        }
        if (isTuple2(o)) {
            return "tuple2<int,string>";
        }
        if (isWindow(o)) {
            return "timewindow";
        }
        if (isVoid(o)) {
            return "void";
        }
        return "int";
    }
}
