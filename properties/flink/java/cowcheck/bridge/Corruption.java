package cowcheck.bridge;

import java.lang.reflect.Field;

import org.apache.flink.runtime.state.heap.CopyOnWriteStateMap;

/**
 * Seeded corruptions of Flink's real map, for testing the suite (docs/contract.md §16: a wrong map must fail
 * for the right reason): each one breaks the map through its private fields at a chosen point of
 * an operation. {@link MapHandle} (one Java call per operation) and {@link Walk} (a walk segment
 * per call) call the same hooks around the same Flink calls, so both paths see the same bug.
 * The names and what each is expected to break are listed in properties/flink/corruptions.py.
 *
 * <p>Unlike {@link Internals}, this class writes fields: only when a corruption was asked for.
 */
abstract class Corruption {
    static final Corruption NONE = new Corruption() {};

    static Corruption forName(String name) {
        if (name == null || name.isEmpty()) {
            return NONE;
        }
        switch (name) {
            case "mark-fresh":
                return new MarkFresh();
            case "misplace":
                return new Misplace();
            case "lose-size":
                return new LoseSize();
            case "stale-required":
                return new StaleRequired();
            case "cycle":
                return new Cycle();
            case "halt":
                return new Halt();
            default:
                throw new IllegalArgumentException("no corruption named " + name);
        }
    }

    /** Before the keyed operation {@code op} on (key, namespace). */
    void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {}

    /** After the operation {@code op} (key and namespace null for snapshot and release). */
    void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {}

    // ------------------------------------------------------------------ fields

    private static final Field PRIMARY_SIZE;
    private static final Field HIGHEST_REQUIRED;
    private static final Field ENTRY_VERSION;
    private static final Field STATE_VERSION;
    private static final Field NEXT;

    static {
        try {
            Class<?> map = CopyOnWriteStateMap.class;
            PRIMARY_SIZE = writable(map, "primaryTableSize");
            HIGHEST_REQUIRED = writable(map, "highestRequiredSnapshotVersion");
            Class<?> entry = Class.forName(map.getName() + "$StateMapEntry");
            ENTRY_VERSION = writable(entry, "entryVersion");
            STATE_VERSION = writable(entry, "stateVersion");
            NEXT = writable(entry, "next");
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static Field writable(Class<?> owner, String name) throws NoSuchFieldException {
        Field f = owner.getDeclaredField(name);
        f.setAccessible(true);
        return f;
    }

    static void set(Field f, Object owner, Object value) {
        try {
            f.set(owner, value);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The entry of (key, namespace) in the table that holds it now, with its table and bucket. */
    static Object[] find(CopyOnWriteStateMap<?, ?, ?> map, Object key, Object namespace) {
        int h = Checker.compositeHash(key, namespace, 0);
        for (Object[] table : new Object[][] {Internals.primaryTable(map), Internals.rehashTable(map)}) {
            if (table.length == 0) {
                continue;
            }
            int idx = h & (table.length - 1);
            Object prev = null;
            int n = 0;
            for (Object e = table[idx]; e != null && n < 1 << 20; prev = e, e = Internals.next(e), n++) {
                if (key.equals(Internals.key(e)) && namespace.equals(Internals.namespace(e))) {
                    return new Object[] {e, table, idx, prev};
                }
            }
        }
        return null;
    }

    private static int required(CopyOnWriteStateMap<?, ?, ?> map) {
        return Internals.summary(map)[8];
    }

    // ------------------------------------------------------------- corruptions

    /** Copy-on-write skipped: an entry shared with a live snapshot is marked as written after it. */
    static final class MarkFresh extends Corruption {
        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (required(map) == 0 || !(op.startsWith("get") || op.startsWith("put") || op.equals("transform"))) {
                return;
            }
            Object[] found = find(map, key, namespace);
            if (found != null) {
                int version = Internals.summary(map)[7];
                set(ENTRY_VERSION, found[0], version);
                set(STATE_VERSION, found[0], version);
            }
        }
    }

    /** A written entry is moved to the head of the next bucket of its table. */
    static final class Misplace extends Corruption {
        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (!(op.startsWith("put") || op.equals("transform"))) {
                return;
            }
            Object[] found = find(map, key, namespace);
            if (found == null) {
                return;
            }
            Object e = found[0];
            Object[] table = (Object[]) found[1];
            int idx = (Integer) found[2];
            Object prev = found[3];
            if (prev == null) {
                table[idx] = Internals.next(e);
            } else {
                set(NEXT, prev, Internals.next(e));
            }
            int other = (idx + 1) & (table.length - 1);
            set(NEXT, e, table[other]);
            table[other] = e;
        }
    }

    /** A remove that found its entry does not count it out of the table size. */
    static final class LoseSize extends Corruption {
        private boolean present;

        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            present = op.startsWith("remove") && find(map, key, namespace) != null;
        }

        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (present && op.startsWith("remove")) {
                present = false;
                int[] s = Internals.summary(map);
                set(PRIMARY_SIZE, map, s[2] + 1);
            }
        }
    }

    /** Releasing a snapshot forgets the other live ones: the highest required version drops to 0. */
    static final class StaleRequired extends Corruption {
        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (op.equals("release")) {
                set(HIGHEST_REQUIRED, map, 0);
            }
        }
    }

    /** A put of key 31 links its entry to itself: the next walk of that chain never ends. */
    static final class Cycle extends Corruption {
        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (op.startsWith("put") && Integer.valueOf(31).equals(key)) {
                Object[] found = find(map, key, namespace);
                if (found != null) {
                    set(NEXT, found[0], found[0]);
                }
            }
        }
    }

    /** A put of key 31 ends the JVM (and the process) on the spot. */
    static final class Halt extends Corruption {
        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (op.startsWith("put") && Integer.valueOf(31).equals(key)) {
                Runtime.getRuntime().halt(134);
            }
        }
    }
}
