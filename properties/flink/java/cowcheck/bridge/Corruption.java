package cowcheck.bridge;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;

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
            case "identity-keys":
                return new IdentityKeys();
            case "forget-snapshots":
                return new ForgetSnapshots();
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
    private static final Field KEY;

    static {
        try {
            Class<?> map = CopyOnWriteStateMap.class;
            PRIMARY_SIZE = writable(map, "primaryTableSize");
            HIGHEST_REQUIRED = writable(map, "highestRequiredSnapshotVersion");
            Class<?> entry = Class.forName(map.getName() + "$StateMapEntry");
            ENTRY_VERSION = writable(entry, "entryVersion");
            STATE_VERSION = writable(entry, "stateVersion");
            NEXT = writable(entry, "next");
            KEY = writable(entry, "key");
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

    /**
     * Before a put while a snapshot is live, the map forgets its live snapshots: the highest
     * required version drops to 0, so copy-on-write stops for the whole map (the keyed backend's
     * corruption: its hook calls this before every write of the task thread).
     */
    static final class ForgetSnapshots extends Corruption {
        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (op.startsWith("put") && required(map) != 0) {
                set(HIGHEST_REQUIRED, map, 0);
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

    /**
     * Whether a put's key triggers {@link Cycle} and {@link Halt}: its hashCode ends in the ten bits
     * of 31 (key 31 among small ints; about one key in a thousand of any family).
     */
    static boolean trigger(String op, Object key) {
        return op.startsWith("put") && key != null && (key.hashCode() & 1023) == 31;
    }

    /** A put of a trigger key (key 31...) links its entry to itself: the next walk of that chain never ends. */
    static final class Cycle extends Corruption {
        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (trigger(op, key)) {
                Object[] found = find(map, key, namespace);
                if (found != null) {
                    set(NEXT, found[0], found[0]);
                }
            }
        }
    }

    /** A put of a trigger key (key 31...) ends the JVM (and the process) on the spot. */
    static final class Halt extends Corruption {
        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            if (trigger(op, key)) {
                Runtime.getRuntime().halt(134);
            }
        }
    }

    /**
     * Keys compared with == (as a map written with identity comparison, or one that keeps keys
     * Integer.valueOf caches, would): during a keyed operation, every entry whose key and namespace
     * equal the call's but are other objects is hidden from Flink's lookup (its key is replaced by a
     * stand-in equal to nothing) and restored right after, so the call misses it: a get finds
     * nothing, a put inserts the key twice. Harmless while the caller hands the same objects
     * (hold_keys, or values both sides keep one object of); caught when keys are fresh objects.
     */
    static final class IdentityKeys extends Corruption {
        /** A hidden entry's key: equal only to itself, hashed as the original. */
        private static final class Hidden {
            final Object original;

            Hidden(Object original) {
                this.original = original;
            }

            @Override
            public int hashCode() {
                return original.hashCode();
            }

            @Override
            public boolean equals(Object other) {
                return other == this;
            }
        }

        private final List<Object> hidden = new ArrayList<>();
        private int hash;

        @Override
        void before(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            restore(map); // after an operation that raised, before its after() ran
            if (key == null || namespace == null || op.equals("snapshot") || op.equals("release")) {
                return;
            }
            hash = Checker.compositeHash(key, namespace, 0);
            for (Object[] table : new Object[][] {Internals.primaryTable(map), Internals.rehashTable(map)}) {
                if (table.length == 0) {
                    continue;
                }
                int n = 0;
                Object head = table[hash & (table.length - 1)];
                for (Object e = head; e != null && n < 1 << 20; e = Internals.next(e), n++) {
                    Object k = Internals.key(e);
                    Object ns = Internals.namespace(e);
                    if ((k != key || ns != namespace) && key.equals(k) && namespace.equals(ns)) {
                        set(KEY, e, new Hidden(k));
                        hidden.add(e);
                    }
                }
            }
        }

        @Override
        void after(CopyOnWriteStateMap<?, ?, ?> map, String op, Object key, Object namespace) {
            restore(map);
        }

        private void restore(CopyOnWriteStateMap<?, ?, ?> map) {
            if (hidden.isEmpty()) {
                return;
            }
            for (Object e : hidden) { // the entries hidden (a snapshot may still hold them)
                unhide(e);
            }
            hidden.clear();
            for (Object[] table : new Object[][] {Internals.primaryTable(map), Internals.rehashTable(map)}) {
                if (table.length == 0) {
                    continue;
                }
                int n = 0; // and the copies a rehash step made of them meanwhile
                Object head = table[hash & (table.length - 1)];
                for (Object e = head; e != null && n < 1 << 20; e = Internals.next(e), n++) {
                    unhide(e);
                }
            }
        }

        private static void unhide(Object e) {
            Object k = Internals.key(e);
            if (k instanceof Hidden) {
                set(KEY, e, ((Hidden) k).original);
            }
        }
    }
}
