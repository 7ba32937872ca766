package cowcheck.bridge;

import java.util.HashMap;

/**
 * The key and namespace objects one map is handed in a batch or a walk, as the map harness
 * (properties/map/harness.py) hands them and the call-by-call bridge turns them into Java objects
 * (properties/flink/convert.py, JavaKeys): a new object equal to the step's for every call, as
 * Flink's deserialized keys always are, until a {@code hold_keys} step; from then on one object per
 * value (a caller holding its keys). Values CPython keeps one object of ({@link Keys#pinned}) are
 * one object per value throughout, on both paths.
 */
final class KeyObjects {
    private final HashMap<Object, Object> interned = new HashMap<>();
    private boolean held;

    /** The hold_keys step: equal keys are the same object from now on. */
    void hold() {
        held = true;
    }

    /** The object the harness hands the map for a step's key or namespace {@code value}. */
    Object use(Object value) {
        return held || Keys.pinned(value) ? intern(value) : fresh(value);
    }

    /** The object for a value the harness hands back as the map gave it (a visited entry's key): new, unless pinned. */
    Object passed(Object value) {
        return Keys.pinned(value) ? intern(value) : fresh(value);
    }

    private Object intern(Object value) {
        Object o = interned.get(value);
        if (o == null) {
            o = fresh(value);
            interned.put(value, o);
        }
        return o;
    }

    /** A new object equal to {@code value}; a Tuple2's fields as {@link #passed} (Python's fresh()). */
    private Object fresh(Object value) {
        if (Keys.isTuple2(value)) {
            return Keys.tuple2(passed(Keys.f0(value)), passed(Keys.f1(value)));
        }
        return Keys.copy(value);
    }
}
