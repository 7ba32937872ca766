package cowcheck.bridge;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Set;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMap;
import org.apache.flink.runtime.state.heap.CopyOnWriteStateMapSnapshot;

/**
 * Read-only access to CopyOnWriteStateMap's private fields, its entries and snapshots (white-box
 * introspection), plus its package-private constructor. Reflection works without --add-opens
 * because this class and flink-dist sit on the class path, in the same unnamed module.
 *
 * <p>Nothing here writes a field: the map's behaviour stays Flink's own.
 */
final class Internals {
    private static final Constructor<?> MAP_CONSTRUCTOR;
    private static final Field PRIMARY_TABLE;
    private static final Field REHASH_TABLE;
    private static final Field PRIMARY_SIZE;
    private static final Field REHASH_SIZE;
    private static final Field REHASH_INDEX;
    private static final Field THRESHOLD;
    private static final Field MOD_COUNT;
    private static final Field STATE_MAP_VERSION;
    private static final Field HIGHEST_REQUIRED;
    private static final Field SNAPSHOT_VERSIONS;
    private static final Object EMPTY_TABLE;

    private static final Field KEY;
    private static final Field NAMESPACE;
    private static final Field STATE;
    private static final Field NEXT;
    private static final Field ENTRY_VERSION;
    private static final Field STATE_VERSION;
    private static final Field HASH;

    private static final Field SNAPSHOT_DATA;
    private static final Field SNAPSHOT_VERSION;
    private static final Field SNAPSHOT_ENTRY_COUNT;


    static {
        try {
            Class<?> map = CopyOnWriteStateMap.class;
            MAP_CONSTRUCTOR = map.getDeclaredConstructor(TypeSerializer.class);
            MAP_CONSTRUCTOR.setAccessible(true);
            PRIMARY_TABLE = field(map, "primaryTable");
            REHASH_TABLE = field(map, "incrementalRehashTable");
            PRIMARY_SIZE = field(map, "primaryTableSize");
            REHASH_SIZE = field(map, "incrementalRehashTableSize");
            REHASH_INDEX = field(map, "rehashIndex");
            THRESHOLD = field(map, "threshold");
            MOD_COUNT = field(map, "modCount");
            STATE_MAP_VERSION = field(map, "stateMapVersion");
            HIGHEST_REQUIRED = field(map, "highestRequiredSnapshotVersion");
            SNAPSHOT_VERSIONS = field(map, "snapshotVersions");
            EMPTY_TABLE = field(map, "EMPTY_TABLE").get(null);

            Class<?> entry = Class.forName(map.getName() + "$StateMapEntry");
            KEY = field(entry, "key");
            NAMESPACE = field(entry, "namespace");
            STATE = field(entry, "state");
            NEXT = field(entry, "next");
            ENTRY_VERSION = field(entry, "entryVersion");
            STATE_VERSION = field(entry, "stateVersion");
            HASH = field(entry, "hash");

            Class<?> snapshot = CopyOnWriteStateMapSnapshot.class;
            SNAPSHOT_DATA = field(snapshot, "snapshotData");
            SNAPSHOT_VERSION = field(snapshot, "snapshotVersion");
            SNAPSHOT_ENTRY_COUNT = field(snapshot, "numberOfEntriesInSnapshotData");
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(
                    "cowcheck bridge: Flink's CopyOnWriteStateMap does not have the fields this bridge "
                            + "was written against (Flink 2.3.0): " + e);
        }
    }

    private Internals() {}

    private static Field field(Class<?> owner, String name) throws NoSuchFieldException {
        Field f = owner.getDeclaredField(name);
        f.setAccessible(true);
        return f;
    }

    /** A new map through Flink's own constructor (initial capacity DEFAULT_CAPACITY = 128). */
    @SuppressWarnings("unchecked")
    static <S> CopyOnWriteStateMap<Object, Object, S> newMap(TypeSerializer<S> stateSerializer) {
        try {
            return (CopyOnWriteStateMap<Object, Object, S>) MAP_CONSTRUCTOR.newInstance(stateSerializer);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot construct CopyOnWriteStateMap", e);
        }
    }

    private static Object get(Field f, Object o) {
        try {
            return f.get(o);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private static int getInt(Field f, Object o) {
        try {
            return f.getInt(o);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    static Object[] primaryTable(Object map) {
        return (Object[]) get(PRIMARY_TABLE, map);
    }

    static Object[] rehashTable(Object map) {
        return (Object[]) get(REHASH_TABLE, map);
    }

    static boolean isRehashing(Object map) {
        return get(REHASH_TABLE, map) != EMPTY_TABLE;
    }

    /** primaryLen, rehashLen, primarySize, rehashSize, rehashIndex, threshold, modCount, V, R. */
    static int[] summary(Object map) {
        return new int[] {
            primaryTable(map).length,
            rehashTable(map).length,
            getInt(PRIMARY_SIZE, map),
            getInt(REHASH_SIZE, map),
            getInt(REHASH_INDEX, map),
            getInt(THRESHOLD, map),
            getInt(MOD_COUNT, map),
            getInt(STATE_MAP_VERSION, map),
            getInt(HIGHEST_REQUIRED, map),
        };
    }

    static int modCount(Object map) {
        return getInt(MOD_COUNT, map);
    }

    @SuppressWarnings("unchecked")
    static Set<Integer> snapshotVersions(Object map) {
        return (Set<Integer>) get(SNAPSHOT_VERSIONS, map);
    }

    static Object key(Object entry) {
        return get(KEY, entry);
    }

    static Object namespace(Object entry) {
        return get(NAMESPACE, entry);
    }

    static Object state(Object entry) {
        return get(STATE, entry);
    }

    static Object next(Object entry) {
        return get(NEXT, entry);
    }

    static int entryVersion(Object entry) {
        return getInt(ENTRY_VERSION, entry);
    }

    static int stateVersion(Object entry) {
        return getInt(STATE_VERSION, entry);
    }

    static int hash(Object entry) {
        return getInt(HASH, entry);
    }

    /** The snapshot's flattened bucket heads (its own array: read, never written). */
    static Object[] snapshotData(Object snapshot) {
        return (Object[]) get(SNAPSHOT_DATA, snapshot);
    }

    static int snapshotVersion(Object snapshot) {
        return getInt(SNAPSHOT_VERSION, snapshot);
    }

    /** The entry count the snapshot saved when it was taken. */
    static int snapshotEntryCount(Object snapshot) {
        return getInt(SNAPSHOT_ENTRY_COUNT, snapshot);
    }

    /** {@code size()} of a snapshot iterator (declared by package-private classes). */
    static int iteratorSize(Object iterator) {
        try {
            Method size = iterator.getClass().getDeclaredMethod("size");
            size.setAccessible(true);
            return (int) size.invoke(iterator);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@code expectedModCount} of a live StateEntryIterator (for the error message). */
    static int expectedModCount(Object iterator) {
        try {
            Field f = iterator.getClass().getDeclaredField("expectedModCount");
            f.setAccessible(true);
            return f.getInt(iterator);
        } catch (ReflectiveOperationException e) {
            return -1;
        }
    }
}
